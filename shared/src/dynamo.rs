//! The sale catalog on DynamoDB: one item per sale in the `sales` table.
//!
//! Item shape: `saleId` (key), `name`, `totalStock`, `startAt`, `endAt`
//! (RFC 3339 UTC), `perUserLimit`, `paymentWindowSeconds`, `shards`, `gate`,
//! and the counters `available` and `sold`, which only conditional updates
//! change (`available >= :q`).

use crate::clock;
use crate::domain::{Sale, SaleId};
use crate::ports::{CatalogError, SaleCatalog};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

#[derive(Clone)]
pub struct DynamoCatalog {
    client: Client,
    table: String,
}

impl DynamoCatalog {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// Creates the sale item if it does not exist; returns false when it did
    /// (its counters are never reset by a second create).
    pub async fn create_sale(&self, sale: &Sale) -> Result<bool, CatalogError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(sale_to_item(sale)))
            .condition_expression("attribute_not_exists(saleId)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(CatalogError::Unavailable(
                aws_sdk_dynamodb::error::DisplayErrorContext(err).to_string(),
            )),
        }
    }
}

impl SaleCatalog for DynamoCatalog {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .send()
            .await
            .map_err(|e| {
                CatalogError::Unavailable(
                    aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
                )
            })?;
        out.item.map(|item| sale_from_item(&item)).transpose()
    }

    async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
        let mut sales = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| {
                    CatalogError::Unavailable(
                        aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string(),
                    )
                })?;
            for item in out.items() {
                match sale_from_item(item) {
                    Ok(sale) => sales.push(sale),
                    Err(err) => tracing::warn!(%err, "skipping a malformed sale item"),
                }
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(sales),
            }
        }
    }
}

pub fn sale_to_item(sale: &Sale) -> Item {
    let n = |v: u32| AttributeValue::N(v.to_string());
    HashMap::from([
        ("saleId".into(), AttributeValue::S(sale.sale_id.to_string())),
        ("name".into(), AttributeValue::S(sale.name.clone())),
        ("totalStock".into(), n(sale.total_stock)),
        (
            "startAt".into(),
            AttributeValue::S(clock::rfc3339_ms(sale.start_ms)),
        ),
        (
            "endAt".into(),
            AttributeValue::S(clock::rfc3339_ms(sale.end_ms)),
        ),
        ("perUserLimit".into(), n(sale.per_user_limit)),
        (
            "paymentWindowSeconds".into(),
            n(sale.payment_window_seconds),
        ),
        ("shards".into(), n(sale.shards)),
        ("gate".into(), AttributeValue::Bool(sale.gate)),
        ("available".into(), n(sale.total_stock)),
        ("sold".into(), n(0)),
        ("version".into(), n(1)),
    ])
}

pub fn sale_from_item(item: &Item) -> Result<Sale, CatalogError> {
    let s = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.as_str()),
        _ => Err(CatalogError::Malformed(format!(
            "{name} missing or not a string"
        ))),
    };
    let n = |name: &str| match item.get(name) {
        Some(AttributeValue::N(v)) => v
            .parse::<u32>()
            .map_err(|_| CatalogError::Malformed(format!("{name} is not a count"))),
        _ => Err(CatalogError::Malformed(format!(
            "{name} missing or not a number"
        ))),
    };
    let time = |name: &str| {
        clock::parse_rfc3339_ms(s(name)?)
            .ok_or_else(|| CatalogError::Malformed(format!("{name} is not RFC 3339")))
    };
    Ok(Sale {
        sale_id: SaleId::parse(s("saleId")?).map_err(|e| CatalogError::Malformed(e.0))?,
        name: s("name")?.to_owned(),
        total_stock: n("totalStock")?,
        start_ms: time("startAt")?,
        end_ms: time("endAt")?,
        per_user_limit: n("perUserLimit")?,
        payment_window_seconds: n("paymentWindowSeconds")?,
        shards: n("shards")?,
        gate: matches!(item.get("gate"), Some(AttributeValue::Bool(true))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_round_trip() {
        let sale = Sale {
            sale_id: SaleId::parse("s-1").unwrap(),
            name: "Lamp".into(),
            total_stock: 1000,
            start_ms: 1_764_471_962_000,
            end_ms: 1_764_475_562_000,
            per_user_limit: 2,
            payment_window_seconds: 900,
            shards: 1,
            gate: false,
        };
        let item = sale_to_item(&sale);
        assert_eq!(sale_from_item(&item).unwrap(), sale);
        let mut broken = item.clone();
        broken.insert("totalStock".into(), AttributeValue::S("ten".into()));
        assert!(sale_from_item(&broken).is_err());
    }
}
