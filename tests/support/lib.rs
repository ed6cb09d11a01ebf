//! Test support: a `spawn_app`-style helper over the real services.
//!
//! `make test` starts a real `redis-server` and `moto_server` on free ports
//! and exports `REDIS_URL` and `AWS_ENDPOINT_URL`. Every test gets its own
//! queue, tables and sale ids, so tests run in parallel without sharing state.
//!
//! [`tls`]: the `rediss://` fixtures (a throwaway CA, a TLS `redis-server`,
//! a TLS Redis Cluster) and the child process that trusts the CA.

pub mod own_redis;
pub mod tls;

use lambda_http::{Body, Request};
use purchase::LivePurchase;
use redis::AsyncCommands;
use seckill_infra::emulator;
pub use seckill_infra::event_source::{EventSource, EventSourceSettings};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::{SaleKeys, StoredReservation};
use seckill_shared::clock;
use seckill_shared::config::Config;
use seckill_shared::domain::{OrderMessage, Sale, SaleId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Visibility timeout of test queues: a failed record comes back after this
/// (the template says 61 s; a test cannot wait for five of those).
pub const TEST_VISIBILITY_SECS: u32 = 1;

/// Limits that never bite: most tests are about the stock decision, send
/// thousands of buyers from one address, or click 500 times as one buyer.
/// The limiter's own tests set tight limits.
pub const GENEROUS_LIMITS: seckill_shared::config::RateLimits =
    seckill_shared::config::RateLimits {
        user_per_sec: 10_000.0,
        user_burst: 10_000.0,
        ip_per_sec: 1_000_000.0,
        ip_burst: 1_000_000.0,
    };

/// The gate key of the test stacks.
pub const TEST_GATE_SECRET: &str = "test-gate-secret";
/// The payment provider's key of the tests' orders API.
pub const TEST_PAYMENT_SECRET: &str = "test-payment-secret-of-thirty-two-bytes";

const PURCHASE_EVENT: &str = include_str!("../../events/purchase.json");

/// DynamoDB and SQS clients of `url` with no retries, so each answer is
/// the endpoint's own; each operation bounded by `timeout` (its attempt by
/// 0.45 of it).
pub async fn clients_without_retries(
    url: &str,
    timeout: Duration,
) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
    let sdk = aws::loader(aws::Caller::Tool, timeout)
        .endpoint_url(url)
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .load()
        .await;
    (aws::dynamodb(&sdk), aws::sqs(&sdk))
}

/// A name no other test (or earlier run) uses: `[A-Za-z0-9_-]`, short.
pub fn unique(prefix: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{n}-{nanos:x}", std::process::id())
}

