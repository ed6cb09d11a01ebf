//! Expiring unpaid orders in batches ([`OrderStore::expire_many`]).
//!
//! One transaction expires up to [`EXPIRE_BATCH`] orders of one sale: each
//! order `PENDING_PAYMENT` → `EXPIRED` (conditional on it being pending and
//! due, as a single expiry is), each buyer's record lowered once by all of
//! their orders in the batch (a transaction may touch an item only once),
//! and the sale item moved once: `available` up and `sold` down by the
//! batch's units, `returnSeq` from `seq` to `seq + n`, the orders numbered
//! `seq + 1 ..= seq + n`. Returns keep one ledger position each, exactly as
//! single expiries would have given them, so reconcile's stock reset and
//! Redis's returns read them the same way.
//!
//! The sale item is the one hot item of the sale: a single expiry writes it
//! once per order, a batch once per [`EXPIRE_BATCH`] orders.
//!
//! A cancelled batch is read by its reasons: an order no longer expirable
//! (paid, or expired by another run, since it was read) leaves the batch
//! and the rest goes again at once; the sale item moved (another expiry
//! took the position) or a conflict retries after a jittered wait; a
//! buyer's record holding less than the batch takes falls back to single
//! expiries, which report that order's own error.
//!
//! A try whose answer is lost (a timeout: DynamoDB may have applied it)
//! is settled by reading its orders: one `EXPIRED` at a ledger position
//! this batch sent it with was expired by this batch, and its units go
//! back to Redis now, not at reconcile's next run; one still pending goes
//! again. Two runs that sent the same order at the same position both
//! claim it; Redis takes its units back once whoever returns them.
//!
//! [`OrderStore::expire_many`]: crate::ports::OrderStore::expire_many

use super::contention::jittered_wait;
use super::orders::{DynamoOrders, transient};
use crate::clock;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{ExpireOutcome, OrderStore, OrderStoreError};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use std::collections::{BTreeMap, HashMap};

/// Orders in one expiry transaction: each order, at most one record per
/// buyer, and the sale item stay within DynamoDB's 100 actions.
pub const EXPIRE_BATCH: usize = 49;

/// Tries of one batch whose ledger position another expiry took, or that
/// met a writer's transaction on the sale item.
const BATCH_ATTEMPTS: u32 = 8;

/// What one outcome per order is made of: its place in the caller's list.
type Outcomes = Vec<(usize, Result<ExpireOutcome, OrderStoreError>)>;

