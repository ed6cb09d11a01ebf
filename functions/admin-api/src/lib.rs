//! The `admin-api` function: the operators' routes, `seckill/admin` scope only.
//!
//! # Layout
//!
//! - `main.rs`: wires the jobs and the reconciler once ([`wire`]), runs the runtime.
//! - [`config`]: the settings this function reads from its environment.
//! - [`handler`]: routes by `routeKey`, checks the scope, validates the sale
//!   definition field by field, and answers with what was done; the live
//!   view of a sale for the operator dashboard (`seckill_shared::app::live`).
//! - [`console`]: the operator console's routes: the list of sales, one
//!   sale with its sell-out time, end now, order lookups, the DLQ and its
//!   redrive (`seckill_shared::app::console`).

pub mod console;
pub mod handler;

use seckill_shared::adapters::dead_letters::SqsDeadLetters;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::jobs::Jobs;
use seckill_shared::app::order_queries::OrderQueries;
use seckill_shared::app::reconcile::Reconciler;
use seckill_shared::config::{Config, ConfigError, Lookup, Reads, WireError};
use seckill_shared::observe::metrics::{Function, Metrics};

/// What the admin routes act on.
pub struct Admin {
    pub jobs: Jobs,
    pub reconciler: Reconciler,
    /// Any buyer's orders, answered as their buyer sees them.
    pub queries: OrderQueries<DynamoOrders, RedisStock, DynamoCatalog>,
    /// The orders DLQ; `None` when `ORDERS_DLQ_URL` is not set.
    pub dlq: Option<SqsDeadLetters>,
    /// The payments' records (the refunds view).
    pub payments: DynamoOrders,
    /// What the jobs and the reconciler count on demand, as `admin-api`.
    pub metrics: Metrics,
}

/// This function's settings: the orders table, both queues (reconcile on
/// demand relays to the queue and reports on the DLQ) and the prewarm lead
/// besides the common ones.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            orders_queue: true,
            orders_dlq: true,
            prewarm_lead: true,
            ..Reads::COMMON
        },
    )
}

/// The admin service over the live adapters. Once per execution
/// environment: its cold start is counted here, and the Redis AUTH token is
/// fetched, once for both wirings below (a failed fetch fails the init).
pub async fn wire(config: &Config) -> Result<Admin, WireError> {
    let caller = seckill_shared::adapters::aws::Caller::Function(Function::AdminApi);
    let config = &seckill_shared::adapters::secrets::resolve(
        config,
        caller,
        seckill_shared::adapters::secrets::Uses::Redis,
    )
    .await?;
    let metrics = Metrics::new(Function::AdminApi, &config.metrics_namespace);
    metrics.cold_start();
    let sdk =
        seckill_shared::adapters::aws::sdk_config(caller, std::time::Duration::from_secs(5)).await;
    let db = seckill_shared::adapters::aws::dynamodb(&sdk);
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?;
    let payments = DynamoOrders::new(db.clone(), &config.orders_table, &config.sales_table);
    let queries = OrderQueries::new(
        DynamoOrders::new(db.clone(), &config.orders_table, &config.sales_table),
        stock,
        DynamoCatalog::new(db, &config.sales_table),
        config.sale_cache_ttl,
    );
    let dlq = match (&config.orders_queue_url, &config.orders_dlq_url) {
        (Some(queue), Some(dlq)) => Some(SqsDeadLetters::new(
            seckill_shared::adapters::aws::sqs(&sdk),
            queue,
            dlq,
        )),
        _ => None,
    };
    Ok(Admin {
        queries,
        dlq,
        jobs: seckill_shared::app::jobs::wire(config, caller)
            .await?
            .with_metrics(metrics.clone()),
        reconciler: seckill_shared::app::reconcile::wire(config, caller)
            .await?
            .with_metrics(metrics.clone()),
        payments,
        metrics,
    })
}
