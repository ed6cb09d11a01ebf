//! The scheduled jobs that keep Redis and DynamoDB in step around a sale:
//! prewarm (load sales before they start; rebuild a running sale whose keys
//! vanished) and the unpaid release (expire orders past their payment
//! window and give their units back).
//!
//! Written against the ports ([`StockAdmin`], [`CatalogAdmin`],
//! [`OrderLedger`], [`QueueInspector`]); [`crate::wire::jobs`] builds
//! them over the live adapters.

use crate::app::release::Released;
use crate::domain::ledger::{LedgerPage, LedgerPosition, SaleCounters};
use crate::domain::stock_state::{LoadOutcome, Returned};
use crate::domain::{SaleId, SalePhase};
use crate::observe::metrics::{Counter, Metrics};
use crate::ports::{
    CatalogAdmin, CatalogError, OrderLedger, OrderStoreError, QueueDepth, QueueInspector,
    StockAdmin, StoreError,
};
use std::time::{Duration, Instant};

/// Pages of the ledger read ahead of a rebuild's staging: enough to keep
/// the index reads busy while Redis takes a page, few enough that the job's
/// memory is a handful of pages whatever the size of the sale.
pub const LEDGER_PAGES_AHEAD: usize = 4;

/// How long after its end a sale may still have an order pending payment:
/// a reservation may become an order until reconcile gives it up (an hour
/// after it was made: `ReconcileSettings::max_age`), and the payment window
/// (at most 24 h) starts at that write. An hour more for the slack.
const PENDING_HORIZON_MS: i64 = (24 + 1 + 1) * 3_600_000;
/// Orders expired per query (two of the ledger's batches of expiries); the
/// job loops until none are due or time is up.
const RELEASE_CHUNK: usize = 98;
/// Sales release-unpaid works on at once. Each sale's chunks go one after
/// another, so many sales ending together share a run instead of queueing
/// behind the first; bounded, so the run's calls stay a handful at a time.
const RELEASE_SALES_AT_ONCE: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Orders(#[from] OrderStoreError),
    #[error("queue attributes unavailable: {0}")]
    Queue(String),
    #[error("{0}")]
    Spill(String),
}

/// Loads a sale into Redis (or refreshes it there), marking it loaded on
/// the sale item first ([`CatalogAdmin::mark_loaded`]): a later loss of
/// its keys is then known to be one, and its rebuild waits for the queue.
/// Prewarm, the local stack's demo sale and the test and bench set-ups all
/// load through here.
pub async fn mark_and_load(
    catalog: &impl CatalogAdmin,
    stock: &impl StockAdmin,
    sale: &crate::domain::Sale,
    now_ms: i64,
) -> Result<LoadOutcome, JobError> {
    CatalogAdmin::mark_loaded(catalog, &sale.sale_id, now_ms).await?;
    Ok(crate::ports::StockLoading::load_sale(stock, sale, now_ms).await?)
}

/// What prewarm did for one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrewarmOutcome {
    NotFound,
    /// Starts later than the lead time.
    NotDue,
    Ended,
    /// Already loaded: window, limit and expiry refreshed, stock untouched.
    Refreshed,
    /// Loaded now, from the sale item and its orders.
    Loaded {
        stock: i64,
        buyers: usize,
    },
    /// Running and missing from Redis, but accepted orders may still be on
    /// their way: messages on the orders queue, or in the DLQ (orders the
    /// writer could not write yet, which a redrive will). Rebuilding now
    /// could sell their units again; the sale stays paused (503) until an
    /// operator redrives or clears the DLQ and the queue drains.
    WaitingForQueue {
        in_flight: u64,
        dlq: u64,
    },
    /// Running and missing from Redis, its loss noticed less than the
    /// settling time ago: a zero queue count read now may still be the
    /// count from before the last accepted orders were sent (SQS's counts
    /// lag), so none is trusted before `until_ms`.
    Settling {
        until_ms: i64,
    },
    /// Another run holds the lock.
    Busy,
}

