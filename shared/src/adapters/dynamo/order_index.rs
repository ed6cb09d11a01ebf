//! How an order is stored and found by sale: the item's attributes, the
//! sale buckets that spread one sale's index entries, and the reads that fan
//! out over those buckets.
//!
//! A GSI partition key takes at most 1,000 writes a second, and every order
//! of a sale used to share one (`saleId`, and `pendingSaleId`). Each order
//! now carries `saleBucket` = `<saleId>#<b>` (and `pendingBucket`, the same
//! value, only while `PENDING_PAYMENT`), `b` = [`bucket_of`] its id, one of
//! [`SALE_BUCKETS`]. The sale's entries spread over that many partition keys
//! of `bySaleBucketStatus` (`saleBucket`, `status`) and of the sparse
//! `pendingBucketByExpiry` (`pendingBucket`, `expiresAt`). A read of a sale
//! queries every bucket ([`MAX_IN_FLIGHT`] at a time) and merges. The
//! `docs/operations.md` (Limits that cap a sale) has the arithmetic behind the count.
//!
//! [`backfill_buckets`] gives rows written before the buckets existed their
//! bucket attributes (`seckill-local backfill-order-buckets`).

use crate::adapters::dynamo::catalog::{money_from_attr, money_to_attr};
use crate::adapters::dynamo::orders::{
    DynamoOrders, buyer_key, is_order_item, query_items, transient,
};
use crate::clock;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::{OrderId, PaymentId, Quantity, SaleId, UserId};
use crate::ports::{OrderLedger, OrderStoreError};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use std::collections::HashMap;
use std::future::Future;

type Item = HashMap<String, AttributeValue>;

/// Buckets per sale in both sale-keyed indexes. 32 x 1,000 writes a second
/// per partition key, at up to 3 index writes an order over its life on
/// `bySaleBucketStatus`: about 10,600 orders a second per sale (`docs/operations.md`).
/// Raising it later keeps every row found (reads cover `0..SALE_BUCKETS`);
/// lowering it would hide the rows of the dropped buckets.
pub const SALE_BUCKETS: u32 = 32;

/// Index queries of one read in flight at once.
pub const MAX_IN_FLIGHT: usize = 8;

/// Orders per page of [`DynamoOrders::send_orders_of_sale`]: an index
/// entry is a few hundred bytes, so a page is well under DynamoDB's 1 MB
/// and a few pages in flight stay a few MB in memory.
pub const STREAM_PAGE: i32 = 500;

/// The index of a sale's orders by status, partitioned by sale bucket.
pub const BY_SALE_BUCKET_STATUS: &str = "bySaleBucketStatus";

/// The sparse index of a sale's `PENDING_PAYMENT` orders by `expiresAt`.
pub const PENDING_BUCKET_BY_EXPIRY: &str = "pendingBucketByExpiry";

/// The bucket of an order: a function of its id alone, so every redelivery
/// and every rewrite of the order (and a retried batch, whose
/// `ClientRequestToken` needs byte-identical items) lands in the same one.
pub fn bucket_of(order_id: &OrderId) -> u32 {
    let h = crate::domain::stable_hash(order_id.as_str());
    u32::try_from(h % u64::from(SALE_BUCKETS)).unwrap_or(0)
}

/// The partition key of bucket `bucket` of a sale (sale ids hold no `#`).
pub fn bucket_key(sale_id: &SaleId, bucket: u32) -> String {
    format!("{sale_id}#{bucket}")
}

