//! The `orders` table on DynamoDB, the per-buyer records it also holds,
//! and the `available`/`sold`/`returnSeq` counters of the `sales` table that
//! order writes move. This is the ledger: Redis is derived from it.
//!
//! Order item ([`order_item`], in [`crate::adapters::dynamo::order_index`] with the reads by
//! sale): `orderId` (key), `saleId`, `userId`, `quantity`, `status`,
//! `createdAt`, `expiresAt`, `reservedAt`, `shard`, `saleBucket` (the
//! `bySaleBucketStatus` index), and `pendingSaleId` / `pendingBucket` only
//! while `PENDING_PAYMENT` (the sparse `pendingBucketByExpiry` index), plus
//! `paidAt` / `expiredAt` (with the `returnSeq` of the expiry) /
//! `rejectedAt` (with `rejectReason`) when those happen.
//!
//! Buyer item, one per (sale, buyer): `orderId` = `buyer#<saleId>#<userId>`
//! (no order id has a `#`, and a sale id has none either, so the key is
//! unambiguous whatever the user id holds), `buyerSaleId`, `buyerUserId`,
//! `held` (units in `PENDING_PAYMENT` or `PAID` orders). It has no
//! `saleBucket`/`pendingBucket`/`userId`, so it is in no index. `held`
//! changes only in the transaction that writes an order (condition:
//! `held + q <= perUserLimit`) or expires one: the per-user limit holds in
//! the ledger even when Redis lost count.

pub use crate::adapters::dynamo::order_index::{order_from_item, order_item};
use crate::clock;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{
    ExpireOutcome, GroupWrite, OrderStore, OrderStoreError, PayOutcome, RejectWrite, SingleWrite,
    only_contention,
};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use std::collections::{BTreeMap, HashMap};
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
    /// Items written by those requests (orders, buyer records, sale items).
    pub items_written: AtomicU64,
}

/// The key of a buyer's record in the `orders` table.
pub fn buyer_key(sale_id: &SaleId, user_id: &UserId) -> String {
    format!("buyer#{sale_id}#{user_id}")
}

/// Whether an item of the `orders` table is a buyer record, not an order.
pub fn is_buyer_item(item: &Item) -> bool {
    matches!(item.get("orderId"), Some(AttributeValue::S(k)) if k.starts_with("buyer#"))
}

/// Whether an item of the `orders` table is an order: not a buyer record,
/// nor a payment record (`payment#<paymentId>`, see
/// [`crate::adapters::dynamo::payments`]). Order ids hold no `#`.
pub fn is_order_item(item: &Item) -> bool {
    matches!(item.get("orderId"), Some(AttributeValue::S(k)) if !k.contains('#'))
}

/// Attempts of an expiry whose ledger position another expiry took first,
/// or that met a writer's transaction on the sale item.
const EXPIRE_ATTEMPTS: u32 = 8;

#[derive(Clone)]
pub struct DynamoOrders {
    pub(crate) client: Client,
    pub(crate) orders_table: String,
    pub(super) sales_table: String,
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

    pub(crate) fn count(&self, sale_updates: u64, items: usize) {
        self.counters.write_requests.fetch_add(1, Ordering::Relaxed);
        self.counters
            .sale_item_updates
            .fetch_add(sale_updates, Ordering::Relaxed);
        self.counters
            .items_written
            .fetch_add(u64::try_from(items).unwrap_or(0), Ordering::Relaxed);
    }