impl DynamoOrders {
    pub(super) async fn expire_many_now(
        &self,
        order_ids: &[OrderId],
        now_ms: i64,
    ) -> Result<Vec<Result<ExpireOutcome, OrderStoreError>>, OrderStoreError> {
        let found = self.orders_by_id(order_ids).await?;
        let mut out: Vec<Option<Result<ExpireOutcome, OrderStoreError>>> =
            order_ids.iter().map(|_| None).collect();
        let mut by_sale: BTreeMap<SaleId, Vec<(usize, Order)>> = BTreeMap::new();
        for (i, id) in order_ids.iter().enumerate() {
            match found.get(id.as_str()) {
                None => out[i] = Some(Ok(ExpireOutcome::NotFound)),
                Some(order) if !expirable(order, now_ms) => {
                    out[i] = Some(Ok(ExpireOutcome::NotExpirable));
                }
                Some(order) => by_sale
                    .entry(order.sale_id.clone())
                    .or_default()
                    .push((i, order.clone())),
            }
        }
        for orders in by_sale.into_values() {
            for batch in orders.chunks(EXPIRE_BATCH) {
                for (i, outcome) in self.expire_batch(batch.to_vec(), now_ms).await {
                    out[i] = Some(outcome);
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|o| o.unwrap_or(Ok(ExpireOutcome::NotFound)))
            .collect())
    }

    /// One sale's orders, all read as expirable.
    async fn expire_batch(&self, mut live: Vec<(usize, Order)>, now_ms: i64) -> Outcomes {
        let mut done: Outcomes = Vec::with_capacity(live.len());
        // The ledger positions each order was sent with: a try whose answer
        // was lost (a timeout) may have been applied, and an order found
        // `EXPIRED` at one of its own positions was expired by this batch.
        let mut sent: HashMap<usize, Vec<u64>> = HashMap::new();
        let mut attempt = 0;
        while let Some((_, first)) = live.first() {
            let sale_id = first.sale_id.clone();
            if attempt >= BATCH_ATTEMPTS {
                done.extend(live.drain(..).map(|(i, o)| {
                    (
                        i,
                        Err(OrderStoreError::Transient(format!(
                            "{}: {BATCH_ATTEMPTS} expiries of the sale raced its batch",
                            o.order_id
                        ))),
                    )
                }));
                break;
            }
            if attempt > 0 {
                jittered_wait(attempt).await;
            }
            let seq = match self.return_seq(&sale_id).await {
                Ok(Some(seq)) => seq,
                Ok(None) => {
                    done.extend(
                        live.drain(..)
                            .map(|(i, _)| (i, Err(OrderStoreError::SaleMissing(sale_id.clone())))),
                    );
                    break;
                }
                Err(err) => {
                    let why = err.to_string();
                    done.extend(
                        live.drain(..)
                            .map(|(i, _)| (i, Err(OrderStoreError::Transient(why.clone())))),
                    );
                    break;
                }
            };
            for ((i, _), position) in live.iter().zip(seq + 1..) {
                sent.entry(*i).or_default().push(position);
            }
            let orders: Vec<&Order> = live.iter().map(|(_, o)| o).collect();
            let reasons = match self.send_batch(&orders, now_ms, seq).await {
                Ok(None) => {
                    done.extend(live.drain(..).zip(1..).map(|((i, order), k)| {
                        (
                            i,
                            Ok(ExpireOutcome::Expired(Order {
                                status: OrderStatus::Expired,
                                return_seq: Some(seq + k),
                                ..order
                            })),
                        )
                    }));
                    break;
                }
                Ok(Some(reasons)) => reasons,
                Err(err) => {
                    // Applied or not, nobody can say (the answer timed
                    // out): the ledger can. Whatever is still pending goes
                    // again; what this batch expired is done.
                    attempt += 1;
                    let why = err.to_string();
                    match self.settle(std::mem::take(&mut live), &sent, now_ms).await {
                        Ok((settled, pending)) => {
                            done.extend(settled);
                            live = pending;
                        }
                        Err(stranded) => {
                            done.extend(
                                stranded
                                    .into_iter()
                                    .map(|i| (i, Err(OrderStoreError::Transient(why.clone())))),
                            );
                            break;
                        }
                    }
                    continue;
                }
            };
            let failed = |k: usize| {
                reasons
                    .get(k)
                    .is_some_and(|c| c == "ConditionalCheckFailed")
            };
            let n = live.len();
            let gone: Vec<usize> = (0..n).filter(|&k| failed(k)).collect();
            if !gone.is_empty() {
                // No longer pending: paid or expired by someone else since it
                // was read, or expired by an earlier try of this batch whose
                // answer was lost. Out of the batch (so this ends), and the
                // others go again at once.
                let mut out = Vec::with_capacity(gone.len());
                for k in gone.into_iter().rev() {
                    out.push(live.remove(k));
                }
                let tried_before = out
                    .iter()
                    .any(|(i, _)| sent.get(i).is_some_and(|p| p.len() > 1));
                if tried_before {
                    match self.settle(out, &sent, now_ms).await {
                        // Read as not pending a moment ago: still pending
                        // now is a read that lags; the next run sees it.
                        Ok((settled, pending)) => {
                            done.extend(settled);
                            done.extend(
                                pending
                                    .into_iter()
                                    .map(|(i, _)| (i, Ok(ExpireOutcome::NotExpirable))),
                            );
                        }
                        Err(stranded) => done.extend(stranded.into_iter().map(|i| {
                            (
                                i,
                                Err(OrderStoreError::Transient(
                                    "an earlier try's outcome could not be read".into(),
                                )),
                            )
                        })),
                    }
                } else {
                    done.extend(
                        out.into_iter()
                            .map(|(i, _)| (i, Ok(ExpireOutcome::NotExpirable))),
                    );
                }
            } else if failed(n) || reasons.iter().any(|c| c == "TransactionConflict") {
                // Another expiry took the position, or a writer held the
                // sale item: read the position again after a wait.
                attempt += 1;
            } else {
                // A buyer's record holds less than the batch takes, or a
                // reason this batch cannot read: each order on its own says
                // which and why.
                for (i, order) in live.drain(..) {
                    done.push((i, self.expire(&order.order_id, now_ms).await));
                }
            }
        }
        done
    }

    /// What the ledger says of `orders` after a try of their batch whose
    /// outcome is unknown: `EXPIRED` at a position this batch sent it with
    /// is this batch's expiry (as the ledger holds it); still pending and
    /// due goes again (the second list); anything else was not this
    /// batch's to expire. `Err`: the places of orders that could not be
    /// read.
    async fn settle(
        &self,
        orders: Vec<(usize, Order)>,
        sent: &HashMap<usize, Vec<u64>>,
        now_ms: i64,
    ) -> Result<(Outcomes, Vec<(usize, Order)>), Vec<usize>> {
        let ids: Vec<OrderId> = orders.iter().map(|(_, o)| o.order_id.clone()).collect();
        let Ok(found) = self.orders_by_id(&ids).await else {
            return Err(orders.into_iter().map(|(i, _)| i).collect());
        };
        let mut settled = Vec::new();
        let mut pending = Vec::new();
        for (i, order) in orders {
            match found.get(order.order_id.as_str()) {
                Some(now)
                    if now.status == OrderStatus::Expired
                        && now
                            .return_seq
                            .is_some_and(|seq| sent.get(&i).is_some_and(|p| p.contains(&seq))) =>
                {
                    settled.push((i, Ok(ExpireOutcome::Expired(now.clone()))));
                }
                Some(now) if expirable(now, now_ms) => pending.push((i, order)),
                Some(_) => settled.push((i, Ok(ExpireOutcome::NotExpirable))),
                None => settled.push((i, Ok(ExpireOutcome::NotFound))),
            }
        }
        Ok((settled, pending))
    }

    /// One try of a batch at ledger position `seq`: `None` when it was
    /// applied, else the cancellation's reasons (orders first, then the
    /// sale item, then the buyers' records).
    async fn send_batch(
        &self,
        orders: &[&Order],
        now_ms: i64,
        seq: u64,
    ) -> Result<Option<Vec<String>>, OrderStoreError> {
        let Some(first) = orders.first() else {
            return Ok(None);
        };
        let sale_id = &first.sale_id;
        let now = clock::rfc3339_ms(now_ms);
        let mut items = Vec::with_capacity(2 * orders.len() + 1);
        let mut units = 0u64;
        let mut by_buyer: BTreeMap<&UserId, u64> = BTreeMap::new();
        for (order, position) in orders.iter().zip(seq + 1..) {
            let q = u64::from(order.quantity.get());
            units += q;
            *by_buyer.entry(&order.user_id).or_default() += q;
            let mark = self.mark_expired(order, &now, position)?;
            items.push(TransactWriteItem::builder().update(mark).build());
        }
        let n = u64::try_from(orders.len()).unwrap_or(u64::MAX);
        let position = if seq == 0 {
            "attribute_not_exists(returnSeq)"
        } else {
            "returnSeq = :seq"
        };
        let mut give_back = Update::builder()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .update_expression(
                "SET available = available + :q, sold = sold - :q, returnSeq = :next",
            )
            .condition_expression(format!(
                "attribute_exists(saleId) AND sold >= :q AND {position}"
            ))
            .expression_attribute_values(":q", AttributeValue::N(units.to_string()))
            .expression_attribute_values(":next", AttributeValue::N((seq + n).to_string()));
        if seq > 0 {
            give_back =
                give_back.expression_attribute_values(":seq", AttributeValue::N(seq.to_string()));
        }
        items.push(
            TransactWriteItem::builder()
                .update(give_back.build().map_err(transient)?)
                .build(),
        );
        for (user, q) in by_buyer {
            items.push(self.take_from_buyer(sale_id, user, q)?);
        }
        self.count(1, items.len());
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => Ok(None),
            Err(err) => super::orders::cancellation(err).map(Some),
        }
    }

    /// The orders of `ids` that exist, by id: consistent `BatchGetItem`s of
    /// 100 keys, what the service could not read now asked again.
    async fn orders_by_id(
        &self,
        ids: &[OrderId],
    ) -> Result<HashMap<String, Order>, OrderStoreError> {
        let keys = ids
            .iter()
            .map(|id| HashMap::from([("orderId".to_owned(), AttributeValue::S(id.to_string()))]))
            .collect();
        self.read_all(keys)
            .await?
            .iter()
            .map(|item| super::orders::order_from_item(item).map(|o| (o.order_id.to_string(), o)))
            .collect()
    }
}

fn expirable(order: &Order, now_ms: i64) -> bool {
    order.status == OrderStatus::PendingPayment
        && order.expires_at_ms.is_some_and(|at| at <= now_ms)
}