/// A loopback port that was free a moment ago, for a server a test starts
/// itself (the start retries or fails loudly on the rare race).
/// `Authorization` for an admin token signed with a guessed key: what a
/// forger would send.
pub fn forged_admin_bearer(tokens: &seckill_infra::token::TokenSettings) -> String {
    let forger = seckill_infra::token::TokenSettings {
        secret: "guessed".into(),
        ..tokens.clone()
    };
    format!("Bearer {}", forger.mint("ops", true, 300).unwrap())
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A free loopback port below the kernel's ephemeral range, for a server
/// a test stops and starts again on the same port (a killed
/// `redis-server`, a proxy taken down): while it is down, a port of that
/// range may be given to any outgoing connection, and the restart would
/// find it taken.
pub fn free_port_to_keep() -> u16 {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    const LOWEST: u32 = 10_000;
    if ephemeral <= LOWEST + 1_000 {
        return free_port();
    }
    let span = ephemeral - LOWEST;
    // Processes and calls start their search at different ports, so tests
    // running side by side rarely try the same one.
    let start = std::process::id().wrapping_mul(7_919)
        ^ CALLS.fetch_add(1, Ordering::SeqCst).wrapping_mul(104_729);
    (0..span)
        .map(|i| LOWEST + (start.wrapping_add(i) % span))
        .filter_map(|port| u16::try_from(port).ok())
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port below the ephemeral range")
}

/// Set in a child process started by [`in_own_process`].
const OWN_PROCESS: &str = "SECKILL_TEST_OWN_PROCESS";

/// For a test that needs the process to itself (it installs something
/// process-wide, such as the metrics emitter, that every other test's
/// handlers in the suite binary would write into): runs `test` again alone
/// in a child process of this binary and asserts it passed. `test` is the
/// test's full name in the suite (`module::name`). `true` in the child (run
/// the test there), `false` in the parent (done).
pub async fn in_own_process(test: &str) -> bool {
    if std::env::var_os(OWN_PROCESS).is_some() {
        return true;
    }
    assert!(
        run_alone(test, &[(OWN_PROCESS, "1".into())]).await,
        "{test} failed in its own process"
    );
    false
}

/// Runs this binary's test `test` alone in a child process with `env`
/// added, prints its output, and says whether exactly that test passed.
async fn run_alone(test: &str, env: &[(&str, String)]) -> bool {
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    println!("{text}{}", String::from_utf8_lossy(&output.stderr));
    output.status.success() && text.contains("1 passed")
}

/// As [`run_alone`], for a long test whose progress must show while it
/// runs (`make nemesis`): the child's output is printed line by line as it
/// comes, and the test runs even if it is marked ignored. Whether exactly
/// that test passed.
pub async fn run_alone_streaming(test: &str, env: &[(&str, String)]) -> bool {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .arg("--include-ignored")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut passed = false;
    while let Some(line) = lines.next_line().await.unwrap() {
        passed |= line.contains("1 passed");
        println!("{line}");
    }
    child.wait().await.unwrap().success() && passed
}

/// Set in a child process started by [`in_own_emulator`].
const OWN_EMULATOR: &str = "SECKILL_TEST_OWN_EMULATOR";

/// For a test whose figures the shared emulator's load would decide (moto
/// is one Python process: every other test's requests slow it down and,
/// past its timeouts, it fails transactions): runs `test` again in a child
/// process of this binary whose `AWS_ENDPOINT_URL` is a `moto_server` of its
/// own, and asserts the child passed. `test` is the test's full name in
/// the suite (`module::name`). `true` in the child (run the test there),
/// `false` in the parent (done).
pub async fn in_own_emulator(test: &str) -> bool {
    own_emulator(test, false).await
}

/// As [`in_own_emulator`], with a strict layer of its own (the suite's
/// settings, `STRICT_*`) in front of that emulator, served by this
/// process: for a test that needs the strict stack's queues and limits
/// and whose volume would starve the shared emulator (moto copies every
/// table in each transaction: the suite's accumulated tables make each
/// one slow, and concurrent ones held copies until it ran out of memory).
pub async fn in_own_strict_emulator(test: &str) -> bool {
    own_emulator(test, true).await
}

/// An emulator of the caller's own on a free port, and its URL: moto's
/// server (`MOTO_SERVER`, or the one `make test` installs into `.venv`),
/// or with `item_undo` the same moto through `infra/moto/server.py`, as
/// `make run` and `make bench` start it. Killed when dropped.
pub async fn spawn_moto(item_undo: bool) -> (tokio::process::Child, String) {
    let port = free_port();
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/moto_server");
    let moto_server = std::env::var("MOTO_SERVER").unwrap_or_else(|_| venv.into());
    let mut command = if item_undo {
        let python = std::path::Path::new(&moto_server).with_file_name("python3");
        let mut command = tokio::process::Command::new(python);
        command.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../infra/moto/server.py"
        ));
        command
    } else {
        tokio::process::Command::new(&moto_server)
    };
    let moto = command
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{moto_server} (make test installs it into .venv): {e}"));
    let up = eventually(Duration::from_secs(30), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    assert!(
        up,
        "the emulator did not start on {port} (item_undo: {item_undo})"
    );
    (moto, format!("http://127.0.0.1:{port}"))
}

async fn own_emulator(test: &str, strict: bool) -> bool {
    if std::env::var_os(OWN_EMULATOR).is_some() {
        return true;
    }
    // One at a time: these are the suite's heaviest tests (thousands of
    // orders each), and two of them at once on two cores starve their
    // emulators into timeouts and 500s, which is not what they measure.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let (mut moto, emulator) = spawn_moto(false).await;
    let layer = if strict {
        let mut settings = seckill_infra::strict::StrictSettings::from_env().unwrap();
        // The suite's recording is the shared stack's; this one is apart.
        settings.record_file = None;
        Some(
            seckill_infra::strict::start("127.0.0.1:0", &emulator, settings)
                .await
                .unwrap(),
        )
    } else {
        None
    };
    let endpoint = layer.as_ref().map_or(emulator, |l| l.url());
    let output = run_alone(
        test,
        &[(OWN_EMULATOR, "1".into()), ("AWS_ENDPOINT_URL", endpoint)],
    )
    .await;
    drop(layer);
    let _ = moto.kill().await;
    assert!(output, "{test} failed on its own emulator");
    false
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the suite with `make test`, which starts redis-server and moto_server")
    })
}

/// One test's own slice of the stack.
pub struct App {
    pub config: Config,
    /// The orders queue this test owns.
    pub queue_url: String,
    pub dlq_url: String,
    pub service: Arc<LivePurchase>,
    pub sqs: aws_sdk_sqs::Client,
    pub db: aws_sdk_dynamodb::Client,
    pub redis: redis::aio::MultiplexedConnection,
    pub catalog: DynamoCatalog,
}

impl App {
    /// The invariant checker over this app's Redis, tables, queue and DLQ.
    pub fn checker(&self) -> seckill_shared::wire::LiveChecker {
        use seckill_shared::adapters::dynamo::orders::DynamoOrders;
        use seckill_shared::adapters::redis::RedisStock;
        use seckill_shared::adapters::sqs::SqsInspector;
        seckill_shared::app::invariants::InvariantChecker::new(
            RedisStock::connect_lazy(&self.config.redis_url, Duration::from_secs(2)).unwrap(),
            DynamoCatalog::new(self.db.clone(), &self.config.sales_table),
            DynamoOrders::new(
                self.db.clone(),
                &self.config.orders_table,
                &self.config.sales_table,
            ),
            SqsInspector::new(
                self.sqs.clone(),
                self.queue_url.clone(),
                Some(self.dlq_url.clone()),
            ),
        )
    }

