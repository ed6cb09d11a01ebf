//! The wiring room: the one place that builds the use cases of `app` over
//! the live adapters (Redis, SQS, DynamoDB, Secrets Manager) and names their
//! live types. Each function's `wire` is one call here, once per execution
//! environment (where its cold start is counted and its secrets fetched: a
//! failed fetch fails the init); the local stack makes the same calls.

use crate::adapters::aws::{self, Caller};
use crate::adapters::dead_letters::SqsDeadLetters;
use crate::adapters::dynamo::catalog::DynamoCatalog;
use crate::adapters::dynamo::orders::DynamoOrders;
use crate::adapters::redis::RedisStock;
use crate::adapters::secrets::{self, SecretError, Uses};
use crate::adapters::sqs::{SqsInspector, SqsQueue};
use crate::app::catalog_cache::CachedCatalog;
use crate::app::draw::Drawer;
use crate::app::invariants::InvariantChecker;
use crate::app::jobs::Jobs;
use crate::app::order_queries::OrderQueries;
use crate::app::order_writer::OrderWriter;
use crate::app::purchase::PurchaseService;
use crate::app::reconcile::{ReconcileSettings, Reconciler};
use crate::config::{Config, ConfigError};
use crate::domain::gate::Gate;
use crate::domain::payment::PaymentKey;
use crate::observe::metrics::{Function, Metrics};
use std::sync::Arc;
use std::time::Duration;

/// Why a function could not be wired at cold start: its settings, its
/// secrets, or a client that refused them. Every function's `wire` returns
/// it, and `main.rs` ends the init with it (Lambda reports an init error).
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error(transparent)]
    Store(#[from] crate::ports::StoreError),
}

/// The scheduled jobs over the live adapters.
pub type LiveJobs = Jobs<SqsInspector, RedisStock, DynamoCatalog, DynamoOrders>;

/// The invariant checker over the live adapters.
pub type LiveChecker = InvariantChecker<SqsInspector, RedisStock, DynamoCatalog, DynamoOrders>;

/// The reconciler over the live adapters.
pub type LiveReconciler =
    Reconciler<SqsQueue, SqsInspector, RedisStock, DynamoCatalog, DynamoOrders>;

/// The purchase service over the live adapters.
pub type LivePurchase = PurchaseService<RedisStock, SqsQueue, CachedCatalog<DynamoCatalog>>;

/// What the orders API answers, over the live adapters.
pub type LiveQueries = OrderQueries<DynamoOrders, RedisStock, CachedCatalog<DynamoCatalog>>;

/// The order-writer over the live adapters.
pub type LiveWriter = OrderWriter<DynamoOrders, RedisStock, CachedCatalog<DynamoCatalog>>;

/// What the admin routes act on.
pub struct Admin {
    pub jobs: LiveJobs,
    pub reconciler: LiveReconciler,
    /// Any buyer's orders, answered as their buyer sees them.
    pub queries: OrderQueries<DynamoOrders, RedisStock, DynamoCatalog>,
    /// The orders DLQ; `None` when `ORDERS_DLQ_URL` is not set.
    pub dlq: Option<SqsDeadLetters>,
    /// The payments' records (the refunds view).
    pub payments: DynamoOrders,
    /// What the jobs and the reconciler count on demand, as `admin-api`.
    pub metrics: Metrics,
}

/// How long the jobs' SDK clients wait for one AWS call.
const JOBS_AWS_TIMEOUT: Duration = Duration::from_secs(5);

/// The jobs over the live adapters, from the function's configuration, for
/// `caller` (prewarm, release-unpaid and admin-api each wire their own); its
/// Redis AUTH token is fetched first unless the caller already resolved it.
pub async fn jobs(config: &Config, caller: Caller) -> Result<LiveJobs, WireError> {
    let config = &secrets::resolve(config, caller, Uses::Redis).await?;
    let sdk = aws::sdk_config(caller, JOBS_AWS_TIMEOUT).await;
    let db = aws::dynamodb(&sdk);
    let queue = config
        .orders_queue_url
        .clone()
        .map(|url| SqsInspector::new(aws::sqs(&sdk), url, config.orders_dlq_url.clone()));
    Ok(Jobs::new(
        RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?,
        DynamoCatalog::new(db.clone(), &config.sales_table),
        DynamoOrders::new(db, &config.orders_table, &config.sales_table),
        queue,
        config.prewarm_lead,
    )
    .with_settle(config.rebuild_settle()))
}

