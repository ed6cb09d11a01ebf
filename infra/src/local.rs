//! Settings of the local stack and the `up` command: create what is missing
//! on the emulator (the gate key's secret too, which the functions fetch at
//! cold start as on AWS), load a demo sale, serve the API.

use crate::emulator;
use crate::event_source::{self, EventSource, EventSourceSettings};
use crate::gateway::{self, Gateway};
use crate::lambda_limits::{ApiThrottle, Function, LambdaLimits, LimitSettings};
use crate::pages::PageSettings;
use crate::token::TokenSettings;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::clock;
use seckill_shared::config::Config;
use seckill_shared::domain::{Sale, SaleId};
use seckill_shared::observe::metrics;
use seckill_shared::ports::SaleCatalog;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(transparent)]
    Setup(#[from] emulator::SetupError),
    #[error("{0}")]
    Other(String),
}

/// Local names and addresses; each can be overridden from the environment.
#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// `SECKILL_LISTEN` (default `127.0.0.1:3000`, the port `sam local start-api` uses).
    pub listen: String,
    /// `REDIS_URL` (default `redis://127.0.0.1:6379`).
    pub redis_url: String,
    /// `ORDERS_QUEUE_NAME` / `ORDERS_DLQ_NAME` (default `seckill-orders`, `seckill-orders-dlq`).
    pub queue_name: String,
    pub dlq_name: String,
    /// `SALES_TABLE` / `ORDERS_TABLE` (default `seckill-sales`, `seckill-orders`).
    pub sales_table: String,
    pub orders_table: String,
    /// `SECKILL_DEMO_SALE` (default `demo`; empty to skip the demo sale).
    pub demo_sale: String,
    /// `ORDERS_VISIBILITY_TIMEOUT` (default [`emulator::VISIBILITY_TIMEOUT_SECS`],
    /// the template's value): how long a failed batch's records stay
    /// invisible before a retry.
    pub visibility_timeout_secs: u32,
    /// Replaces the `RATE_*` settings of the environment (tests).
    pub rate_limits: Option<seckill_shared::config::RateLimits>,
    /// `SECKILL_LOGIN_URL` (default unset: the local sign-in form): the
    /// pages sign in through this hosted UI, as on AWS.
    pub login_url: Option<String>,
}

impl LocalSettings {
    /// The emulator secret of the gate key: `<queue name>-gate`, the
    /// stack's other names' prefix (`seckill-orders-gate` by default).
    pub fn gate_secret_name(&self) -> String {
        format!("{}-gate", self.queue_name)
    }

    /// The emulator secret of the payment provider's key:
    /// `<queue name>-payment` (`seckill-orders-payment` by default).
    pub fn payment_secret_name(&self) -> String {
        format!("{}-payment", self.queue_name)
    }

    pub fn from_env() -> Self {
        let var = crate::env_or;
        Self {
            listen: var("SECKILL_LISTEN", "127.0.0.1:3000"),
            redis_url: var("REDIS_URL", "redis://127.0.0.1:6379"),
            queue_name: var("ORDERS_QUEUE_NAME", "seckill-orders"),
            dlq_name: var("ORDERS_DLQ_NAME", "seckill-orders-dlq"),
            sales_table: var("SALES_TABLE", "seckill-sales"),
            orders_table: var("ORDERS_TABLE", "seckill-orders"),
            demo_sale: std::env::var("SECKILL_DEMO_SALE").unwrap_or_else(|_| "demo".into()),
            visibility_timeout_secs: std::env::var("ORDERS_VISIBILITY_TIMEOUT")
                .ok()
                .and_then(|secs| secs.parse().ok())
                .unwrap_or(emulator::VISIBILITY_TIMEOUT_SECS),
            rate_limits: None,
            login_url: std::env::var("SECKILL_LOGIN_URL")
                .ok()
                .filter(|url| !url.is_empty()),
        }
    }
}

/// The local stack's gate key: the value `up` (and `invoke`) put into the
/// emulator's secret [`LocalSettings::gate_secret_name`] when it is missing.
pub const DEFAULT_GATE_SECRET: &str = "seckill-local-gate-secret-not-for-production";

