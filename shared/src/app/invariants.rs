//! The design's invariants, checked over one sale's state in Redis, the queue
//! and DynamoDB. Reconcile runs the same checks before it repairs anything;
//! the chaos scenarios and the benchmark end with them.
//!
//! [`InvariantChecker::observe`] reads the state; [`check`] is pure, so the
//! rules are unit-tested on hand-built states. The codes:
//!
//! - `OVERSELL`: orders hold, or the sale item counts, more than the stock.
//! - `USER_OVER_LIMIT`: a buyer holds (rows) or is counted (Redis) above the
//!   per-user limit.
//! - `COUNTS_DISAGREE`: the sale item's `available + sold` is not the stock,
//!   or `sold` is not what the orders hold.
//! - `OVERSELL_RISK`: Redis could sell more than DynamoDB has: negative
//!   stock, a buyer counted below what they provably hold, or more units
//!   offered than available.
//! - `STOCK_DRIFT`: Redis offers fewer units than DynamoDB has (undersell).
//! - `LOST_ORDER`: a purchase answered `202` whose order is nowhere: no row,
//!   no reservation, no message (only checkable by whoever saw the `202`).
//! - `LEDGER_DISAGREES`: a buyer's ledger record is not what their rows hold
//!   (checked by [`InvariantChecker::check_sale`], on a settled read).
//!
//! The stock comparison is made only while nothing is in the queue, because
//! in-flight messages move both sides; the counters are compared with the
//! rows and Redis only when they did not move while those were read.
//!
//! Redis is read in bounded steps while the sale runs
//! ([`StockAdmin::snapshot`]): the stock and the reservations are compared
//! only when they were read as at one instant (not
//! [`RedisSnapshot::moving`]), and every buyer whose count the rows and
//! queued reservations do not explain is read again with their own
//! reservations in one step ([`StockAdmin::holdings`]) and judged on that.
//!
//! The checker reads through the ports ([`StockAdmin`], [`CatalogAdmin`],
//! [`OrderLedger`], [`QueueInspector`]); its type parameters default to the
//! live adapters.
//!
//! Its unit tests are in `invariants/tests.rs`.

use crate::adapters::dynamo::catalog::DynamoCatalog;
use crate::adapters::dynamo::orders::DynamoOrders;
use crate::adapters::redis::RedisStock;
use crate::adapters::sqs::SqsInspector;
use crate::app::jobs::JobError;
use crate::domain::ledger::SaleCounters;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::stock_state::{Holding, RedisSnapshot, StoredReservation};
use crate::domain::{OrderId, Sale, SaleId};
use crate::ports::{CatalogAdmin, OrderLedger, QueueError, QueueInspector, StockAdmin};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Violation {
    pub code: &'static str,
    pub detail: String,
}

/// One sale as the three stores see it, read at (about) the same moment.
#[derive(Debug, Clone)]
pub struct SaleState {
    pub sale: Sale,
    pub counters: SaleCounters,
    /// Every order row of the sale, by order id.
    pub rows: BTreeMap<String, Order>,
    /// `None` when Redis does not hold the sale (never loaded, or lost).
    pub redis: Option<RedisSnapshot>,
    pub queue_visible: u64,
    pub queue_in_flight: u64,
    pub dlq_visible: u64,
    /// The sale item's counters read the same after the rows and Redis as
    /// before them: no order was written or released while they were read,
    /// so counters, rows and Redis may be compared with each other.
    pub settled: bool,
}

impl SaleState {
    /// Units each buyer holds in DynamoDB (pending payment or paid).
    pub fn held_by_user(&self) -> HashMap<String, i64> {
        let mut held: HashMap<String, i64> = HashMap::new();
        for o in self.rows.values().filter(|o| holds_units(o.status)) {
            *held.entry(o.user_id.to_string()).or_default() += i64::from(o.quantity.get());
        }
        held
    }

    /// Reservations still `QUEUED` with no row yet: accepted, on their way.
    pub fn queued_without_row(&self) -> impl Iterator<Item = (&String, &StoredReservation)> {
        self.redis
            .iter()
            .flat_map(|snap| snap.reservations.iter())
            .filter(|(id, r)| r.state == "QUEUED" && !self.rows.contains_key(*id))
    }

