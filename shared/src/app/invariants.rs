//! The design's invariants, checked over one sale's state in Redis, the queue
//! and DynamoDB. Reconcile runs the same checks before it repairs anything;
//! the chaos scenarios and the benchmark end with them.
//!
//! [`InvariantChecker::observe`] reads the whole state into memory;
//! [`InvariantChecker::read`] reads it into slices of its buyers
//! ([`SaleRead`]: one per [`SLICE_ORDERS`] orders the sale can have, kept
//! on local disk past one) and [`InvariantChecker::judge`] checks a slice
//! at a time, so a check holds a slice, whatever the size of the sale.
//! [`check`] is pure (the whole-sale rules [`check_whole`] over the sums of
//! [`check_buyers`]'s slices), so the rules are unit-tested on hand-built
//! states. The codes:
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
//! - `OFFERED_TWICE`: more offer orders (rows with `offerOf`) than units
//!   expired orders handed to the waitlist (`offeredUnits`), or a buyer
//!   with two offers (one entry per buyer and sale).
//! - `OFFER_LOST`: fewer offer orders than units handed to the waitlist
//!   (on a settled read: the handover writes both in one transaction).
//!
//! The stock comparison is made only while nothing is in the queue, because
//! in-flight messages move both sides; the counters are compared with the
//! rows and Redis only when they did not move while those were read.
//!
//! Redis is read in bounded steps while the sale runs
//! ([`crate::ports::StockReading::snapshot`]): the stock and the reservations are compared
//! only when they were read as at one instant (not
//! [`RedisSnapshot::moving`]), and every buyer whose count the rows and
//! queued reservations do not explain is read again with their own
//! reservations in one step ([`crate::ports::StockReading::holdings`]) and judged on that.
//!
//! The checker reads through the ports ([`StockAdmin`], [`CatalogAdmin`],
//! [`OrderLedger`], [`QueueInspector`]); [`crate::wire::LiveChecker`] is
//! the checker over the live adapters. A big sale's read is kept in slices
//! of its buyers on local disk ([`spill`]).
//!
//! Its unit tests are in `invariants/tests.rs`.

use crate::app::jobs::JobError;
use crate::domain::ledger::SaleCounters;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::stock_state::{Holding, RedisSnapshot, SnapshotHead, StoredReservation};
use crate::domain::{OrderId, Sale, SaleId};
use crate::ports::{CatalogAdmin, OrderLedger, QueueError, QueueInspector, StockAdmin};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Violation {
    pub code: &'static str,
    pub detail: String,
}

/// One sale as the three stores see it, read at (about) the same moment:
/// the whole sale ([`InvariantChecker::observe`]), or one slice of its
/// buyers ([`InvariantChecker::slice`]), whose rows, counts and
/// reservations are those of its buyers only (the whole-sale figures of
/// the stock and the sale item are the sale's).
#[derive(Debug, Clone)]
pub struct SaleState {
    pub sale: Sale,
    pub counters: SaleCounters,
    /// Every order row of the sale (or of the slice's buyers), by order id.
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
            // Units handed to the waitlist are other buyers' orders, not
            // Redis's stock.
            .map(|o| i64::from(o.quantity.get().saturating_sub(o.offered)))
            .sum()
    }

    /// Rows that are offers to the waitlist, by buyer.
    fn offers_by_user(&self) -> BTreeMap<&str, i64> {
        let mut offers: BTreeMap<&str, i64> = BTreeMap::new();
        for o in self.rows.values().filter(|o| o.offer_of.is_some()) {
            *offers.entry(o.user_id.as_str()).or_default() += 1;
        }
        offers
    }

    /// Whether the queue is quiet enough for the stock comparison.
    pub fn queue_quiet(&self) -> bool {
        self.queue_visible + self.queue_in_flight == 0
    }

    /// What this state adds to its sale's sums.
    pub fn totals(&self) -> SaleTotals {
        let mut totals = SaleTotals {
            held: self.held_by_user().values().sum(),
            queued: self
                .queued_without_row()
                .map(|(_, r)| i64::try_from(r.quantity).unwrap_or(i64::MAX))
                .sum(),
            owed: self.owed_to_redis(),
            offers: self.offers_by_user().values().sum(),
            offered: self.rows.values().map(|o| i64::from(o.offered)).sum(),
            ..SaleTotals::default()
        };
        for o in self.rows.values() {
            *totals.orders.entry(o.status.as_str().into()).or_default() += 1;
        }
        for r in self.redis.iter().flat_map(|s| s.reservations.values()) {
            *totals.reservations.entry(r.state.clone()).or_default() += 1;
        }
        totals
    }

    /// What the state knows of the whole sale, besides its buyers.
    fn whole(&self) -> Whole {
        Whole {
            sale: self.sale.clone(),
            counters: self.counters,
            redis: self.redis.as_ref().map(RedisSnapshot::head),
            queue_visible: self.queue_visible,
            queue_in_flight: self.queue_in_flight,
            dlq_visible: self.dlq_visible,
            settled: self.settled,
        }
    }
}