    /// A fresh queue (with DLQ), fresh tables, and the live purchase service on them.
    pub async fn spawn() -> App {
        Self::spawn_with(|_| {}).await
    }

    /// Like [`spawn`](Self::spawn), with a chance to change the config first
    /// (for example to point at a queue that does not exist).
    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> App {
        Self::spawn_full(TEST_VISIBILITY_SECS, tweak).await
    }

    /// With the queue's visibility timeout chosen by the test.
    pub async fn spawn_full(visibility_secs: u32, tweak: impl FnOnce(&mut Config)) -> App {
        // Logs only when asked for: `RUST_LOG=warn cargo test ... -- --nocapture`.
        if std::env::var_os("RUST_LOG").is_some() {
            seckill_shared::observe::telemetry::init();
        }
        let redis_url = env("REDIS_URL");
        env("AWS_ENDPOINT_URL");
        let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
        let (sqs, db) = (aws::sqs(&sdk), aws::dynamodb(&sdk));
        let name = unique("t");
        let queues = emulator::ensure_queues(&sqs, &name, &format!("{name}-dlq"), visibility_secs)
            .await
            .unwrap();
        let (sales, orders) = (format!("{name}-sales"), format!("{name}-orders"));
        emulator::ensure_tables(&db, &sales, &orders).await.unwrap();
        let mut config = Config {
            redis_url: redis_url.clone(),
            orders_queue_url: Some(queues.orders_url.clone()),
            orders_dlq_url: Some(queues.dlq_url.clone()),
            sales_table: sales.clone(),
            orders_table: orders,
            // Generous: the emulator answers ~150 sends/s, and tests run in parallel.
            redis_timeout: Duration::from_secs(2),
            sqs_timeout: Duration::from_secs(20),
            sale_cache_ttl: Duration::from_secs(5),
            prewarm_lead: Duration::from_secs(600),
            // The suite's strict layer's lag (make test: none by default;
            // the lag's own tests start layers of their own).
            queue_count_lag: Duration::from_secs(
                std::env::var("QUEUE_COUNT_LAG_SECONDS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            ),
            // These tests are about the stock decision: thousands of buyers
            // arrive from the event file's one address, and one buyer's
            // 500 clicks must reach the limit check. The limiter's own test
            // sets tight limits.
            rate_limits: GENEROUS_LIMITS,
            gate_secret: Some(TEST_GATE_SECRET.into()),
            payment_secret: Some(TEST_PAYMENT_SECRET.into()),
            edge_secret: None,
            secrets: Default::default(),
            metrics_namespace: seckill_shared::observe::metrics::DEFAULT_NAMESPACE.into(),
            // The test queues' redrive, as the template feeds both from one value.
            max_receive_count: Some(emulator::MAX_RECEIVE_COUNT),
            // No payment provider here: the stand-in pays any order.
            stand_in_payments: seckill_shared::config::StandInPayments::Any,
        };
        tweak(&mut config);
        let service = Arc::new(purchase::wire(&config).await.unwrap());
        let redis = redis::Client::open(redis_url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        App {
            queue_url: queues.orders_url,
            dlq_url: queues.dlq_url,
            catalog: DynamoCatalog::new(db.clone(), &sales),
            config,
            service,
            sqs,
            db,
            redis,
        }
    }

    /// Writes the sale to the `sales` table and loads it into Redis.
    pub async fn open_sale(&self, sale: &Sale) {
        assert!(self.catalog.create_sale(sale).await.unwrap());
        let loaded = seckill_shared::app::jobs::mark_and_load(
            &self.catalog,
            self.service.stock(),
            sale,
            clock::now_ms(),
        )
        .await
        .unwrap();
        assert_eq!(loaded, seckill_shared::adapters::redis::LoadOutcome::Loaded);
    }

    /// Sends a real-shaped event through the handler.
    pub async fn call(&self, req: Request) -> Reply {
        let response = purchase::handler::handle(&self.service, req).await.unwrap();
        Reply::from(response)
    }

    pub async fn purchase(&self, sale: &str, user: &str, body: &str) -> Reply {
        self.call(purchase_event(sale, Some(user), body, &[])).await
    }

    /// Everything Redis holds for a sale, to prove that bad input changed nothing.
    pub async fn snapshot(&self, sale: &str) -> BTreeMap<String, String> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        let mut conn = self.redis.clone();
        let mut out = BTreeMap::new();
        let stock: Option<String> = conn.get(&keys.stock).await.unwrap();
        out.insert("stock".into(), format!("{stock:?}"));
        for (name, key) in [
            ("meta", &keys.meta),
            ("buyers", &keys.buyers),
            ("resv", &keys.resv),
            ("userorders", &keys.user_orders),
        ] {
            let all: BTreeMap<String, String> = conn.hgetall(key).await.unwrap();
            out.insert(name.into(), format!("{all:?}"));
        }
        out
    }

    pub async fn stock(&self, sale: &str) -> Option<i64> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        self.redis.clone().get(&keys.stock).await.unwrap()
    }

    pub async fn reservations(&self, sale: &str) -> HashMap<String, StoredReservation> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        let all: HashMap<String, String> = self.redis.clone().hgetall(&keys.resv).await.unwrap();
        all.into_iter()
            .map(|(k, v)| (k, serde_json::from_str(&v).unwrap()))
            .collect()
    }