/// The ARN of the local gate key's secret `name` on the emulator, created
/// with [`DEFAULT_GATE_SECRET`] if missing.
pub async fn ensure_gate_secret(
    secrets: &aws::SecretsClient,
    name: &str,
) -> Result<String, LocalError> {
    Ok(emulator::ensure_secret(secrets, name, DEFAULT_GATE_SECRET).await?)
}

/// The local stack's payment provider key: what `up` puts into the
/// emulator's secret [`LocalSettings::payment_secret_name`] when it is
/// missing, and what `seckill-local sign-payment` signs with.
pub const DEFAULT_PAYMENT_SECRET: &str = "seckill-local-payment-secret-not-for-production";

/// The ARN of the local payment key's secret `name` on the emulator,
/// created with [`DEFAULT_PAYMENT_SECRET`] if missing.
pub async fn ensure_payment_secret(
    secrets: &aws::SecretsClient,
    name: &str,
) -> Result<String, LocalError> {
    Ok(emulator::ensure_secret(secrets, name, DEFAULT_PAYMENT_SECRET).await?)
}

/// `GATE_SECRET_ARN` for `seckill-local invoke`: what `env` names, or, for a
/// function that reads the gate key, the local gate secret (created if
/// missing, as `up` does), so the gate's path runs through Secrets Manager
/// here too. `None` for a function that does not read it.
pub async fn invoke_gate_secret(
    function: crate::invoke::Function,
    env: seckill_shared::config::Lookup<'_>,
    settings: &LocalSettings,
) -> Result<Option<String>, LocalError> {
    invoke_secret(function, env, "GATE_SECRET_ARN", || async {
        let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(10)).await;
        ensure_gate_secret(&aws::secrets(&sdk), &settings.gate_secret_name()).await
    })
    .await
}

/// `PAYMENT_SECRET_ARN` for `seckill-local invoke`, as
/// [`invoke_gate_secret`] does for the gate key.
pub async fn invoke_payment_secret(
    function: crate::invoke::Function,
    env: seckill_shared::config::Lookup<'_>,
    settings: &LocalSettings,
) -> Result<Option<String>, LocalError> {
    invoke_secret(function, env, "PAYMENT_SECRET_ARN", || async {
        let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(10)).await;
        ensure_payment_secret(&aws::secrets(&sdk), &settings.payment_secret_name()).await
    })
    .await
}

/// What `env` names for `variable`, else, when `function` reads it, the
/// local secret `ensure` makes.
async fn invoke_secret<F, Fut>(
    function: crate::invoke::Function,
    env: seckill_shared::config::Lookup<'_>,
    variable: &str,
    ensure: F,
) -> Result<Option<String>, LocalError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<String, LocalError>>,
{
    if let Some(named) = env(variable).filter(|v| !v.trim().is_empty()) {
        return Ok(Some(named));
    }
    let reads = crate::consistency::reads(crate::invoke::Handler::loader(function))
        .map_err(LocalError::Other)?;
    if !reads.contains(variable) {
        return Ok(None);
    }
    Ok(Some(ensure().await?))
}

/// The demo sale of `make run`: 100 units, open now for a day, one per buyer.
pub fn demo_sale(id: &SaleId) -> Sale {
    let now = clock::now_ms();
    Sale::plain(
        id.clone(),
        "Demo flash sale",
        100,
        1,
        now - 1_000,
        now + 24 * 3_600_000,
    )
}

/// How often `up` writes the functions' metrics (EMF lines on stdout).
pub const METRICS_INTERVAL: Duration = Duration::from_secs(1);

