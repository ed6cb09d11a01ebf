//! Reconciliation: compare Redis (stock, buyers, reservations by state), the
//! queue (visible, in flight, DLQ) and DynamoDB (sale item, orders by status)
//! for one sale; check the invariants of `docs/design.md`; repair only what is provably
//! safe; report everything else.
//!
//! Repairs:
//! - a `QUEUED` reservation older than the grace period with no order row is
//!   relayed to the queue again (the outbox relay for a crash between Redis
//!   and SQS; a duplicate delivery writes nothing twice);
//! - one older than the maximum age is given up: recorded as a `REJECTED`
//!   row (so a late redrive cannot resurrect it), its stock released; if the
//!   order was written meanwhile, the row decides and nothing is released;
//! - a reservation whose row exists is marked `WRITTEN` / `REJECTED`;
//! - an order `EXPIRED` in DynamoDB whose units Redis never got back gets
//!   them back (the release crashed between its two steps);
//! - a buyer count above what the buyer provably holds (rows, or Redis's
//!   own live reservations) is lowered, on a settled read only, and only if
//!   it is still the count that was read (compare and set);
//! - a transfer between shards whose units left one shard and never reached
//!   the other (the borrow died between its steps) is completed.
//!
//! - a buyer count below what the ledger proves is raised to it, and a
//!   sale's stock is set to what the ledger leaves for it (`available`
//!   less what is reserved without a row and what is owed back), both on a
//!   settled read with nothing in flight, compare-and-set: Redis is derived
//!   from the ledger (invariant 8), and both repairs only bring it back.
//!
//! The violations are [`crate::app::invariants::check`] of what was read, before
//! any repair. `OVERSELL_RISK` is reported (and pages) whether or not a
//! repair followed: DynamoDB's conditions stopped any oversell, but an
//! operator should know Redis was wrong.
//!
//! # A sale of any size
//!
//! A run reads the sale into slices of its buyers
//! ([`InvariantChecker::read`]), judges them one at a time, and, once the
//! violations are confirmed, repairs them one at a time (each slice loaded
//! again, its unexplained buyers read again): the reservations, expiries
//! and buyers of a slice, then what belongs to the whole sale (transfers
//! between shards, the stock reset, on the sums over every slice). A
//! buyer's rows, count and reservations are in one slice, so every
//! per-buyer rule and repair sees what it saw on a whole read.
//!
//! # Reading Redis while the sale runs
//!
//! A run never stalls the sale: every Redis command it sends touches at
//! most [`crate::adapters::redis::SCAN_CHUNK`] entries or one buyer's orders,
//! whatever the number of buyers and reservations (one script reading the
//! whole sale held every purchase behind it for as long as it ran: 0.6-0.9 s
//! for 200,000 buyers), and a scan sends at most one chunk every
//! [`crate::adapters::redis::SCAN_INTERVAL`], so it never takes more than a
//! small share of Redis from the purchases. The checks were written for numbers taken at one
//! instant; the chunked read ([`crate::ports::StockReading::snapshot`]) keeps what they
//! rely on:
//!
//! - **The stock against the ledger** (`OVERSELL_RISK`/`STOCK_DRIFT` on the
//!   stock, and `STOCK_RESET`) needs the stock and every reservation at one
//!   instant. They are read between two O(1) reads of the stock, meta
//!   `version` and `epoch` and the hashes' lengths; every script that
//!   changes the stock or a reservation bumps `epoch`, except the purchase,
//!   which always lowers the stock. So if both reads agree (and the scan saw
//!   as many entries as the hashes hold), no script changed them in between:
//!   the chunks are exactly what one script would have read at any moment
//!   of the window. Otherwise the read is taken again; after three it is
//!   `moving`, and the comparison and the reset wait for the next run, as
//!   they do when the counters move (`countsCompared: false`). The reset
//!   stays compare-and-set on the stock that was read.
//! - **A buyer's count against their holding** (`OVERSELL_RISK` for a count
//!   below it, `BUYER_CLEARED`, `BUYER_RAISED`) needs the count and that
//!   buyer's reservations at one instant. Counts are scanned without a
//!   bracket (a million buyers are never still for a whole scan); every
//!   buyer whose count the rows and queued reservations do not explain is
//!   read again with their own reservations in one step (`holding.lua`)
//!   and judged and repaired on that read alone. So a count is never
//!   lowered below a live reservation of theirs, and the set is still
//!   compare-and-set on the count read in that step: a purchase or release
//!   since is never erased. Buyers whose scanned count is explained are not
//!   read again; if the scan missed a change of theirs, the next run sees it.
//! - **Settled reads** are unchanged: the sale item's counters are read
//!   before the rows and after Redis (buyers read again included), and the
//!   buyer repairs and the stock comparison run only when they did not move.
//! - **Confirm-after** is unchanged: a read that shows violations is taken
//!   again after [`ReconcileSettings::confirm_after`], and only what shows
//!   both times is reported; a chunk skew that looked like a violation once
//!   does not repeat.
//! - Per-reservation repairs (relay, give-up, marking, returns) were always
//!   safe on a stale read (each is idempotent or compare-and-set in its own
//!   script), so a reservation read a moment earlier than another changes
//!   nothing for them.