/// The sums over a sale's buyers that the whole-sale checks need, added
/// up slice by slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaleTotals {
    /// Units the rows hold (pending payment or paid).
    pub held: i64,
    /// Units of reservations still `QUEUED` with no row yet.
    pub queued: i64,
    /// Units of `EXPIRED` rows Redis has not been given back yet.
    pub owed: i64,
    /// Rows that are offers to the waitlist (`offerOf`).
    pub offers: i64,
    /// Units expired orders handed to the waitlist (`offeredUnits`).
    pub offered: i64,
    /// Rows by status.
    pub orders: BTreeMap<String, usize>,
    /// Reservations by state.
    pub reservations: BTreeMap<String, usize>,
}

impl SaleTotals {
    pub fn add(&mut self, other: SaleTotals) {
        self.held += other.held;
        self.queued += other.queued;
        self.owed += other.owed;
        self.offers += other.offers;
        self.offered += other.offered;
        for (status, n) in other.orders {
            *self.orders.entry(status).or_default() += n;
        }
        for (state, n) in other.reservations {
            *self.reservations.entry(state).or_default() += n;
        }
    }
}

/// What a read knows of the whole sale, besides its buyers: the sale item,
/// the queues and Redis's stock.
#[derive(Debug, Clone)]
pub struct Whole {
    pub sale: Sale,
    pub counters: SaleCounters,
    /// `None` when Redis does not hold the sale.
    pub redis: Option<SnapshotHead>,
    pub queue_visible: u64,
    pub queue_in_flight: u64,
    pub dlq_visible: u64,
    /// The sale item's counters did not move from before the rows to
    /// after Redis (see [`SaleState::settled`]).
    pub settled: bool,
}

impl Whole {
    pub fn queue_quiet(&self) -> bool {
        self.queue_visible + self.queue_in_flight == 0
    }
}

/// Every invariant the state violates.
pub fn check(state: &SaleState) -> Vec<Violation> {
    check_whole(&state.whole(), &state.totals(), check_buyers(state))
}

