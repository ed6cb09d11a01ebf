//! The `orders` table on DynamoDB, and the `available`/`sold` counters of
//! the `sales` table that order writes move.
//!
//! Item: `orderId` (key), `saleId`, `userId`, `quantity`, `status`,
//! `createdAt`, `expiresAt`, `reservedAt`, `shard`, and `pendingSaleId`
//! only while `PENDING_PAYMENT` (the sparse `pendingByExpiry` index), plus
//! `paidAt` / `expiredAt` / `rejectedAt` when those happen.

use crate::clock;
use crate::domain::{OrderId, Quantity, SaleId, UserId};
use crate::orders::{
    ExpireOutcome, GroupWrite, NewOrder, Order, OrderStatus, OrderStore, OrderStoreError,
    PayOutcome, SingleWrite,
};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

type Item = HashMap<String, AttributeValue>;

/// Write requests sent, for `make bench` (writes per order) and the logs.
#[derive(Debug, Default)]
pub struct WriteCounters {
    /// TransactWriteItems / PutItem / UpdateItem calls.
    pub write_requests: AtomicU64,
    /// Updates of a sale item (the hot partition), successful or not.
    pub sale_item_updates: AtomicU64,
}

#[derive(Clone)]
pub struct DynamoOrders {
    client: Client,
    orders_table: String,
    sales_table: String,
    pub counters: Arc<WriteCounters>,
}

impl DynamoOrders {
    pub fn new(
        client: Client,
        orders_table: impl Into<String>,
        sales_table: impl Into<String>,
    ) -> Self {
        Self {
            client,
            orders_table: orders_table.into(),
            sales_table: sales_table.into(),
            counters: Arc::default(),
        }
    }

    fn count(&self, sale_updates: u64) {
        self.counters.write_requests.fetch_add(1, Ordering::Relaxed);
        self.counters
            .sale_item_updates
            .fetch_add(sale_updates, Ordering::Relaxed);
    }

    fn put_order(&self, order: &NewOrder) -> Result<TransactWriteItem, OrderStoreError> {
        let put = Put::builder()
            .table_name(&self.orders_table)
            .set_item(Some(order_item(order, OrderStatus::PendingPayment)))
            .condition_expression("attribute_not_exists(orderId)")
            .build()
            .map_err(transient)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    fn take_units(
        &self,
        sale_id: &SaleId,
        units: u64,
    ) -> Result<TransactWriteItem, OrderStoreError> {
        let update = Update::builder()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .update_expression("SET available = available - :q, sold = sold + :q")
            .condition_expression("attribute_exists(saleId) AND available >= :q")
            .expression_attribute_values(":q", AttributeValue::N(units.to_string()))
            .build()
            .map_err(transient)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    async fn sale_exists(&self, sale_id: &SaleId) -> Result<bool, OrderStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .projection_expression("saleId")
            .consistent_read(true)
            .send()
            .await
            .map_err(transient)?;
        Ok(out.item.is_some())
    }
}

impl DynamoOrders {
    /// A query of the `bySaleStatus` index for one sale and status.
    fn by_sale_status(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.orders_table)
            .index_name("bySaleStatus")
            .key_condition_expression("saleId = :sale AND #s = :status")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string()))
            .expression_attribute_values(":status", AttributeValue::S(status.as_str().into()))
    }

    /// Orders of a sale in one status (the `bySaleStatus` index), all pages.
    pub async fn orders_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> Result<Vec<Order>, OrderStoreError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .by_sale_status(sale_id, status)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(transient)?;
            for item in page.items() {
                out.push(order_from_item(item)?);
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(out),
            }
        }
    }

    /// How many orders of a sale are in one status: the `bySaleStatus`
    /// index with `Select=COUNT`, all pages (eventually consistent, like any
    /// index read). The cheapest correct source: the sale item keeps only
    /// `available` and `sold` (units, pending and paid together), and
    /// per-status counters there would add a write to the hot sale item on
    /// every payment and expiry. DynamoDB still reads the entries (read units
    /// by their size: about 0.05 per order, eventually consistent) but sends
    /// none back.
    pub async fn count_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> Result<u64, OrderStoreError> {
        let mut count = 0u64;
        let mut start = None;
        loop {
            let page = self
                .by_sale_status(sale_id, status)
                .select(aws_sdk_dynamodb::types::Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(transient)?;
            count += u64::try_from(page.count).unwrap_or(0);
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(count),
            }
        }
    }

    /// Up to `limit` orders of a sale still `PENDING_PAYMENT` whose payment
    /// window closed at or before `now` (the sparse `pendingByExpiry` index).
    pub async fn due_unpaid(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        limit: i32,
    ) -> Result<Vec<OrderId>, OrderStoreError> {
        let page = self
            .client
            .query()
            .table_name(&self.orders_table)
            .index_name("pendingByExpiry")
            .key_condition_expression("pendingSaleId = :sale AND expiresAt <= :now")
            .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string()))
            .expression_attribute_values(":now", AttributeValue::S(clock::rfc3339_ms(now_ms)))
            .limit(limit)
            .send()
            .await
            .map_err(transient)?;
        page.items()
            .iter()
            .map(|item| match item.get("orderId") {
                Some(AttributeValue::S(id)) => {
                    OrderId::parse(id).map_err(|e| OrderStoreError::Malformed(e.0))
                }
                _ => Err(OrderStoreError::Malformed("orderId missing".into())),
            })
            .collect()
    }
}

