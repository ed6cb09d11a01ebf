//! Releasing one unpaid order past its payment window: the ledger first
//! (one transaction, conditional on the order being `PENDING_PAYMENT` and
//! due, that gives its units back to the sale item at the next ledger
//! position), then its units and its buyer's count back in Redis
//! (`return_units`, once per order whatever runs it again).
//!
//! Whoever gets there first releases it: the release job, or the orders API
//! the moment it would answer `EXPIRED` (a read, a payment), so that
//! `EXPIRED` always means the unit is back on sale and the buyer may buy
//! again. The conditions make every other attempt a no-op.
//!
//! The job releases many at once ([`release_many`]): the ledger expires
//! them in batches, one write of the sale item each, then Redis takes each
//! order's units back, those calls sent together.

use crate::domain::OrderId;
use crate::domain::orders::Order;
use crate::domain::stock_state::Returned;
use crate::ports::{ExpireOutcome, OrderStore, OrderStoreError, StockAdmin, StoreError};

/// What one release did.
#[derive(Debug)]
pub enum Released {
    /// The ledger expired it now; `returned` is how Redis took its units
    /// back (a failure there is repaired by reconcile, which finds the
    /// `EXPIRED` row without its marker).
    Now {
        order: Order,
        returned: Result<Returned, StoreError>,
    },
    /// Paid, expired by someone else, not due, or absent: nothing changed.
    Not(ExpireOutcome),
}

/// Expires `order_id` if it is due at `now_ms`, then gives its units back
/// to Redis.
pub async fn release<O: OrderStore, S: StockAdmin>(
    orders: &O,
    stock: &S,
    order_id: &OrderId,
    now_ms: i64,
) -> Result<Released, OrderStoreError> {
    Ok(give_back(stock, orders.expire(order_id, now_ms).await?).await)
}

/// [`release`] of many orders (the job's chunk): the ledger's batches
/// first ([`OrderStore::expire_many`]), then the units of each order it
/// expired back to Redis, those calls together. Each order's outcome, in
/// the order given; `Err` only when the ledger could read none of them.
pub async fn release_many<O: OrderStore, S: StockAdmin>(
    orders: &O,
    stock: &S,
    order_ids: &[OrderId],
    now_ms: i64,
) -> Result<Vec<Result<Released, OrderStoreError>>, OrderStoreError> {
    let outcomes = orders.expire_many(order_ids, now_ms).await?;
    Ok(crate::app::draw::join_all(
        outcomes
            .into_iter()
            .map(|outcome| async move { Ok(give_back(stock, outcome?).await) }),
    )
    .await)
}

/// Redis's step of a release: the units of an order the ledger just
/// expired go back (once per order, whoever runs it again).
async fn give_back<S: StockAdmin>(stock: &S, outcome: ExpireOutcome) -> Released {
    let ExpireOutcome::Expired(order) = outcome else {
        return Released::Not(outcome);
    };
    let returned = stock
        .return_units(
            &order.sale_id,
            &order.order_id,
            order.user_id.as_str(),
            order.quantity.get(),
            order.return_seq,
        )
        .await;
    if let Err(err) = &returned {
        tracing::warn!(order_id = %order.order_id, %err, "order expired in the ledger; its units go back to Redis when reconcile next runs");
    }
    Released::Now { order, returned }
}
