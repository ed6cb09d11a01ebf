//! One sale run by every function over the memory stores: the world they
//! share (the stores behind their gates, the functions' services over
//! them, what every client was told). The actors that play the functions
//! are in [`super::actors`]; the faults the driver injects between them,
//! in [`super::faults`].

use super::clock::SKEW_MS;
use super::ports::{SimCatalog, SimOrders, SimStock};
use super::queue::SimQueue;
use super::sched::{Rates, Sched};
use crate::adapters::memory::{MemoryCatalog, MemoryStock, StockCheckpoint};
use crate::app::jobs::Jobs;
use crate::app::order_queries::OrderQueries;
use crate::app::order_writer::Backoff;
use crate::app::order_writer::OrderWriter;
use crate::app::purchase::PurchaseService;
use crate::app::reconcile::{ReconcileSettings, Reconciler};
use crate::domain::{OrderId, Sale};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

type Purchase = PurchaseService<SimStock, SimQueue, SimCatalog>;
type Writer = OrderWriter<SimOrders, SimStock, SimCatalog>;
type SimJobs = Jobs<SimQueue, SimStock, SimCatalog, SimOrders>;
type SimReconciler = Reconciler<SimQueue, SimQueue, SimStock, SimCatalog, SimOrders>;
type Queries = OrderQueries<SimOrders, SimStock, SimCatalog>;

/// The size of a run and how often things go wrong in it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) buyers: u32,
    pub(crate) stock: u32,
    pub(crate) limit: u32,
    /// Scheduler decisions before the quiet period.
    pub(crate) steps: u32,
    pub(crate) payment_window_seconds: u32,
    /// Faults at the stores' gates.
    pub(crate) rates: Rates,
    /// Whether the driver injects Redis losses, failovers, outages,
    /// duplicates and clock jumps.
    pub(crate) faults: bool,
    /// Print the run's story (`make simulate SEED=n TRACE=1`).
    pub(crate) trace: bool,
    /// Orders a slice of reconcile's and the checker's reads holds.
    pub(crate) slice_orders: u64,
}

pub(crate) const EPOCH_MS: i64 = 1_900_000_000_000;
pub(crate) const VISIBILITY_MS: i64 = 30_000;
pub(crate) const MAX_RECEIVES: u32 = 5;

/// What a buyer was told once: a `202` for an order.
#[derive(Debug, Clone, Hash)]
pub(crate) struct Accept {
    pub(crate) user: String,
    pub(crate) units: u32,
    /// When the purchase that was answered was sent (the run's clock).
    pub(crate) sent_ms: i64,
}

/// An operator command the console saw succeed.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub(crate) enum Command {
    Pause,
    Resume,
    End,
}

/// Everything the clients were told, for the checks.
#[derive(Debug, Default, Clone, Hash)]
pub(crate) struct Log {
    /// Orders answered `202`, the first time.
    pub(crate) accepted: BTreeMap<OrderId, Accept>,
    /// Purchases, payments and jobs by how they were answered.
    pub(crate) answers: BTreeMap<String, u64>,
    /// Orders whose payment was answered paid.
    pub(crate) paid: BTreeSet<OrderId>,
    /// Operator commands sent: (command, sent at, answered success at).
    pub(crate) commands: Vec<(Command, i64, Option<i64>)>,
    /// Reservations Redis lost with its keys before their message was
    /// sent: an accepted one is excused from `LOST_ORDER` (and counted)
    /// only when a send of it ended unknown ([`World::excused`]).
    pub(crate) lost_with_redis: BTreeSet<OrderId>,
    /// When Redis failed over to a replica behind it.
    pub(crate) failovers: Vec<i64>,
    /// When Redis lost the sale's keys.
    pub(crate) flushes: Vec<i64>,
    /// Prewarm runs that followed the table into Redis: (started, ended).
    pub(crate) prewarms: Vec<(i64, i64)>,
    /// What Redis offered beyond the ledger while it had lost nothing,
    /// seen between two steps (the first few).
    pub(crate) over_offers: Vec<String>,
    /// The keys each buyer sent, for their retries.
    pub(crate) keys: BTreeMap<String, Vec<String>>,
    /// Buyers answered an entry in the waitlist (new or theirs already).
    pub(crate) joined: BTreeSet<String>,
    /// Offers their buyer saw, and whether they wanted the unit.
    pub(crate) offers: BTreeMap<OrderId, bool>,
}

