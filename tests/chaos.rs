//! The chaos suite: a real sale with concurrent buyers while something
//! breaks, each scenario ending with the invariant checker.
//!
//! Short form by default (inside `make test`); `make chaos` sets
//! `CHAOS=full` for larger sales and prints every scenario's figures. Faults
//! that would disturb other tests (killing or pausing a server) are made on
//! servers the scenario starts for itself on free loopback ports.

use lambda_http::Request;
use purchase::LivePurchase;
use seckill_infra::emulator;
use seckill_infra::event_source::{EventSource, EventSourceSettings, queue_arn};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::{SqsInspector, SqsQueue};
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::invariants::{InvariantChecker, Violation};
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::app::reconcile::{ReconcileSettings, Reconciler};
use seckill_shared::clock;
use seckill_shared::domain::orders::OrderStatus;
use seckill_shared::domain::{OrderId, Sale};
use seckill_shared::ports::OrderStore;
use seckill_tests::*;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Stock and concurrency of a scenario's sale.
#[derive(Clone, Copy)]
struct Scale {
    stock: u32,
    concurrency: usize,
}

fn scale() -> Scale {
    if std::env::var("CHAOS").as_deref() == Ok("full") {
        Scale {
            stock: 300,
            concurrency: 64,
        }
    } else {
        Scale {
            stock: 40,
            concurrency: 16,
        }
    }
}

// ---------------------------------------------------------------- processes

/// A `redis-server` of the scenario's own, so it can be killed and paused.
pub(crate) struct OwnRedis {
    pub(crate) port: u16,
    /// Extra `redis-server` arguments (a replica's `--replicaof`), kept for
    /// a restart.
    args: Vec<String>,
    /// Its working directory, its own: a node started in a shared one
    /// loads whatever `dump.rdb` another left there (a replica's full sync
    /// onto a non-empty dataset writes one), so a restart meant to be
    /// empty brought back another node's older data.
    dir: std::path::PathBuf,
    child: Option<std::process::Child>,
}

impl OwnRedis {
    async fn start() -> OwnRedis {
        Self::start_with(&[]).await
    }

