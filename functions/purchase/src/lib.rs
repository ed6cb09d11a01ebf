//! The `purchase` function: `POST /sales/{saleId}/purchase`.
//!
//! # Layout
//!
//! - `main.rs`: wires the clients once per execution environment and hands
//!   them to the Lambda runtime.
//! - [`handler`]: turns an API Gateway HTTP API event into a
//!   [`PurchaseRequest`](seckill_shared::app::purchase::PurchaseRequest), calls the
//!   shared domain, and turns the outcome into the contract's response.
//! - [`config`]: the settings this function reads from its environment
//!   (what `template.yaml` sets on it; the consistency test compares them).
//! - [`wire`]: builds the live service from [`Config`]; the local stack uses
//!   the same function, so local and Lambda differ only in `main.rs`.

pub mod handler;

use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::{SqsInspector, SqsQueue};
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::jobs::Jobs;
use seckill_shared::app::purchase::PurchaseService;
/// Why the function could not be wired at cold start (settings, secrets, Redis URL).
pub use seckill_shared::config::WireError;
use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
use seckill_shared::observe::metrics::{Function, Metrics};

/// The purchase service over the real adapters.
pub type LivePurchase = PurchaseService<RedisStock, SqsQueue, CachedCatalog<DynamoCatalog>>;

/// This function's settings: the queue it sends to and the SDK bound of a
/// send, the sale cache, the rate limits, the gate key and the edge's
/// secret; and what a
/// rebuild reads (the orders table, the DLQ, the prewarm lead): a purchase
/// that finds a live sale's keys missing starts its rebuild at once. The
/// purchase path itself never touches the orders table.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            orders_dlq: true,
            prewarm_lead: true,
            orders_queue: true,
            sqs_timeout: true,
            sale_cache: true,
            rate_limits: true,
            gate_secret: true,
            edge_secret: true,
            ..Reads::COMMON
        },
    )
}

/// Builds the live service. Connections are lazy: the function starts even
/// when Redis is down, and answers 503 until it is back. Runs once per
/// execution environment, so this is where its cold start is counted, and
/// where the Redis AUTH token and the gate key are fetched (a failed fetch
/// fails the init).
pub async fn wire(config: &Config) -> Result<LivePurchase, WireError> {
    let queue_url = config.queue_url()?;
    let caller = aws::Caller::Function(seckill_shared::observe::metrics::Function::Purchase);
    let config = &seckill_shared::adapters::secrets::resolve(
        config,
        caller,
        seckill_shared::adapters::secrets::Uses::RedisGateAndEdge,
    )
    .await?;
    let sdk = aws::sdk_config(caller, config.sqs_timeout).await;
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)?
        .with_rate_limits(config.rate_limits);
    let queue = SqsQueue::new(aws::sqs(&sdk), queue_url);
    let catalog = CachedCatalog::new(
        DynamoCatalog::new(aws::dynamodb(&sdk), &config.sales_table),
        config.sale_cache_ttl,
    );
    let metrics = Metrics::new(Function::Purchase, &config.metrics_namespace);
    metrics.cold_start();
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
        .with_rebuild(std::sync::Arc::new(jobs));
    if let Some(secret) = &config.edge_secret {
        service = service.with_edge_secret(secret.clone());
    }
    Ok(match &config.gate_secret {
        Some(secret) => {
            service.with_gate(seckill_shared::domain::gate::Gate::new(secret.as_bytes()))
        }
        None => {
            tracing::warn!("GATE_SECRET_ARN is not set: gated sales will refuse every purchase");
            service
        }
    })
}