    pub async fn buyers(&self, sale: &str) -> HashMap<String, i64> {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        self.redis.clone().hgetall(&keys.buyers).await.unwrap()
    }

    /// Every message on the queue (received, left to reappear later).
    pub async fn drain_queue(&self) -> Vec<OrderMessage> {
        let mut out = Vec::new();
        // The messages sent, each once: a standard queue (and the strict
        // layer) may deliver one twice, under its own MessageId.
        let mut seen = std::collections::HashSet::new();
        let mut empty_in_a_row = 0;
        while empty_in_a_row < 2 {
            let messages = self.receive_ten(Some(300)).await;
            if messages.is_empty() {
                empty_in_a_row += 1;
            } else {
                empty_in_a_row = 0;
            }
            for m in messages {
                if seen.insert(m.message_id.clone().unwrap_or_default()) {
                    out.push(serde_json::from_str(m.body.as_deref().unwrap()).unwrap());
                }
            }
        }
        out
    }

    /// Receives every message on the queue and deletes it, as the
    /// event source does after a successful batch.
    pub async fn take_messages(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        loop {
            let got = self.receive_ten(None).await;
            if got.is_empty() {
                return out;
            }
            for m in got {
                self.delete_received(&m).await;
                // A second delivery of one message (at least once) is
                // taken off the queue, not counted again.
                let id = m.message_id.unwrap();
                if !out.iter().any(|(seen, _)| *seen == id) {
                    out.push((id, m.body.unwrap()));
                }
            }
        }
    }

    /// Drains the queue through the order-writer: every message written,
    /// then deleted, as the event source does (a message deleted before its
    /// order is written would let a rebuild running meanwhile see neither).
    pub async fn write_queued_orders(&self) {
        self.write_queued_orders_pausing(|| async {}).await
    }

    /// [`Self::write_queued_orders`], awaiting `between` after each batch
    /// is written, so a test can interleave its own steps with the writes
    /// whatever the machine's pace.
    pub async fn write_queued_orders_pausing<F, Fut>(&self, mut between: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let writer = self.writer().await;
        let mut seen = std::collections::HashSet::new();
        loop {
            let got = self.receive_ten(Some(300)).await;
            if got.is_empty() {
                return;
            }
            // A second delivery of one message (at least once) is written
            // once more (a duplicate) and deleted like the first.
            let records: Vec<(String, String)> = got
                .iter()
                .map(|m| (m.message_id.clone().unwrap(), m.body.clone().unwrap()))
                .collect();
            let fresh: Vec<(&str, &str)> = records
                .iter()
                .filter(|(id, _)| seen.insert(id.clone()))
                .map(|(id, body)| (id.as_str(), body.as_str()))
                .collect();
            if !fresh.is_empty() {
                let failures = invoke_writer(&writer, sqs_event(&fresh)).await.unwrap();
                assert!(failures.is_empty(), "{failures:?}");
            }
            for m in &got {
                self.delete_received(m).await;
            }
            between().await;
        }
    }

    /// Up to ten messages of this test's queue, without waiting (held for
    /// `visibility` seconds, or the queue's own timeout).
    async fn receive_ten(&self, visibility: Option<i32>) -> Vec<aws_sdk_sqs::types::Message> {
        self.sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .set_visibility_timeout(visibility)
            .wait_time_seconds(0)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default()
    }

    async fn delete_received(&self, m: &aws_sdk_sqs::types::Message) {
        self.sqs
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(m.receipt_handle.clone().unwrap())
            .send()
            .await
            .unwrap();
    }

    /// The scheduled jobs on this test's tables and queue.
    pub async fn jobs(&self) -> seckill_shared::wire::LiveJobs {
        seckill_shared::wire::jobs(&self.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap()
    }

    /// Deletes every Redis key of a sale, as a Redis restart would. (Not
    /// FLUSHALL: other tests share the server.)
    pub async fn lose_redis_keys(&self, sale: &str) {
        self.lose_group(&SaleKeys::new(&SaleId::parse(sale).unwrap()))
            .await;
    }

    /// Deletes every key of one group (a sale, or one shard of it), as a
    /// restart of the node holding it would.
    pub async fn lose_group(&self, keys: &SaleKeys) {
        lose_key_group(&mut self.redis.clone(), keys).await;
    }

    /// The live order-writer on this test's tables.
    pub async fn writer(&self) -> Arc<order_writer::LiveWriter> {
        Arc::new(order_writer::wire(&self.config).await.unwrap())
    }

    /// `available` and `sold` of the sale item.
    pub async fn sale_counters(&self, sale: &str) -> (i64, i64) {
        self.try_sale_counters(sale).await.unwrap()
    }

    /// [`App::sale_counters`] for a poll: a read the busy emulator did not
    /// answer within the client's timeout is an error to try again, not a
    /// verdict (a wrong item still panics).
    pub async fn try_sale_counters(
        &self,
        sale: &str,
    ) -> Result<(i64, i64), aws_sdk_dynamodb::error::SdkError<impl std::error::Error>> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let item = self
            .db
            .get_item()
            .table_name(&self.config.sales_table)
            .key("saleId", AttributeValue::S(sale.into()))
            .consistent_read(true)
            .send()
            .await?
            .item
            .unwrap();
        let n = |name: &str| match item.get(name) {
            Some(AttributeValue::N(v)) => v.parse::<i64>().unwrap(),
            other => panic!("{name}: {other:?}"),
        };
        Ok((n("available"), n("sold")))
    }