/// What one unpaid-release run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseReport {
    pub expired: usize,
    pub units_returned: u64,
    /// Of those units, the ones offered to buyers on the sale's waitlist
    /// (as new orders) instead of going back to the stock.
    pub units_offered: u64,
    /// Expired in DynamoDB while the sale had no Redis keys: the rebuild
    /// reads the units from the sale item.
    pub redis_missing: usize,
    pub errors: Vec<String>,
    /// Stopped at the deadline with orders possibly still due.
    pub stopped_early: bool,
}

impl ReleaseReport {
    /// Adds another sale's report to this run's.
    fn absorb(&mut self, other: ReleaseReport) {
        self.expired += other.expired;
        self.units_returned += other.units_returned;
        self.units_offered += other.units_offered;
        self.redis_missing += other.redis_missing;
        self.errors.extend(other.errors);
        self.stopped_early |= other.stopped_early;
    }
}

/// How often prewarm writes a sale again that changed in the table while
/// it was writing it ([`Jobs::follow_the_table`]).
const FOLLOW_ATTEMPTS: usize = 5;

pub struct Jobs<Q, S, C, O> {
    stock: S,
    catalog: C,
    orders: O,
    /// The orders queue and its DLQ, to tell whether messages are in flight
    /// (a rebuild waits while either holds accepted orders not written yet).
    queue: Option<Q>,
    lead: Duration,
    /// How long after a loss is noticed a zero queue count is trusted
    /// ([`Jobs::with_settle`]).
    settle: Duration,
    metrics: Metrics,
}

impl<Q: QueueInspector, S: StockAdmin, C: CatalogAdmin, O: OrderLedger> Jobs<Q, S, C, O> {
    pub fn new(stock: S, catalog: C, orders: O, queue: Option<Q>, lead: Duration) -> Self {
        Self {
            stock,
            catalog,
            orders,
            queue,
            lead,
            settle: Duration::ZERO,
            metrics: Metrics::off(),
        }
    }

