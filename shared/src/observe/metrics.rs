// Hand-written rather than the `metrics` facade with `metrics_cloudwatch_embedded`: that crate gives each line one dimension set and each label set its own line, so it cannot keep the contract below (`Purchases` under both sets, one line per invocation, counters recorded as zero, every Lua latency), and it is slower per decision, per invocation and aggregated alike.
//! CloudWatch metrics as embedded-metric-format (EMF) lines: one JSON
//! object per line on stdout, which Lambda ships to CloudWatch Logs, where
//! the `_aws` block turns its values into metrics. No API call, no agent.
//!
//! The contract (names, units, dimensions, namespace) is fixed in
//! `docs/operations.md` (Metrics); this module is its only writer.
//!
//! - Every metric carries the dimension set `[["Function"]]`; `Purchases`
//!   also `[["Function","Outcome"]]`. Sale, order and request ids go in as
//!   plain properties (high-cardinality dimensions would cost a metric each).
//! - The namespace comes from `METRICS_NAMESPACE` through
//!   [`Config`](crate::config::Config) (`Seckill` when unset).
//!
//! # Cost on the hot path
//!
//! Recording a count takes no lock: one relaxed `fetch_add` on an atomic of
//! this execution environment, plus a `fetch_or` marking it for the next
//! line; a Lua latency is one push under a mutex held for that push only.
//! Nothing is formatted or written per decision. Lines are written at a *flush*:
//!
//! - [`Flush::EachInvocation`] (Lambda): when the handler returns. An
//!   execution environment serves one invocation at a time, so this is one
//!   line per invocation, written while nothing else waits on this
//!   environment. Measured (the loop of `make_line_cost` in `metrics/tests.rs`, release
//!   build): a purchase invocation's recording, its line and one `write(2)`
//!   take about 0.7 µs to `/dev/null` and 1.4 µs into a pipe, against the
//!   milliseconds the invocation waits on Redis and SQS.
//! - [`Flush::Periodic`] (the local stack, the benchmarks): many
//!   invocations share one process, so the counters aggregate and a task
//!   ([`spawn_flusher`]) writes them every interval: a few lines a second,
//!   where one line per decision would be 50,000 writes a second behind
//!   one lock. Recording costs ~70 ns a decision on one thread, ~150 ns
//!   with two threads recording at once (measured as above). Lua latencies
//!   are kept exactly: every 100 samples (the most one EMF value array may
//!   hold) go out at once, one write per 100 decisions.
//!
//! Nothing is written unless a binary installs an [`Emitter`] ([`install`]):
//! the Lambda `main`s and `seckill-local` do; unit and integration tests
//! that do not ask for metrics pay nothing and print nothing.
//!
//! Beside this file: `metrics/emf.rs`, the line format; `metrics/tests.rs`.

use crate::domain::Outcome;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

mod emf;

use emf::render;

/// The namespace when `METRICS_NAMESPACE` is not set.
pub const DEFAULT_NAMESPACE: &str = "Seckill";

/// The most values one metric may carry in one EMF line.
pub const MAX_VALUES: usize = 100;

/// The `Function` dimension: each Lambda function's short name, which is
/// also its binary's (`functions/<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Function {
    Purchase,
    OrderWriter,
    OrdersApi,
    AdminApi,
    Prewarm,
    ReleaseUnpaid,
    Reconcile,
}