/// The item of a new order in `status`.
pub fn order_item(order: &NewOrder, status: OrderStatus, reason: Option<RejectReason>) -> Item {
    let m = &order.message;
    let bucket = bucket_key(&m.sale_id, bucket_of(&m.order_id));
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
        ("saleBucket".into(), AttributeValue::S(bucket.clone())),
    ]);
    if status == OrderStatus::PendingPayment {
        item.insert(
            "pendingSaleId".into(),
            AttributeValue::S(m.sale_id.to_string()),
        );
        item.insert("pendingBucket".into(), AttributeValue::S(bucket));
    }
    if let Some(reason) = reason {
        item.insert(
            "rejectReason".into(),
            AttributeValue::S(reason.as_str().into()),
        );
    }
    if let Some(amount) = &order.amount {
        item.insert("amount".into(), money_to_attr(amount));
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
        reject_reason: s("rejectReason").ok().and_then(RejectReason::parse),
        return_seq: match item.get("returnSeq") {
            Some(AttributeValue::N(n)) => n.parse().ok(),
            _ => None,
        },
        amount: money_from_attr(item.get("amount"), "amount")
            .map_err(OrderStoreError::Malformed)?,
        paid_at_ms: time("paidAt"),
        payment_id: s("paymentId").ok().and_then(|p| PaymentId::parse(p).ok()),
        refunds: match item.get("refundPaymentIds") {
            Some(AttributeValue::Ss(ids)) => {
                let mut ids: Vec<PaymentId> = ids
                    .iter()
                    .filter_map(|p| PaymentId::parse(p).ok())
                    .collect();
                ids.sort();
                ids
            }
            _ => Vec::new(),
        },
        offer_of: s("offerOf").ok().and_then(|o| OrderId::parse(o).ok()),
        offered: match item.get("offeredUnits") {
            Some(AttributeValue::N(n)) => n.parse().map_err(|_| bad("offeredUnits"))?,
            _ => 0,
        },
    })
}

/// Runs every future, at most [`MAX_IN_FLIGHT`] at once; the results in
/// the order given. The first error ends the rest (dropping the set aborts
/// them).
async fn bounded<T, F>(work: Vec<F>) -> Result<Vec<T>, OrderStoreError>
where
    F: Future<Output = Result<T, OrderStoreError>> + Send + 'static,
    T: Send + 'static,
{
    let mut results: Vec<Option<T>> = work.iter().map(|_| None).collect();
    let mut queued = work.into_iter().enumerate();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < MAX_IN_FLIGHT {
            let Some((i, future)) = queued.next() else {
                break;
            };
            running.spawn(async move { (i, future.await) });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let (i, result) = joined
            .map_err(|e| OrderStoreError::Transient(format!("an index read stopped: {e}")))?;
        if let Some(slot) = results.get_mut(i) {
            *slot = Some(result?);
        }
    }
    Ok(results.into_iter().flatten().collect())
}

/// One query of a sale's bucket: partition key `key_name` = the bucket's key.
fn bucket_query(
    client: &Client,
    table: &str,
    index: &str,
    key_condition: &str,
    bucket: String,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    client
        .query()
        .table_name(table)
        .index_name(index)
        .key_condition_expression(key_condition)
        .expression_attribute_values(":bucket", AttributeValue::S(bucket))
}

impl DynamoOrders {
    /// A query of one bucket of `bySaleBucketStatus` for one status.
    fn by_bucket_status(
        &self,
        sale_id: &SaleId,
        bucket: u32,
        status: OrderStatus,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        bucket_query(
            &self.client,
            &self.orders_table,
            BY_SALE_BUCKET_STATUS,
            "saleBucket = :bucket AND #s = :status",
            bucket_key(sale_id, bucket),
        )
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":status", AttributeValue::S(status.as_str().into()))
    }

    /// Orders of a sale in one status, every bucket and page, oldest first
    /// (by `createdAt`, then id), so the listing does not depend on the
    /// buckets.
    pub async fn orders_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> Result<Vec<Order>, OrderStoreError> {
        Self::listing(|bucket| self.by_bucket_status(sale_id, bucket, status)).await
    }

    /// The orders `query` finds in each bucket, every page, merged oldest
    /// first.
    async fn listing(
        query: impl Fn(u32) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    ) -> Result<Vec<Order>, OrderStoreError> {
        let work = (0..SALE_BUCKETS)
            .map(|bucket| {
                let query = query(bucket);
                async move {
                    query_items(query)
                        .await?
                        .iter()
                        .map(order_from_item)
                        .collect::<Result<Vec<Order>, _>>()
                }
            })
            .collect();
        let mut orders: Vec<Order> = bounded(work).await?.into_iter().flatten().collect();
        orders.sort_by(|a, b| {
            (a.created_at_ms, a.order_id.as_str()).cmp(&(b.created_at_ms, b.order_id.as_str()))
        });
        Ok(orders)
    }
}