    /// Every order item of this test's table, by order id.
    pub async fn orders(&self) -> HashMap<String, seckill_shared::domain::orders::Order> {
        order_items(&self.db, &self.config.orders_table)
            .await
            .iter()
            .map(|item| {
                let order =
                    seckill_shared::adapters::dynamo::orders::order_from_item(item).unwrap();
                (order.order_id.to_string(), order)
            })
            .collect()
    }

    /// Visible plus in-flight messages of a queue.
    pub async fn depth_of(&self, queue_url: &str) -> u64 {
        self.try_depth_of(queue_url).await.unwrap()
    }

    /// [`App::depth_of`] for a poll: a count the busy emulator did not
    /// answer in time is tried again, not a verdict.
    pub async fn try_depth_of(&self, queue_url: &str) -> Option<u64> {
        let depth = seckill_shared::adapters::sqs::depth(&self.sqs, queue_url)
            .await
            .ok()?;
        Some(depth.visible + depth.in_flight)
    }

    /// Messages on the queue, visible or not, by the queue's own count.
    pub async fn queue_depth(&self) -> u64 {
        self.depth_of(&self.queue_url).await
    }
}

/// Every order item of an orders table as stored, read consistently; the
/// ledger record the table also holds per buyer is left out.
pub async fn order_items(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    let items: Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> = db
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<_, _>>()
        .await
        .unwrap();
    items
        .into_iter()
        .filter(seckill_shared::adapters::dynamo::orders::is_order_item)
        .collect()
}

/// Deletes every key of one group (a sale, or one shard of it), as a
/// restart of the node holding it would.
pub async fn lose_key_group(conn: &mut redis::aio::MultiplexedConnection, keys: &SaleKeys) {
    let _: () = conn.del(&keys.lost_with_the_node()).await.unwrap();
}

/// Prewarm as the schedule runs it, asked again while another run holds
/// the sale's lock: a purchase that finds a live sale's keys missing starts
/// the rebuild itself, so a test's run may meet it.
pub async fn prewarm_now(
    jobs: &seckill_shared::wire::LiveJobs,
    sale_id: &SaleId,
) -> seckill_shared::app::jobs::PrewarmOutcome {
    use seckill_shared::app::jobs::PrewarmOutcome;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let outcome = jobs.prewarm_sale(sale_id, clock::now_ms()).await.unwrap();
        if outcome != PrewarmOutcome::Busy || tokio::time::Instant::now() >= deadline {
            return outcome;
        }
        tokio::task::yield_now().await;
    }
}

/// A sale open from a minute ago for an hour.
pub fn live_sale(stock: u32, limit: u32) -> Sale {
    seckill_shared::adapters::memory::test_sale(&unique("s"), stock, limit).unwrap()
}

/// The purchase event of `events/purchase.json`, with this sale, caller
/// (`None` removes the authorizer) and body; `headers` are added or replaced.
pub fn purchase_event(
    sale: &str,
    user: Option<&str>,
    body: &str,
    headers: &[(&str, &str)],
) -> Request {
    let mut event: serde_json::Value = serde_json::from_str(PURCHASE_EVENT).unwrap();
    event["pathParameters"]["saleId"] = sale.into();
    event["rawPath"] = format!("/sales/{sale}/purchase").into();
    event["requestContext"]["http"]["path"] = format!("/sales/{sale}/purchase").into();
    match user {
        Some(user) => event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into(),
        None => {
            event["requestContext"]
                .as_object_mut()
                .unwrap()
                .remove("authorizer");
        }
    }
    let obj = event["headers"].as_object_mut().unwrap();
    obj.remove("idempotency-key");
    obj.remove("content-length");
    for (name, value) in headers {
        obj.insert(name.to_ascii_lowercase(), (*value).into());
    }
    event["body"] = body.into();
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// The purchase event as sent from `ip`.
pub fn purchase_event_from(sale: &str, user: &str, ip: &str) -> Request {
    let mut event: serde_json::Value = serde_json::from_str(PURCHASE_EVENT).unwrap();
    event["pathParameters"]["saleId"] = sale.into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into();
    event["requestContext"]["http"]["sourceIp"] = ip.into();
    event["headers"]["x-forwarded-for"] = ip.into();
    let headers = event["headers"].as_object_mut().unwrap();
    headers.remove("idempotency-key");
    headers.remove("content-length");
    event["body"] = serde_json::Value::Null;
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// A response, decoded.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: serde_json::Value,
    pub headers: HashMap<String, String>,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

impl From<lambda_http::Response<Body>> for Reply {
    fn from(response: lambda_http::Response<Body>) -> Self {
        let (parts, body) = response.into_parts();
        let text = match body {
            Body::Text(t) => t,
            Body::Binary(b) => String::from_utf8(b).unwrap(),
            _ => String::new(),
        };
        Reply {
            status: parts.status.as_u16(),
            body: serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
        }
    }
}

/// Polls `check` until it returns true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    // The poll's cadence: the loop ends as soon as `check` holds, or at the
    // deadline.
    let mut every = tokio::time::interval(Duration::from_millis(20));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
    }
}

