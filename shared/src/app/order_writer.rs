//! The order-writer's logic: a batch of queue messages in, orders out.
//!
//! 1. Each record is parsed on its own; a poison record is logged with its
//!    message id, counted and reported failed (SQS moves it to the DLQ after
//!    `maxReceiveCount`), and never fails its neighbours.
//! 2. The same order twice in one batch is written once.
//! 3. Valid orders are grouped per sale; each group is one transaction that
//!    puts every order, adds each buyer's units to their ledger record
//!    (within the per-user limit) and takes the group's total off the sale
//!    item, so the hot item is written once per batch. The request token is
//!    derived from the group, so a retried call is idempotent.
//! 4. A transaction cancelled only because it met another on the hot sale
//!    item (or a throttled item) is sent again as it is, after a capped,
//!    fully jittered exponential backoff ([`Backoff`]); a group still
//!    cancelled after that, or cancelled for any other reason, falls back
//!    to one transaction per order (each retried the same way), which
//!    tells a duplicate (success: the row as it stands decides) from no
//!    stock or a buyer at the limit (written `REJECTED` with the reason: the
//!    database stopped an oversell, or a buyer Redis lost count of) from a
//!    transient fault or contention that outlasted its retries (reported
//!    failed). A group write the service failed at once (an internal
//!    error, after the SDK's own retry) is sent once more, with the same
//!    token, before the batch is given back to the queue.
//! 5. Every decided order marks its reservation in Redis the way its row
//!    says ([`Resolution::of_row`]).
//! 6. The batch's outcome is counted once, at its end: `OrdersWritten`,
//!    `OrderDuplicates`, `OrdersRejected`, `OrderFailures`, `DlqMoves`
//!    (failures on a record's last receive, which SQS moves to the DLQ) and
//!    `TransactionConflictsRetried` (writes sent again after contention).
//! 7. Why each order failed is kept in the stock store
//!    ([`StockStore::record_write_error`]), so the operator's DLQ view can
//!    say what the writer last failed with (a poison record's reason is
//!    its body's, read again by the view).

use crate::clock;
use crate::domain::orders::{NewOrder, RejectReason};
use crate::domain::{OrderMessage, SaleId};
use crate::observe::metrics::{Counter, Metrics};
use crate::ports::{
    GroupWrite, OrderStore, OrderStoreError, RejectWrite, Resolution, SaleCatalog, SingleWrite,
    StockStore, WriteFailure, only_contention,
};
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tracing::Instrument;

/// DynamoDB takes at most 100 items per transaction: each order, at most one
/// buyer record per order, and the sale update.
const MAX_ORDERS_PER_TRANSACTION: usize = 49;

/// A failed group write that took less than this was an answer (an error
/// of the service), not a timeout, and is worth one more send.
const FAST_ERROR: Duration = Duration::from_secs(1);

pub use backoff::Backoff;

mod backoff;

/// One queue record, as the event source delivered it.
#[derive(Debug, Clone)]
pub struct QueueRecord {
    pub message_id: String,
    pub body: String,
    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
}

/// What one batch did. `failed` are the message ids to report in
/// `batchItemFailures`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchReport {
    pub failed: Vec<String>,
    pub written: usize,
    pub duplicates: usize,
    pub rejected: usize,
    pub poison: usize,
    pub transient: usize,
    /// Why each order reported in `failed` (poison records aside) failed.
    pub failures: Vec<(SaleId, WriteFailure)>,
    /// Writes sent again after a cancellation for contention.
    pub conflicts_retried: usize,
    /// How long the batch waited before those retries.
    pub backoff: Duration,
}

/// An order of the batch and every message that carried it.
struct Entry {
    message: OrderMessage,
    reserved_at_ms: i64,
    message_ids: Vec<String>,
}

pub struct OrderWriter<O, S, C> {
    orders: O,
    stock: S,
    catalog: C,
    metrics: Metrics,
    /// The queue's redrive `maxReceiveCount`: a failure on that receive is
    /// the record's last. Unknown: no failure is counted as a DLQ move.
    max_receive_count: Option<u32>,
    /// The writer's clock (epoch ms): [`clock::now_ms`], or a test's.
    now: fn() -> i64,
    backoff: Backoff,
    /// The keys of the jitter's draws (std's SipHash, keyed from the
    /// operating system's random source) and the number of the next draw.
    jitter_keys: std::collections::hash_map::RandomState,
    draws: AtomicU64,
}

impl<O: OrderStore, S: StockStore, C: SaleCatalog> OrderWriter<O, S, C> {
    pub fn new(orders: O, stock: S, catalog: C) -> Self {
        Self {
            orders,
            stock,
            catalog,
            metrics: Metrics::off(),
            max_receive_count: None,
            now: clock::now_ms,
            backoff: Backoff::default(),
            jitter_keys: std::collections::hash_map::RandomState::new(),
            draws: AtomicU64::new(0),
        }
    }