    fn put_order(&self, order: &NewOrder) -> Result<TransactWriteItem, OrderStoreError> {
        let put = Put::builder()
            .table_name(&self.orders_table)
            .set_item(Some(order_item(order, OrderStatus::PendingPayment, None)))
            .condition_expression("attribute_not_exists(orderId)")
            .build()
            .map_err(transient)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Adds `units` to a buyer's record, on condition that it stays within
    /// `limit`; `None` when `units` alone exceed it.
    pub(super) fn add_to_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        units: u64,
        limit: u32,
    ) -> Result<Option<TransactWriteItem>, OrderStoreError> {
        let Some(room) = u64::from(limit).checked_sub(units) else {
            return Ok(None);
        };
        let update = Update::builder()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(buyer_key(sale_id, user_id)))
            .update_expression(
                "SET held = if_not_exists(held, :zero) + :q, buyerSaleId = :sale, buyerUserId = :user",
            )
            .condition_expression("attribute_not_exists(held) OR held <= :room")
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .expression_attribute_values(":q", AttributeValue::N(units.to_string()))
            .expression_attribute_values(":room", AttributeValue::N(room.to_string()))
            .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string()))
            .expression_attribute_values(":user", AttributeValue::S(user_id.to_string()))
            .build()
            .map_err(transient)?;
        Ok(Some(TransactWriteItem::builder().update(update).build()))
    }

    /// Takes `units` off a buyer's record (an expiry). A record that does not
    /// exist (orders written before records were kept) is left at zero.
    pub(super) fn take_from_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        units: u64,
    ) -> Result<TransactWriteItem, OrderStoreError> {
        let update = Update::builder()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(buyer_key(sale_id, user_id)))
            .update_expression(
                "SET held = if_not_exists(held, :q) - :q, buyerSaleId = :sale, buyerUserId = :user",
            )
            .condition_expression("attribute_not_exists(held) OR held >= :q")
            .expression_attribute_values(":q", AttributeValue::N(units.to_string()))
            .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string()))
            .expression_attribute_values(":user", AttributeValue::S(user_id.to_string()))
            .build()
            .map_err(transient)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The items of the `orders` table under `keys` that exist: consistent
    /// `BatchGetItem`s of 100 keys, unprocessed keys asked again.
    pub(super) async fn read_all(&self, keys: Vec<Item>) -> Result<Vec<Item>, OrderStoreError> {
        use aws_sdk_dynamodb::types::KeysAndAttributes;
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut pending = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(chunk.to_vec()))
                    .consistent_read(true)
                    .build()
                    .map_err(transient)?,
            );
            // Bounded: the service hands back what it could not read now.
            for _ in 0..10 {
                let Some(ask) = pending.take() else { break };
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.orders_table, ask)
                    .send()
                    .await
                    .map_err(transient)?;
                pending = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.orders_table))
                    .filter(|k| !k.keys().is_empty());
                found.extend(
                    out.responses
                        .and_then(|mut r| r.remove(&self.orders_table))
                        .into_iter()
                        .flatten(),
                );
            }
            if pending.is_some() {
                return Err(OrderStoreError::Transient(
                    "items still unprocessed after 10 tries".into(),
                ));
            }
        }
        Ok(found)
    }

    /// The sale item's `returnSeq` (0 before the first expiry).
    pub(super) async fn return_seq(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<u64>, OrderStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .projection_expression("saleId, returnSeq")
            .consistent_read(true)
            .send()
            .await
            .map_err(transient)?;
        Ok(out.item.map(|item| match item.get("returnSeq") {
            Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
            _ => 0,
        }))
    }

    /// The row that made a conditional put fail, read back.
    async fn existing(&self, order_id: &OrderId) -> Result<Order, OrderStoreError> {
        self.get(order_id).await?.ok_or_else(|| {
            OrderStoreError::Transient(format!(
                "{order_id}: the condition failed on a row that is not there"
            ))
        })
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
        Ok(self.return_seq(sale_id).await?.is_some())
    }
}