/// The ledger's reads of the operations path: the indexes above, and
/// the buyers' records (one `BatchGetItem` per 100 buyers).
impl OrderLedger for DynamoOrders {
    /// Every order of a sale, whatever its status, oldest first: one query
    /// per bucket where a status at a time would take one per bucket and
    /// status (the rebuild and the invariant checker read them all).
    async fn all_orders_of_sale(&self, sale_id: &SaleId) -> Result<Vec<Order>, OrderStoreError> {
        Self::listing(|bucket| {
            bucket_query(
                &self.client,
                &self.orders_table,
                BY_SALE_BUCKET_STATUS,
                "saleBucket = :bucket",
                bucket_key(sale_id, bucket),
            )
        })
        .await
    }

    /// Every order of a sale, a page of at most [`STREAM_PAGE`] at a time
    /// into `pages`, [`MAX_IN_FLIGHT`] buckets at once: with a reader that
    /// takes the pages one by one, a few pages are in memory, not the sale.
    async fn send_orders_of_sale(
        &self,
        sale_id: &SaleId,
        pages: tokio::sync::mpsc::Sender<Vec<Order>>,
    ) -> Result<(), OrderStoreError> {
        let work = (0..SALE_BUCKETS)
            .map(|bucket| {
                let query = bucket_query(
                    &self.client,
                    &self.orders_table,
                    BY_SALE_BUCKET_STATUS,
                    "saleBucket = :bucket",
                    bucket_key(sale_id, bucket),
                )
                .limit(STREAM_PAGE);
                let pages = pages.clone();
                async move {
                    let mut stream = query.into_paginator().send();
                    while let Some(page) = stream.next().await {
                        let page = page.map_err(transient)?;
                        let orders: Vec<Order> = page
                            .items()
                            .iter()
                            .map(order_from_item)
                            .collect::<Result<_, _>>()?;
                        if !orders.is_empty() && pages.send(orders).await.is_err() {
                            return Err(OrderStoreError::Transient(
                                "the reader of the orders stopped".into(),
                            ));
                        }
                    }
                    Ok(())
                }
            })
            .collect();
        bounded(work).await.map(|_| ())
    }

    /// How many orders of a sale are in one status: every bucket of
    /// `bySaleBucketStatus` with `Select=COUNT`, all pages (eventually
    /// consistent, like any index read). The cheapest correct source: the
    /// sale item keeps only `available` and `sold` (units, pending and paid
    /// together), and per-status counters there would add a write to the hot
    /// sale item on every payment and expiry. DynamoDB still reads the
    /// entries (read units by their size: about 0.05 per order, eventually
    /// consistent, and at least 0.5 per bucket) but sends none back.
    async fn count_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> Result<u64, OrderStoreError> {
        let work = (0..SALE_BUCKETS)
            .map(|bucket| {
                let query = self
                    .by_bucket_status(sale_id, bucket, status)
                    .select(Select::Count);
                async move {
                    let mut count = 0u64;
                    let mut stream = query.into_paginator().send();
                    while let Some(page) = stream.next().await {
                        count += u64::try_from(page.map_err(transient)?.count).unwrap_or(0);
                    }
                    Ok(count)
                }
            })
            .collect();
        Ok(bounded(work).await?.into_iter().sum())
    }