/// The invariants of the whole sale, over the sums of its buyers
/// (`totals`), around what its buyers violate (`buyers`, from
/// [`check_buyers`] of each slice).
pub fn check_whole(whole: &Whole, totals: &SaleTotals, buyers: Vec<Violation>) -> Vec<Violation> {
    let mut out = Vec::new();
    let total = i64::from(whole.sale.total_stock);
    let held = totals.held;
    let SaleCounters {
        available, sold, ..
    } = whole.counters;

    if held > total || sold > total {
        out.push(violation(
            "OVERSELL",
            format!("orders hold {held} units, sold {sold}, total {total}"),
        ));
    }
    if whole.settled && (sold != held || available + sold != total) {
        out.push(violation(
            "COUNTS_DISAGREE",
            format!(
                "sale item available {available} + sold {sold} vs total {total}; orders hold {held}"
            ),
        ));
    }
    // Each unit handed to the line is one offer order, written in the
    // same transaction: more orders is a unit offered twice, fewer (when
    // nothing moved during the read) a unit lost on its way.
    let (offers, offered) = (totals.offers, totals.offered);
    if offers > offered {
        out.push(violation(
            "OFFERED_TWICE",
            format!("{offers} offer orders for {offered} units handed to the waitlist"),
        ));
    } else if whole.settled && offers < offered {
        out.push(violation(
            "OFFER_LOST",
            format!("{offered} units handed to the waitlist but {offers} offer orders"),
        ));
    }
    out.extend(buyers);
    let Some(snap) = &whole.redis else {
        return out;
    };
    if snap.stock < 0 {
        out.push(violation(
            "OVERSELL_RISK",
            format!("Redis stock is {}", snap.stock),
        ));
    }
    if whole.settled && whole.queue_quiet() && !snap.moving {
        let (queued_units, owed) = (totals.queued, totals.owed);
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

/// The invariants of each buyer of the state (the whole sale's, or a
/// slice's): the limit, and Redis's count against what they hold.
pub fn check_buyers(state: &SaleState) -> Vec<Violation> {
    let mut out = Vec::new();
    let limit = i64::from(state.sale.per_user_limit);
    let held_by_user = state.held_by_user();
    let mut over: Vec<_> = held_by_user.iter().filter(|(_, u)| **u > limit).collect();
    over.sort();
    for (user, units) in over {
        out.push(violation(
            "USER_OVER_LIMIT",
            format!("{user} holds {units} > {limit}"),
        ));
    }

    for (user, offers) in state.offers_by_user().into_iter().filter(|(_, n)| *n > 1) {
        out.push(violation(
            "OFFERED_TWICE",
            format!("{user} has {offers} offer orders (one entry per buyer)"),
        ));
    }

    let Some(snap) = &state.redis else {
        return out;
    };
    let mut queued_by_user: HashMap<&str, i64> = HashMap::new();
    for (_, r) in state.queued_without_row() {
        let units = i64::try_from(r.quantity).unwrap_or(i64::MAX);
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
        .map(lost_order)
        .collect()
}

fn lost_order(id: &str) -> Violation {
    violation(
        "LOST_ORDER",
        format!("{id} was accepted but has no row, reservation or message"),
    )
}

/// Reads a sale's state from the stores: the stock store, the catalog, the
/// order ledger and the queue.
#[derive(Clone)]
pub struct InvariantChecker<Q, S, C, O> {
    stock: S,
    catalog: C,
    orders: O,
    queue: Q,
    slice_orders: u64,
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
            slice_orders: SLICE_ORDERS,
        }
    }

    /// The same checker cutting its reads into slices of about
    /// `orders` orders (at least 1) in place of [`SLICE_ORDERS`].
    pub fn with_slice_orders(mut self, orders: u64) -> Self {
        self.slice_orders = orders.max(1);
        self
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

    /// The whole sale's state in memory, in one slice; `None` when the
    /// sale does not exist. [`Self::read`] and [`Self::judge`] hold one
    /// slice at a time.
    pub async fn observe(&self, sale_id: &SaleId) -> Result<Option<SaleState>, JobError> {
        let Some(mut read) = self.read_in(sale_id, Some(1)).await? else {
            return Ok(None);
        };
        self.slice(&mut read, 0).await.map(Some)
    }

    /// Every violation of the sale, including `LOST_ORDER` for the accepted
    /// ids given. `None` when the sale does not exist. The sale is read in
    /// slices ([`Self::read`]).
    pub async fn check_sale(
        &self,
        sale_id: &SaleId,
        accepted: &[OrderId],
    ) -> Result<Option<Vec<Violation>>, JobError> {
        let Some(mut read) = self.read(sale_id).await? else {
            return Ok(None);
        };
        let judged = self.judge(&mut read, true, accepted).await?;
        let mut found = judged.violations;
        if !judged.unplaced.is_empty() {
            // Only then look into the queues: peeking costs a receive per
            // message (it counts towards the redrive limit).
            let in_queues = self.queue.order_ids().await.map_err(queue_error)?;
            found.extend(
                judged
                    .unplaced
                    .iter()
                    .map(OrderId::as_str)
                    .filter(|id| !in_queues.contains(*id))
                    .map(lost_order),
            );
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

fn spill_error(err: spill::SpillError) -> JobError {
    JobError::Spill(err.to_string())
}

fn violation(code: &'static str, detail: String) -> Violation {
    Violation { code, detail }
}

mod read;
pub mod spill;
pub use read::{Judgement, MAX_SLICES, SLICE_ORDERS, SaleRead};

#[cfg(test)]
mod tests;
