//! [`App`]: one test's own slice of the real services (its queue and DLQ,
//! its tables, the live purchase service over the shared Redis), the
//! settings every test stack shares, and the helpers that act on a sale.
//! What a test reads back: `reads.rs`; its queue: `queue.rs`.

use crate::events::{Reply, purchase_event};
use lambda_http::Request;
use purchase::LivePurchase;
use redis::AsyncCommands;
use seckill_infra::emulator;
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::clock;
use seckill_shared::config::Config;
use seckill_shared::domain::{Sale, SaleId};
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

/// A variable `make test` sets, or a panic that says so.
pub(crate) fn env(name: &str) -> String {
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