use crate::app::invariants::{self, InvariantChecker, SaleState};
use crate::app::jobs::JobError;
use crate::clock;
use crate::domain::orders::OrderStatus;
use crate::domain::{Sale, SaleId};
use crate::observe::metrics::{Counter, Metrics};
use crate::ports::{
    CatalogAdmin, OrderLedger, OrderQueue, QueueInspector, SaleCatalog, StockAdmin,
};

mod repair;
mod report;
pub use report::{ReconcileReport, ReconcileSettings, Repair, Violation};

/// How often the schedule runs reconcile (`template.yaml`'s
/// `ReconcileFunction` schedule, `rate(5 minutes)`).
pub const RUN_PERIOD_MS: i64 = 300_000;

/// Reconciles sales over the ports ([`crate::wire::reconciler`] builds
/// one over the live adapters).
pub struct Reconciler<Q, I, S, C, O> {
    checker: InvariantChecker<I, S, C, O>,
    queue: Q,
    settings: ReconcileSettings,
    metrics: Metrics,
    /// Finishes lottery draws nobody drove ([`Self::with_lottery`]).
    lottery: Option<std::sync::Arc<dyn crate::app::draw::Lottery>>,
}

impl<Q, I, S, C, O> Reconciler<Q, I, S, C, O>
where
    Q: OrderQueue,
    I: QueueInspector,
    S: StockAdmin,
    C: CatalogAdmin,
    O: OrderLedger,
{
    /// `queue` relays reservations that never reached the queue; `inspector`
    /// reads the same queue (and its DLQ).
    pub fn new(
        stock: S,
        catalog: C,
        orders: O,
        queue: Q,
        inspector: I,
        settings: ReconcileSettings,
    ) -> Self {
        let checker = InvariantChecker::new(stock, catalog, orders, inspector);
        Self {
            checker,
            queue,
            settings,
            metrics: Metrics::off(),
            lottery: None,
        }
    }

    /// The same reconciler finishing, on each run, the draw of every sale
    /// whose lottery window has closed: purchases and ticket holders' reads
    /// drive a draw, but a sale nobody visits after its window still gets
    /// its draw within a run.
    pub fn with_lottery(mut self, lottery: std::sync::Arc<dyn crate::app::draw::Lottery>) -> Self {
        self.lottery = Some(lottery);
        self
    }

    /// The same reconciler counting into `metrics` (`ReconcileViolations`,
    /// `OversellRisk`, `ReconcileRepairs`) under the function that runs it.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The invariant checker over the same stores.
    pub fn checker(&self) -> &InvariantChecker<I, S, C, O> {
        &self.checker
    }

    pub fn catalog(&self) -> &C {
        self.checker.catalog()
    }

    /// The same reconciler reading sales in slices of about `orders`
    /// orders ([`InvariantChecker::with_slice_orders`]).
    pub fn with_slice_orders(mut self, orders: u64) -> Self {
        self.checker = self.checker.with_slice_orders(orders);
        self
    }

    /// The same reconciler with other grace and maximum ages.
    pub fn with_settings(mut self, settings: ReconcileSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Reconciles every sale that is running or ended within the key TTL,
    /// while there is time: no sale is started at or past `deadline`, but
    /// every run reconciles one at least. The sales are taken in turn
    /// from one that moves on by one every [`RUN_PERIOD_MS`], so runs cut
    /// short by big sales still reach every sale within as many runs as
    /// there are sales (always starting from the first, the same ones were
    /// reconciled and the rest never).
    pub async fn reconcile_all(
        &self,
        now_ms: i64,
        deadline: std::time::Instant,
    ) -> Result<Vec<ReconcileReport>, JobError> {
        let mut open: Vec<Sale> = SaleCatalog::list_sales(self.catalog())
            .await?
            .into_iter()
            .filter(|sale| {
                now_ms >= sale.start_ms
                    && now_ms < sale.end_ms + crate::domain::stock_state::KEY_TTL_AFTER_END_MS
            })
            .collect();
        open.sort_by(|a, b| a.sale_id.cmp(&b.sale_id));
        let turn = usize::try_from(now_ms.div_euclid(RUN_PERIOD_MS)).unwrap_or(0);
        let first = turn % open.len().max(1);
        open.rotate_left(first);
        let mut reports = Vec::new();
        for (done, sale) in open.iter().enumerate() {
            if done > 0 && std::time::Instant::now() >= deadline {
                tracing::warn!(
                    reconciled = done,
                    left = open.len() - done,
                    "reconcile ran out of time; the next runs start further on"
                );
                break;
            }
            if let Some(report) = self.reconcile_sale(&sale.sale_id, now_ms).await? {
                reports.push(report);
            }
        }
        Ok(reports)
    }

    /// Finishes a closed lottery window's draw that is not done, unless the
    /// sale has ended (nothing is decided after the end); whether it
    /// ran (the sale is then read again, so the run judges it as the draw
    /// left it). A sale without a window, or whose draw is over, costs
    /// nothing more: the sale was read already.
    async fn finish_draw(&self, sale: &Sale, now_ms: i64) -> bool {
        let Some(lottery) = &self.lottery else {
            return false;
        };
        if sale.window_end_ms().is_none_or(|closes| now_ms < closes) || now_ms >= sale.end_ms {
            return false;
        }
        if matches!(lottery.progress(&sale.sale_id).await, Ok(Some(p)) if p.done) {
            return false;
        }
        crate::app::draw::finish(lottery.as_ref(), &sale.sale_id).await;
        true
    }

    /// Reconciles one sale; `None` when it does not exist. The sale is
    /// read, judged and repaired a slice of its buyers at a time
    /// ([`InvariantChecker::read`]).
    pub async fn reconcile_sale(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> Result<Option<ReconcileReport>, JobError> {
        let Some(mut read) = self.checker.read(sale_id).await? else {
            return Ok(None);
        };
        if self.finish_draw(&read.whole.sale, now_ms).await {
            let Some(drawn) = self.checker.read(sale_id).await? else {
                return Ok(None);
            };
            read = drawn;
        }
        let mut judged = self.checker.judge(&mut read, false, &[]).await?;
        if !judged.violations.is_empty() {
            tokio::time::sleep(self.settings.confirm_after).await;
            let Some(mut again) = self.checker.read(sale_id).await? else {
                return Ok(None);
            };
            let seen_first: Vec<&'static str> = judged.violations.iter().map(|v| v.code).collect();
            judged = self.checker.judge(&mut again, false, &[]).await?;
            judged.violations.retain(|v| seen_first.contains(&v.code));
            read = again;
        }
        let whole = &read.whole;
        let mut report = ReconcileReport {
            sale_id: sale_id.to_string(),
            at: clock::rfc3339_ms(now_ms),
            total_stock: i64::from(whole.sale.total_stock),
            available: whole.counters.available,
            sold: whole.counters.sold,
            queue_visible: whole.queue_visible,
            queue_in_flight: whole.queue_in_flight,
            dlq_visible: whole.dlq_visible,
            redis_loaded: whole.redis.is_some(),
            redis_stock: whole.redis.as_ref().map(|s| s.stock),
            // Judged on what was read, before any repair changes it.
            violations: std::mem::take(&mut judged.violations),
            counts_compared: whole.settled && whole.redis.as_ref().is_none_or(|s| !s.moving),
            ..ReconcileReport::default()
        };
        for status in [
            OrderStatus::PendingPayment,
            OrderStatus::Paid,
            OrderStatus::Expired,
            OrderStatus::Rejected,
        ] {
            report.orders.insert(status.as_str().into(), 0);
        }
        for (status, n) in &judged.totals.orders {
            *report.orders.entry(status.clone()).or_default() += n;
        }
        report.reservations = judged.totals.reservations.clone();
        if read.whole.redis.is_some() {
            read.rewind();
            for k in 0..read.slices() {
                let state = self.checker.slice(&mut read, k).await?;
                if let Some(snap) = &state.redis {
                    self.repair_buyers(&state, snap, now_ms, &mut report).await;
                }
            }
            self.repair_whole(&read.whole, &judged.totals, now_ms, &mut report)
                .await;
        }
        self.store(sale_id, &report).await;
        self.count(&report);
        tracing::info!(
            sale_id = %sale_id,
            violations = report.violations.len(),
            repairs = report.repairs.len(),
            slices = read.slices(),
            "reconciled"
        );
        Ok(Some(report))
    }

    /// The repairs of one run over a state read earlier (the tests hand it
    /// a stale read, as a run whose stores moved after its read would see).
    /// Returns what was repaired, and what could not be.
    pub async fn repair_observed(
        &self,
        state: &SaleState,
        now_ms: i64,
    ) -> (Vec<Repair>, Vec<Violation>) {
        let mut report = ReconcileReport::default();
        if let Some(snap) = &state.redis {
            self.repair_buyers(state, snap, now_ms, &mut report).await;
            let whole = invariants::Whole {
                sale: state.sale.clone(),
                counters: state.counters,
                redis: Some(snap.head()),
                queue_visible: state.queue_visible,
                queue_in_flight: state.queue_in_flight,
                dlq_visible: state.dlq_visible,
                settled: state.settled,
            };
            self.repair_whole(&whole, &state.totals(), now_ms, &mut report)
                .await;
        }
        (report.repairs, report.violations)
    }

    /// Every report counts, zeros included: "nothing found" is a data point
    /// the `OversellRisk` alarm can tell from "reconcile did not run".
    fn count(&self, report: &ReconcileReport) {
        let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let oversell = report
            .violations
            .iter()
            .filter(|v| v.code == "OVERSELL_RISK")
            .count();
        self.metrics
            .count(Counter::ReconcileViolations, len(report.violations.len()));
        self.metrics.count(Counter::OversellRisk, len(oversell));
        self.metrics
            .count(Counter::ReconcileRepairs, len(report.repairs.len()));
    }

    /// The last report is kept on the sale item for the admin API.
    async fn store(&self, sale_id: &SaleId, report: &ReconcileReport) {
        let json = serde_json::to_string(report).unwrap_or_default();
        if let Err(err) = self.catalog().store_report(sale_id, &json).await {
            tracing::warn!(sale_id = %report.sale_id, %err, "could not store the reconcile report");
        }
    }
}

#[cfg(test)]
mod tests;