/// Codes of a cancelled transaction, or the error for any other failure.
pub(super) fn cancellation(
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
        per_user_limit: u32,
        request_token: &str,
    ) -> Result<GroupWrite, OrderStoreError> {
        let total: u64 = orders
            .iter()
            .map(|o| u64::from(o.message.quantity.get()))
            .sum();
        // One update per buyer (a transaction touches an item once).
        let mut by_buyer: BTreeMap<&UserId, u64> = BTreeMap::new();
        for o in orders {
            *by_buyer.entry(&o.message.user_id).or_default() += u64::from(o.message.quantity.get());
        }
        let mut items = orders
            .iter()
            .map(|o| self.put_order(o))
            .collect::<Result<Vec<_>, _>>()?;
        for (user_id, units) in by_buyer {
            match self.add_to_buyer(sale_id, user_id, units, per_user_limit)? {
                Some(item) => items.push(item),
                // One buyer's orders in this group pass the limit together:
                // the single writes decide which of them fit.
                None => return Ok(GroupWrite::Cancelled(vec!["BuyerOverLimitInGroup".into()])),
            }
        }
        items.push(self.take_units(sale_id, total)?);
        self.count(1, items.len());
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

    async fn write_single(
        &self,
        order: &NewOrder,
        per_user_limit: u32,
    ) -> Result<SingleWrite, OrderStoreError> {
        let m = &order.message;
        let units = u64::from(m.quantity.get());
        let Some(buyer) = self.add_to_buyer(&m.sale_id, &m.user_id, units, per_user_limit)? else {
            return match self.get(&m.order_id).await? {
                Some(row) => Ok(SingleWrite::Duplicate(row)),
                None => Ok(SingleWrite::OverLimit),
            };
        };
        let items = vec![
            self.put_order(order)?,
            buyer,
            self.take_units(&m.sale_id, units)?,
        ];
        self.count(1, items.len());
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
            Ok(SingleWrite::Duplicate(self.existing(&m.order_id).await?))
        } else if failed(1) {
            Ok(SingleWrite::OverLimit)
        } else if failed(2) {
            if self.sale_exists(&m.sale_id).await? {
                Ok(SingleWrite::NoStock)
            } else {
                Err(OrderStoreError::SaleMissing(m.sale_id.clone()))
            }
        } else if only_contention(&reasons) {
            Err(OrderStoreError::Contention(format!(
                "transaction cancelled: {reasons:?}"
            )))
        } else {
            Err(OrderStoreError::Transient(format!(
                "transaction cancelled: {reasons:?}"
            )))
        }
    }

    async fn write_rejected(
        &self,
        order: &NewOrder,
        reason: RejectReason,
    ) -> Result<RejectWrite, OrderStoreError> {
        let mut item = order_item(order, OrderStatus::Rejected, Some(reason));
        item.remove("expiresAt");
        item.insert(
            "rejectedAt".into(),
            AttributeValue::S(clock::rfc3339_ms(clock::now_ms())),
        );
        self.count(0, 1);
        let result = self
            .client
            .put_item()
            .table_name(&self.orders_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(orderId)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(RejectWrite::Recorded),
            // The order was written (or rejected) first: it stays what it is,
            // and the caller follows the row, not its own plan.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(RejectWrite::Exists(
                    self.existing(&order.message.order_id).await?,
                ))
            }
            // The order item is held by a transaction in flight (the
            // writer's, or another give-up's): nothing was written.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_transaction_conflict_exception()) =>
            {
                Err(OrderStoreError::Contention(
                    DisplayErrorContext(err).to_string(),
                ))
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

    async fn orders_of_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Vec<Order>, OrderStoreError> {
        let items = query_items(
            self.client
                .query()
                .table_name(&self.orders_table)
                .index_name("byBuyer")
                .key_condition_expression("userId = :user AND saleId = :sale")
                .expression_attribute_values(":user", AttributeValue::S(user_id.to_string()))
                .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string())),
        )
        .await?;
        items.iter().map(order_from_item).collect()
    }

    async fn pay(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<PayOutcome, OrderStoreError> {
        self.pay_stand_in(order_id, user_id, now_ms).await
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
        for attempt in 0..EXPIRE_ATTEMPTS {
            if attempt > 0 {
                // Another expiry, or a writer's transaction on the hot sale
                // item (TransactionConflict), got there first.
                super::contention::jittered_wait(attempt).await;
            }
            let Some(seq) = self.return_seq(&order.sale_id).await? else {
                return Err(OrderStoreError::SaleMissing(order.sale_id));
            };
            match self.expire_at_seq(&order, now_ms, seq).await? {
                Some(outcome) => return Ok(outcome),
                // Another expiry took this position first: read it again.
                None => continue,
            }
        }
        Err(OrderStoreError::Transient(format!(
            "{order_id}: {EXPIRE_ATTEMPTS} expiries of the sale raced this one"
        )))
    }

    async fn expire_many(
        &self,
        order_ids: &[OrderId],
        now_ms: i64,
    ) -> Result<Vec<Result<ExpireOutcome, OrderStoreError>>, OrderStoreError> {
        self.expire_many_now(order_ids, now_ms).await
    }
}

