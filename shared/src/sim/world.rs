//! One sale run by every function over the memory stores: the actors
//! (buyers, the order-writer's polls, the scheduled jobs, payments and an
//! operator), the faults the driver injects between them (Redis losing its
//! keys or failing over to a replica behind it, an outage, a duplicate
//! delivery, a jump of the clock), and the quiet period that lets every
//! repair finish before the checks.

use super::clock::SKEW_MS;
use super::ports::{SimCatalog, SimOrders, SimStock};
use super::queue::SimQueue;
use super::sched::{Actor, Rates, Sched};
use crate::adapters::memory::{MemoryCatalog, MemoryStock, StockCheckpoint};
use crate::app::jobs::Jobs;
use crate::app::order_queries::OrderQueries;
use crate::app::order_writer::Backoff;
use crate::app::order_writer::OrderWriter;
use crate::app::purchase::{PurchaseRequest, PurchaseService};
use crate::app::reconcile::{ReconcileSettings, Reconciler};
use crate::domain::{IdempotencyKey, OrderId, Quantity, Sale, UserId};
use crate::ports::StockAdmin;
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
    /// Accepted orders whose only trace was a reservation Redis lost with
    /// its keys before its message was sent (a loss of Redis and of the
    /// send together): excused from `LOST_ORDER`, counted.
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
    purchase: Purchase,
    writer: Writer,
    pub(crate) jobs: SimJobs,
    pub(crate) reconciler: SimReconciler,
    queries: Queries,
    log: Mutex<Log>,
    checkpoint: Mutex<Option<StockCheckpoint>>,
    operator_busy: std::sync::atomic::AtomicBool,
    tracing: bool,
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
        );
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

    fn answer(&self, what: impl Into<String>) {
        let what = what.into();
        self.trace(&what);
        *self.log().answers.entry(what).or_default() += 1;
    }

    /// Prints what happens, on the run's clock, when `SIM_TRACE` is set
    /// (a replayed seed's story).
    pub(crate) fn trace(&self, what: &str) {
        if self.tracing {
            println!("{:>9} ms  {what}", now() - EPOCH_MS);
        }
    }

    fn user(&self, n: u64) -> String {
        format!("buyer-{n}")
    }

    /// A skew for a new invocation: most functions agree with the clock,
    /// some are a few seconds off either way.
    fn skew(&self) -> i64 {
        if self.settings.faults && self.sched.chance(150) {
            let off = i64::try_from(self.sched.draw(6_001)).unwrap_or(0) - 3_000;
            self.sched.count("clock skew of a function");
            off
        } else {
            0
        }
    }

    fn start(
        self: &Arc<Self>,
        name: &'static str,
        run: impl FnOnce(Arc<Self>, Actor) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) {
        let skew = self.skew();
        if skew != 0 {
            self.trace(&format!("{name} starts with its clock {skew:+} ms off"));
        }
        let me = Arc::clone(self);
        self.sched.spawn(name, skew, move |actor| run(me, actor));
    }

    // ------------------------------------------------------------ actors

    /// A buyer's purchase: a new one, or a retry of an earlier one with its
    /// key (`key_of`), or without a key (a new purchase).
    pub(crate) fn buy(self: &Arc<Self>) {
        let user = self.user(self.sched.draw(u64::from(self.settings.buyers)));
        let units = 1 + u32::try_from(self.sched.draw(2)).unwrap_or(0);
        let key = {
            let log = self.log();
            let known = log.keys.get(&user).cloned().unwrap_or_default();
            drop(log);
            match self.sched.draw(3) {
                // A retry with a key sent before.
                0 if !known.is_empty() => {
                    let at = usize::try_from(self.sched.draw(known.len() as u64)).unwrap_or(0);
                    Some(known[at].clone())
                }
                // A new key.
                1 => {
                    let key = format!("key-{}", self.sched.draw(1_000_000));
                    self.log()
                        .keys
                        .entry(user.clone())
                        .or_default()
                        .push(key.clone());
                    Some(key)
                }
                _ => None,
            }
        };
        self.start("purchase", move |w, actor| {
            Box::pin(async move { w.purchase_as(actor, user, units, key).await })
        });
    }

    async fn purchase_as(&self, actor: Actor, user: String, units: u32, key: Option<String>) {
        let (Ok(user_id), Ok(quantity)) = (UserId::parse(&user), Quantity::new(u64::from(units)))
        else {
            return;
        };
        let idempotency_key = key.as_deref().and_then(|k| IdempotencyKey::parse(k).ok());
        let request = PurchaseRequest {
            sale_id: self.sale.sale_id.clone(),
            user_id,
            quantity,
            idempotency_key,
            source_ip: None,
            sale_token: None,
        };
        let sent_ms = now();
        let answer = self.purchase.purchase(&request).await;
        if actor.died() {
            self.trace(&format!("{user} key {key:?}: no answer"));
            self.answer("purchase: no answer (function killed)");
            return;
        }
        match answer {
            Ok(accepted) => {
                self.trace(&format!(
                    "{user} key {key:?} sent at {} got {} for {units}",
                    sent_ms - EPOCH_MS,
                    accepted.order_id
                ));
                self.answer(if accepted.replayed {
                    "purchase: 202 (replay)"
                } else {
                    "purchase: 202"
                });
                let mut log = self.log();
                log.accepted
                    .entry(accepted.order_id.clone())
                    .or_insert(Accept {
                        user,
                        units,
                        sent_ms,
                    });
            }
            Err(err) => {
                self.trace(&format!(
                    "{user} key {key:?} sent at {} refused",
                    sent_ms - EPOCH_MS
                ));
                self.answer(format!("purchase: {}", refusal(&err)));
            }
        }
    }

    /// One poll of the order-writer: a batch received, written, and the
    /// records it did not report failed deleted (Lambda's event source).
    pub(crate) fn poll(self: &Arc<Self>) {
        self.start("order-writer", |w, actor| {
            Box::pin(async move {
                let records = w.queue.receive(now(), 10, VISIBILITY_MS);
                if records.is_empty() {
                    return;
                }
                let report = w.writer.write_batch(&records).await;
                if w.tracing {
                    let orders: Vec<String> = records
                        .iter()
                        .filter_map(|r| crate::app::order_writer::parse(&r.body).ok())
                        .map(|(m, _)| m.order_id.to_string())
                        .collect();
                    w.trace(&format!(
                        "order-writer batch {orders:?}: written {} duplicates {} rejected {} failed {:?}{}",
                        report.written,
                        report.duplicates,
                        report.rejected,
                        report.failed,
                        if actor.died() { " (killed)" } else { "" }
                    ));
                }
                if actor.died() {
                    w.answer("order-writer: killed mid-batch");
                    return;
                }
                for record in &records {
                    if !report.failed.contains(&record.message_id) {
                        w.queue.delete(&record.message_id);
                    }
                }
                w.answer(format!(
                    "order-writer: batch ({} failed)",
                    if report.failed.is_empty() { "none" } else { "some" }
                ));
            })
        });
    }

    pub(crate) fn release(self: &Arc<Self>) {
        self.start("release-unpaid", |w, actor| {
            Box::pin(async move {
                let deadline = std::time::Instant::now() + Duration::from_secs(3_600);
                let report = w
                    .jobs
                    .release_unpaid(crate::clock::now_ms(), deadline)
                    .await;
                if !actor.died() {
                    w.answer(format!("release-unpaid: {}", ok_or_err(&report)));
                }
            })
        });
    }

    pub(crate) fn reconcile(self: &Arc<Self>) {
        self.start("reconcile", |w, actor| {
            Box::pin(async move {
                let report = w
                    .reconciler
                    .reconcile_sale(&w.sale.sale_id, crate::clock::now_ms())
                    .await;
                if !actor.died() {
                    if let Ok(Some(r)) = &report {
                        for repair in &r.repairs {
                            *w.log()
                                .answers
                                .entry(format!("reconcile repair: {}", repair.kind))
                                .or_default() += 1;
                        }
                        if w.tracing && !r.repairs.is_empty() {
                            w.trace(&format!("reconcile repairs {:?}", r.repairs));
                        }
                    }
                    w.answer(format!("reconcile: {}", ok_or_err(&report)));
                }
            })
        });
    }

    pub(crate) fn prewarm(self: &Arc<Self>) {
        self.start("prewarm", |w, actor| {
            Box::pin(async move {
                let started = now();
                let outcome = w
                    .jobs
                    .prewarm_sale(&w.sale.sale_id, crate::clock::now_ms())
                    .await;
                if !actor.died() {
                    if outcome.is_ok() {
                        w.log().prewarms.push((started, now()));
                    }
                    let what = match outcome {
                        Ok(o) => o.body()["outcome"]
                            .as_str()
                            .unwrap_or("answered")
                            .to_owned(),
                        Err(_) => "error".to_owned(),
                    };
                    w.answer(format!("prewarm: {what}"));
                }
            })
        });
    }

    /// A buyer pays one of their orders (perhaps late, perhaps again).
    pub(crate) fn pay(self: &Arc<Self>) {
        let order = {
            let log = self.log();
            let n = log.accepted.len() as u64;
            if n == 0 {
                return;
            }
            let at = usize::try_from(self.sched.draw(n)).unwrap_or(0);
            log.accepted
                .iter()
                .nth(at)
                .map(|(id, a)| (id.clone(), a.user.clone()))
        };
        let Some((order_id, user)) = order else {
            return;
        };
        self.start("orders-api pay", move |w, actor| {
            Box::pin(async move {
                let Ok(user_id) = UserId::parse(&user) else {
                    return;
                };
                let answer = w.queries.pay(&order_id, &user_id).await;
                if actor.died() {
                    return;
                }
                match answer {
                    Ok(order) => {
                        w.answer("pay: 200 PAID");
                        if order.status == crate::domain::orders::OrderStatus::Paid {
                            w.log().paid.insert(order_id);
                        }
                    }
                    Err(err) => w.answer(format!("pay: {}", query_refusal(&err))),
                }
            })
        });
    }

    /// An operator pauses, resumes or ends the sale now, as the admin API
    /// does: the sale item first, then Redis at once.
    pub(crate) fn operate(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.operator_busy.swap(true, Ordering::SeqCst) {
            return;
        }
        let command = match self.sched.draw(10) {
            0..=4 => Command::Pause,
            5..=8 => Command::Resume,
            _ => Command::End,
        };
        self.start("admin-api", move |w, actor| {
            Box::pin(async move {
                let sent = now();
                w.trace(&format!("operator sends {command:?}"));
                let done = w.command(command).await && !actor.died();
                w.log().commands.push((command, sent, done.then(now)));
                if done {
                    w.answer(format!("operator: {command:?} done"));
                } else {
                    w.answer(format!("operator: {command:?} failed"));
                }
                w.operator_busy.store(false, Ordering::SeqCst);
            })
        });
    }

    async fn command(&self, command: Command) -> bool {
        use crate::ports::CatalogAdmin;
        let now_ms = crate::clock::now_ms();
        let Ok(Some((sale, _))) = self.catalog.get_record(&self.sale.sale_id).await else {
            return false;
        };
        if sale.phase_at(now_ms) == crate::domain::SalePhase::Ended {
            return false;
        }
        match command {
            Command::Pause | Command::Resume => {
                let after = Sale {
                    paused: command == Command::Pause,
                    ..sale
                };
                self.catalog.put_sale(after.clone()).await.is_ok()
                    && self.jobs.apply_status(&after).await.is_ok()
            }
            Command::End => {
                let Ok(ended) = crate::app::console::ended_at(&self.stock, sale, now_ms).await
                else {
                    return false;
                };
                self.catalog.put_sale(ended).await.is_ok()
                    && self
                        .jobs
                        .prewarm_sale(&self.sale.sale_id, now_ms)
                        .await
                        .is_ok()
            }
        }
    }

    // ------------------------------------------------------------ faults

    /// Keeps what Redis holds now: the replica a later failover promotes.
    pub(crate) fn replicate(&self) {
        let checkpoint = self.memory_stock.checkpoint();
        *self
            .checkpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(checkpoint);
    }

    /// Redis loses every key of the sale (a restart without persistence).
    pub(crate) fn flush(&self) {
        let before = self.unsent_reservations();
        self.memory_stock.forget(&self.sale.sale_id);
        self.log().flushes.push(now());
        self.excuse(before);
        self.sched.count("redis lost the sale's keys");
        self.trace("FAULT redis lost the sale's keys");
    }

    /// Redis fails over to the replica kept at the last [`Self::replicate`]:
    /// every write since is lost.
    pub(crate) fn failover(&self) {
        let Some(checkpoint) = self
            .checkpoint
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        else {
            return;
        };
        let before = self.unsent_reservations();
        self.memory_stock.restore(&checkpoint);
        self.log().failovers.push(now());
        self.excuse(before);
        self.sched.count("redis failed over to a replica behind it");
        self.trace("FAULT redis failed over to a replica behind it");
    }

    pub(crate) fn outage(&self, down: bool) {
        self.memory_stock
            .unavailable
            .store(down, std::sync::atomic::Ordering::SeqCst);
        if down {
            self.sched.count("redis unreachable");
        }
        self.trace(if down {
            "FAULT redis unreachable"
        } else {
            "redis reachable"
        });
    }

    pub(crate) fn duplicate(&self) {
        if self.queue.duplicate_one() {
            self.sched.count("sqs delivered a message twice");
        }
    }

    /// Reservations queued in Redis with no message on the queue and no
    /// row: if Redis loses them now, nothing anywhere remembers them.
    fn unsent_reservations(&self) -> BTreeSet<String> {
        // Read past an outage: it is what Redis holds, not what a client sees.
        let down = self
            .memory_stock
            .unavailable
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        let snapshot = SKEW_MS.sync_scope(0, || {
            futures_lite_now(self.memory_stock.snapshot(&self.sale.sale_id))
        });
        self.memory_stock
            .unavailable
            .store(down, std::sync::atomic::Ordering::SeqCst);
        let Some(Ok(Some(snapshot))) = snapshot else {
            return BTreeSet::new();
        };
        let queued = self.queue.all_order_ids();
        let rows = self.rows();
        snapshot
            .reservations
            .iter()
            .filter(|(id, r)| {
                r.state == "QUEUED" && !queued.contains(*id) && !rows.contains_key(*id)
            })
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn excuse(&self, before: BTreeSet<String>) {
        let after = self.unsent_reservations();
        let mut log = self.log();
        for id in before.difference(&after) {
            if let Ok(order_id) = OrderId::parse(id) {
                log.lost_with_redis.insert(order_id);
            }
        }
    }

    /// Between two steps, while Redis has lost nothing: it offers no unit
    /// the ledger does not have and counts no buyer below what they hold.
    /// Every unit is in DynamoDB's `available`, in a row holding it, or in
    /// a reservation queued and not yet written; Redis's stock plus its
    /// queued reservations can only be less (an expiry's return on its
    /// way), never more.
    pub(crate) fn check_offer(&self) {
        let log = self.log();
        if !log.failovers.is_empty() || !log.flushes.is_empty() || log.over_offers.len() >= 5 {
            return;
        }
        drop(log);
        let down = self
            .memory_stock
            .unavailable
            .swap(false, std::sync::atomic::Ordering::SeqCst);
        let snapshot = SKEW_MS.sync_scope(0, || {
            futures_lite_now(self.memory_stock.snapshot(&self.sale.sale_id))
        });
        self.memory_stock
            .unavailable
            .store(down, std::sync::atomic::Ordering::SeqCst);
        let Some(Ok(Some(snapshot))) = snapshot else {
            return;
        };
        let Some((_, counters)) = self.record() else {
            return;
        };
        let rows = self.rows();
        let mut in_flight = 0_i64;
        let mut held: BTreeMap<String, i64> = BTreeMap::new();
        for row in rows.values() {
            if matches!(
                row.status,
                crate::domain::orders::OrderStatus::PendingPayment
                    | crate::domain::orders::OrderStatus::Paid
            ) {
                *held.entry(row.user_id.to_string()).or_default() += i64::from(row.quantity.get());
            }
        }
        for (id, r) in &snapshot.reservations {
            if r.state == "QUEUED" && !rows.contains_key(id) {
                let units = i64::try_from(r.quantity).unwrap_or(0);
                in_flight += units;
                *held.entry(r.user_id.clone()).or_default() += units;
            }
        }
        let mut found = Vec::new();
        if snapshot.stock + in_flight > counters.available {
            found.push(format!(
                "REDIS_OVER_OFFER at +{} ms: Redis offers {} with {in_flight} queued, the ledger has {} available",
                now() - EPOCH_MS,
                snapshot.stock,
                counters.available
            ));
        }
        for (user, units) in &held {
            let counted = snapshot.buyers.get(user).copied().unwrap_or(0);
            if counted < *units {
                found.push(format!(
                    "REDIS_UNDERCOUNT at +{} ms: Redis counts {user} at {counted}, who holds {units}",
                    now() - EPOCH_MS
                ));
            }
        }
        self.log().over_offers.extend(found);
    }

    fn record(&self) -> Option<(Sale, crate::domain::ledger::SaleCounters)> {
        use crate::ports::CatalogAdmin;
        match futures_lite_now(self.memory_catalog.get_record(&self.sale.sale_id)) {
            Some(Ok(record)) => record,
            _ => None,
        }
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

fn ok_or_err<T, E>(r: &Result<T, E>) -> &'static str {
    if r.is_ok() { "done" } else { "error" }
}

fn refusal(err: &crate::app::purchase::PurchaseError) -> String {
    use crate::app::purchase::PurchaseError as E;
    match err {
        E::Store(_) => "503 (Redis did not answer)".into(),
        E::Catalog(_) => "503 (catalog did not answer)".into(),
        E::LimitExceeded { .. } => "LIMIT_EXCEEDED".into(),
        E::SoldOut { .. } => "SOLD_OUT".into(),
        E::Paused => "SALE_PAUSED".into(),
        E::KeysMissing => "503 (sale not in Redis)".into(),
        E::Ended => "SALE_ENDED".into(),
        E::QueueRejected => "QUEUE_REJECTED".into(),
        E::OrderEnded { status, .. } => format!("ORDER_{}", status.as_str()),
        E::NotStarted { .. } => "NOT_STARTED".into(),
        other => other.to_string(),
    }
}

fn query_refusal(err: &crate::app::order_queries::QueryError) -> String {
    use crate::app::order_queries::QueryError;
    match err {
        QueryError::Expired => "EXPIRED".into(),
        QueryError::NotFound => "NOT_FOUND".into(),
        QueryError::NotPayable(_) => "NOT_PAYABLE".into(),
        QueryError::Orders(_) | QueryError::Stock(_) | QueryError::Catalog(_) => {
            "store error".into()
        }
        other => format!("{other}"),
    }
}