/// The reconciler over the live adapters, for `caller`; its Redis AUTH
/// token is fetched first unless the caller already resolved it.
pub async fn reconciler(config: &Config, caller: Caller) -> Result<LiveReconciler, WireError> {
    let config = &secrets::resolve(config, caller, Uses::Redis).await?;
    let sdk = aws::sdk_config(caller, JOBS_AWS_TIMEOUT).await;
    let db = aws::dynamodb(&sdk);
    let sqs = aws::sqs(&sdk);
    let queue_url = config.queue_url()?.to_owned();
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?;
    let queue = SqsQueue::new(sqs.clone(), queue_url.clone());
    let lottery = Drawer {
        store: stock.clone(),
        queue: queue.clone(),
    };
    Ok(Reconciler::new(
        stock,
        DynamoCatalog::new(db.clone(), &config.sales_table),
        DynamoOrders::new(db, &config.orders_table, &config.sales_table),
        queue,
        SqsInspector::new(sqs, queue_url, config.orders_dlq_url.clone()),
        ReconcileSettings::default(),
    )
    .with_lottery(Arc::new(lottery)))
}

/// The `prewarm` function's jobs, counting as `prewarm`.
pub async fn prewarm(config: &Config) -> Result<LiveJobs, WireError> {
    let metrics = cold_start(Function::Prewarm, config);
    Ok(jobs(config, Caller::Function(Function::Prewarm))
        .await?
        .with_metrics(metrics))
}

/// The `release-unpaid` function's jobs, counting as `release-unpaid`.
pub async fn release_unpaid(config: &Config) -> Result<LiveJobs, WireError> {
    let metrics = cold_start(Function::ReleaseUnpaid, config);
    Ok(jobs(config, Caller::Function(Function::ReleaseUnpaid))
        .await?
        .with_metrics(metrics))
}

/// The `reconcile` function's reconciler, counting as `reconcile`.
pub async fn reconcile(config: &Config) -> Result<LiveReconciler, WireError> {
    let metrics = cold_start(Function::Reconcile, config);
    Ok(reconciler(config, Caller::Function(Function::Reconcile))
        .await?
        .with_metrics(metrics))
}

/// The purchase service. Connections are lazy: the function starts even
/// when Redis is down, and answers 503 until it is back. The Redis AUTH
/// token, the gate key and the edge's secret are fetched here.
pub async fn purchase(config: &Config) -> Result<LivePurchase, WireError> {
    let queue_url = config.queue_url()?;
    let caller = Caller::Function(Function::Purchase);
    let config = &secrets::resolve(config, caller, Uses::RedisGateAndEdge).await?;
    let sdk = aws::sdk_config(caller, config.sqs_timeout).await;
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?
        .with_rate_limits(config.rate_limits);
    let queue = SqsQueue::new(aws::sqs(&sdk), queue_url);
    let catalog = CachedCatalog::new(
        DynamoCatalog::new(aws::dynamodb(&sdk), &config.sales_table),
        config.sale_cache_ttl,
    );
    let metrics = cold_start(Function::Purchase, config);
    // The rebuild of a lost live sale, started by the purchase that finds
    // it missing: prewarm's code, on this environment's clients.
    let db = aws::dynamodb(&sdk);
    let jobs = Jobs::new(
        stock.clone(),
        DynamoCatalog::new(db.clone(), &config.sales_table),
        DynamoOrders::new(db, &config.orders_table, &config.sales_table),
        Some(SqsInspector::new(
            aws::sqs(&sdk),
            queue_url,
            config.orders_dlq_url.clone(),
        )),
        config.prewarm_lead,
    )
    .with_settle(config.rebuild_settle());
    let mut service = PurchaseService::new(stock, queue, catalog)
        .with_metrics(metrics)
        .with_rebuild(Arc::new(jobs));
    if let Some(secret) = &config.edge_secret {
        service = service.with_edge_secret(secret.clone());
    }
    Ok(match &config.gate_secret {
        Some(secret) => service.with_gate(Gate::new(secret.as_bytes())),
        None => {
            tracing::warn!("GATE_SECRET_ARN is not set: gated sales will refuse every purchase");
            service
        }
    })
}