/// Codes of a cancelled transaction, or the error for any other failure.
fn cancellation(
    err: SdkError<TransactWriteItemsError, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> Result<Vec<String>, OrderStoreError> {
    match err.into_service_error() {
        TransactWriteItemsError::TransactionCanceledException(e) => Ok(e
            .cancellation_reasons()
            .iter()
            .map(|r| r.code().unwrap_or("None").to_owned())
            .collect()),
        // Same token, other parameters: a retry of a batch whose items
        // changed. Safe to treat as cancelled and fall back to single writes.
        TransactWriteItemsError::IdempotentParameterMismatchException(_) => {
            Ok(vec!["IdempotentParameterMismatch".into()])
        }
        other => Err(OrderStoreError::Transient(
            DisplayErrorContext(other).to_string(),
        )),
    }
}

impl OrderStore for DynamoOrders {
    async fn write_group(
        &self,
        sale_id: &SaleId,
        orders: &[NewOrder],
        request_token: &str,
    ) -> Result<GroupWrite, OrderStoreError> {
        let total: u64 = orders
            .iter()
            .map(|o| u64::from(o.message.quantity.get()))
            .sum();
        let mut items = orders
            .iter()
            .map(|o| self.put_order(o))
            .collect::<Result<Vec<_>, _>>()?;
        items.push(self.take_units(sale_id, total)?);
        self.count(1);
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .client_request_token(request_token)
            .send()
            .await;
        match result {
            Ok(_) => Ok(GroupWrite::Written),
            Err(err) => Ok(GroupWrite::Cancelled(cancellation(err)?)),
        }
    }

    async fn write_single(&self, order: &NewOrder) -> Result<SingleWrite, OrderStoreError> {
        let sale_id = &order.message.sale_id;
        let items = vec![
            self.put_order(order)?,
            self.take_units(sale_id, u64::from(order.message.quantity.get()))?,
        ];
        self.count(1);
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let reasons = match result {
            Ok(_) => return Ok(SingleWrite::Written),
            Err(err) => cancellation(err)?,
        };
        let failed = |i: usize| {
            reasons
                .get(i)
                .is_some_and(|c| c == "ConditionalCheckFailed")
        };
        if failed(0) {
            Ok(SingleWrite::Duplicate)
        } else if failed(1) {
            if self.sale_exists(sale_id).await? {
                Ok(SingleWrite::NoStock)
            } else {
                Err(OrderStoreError::SaleMissing(sale_id.clone()))
            }
        } else {
            Err(OrderStoreError::Transient(format!(
                "transaction cancelled: {reasons:?}"
            )))
        }
    }

    async fn write_rejected(&self, order: &NewOrder) -> Result<(), OrderStoreError> {
        let mut item = order_item(order, OrderStatus::Rejected);
        item.remove("expiresAt");
        item.insert(
            "rejectedAt".into(),
            AttributeValue::S(clock::rfc3339_ms(clock::now_ms())),
        );
        self.count(0);
        let result = self
            .client
            .put_item()
            .table_name(&self.orders_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(orderId)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(err) => Err(transient(err)),
        }
    }

    async fn get(&self, order_id: &OrderId) -> Result<Option<Order>, OrderStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order_id.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(transient)?;
        out.item.as_ref().map(order_from_item).transpose()
    }

    async fn pay(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<PayOutcome, OrderStoreError> {
        self.count(0);
        let result = self
            .client
            .update_item()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order_id.to_string()))
            .update_expression("SET #s = :paid, paidAt = :now REMOVE pendingSaleId")
            .condition_expression("#s = :pending AND expiresAt > :now AND userId = :user")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":paid", AttributeValue::S("PAID".into()))
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .expression_attribute_values(":now", AttributeValue::S(clock::rfc3339_ms(now_ms)))
            .expression_attribute_values(":user", AttributeValue::S(user_id.to_string()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        match result {
            Ok(out) => match out.attributes {
                Some(item) => Ok(PayOutcome::Paid(order_from_item(&item)?)),
                None => Err(OrderStoreError::Malformed("no attributes returned".into())),
            },
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                // Why not: read it back and say which.
                let Some(order) = self.get(order_id).await? else {
                    return Ok(PayOutcome::NotFound);
                };
                if &order.user_id != user_id {
                    return Ok(PayOutcome::NotFound);
                }
                Ok(match order.status {
                    OrderStatus::Paid => PayOutcome::AlreadyPaid(order),
                    OrderStatus::Expired | OrderStatus::PendingPayment => PayOutcome::Expired,
                    other => PayOutcome::NotPayable(other),
                })
            }
            Err(err) => Err(transient(err)),
        }
    }

    async fn expire(
        &self,
        order_id: &OrderId,
        now_ms: i64,
    ) -> Result<ExpireOutcome, OrderStoreError> {
        let Some(order) = self.get(order_id).await? else {
            return Ok(ExpireOutcome::NotFound);
        };
        let due = order.expires_at_ms.is_some_and(|at| at <= now_ms);
        if order.status != OrderStatus::PendingPayment || !due {
            return Ok(ExpireOutcome::NotExpirable);
        }
        let now = clock::rfc3339_ms(now_ms);
        let mark = Update::builder()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order_id.to_string()))
            .update_expression("SET #s = :expired, expiredAt = :now REMOVE pendingSaleId")
            .condition_expression("#s = :pending AND expiresAt <= :now")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":expired", AttributeValue::S("EXPIRED".into()))
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .expression_attribute_values(":now", AttributeValue::S(now))
            .build()
            .map_err(transient)?;
        let give_back = Update::builder()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(order.sale_id.to_string()))
            .update_expression("SET available = available + :q, sold = sold - :q")
            .condition_expression("attribute_exists(saleId) AND sold >= :q")
            .expression_attribute_values(":q", AttributeValue::N(order.quantity.get().to_string()))
            .build()
            .map_err(transient)?;
        self.count(1);
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(mark).build())
            .transact_items(TransactWriteItem::builder().update(give_back).build())
            .send()
            .await;
        match result {
            Ok(_) => Ok(ExpireOutcome::Expired(Order {
                status: OrderStatus::Expired,
                ..order
            })),
            Err(err) => {
                let reasons = cancellation(err)?;
                if reasons
                    .first()
                    .is_some_and(|c| c == "ConditionalCheckFailed")
                {
                    Ok(ExpireOutcome::NotExpirable)
                } else if reasons
                    .get(1)
                    .is_some_and(|c| c == "ConditionalCheckFailed")
                {
                    Err(OrderStoreError::SaleMissing(order.sale_id))
                } else {
                    Err(OrderStoreError::Transient(format!(
                        "expiry cancelled: {reasons:?}"
                    )))
                }
            }
        }
    }
}