    /// Units of `EXPIRED` rows that Redis has not been given back yet (the
    /// release crashed between its two steps; reconcile returns them). An
    /// expiry at or before the last stock reset's ledger position is in
    /// the stock already (`stock_seq`), its marker or not.
    pub fn owed_to_redis(&self) -> i64 {
        let Some(snap) = &self.redis else { return 0 };
        self.rows
            .values()
            .filter(|o| o.status == OrderStatus::Expired)
            .filter(|o| match (o.return_seq, snap.stock_seq) {
                (Some(seq), Some(reset)) => seq > reset,
                _ => true,
            })
            .filter(|o| {
                snap.reservations
                    .get(o.order_id.as_str())
                    .map(|r| r.state.as_str())
                    != Some("EXPIRED")
            })
            .map(|o| i64::from(o.quantity.get()))
            .sum()
    }

    /// Whether the queue is quiet enough for the stock comparison.
    pub fn queue_quiet(&self) -> bool {
        self.queue_visible + self.queue_in_flight == 0
    }
}

/// Every invariant the state violates.
pub fn check(state: &SaleState) -> Vec<Violation> {
    let mut out = Vec::new();
    let sale = &state.sale;
    let total = i64::from(sale.total_stock);
    let limit = i64::from(sale.per_user_limit);
    let held_by_user = state.held_by_user();
    let held: i64 = held_by_user.values().sum();
    let SaleCounters {
        available, sold, ..
    } = state.counters;

    if held > total || sold > total {
        out.push(violation(
            "OVERSELL",
            format!("orders hold {held} units, sold {sold}, total {total}"),
        ));
    }
    if state.settled && (sold != held || available + sold != total) {
        out.push(violation(
            "COUNTS_DISAGREE",
            format!(
                "sale item available {available} + sold {sold} vs total {total}; orders hold {held}"
            ),
        ));
    }
    let mut over: Vec<_> = held_by_user.iter().filter(|(_, u)| **u > limit).collect();
    over.sort();
    for (user, units) in over {
        out.push(violation(
            "USER_OVER_LIMIT",
            format!("{user} holds {units} > {limit}"),
        ));
    }

    let Some(snap) = &state.redis else {
        return out;
    };
    if snap.stock < 0 {
        out.push(violation(
            "OVERSELL_RISK",
            format!("Redis stock is {}", snap.stock),
        ));
    }
    let mut queued_by_user: HashMap<&str, i64> = HashMap::new();
    let mut queued_units = 0i64;
    for (_, r) in state.queued_without_row() {
        let units = i64::try_from(r.quantity).unwrap_or(i64::MAX);
        queued_units += units;
        *queued_by_user.entry(r.user_id.as_str()).or_default() += units;
    }
    // A buyer read again with their reservations is judged on that read
    // (their count and reservations at one instant), the others as read.
    let counts = counts_of(snap);
    for (&user, &count) in &counts {
        if count > limit {
            out.push(violation(
                "USER_OVER_LIMIT",
                format!("Redis counts {user} at {count} > {limit}"),
            ));
        }
        let queued = match snap.holdings.get(user) {
            Some(holding) => queued_in(holding, &state.rows),
            None => queued_by_user.get(user).copied().unwrap_or(0),
        };
        let provable = held_by_user.get(user).copied().unwrap_or(0) + queued;
        if count < provable {
            out.push(violation(
                "OVERSELL_RISK",
                format!("{user} holds {provable} units but Redis counts {count}: the limit check could let them buy more"),
            ));
        }
    }
    // A buyer who holds units but has no count at all is the same risk.
    let mut uncounted: Vec<_> = held_by_user
        .iter()
        .filter(|(u, units)| **units > 0 && !counts.contains_key(u.as_str()))
        .collect();
    uncounted.sort();
    for (user, units) in uncounted {
        out.push(violation(
            "OVERSELL_RISK",
            format!("{user} holds {units} units but Redis does not count them"),
        ));
    }
    if state.settled && state.queue_quiet() && !snap.moving {
        let owed = state.owed_to_redis();
        // Units lent by one shard and not yet received by another are still
        // Redis's to sell (reconcile completes the transfer).
        let offered = snap.stock + snap.in_transit + queued_units + owed;
        if offered > available {
            out.push(violation(
                "OVERSELL_RISK",
                format!(
                    "Redis offers {} units plus {} in transit, {queued_units} queued (+{owed} owed back), DynamoDB has {available} available",
                    snap.stock, snap.in_transit
                ),
            ));
        } else if offered < available {
            out.push(violation(
                "STOCK_DRIFT",
                format!(
                    "Redis offers {offered} units (stock {} + in transit {} + queued {queued_units} + owed {owed}) but DynamoDB has {available} available: underselling",
                    snap.stock, snap.in_transit
                ),
            ));
        }
    }
    out
}