    /// The same writer retrying contention as `backoff` says.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The same writer reading the time from `now` (epoch ms), for tests
    /// of a writer that runs late.
    pub fn with_clock(mut self, now: fn() -> i64) -> Self {
        self.now = now;
        self
    }

    /// The same writer counting into `metrics`; `max_receive_count` is the
    /// queue's redrive setting (`MAX_RECEIVE_COUNT`), to count DLQ moves.
    pub fn with_metrics(mut self, metrics: Metrics, max_receive_count: Option<u32>) -> Self {
        self.metrics = metrics;
        self.max_receive_count = max_receive_count;
        self
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn orders(&self) -> &O {
        &self.orders
    }

    pub async fn write_batch(&self, records: &[QueueRecord]) -> BatchReport {
        let mut report = BatchReport::default();
        let mut groups: BTreeMap<SaleId, Vec<Entry>> = BTreeMap::new();
        for record in records {
            let (message, reserved_at_ms) = match parse(&record.body) {
                Ok(parsed) => parsed,
                Err(why) => {
                    tracing::error!(message_id = %record.message_id, %why, "poison message");
                    report.poison += 1;
                    report.failed.push(record.message_id.clone());
                    continue;
                }
            };
            let group = groups.entry(message.sale_id.clone()).or_default();
            match group
                .iter_mut()
                .find(|e| e.message.order_id == message.order_id)
            {
                Some(seen) => seen.message_ids.push(record.message_id.clone()),
                None => group.push(Entry {
                    message,
                    reserved_at_ms,
                    message_ids: vec![record.message_id.clone()],
                }),
            }
        }
        for (sale_id, entries) in groups {
            for chunk in entries.chunks(MAX_ORDERS_PER_TRANSACTION) {
                self.write_sale_group(&sale_id, chunk, &mut report).await;
            }
        }
        self.count(records, &report);
        self.keep_failures(&report.failures).await;
        report
    }

    /// Keeps why each order failed, for the DLQ view. Best effort, and off
    /// the write's own path: the store being out of reach stops it at the
    /// first failure rather than waiting out a timeout per order.
    async fn keep_failures(&self, failures: &[(SaleId, WriteFailure)]) {
        for (sale_id, failure) in failures {
            if let Err(err) = self.stock.record_write_error(sale_id, failure).await {
                tracing::warn!(%sale_id, %err, "could not keep why orders failed");
                return;
            }
        }
    }

    /// The batch's metrics, zeros included (every batch is a data point).
    fn count(&self, records: &[QueueRecord], report: &BatchReport) {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let last_tries = records
            .iter()
            .filter(|r| {
                self.max_receive_count
                    .is_some_and(|max| r.receive_count >= max)
                    && report.failed.contains(&r.message_id)
            })
            .inspect(|r| {
                tracing::error!(
                    message_id = %r.message_id,
                    receive_count = r.receive_count,
                    "record failed on its last receive: SQS moves it to the DLQ"
                );
            })
            .count();
        let m = &self.metrics;
        m.count(Counter::OrdersWritten, n(report.written));
        m.count(Counter::OrderDuplicates, n(report.duplicates));
        m.count(Counter::OrdersRejected, n(report.rejected));
        m.count(Counter::OrderFailures, n(report.failed.len()));
        m.count(Counter::DlqMoves, n(last_tries));
        m.count(
            Counter::TransactionConflictsRetried,
            n(report.conflicts_retried),
        );
    }

    /// Waits before retry `attempt` (0 first) of a write that contention
    /// cancelled; false, at once, when the write is out of retries or the
    /// batch out of its budget: then it is not retried.
    async fn pause(&self, attempt: u32, report: &mut BatchReport) -> bool {
        let b = &self.backoff;
        if attempt >= b.retries {
            return false;
        }
        // In whole milliseconds, rounded up: the timer wakes on no finer
        // tick, so a wait of a fraction takes the next whole one, and the
        // budget below must count what a wait takes, not what it asked.
        let ceiling_ms =
            u64::try_from(b.ceiling(attempt).as_micros().div_ceil(1_000)).unwrap_or(u64::MAX);
        let wait_ms = if b.jitter {
            let draw = self
                .jitter_keys
                .hash_one(self.draws.fetch_add(1, Ordering::Relaxed));
            draw % ceiling_ms.saturating_add(1)
        } else {
            ceiling_ms
        };
        let wait = Duration::from_millis(wait_ms);
        if report.backoff + wait > b.budget {
            return false;
        }
        let slept_from = tokio::time::Instant::now();
        tokio::time::sleep(wait).await;
        report.backoff += slept_from.elapsed();
        report.conflicts_retried += 1;
        true
    }

    async fn write_sale_group(
        &self,
        sale_id: &SaleId,
        entries: &[Entry],
        report: &mut BatchReport,
    ) {
        let sale = match self.catalog.get_sale(sale_id).await {
            Ok(Some(sale)) => sale,
            Ok(None) => {
                tracing::error!(%sale_id, "orders for a sale missing from the sales table; left for retry and the DLQ");
                return fail_all(entries, report, "the sale is not in the sales table");
            }
            Err(err) => {
                tracing::warn!(%sale_id, %err, "sale catalog unavailable; batch retried");
                return fail_all(entries, report, &err.to_string());
            }
        };
        // Built once: every retry below sends the same items with the same
        // request token, so a retry of a write that did go through is the
        // same success. The window starts now, at the write (invariant 11).
        let written_at_ms = (self.now)();
        let orders: Vec<NewOrder> = entries
            .iter()
            .map(|e| {
                NewOrder::new(
                    e.message.clone(),
                    e.reserved_at_ms,
                    written_at_ms,
                    sale.payment_window_seconds,
                )
                .priced(sale.price)
            })
            .collect();
        let token = request_token(&orders);
        let mut attempt = 0;
        let mut resent_after_error = false;
        let written = loop {
            let sent_at = tokio::time::Instant::now();
            let written = self
                .orders
                .write_group(sale_id, &orders, sale.per_user_limit, &token)
                .await;
            match &written {
                Ok(GroupWrite::Cancelled(reasons))
                    if only_contention(reasons) && self.pause(attempt, report).await =>
                {
                    tracing::debug!(%sale_id, ?reasons, attempt, "group transaction met contention; sent again");
                    attempt += 1;
                }
                // An error the service answered at once (a 5xx its own retry
                // met again) is sent once more, the same items under the
                // same token, so a first send that did go through is the
                // same success: the alternative is the whole batch waiting
                // out the queue's visibility timeout. A timeout is not: it
                // has already spent the time the function has.
                Err(OrderStoreError::Transient(why))
                    if !resent_after_error
                        && sent_at.elapsed() < FAST_ERROR
                        && self.pause(attempt, report).await =>
                {
                    tracing::debug!(%sale_id, %why, "group transaction failed at once; sent again");
                    resent_after_error = true;
                    attempt += 1;
                }
                _ => break written,
            }
        };
        match written {
            Ok(GroupWrite::Written) => {
                for entry in entries {
                    let span = message_span(entry);
                    async {
                        tracing::debug!("order written");
                        self.mark(entry, Resolution::Written).await;
                    }
                    .instrument(span)
                    .await;
                }
                report.written += entries.len();
                tracing::info!(%sale_id, orders = entries.len(), "orders written in one transaction");
            }
            Ok(GroupWrite::Cancelled(reasons)) => {
                tracing::warn!(%sale_id, ?reasons, "group transaction cancelled; writing one by one");
                for (entry, order) in entries.iter().zip(&orders) {
                    self.write_one(entry, order, sale.per_user_limit, report)
                        .await;
                }
            }
            Err(err) => {
                tracing::warn!(%sale_id, %err, "group write failed; batch retried");
                fail_all(entries, report, &err.to_string());
            }
        }
    }

    async fn write_one(
        &self,
        entry: &Entry,
        order: &NewOrder,
        per_user_limit: u32,
        report: &mut BatchReport,
    ) {
        let span = message_span(entry);
        async {
            let mut attempt = 0;
            let written = loop {
                match self.orders.write_single(order, per_user_limit).await {
                    Err(OrderStoreError::Contention(why)) if self.pause(attempt, report).await => {
                        tracing::debug!(%why, attempt, "order transaction met contention; sent again");
                        attempt += 1;
                    }
                    written => break written,
                }
            };
            match written {
                Ok(SingleWrite::Written) => {
                    report.written += 1;
                    self.mark(entry, Resolution::Written).await;
                }
                Ok(SingleWrite::Duplicate(row)) => {
                    report.duplicates += 1;
                    tracing::info!(
                        status = row.status.as_str(),
                        "duplicate delivery; the row stands"
                    );
                    self.follow(entry, &row).await;
                }
                Ok(SingleWrite::NoStock) => {
                    self.reject(entry, order, RejectReason::SoldOut, report)
                        .await;
                }
                Ok(SingleWrite::OverLimit) => {
                    self.reject(entry, order, RejectReason::OverLimit, report)
                        .await;
                }
                Err(err @ OrderStoreError::SaleMissing(_)) => {
                    tracing::error!(%err, "sale item missing; retried, then the DLQ");
                    fail_one(entry, report, &err.to_string());
                }
                Err(err) => {
                    tracing::warn!(%err, "transient write failure; retried");
                    fail_one(entry, report, &err.to_string());
                }
            }
        }
        .instrument(span)
        .await;
    }

    /// Records the order `REJECTED`, unless a row got there first (then
    /// that row decides).
    async fn reject(
        &self,
        entry: &Entry,
        order: &NewOrder,
        reason: RejectReason,
        report: &mut BatchReport,
    ) {
        let mut attempt = 0;
        let written = loop {
            match self.orders.write_rejected(order, reason).await {
                Err(OrderStoreError::Contention(why)) if self.pause(attempt, report).await => {
                    tracing::debug!(%why, attempt, "rejection met contention; sent again");
                    attempt += 1;
                }
                written => break written,
            }
        };
        match written {
            Ok(RejectWrite::Recorded) => {
                report.rejected += 1;
                tracing::warn!(
                    quantity = order.message.quantity.get(),
                    reason = reason.as_str(),
                    "the ledger refused the order: REJECTED (the database stopped an oversell or a buyer over the limit)"
                );
                let resolution = match reason {
                    RejectReason::OverLimit => Resolution::RejectedOverLimit,
                    RejectReason::SoldOut => Resolution::Rejected,
                    RejectReason::Abandoned => Resolution::Abandoned,
                };
                self.mark(entry, resolution).await;
            }
            Ok(RejectWrite::Exists(row)) => {
                report.duplicates += 1;
                self.follow(entry, &row).await;
            }
            Err(err) => {
                tracing::warn!(%err, "could not record the rejection; retried");
                fail_one(entry, report, &format!("recording the rejection: {err}"));
            }
        }
    }

    /// Marks the reservation as the row in the ledger says.
    async fn follow(&self, entry: &Entry, row: &crate::domain::orders::Order) {
        if let Some(resolution) = Resolution::of_order(row) {
            self.mark(entry, resolution).await;
        }
    }

    /// Best effort: the row is the truth; a reservation left unmarked is
    /// found and fixed by reconciliation.
    async fn mark(&self, entry: &Entry, resolution: Resolution) {
        let m = &entry.message;
        match self
            .stock
            .resolve(&m.sale_id, &m.order_id, resolution)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(order_id = %m.order_id, "no reservation to mark (sale rebuilt or keys expired)");
            }
            Err(err) => {
                tracing::warn!(order_id = %m.order_id, %err, "could not mark the reservation; reconcile will");
            }
        }
    }
}