fn transient(err: impl std::error::Error + Send + Sync + 'static) -> OrderStoreError {
    OrderStoreError::Transient(DisplayErrorContext(err).to_string())
}

pub fn order_item(order: &NewOrder, status: OrderStatus) -> Item {
    let m = &order.message;
    let mut item: Item = HashMap::from([
        ("orderId".into(), AttributeValue::S(m.order_id.to_string())),
        ("saleId".into(), AttributeValue::S(m.sale_id.to_string())),
        ("userId".into(), AttributeValue::S(m.user_id.to_string())),
        (
            "quantity".into(),
            AttributeValue::N(m.quantity.get().to_string()),
        ),
        ("status".into(), AttributeValue::S(status.as_str().into())),
        (
            "createdAt".into(),
            AttributeValue::S(clock::rfc3339_ms(order.created_at_ms)),
        ),
        (
            "expiresAt".into(),
            AttributeValue::S(clock::rfc3339_ms(order.expires_at_ms)),
        ),
        (
            "reservedAt".into(),
            AttributeValue::S(m.reserved_at.clone()),
        ),
        ("shard".into(), AttributeValue::N(m.shard.to_string())),
    ]);
    if status == OrderStatus::PendingPayment {
        item.insert(
            "pendingSaleId".into(),
            AttributeValue::S(m.sale_id.to_string()),
        );
    }
    item
}