impl Function {
    pub const ALL: [Function; 7] = [
        Self::Purchase,
        Self::OrderWriter,
        Self::OrdersApi,
        Self::AdminApi,
        Self::Prewarm,
        Self::ReleaseUnpaid,
        Self::Reconcile,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Purchase => "purchase",
            Self::OrderWriter => "order-writer",
            Self::OrdersApi => "orders-api",
            Self::AdminApi => "admin-api",
            Self::Prewarm => "prewarm",
            Self::ReleaseUnpaid => "release-unpaid",
            Self::Reconcile => "reconcile",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// The metrics with unit `Count` and only the `[["Function"]]` dimension set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// A purchase answered `SOLD_OUT` from the in-memory flag (purchase).
    SoldOutFastPath,
    /// Orders put into DynamoDB (order-writer).
    OrdersWritten,
    /// Redeliveries of an order already written (order-writer).
    OrderDuplicates,
    /// Orders the database's condition refused: it stopped an oversell (order-writer).
    OrdersRejected,
    /// Records reported in `batchItemFailures`, to be retried (order-writer).
    OrderFailures,
    /// Failures of records on their last receive: SQS moves them to the DLQ (order-writer).
    DlqMoves,
    /// Orders paid (a second click on a paid order is not counted) (orders-api).
    OrdersPaid,
    /// Provider payments for orders that could no longer be paid, recorded
    /// as owed back (orders-api).
    PaymentsNeedingRefund,
    /// Unpaid orders expired and released (release-unpaid).
    Releases,
    /// Units those orders gave back (release-unpaid).
    ReleasedUnits,
    /// Invariant violations a reconcile run found (reconcile).
    ReconcileViolations,
    /// Those of code `OVERSELL_RISK`, never repaired automatically (reconcile).
    OversellRisk,
    /// Repairs a reconcile run made (reconcile).
    ReconcileRepairs,
    /// Sales loaded into Redis from DynamoDB (prewarm).
    SalesPrewarmed,
    /// New execution environments (every function).
    ColdStarts,
    /// Order writes sent again after DynamoDB cancelled them for contention
    /// on an item (another transaction in flight, throttling) (order-writer).
    TransactionConflictsRetried,
}

impl Counter {
    pub const ALL: [Counter; 16] = [
        Self::SoldOutFastPath,
        Self::OrdersWritten,
        Self::OrderDuplicates,
        Self::OrdersRejected,
        Self::OrderFailures,
        Self::DlqMoves,
        Self::OrdersPaid,
        Self::PaymentsNeedingRefund,
        Self::Releases,
        Self::ReleasedUnits,
        Self::ReconcileViolations,
        Self::OversellRisk,
        Self::ReconcileRepairs,
        Self::SalesPrewarmed,
        Self::ColdStarts,
        Self::TransactionConflictsRetried,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::SoldOutFastPath => "SoldOutFastPath",
            Self::OrdersWritten => "OrdersWritten",
            Self::OrderDuplicates => "OrderDuplicates",
            Self::OrdersRejected => "OrdersRejected",
            Self::OrderFailures => "OrderFailures",
            Self::DlqMoves => "DlqMoves",
            Self::OrdersPaid => "OrdersPaid",
            Self::PaymentsNeedingRefund => "PaymentsNeedingRefund",
            Self::Releases => "Releases",
            Self::ReleasedUnits => "ReleasedUnits",
            Self::ReconcileViolations => "ReconcileViolations",
            Self::OversellRisk => "OversellRisk",
            Self::ReconcileRepairs => "ReconcileRepairs",
            Self::SalesPrewarmed => "SalesPrewarmed",
            Self::ColdStarts => "ColdStarts",
            Self::TransactionConflictsRetried => "TransactionConflictsRetried",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// `Purchases` (Count), with the `Outcome` dimension: an [`Outcome`]'s code.
/// Every outcome is counted without a lock; a code outside [`Outcome`]
/// (none today) still counts, in a map behind a mutex.
pub const PURCHASES: &str = "Purchases";
/// `LuaLatency` (Milliseconds): the reserve script's round trip.
pub const LUA_LATENCY: &str = "LuaLatency";

/// `StockLeft` (Count) and `StockLeftPercent` (Percent) of one live sale in
/// Redis, written by prewarm every minute, with the dimension sets
/// `[["Function"],["Function","SaleId"]]`: per sale for the dashboard, and
/// across sales (its `Minimum`) for the low-stock alarm. A handful of live
/// sales at a time, so the per-sale dimension costs a handful of metrics.
pub const STOCK_LEFT: &str = "StockLeft";
/// `PaidAmount` (None: minor units of a currency): what one payment that
/// made its order `PAID` took, one line per payment with the dimension set
/// `[["Function"]]` and the properties `currency` and `orderId` (sum it by currency in
/// Logs Insights; the metric itself adds currencies together, so read it
/// as a rate of payments when a stack sells in more than one).
pub const PAID_AMOUNT: &str = "PaidAmount";
pub const STOCK_LEFT_PERCENT: &str = "StockLeftPercent";

/// Where lines go: stdout in Lambda and locally, a buffer in tests.
#[derive(Clone)]
pub struct Sink(Arc<Mutex<Box<dyn Write + Send>>>);

impl Sink {
    /// Each line goes out in one `write` on the process's stdout, under the
    /// same lock as the log lines, so the two never interleave mid-line.
    pub fn stdout() -> Self {
        Self::new(std::io::stdout())
    }

    pub fn new(writer: impl Write + Send + 'static) -> Self {
        Self(Arc::new(Mutex::new(Box::new(writer))))
    }

    fn write_line(&self, line: &[u8]) {
        // A metrics line that cannot be written is dropped: the answer to
        // the buyer never depends on it.
        if let Ok(mut out) = self.0.lock() {
            let _ = out.write_all(line).and_then(|()| out.flush());
        }
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink")
    }
}

/// When lines are written (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// At the end of every invocation, with its ids as properties (Lambda).
    EachInvocation,
    /// By [`flush_all`] / [`spawn_flusher`], aggregated (many invocations
    /// in one process: the local stack, the benchmarks).
    Periodic,
}

/// A sink and when to write to it.
#[derive(Debug, Clone)]
pub struct Emitter {
    sink: Sink,
    flush: Flush,
}

impl Emitter {
    pub fn new(sink: Sink, flush: Flush) -> Self {
        Self { sink, flush }
    }