/// Each buyer's count: from their [`Holding`] where they were read again,
/// else as read in chunks; buyers Redis does not count are absent.
pub fn counts_of(snap: &RedisSnapshot) -> BTreeMap<&str, i64> {
    let mut counts: BTreeMap<&str, i64> = snap
        .buyers
        .iter()
        .filter(|(user, _)| !snap.holdings.contains_key(*user))
        .map(|(user, &count)| (user.as_str(), count))
        .collect();
    counts.extend(
        snap.holdings
            .iter()
            .filter_map(|(user, h)| h.count.map(|count| (user.as_str(), count))),
    );
    counts
}

/// Units of a buyer's `QUEUED` reservations that have no row yet.
pub fn queued_in(holding: &Holding, rows: &BTreeMap<String, Order>) -> i64 {
    holding
        .reservations
        .iter()
        .filter(|(id, r)| r.state == "QUEUED" && !rows.contains_key(*id))
        .map(|(_, r)| i64::try_from(r.quantity).unwrap_or(i64::MAX))
        .sum()
}

/// The buyers whose count, as read in chunks, is not what their rows and
/// queued reservations explain (read at other moments, so a purchase or a
/// release in between looks like a wrong count): each is read again with
/// their reservations in one step before being judged or repaired. At most
/// [`BUYERS_READ_AGAIN`], by user id; the next run takes the others.
pub fn buyers_to_read_again(rows: &BTreeMap<String, Order>, snap: &RedisSnapshot) -> Vec<String> {
    let mut explained: HashMap<&str, i64> = HashMap::new();
    for o in rows.values().filter(|o| holds_units(o.status)) {
        *explained.entry(o.user_id.as_str()).or_default() += i64::from(o.quantity.get());
    }
    for (id, r) in &snap.reservations {
        if r.state == "QUEUED" && !rows.contains_key(id) {
            *explained.entry(r.user_id.as_str()).or_default() +=
                i64::try_from(r.quantity).unwrap_or(i64::MAX);
        }
    }
    let mut users: BTreeSet<&str> = snap
        .buyers
        .iter()
        .filter(|(user, count)| explained.get(user.as_str()).copied().unwrap_or(0) != **count)
        .map(|(user, _)| user.as_str())
        .collect();
    users.extend(
        explained
            .iter()
            .filter(|(user, units)| **units != 0 && !snap.buyers.contains_key(**user))
            .map(|(user, _)| *user),
    );
    users
        .into_iter()
        .take(BUYERS_READ_AGAIN)
        .map(str::to_owned)
        .collect()
}

/// Buyers read again per observation at most: in a consistent sale none
/// are; a sale Redis lost track of is brought back over a few runs.
pub const BUYERS_READ_AGAIN: usize = 10_000;

/// `LOST_ORDER` for every accepted order id that has no row, no reservation
/// and is not among the ids found in the queues.
pub fn lost_orders(
    state: &SaleState,
    accepted: &[OrderId],
    in_queues: &HashSet<String>,
) -> Vec<Violation> {
    accepted
        .iter()
        .map(OrderId::as_str)
        .filter(|id| !state.rows.contains_key(*id))
        .filter(|id| {
            !state
                .redis
                .as_ref()
                .is_some_and(|s| s.reservations.contains_key(*id))
        })
        .filter(|id| !in_queues.contains(*id))
        .map(|id| {
            violation(
                "LOST_ORDER",
                format!("{id} was accepted but has no row, reservation or message"),
            )
        })
        .collect()
}

/// Reads a sale's state from the stores: the stock store, the catalog, the
/// order ledger and the queue.
#[derive(Clone)]
pub struct InvariantChecker<Q = SqsInspector, S = RedisStock, C = DynamoCatalog, O = DynamoOrders> {
    stock: S,
    catalog: C,
    orders: O,
    queue: Q,
}