/// One span per message, with the ids an operator searches the logs by.
fn message_span(entry: &Entry) -> tracing::Span {
    tracing::info_span!(
        "order",
        order_id = %entry.message.order_id,
        sale_id = %entry.message.sale_id,
        message_id = %entry.message_ids.join(","),
    )
}

/// Kept errors are cut to this many characters: enough for an SDK error
/// and its causes, bounded whatever a store answers.
const MAX_ERROR_CHARS: usize = 500;

fn fail_one(entry: &Entry, report: &mut BatchReport, why: &str) {
    report.transient += 1;
    report.failed.extend(entry.message_ids.iter().cloned());
    report.failures.push((
        entry.message.sale_id.clone(),
        WriteFailure {
            order_id: entry.message.order_id.clone(),
            // The same order twice in one batch: one failure, both ids.
            message_id: entry.message_ids.join(","),
            error: why.chars().take(MAX_ERROR_CHARS).collect(),
            at_ms: clock::now_ms(),
        },
    ));
}

fn fail_all(entries: &[Entry], report: &mut BatchReport, why: &str) {
    for entry in entries {
        fail_one(entry, report, why);
    }
}

/// A message body as an order message of version 1, with its reservation time.
pub fn parse(body: &str) -> Result<(OrderMessage, i64), String> {
    let message: OrderMessage = serde_json::from_str(body).map_err(|e| e.to_string())?;
    if message.v != OrderMessage::VERSION {
        return Err(format!("unknown message version {}", message.v));
    }
    let reserved_at_ms = clock::parse_rfc3339_ms(&message.reserved_at)
        .ok_or_else(|| "reservedAt is not RFC 3339".to_owned())?;
    Ok((message, reserved_at_ms))
}

/// A `ClientRequestToken` (at most 36 characters) that is the same for the
/// same group of orders, so a retried call within DynamoDB's ten-minute
/// window is not applied twice.
pub fn request_token(orders: &[NewOrder]) -> String {
    let mut ids: Vec<&str> = orders.iter().map(|o| o.message.order_id.as_str()).collect();
    ids.sort_unstable();
    let fnv = |seed: u64| {
        ids.iter().fold(seed, |hash, id| {
            id.bytes().chain(std::iter::once(b',')).fold(hash, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        })
    };
    format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4)
    )
}

#[cfg(test)]
mod tests;