impl DynamoOrders {
    /// An order `PENDING_PAYMENT` and due at `now` becomes `EXPIRED` with
    /// return position `position` (one item of an expiry's transaction,
    /// single or batched).
    pub(super) fn mark_expired(
        &self,
        order: &Order,
        now: &str,
        position: u64,
    ) -> Result<Update, OrderStoreError> {
        Update::builder()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order.order_id.to_string()))
            .update_expression(
                "SET #s = :expired, expiredAt = :now, returnSeq = :position REMOVE pendingSaleId, pendingBucket",
            )
            .condition_expression("#s = :pending AND expiresAt <= :now")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":expired", AttributeValue::S("EXPIRED".into()))
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .expression_attribute_values(":now", AttributeValue::S(now.to_owned()))
            .expression_attribute_values(":position", AttributeValue::N(position.to_string()))
            .build()
            .map_err(transient)
    }

    /// The sale item's part of a return: from ledger position `seq` to
    /// `seq + 1` (conditional on it being at `seq`), `units` back to
    /// `available` and off `sold` (an expiry), or, negative, taken from
    /// `available` into `sold` (a given-up reservation's units offered to
    /// the waitlist). Either side stays at or above zero.
    pub(super) fn return_at(
        &self,
        sale_id: &SaleId,
        seq: u64,
        units: i64,
    ) -> Result<Update, OrderStoreError> {
        let position = if seq == 0 {
            "attribute_not_exists(returnSeq)"
        } else {
            "returnSeq = :seq"
        };
        let mut update = Update::builder()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .update_expression(
                "SET available = available + :q, sold = sold - :q, returnSeq = :next",
            )
            .condition_expression(format!(
                "attribute_exists(saleId) AND sold >= :q AND available >= :minus AND {position}"
            ))
            .expression_attribute_values(":q", AttributeValue::N(units.to_string()))
            .expression_attribute_values(":minus", AttributeValue::N((-units).to_string()))
            .expression_attribute_values(":next", AttributeValue::N((seq + 1).to_string()));
        if seq > 0 {
            update = update.expression_attribute_values(":seq", AttributeValue::N(seq.to_string()));
        }
        update.build().map_err(transient)
    }

    /// One attempt of [`OrderStore::expire`]: the order becomes `EXPIRED`
    /// with return position `seq + 1`, and the sale item moves from `seq` to
    /// `seq + 1` in the same transaction. `None`: the sale item was no
    /// longer at `seq`.
    async fn expire_at_seq(
        &self,
        order: &Order,
        now_ms: i64,
        seq: u64,
    ) -> Result<Option<ExpireOutcome>, OrderStoreError> {
        let now = clock::rfc3339_ms(now_ms);
        let units = u64::from(order.quantity.get());
        let mark = self.mark_expired(order, &now, seq + 1)?;
        let give_back = self.return_at(&order.sale_id, seq, i64::from(order.quantity.get()))?;
        let buyer = self.take_from_buyer(&order.sale_id, &order.user_id, units)?;
        self.count(1, 3);
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(mark).build())
            .transact_items(TransactWriteItem::builder().update(give_back).build())
            .transact_items(buyer)
            .send()
            .await;
        let reasons = match result {
            Ok(_) => {
                return Ok(Some(ExpireOutcome::Expired(Order {
                    status: OrderStatus::Expired,
                    return_seq: Some(seq + 1),
                    ..order.clone()
                })));
            }
            Err(err) => cancellation(err)?,
        };
        let failed = |i: usize| {
            reasons
                .get(i)
                .is_some_and(|c| c == "ConditionalCheckFailed")
        };
        if failed(0) {
            Ok(Some(ExpireOutcome::NotExpirable))
        } else if failed(1) {
            // Moved on (another expiry), or gone: the caller reads it again.
            if self.return_seq(&order.sale_id).await?.is_none() {
                return Err(OrderStoreError::SaleMissing(order.sale_id.clone()));
            }
            Ok(None)
        } else if reasons.iter().any(|c| c == "TransactionConflict") {
            Ok(None)
        } else {
            Err(OrderStoreError::Transient(format!(
                "expiry cancelled: {reasons:?}"
            )))
        }
    }
}

pub(crate) fn transient(err: impl std::error::Error + Send + Sync + 'static) -> OrderStoreError {
    OrderStoreError::Transient(DisplayErrorContext(err).to_string())
}

/// Every item `query` finds, all its pages (the SDK's paginator).
pub(crate) async fn query_items(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
) -> Result<Vec<HashMap<String, AttributeValue>>, OrderStoreError> {
    query
        .into_paginator()
        .items()
        .send()
        .collect::<Result<_, _>>()
        .await
        .map_err(transient)
}