/// Polls `progress` (a count that only grows, such as orders written)
/// until it reaches `target`. Slow is not wrong: the wait goes on as long
/// as the count moves, and ends in an error only when it has not moved for
/// `stall` (stuck: a wrong answer) or after `cap` in all (a machine too
/// slow for the test); the error says which, with the count reached.
pub async fn until_reached<F, Fut>(
    target: u64,
    stall: Duration,
    cap: Duration,
    mut progress: F,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let started = tokio::time::Instant::now();
    let (mut last, mut moved_at) = (0, started);
    let mut every = tokio::time::interval(Duration::from_millis(200));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let now_at = progress().await;
        let now = tokio::time::Instant::now();
        if now_at >= target {
            return Ok(());
        }
        if now_at > last {
            (last, moved_at) = (now_at, now);
        }
        if now - moved_at >= stall {
            return Err(format!(
                "stuck, not slow: {now_at} of {target} after {:?}, none more in the last {stall:?}",
                now - started
            ));
        }
        if now - started >= cap {
            return Err(format!(
                "too slow a machine, not stuck: {now_at} of {target} after {cap:?}, still moving"
            ));
        }
    }
}

/// [`until_reached`] for a wait many pollers share, each polling its own
/// part (one ticket each, say): whoever sees the whole move calls
/// [`StallWatch::observe`] with the count, and each poller asks
/// [`StallWatch::verdict`] whether to go on. Slow is not wrong: a poller
/// gives up only when the shared count has not moved for `stall`, or after
/// `cap` in all.
pub struct StallWatch {
    started: std::time::Instant,
    stall: Duration,
    cap: Duration,
    /// The highest count seen, and when it last grew.
    seen: std::sync::Mutex<(u64, std::time::Instant)>,
    /// When a poller last took the turn to read the shared count.
    read_at: std::sync::Mutex<std::time::Instant>,
}

impl StallWatch {
    pub fn new(stall: Duration, cap: Duration) -> Self {
        let now = std::time::Instant::now();
        Self {
            started: now,
            stall,
            cap,
            seen: std::sync::Mutex::new((0, now)),
            read_at: std::sync::Mutex::new(now),
        }
    }

    /// Records the shared count; a higher one restarts the stall clock.
    pub fn observe(&self, count: u64) {
        let mut seen = self.seen.lock().unwrap();
        if count > seen.0 {
            *seen = (count, std::time::Instant::now());
        }
    }

    /// Whether the caller takes the turn to read the shared count: true for
    /// one caller every `every`, so many pollers read it as seldom as one.
    pub fn turn_to_read(&self, every: Duration) -> bool {
        let mut read_at = self.read_at.lock().unwrap();
        if read_at.elapsed() < every {
            return false;
        }
        *read_at = std::time::Instant::now();
        true
    }

    /// `Err` saying stuck or too slow, with the count reached; `Ok` to go on.
    pub fn verdict(&self) -> Result<(), String> {
        let (count, moved_at) = *self.seen.lock().unwrap();
        if moved_at.elapsed() >= self.stall {
            return Err(format!(
                "stuck, not slow: {count} after {:?}, none more in the last {:?}",
                self.started.elapsed(),
                self.stall
            ));
        }
        if self.started.elapsed() >= self.cap {
            return Err(format!(
                "too slow a machine, not stuck: {count} after {:?}, still moving",
                self.cap
            ));
        }
        Ok(())
    }
}

/// The local stack of `seckill-local up`, started in-process on a free port
/// with its own queue, tables and demo sale, the order-writer polling its
/// queue like Lambda's event source mapping.
pub struct LocalStack {
    pub addr: std::net::SocketAddr,
    pub demo_sale: String,
    pub config: Config,
    pub queues: emulator::Queues,
    pub writer: Arc<order_writer::LiveWriter>,
    pub admin: Arc<admin_api::Admin>,
    /// The scheduled functions, each wired as its own Lambda.
    pub scheduled: Arc<seckill_infra::local::Scheduled>,
    /// The gateway being served (its token settings, its per-route counts).
    pub gateway: Arc<seckill_infra::gateway::Gateway>,
    pub source: Option<seckill_infra::event_source::EventSource>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Writes the purchase answers' tally to Redis every second, as `up` does.
    outcomes: tokio::task::JoinHandle<()>,
}

impl LocalStack {
    pub async fn start() -> LocalStack {
        Self::start_with(TEST_VISIBILITY_SECS, None).await
    }