    /// The rebuild of a lost sale trusts a zero count of the orders queue
    /// and its DLQ only once `settle` has passed since the loss was first
    /// noticed: the last purchases accepted before it may still be sending
    /// (up to their SQS timeout), and what they sent may be missing from
    /// the counts for as long as the counts lag (about a minute, AWS says).
    /// [`crate::config::Config::rebuild_settle`] is both; zero (the
    /// default, for in-memory tests) trusts the first zero.
    pub fn with_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// The same jobs counting into `metrics` (`SalesPrewarmed`, `Releases`,
    /// `ReleasedUnits`) under the function that runs them.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn stock(&self) -> &S {
        &self.stock
    }

    /// The catalog, for this crate's use cases only: a function reaches
    /// the sales table through them ([`crate::app::operators`],
    /// [`crate::app::console`]), never through the adapter.
    pub(crate) fn catalog(&self) -> &C {
        &self.catalog
    }

    pub fn orders(&self) -> &O {
        &self.orders
    }

    /// An operator's pause or resume (already kept in the sales table) on
    /// every key group Redis holds: the next purchase obeys it. Returns how
    /// many groups took it (0: Redis does not hold the sale; its next load
    /// or rebuild reads the status from the table).
    pub async fn apply_status(&self, sale: &crate::domain::Sale) -> Result<u32, JobError> {
        Ok(self.stock.set_status(sale).await?)
    }

    /// Prewarm every sale that needs it. A sale that fails does not stop
    /// the run (one bad sale, or one down shard, would keep every sale
    /// after it unloaded): the others are prewarmed, then the run fails
    /// with the first error, each logged.
    pub async fn prewarm_all(
        &self,
        now_ms: i64,
    ) -> Result<Vec<(SaleId, PrewarmOutcome)>, JobError> {
        // A run that loads nothing is a 0, not a gap in the graph.
        self.metrics.count(Counter::SalesPrewarmed, 0);
        let mut done = Vec::new();
        let mut first_error = None;
        for sale in self.catalog.list_sales().await? {
            // An ended sale too, for as long as its keys may exist: Redis
            // can go back in time (a replica promoted before it had the
            // end, a node restarted from an older snapshot) and sell it
            // again under its old end; `prewarm_sale` writes the end back.
            if sale
                .end_ms
                .saturating_add(crate::domain::stock_state::KEY_TTL_AFTER_END_MS)
                <= now_ms
            {
                continue;
            }
            let outcome = match self.prewarm_sale(&sale.sale_id, now_ms).await {
                Ok(outcome) => outcome,
                Err(err) => {
                    tracing::warn!(sale_id = %sale.sale_id, %err, "prewarm of a sale failed; the run goes on");
                    first_error.get_or_insert(err);
                    continue;
                }
            };
            if !matches!(outcome, PrewarmOutcome::NotDue | PrewarmOutcome::Ended) {
                tracing::info!(sale_id = %sale.sale_id, ?outcome, "prewarm");
            }
            done.push((sale.sale_id, outcome));
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(done),
        }
    }

    /// Loads one sale if it starts within the lead time or is running and
    /// missing; exactly once under concurrent runs.
    pub async fn prewarm_sale(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> Result<PrewarmOutcome, JobError> {
        let Some((sale, counters)) = self.catalog.get_record(sale_id).await? else {
            return Ok(PrewarmOutcome::NotFound);
        };
        let lead_ms = i64::try_from(self.lead.as_millis()).unwrap_or(i64::MAX);
        if sale.phase_at(now_ms) == SalePhase::Ended {
            // An end moved earlier (even into the past) reaches Redis at
            // once: the script answers 410 SALE_ENDED from the next request.
            if self.stock.view(sale_id, None).await?.is_some()
                && self.stock.refresh_sale(&sale, counters.version).await?
            {
                self.follow_the_table(sale).await?;
            }
            return Ok(PrewarmOutcome::Ended);
        }
        // A sale Redis holds is refreshed whenever it changes, however far
        // its start (an edit that moved a loaded sale's start beyond the
        // lead used to leave the old start in Redis, selling from it).
        let loaded = self.stock.view(sale_id, None).await?;
        if loaded.is_none() && now_ms < sale.start_ms.saturating_sub(lead_ms) {
            return Ok(PrewarmOutcome::NotDue);
        }
        if let Some(view) = loaded {
            // Also marks sales loaded before the mark existed.
            self.catalog.mark_loaded(sale_id, now_ms).await?;
            // A refresh only: keys lost since the view are rebuilt from the
            // ledger below, never made anew here with the whole stock.
            if self.stock.refresh_sale(&sale, counters.version).await? {
                if sale.phase_at(now_ms) == SalePhase::Live {
                    self.metrics
                        .stock_left(sale_id.as_str(), view.remaining, sale.total_stock);
                }
                self.follow_the_table(sale).await?;
                return Ok(PrewarmOutcome::Refreshed);
            }
        }
        let token = format!("prewarm-{now_ms}-{}", std::process::id());
        if !self
            .stock
            .try_lock(sale_id, "prewarm", &token, Duration::from_secs(30))
            .await?
        {
            return Ok(PrewarmOutcome::Busy);
        }
        let mut outcome = self.load_from_truth(&sale, counters, now_ms).await;
        if let Ok(PrewarmOutcome::Loaded { .. }) = outcome {
            self.metrics.count(Counter::SalesPrewarmed, 1);
            if let Err(err) = self.follow_the_table(sale).await {
                outcome = Err(err);
            }
        }
        if let Err(err) = self.stock.unlock(sale_id, "prewarm", &token).await {
            // It expires by itself; the next run just waits a little.
            tracing::warn!(%sale_id, %err, "could not release the prewarm lock");
        }
        outcome
    }

    /// Prewarm writes the sale as it read it; an operator's pause, resume,
    /// end or edit that reached the table after that read would be undone
    /// by the write (its own Redis step either found no keys, during a
    /// rebuild, or came before this write). So the table is read again,
    /// consistently, after the write, and the sale written again until
    /// what Redis was given is what the table holds: a command that lands
    /// after the last read applies its own Redis step after this write.
    ///
    /// A load never opens a sale (`load_sale.lua`): a new key group is made
    /// closed (`LOADING`), and so is a loaded one given a paused sale. Only
    /// once a read made after the write says the sale is live does prewarm
    /// open it, and [`crate::ports::StockRepair::open_loaded`] opens only what a load
    /// closed: a pause that lands between that read and the opening has
    /// set `PAUSED`, which stays.
    async fn follow_the_table(&self, mut written: crate::domain::Sale) -> Result<(), JobError> {
        for _ in 0..FOLLOW_ATTEMPTS {
            let Some((table, counters)) = self.catalog.get_record(&written.sale_id).await? else {
                return Ok(());
            };
            if table == written {
                if !table.paused {
                    self.stock.open_loaded(&table).await?;
                }
                return Ok(());
            }
            if !self.stock.refresh_sale(&table, counters.version).await? {
                // Lost meanwhile: the next run rebuilds it from the ledger.
                return Ok(());
            }
            written = table;
        }
        // Commands faster than a read and a write, for this long: the
        // next run (and every command's own Redis step) carries on.
        tracing::warn!(sale_id = %written.sale_id, "the sale kept changing while prewarm wrote it");
        Ok(())
    }

    async fn load_from_truth(
        &self,
        sale: &crate::domain::Sale,
        counters: SaleCounters,
        now_ms: i64,
    ) -> Result<PrewarmOutcome, JobError> {
        // A live sale whose keys are missing was either lost (Redis
        // restarted: purchases it accepted may still be on the queue or in
        // the DLQ, and the rebuild must wait for them) or never loaded
        // (created already live: nothing can be on its way, so it loads at
        // once).
        let loaded_before =
            self.catalog.mark_loaded(&sale.sale_id, now_ms).await? || counters.sold > 0;
        let mut noticed = None;
        if loaded_before && sale.phase_at(now_ms) == SalePhase::Live {
            if !self.settle.is_zero() {
                // Kept long enough to outlast a queue that takes a while to
                // drain; a later notice only waits longer, never less.
                let at = self
                    .stock
                    .note_loss(&sale.sale_id, now_ms, self.settle.saturating_mul(10))
                    .await?;
                let until_ms =
                    at.saturating_add(i64::try_from(self.settle.as_millis()).unwrap_or(i64::MAX));
                if now_ms < until_ms {
                    tracing::warn!(sale_id = %sale.sale_id, until_ms, "live sale missing from Redis; no queue count is trusted until the sends and the counts have settled");
                    return Ok(PrewarmOutcome::Settling { until_ms });
                }
                noticed = Some(at);
            }
            let (in_flight, dlq) = self.in_flight().await?;
            if in_flight + dlq > 0 {
                tracing::warn!(sale_id = %sale.sale_id, in_flight, dlq, "live sale missing from Redis; waiting for the queue and the DLQ to drain before rebuilding");
                return Ok(PrewarmOutcome::WaitingForQueue { in_flight, dlq });
            }
        }
        // Surviving shards first, the ledger after (see `Survivors`).
        let survivors = self.stock.survivors(sale).await?;
        // Made closed: the sale was read before the ledger, and a pause
        // since then found no keys to pause; `follow_the_table` opens it
        // once a later read says it is live.
        let closed = crate::domain::Sale {
            paused: true,
            ..sale.clone()
        };
        let mut rebuild = self.stock.begin_rebuild(&closed, now_ms, survivors).await?;
        let at = self.stage_ledger(&sale.sale_id, &mut rebuild).await?;
        let Some(buyers) = self.stock.commit_rebuild(rebuild, at).await? else {
            return Ok(PrewarmOutcome::Refreshed);
        };
        if let Some(at) = noticed
            && let Err(err) = self
                .stock
                .unlock(&sale.sale_id, "loss", &at.to_string())
                .await
        {
            // It expires by itself; a later loss then waits from its own
            // notice once the old one has gone.
            tracing::warn!(sale_id = %sale.sale_id, %err, "could not clear the noticed loss");
        }
        Ok(PrewarmOutcome::Loaded {
            stock: at.available,
            buyers: usize::try_from(buyers).unwrap_or(usize::MAX),
        })
    }

    /// What Redis is derived from: the sale item's `available` and
    /// `returnSeq` (one consistent read), then every order row, staged a
    /// page at a time as the index hands them over (at most
    /// [`LEDGER_PAGES_AHEAD`] pages wait: the job holds a few pages, not
    /// the sale). An expiry after that read has a higher `returnSeq` and no
    /// marker, so its return is still made once; one before it is in
    /// `available` and gets an `EXPIRED` marker.
    pub async fn stage_ledger(
        &self,
        sale_id: &SaleId,
        rebuild: &mut S::Rebuild,
    ) -> Result<LedgerPosition, JobError> {
        let Some((_, counters)) = self.catalog.get_record(sale_id).await? else {
            return Err(JobError::Catalog(CatalogError::Malformed(format!(
                "sale {sale_id} vanished during its rebuild"
            ))));
        };
        let at = LedgerPosition {
            available: counters.available,
            return_seq: counters.return_seq,
        };
        let (pages, mut read) = tokio::sync::mpsc::channel(LEDGER_PAGES_AHEAD);
        let reader = self.orders.send_orders_of_sale(sale_id, pages);
        // Owns the receiver: a failed stage drops it, which stops the
        // reader instead of leaving it waiting on a full channel.
        let stager = async move {
            while let Some(rows) = read.recv().await {
                self.stock
                    .stage_rebuild(rebuild, &LedgerPage::of_rows(&rows, at))
                    .await?;
            }
            Ok::<(), JobError>(())
        };
        // The stage's error first: a reader stopped by it only says so.
        let (read_result, staged) = tokio::join!(reader, stager);
        staged?;
        read_result?;
        Ok(at)
    }

    /// Messages on the orders queue (visible, in flight or delayed) and in
    /// its DLQ. Unknown (no queue configured) counts as in flight: never
    /// rebuild blind.
    async fn in_flight(&self) -> Result<(u64, u64), JobError> {
        let Some(queue) = &self.queue else {
            return Ok((u64::MAX, 0));
        };
        // Messages move between the two queues while they are read: SQS
        // moves one to the DLQ after its last receive, a redrive sends one
        // back and then deletes it from the DLQ. Queue, DLQ, queue again:
        // a move either way is seen by one of the reads (to the DLQ: the
        // first read still sees it, or the DLQ's does; from the DLQ: the
        // DLQ's read still sees it, or the second queue read does).
        let first = queue.depth().await.map_err(|e| JobError::Queue(e.0))?;
        let dlq = queue
            .dlq_depth()
            .await
            .map_err(|e| JobError::Queue(e.0))?
            .map_or(0, QueueDepth::total);
        let second = queue.depth().await.map_err(|e| JobError::Queue(e.0))?;
        Ok((first.total().max(second.total()), dlq))
    }

    /// Expires every order past its payment window, in chunks, until none is
    /// due or `deadline` comes (then the next run goes on), up to
    /// [`RELEASE_SALES_AT_ONCE`] sales at a time. Harmless to re-run: each
    /// expiry is conditional, and so is giving the units back.
    pub async fn release_unpaid(
        &self,
        now_ms: i64,
        deadline: Instant,
    ) -> Result<ReleaseReport, JobError> {
        let mut report = ReleaseReport::default();
        self.metrics.count(Counter::Releases, 0);
        self.metrics.count(Counter::ReleasedUnits, 0);
        let sales: Vec<crate::domain::Sale> = self
            .catalog
            .list_sales()
            .await?
            .into_iter()
            .filter(|sale| sale.end_ms + PENDING_HORIZON_MS >= now_ms)
            .collect();
        for group in sales.chunks(RELEASE_SALES_AT_ONCE) {
            let parts = crate::app::draw::join_all(
                group
                    .iter()
                    .map(|sale| self.release_sale(sale, now_ms, deadline)),
            )
            .await;
            for part in parts {
                report.absorb(part?);
            }
            if report.stopped_early {
                break;
            }
        }
        Ok(report)
    }

    /// One sale's share of [`Self::release_unpaid`]: its chunks one after
    /// another (its sale item takes one batch at a time).
    async fn release_sale(
        &self,
        sale: &crate::domain::Sale,
        now_ms: i64,
        deadline: Instant,
    ) -> Result<ReleaseReport, JobError> {
        let mut report = ReleaseReport::default();
        loop {
            if Instant::now() >= deadline {
                report.stopped_early = true;
                return Ok(report);
            }
            let due = self
                .orders
                .due_unpaid(&sale.sale_id, now_ms, RELEASE_CHUNK)
                .await?;
            if due.is_empty() {
                return Ok(report);
            }
            let mut progressed = false;
            let outcomes = match crate::app::release::release_many(
                &self.orders,
                &self.stock,
                Some(sale),
                &due,
                now_ms,
            )
            .await
            {
                Ok(outcomes) => outcomes,
                Err(err) => {
                    // Nothing of the chunk could be read: the next run
                    // tries again.
                    report.errors.push(format!("{}: {err}", sale.sale_id));
                    return Ok(report);
                }
            };
            for (order_id, outcome) in due.iter().zip(outcomes) {
                match outcome {
                    Ok(Released::Now {
                        order,
                        returned,
                        offers,
                    }) => {
                        progressed = true;
                        report.expired += 1;
                        report.units_returned += u64::from(order.quantity.get());
                        report.units_offered += offers.len() as u64;
                        self.metrics.count(Counter::Releases, 1);
                        self.metrics
                            .count(Counter::ReleasedUnits, u64::from(order.quantity.get()));
                        match returned {
                            Ok(Returned::SaleMissing) => report.redis_missing += 1,
                            Ok(_) => {}
                            Err(err) => report.errors.push(format!("{order_id}: {err}")),
                        }
                        tracing::info!(%order_id, sale_id = %order.sale_id, "unpaid order expired; units returned");
                    }
                    // Paid meanwhile, or expired by a concurrent run (or by
                    // the orders API reading it).
                    Ok(Released::Not(_)) => {}
                    Err(err) => report.errors.push(format!("{order_id}: {err}")),
                }
            }
            if !progressed {
                // Everything due was taken by someone else or failed; the
                // index may lag: leave the rest to the next run.
                return Ok(report);
            }
        }
    }
}

impl<Q, S, C, O> crate::app::purchase::RebuildTrigger for Jobs<Q, S, C, O>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: CatalogAdmin,
    O: OrderLedger,
{
    fn rebuild<'a>(
        &'a self,
        sale_id: &'a SaleId,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            match self.prewarm_sale(sale_id, crate::clock::now_ms()).await {
                Ok(outcome) => tracing::info!(%sale_id, ?outcome, "rebuild asked by a purchase"),
                Err(err) => tracing::warn!(%sale_id, %err, "rebuild asked by a purchase failed"),
            }
        })
    }
}

#[cfg(test)]
mod tests;