    pub fn stdout(flush: Flush) -> Self {
        Self::new(Sink::stdout(), flush)
    }
}

static INSTALLED: OnceLock<Emitter> = OnceLock::new();

/// Sets the process's emitter, once, before the functions are wired (like a
/// tracing subscriber). Returns false if one was installed already.
pub fn install(emitter: Emitter) -> bool {
    INSTALLED.set(emitter).is_ok()
}

/// Every live [`Metrics`] of the process, for [`flush_all`].
static REGISTRY: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// Writes what every [`Metrics`] of the process has pending.
pub fn flush_all() {
    let live: Vec<Arc<Inner>> = match REGISTRY.lock() {
        Ok(mut registry) => {
            registry.retain(|weak| weak.strong_count() > 0);
            registry.iter().filter_map(Weak::upgrade).collect()
        }
        Err(_) => return,
    };
    for inner in live {
        inner.flush(None);
    }
}

/// Runs [`flush_all`] every `every` until the task is aborted; the caller
/// flushes once more at shutdown.
pub fn spawn_flusher(every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            flush_all();
        }
    })
}

/// The ids of one invocation, written as properties of its line (only in
/// [`Flush::EachInvocation`], where the line covers that invocation alone).
#[derive(Debug, Clone, Copy, Default)]
pub struct Invocation<'a> {
    pub request_id: Option<&'a str>,
    pub sale_id: Option<&'a str>,
    pub order_id: Option<&'a str>,
}

impl<'a> Invocation<'a> {
    /// An invocation known only by its request id (SQS and schedule
    /// triggers: Lambda's `aws_request_id`; empty outside Lambda).
    pub fn request(request_id: &'a str) -> Self {
        Self {
            request_id: Some(request_id),
            ..Self::default()
        }
    }
}

/// One function's metrics in this execution environment. Cheap to clone
/// (shared counters); [`Metrics::off`] records nothing.
#[derive(Clone, Default)]
pub struct Metrics(Option<Arc<Inner>>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(inner) => write!(f, "Metrics({})", inner.function.name()),
            None => f.write_str("Metrics(off)"),
        }
    }
}