    /// The `limit` orders of a sale still `PENDING_PAYMENT` whose payment
    /// window closed earliest, at or before `now` (the sparse
    /// `pendingBucketByExpiry` index). Each bucket gives its first `limit`
    /// (the index is sorted by `expiresAt`), which holds all of that bucket's
    /// share of the overall first `limit`; merged, the earliest `limit` win.
    async fn due_unpaid(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<OrderId>, OrderStoreError> {
        let take = limit;
        // The SDK's page size is an i32; a chunk is a few dozen orders.
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        if take == 0 {
            return Ok(Vec::new());
        }
        let now = clock::rfc3339_ms(now_ms);
        let work = (0..SALE_BUCKETS)
            .map(|bucket| {
                let query = bucket_query(
                    &self.client,
                    &self.orders_table,
                    PENDING_BUCKET_BY_EXPIRY,
                    "pendingBucket = :bucket AND expiresAt <= :now",
                    bucket_key(sale_id, bucket),
                )
                .expression_attribute_values(":now", AttributeValue::S(now.clone()))
                .projection_expression("orderId, expiresAt")
                .limit(limit);
                async move {
                    let page = query.send().await.map_err(transient)?;
                    page.items()
                        .iter()
                        .map(|item| match (item.get("expiresAt"), item.get("orderId")) {
                            (Some(AttributeValue::S(at)), Some(AttributeValue::S(id))) => {
                                let id = OrderId::parse(id)
                                    .map_err(|e| OrderStoreError::Malformed(e.0))?;
                                Ok((at.clone(), id))
                            }
                            _ => Err(OrderStoreError::Malformed(
                                "orderId or expiresAt missing".into(),
                            )),
                        })
                        .collect::<Result<Vec<_>, _>>()
                }
            })
            .collect();
        let mut due: Vec<(String, OrderId)> = bounded(work).await?.into_iter().flatten().collect();
        due.sort_by(|a, b| (&a.0, a.1.as_str()).cmp(&(&b.0, b.1.as_str())));
        Ok(due.into_iter().take(take).map(|(_, id)| id).collect())
    }

    /// Units each of `users` holds in the ledger (their buyer records; 0
    /// without one). `BatchGetItem`, 100 keys a call, unprocessed keys asked
    /// again.
    async fn held_by_all(
        &self,
        sale_id: &SaleId,
        users: &[&UserId],
    ) -> Result<HashMap<String, u64>, OrderStoreError> {
        let mut held: HashMap<String, u64> = users.iter().map(|u| (u.to_string(), 0)).collect();
        let keys = users
            .iter()
            .map(|u| {
                HashMap::from([(
                    "orderId".to_owned(),
                    AttributeValue::S(buyer_key(sale_id, u)),
                )])
            })
            .collect();
        for item in self.read_all(keys).await? {
            if let (Some(AttributeValue::S(user)), Some(AttributeValue::N(n))) =
                (item.get("buyerUserId"), item.get("held"))
            {
                held.insert(user.clone(), n.parse().unwrap_or(0));
            }
        }
        Ok(held)
    }
}

/// What [`backfill_buckets`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BackfillReport {
    /// Order items read (buyer records not counted).
    pub orders: u64,
    /// Orders given `saleBucket` (and `pendingBucket` when pending).
    pub updated: u64,
    /// Pending orders paid or expired between the read and the update: they
    /// got `saleBucket` only, and stay out of the pending index.
    pub left_pending_index: u64,
    /// Items that are not orders this code wrote (ids that do not parse).
    pub skipped: Vec<String>,
}

/// Gives every order of `orders_table` the bucket attributes it lacks: rows
/// written before the buckets existed are in neither sharded index until
/// then. Run it once after every function runs the bucketed code; it is
/// safe to run again (a row that has them is not written) and alongside
/// traffic: `pendingBucket` is set only on condition that `pendingSaleId`
/// is still there, so a payment or expiry since the scan (which removes
/// both) never puts the order back in the pending index.
pub async fn backfill_buckets(
    client: &Client,
    orders_table: &str,
) -> Result<BackfillReport, OrderStoreError> {
    let mut report = BackfillReport::default();
    let mut pages = client
        .scan()
        .table_name(orders_table)
        .projection_expression("orderId, saleId, saleBucket, pendingSaleId, pendingBucket")
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(transient)?;
        let mut work = Vec::new();
        for item in page.items().iter().filter(|i| is_order_item(i)) {
            report.orders += 1;
            let s = |name: &str| match item.get(name) {
                Some(AttributeValue::S(v)) => Some(v.as_str()),
                _ => None,
            };
            let (Some(Ok(order_id)), Some(Ok(sale_id))) = (
                s("orderId").map(OrderId::parse),
                s("saleId").map(SaleId::parse),
            ) else {
                report
                    .skipped
                    .push(s("orderId").unwrap_or("(no orderId)").to_owned());
                continue;
            };
            let bucket = bucket_key(&sale_id, bucket_of(&order_id));
            let pending = s("pendingSaleId").is_some();
            let missing = s("saleBucket") != Some(bucket.as_str())
                || (pending && s("pendingBucket") != Some(bucket.as_str()));
            if missing {
                work.push(set_bucket(
                    client.clone(),
                    orders_table.to_owned(),
                    order_id,
                    bucket,
                    pending,
                ));
            }
        }
        for outcome in bounded(work).await? {
            report.updated += 1;
            if outcome == SetBucket::LeftPendingIndex {
                report.left_pending_index += 1;
            }
        }
    }
    Ok(report)
}