/// Creates queues and tables, loads the demo sale, runs the order-writer on
/// the queue and serves the API until Ctrl-C. The functions' metrics go to
/// stdout as EMF lines every [`METRICS_INTERVAL`], if the caller installed
/// a [`metrics::Flush::Periodic`] emitter (`seckill-local up` does).
pub async fn up(settings: LocalSettings) -> Result<(), LocalError> {
    let stack = prepare(&settings).await?;
    let flusher = metrics::spawn_flusher(METRICS_INTERVAL);
    let outcomes = stack.start_outcome_flusher();
    let source = stack.start_order_writer();
    let schedules = stack.start_schedules();
    let gateway = stack.gateway.clone();
    gateway::serve(stack.listener, stack.gateway, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    schedules.abort();
    let counts = source.stop().await;
    tracing::info!(?counts, "order-writer event source stopped");
    flusher.abort();
    metrics::flush_all();
    outcomes.abort();
    gateway.purchase.flush_outcomes().await;
    Ok(())
}

/// What `up` sets up before serving.
pub struct PreparedStack {
    pub gateway: Arc<Gateway>,
    pub listener: tokio::net::TcpListener,
    pub writer: Arc<order_writer::LiveWriter>,
    pub admin: Arc<admin_api::Admin>,
    /// The scheduled functions, each wired as its own Lambda.
    pub scheduled: Arc<Scheduled>,
    pub sqs: aws_sdk_sqs::Client,
    pub queues: emulator::Queues,
    pub queue_arn: String,
    pub config: Config,
    /// The functions' Lambda limits (`SECKILL_LAMBDA_*`), shared by the
    /// gateway, the event source and the schedules as one account's.
    pub limits: LambdaLimits,
}

impl PreparedStack {
    /// The schedules of `template.yaml`: prewarm and the unpaid release every
    /// minute, reconcile every five.
    pub fn start_schedules(&self) -> tokio::task::JoinHandle<()> {
        let scheduled = self.scheduled.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            for minute in 0u64.. {
                tick.tick().await;
                scheduled.invoke(Job::Prewarm).await;
                scheduled.invoke(Job::ReleaseUnpaid).await;
                if minute % 5 == 0 {
                    scheduled.invoke(Job::Reconcile).await;
                }
            }
        })
    }

    /// Writes the purchase answers' tally to Redis every second (one
    /// process serves every invocation here, so a task does what the end of
    /// an invocation does in Lambda). For the operator dashboard.
    pub fn start_outcome_flusher(&self) -> tokio::task::JoinHandle<()> {
        self.gateway.purchase.spawn_outcome_flusher()
    }

    /// The SQS event source of `template.yaml`, invoking the order-writer.
    pub fn start_order_writer(&self) -> EventSource {
        let mut settings = EventSourceSettings::template(
            &self.queues.orders_url,
            &self.queue_arn,
            std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        );
        settings.limit = Some(self.limits.function(Function::OrderWriter).clone());
        EventSource::spawn(
            self.sqs.clone(),
            settings,
            writer_handler(self.writer.clone()),
        )
    }
}