struct Inner {
    function: Function,
    namespace: String,
    emitter: Emitter,
    counters: [AtomicU64; Counter::ALL.len()],
    /// Bit i: counter i was recorded since the last line, so it is written
    /// even when 0 (a job's "nothing found" is a data point for alarms).
    touched: AtomicU32,
    purchases: [AtomicU64; Outcome::ALL.len()],
    other_outcomes: Mutex<BTreeMap<&'static str, u64>>,
    /// Milliseconds, at most [`MAX_VALUES`].
    latencies: Mutex<Vec<f64>>,
}

impl Metrics {
    /// Records nothing (tests, benchmarks without an emitter).
    pub fn off() -> Self {
        Self(None)
    }

    /// The function's metrics on the installed emitter; off when none is.
    pub fn new(function: Function, namespace: &str) -> Self {
        match INSTALLED.get() {
            Some(emitter) => Self::with_emitter(function, namespace, emitter.clone()),
            None => Self::off(),
        }
    }

    pub fn with_emitter(function: Function, namespace: &str, emitter: Emitter) -> Self {
        let namespace = if namespace.trim().is_empty() {
            DEFAULT_NAMESPACE
        } else {
            namespace
        };
        let inner = Arc::new(Inner {
            function,
            namespace: namespace.to_owned(),
            emitter,
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            touched: AtomicU32::new(0),
            purchases: std::array::from_fn(|_| AtomicU64::new(0)),
            other_outcomes: Mutex::new(BTreeMap::new()),
            latencies: Mutex::new(Vec::new()),
        });
        if let Ok(mut registry) = REGISTRY.lock() {
            registry.retain(|weak| weak.strong_count() > 0);
            registry.push(Arc::downgrade(&inner));
        }
        Self(Some(inner))
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Adds `n` (0 still puts the metric on the next line).
    pub fn count(&self, counter: Counter, n: u64) {
        if let Some(inner) = &self.0 {
            let i = counter.index();
            inner.counters[i].fetch_add(n, Ordering::Relaxed);
            // Release: a flush that sees the mark also sees the addition.
            inner.touched.fetch_or(1 << i, Ordering::Release);
        }
    }

    /// Once per execution environment, where the function is wired.
    pub fn cold_start(&self) {
        self.count(Counter::ColdStarts, 1);
    }

    /// One purchase answered with `outcome`: an [`Outcome`]'s code (the
    /// error code of the response body for a refusal).
    pub fn purchase(&self, outcome: &'static str) {
        let Some(inner) = &self.0 else { return };
        match Outcome::from_code(outcome) {
            Some(known) => {
                inner.purchases[known.index()].fetch_add(1, Ordering::Relaxed);
            }
            None => {
                if let Ok(mut other) = inner.other_outcomes.lock() {
                    *other.entry(outcome).or_default() += 1;
                }
            }
        }
    }

    /// What one live sale has left in Redis, as its own line now (a job's
    /// figure, once a minute: not the hot path). A sold-out sale writes no
    /// percentage: the low-stock alarm (the minimum percentage across
    /// sales) is about sales still selling, and goes back to OK at the
    /// sell-out rather than staying on until the end.
    pub fn stock_left(&self, sale_id: &str, left: i64, total: u32) {
        let Some(inner) = &self.0 else { return };
        let mut metrics = vec![serde_json::json!({"Name": STOCK_LEFT, "Unit": "Count"})];
        let mut line = serde_json::json!({
            "Function": inner.function.name(),
            "SaleId": sale_id,
            STOCK_LEFT: left,
        });
        if left > 0 {
            let percent = if total == 0 {
                0.0
            } else {
                (left as f64 * 100.0 / f64::from(total) * 10.0).round() / 10.0
            };
            metrics.push(serde_json::json!({"Name": STOCK_LEFT_PERCENT, "Unit": "Percent"}));
            line[STOCK_LEFT_PERCENT] = serde_json::json!(percent);
        }
        line["_aws"] = serde_json::json!({
            "Timestamp": crate::clock::now_ms(),
            "CloudWatchMetrics": [{
                "Namespace": inner.namespace,
                "Dimensions": [["Function"], ["Function", "SaleId"]],
                "Metrics": metrics,
            }],
        });
        let mut out = line.to_string().into_bytes();
        out.push(b'\n');
        inner.emitter.sink.write_line(&out);
    }

    /// One payment that made its order `PAID`: its amount in minor units of
    /// `currency`, as its own line now (a payment, not the hot path), with
    /// the order's id as a property.
    pub fn paid_amount(&self, order_id: &str, currency: &str, amount: u64) {
        let Some(inner) = &self.0 else { return };
        let line = serde_json::json!({
            "_aws": {
                "Timestamp": crate::clock::now_ms(),
                "CloudWatchMetrics": [{
                    "Namespace": inner.namespace,
                    "Dimensions": [["Function"]],
                    "Metrics": [{"Name": PAID_AMOUNT, "Unit": "None"}],
                }],
            },
            "Function": inner.function.name(),
            "orderId": order_id,
            "currency": currency,
            PAID_AMOUNT: amount,
        });
        let mut out = line.to_string().into_bytes();
        out.push(b'\n');
        inner.emitter.sink.write_line(&out);
    }

    /// One round trip of the reserve script.
    pub fn lua_latency(&self, elapsed: Duration) {
        let Some(inner) = &self.0 else { return };
        // Microsecond precision is all a Redis round trip needs.
        let ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3;
        let full = match inner.latencies.lock() {
            Ok(mut values) => {
                values.push(ms);
                values.len() >= MAX_VALUES
            }
            Err(_) => false,
        };
        if full {
            inner.flush(None);
        }
    }

    /// The end of an invocation: in [`Flush::EachInvocation`] its line is
    /// written now, with its ids.
    pub fn invocation_done(&self, invocation: &Invocation<'_>) {
        if let Some(inner) = &self.0
            && inner.emitter.flush == Flush::EachInvocation
        {
            inner.flush(Some(invocation));
        }
    }

    /// Writes whatever is pending now.
    pub fn flush(&self) {
        if let Some(inner) = &self.0 {
            inner.flush(None);
        }
    }
}

/// What one flush takes out of the counters.
#[derive(Debug, Default, PartialEq)]
struct Pending {
    counters: Vec<(Counter, u64)>,
    purchases: Vec<(&'static str, u64)>,
    latencies: Vec<f64>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.purchases.is_empty() && self.latencies.is_empty()
    }
}

impl Inner {
    fn take(&self) -> Pending {
        let touched = self.touched.swap(0, Ordering::Acquire);
        let counters = Counter::ALL
            .iter()
            .filter(|c| touched & (1 << c.index()) != 0)
            .map(|&c| (c, self.counters[c.index()].swap(0, Ordering::Relaxed)))
            .collect();
        let mut purchases: Vec<(&'static str, u64)> = Outcome::ALL
            .iter()
            .zip(&self.purchases)
            .filter_map(|(outcome, n)| match n.swap(0, Ordering::Relaxed) {
                0 => None,
                n => Some((outcome.as_str(), n)),
            })
            .collect();
        if let Ok(mut other) = self.other_outcomes.lock() {
            purchases.extend(std::mem::take(&mut *other));
        }
        let latencies = self
            .latencies
            .lock()
            .map(|mut values| std::mem::take(&mut *values))
            .unwrap_or_default();
        Pending {
            counters,
            purchases,
            latencies,
        }
    }

    fn flush(&self, invocation: Option<&Invocation<'_>>) {
        let pending = self.take();
        if pending.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(768);
        render(
            &mut out,
            self.function,
            &self.namespace,
            &pending,
            invocation,
            crate::clock::now_ms(),
        );
        self.emitter.sink.write_line(&out);
    }
}

#[cfg(test)]
mod tests;