pub(crate) struct World {
    pub(crate) sched: Arc<Sched>,
    pub(crate) settings: Settings,
    pub(crate) sale: Sale,
    pub(crate) memory_stock: MemoryStock,
    pub(crate) memory_catalog: MemoryCatalog,
    pub(crate) queue: SimQueue,
    pub(crate) catalog: SimCatalog,
    pub(crate) stock: SimStock,
    pub(crate) orders: SimOrders,
    pub(super) purchase: Purchase,
    pub(super) writer: Writer,
    pub(crate) jobs: SimJobs,
    pub(crate) reconciler: SimReconciler,
    pub(super) queries: Queries,
    log: Mutex<Log>,
    pub(super) checkpoint: Mutex<Option<StockCheckpoint>>,
    pub(super) operator_busy: std::sync::atomic::AtomicBool,
    pub(super) tracing: bool,
}

/// The time on the run's clock, whatever the caller's skew.
pub(crate) fn now() -> i64 {
    SKEW_MS.sync_scope(0, crate::clock::now_ms)
}

impl World {
    pub(crate) fn new(sched: Arc<Sched>, settings: Settings) -> Result<Arc<Self>, String> {
        // Opens a second after the run starts (the prewarm before it loads
        // it), ends long after the last step.
        let sale = Sale {
            start_ms: EPOCH_MS + 1_000,
            end_ms: EPOCH_MS + 20 * 60_000,
            payment_window_seconds: settings.payment_window_seconds,
            ..crate::adapters::memory::test_sale("sim-sale", settings.stock, settings.limit)
                .map_err(|e| e.0)?
        };
        let memory_stock = MemoryStock::default();
        let memory_catalog = MemoryCatalog::default();
        memory_catalog.insert(sale.clone());
        let stock = SimStock {
            inner: memory_stock.clone(),
            sched: sched.clone(),
            reserved: Arc::default(),
            tracing: settings.trace,
        };
        let catalog = SimCatalog {
            inner: memory_catalog.clone(),
            sched: sched.clone(),
        };
        let orders = SimOrders {
            inner: memory_catalog.orders(),
            sched: sched.clone(),
            history: Arc::default(),
            index_lag_ms: if settings.faults { 1_500 } else { 0 },
            entries: Arc::default(),
            tracing: settings.trace,
        };
        let queue = SimQueue::new(sched.clone(), MAX_RECEIVES);
        let purchase = PurchaseService::new(stock.clone(), queue.clone(), catalog.clone());
        let writer = OrderWriter::new(orders.clone(), stock.clone(), catalog.clone()).with_backoff(
            Backoff {
                jitter: false,
                ..Backoff::default()
            },
        );
        let jobs = Jobs::new(
            stock.clone(),
            catalog.clone(),
            orders.clone(),
            Some(queue.clone()),
            Duration::from_secs(300),
        );
        let reconciler = Reconciler::new(
            stock.clone(),
            catalog.clone(),
            orders.clone(),
            queue.clone(),
            queue.clone(),
            ReconcileSettings::default(),
        )
        .with_slice_orders(settings.slice_orders);
        let queries = OrderQueries::new(
            orders.clone(),
            stock.clone(),
            catalog.clone(),
            Duration::from_secs(5),
        );
        Ok(Arc::new(Self {
            sched,
            settings,
            sale,
            memory_stock,
            memory_catalog,
            queue,
            catalog,
            stock,
            orders: orders.clone(),
            purchase,
            writer,
            jobs,
            reconciler,
            queries,
            log: Mutex::default(),
            checkpoint: Mutex::default(),
            operator_busy: std::sync::atomic::AtomicBool::new(false),
            tracing: settings.trace,
        }))
    }

    pub(crate) fn log(&self) -> MutexGuard<'_, Log> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn answer(&self, what: impl Into<String>) {
        let what = what.into();
        self.trace(&what);
        *self.log().answers.entry(what).or_default() += 1;
    }

    /// Prints what happens, on the run's clock, when `SIM_TRACE` is set
    /// (a replayed seed's story).
    pub(crate) fn trace(&self, what: &str) {
        trace(self.tracing, what);
    }

    /// Every order row of the sale, read past the gates.
    pub(crate) fn rows(&self) -> BTreeMap<String, crate::domain::orders::Order> {
        use crate::ports::OrderLedger;
        let orders = self.memory_catalog.orders();
        match futures_lite_now(orders.all_orders_of_sale(&self.sale.sale_id)) {
            Some(Ok(rows)) => rows
                .into_iter()
                .map(|o| (o.order_id.to_string(), o))
                .collect(),
            _ => BTreeMap::new(),
        }
    }
}

/// Prints `what` on the run's clock when `on` (the stores' own story).
pub(crate) fn trace(on: bool, what: &str) {
    if on {
        println!("{:>9} ms  {what}", now() - EPOCH_MS);
    }
}

/// Polls a memory store's future once: they answer at once.
pub(crate) fn futures_lite_now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}