#[derive(Debug, PartialEq, Eq)]
enum SetBucket {
    Set,
    LeftPendingIndex,
}

/// Sets one order's bucket attributes: both while it is still pending, else
/// `saleBucket` alone.
async fn set_bucket(
    client: Client,
    table: String,
    order_id: OrderId,
    bucket: String,
    pending: bool,
) -> Result<SetBucket, OrderStoreError> {
    let update = |expression: &str, condition: &str| {
        client
            .update_item()
            .table_name(&table)
            .key("orderId", AttributeValue::S(order_id.to_string()))
            .update_expression(expression)
            .condition_expression(condition)
            .expression_attribute_values(":b", AttributeValue::S(bucket.clone()))
            .send()
    };
    let failed_condition = |err: &aws_sdk_dynamodb::error::SdkError<_, _>| matches!(err.as_service_error(), Some(e) if aws_sdk_dynamodb::operation::update_item::UpdateItemError::is_conditional_check_failed_exception(e));
    if pending {
        match update(
            "SET saleBucket = :b, pendingBucket = :b",
            "attribute_exists(pendingSaleId)",
        )
        .await
        {
            Ok(_) => return Ok(SetBucket::Set),
            Err(err) if failed_condition(&err) => {}
            Err(err) => return Err(transient(err)),
        }
    }
    match update("SET saleBucket = :b", "attribute_exists(orderId)").await {
        Ok(_) if pending => Ok(SetBucket::LeftPendingIndex),
        Ok(_) => Ok(SetBucket::Set),
        // Not there any more: nothing deletes orders, but nothing to do.
        Err(err) if failed_condition(&err) => Ok(SetBucket::Set),
        Err(err) => Err(transient(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OrderMessage;

    fn new_order(id: &str) -> NewOrder {
        let message = OrderMessage {
            v: 1,
            order_id: OrderId::parse(id).unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse("u1").unwrap(),
            quantity: Quantity::new(2).unwrap(),
            shard: 0,
            reserved_at: clock::rfc3339_ms(1_000_000),
        };
        NewOrder::new(message, 1_000_000, 1_000_000, 900)
    }

    #[test]
    fn pending_items_are_in_the_sparse_index_and_round_trip() {
        let order = new_order("o1");
        let item = order_item(&order, OrderStatus::PendingPayment, None);
        assert!(item.contains_key("pendingSaleId"));
        let bucket = format!("s1#{}", bucket_of(&order.message.order_id));
        assert_eq!(
            item.get("saleBucket"),
            Some(&AttributeValue::S(bucket.clone()))
        );
        assert_eq!(item.get("pendingBucket"), Some(&AttributeValue::S(bucket)));
        let back = order_from_item(&item).unwrap();
        assert_eq!(back.expires_at_ms, Some(1_900_000));
        assert_eq!(back.status, OrderStatus::PendingPayment);
        let rejected = order_item(&order, OrderStatus::Rejected, Some(RejectReason::OverLimit));
        assert!(!rejected.contains_key("pendingSaleId"));
        assert!(!rejected.contains_key("pendingBucket"));
        assert!(rejected.contains_key("saleBucket"));
    }

    #[test]
    fn the_bucket_is_pinned_and_spreads_script_shaped_ids() {
        // Pinned: a changed function would give redelivered orders other
        // items than their first write (the batch token needs them equal).
        let id = |s: &str| OrderId::parse(s).unwrap();
        assert_eq!(bucket_of(&id("o1")), bucket_of(&id("o1")));
        let pinned: Vec<u32> = ["o1", "o2", "n0123456789abcdef0123456789abcde"]
            .iter()
            .map(|s| bucket_of(&id(s)))
            .collect();
        assert_eq!(pinned, PINNED);
        // Ids as the purchase script makes them (`n` + 31 hex, a shard
        // suffix): one common prefix, hex digits only.
        let mut counts = [0u32; SALE_BUCKETS as usize];
        for n in 0..32_000u64 {
            let raw = format!("n{:031x}-s{}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15), n % 4);
            counts[bucket_of(&id(&raw)) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min >= 850 && *max <= 1150, "{counts:?}");
    }

    const PINNED: [u32; 3] = [16, 17, 18];
}
