//! What a test reads back from an [`App`]'s stores: a sale's Redis keys,
//! its item's counters, the orders table, and the invariant checker's
//! verdict.

use crate::app::App;
use redis::AsyncCommands;
use seckill_shared::adapters::redis::{SaleKeys, StoredReservation};
use seckill_shared::domain::SaleId;
use std::collections::{BTreeMap, HashMap};

impl App {
    /// Everything Redis holds for a sale, to prove that bad input changed nothing.
    pub async fn snapshot(&self, sale: &str) -> BTreeMap<String, String> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        let mut conn = self.redis.clone();
        let mut out = BTreeMap::new();
        let stock: Option<String> = conn.get(&keys.stock).await.unwrap();
        out.insert("stock".into(), format!("{stock:?}"));
        for (name, key) in [
            ("meta", &keys.meta),
            ("buyers", &keys.buyers),
            ("resv", &keys.resv),
            ("userorders", &keys.user_orders),
        ] {
            let all: BTreeMap<String, String> = conn.hgetall(key).await.unwrap();
            out.insert(name.into(), format!("{all:?}"));
        }
        out
    }

    pub async fn stock(&self, sale: &str) -> Option<i64> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        self.redis.clone().get(&keys.stock).await.unwrap()
    }

    pub async fn reservations(&self, sale: &str) -> HashMap<String, StoredReservation> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        let all: HashMap<String, String> = self.redis.clone().hgetall(&keys.resv).await.unwrap();
        all.into_iter()
            .map(|(k, v)| (k, serde_json::from_str(&v).unwrap()))
            .collect()
    }

    pub async fn buyers(&self, sale: &str) -> HashMap<String, i64> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        self.redis.clone().hgetall(&keys.buyers).await.unwrap()
    }

    /// `available` and `sold` of the sale item.
    pub async fn sale_counters(&self, sale: &str) -> (i64, i64) {
        self.try_sale_counters(sale).await.unwrap()
    }

    /// [`App::sale_counters`] for a poll: a read the busy emulator did not
    /// answer within the client's timeout is an error to try again, not a
    /// verdict (a wrong item still panics).
    pub async fn try_sale_counters(
        &self,
        sale: &str,
    ) -> Result<(i64, i64), aws_sdk_dynamodb::error::SdkError<impl std::error::Error>> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let item = self
            .db
            .get_item()
            .table_name(&self.config.sales_table)
            .key("saleId", AttributeValue::S(sale.into()))
            .consistent_read(true)
            .send()
            .await?
            .item
            .unwrap();
        let n = |name: &str| match item.get(name) {
            Some(AttributeValue::N(v)) => v.parse::<i64>().unwrap(),
            other => panic!("{name}: {other:?}"),
        };
        Ok((n("available"), n("sold")))
    }

    /// Every order item of this test's table, by order id.
    pub async fn orders(&self) -> HashMap<String, seckill_shared::domain::orders::Order> {
        order_items(&self.db, &self.config.orders_table)
            .await
            .iter()
            .map(|item| {
                let order =
                    seckill_shared::adapters::dynamo::orders::order_from_item(item).unwrap();
                (order.order_id.to_string(), order)
            })
            .collect()
    }
}

/// Every order item of an orders table as stored, read consistently; the
/// ledger record the table also holds per buyer is left out.
pub async fn order_items(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    let items: Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> = db
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<_, _>>()
        .await
        .unwrap();
    items
        .into_iter()
        .filter(seckill_shared::adapters::dynamo::orders::is_order_item)
        .collect()
}

/// Asserts the invariant checker finds nothing wrong with `sale`,
/// `accepted` being every order id a buyer was answered `202` for.
pub async fn assert_clean(
    checker: &seckill_shared::wire::LiveChecker,
    sale: &str,
    accepted: &[String],
) {
    let accepted: Vec<seckill_shared::domain::OrderId> = accepted
        .iter()
        .map(|o| seckill_shared::domain::OrderId::parse(o).unwrap())
        .collect();
    let violations = checker
        .check_sale(&SaleId::parse(sale).unwrap(), &accepted)
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(violations, vec![], "the invariant checker on {sale}");
}