    /// With the queue's visibility timeout and the event source's number of
    /// pollers chosen by the test (`None`: the template's).
    pub async fn start_with(visibility_secs: u32, pollers: Option<usize>) -> LocalStack {
        Self::start_full(visibility_secs, pollers, None, None).await
    }

    /// With pages that sign in through the hosted UI at `login_url`.
    pub async fn start_signing_in_at(login_url: &str) -> LocalStack {
        Self::start_full(TEST_VISIBILITY_SECS, None, Some(login_url.to_owned()), None).await
    }

    /// As [`start_with`](Self::start_with), on the Redis at `redis_url`
    /// instead of `REDIS_URL` (a cluster's `?cluster=true` URL).
    pub async fn start_on_redis(
        redis_url: &str,
        visibility_secs: u32,
        pollers: Option<usize>,
    ) -> LocalStack {
        Self::start_full(visibility_secs, pollers, None, Some(redis_url.to_owned())).await
    }

    async fn start_full(
        visibility_secs: u32,
        pollers: Option<usize>,
        login_url: Option<String>,
        redis_url: Option<String>,
    ) -> LocalStack {
        // Logs only when asked for (`RUST_LOG=warn make nemesis`).
        if std::env::var_os("RUST_LOG").is_some() {
            seckill_shared::observe::telemetry::init();
        }
        let name = unique("l");
        let settings = seckill_infra::local::LocalSettings {
            listen: "127.0.0.1:0".into(),
            redis_url: redis_url.unwrap_or_else(|| env("REDIS_URL")),
            queue_name: name.clone(),
            dlq_name: format!("{name}-dlq"),
            sales_table: format!("{name}-sales"),
            orders_table: format!("{name}-orders"),
            demo_sale: format!("{name}-demo"),
            visibility_timeout_secs: visibility_secs,
            // Every request of these tests comes from 127.0.0.1.
            rate_limits: Some(GENEROUS_LIMITS),
            login_url,
        };
        let stack = seckill_infra::local::prepare(&settings).await.unwrap();
        let source = match pollers {
            None => stack.start_order_writer(),
            Some(n) => {
                let mut es = EventSourceSettings::template(
                    &stack.queues.orders_url,
                    &stack.queue_arn,
                    "us-east-1",
                );
                es.maximum_concurrency = n;
                EventSource::spawn(
                    stack.sqs.clone(),
                    es,
                    seckill_infra::local::writer_handler(stack.writer.clone()),
                )
            }
        };
        let addr = stack.listener.local_addr().unwrap();
        let outcomes = stack.start_outcome_flusher();
        let scheduled = stack.scheduled.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let gateway = stack.gateway.clone();
        tokio::spawn(seckill_infra::gateway::serve(
            stack.listener,
            stack.gateway,
            async {
                let _ = stopped.await;
            },
        ));
        LocalStack {
            addr,
            demo_sale: settings.demo_sale,
            config: stack.config,
            queues: stack.queues,
            writer: stack.writer,
            admin: stack.admin,
            scheduled,
            gateway,
            source: Some(source),
            stop: Some(stop),
            outcomes,
        }
    }

    /// The invariant checker over this stack's Redis, tables, queue and DLQ.
    pub async fn checker(&self) -> seckill_shared::wire::LiveChecker {
        use seckill_shared::adapters::dynamo::orders::DynamoOrders;
        use seckill_shared::adapters::redis::RedisStock;
        use seckill_shared::adapters::sqs::SqsInspector;
        let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
        let db = aws::dynamodb(&sdk);
        seckill_shared::app::invariants::InvariantChecker::new(
            RedisStock::connect_lazy(&self.config.redis_url, Duration::from_secs(2)).unwrap(),
            DynamoCatalog::new(db.clone(), &self.config.sales_table),
            DynamoOrders::new(db, &self.config.orders_table, &self.config.sales_table),
            SqsInspector::new(
                aws::sqs(&sdk),
                self.queues.orders_url.clone(),
                Some(self.queues.dlq_url.clone()),
            ),
        )
    }

    /// One HTTP/1.1 request over a fresh connection; returns status and JSON body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, serde_json::Value) {
        let (status, _, body) = self.request_with_headers(method, path, headers, body).await;
        (status, body)
    }

    /// [`Self::request`] with the response's headers (names lower-cased).
    pub async fn request_with_headers(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, HashMap<String, String>, serde_json::Value) {
        http_request(self.addr, method, path, headers, body).await
    }
}

/// How long [`http_request`] waits for a whole answer: far past any
/// answer of the local stack or a Lambda container's cold start, so a
/// request that reaches it is hung, not slow.
pub const HTTP_ANSWER_DEADLINE: Duration = Duration::from_secs(180);

