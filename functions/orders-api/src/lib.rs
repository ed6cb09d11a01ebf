//! The `orders-api` function: the buyer's read and pay routes.
//!
//! # Layout
//!
//! - `main.rs`: wires the clients once and runs the Lambda runtime.
//! - [`handler`]: routes by the event's `routeKey` and translates to and from
//!   [`OrderQueries`](seckill_shared::app::order_queries::OrderQueries).
//! - [`config`]: the settings this function reads from its environment.
//! - [`wire`]: the live service from [`Config`]; the local stack uses it too.

pub mod handler;

use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::SqsQueue;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::draw::Drawer;
use seckill_shared::app::order_queries::OrderQueries;
use seckill_shared::config::{Config, ConfigError, Lookup, Reads, WireError};
use seckill_shared::observe::metrics::{Function, Metrics};
use std::time::Duration;

pub type LiveQueries = OrderQueries<DynamoOrders, RedisStock, CachedCatalog<DynamoCatalog>>;

/// This function's settings: the orders table, the sale cache, the gate key
/// and the payment provider's key besides the common ones, and the orders
/// queue: a ticket holder's read of a due lottery draw runs part of it and
/// sends its winners' orders, as a purchase would.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            sale_cache: true,
            gate_secret: true,
            payment_secret: true,
            orders_queue: true,
            stand_in_payments: true,
            ..Reads::COMMON
        },
    )
}

/// Once per execution environment: its cold start is counted here, and
/// the Redis AUTH token, the gate key and the payment key are fetched (a
/// failed fetch fails the init).
pub async fn wire(config: &Config) -> Result<LiveQueries, WireError> {
    let queue_url = config.queue_url()?.to_owned();
    let caller = aws::Caller::Function(seckill_shared::observe::metrics::Function::OrdersApi);
    let config = &seckill_shared::adapters::secrets::resolve(
        config,
        caller,
        seckill_shared::adapters::secrets::Uses::RedisGateAndPayment,
    )
    .await?;
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
    let metrics = Metrics::new(Function::OrdersApi, &config.metrics_namespace);
    metrics.cold_start();
    let mut queries = OrderQueries::new(orders, stock, catalog, config.sale_cache_ttl)
        .with_metrics(metrics)
        .with_lottery(std::sync::Arc::new(lottery))
        .with_stand_in(config.stand_in_payments);
    if let Some(secret) = &config.payment_secret {
        queries = queries.with_payment_key(seckill_shared::domain::payment::PaymentKey::new(
            secret.as_bytes(),
        ));
    } else {
        tracing::warn!("PAYMENT_SECRET_ARN is not set: every payment callback is refused");
    }
    Ok(match &config.gate_secret {
        Some(secret) => {
            queries.with_gate(seckill_shared::domain::gate::Gate::new(secret.as_bytes()))
        }
        None => queries,
    })
}