/// The order-writer's handler as the event source calls it: the same code
/// Lambda runs, with an empty invocation context.
pub fn writer_handler(
    writer: Arc<order_writer::LiveWriter>,
) -> impl Fn(SqsEvent) -> Pin<Box<dyn Future<Output = Result<SqsBatchResponse, String>> + Send>>
+ Clone
+ Send
+ Sync
+ 'static {
    move |event| {
        let writer = writer.clone();
        Box::pin(async move {
            let event = lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default());
            order_writer::handler::handle(&writer, event)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// Everything `up` does before serving: queues and tables on the emulator,
/// the demo sale in DynamoDB and Redis, the wired functions, the bound port.
/// Tests call it with port 0 and their own names.
pub async fn prepare(settings: &LocalSettings) -> Result<PreparedStack, LocalError> {
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(10)).await;
    let (sqs, db) = (aws::sqs(&sdk), aws::dynamodb(&sdk));
    let queues = emulator::ensure_queues(
        &sqs,
        &settings.queue_name,
        &settings.dlq_name,
        settings.visibility_timeout_secs,
    )
    .await?;
    let queue_arn = event_source::queue_arn(&sqs, &queues.orders_url)
        .await
        .map_err(LocalError::Other)?;
    emulator::ensure_tables(&db, &settings.sales_table, &settings.orders_table).await?;
    let config = Config {
        redis_url: settings.redis_url.clone(),
        orders_queue_url: Some(queues.orders_url.clone()),
        orders_dlq_url: Some(queues.dlq_url.clone()),
        sales_table: settings.sales_table.clone(),
        orders_table: settings.orders_table.clone(),
        ..Config::from_lookup(&|name| local_default(name, settings, &queues.orders_url))
            .map_err(other)?
    };
    let mut config = Config {
        rate_limits: settings.rate_limits.unwrap_or(config.rate_limits),
        ..config
    };
    // The gate key goes through Secrets Manager as on AWS: each function's
    // wiring fetches it at cold start. `GATE_SECRET_ARN` in the environment
    // names another secret instead.
    if config.secrets.gate.is_none() {
        config.secrets.gate =
            Some(ensure_gate_secret(&aws::secrets(&sdk), &settings.gate_secret_name()).await?);
    }
    // The payment provider's key likewise (`PAYMENT_SECRET_ARN` names another).
    if config.secrets.payment.is_none() {
        config.secrets.payment = Some(
            ensure_payment_secret(&aws::secrets(&sdk), &settings.payment_secret_name()).await?,
        );
    }
    if !settings.demo_sale.is_empty() {
        let id = SaleId::parse(&settings.demo_sale).map_err(|e| LocalError::Other(e.0))?;
        let catalog = DynamoCatalog::new(db.clone(), &settings.sales_table);
        catalog.create_sale(&demo_sale(&id)).await.map_err(other)?;
        let sale = catalog
            .get_sale(&id)
            .await
            .map_err(other)?
            .ok_or_else(|| LocalError::Other("demo sale vanished".into()))?;
        let stock =
            RedisStock::connect_lazy(&config.redis_url, Duration::from_secs(2)).map_err(other)?;
        // Marked loaded as prewarm marks it, so a Redis restart under the
        // local stack rebuilds it only once the queue drained.
        let loaded =
            seckill_shared::app::jobs::mark_and_load(&catalog, &stock, &sale, clock::now_ms())
                .await
                .map_err(other)?;
        tracing::info!(sale_id = %id, ?loaded, "demo sale ready");
    }
    let limit_settings = LimitSettings::from_env();
    let limits = LambdaLimits::new(&limit_settings);
    tracing::info!(?limit_settings, "Lambda and API Gateway limits");
    let admin = Arc::new(admin_api::wire(&config).await.map_err(other)?);
    let gateway = Arc::new(
        Gateway::new(
            TokenSettings::from_env(),
            purchase::wire(&config).await.map_err(other)?,
            orders_api::wire(&config).await.map_err(other)?,
            admin.clone(),
        )
        .with_pages(
            PageSettings::for_demo_sale(&settings.demo_sale)
                .with_login_url(settings.login_url.clone()),
        )
        .with_limits(limits.clone())
        .with_api_throttle(ApiThrottle::new(&limit_settings)),
    );
    let writer = Arc::new(order_writer::wire(&config).await.map_err(other)?);
    let scheduled = Arc::new(Scheduled::wire(&config).await?.with_limits(limits.clone()));
    let listener = tokio::net::TcpListener::bind(&settings.listen)
        .await
        .map_err(|e| LocalError::Other(format!("cannot listen on {}: {e}", settings.listen)))?;
    tracing::info!(
        listen = %listener.local_addr().map_err(other)?,
        queue = %queues.orders_url,
        dlq = %queues.dlq_url,
        "local API ready"
    );
    Ok(PreparedStack {
        gateway,
        listener,
        writer,
        admin,
        scheduled,
        sqs,
        queues,
        queue_arn,
        config,
        limits,
    })
}

/// A scheduled job of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    Prewarm,
    ReleaseUnpaid,
    Reconcile,
}

impl Job {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "prewarm" => Some(Self::Prewarm),
            "release-unpaid" => Some(Self::ReleaseUnpaid),
            "reconcile" => Some(Self::Reconcile),
            _ => None,
        }
    }
}

/// The scheduled functions of the template, each wired as its own Lambda
/// (its own cold start and `Function` in the metrics).
pub struct Scheduled {
    pub prewarm: seckill_shared::wire::LiveJobs,
    pub release_unpaid: seckill_shared::wire::LiveJobs,
    pub reconcile: seckill_shared::wire::LiveReconciler,
    /// Each job's `Timeout` (and concurrency), as Lambda enforces them.
    limits: LambdaLimits,
}