/// One HTTP/1.1 request to `addr` over a fresh connection: status, headers
/// (names lower-cased) and JSON body (`Null` if it is not JSON).
///
/// The request goes out in one write, and an answer with a
/// `content-length` is complete when that many bytes have come: a server
/// may answer before it reads the body and close only once the client has
/// stopped sending (werkzeug, under `sam local start-api`, does both), so
/// waiting for its close would wait for ever. Panics when no whole answer
/// comes within [`HTTP_ANSWER_DEADLINE`].
pub async fn http_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, HashMap<String, String>, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        // On the heap: a buffer in the future would grow every future that
        // awaits this one (a test thread's stack overflowed on it).
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .filter_map(|line| line.split_once(':'))
                    .find(|(name, _)| name.trim() == "content-length")
                    .and_then(|(_, value)| value.trim().parse::<usize>().ok());
                if length.is_some_and(|length| raw.len() >= end + 4 + length) {
                    break;
                }
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(HTTP_ANSWER_DEADLINE, exchange).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(e)) => panic!("{method} {path} to {addr}: {e}"),
        Err(_) => {
            panic!("{method} {path} to {addr}: no whole answer within {HTTP_ANSWER_DEADLINE:?}")
        }
    };
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (
        status,
        headers,
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    )
}

/// A client of a local stack's HTTP API with local tokens: the operator
/// `ops-1` (admin scope) and any buyer.
pub struct StackClient<'a> {
    pub stack: &'a LocalStack,
    pub tokens: seckill_infra::token::TokenSettings,
    admin: String,
}

impl<'a> StackClient<'a> {
    pub fn new(stack: &'a LocalStack) -> Self {
        let tokens = seckill_infra::token::TokenSettings::from_env();
        let admin = format!("Bearer {}", tokens.mint("ops-1", true, 600).unwrap());
        StackClient {
            stack,
            tokens,
            admin,
        }
    }

    /// `Authorization` for `user`.
    pub fn buyer(&self, user: &str) -> String {
        format!("Bearer {}", self.tokens.mint(user, false, 600).unwrap())
    }

    pub async fn admin(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        self.stack
            .request(method, path, &[("authorization", &self.admin)], body)
            .await
    }

    pub async fn put_sale(&self, id: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        self.admin("PUT", &format!("/admin/sales/{id}"), &body.to_string())
            .await
    }

    /// A request with `user`'s token and a JSON content type.
    pub async fn as_buyer(
        &self,
        method: &str,
        path: &str,
        user: &str,
        body: &str,
    ) -> (u16, serde_json::Value) {
        self.stack
            .request(
                method,
                path,
                &[
                    ("authorization", &self.buyer(user)),
                    ("content-type", "application/json"),
                ],
                body,
            )
            .await
    }

    /// One unit of `sale` for `user`.
    pub async fn buy(&self, sale: &str, user: &str) -> (u16, serde_json::Value) {
        self.as_buyer(
            "POST",
            &format!("/sales/{sale}/purchase"),
            user,
            r#"{"quantity": 1}"#,
        )
        .await
    }

    /// `GET /sales/{sale}/orders` as `user`.
    pub async fn my_orders(&self, sale: &str, user: &str) -> (u16, serde_json::Value) {
        self.as_buyer("GET", &format!("/sales/{sale}/orders"), user, "")
            .await
    }
}

impl Drop for LocalStack {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.outcomes.abort();
    }
}

/// Asserts the invariant checker finds nothing wrong with `sale`,
/// `accepted` being every order id a buyer was answered `202` for.
pub async fn assert_clean(
    checker: &seckill_shared::wire::LiveChecker,
    sale: &str,
    accepted: &[String],
) {
    let accepted: Vec<seckill_shared::domain::OrderId> = accepted
        .iter()
        .map(|o| seckill_shared::domain::OrderId::parse(o).unwrap())
        .collect();
    let violations = checker
        .check_sale(&SaleId::parse(sale).unwrap(), &accepted)
        .await
        .unwrap()
        .unwrap_or_default();
    assert_eq!(violations, vec![], "the invariant checker on {sale}");
}

/// An order message body for `sale`, reserved at `reserved_at_ms`.
pub fn order_body(
    order: &str,
    sale: &str,
    user: &str,
    quantity: u32,
    reserved_at_ms: i64,
) -> String {
    serde_json::json!({
        "v": 1, "orderId": order, "saleId": sale, "userId": user, "quantity": quantity,
        "shard": 0, "reservedAt": clock::rfc3339_ms(reserved_at_ms),
    })
    .to_string()
}

/// A real-shaped SQS event of (messageId, body) records.
pub fn sqs_event(records: &[(&str, &str)]) -> aws_lambda_events::event::sqs::SqsEvent {
    let records: Vec<serde_json::Value> = records
        .iter()
        .map(|(id, body)| {
            serde_json::json!({
                "messageId": id, "receiptHandle": format!("rh-{id}"), "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1764471962000",
                               "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1764471962001"},
                "messageAttributes": {}, "md5OfBody": "0", "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:seckill-orders", "awsRegion": "us-east-1",
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).unwrap()
}

/// Runs the order-writer handler on an event, as Lambda would.
pub async fn invoke_writer(
    writer: &order_writer::LiveWriter,
    event: aws_lambda_events::event::sqs::SqsEvent,
) -> Result<Vec<String>, String> {
    let event = lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default());
    order_writer::handler::handle(writer, event)
        .await
        .map(|r| {
            r.batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect()
        })
        .map_err(|e| e.to_string())
}

/// Whatever a writer under test wrote (log lines, EMF lines), kept in memory.
#[derive(Clone, Default)]
pub struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