pub fn order_from_item(item: &Item) -> Result<Order, OrderStoreError> {
    let bad = |what: &str| OrderStoreError::Malformed(format!("{what} missing or invalid"));
    let s = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.as_str()),
        _ => Err(bad(name)),
    };
    let time = |name: &str| s(name).ok().and_then(clock::parse_rfc3339_ms);
    let quantity = match item.get("quantity") {
        Some(AttributeValue::N(n)) => n
            .parse::<u64>()
            .ok()
            .and_then(|q| Quantity::new(q).ok())
            .ok_or_else(|| bad("quantity"))?,
        _ => return Err(bad("quantity")),
    };
    let status = OrderStatus::parse(s("status")?).ok_or_else(|| bad("status"))?;
    Ok(Order {
        order_id: OrderId::parse(s("orderId")?).map_err(|_| bad("orderId"))?,
        sale_id: SaleId::parse(s("saleId")?).map_err(|_| bad("saleId"))?,
        user_id: UserId::parse(s("userId")?).map_err(|_| bad("userId"))?,
        quantity,
        status,
        created_at_ms: time("createdAt").ok_or_else(|| bad("createdAt"))?,
        expires_at_ms: if status == OrderStatus::Rejected {
            None
        } else {
            time("expiresAt")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OrderMessage;

    #[test]
    fn pending_items_are_in_the_sparse_index_and_round_trip() {
        let message = OrderMessage {
            v: 1,
            order_id: OrderId::parse("o1").unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse("u1").unwrap(),
            quantity: Quantity::new(2).unwrap(),
            shard: 0,
            reserved_at: clock::rfc3339_ms(1_000_000),
        };
        let order = NewOrder::new(message, 1_000_000, 900);
        let item = order_item(&order, OrderStatus::PendingPayment);
        assert!(item.contains_key("pendingSaleId"));
        let back = order_from_item(&item).unwrap();
        assert_eq!(back.expires_at_ms, Some(1_900_000));
        assert_eq!(back.status, OrderStatus::PendingPayment);
        assert!(!order_item(&order, OrderStatus::Rejected).contains_key("pendingSaleId"));
    }
}