    pub(crate) async fn start_with(args: &[&str]) -> OwnRedis {
        let dir = std::env::temp_dir().join(unique("redis-node"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis = OwnRedis {
            port: free_port_to_keep(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            dir,
            child: None,
        };
        redis.spawn().await;
        redis
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    async fn spawn(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            // A replica's full sync onto a non-empty dataset goes through a
            // file; it is deleted once loaded, as nothing else persists.
            .args(["--rdb-del-sync-files", "yes"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server on PATH (make test installs it)");
        self.child = Some(child);
        let url = self.url();
        let up = eventually(Duration::from_secs(10), || {
            let url = url.clone();
            async move {
                match redis::Client::open(url) {
                    Ok(c) => c.get_multiplexed_async_connection().await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        assert!(up, "redis-server did not start on {}", self.port);
    }

    /// SIGKILL: no shutdown, no save; everything it held is gone.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// `REPLICAOF NO ONE`: a replica made a primary, and one still when
    /// restarted (its `--replicaof` dropped, as a failover rewrites the
    /// node's configuration).
    pub(crate) async fn promote(&mut self) {
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut self.conn().await)
            .await
            .unwrap();
        if let Some(at) = self.args.iter().position(|a| a == "--replicaof") {
            self.args.drain(at..(at + 3).min(self.args.len()));
        }
    }

    /// Starts again, empty, on the same port.
    pub(crate) async fn restart(&mut self) {
        self.kill();
        self.forget_snapshot();
        self.spawn().await;
    }

    /// Starts again on the same port from the snapshot a `SAVE` wrote.
    pub(crate) async fn restart_from_snapshot(&mut self) {
        self.kill();
        self.spawn().await;
        self.forget_snapshot();
    }

    /// Its `dump.rdb` gone, so the next start is empty.
    pub(crate) fn forget_snapshot(&self) {
        let _ = std::fs::remove_file(self.dir.join("dump.rdb"));
    }

    pub(crate) async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `moto_server` of the scenario's own, so it can be stopped.
pub(crate) struct OwnMoto {
    pub(crate) port: u16,
    child: tokio::process::Child,
}

impl OwnMoto {
    async fn start() -> OwnMoto {
        Self::start_with(false).await
    }

    /// With `item_undo`, moto through `infra/moto/server.py` (see
    /// [`spawn_moto`]): a long run's tables stay fast to write.
    pub(crate) async fn start_with(item_undo: bool) -> OwnMoto {
        let (child, url) = spawn_moto(item_undo).await;
        let port = url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
        OwnMoto { port, child }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGSTOP / SIGCONT: the process freezes with its state; connections
    /// are accepted by the kernel and never answered.
    pub(crate) fn signal(&self, name: &str) {
        let pid = self.child.id().expect("moto_server is running");
        let ok = std::process::Command::new("kill")
            .args([name, &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {name}");
    }
}

impl Drop for OwnMoto {
    fn drop(&mut self) {
        // A stopped process is let go first; the child is killed on drop.
        if self.child.id().is_some() {
            self.signal("-CONT");
        }
        let _ = self.child.start_kill();
    }
}

/// A TCP forwarder the scenario can take down (connections refused, as when
/// the server process is gone) and bring back on the same port.
pub(crate) struct Proxy {
    pub(crate) port: u16,
    upstream: u16,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    pub(crate) async fn start(upstream: u16) -> Proxy {
        Self::start_on(free_port_to_keep(), upstream).await
    }

    /// On a port chosen by the caller (one already handed to a process
    /// that will connect to it).
    pub(crate) async fn start_on(port: u16, upstream: u16) -> Proxy {
        let mut proxy = Proxy {
            port,
            upstream,
            task: None,
        };
        proxy.up().await;
        proxy
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Points the proxy at another server, as a failover moves the primary
    /// endpoint: every forwarded connection is closed, new ones reach
    /// `upstream`.
    pub(crate) async fn switch_to(&mut self, upstream: u16) {
        self.down().await;
        self.upstream = upstream;
        self.up().await;
    }

    pub(crate) async fn up(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap_or_else(|e| panic!("a proxy on port {}: {e}", self.port));
        let upstream = self.upstream;
        self.task = Some(tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                conns.spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
    }

    /// A partition: connections are accepted and read, nothing is
    /// forwarded, nothing answered. A request sent now never arrives.
    pub(crate) async fn blackhole(&mut self) {
        self.down().await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        self.task = Some(tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                conns.spawn(async move {
                    let _ = tokio::io::copy(&mut inbound, &mut tokio::io::sink()).await;
                });
            }
        }));
    }

    /// Closes the listener and every forwarded connection.
    pub(crate) async fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

// ---------------------------------------------------------------- buyers

/// What one purchase got.
#[derive(Debug, Clone)]
struct Outcome {
    phase: &'static str,
    user: String,
    status: u16,
    code: String,
    order_id: Option<String>,
    millis: u128,
}

type Call = Arc<dyn Fn(Request) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

/// Concurrent buyers, each a new user buying once, with every answer kept;
/// or, with a pool, every other buyer one of a few repeat buyers.
struct Buyers {
    sale: String,
    call: Call,
    /// `Some(n)`: odd-numbered buyers are `p0`..`p{n-1}` in turn (each comes
    /// back and tries again, past their limit); even-numbered ones new.
    pool: Option<usize>,
    next: AtomicUsize,
    tried: AtomicUsize,
    phase: Mutex<&'static str>,
    outcomes: Mutex<Vec<Outcome>>,
    sold_out: AtomicBool,
    /// From this many answered on, no buyer starts until [`Self::release`]
    /// (`usize::MAX`: never): a fault lands after exactly so many, however
    /// fast the stack answers (a polling wait, when SQS answered in
    /// microseconds, saw the whole batch sell out before the fault).
    hold_at: AtomicUsize,
    released: tokio::sync::Notify,
}

impl Buyers {
    fn new(sale: &str, call: Call) -> Arc<Buyers> {
        Self::build(sale, call, None)
    }

    /// Half new buyers, half a pool of `pool` repeat buyers.
    fn with_pool(sale: &str, call: Call, pool: usize) -> Arc<Buyers> {
        Self::build(sale, call, Some(pool))
    }

    fn build(sale: &str, call: Call, pool: Option<usize>) -> Arc<Buyers> {
        Arc::new(Buyers {
            sale: sale.into(),
            call,
            pool,
            next: AtomicUsize::new(0),
            tried: AtomicUsize::new(0),
            phase: Mutex::new("before"),
            outcomes: Mutex::new(Vec::new()),
            sold_out: AtomicBool::new(false),
            hold_at: AtomicUsize::new(usize::MAX),
            released: tokio::sync::Notify::new(),
        })
    }

    /// Buyers stop starting once `n` more than now have been answered.
    fn hold_after(&self, n: usize) {
        self.hold_at
            .store(self.tried.load(Ordering::SeqCst) + n, Ordering::SeqCst);
    }

    /// Waits until the hold is reached (those started before it may still
    /// be in flight).
    async fn until_held(&self) {
        let reached = eventually(Duration::from_secs(60), || async {
            self.tried.load(Ordering::SeqCst) >= self.hold_at.load(Ordering::SeqCst)
        })
        .await;
        assert!(reached, "buyers stalled");
    }

    fn release(&self) {
        self.hold_at.store(usize::MAX, Ordering::SeqCst);
        self.released.notify_waiters();
    }

    fn service(service: Arc<LivePurchase>) -> Call {
        Arc::new(move |req| {
            let service = service.clone();
            Box::pin(
                async move { Reply::from(purchase::handler::handle(&service, req).await.unwrap()) },
            )
        })
    }

    fn set_phase(&self, phase: &'static str) {
        *self.phase.lock().unwrap() = phase;
    }

    /// `count` more buyers, `concurrency` at a time.
    async fn run(self: &Arc<Self>, count: usize, concurrency: usize) {
        let end = self.next.load(Ordering::SeqCst) + count;
        let workers: Vec<_> = (0..concurrency)
            .map(|_| {
                let me = self.clone();
                tokio::spawn(async move {
                    loop {
                        loop {
                            let released = me.released.notified();
                            if me.tried.load(Ordering::SeqCst) < me.hold_at.load(Ordering::SeqCst) {
                                break;
                            }
                            released.await;
                        }
                        let n = me.next.fetch_add(1, Ordering::SeqCst);
                        if n >= end {
                            return;
                        }
                        me.buy_once(n).await;
                    }
                })
            })
            .collect();
        for w in workers {
            w.await.unwrap();
        }
        // Workers overshoot `next` by one each when they stop.
        self.next.store(end, Ordering::SeqCst);
    }

    async fn buy_once(&self, n: usize) {
        let phase = *self.phase.lock().unwrap();
        let user = match self.pool {
            Some(pool) if n % 2 == 1 => format!("p{}", (n / 2) % pool),
            _ => format!("b{n}"),
        };
        let ip = format!("10.9.{}.{}", (n / 250) % 250, n % 250 + 1);
        let started = Instant::now();
        let reply = (self.call)(purchase_event_from(&self.sale, &user, &ip)).await;
        let millis = started.elapsed().as_millis();
        self.tried.fetch_add(1, Ordering::SeqCst);
        if reply.code() == "SOLD_OUT" {
            self.sold_out.store(true, Ordering::SeqCst);
        }
        self.outcomes.lock().unwrap().push(Outcome {
            phase,
            user,
            status: reply.status,
            code: reply.code().to_owned(),
            order_id: reply.body["orderId"].as_str().map(str::to_owned),
            millis,
        });
    }

    /// Batches of buyers until one is told `SOLD_OUT` (bounded).
    async fn until_sold_out(self: &Arc<Self>, concurrency: usize, most: usize) {
        let start = self.tried.load(Ordering::SeqCst);
        while !self.sold_out.load(Ordering::SeqCst) {
            assert!(
                self.tried.load(Ordering::SeqCst) - start < most,
                "not sold out after {most} more buyers: {:?}",
                self.tally()
            );
            self.run(concurrency * 2, concurrency).await;
        }
    }

    fn outcomes(&self) -> Vec<Outcome> {
        self.outcomes.lock().unwrap().clone()
    }

    fn accepted(&self) -> Vec<OrderId> {
        self.outcomes()
            .iter()
            .filter(|o| o.status == 202)
            .map(|o| OrderId::parse(o.order_id.as_deref().unwrap()).unwrap())
            .collect()
    }

    /// Answers by phase and code.
    fn tally(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for o in self.outcomes() {
            let code = if o.status == 202 { "ACCEPTED" } else { &o.code };
            *out.entry(format!("{}:{code}", o.phase)).or_default() += 1;
        }
        out
    }

    fn slowest(&self, phase: &str) -> u128 {
        self.outcomes()
            .iter()
            .filter(|o| o.phase == phase)
            .map(|o| o.millis)
            .max()
            .unwrap_or(0)
    }
}

// ---------------------------------------------------------------- stores

/// The stores of one scenario: a sale, its queue and tables, the writer.
struct Stores {
    config: seckill_shared::config::Config,
    sale: Sale,
    sqs: aws_sdk_sqs::Client,
    db: aws_sdk_dynamodb::Client,
    queue_url: String,
    dlq_url: String,
    checker: seckill_shared::wire::LiveChecker,
}

impl Stores {
    /// Queue and tables on the emulator at `endpoint`, a sale of `stock`
    /// units (one per buyer) in DynamoDB and in the Redis at `redis_url`.
    async fn open(endpoint: &str, redis_url: &str, stock: u32, visibility: u32) -> Stores {
        Self::open_with(endpoint, redis_url, stock, visibility, |_| {}).await
    }

    async fn open_with(
        endpoint: &str,
        redis_url: &str,
        stock: u32,
        visibility: u32,
        tweak: impl FnOnce(&mut Sale),
    ) -> Stores {
        let sdk = aws::loader(aws::Caller::Tool, Duration::from_secs(20))
            .endpoint_url(endpoint)
            .load()
            .await;
        let (sqs, db) = (aws::sqs(&sdk), aws::dynamodb(&sdk));
        let name = unique("c");
        let queues = emulator::ensure_queues(&sqs, &name, &format!("{name}-dlq"), visibility)
            .await
            .unwrap();
        let (sales, orders) = (format!("{name}-sales"), format!("{name}-orders"));
        emulator::ensure_tables(&db, &sales, &orders).await.unwrap();
        let config = seckill_shared::config::Config {
            redis_url: redis_url.into(),
            orders_queue_url: Some(queues.orders_url.clone()),
            orders_dlq_url: Some(queues.dlq_url.clone()),
            sales_table: sales.clone(),
            orders_table: orders.clone(),
            // The production bound: a stuck Redis answers 503 this fast.
            redis_timeout: Duration::from_millis(250),
            sqs_timeout: Duration::from_millis(1_500),
            sale_cache_ttl: Duration::from_secs(60),
            prewarm_lead: Duration::from_secs(600),
            // The stack's strict layer's lag (make chaos: tens of seconds;
            // make test: none): the rebuild waits it out after a loss.
            queue_count_lag: Duration::from_secs(
                std::env::var("QUEUE_COUNT_LAG_SECONDS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            ),
            rate_limits: GENEROUS_LIMITS,
            gate_secret: None,
            payment_secret: None,
            edge_secret: None,
            secrets: Default::default(),
            metrics_namespace: seckill_shared::observe::metrics::DEFAULT_NAMESPACE.into(),
            max_receive_count: Some(emulator::MAX_RECEIVE_COUNT),
            // No payment provider here: the stand-in pays any order.
            stand_in_payments: seckill_shared::config::StandInPayments::Any,
        };
        let mut sale = live_sale(stock, 1);
        tweak(&mut sale);
        let catalog = DynamoCatalog::new(db.clone(), &sales);
        assert!(catalog.create_sale(&sale).await.unwrap());
        let stock_store = RedisStock::connect_lazy(redis_url, Duration::from_secs(2)).unwrap();
        // Marked loaded as prewarm marks it: the redis-killed scenario
        // rebuilds it as a sale that was loaded once.
        seckill_shared::app::jobs::mark_and_load(&catalog, &stock_store, &sale, clock::now_ms())
            .await
            .unwrap();
        let checker = InvariantChecker::new(
            stock_store,
            catalog,
            DynamoOrders::new(db.clone(), &orders, &sales),
            SqsInspector::new(
                sqs.clone(),
                queues.orders_url.clone(),
                Some(queues.dlq_url.clone()),
            ),
        );
        Stores {
            config,
            sale,
            sqs,
            db,
            queue_url: queues.orders_url,
            dlq_url: queues.dlq_url,
            checker,
        }
    }

    fn sale_id(&self) -> &str {
        self.sale.sale_id.as_str()
    }

    /// The purchase function's service, its AWS calls sent to `endpoint`.
    async fn purchase(&self, endpoint: &str) -> Arc<LivePurchase> {
        let sdk = aws::loader(aws::Caller::Tool, self.config.sqs_timeout)
            .endpoint_url(endpoint)
            .load()
            .await;
        let stock = RedisStock::connect_lazy(&self.config.redis_url, self.config.redis_timeout)
            .unwrap()
            .with_rate_limits(GENEROUS_LIMITS);
        let queue = SqsQueue::new(aws::sqs(&sdk), &self.queue_url);
        let catalog = CachedCatalog::new(
            DynamoCatalog::new(aws::dynamodb(&sdk), &self.config.sales_table),
            self.config.sale_cache_ttl,
        );
        Arc::new(PurchaseService::new(stock, queue, catalog))
    }

    /// The purchase service as the function wires it: a purchase that finds
    /// the live sale's keys missing starts its rebuild at once.
    async fn purchase_rebuilding(&self, endpoint: &str) -> Arc<LivePurchase> {
        let sdk = aws::loader(aws::Caller::Tool, self.config.sqs_timeout)
            .endpoint_url(endpoint)
            .load()
            .await;
        let stock = RedisStock::connect_lazy(&self.config.redis_url, self.config.redis_timeout)
            .unwrap()
            .with_rate_limits(GENEROUS_LIMITS);
        let db = aws::dynamodb(&sdk);
        let jobs = seckill_shared::app::jobs::Jobs::new(
            stock.clone(),
            DynamoCatalog::new(db.clone(), &self.config.sales_table),
            DynamoOrders::new(
                db.clone(),
                &self.config.orders_table,
                &self.config.sales_table,
            ),
            Some(SqsInspector::new(
                aws::sqs(&sdk),
                self.queue_url.clone(),
                Some(self.dlq_url.clone()),
            )),
            self.config.prewarm_lead,
        )
        .with_settle(self.config.rebuild_settle());
        let queue = SqsQueue::new(aws::sqs(&sdk), &self.queue_url);
        let catalog = CachedCatalog::new(
            DynamoCatalog::new(db, &self.config.sales_table),
            self.config.sale_cache_ttl,
        );
        Arc::new(PurchaseService::new(stock, queue, catalog).with_rebuild(Arc::new(jobs)))
    }

    /// The order-writer as the template wires it, on these tables.
    fn writer(&self) -> Arc<order_writer::LiveWriter> {
        let stock =
            RedisStock::connect_lazy(&self.config.redis_url, Duration::from_secs(2)).unwrap();
        let orders = DynamoOrders::new(
            self.db.clone(),
            &self.config.orders_table,
            &self.config.sales_table,
        );
        let catalog = CachedCatalog::new(
            DynamoCatalog::new(self.db.clone(), &self.config.sales_table),
            Duration::from_secs(30),
        );
        Arc::new(seckill_shared::app::order_writer::OrderWriter::new(
            orders, stock, catalog,
        ))
    }

    /// Event-source settings with one poller: moto applies concurrent
    /// transactions on one sale item without the isolation DynamoDB gives
    /// (an emulator limit, worked around here, not in the writer).
    async fn source_settings(&self) -> EventSourceSettings {
        let arn = queue_arn(&self.sqs, &self.queue_url).await.unwrap();
        let mut settings = EventSourceSettings::template(&self.queue_url, &arn, "us-east-1");
        settings.maximum_concurrency = 1;
        settings.wait_time_seconds = 1;
        settings
    }

    /// The writer polling the queue, as Lambda's event source mapping does.
    async fn start_writer(&self) -> EventSource {
        EventSource::spawn(
            self.sqs.clone(),
            self.source_settings().await,
            seckill_infra::local::writer_handler(self.writer()),
        )
    }

    /// The same, each batch written in its `turn`: whatever else writes the
    /// tables (the unpaid release, payments, reconcile) takes the same turn,
    /// since moto applies concurrent transactions without isolation, and
    /// undoes a cancelled one by restoring a copy of every table it touched
    /// (a write made meanwhile is lost with it).
    async fn start_writer_in_turn(&self, turn: Arc<tokio::sync::Mutex<()>>) -> EventSource {
        let inner = seckill_infra::local::writer_handler(self.writer());
        let handler = move |event: aws_lambda_events::event::sqs::SqsEvent| {
            let (inner, turn) = (inner.clone(), turn.clone());
            async move {
                let _turn = turn.lock_owned().await;
                inner(event).await
            }
        };
        EventSource::spawn(self.sqs.clone(), self.source_settings().await, handler)
    }

    async fn queue_empty(&self) -> bool {
        let d = seckill_shared::adapters::sqs::depth(&self.sqs, &self.queue_url)
            .await
            .unwrap();
        d.total() == 0
    }

    async fn rows(&self) -> Vec<seckill_shared::domain::orders::Order> {
        self.checker
            .orders()
            .all_orders_of_sale(&self.sale.sale_id)
            .await
            .unwrap()
    }

    /// Polls until the queue is empty and every accepted order has a row.
    async fn settle(&self, accepted: &[OrderId]) {
        let want: HashSet<&str> = accepted.iter().map(OrderId::as_str).collect();
        let settled = eventually(Duration::from_secs(120), || async {
            if !self.queue_empty().await {
                return false;
            }
            let rows = self.rows().await;
            let have: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
            want.iter().all(|id| have.contains(id))
        })
        .await;
        if !settled {
            let rows = self.rows().await;
            let have: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
            let missing = want.iter().filter(|id| !have.contains(*id)).count();
            let queue = seckill_shared::adapters::sqs::depth(&self.sqs, &self.queue_url).await;
            let dlq = seckill_shared::adapters::sqs::depth(&self.sqs, &self.dlq_url).await;
            panic!(
                "the writer did not write every accepted order: {missing} of {} missing, queue {queue:?}, DLQ {dlq:?}",
                want.len()
            );
        }
    }

    /// Reconcile as the schedule would run it `ahead` from now.
    async fn reconcile_at(
        &self,
        ahead: Duration,
    ) -> seckill_shared::app::reconcile::ReconcileReport {
        let reconciler = Reconciler::new(
            self.checker.stock().clone(),
            self.checker.catalog().clone(),
            self.checker.orders().clone(),
            SqsQueue::new(self.sqs.clone(), &self.queue_url),
            SqsInspector::new(
                self.sqs.clone(),
                &self.queue_url,
                Some(self.dlq_url.clone()),
            ),
            ReconcileSettings::default(),
        );
        let now = clock::now_ms() + i64::try_from(ahead.as_millis()).unwrap();
        reconciler
            .reconcile_sale(&self.sale.sale_id, now)
            .await
            .unwrap()
            .unwrap()
    }

    /// The checker's findings. Retried until the stores answer: after a
    /// Redis restart the first call on a connection made before it fails
    /// once while the connection manager reconnects.
    async fn violations(&self, accepted: &[OrderId]) -> Vec<Violation> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.checker.check_sale(&self.sale.sale_id, accepted).await {
                Ok(found) => return found.unwrap(),
                Err(err) => assert!(Instant::now() < deadline, "checker: {err}"),
            }
        }
    }

    /// The checker's verdict plus the scenario-wide promises: every 202 is
    /// a row, the whole stock sold, none twice.
    async fn assert_sound(&self, scenario: &str, buyers: &Buyers, extra: &str) {
        let accepted = buyers.accepted();
        let violations = self.violations(&accepted).await;
        let rows = self.rows().await;
        let live: Vec<_> = rows
            .iter()
            .filter(|o| matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid))
            .collect();
        let units: u32 = live.iter().map(|o| o.quantity.get()).sum();
        let tally = buyers.tally();
        let released = buyers.outcomes().iter().filter(|o| o.status == 503).count();
        println!(
            "chaos {scenario}: tried={} accepted={} orders_written={} units_sold={units}/{} released_or_refused_503={released} violations={} {extra}\n  answers: {tally:?}",
            buyers.tried.load(Ordering::SeqCst),
            accepted.len(),
            rows.len(),
            self.sale.total_stock,
            violations.len(),
        );
        assert_eq!(violations, vec![], "{scenario}: invariants");
        assert_eq!(
            units, self.sale.total_stock,
            "{scenario}: the whole stock sold, no more"
        );
        let ids: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
        assert_eq!(ids.len(), rows.len(), "{scenario}: no order twice");
        let users: HashSet<&str> = live.iter().map(|o| o.user_id.as_str()).collect();
        assert_eq!(
            users.len(),
            live.len(),
            "{scenario}: nobody over the limit of 1"
        );
    }
}

// ---------------------------------------------------------------- scenarios

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_killed_mid_sale_answers_503_at_once_and_the_sale_completes_after_rebuild() {
    let s = scale();
    let mut redis = OwnRedis::start().await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &redis.url(), s.stock, 5).await;
    let writer = stores.start_writer().await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase_rebuilding(&endpoint).await),
    );

    buyers.run(s.stock as usize / 4, s.concurrency).await;
    // Killed while a batch of buyers is in flight (early enough that stock
    // is left for after the rebuild).
    buyers.set_phase("outage");
    buyers.hold_after(s.concurrency / 2);
    let batch = {
        let buyers = buyers.clone();
        tokio::spawn(async move { buyers.run(s.stock as usize * 2, s.concurrency).await })
    };
    buyers.until_held().await;
    redis.kill();
    buyers.release();
    batch.await.unwrap();
    // Restarted empty: the sale is not there until it is rebuilt, which the
    // purchases themselves start (no scheduled prewarm runs here), once the
    // queue has drained.
    redis.restart().await;
    let restarted = Instant::now();
    buyers.set_phase("empty");
    // The rebuild waits out the queue counts' lag after the loss, then
    // for counts that lag behind the drain.
    let settle = stores.config.rebuild_settle()
        + stores.config.queue_count_lag
        + if stores.config.queue_count_lag.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_secs(5)
        };
    let back = eventually(Duration::from_secs(60) + settle, || async {
        buyers.run(s.concurrency / 4, s.concurrency / 4).await;
        buyers
            .outcomes()
            .iter()
            .any(|o| o.phase == "empty" && o.status == 202)
    })
    .await;
    let recovery = restarted.elapsed();
    if !back {
        // What the rebuild waits for, if anything (seen once in CI, under load).
        let queue = seckill_shared::adapters::sqs::depth(&stores.sqs, &stores.queue_url).await;
        let dlq = seckill_shared::adapters::sqs::depth(&stores.sqs, &stores.dlq_url).await;
        panic!(
            "the purchases' rebuild never brought the sale back: queue {queue:?}, DLQ {dlq:?}, answers {:?}",
            buyers.tally()
        );
    }
    println!(
        "chaos redis-killed: first 202 {:.1} s after the empty Redis answered again",
        recovery.as_secs_f64()
    );
    // The rebuild itself within 5 s; what it waits for by design on top
    // (none with exact counts): the settling after the loss, then counts
    // that lag behind the drain.
    let target = Duration::from_secs(5) + settle;
    assert!(
        recovery <= target,
        "recovery took {recovery:?} (target: {target:?}: 5 s, plus {settle:?} of settling and lagging counts)"
    );
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    stores.settle(&buyers.accepted()).await;
    writer.stop().await;

    // During the outage and before the rebuild every refusal came at once.
    let outage_503: Vec<_> = buyers
        .outcomes()
        .into_iter()
        .filter(|o| o.phase != "before" && o.phase != "after" && o.status == 503)
        .collect();
    assert!(!outage_503.is_empty());
    let slowest = outage_503.iter().map(|o| o.millis).max().unwrap();
    assert!(slowest < 1_000, "a 503 took {slowest} ms");
    // Nothing sold while the keys were missing: the first answers were
    // 503s (the rebuild waits for the queue), and the phase holds nothing
    // but 503s and what the rebuilt sale answers (202, or 410 once its
    // last units went: those complete before a 202, which waits for its
    // send). The checker below proves no unit was sold twice.
    let empty: Vec<_> = buyers
        .outcomes()
        .into_iter()
        .filter(|o| o.phase == "empty")
        .collect();
    assert_eq!(empty[0].status, 503, "an empty Redis sells nothing");
    assert!(
        empty.iter().all(|o| matches!(
            (o.status, o.code.as_str()),
            (503, _) | (202, _) | (410, "SOLD_OUT")
        )),
        "{:?}",
        buyers.tally()
    );
    stores
        .assert_sound(
            "redis-killed",
            &buyers,
            &format!(
                "outage_503={} slowest_503_ms={slowest} recovery_s={:.1}",
                outage_503.len(),
                recovery.as_secs_f64()
            ),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_flush_and_client_pause_keep_the_latency_budget() {
    let s = scale();
    let redis = OwnRedis::start().await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &redis.url(), s.stock, 5).await;
    let writer = stores.start_writer().await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    let mut admin = redis.conn().await;

    buyers.run(s.stock as usize / 4, s.concurrency).await;
    // The script cache emptied under the buyers: EVALSHA gets NOSCRIPT and
    // the client loads the script again.
    buyers.set_phase("flush");
    buyers.hold_after(s.concurrency / 2);
    let batch = {
        let buyers = buyers.clone();
        tokio::spawn(async move { buyers.run(s.stock as usize / 4, s.concurrency).await })
    };
    buyers.until_held().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    buyers.release();
    batch.await.unwrap();
    // Every client paused for 2 s as the next buyers arrive: a purchase
    // gives up at its Redis timeout.
    buyers.set_phase("pause");
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(2_000)
        .query_async(&mut admin)
        .await
        .unwrap();
    // Until Redis answers again (bounded: the pause is 2 s).
    for _ in 0..200 {
        let before = buyers.outcomes().len();
        buyers.run(s.concurrency, s.concurrency).await;
        if buyers.outcomes()[before..].iter().any(|o| o.status != 503) {
            break;
        }
    }
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    stores.settle(&buyers.accepted()).await;

    let flush_errors = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "flush" && o.status >= 500)
        .count();
    assert_eq!(flush_errors, 0, "SCRIPT FLUSH cost no purchase");
    let slowest_pause = buyers.slowest("pause");
    let pause_503 = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "pause" && o.status == 503)
        .count();
    assert!(pause_503 > 0, "the pause was felt: {:?}", buyers.tally());
    // 250 ms Redis timeout, one reconnect attempt: well under a second,
    // never the pause's 2 s.
    assert!(
        slowest_pause < 1_500,
        "a purchase waited {slowest_pause} ms on a paused Redis"
    );
    // A purchase that timed out may still have run once the pause ended:
    // its reservation has no message. Reconcile relays it after the grace.
    let report = stores.reconcile_at(Duration::from_secs(61)).await;
    let relayed = report
        .repairs
        .iter()
        .filter(|r| r.kind == "RELAYED")
        .count();
    stores.settle(&buyers.accepted()).await;
    writer.stop().await;
    stores
        .assert_sound(
            "script-flush+client-pause",
            &buyers,
            &format!("pause_503={pause_503} slowest_during_pause_ms={slowest_pause} relayed_after_timeout={relayed}"),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moto_stopped_during_purchases_loses_no_accepted_order() {
    let s = scale();
    let moto = OwnMoto::start().await;
    let mut proxy = Proxy::start(moto.port).await;
    let stores = Stores::open(
        &moto.url(),
        &std::env::var("REDIS_URL").unwrap(),
        s.stock,
        5,
    )
    .await;
    // The purchase function reaches the emulator through the proxy; the
    // writer and the checker directly.
    let service = stores.purchase(&proxy.url()).await;
    let buyers = Buyers::new(stores.sale_id(), Buyers::service(service));
    buyers.run(s.stock as usize / 4, s.concurrency).await;
    let writer = stores.start_writer().await;

    // Frozen (SIGSTOP): sends hang until their timeout. Ambiguous: the
    // reservation is kept and the buyer told 202. (The requests wait in the
    // kernel's buffers and land when the process resumes.)
    buyers.set_phase("frozen");
    moto.signal("-STOP");
    buyers.run(s.concurrency / 2, s.concurrency / 2).await;
    moto.signal("-CONT");
    // Partitioned: requests are swallowed and never arrive. Also ambiguous,
    // and here reconcile must relay them.
    buyers.set_phase("partition");
    proxy.blackhole().await;
    buyers.run(s.concurrency / 2, s.concurrency / 2).await;
    // Unreachable (connection refused): definite. The units go back at once.
    proxy.down().await;
    buyers.set_phase("refused");
    let stock_before = stores
        .checker
        .stock()
        .snapshot(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap()
        .stock;
    buyers.run(s.concurrency / 2, s.concurrency / 2).await;
    let stock_after = stores
        .checker
        .stock()
        .snapshot(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap()
        .stock;
    let refused: Vec<_> = buyers
        .outcomes()
        .into_iter()
        .filter(|o| o.phase == "refused")
        .collect();
    // 503 for a refused send; a buyer may also see SOLD_OUT for a moment
    // while the others' units are on their way back.
    assert!(
        refused.iter().all(|o| o.status != 202) && refused.iter().any(|o| o.status == 503),
        "a refused send is a definite failure: {:?}",
        buyers.tally()
    );
    assert_eq!(
        stock_before, stock_after,
        "every refused purchase gave its unit back"
    );
    proxy.up().await;
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;

    // The frozen phase's sends may or may not have landed; reconcile relays
    // whatever has no row once the queue is drained.
    let accepted = buyers.accepted();
    let drained = eventually(Duration::from_secs(120), || stores.queue_empty()).await;
    assert!(drained);
    let report = stores.reconcile_at(Duration::from_secs(61)).await;
    let relayed = report
        .repairs
        .iter()
        .filter(|r| r.kind == "RELAYED")
        .count();
    stores.settle(&accepted).await;
    writer.stop().await;
    let ambiguous = buyers
        .outcomes()
        .iter()
        .filter(|o| (o.phase == "frozen" || o.phase == "partition") && o.status == 202)
        .count();
    assert!(
        ambiguous > 0,
        "a frozen or partitioned emulator's sends are ambiguous: 202"
    );
    assert!(relayed > 0, "the partition's swallowed sends were relayed");
    stores
        .assert_sound(
            "moto-stopped",
            &buyers,
            &format!(
                "ambiguous_202={ambiguous} definite_503={} relayed={relayed} slowest_frozen_ms={}",
                refused.len(),
                buyers.slowest("frozen")
            ),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writer_dying_between_write_and_delete_writes_nothing_twice() {
    let s = scale();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &std::env::var("REDIS_URL").unwrap(), s.stock, 2).await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    let load = {
        let buyers = buyers.clone();
        tokio::spawn(async move {
            buyers
                .until_sold_out(s.concurrency, s.stock as usize * 20)
                .await
        })
    };
    // Three "lives" of the writer that each take a batch, write it to
    // DynamoDB and die before deleting it (the message comes back after the
    // visibility timeout), while the buyers keep buying.
    let writer = stores.writer();
    let mut died_holding = 0;
    for _ in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let got = loop {
            let got = stores
                .sqs
                .receive_message()
                .queue_url(&stores.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            if !got.is_empty() {
                break got;
            }
            assert!(Instant::now() < deadline, "no message to take");
        };
        let records: Vec<(String, String)> = got
            .iter()
            .map(|m| (m.message_id.clone().unwrap(), m.body.clone().unwrap()))
            .collect();
        let records: Vec<(&str, &str)> = records
            .iter()
            .map(|(i, b)| (i.as_str(), b.as_str()))
            .collect();
        let failures = invoke_writer(&writer, sqs_event(&records)).await.unwrap();
        assert!(failures.is_empty());
        died_holding += records.len();
        // ... and here the process is gone: no DeleteMessage.
    }
    load.await.unwrap();
    let source = stores.start_writer().await;
    stores.settle(&buyers.accepted()).await;
    let counts = source.stop().await;
    stores
        .assert_sound(
            "writer-killed-before-delete",
            &buyers,
            &format!("redelivered_after_crash={died_holding} source: {counts}"),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_message_delivered_twice_makes_no_duplicate() {
    let s = scale();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &std::env::var("REDIS_URL").unwrap(), s.stock, 5).await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    // The wrapper: after the real writer handled a batch, every record seen
    // for the first time is sent to the queue again.
    let resent: Arc<Mutex<HashSet<String>>> = Arc::default();
    let handler = {
        let inner = seckill_infra::local::writer_handler(stores.writer());
        let (sqs, url, resent) = (stores.sqs.clone(), stores.queue_url.clone(), resent.clone());
        move |event: aws_lambda_events::event::sqs::SqsEvent| {
            let (inner, sqs, url, resent) =
                (inner.clone(), sqs.clone(), url.clone(), resent.clone());
            Box::pin(async move {
                let bodies: Vec<String> = event
                    .records
                    .iter()
                    .filter_map(|r| r.body.clone())
                    .collect();
                let out = inner(event).await;
                for body in bodies {
                    if resent.lock().unwrap().insert(body.clone()) {
                        sqs.send_message()
                            .queue_url(&url)
                            .message_body(body)
                            .send()
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                }
                out
            })
                as Pin<
                    Box<
                        dyn Future<
                                Output = Result<
                                    aws_lambda_events::event::sqs::SqsBatchResponse,
                                    String,
                                >,
                            > + Send,
                    >,
                >
        }
    };
    let source = EventSource::spawn(stores.sqs.clone(), stores.source_settings().await, handler);
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    let accepted = buyers.accepted();
    stores.settle(&accepted).await;
    let all_resent = eventually(Duration::from_secs(60), || async {
        resent.lock().unwrap().len() >= accepted.len() && stores.queue_empty().await
    })
    .await;
    assert!(all_resent);
    let counts = source.stop().await;
    assert!(
        counts.records_delivered >= 2 * accepted.len() as u64,
        "every message delivered twice: {counts}"
    );
    stores
        .assert_sound(
            "every-message-twice",
            &buyers,
            &format!("deliveries={} source: {counts}", counts.records_delivered),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pay_and_expire_race_under_load_never_sell_a_unit_twice() {
    let s = scale();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    // A 4 s payment window: expiries happen while the sale still runs, and
    // the units they give back are bought again by later buyers. (Not 2 s:
    // a read of the pending orders queries all 32 buckets of the sale's
    // index, one emulator request each, and takes about a second on a busy
    // emulator.)
    let stores = Stores::open_with(
        &endpoint,
        &std::env::var("REDIS_URL").unwrap(),
        s.stock,
        5,
        |sale| sale.payment_window_seconds = 4,
    )
    .await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
    );
    let jobs = Arc::new(
        seckill_shared::wire::jobs(&stores.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap(),
    );
    let writer = stores.writer();
    let orders = stores.checker.orders().clone();
    let done = Arc::new(AtomicBool::new(false));
    // Writes and releases alternate in one task: moto applies concurrent
    // transactions on the sale item without isolation (see `source_settings`).
    // Payments (order rows only) race both freely.
    let worker = {
        let (sqs, url, jobs, done) = (
            stores.sqs.clone(),
            stores.queue_url.clone(),
            jobs.clone(),
            done.clone(),
        );
        tokio::spawn(async move {
            let mut expired = 0;
            loop {
                let got = sqs
                    .receive_message()
                    .queue_url(&url)
                    .max_number_of_messages(10)
                    .wait_time_seconds(0)
                    .send()
                    .await
                    .unwrap()
                    .messages
                    .unwrap_or_default();
                if !got.is_empty() {
                    let records: Vec<(String, String)> = got
                        .iter()
                        .map(|m| (m.message_id.clone().unwrap(), m.body.clone().unwrap()))
                        .collect();
                    let refs: Vec<(&str, &str)> = records
                        .iter()
                        .map(|(i, b)| (i.as_str(), b.as_str()))
                        .collect();
                    // A batch whose every record failed (the emulator too
                    // slow for the writer's budget under this load) is an
                    // error, and goes back to the queue whole, as Lambda's
                    // event source does: not a test failure.
                    let failures = match invoke_writer(&writer, sqs_event(&refs)).await {
                        Ok(failures) => failures,
                        Err(err) => {
                            eprintln!(
                                "chaos pay-vs-expire: a whole batch failed, back to the queue: {err}"
                            );
                            records.iter().map(|(id, _)| id.clone()).collect()
                        }
                    };
                    for m in got {
                        if !failures.contains(m.message_id.as_ref().unwrap()) {
                            sqs.delete_message()
                                .queue_url(&url)
                                .receipt_handle(m.receipt_handle.unwrap())
                                .send()
                                .await
                                .unwrap();
                        }
                    }
                }
                let report = jobs
                    .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(10))
                    .await
                    .unwrap();
                expired += report.expired;
                if done.load(Ordering::SeqCst) && got_nothing_left(&sqs, &url).await {
                    return expired;
                }
            }
        })
    };
    // Payers: every pending order of an even-numbered buyer is paid in the
    // last two seconds of its window (a read of the index takes part of
    // that), so some payments land before the deadline and some race the
    // release.
    let payers = {
        let (orders, done, sale_id) = (orders.clone(), done.clone(), stores.sale.sale_id.clone());
        tokio::spawn(async move {
            let mut paid = 0usize;
            let mut tried: HashSet<String> = HashSet::new();
            // A read every 200 ms, not back to back: each is 32 emulator
            // requests (one per bucket of the index), and a payer polling
            // without pause would keep the emulator busy for every other
            // scenario running beside this one.
            let mut every = tokio::time::interval(Duration::from_millis(200));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !done.load(Ordering::SeqCst) {
                every.tick().await;
                for o in orders
                    .orders_of_sale(&sale_id, OrderStatus::PendingPayment)
                    .await
                    .unwrap()
                {
                    let even = o
                        .user_id
                        .as_str()
                        .trim_start_matches('b')
                        .parse::<u64>()
                        .unwrap_or(1)
                        % 2
                        == 0;
                    let due = o.expires_at_ms.unwrap_or(0) - 2_000 <= clock::now_ms();
                    if even
                        && due
                        && tried.insert(o.order_id.to_string())
                        && matches!(
                            orders
                                .pay(&o.order_id, &o.user_id, clock::now_ms())
                                .await
                                .unwrap(),
                            seckill_shared::ports::PayOutcome::Paid(_)
                        )
                    {
                        paid += 1;
                    }
                }
                tokio::task::yield_now().await;
            }
            paid
        })
    };
    // Buyers keep coming until half the stock again has been sold a second
    // time: units handed back by expiries were bought by later buyers.
    let target = s.stock as usize * 3 / 2;
    let resold = eventually(Duration::from_secs(240), || async {
        buyers.run(s.concurrency, s.concurrency).await;
        buyers.accepted().len() >= target
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let paid = payers.await.unwrap();
    let mut expired = worker.await.unwrap();
    assert!(
        resold,
        "units came back and sold again: {:?}",
        buyers.tally()
    );
    // Then the sale settles: every order still pending expires or was paid.
    let deadline = Instant::now() + Duration::from_secs(120);
    let settled = loop {
        expired += jobs
            .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(10))
            .await
            .unwrap()
            .expired;
        let rows = stores.rows().await;
        if rows.iter().all(|o| o.status != OrderStatus::PendingPayment) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
    };
    assert!(settled, "every pending order was paid or expired");
    let rows = stores.rows().await;
    let count = |status| rows.iter().filter(|o| o.status == status).count();
    let (paid_rows, expired_rows) = (count(OrderStatus::Paid), count(OrderStatus::Expired));
    let accepted = buyers.accepted();
    let violations = stores.violations(&accepted).await;
    let (available, sold) = {
        let (_, c) = stores
            .checker
            .catalog()
            .get_record(&stores.sale.sale_id)
            .await
            .unwrap()
            .unwrap();
        (c.available, c.sold)
    };
    println!(
        "chaos pay-vs-expire: tried={} accepted={} orders_written={} paid={paid} expired={expired} rows_paid={paid_rows} rows_expired={expired_rows} available={available} violations={}",
        buyers.tried.load(Ordering::SeqCst),
        accepted.len(),
        rows.len(),
        violations.len()
    );
    assert_eq!(violations, vec![]);
    assert_eq!(rows.len(), accepted.len(), "every 202 is a row");
    // Every payment that won is a PAID row; nothing is left pending. (The
    // release's own count can miss one whose transaction moto applied but
    // answered with a 500, so rows are counted, not reports.)
    assert_eq!(paid_rows, paid, "every winning payment stands");
    assert_eq!(paid_rows + expired_rows, rows.len(), "one winner per order");
    assert!(paid > 0 && expired > 0, "both sides won some");
    assert_eq!(
        (sold, available),
        (paid as i64, i64::from(s.stock) - paid as i64),
        "each paid unit sold once, every expired one back on sale"
    );
}

async fn got_nothing_left(sqs: &aws_sdk_sqs::Client, url: &str) -> bool {
    seckill_shared::adapters::sqs::depth(sqs, url)
        .await
        .map(|d| d.total() == 0)
        .unwrap_or(false)
}

// ---------------------------------------------------------------- failover

/// A Redis failover that loses writes, in a sale of each per-user limit:
/// the replica is promoted while it lags the master by the last purchases.
/// Redis forgets their deductions, buyer counts and reservations; their
/// messages exist. The ledger (DynamoDB) must refuse whatever that would
/// oversell or put a buyer past the limit, and reconcile must bring Redis
/// back to what the ledger leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failover_that_loses_writes_never_oversells_or_passes_a_limit() {
    if std::env::var("CHAOS").as_deref() == Ok("full") {
        // One at a time: each sale has the emulator's throughput to itself,
        // which its payment window is sized for.
        for limit in [1, 2] {
            failover_loses_writes(limit).await;
        }
    } else {
        // Side by side (each has its own servers, queues and tables): the
        // short form's time inside `make test`.
        tokio::join!(failover_loses_writes(1), failover_loses_writes(2));
    }
}

async fn failover_loses_writes(limit: u32) {
    let s = scale();
    let started = Instant::now();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    // The purchases the promoted replica will not have.
    let lag_target = s.stock as usize / 4;
    // Repeat buyers: the first half of the pool buys before the lag, the
    // second half during it (their purchase is lost), and all of them keep
    // coming back after the failover.
    let pool = s.stock as usize / 4;

    // The master sends its first full sync at once, through no file.
    let mut master = OwnRedis::start_with(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ])
    .await;
    // The replication link goes through a proxy so it can be cut; the
    // application reaches Redis through another, its "primary endpoint",
    // which the failover points at the promoted replica.
    let mut link = Proxy::start(master.port).await;
    let link_port = link.port.to_string();
    let replica = OwnRedis::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &link_port,
        "--repl-diskless-load",
        "on-empty-db",
    ])
    .await;
    let mut primary = Proxy::start(master.port).await;
    // Short, so unpaid orders expire while the sale runs; but about as long
    // as the emulator takes to write the sale's orders (some 5 a second
    // while releases compete for it: every read of the sale's pending orders
    // and every release queries all 32 buckets of its index, one emulator
    // request each, and the emulator answers one at a time): a window that
    // passed before its order was written leaves nothing to pay, and a lost
    // purchase expired before its buyer's next one is written puts nobody at
    // the limit.
    let window = (s.stock / 5).max(2);
    let stores = Stores::open_with(&endpoint, &primary.redis_url(), s.stock, 5, |sale| {
        sale.per_user_limit = limit;
        sale.payment_window_seconds = window;
    })
    .await;
    let turn = Arc::new(tokio::sync::Mutex::new(()));
    let mut writer = stores.start_writer_in_turn(turn.clone()).await;
    let buyers = Buyers::with_pool(
        stores.sale_id(),
        Buyers::service(stores.purchase(&endpoint).await),
        pool,
    );
    let jobs = Arc::new(
        seckill_shared::wire::jobs(&stores.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap(),
    );
    let done = Arc::new(AtomicBool::new(false));
    let expired = Arc::new(AtomicUsize::new(0));
    let upkeep = tokio::spawn(upkeep(
        jobs,
        stores.checker.orders().clone(),
        stores.sale.sale_id.clone(),
        turn.clone(),
        done.clone(),
        expired.clone(),
    ));

    // Before: the replica follows, and has caught up with every purchase
    // (its offset reached the master's, read after the buyers stopped).
    buyers.run(s.stock as usize / 4, s.concurrency).await;
    let (to_master, mut to_replica) = (master.conn().await, replica.conn().await);
    let caught_up = eventually(Duration::from_secs(30), || {
        let (mut m, mut r) = (to_master.clone(), to_replica.clone());
        async move {
            let m = replication(&mut m).await;
            let r = replication(&mut r).await;
            field(&r, "master_link_status") == Some("up")
                && field(&r, "master_repl_offset")
                    .and_then(|o| o.parse::<u64>().ok())
                    .zip(field(&m, "master_repl_offset").and_then(|o| o.parse().ok()))
                    .is_some_and(|(replica, master)| replica >= master)
        }
    })
    .await;
    assert!(caught_up, "the replica did not catch up");

    // The writer falls behind (the lag's messages wait in the queue), and
    // the link is cut: the master's next writes never reach the replica.
    writer.stop().await;
    link.blackhole().await;
    buyers.set_phase("lag");
    let in_lag = |b: &Buyers| -> Vec<Outcome> {
        b.outcomes()
            .into_iter()
            .filter(|o| o.phase == "lag" && o.status == 202)
            .collect()
    };
    for _ in 0..50 {
        let got = in_lag(&buyers).len();
        if got >= lag_target {
            break;
        }
        let more = lag_target - got;
        buyers.run(more, more.min(s.concurrency)).await;
    }
    let lost = in_lag(&buyers);
    assert!(lost.len() >= lag_target, "{:?}", buyers.tally());

    // Failover: the replica is promoted, the endpoint moves to it, the
    // master dies with the lag's purchases.
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut to_replica)
        .await
        .unwrap();
    primary.switch_to(replica.port).await;
    master.kill();
    link.down().await;
    drop(to_master);

    // The promoted replica has every purchase before the lag and none of
    // the lag's.
    let snap = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match stores.checker.stock().snapshot(&stores.sale.sale_id).await {
                Ok(Some(snap)) => break snap,
                other => assert!(Instant::now() < deadline, "promoted replica: {other:?}"),
            }
        }
    };
    let kept = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "before" && o.status == 202)
        .all(|o| {
            snap.reservations
                .contains_key(o.order_id.as_deref().unwrap())
        });
    assert!(kept, "the replica lost a purchase made before the lag");
    assert!(
        lost.iter().all(|o| !snap
            .reservations
            .contains_key(o.order_id.as_deref().unwrap())),
        "the replica has a purchase of the lag"
    );

    // A few of the queued messages (lost purchases among them) fail their
    // way into the DLQ, as SQS moves them after maxReceiveCount failures.
    let parked = stores
        .move_messages(&stores.queue_url, &stores.dlq_url, 3)
        .await;
    writer = stores.start_writer_in_turn(turn.clone()).await;

    // After: buyers until sold out, repeat buyers past their limit, the
    // lag's repeat buyers whose purchase Redis forgot among them.
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    // Resale: unpaid orders expire (lost purchases among them, whose
    // reservations the replica never had) and their units are bought again.
    let returned = eventually(Duration::from_secs(u64::from(window) + 120), || async {
        expired.load(Ordering::SeqCst) >= s.stock as usize / 10
    })
    .await;
    assert!(returned, "limit={limit}: no unpaid order expired");
    buyers.set_phase("resale");
    buyers.sold_out.store(false, Ordering::SeqCst);
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    // The operator redrives the DLQ.
    let redriven = stores
        .move_messages(&stores.dlq_url, &stores.queue_url, parked.len())
        .await;
    assert_eq!(redriven.len(), parked.len());
    let accepted = buyers.accepted();
    stores.settle(&accepted).await;
    // Payments and releases stop (orders still pending stay so): the final
    // reads must see the ledger still.
    done.store(true, Ordering::SeqCst);
    let upkept = upkeep.await.unwrap();

    // Reconcile as the schedule would, a minute on (a purchase that timed
    // out but ran is relayed), until a run finds nothing to repair.
    let mut reports = Vec::new();
    for _ in 0..6 {
        let report = {
            let _turn = turn.lock().await;
            stores.reconcile_at(Duration::from_secs(61)).await
        };
        let quiet = report.repairs.is_empty();
        reports.push(report);
        if quiet {
            break;
        }
        // What reconcile relayed is written before the next run looks.
        assert!(eventually(Duration::from_secs(60), || stores.queue_empty()).await);
    }
    let counts = writer.stop().await;
    let settled = reports.last().is_some_and(|r| r.repairs.is_empty());
    assert!(
        settled,
        "limit={limit}: reconcile still repairing after {} runs: {:?}",
        reports.len(),
        reports.last().map(|r| &r.repairs)
    );

    // The verdict.
    let violations = stores.violations(&accepted).await;
    let state = stores
        .checker
        .observe(&stores.sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    let rows = stores.rows().await;
    let by_id: std::collections::HashMap<&str, &seckill_shared::domain::orders::Order> =
        rows.iter().map(|o| (o.order_id.as_str(), o)).collect();
    let count = |status| rows.iter().filter(|o| o.status == status).count();
    let live: Vec<_> = rows
        .iter()
        .filter(|o| matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid))
        .collect();
    let units: u32 = live.iter().map(|o| o.quantity.get()).sum();
    let mut held: BTreeMap<&str, u32> = BTreeMap::new();
    for o in &live {
        *held.entry(o.user_id.as_str()).or_default() += o.quantity.get();
    }
    let rejected: Vec<_> = accepted
        .iter()
        .filter_map(|id| by_id.get(id.as_str()))
        .filter(|o| o.status == OrderStatus::Rejected)
        .collect();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for o in &rejected {
        *reasons
            .entry(o.reject_reason.map_or("?", |r| r.as_str()))
            .or_default() += 1;
    }
    let mut repairs: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reports.iter().flat_map(|r| &r.repairs) {
        *repairs.entry(r.kind).or_default() += 1;
    }
    // What the first run found before repairing: the failover's damage.
    let mut first_found: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &reports[0].violations {
        *first_found.entry(v.code).or_default() += 1;
    }
    let lost_users: HashSet<&str> = lost
        .iter()
        .filter(|o| o.user.starts_with('p'))
        .map(|o| o.user.as_str())
        .collect();
    let rebought = buyers
        .outcomes()
        .iter()
        .filter(|o| o.phase == "after" && o.status == 202 && lost_users.contains(o.user.as_str()))
        .count();
    let snap = state.redis.as_ref().unwrap();
    let queued: i64 = state
        .queued_without_row()
        .map(|(_, r)| i64::try_from(r.quantity).unwrap())
        .sum();
    let ledger_leaves = state.counters.available - queued - state.owed_to_redis();
    println!(
        "chaos failover-loses-writes limit={limit}: tried={} accepted={} rejected_after_202={} written={} expired={} violations={} paid={} lost_in_failover={} lost_buyers_rebought={rebought} parked_in_dlq={} units_held={units}/{} redis_stock={} ledger_available={} rejected_by={reasons:?} first_reconcile={first_found:?} repairs={repairs:?} reconcile_runs={} upkeep_paid={} upkeep_expired={} release_errors={} secs={:.1} source: {counts}\n  answers: {:?}",
        buyers.tried.load(Ordering::SeqCst),
        accepted.len(),
        rejected.len(),
        count(OrderStatus::PendingPayment) + count(OrderStatus::Paid) + count(OrderStatus::Expired),
        count(OrderStatus::Expired),
        violations.len(),
        count(OrderStatus::Paid),
        lost.len(),
        parked.len(),
        stores.sale.total_stock,
        snap.stock,
        state.counters.available,
        reports.len(),
        upkept.paid,
        expired.load(Ordering::SeqCst),
        upkept.release_errors,
        started.elapsed().as_secs_f64(),
        buyers.tally(),
    );
    assert_eq!(violations, vec![], "limit={limit}: invariants");
    let unpaid: Vec<_> = upkept
        .paid_ids
        .iter()
        .filter(|id| by_id.get(id.as_str()).map(|o| o.status) != Some(OrderStatus::Paid))
        .collect();
    assert!(
        unpaid.is_empty(),
        "limit={limit}: a payment that won was undone: {unpaid:?}"
    );
    assert!(
        units <= stores.sale.total_stock,
        "limit={limit}: {units} units held of {}",
        stores.sale.total_stock
    );
    let over: Vec<_> = held.iter().filter(|(_, u)| **u > limit).collect();
    assert!(over.is_empty(), "limit={limit}: over the limit: {over:?}");
    let unwritten: Vec<_> = accepted
        .iter()
        .filter(|id| !by_id.contains_key(id.as_str()))
        .collect();
    assert!(
        unwritten.is_empty(),
        "limit={limit}: 202 without a row: {unwritten:?}"
    );
    let ids: HashSet<&str> = rows.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "limit={limit}: no order twice");
    // Redis offers what the ledger leaves, read with nothing in flight.
    assert!(
        state.settled && state.queue_quiet() && state.dlq_visible == 0,
        "limit={limit}: the final read was not settled and quiet"
    );
    assert_eq!(
        snap.stock,
        ledger_leaves,
        "limit={limit}: Redis stock vs the ledger's available {} - queued {queued} - owed {}",
        state.counters.available,
        state.owed_to_redis()
    );
    // The lost writes were felt: the ledger refused a 202 that Redis should
    // not have given, or reconcile brought Redis back down.
    assert!(
        !rejected.is_empty() || repairs.contains_key("STOCK_RESET"),
        "limit={limit}: the failover lost nothing that mattered"
    );
}

/// What the payers and the unpaid release did during a scenario.
#[derive(Debug, Default)]
struct Upkept {
    paid: usize,
    /// The orders whose payment won.
    paid_ids: Vec<String>,
    release_errors: usize,
}

/// Pays every pending order of the paying buyers at once and, on the
/// release's schedule (every 200 ms here, a minute in production), expires
/// the unpaid ones past their window, counting them in `expired`. Ends
/// once `done` is set.
async fn upkeep(
    jobs: Arc<seckill_shared::wire::LiveJobs>,
    orders: DynamoOrders,
    sale_id: seckill_shared::domain::SaleId,
    turn: Arc<tokio::sync::Mutex<()>>,
    done: Arc<AtomicBool>,
    expired: Arc<AtomicUsize>,
) -> Upkept {
    let mut upkept = Upkept::default();
    let mut tried: HashSet<String> = HashSet::new();
    let mut every = tokio::time::interval(Duration::from_millis(200));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if done.load(Ordering::SeqCst) {
            return upkept;
        }
        let pending = orders
            .orders_of_sale(&sale_id, OrderStatus::PendingPayment)
            .await
            .unwrap();
        // Payments take the turn too: moto undoes a cancelled transaction
        // by restoring a copy of every table it touched, and with it any
        // payment made meanwhile (seen here: a payment that won, then its
        // row back to pending and expired).
        let report = {
            let _turn = turn.lock().await;
            for o in pending {
                if pays(o.user_id.as_str())
                    && tried.insert(o.order_id.to_string())
                    && matches!(
                        orders
                            .pay(&o.order_id, &o.user_id, clock::now_ms())
                            .await
                            .unwrap(),
                        seckill_shared::ports::PayOutcome::Paid(_)
                    )
                {
                    upkept.paid += 1;
                    upkept.paid_ids.push(o.order_id.to_string());
                }
            }
            // A short slice: the writer waits for the same turn, and the
            // next tick goes on where this one stopped.
            jobs.release_unpaid(clock::now_ms(), Instant::now() + Duration::from_millis(500))
                .await
                .unwrap()
        };
        expired.fetch_add(report.expired, Ordering::SeqCst);
        // A return that failed (Redis switching over) is owed: reconcile
        // gives it back.
        upkept.release_errors += report.errors.len();
    }
}

/// Half the new buyers and half the pool pay; the others let their orders
/// expire (and the pool's come back for more).
fn pays(user: &str) -> bool {
    let n = |prefix: char| {
        user.strip_prefix(prefix)
            .and_then(|n| n.parse::<u64>().ok())
    };
    n('b').is_some_and(|n| n % 4 == 0) || n('p').is_some_and(|n| n % 2 == 0)
}

/// `INFO replication` of one server.
pub(crate) async fn replication(conn: &mut redis::aio::MultiplexedConnection) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .unwrap_or_default()
}

pub(crate) fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

impl Stores {
    /// Moves `count` messages from one queue to another (receive, send,
    /// delete), as SQS's redrive to the DLQ or an operator's redrive back
    /// does; returns their order ids. Polls until that many were taken.
    async fn move_messages(&self, from: &str, to: &str, count: usize) -> Vec<String> {
        let mut moved = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while moved.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} messages to move",
                moved.len()
            );
            let got = self
                .sqs
                .receive_message()
                .queue_url(from)
                .max_number_of_messages(i32::try_from(count - moved.len()).unwrap().min(10))
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            for m in got {
                let body = m.body.unwrap();
                self.sqs
                    .send_message()
                    .queue_url(to)
                    .message_body(&body)
                    .send()
                    .await
                    .unwrap();
                self.sqs
                    .delete_message()
                    .queue_url(from)
                    .receipt_handle(m.receipt_handle.unwrap())
                    .send()
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_str(&body).unwrap();
                moved.push(body["orderId"].as_str().unwrap().to_owned());
            }
        }
        moved
    }
}