impl Scheduled {
    pub async fn wire(config: &Config) -> Result<Self, LocalError> {
        Ok(Self {
            prewarm: prewarm::wire(config).await.map_err(other)?,
            release_unpaid: release_unpaid::wire(config).await.map_err(other)?,
            reconcile: reconcile::wire(config).await.map_err(other)?,
            limits: LambdaLimits::from_env(),
        })
    }

    /// The same jobs invoked under `limits`.
    pub fn with_limits(self, limits: LambdaLimits) -> Self {
        Self { limits, ..self }
    }

    /// One scheduler event through the job's real handler, as EventBridge
    /// Scheduler would send it (an empty invocation context), under the
    /// function's `Timeout`; what it returned, or its error.
    pub async fn invoke(&self, job: Job) -> serde_json::Value {
        let function = match job {
            Job::Prewarm => Function::Prewarm,
            Job::ReleaseUnpaid => Function::ReleaseUnpaid,
            Job::Reconcile => Function::Reconcile,
        };
        let limit = self.limits.function(function);
        match limit.invoke(self.invoke_unlimited(job)).await {
            Ok(report) => report,
            Err(err) => {
                tracing::warn!(?job, %err, "scheduled job stopped; the next tick retries");
                serde_json::json!({"error": err.to_string()})
            }
        }
    }

    async fn invoke_unlimited(&self, job: Job) -> serde_json::Value {
        let event = || {
            lambda_runtime::LambdaEvent::new(
                serde_json::json!({}),
                lambda_runtime::Context::default(),
            )
        };
        let result = match job {
            Job::Prewarm => prewarm::handler::handle(&self.prewarm, event())
                .await
                .map_err(|e| e.to_string()),
            Job::ReleaseUnpaid => release_unpaid::handler::handle(&self.release_unpaid, event())
                .await
                .map_err(|e| e.to_string()),
            Job::Reconcile => reconcile::handler::handle(&self.reconcile, event())
                .await
                .map_err(|e| e.to_string()),
        };
        result.unwrap_or_else(|err| {
            tracing::warn!(?job, %err, "scheduled job failed; the next tick retries");
            serde_json::json!({"error": err})
        })
    }
}

/// Runs one job now with the admin API's jobs (what its on-demand routes
/// do; bounded like the Lambda's timeout) and returns what it reported.
pub async fn run_job(admin: &admin_api::Admin, job: Job) -> serde_json::Value {
    let now = clock::now_ms();
    let jobs = &admin.jobs;
    let result = match job {
        Job::Prewarm => jobs.prewarm_all(now).await.map(|done| {
            serde_json::to_value(seckill_shared::http::bodies::admin::PrewarmRun::of(&done))
                .unwrap_or_default()
        }),
        Job::ReleaseUnpaid => jobs
            .release_unpaid(now, std::time::Instant::now() + Duration::from_secs(55))
            .await
            .map(|report| serde_json::to_value(report).unwrap_or_default()),
        Job::Reconcile => admin
            .reconciler
            .reconcile_all(now, std::time::Instant::now() + Duration::from_secs(115))
            .await
            .map(|reports| serde_json::to_value(reports).unwrap_or_default()),
    };
    match result {
        Ok(report) => report,
        Err(err) => {
            tracing::warn!(?job, %err, "scheduled job failed; the next tick retries");
            serde_json::json!({"error": err.to_string()})
        }
    }
}

fn other(err: impl std::fmt::Display) -> LocalError {
    LocalError::Other(err.to_string())
}

/// The environment as the functions would see it in Lambda, with local
/// defaults for what `up` decides itself.
fn local_default(name: &str, settings: &LocalSettings, queue_url: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| match name {
        "REDIS_URL" => Some(settings.redis_url.clone()),
        "ORDERS_QUEUE_URL" => Some(queue_url.to_owned()),
        "SALES_TABLE" => Some(settings.sales_table.clone()),
        "ORDERS_TABLE" => Some(settings.orders_table.clone()),
        // The redrive of the queues `up` creates; the template feeds both
        // from one parameter too.
        "MAX_RECEIVE_COUNT" => Some(emulator::MAX_RECEIVE_COUNT.to_string()),
        // No payment provider here: the buyer's pay button pays any order
        // (on AWS, only orders without an amount).
        "STAND_IN_PAYS_PRICED" => Some("true".into()),
        _ => None,
    })
}