/// What the orders API answers. The Redis AUTH token, the gate key and the
/// payment key are fetched here.
pub async fn orders_api(config: &Config) -> Result<LiveQueries, WireError> {
    let queue_url = config.queue_url()?.to_owned();
    let caller = Caller::Function(Function::OrdersApi);
    let config = &secrets::resolve(config, caller, Uses::RedisGateAndPayment).await?;
    let sdk = aws::sdk_config(caller, Duration::from_secs(2)).await;
    let db = aws::dynamodb(&sdk);
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?;
    let orders = DynamoOrders::new(db.clone(), &config.orders_table, &config.sales_table);
    let lottery = Drawer {
        store: stock.clone(),
        queue: SqsQueue::new(aws::sqs(&sdk), &queue_url),
    };
    let catalog = CachedCatalog::new(
        DynamoCatalog::new(db, &config.sales_table),
        config.sale_cache_ttl,
    );
    let metrics = cold_start(Function::OrdersApi, config);
    let mut queries = OrderQueries::new(orders, stock, catalog, config.sale_cache_ttl)
        .with_metrics(metrics)
        .with_lottery(Arc::new(lottery))
        .with_stand_in(config.stand_in_payments);
    if let Some(secret) = &config.payment_secret {
        queries = queries.with_payment_key(PaymentKey::new(secret.as_bytes()));
    } else {
        tracing::warn!("PAYMENT_SECRET_ARN is not set: every payment callback is refused");
    }
    Ok(match &config.gate_secret {
        Some(secret) => queries.with_gate(Gate::new(secret.as_bytes())),
        None => queries,
    })
}

/// A sale's payment window rarely changes; the writer re-reads it this often.
const WRITER_SALE_CACHE: Duration = Duration::from_secs(30);

/// The order-writer. The Redis AUTH token is fetched here.
pub async fn order_writer(config: &Config) -> Result<LiveWriter, WireError> {
    let caller = Caller::Function(Function::OrderWriter);
    let config = &secrets::resolve(config, caller, Uses::Redis).await?;
    // DynamoDB transactions of up to 21 items (10 orders, their buyers'
    // records, the sale item): give them more time than a purchase's
    // SendMessage, still well inside the function's timeout.
    let sdk = aws::sdk_config(caller, Duration::from_secs(4)).await;
    let db = aws::dynamodb(&sdk);
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?;
    let orders = DynamoOrders::new(db.clone(), &config.orders_table, &config.sales_table);
    // A missing sale is asked for again each time: an order redriven from
    // the DLQ once its sale exists must not wait out the cache. Read
    // consistently: the per-user limit and the window an order is written
    // under are the sale's as Redis had them (frozen from the start).
    let catalog = CachedCatalog::new(
        DynamoCatalog::new(db, &config.sales_table).consistent_reads(),
        WRITER_SALE_CACHE,
    )
    .forgetting_missing();
    let metrics = cold_start(Function::OrderWriter, config);
    if config.max_receive_count.is_none() {
        tracing::warn!("MAX_RECEIVE_COUNT is not set: records moved to the DLQ are not counted");
    }
    Ok(OrderWriter::new(orders, stock, catalog).with_metrics(metrics, config.max_receive_count))
}

/// What the admin routes act on. The Redis AUTH token is fetched here,
/// once for the jobs and the reconciler both.
pub async fn admin(config: &Config) -> Result<Admin, WireError> {
    let caller = Caller::Function(Function::AdminApi);
    let config = &secrets::resolve(config, caller, Uses::Redis).await?;
    let metrics = cold_start(Function::AdminApi, config);
    let sdk = aws::sdk_config(caller, JOBS_AWS_TIMEOUT).await;
    let db = aws::dynamodb(&sdk);
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?;
    let payments = DynamoOrders::new(db.clone(), &config.orders_table, &config.sales_table);
    let queries = OrderQueries::new(
        DynamoOrders::new(db.clone(), &config.orders_table, &config.sales_table),
        stock,
        DynamoCatalog::new(db, &config.sales_table),
        config.sale_cache_ttl,
    );
    let dlq = match (&config.orders_queue_url, &config.orders_dlq_url) {
        (Some(queue), Some(dlq)) => Some(SqsDeadLetters::new(aws::sqs(&sdk), queue, dlq)),
        _ => None,
    };
    Ok(Admin {
        queries,
        dlq,
        jobs: jobs(config, caller).await?.with_metrics(metrics.clone()),
        reconciler: reconciler(config, caller)
            .await?
            .with_metrics(metrics.clone()),
        payments,
        metrics,
    })
}

/// The function's metrics, its cold start counted: once per execution
/// environment, as the wiring is.
fn cold_start(function: Function, config: &Config) -> Metrics {
    let metrics = Metrics::new(function, &config.metrics_namespace);
    metrics.cold_start();
    metrics
}