impl<Q: QueueInspector, S: StockAdmin, C: CatalogAdmin, O: OrderLedger>
    InvariantChecker<Q, S, C, O>
{
    pub fn new(stock: S, catalog: C, orders: O, queue: Q) -> Self {
        Self {
            stock,
            catalog,
            orders,
            queue,
        }
    }

    pub fn stock(&self) -> &S {
        &self.stock
    }

    pub fn catalog(&self) -> &C {
        &self.catalog
    }

    pub fn orders(&self) -> &O {
        &self.orders
    }

    /// The orders queue and its DLQ.
    pub fn queue(&self) -> &Q {
        &self.queue
    }

    /// The sale's state; `None` when the sale does not exist.
    ///
    /// The stores cannot be read at one instant: an order written or
    /// released between reading the sale item and reading the rows would
    /// look like counts that disagree. So the counters are read again at
    /// the end, and the whole read is taken again (a few times) while they
    /// moved; a state that never settled says so and is not compared.
    pub async fn observe(&self, sale_id: &SaleId) -> Result<Option<SaleState>, JobError> {
        let mut attempt = 1;
        loop {
            let Some(state) = self.observe_once(sale_id).await? else {
                return Ok(None);
            };
            if state.settled || attempt == OBSERVE_ATTEMPTS {
                return Ok(Some(state));
            }
            attempt += 1;
        }
    }

    async fn observe_once(&self, sale_id: &SaleId) -> Result<Option<SaleState>, JobError> {
        let Some((sale, counters)) = self.catalog.get_record(sale_id).await? else {
            return Ok(None);
        };
        let queue = self.queue.depth().await.map_err(queue_error)?;
        let (queue_visible, queue_in_flight) = (queue.visible + queue.delayed, queue.in_flight);
        let dlq_visible = self
            .queue
            .dlq_depth()
            .await
            .map_err(queue_error)?
            .map_or(0, |dlq| dlq.visible + dlq.delayed);
        let rows: BTreeMap<String, Order> = self
            .orders
            .all_orders_of_sale(sale_id)
            .await?
            .into_iter()
            .map(|o| (o.order_id.to_string(), o))
            .collect();
        let mut redis = self.stock.snapshot(sale_id).await?;
        if let Some(snap) = redis.as_mut() {
            let again = buyers_to_read_again(&rows, snap);
            if !again.is_empty() {
                snap.holdings = self
                    .stock
                    .holdings(sale_id, &again)
                    .await?
                    .into_iter()
                    .collect();
            }
        }
        let after = self.catalog.get_record(sale_id).await?;
        let settled = after.is_some_and(|(_, again)| again == counters);
        Ok(Some(SaleState {
            sale,
            counters,
            rows,
            redis,
            queue_visible,
            queue_in_flight,
            dlq_visible,
            settled,
        }))
    }

    /// Every violation of the sale, including `LOST_ORDER` for the accepted
    /// ids given. `None` when the sale does not exist.
    pub async fn check_sale(
        &self,
        sale_id: &SaleId,
        accepted: &[OrderId],
    ) -> Result<Option<Vec<Violation>>, JobError> {
        let Some(state) = self.observe(sale_id).await? else {
            return Ok(None);
        };
        let mut found = check(&state);
        if state.settled {
            found.extend(self.ledger_records(&state).await?);
        }
        let unplaced = lost_orders(&state, accepted, &HashSet::new());
        if !unplaced.is_empty() {
            // Only then look into the queues: peeking costs a receive per
            // message (it counts towards the redrive limit).
            let in_queues = self.queue.order_ids().await.map_err(queue_error)?;
            found.extend(lost_orders(&state, accepted, &in_queues));
        }
        Ok(Some(found))
    }

    /// `LEDGER_DISAGREES` for every buyer whose ledger record is not the
    /// sum of their rows pending payment or paid (the record and the rows
    /// change in one transaction, so they must agree on a settled read).
    async fn ledger_records(&self, state: &SaleState) -> Result<Vec<Violation>, JobError> {
        let held = state.held_by_user();
        let users: Vec<&crate::domain::UserId> = state
            .rows
            .values()
            .map(|o| &o.user_id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let records = self.orders.held_by_all(&state.sale.sale_id, &users).await?;
        let mut out: Vec<Violation> = records
            .iter()
            .filter_map(|(user, &record)| {
                let rows = held.get(user).copied().unwrap_or(0);
                (i64::try_from(record).unwrap_or(i64::MAX) != rows).then(|| {
                    violation(
                        "LEDGER_DISAGREES",
                        format!("{user}: buyer record holds {record}, rows hold {rows}"),
                    )
                })
            })
            .collect();
        out.sort_by(|a, b| a.detail.cmp(&b.detail));
        Ok(out)
    }
}

pub(crate) fn holds_units(status: OrderStatus) -> bool {
    matches!(status, OrderStatus::PendingPayment | OrderStatus::Paid)
}

/// Reads of a sale taken before giving up on a settled one (a busy sale
/// moves its counters all the time; the next run compares them).
const OBSERVE_ATTEMPTS: u32 = 3;

fn queue_error(err: QueueError) -> JobError {
    JobError::Queue(err.0)
}

fn violation(code: &'static str, detail: String) -> Violation {
    Violation { code, detail }
}

#[cfg(test)]
mod tests;
