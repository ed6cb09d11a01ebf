//! The `order-writer` function: batches of the orders queue become orders.
//!
//! # Layout
//!
//! - `main.rs`: wires the clients once and runs the Lambda runtime.
//! - [`handler`]: `SqsEvent` in, `SqsBatchResponse` out (partial batch
//!   failures); the work is [`OrderWriter`](seckill_shared::app::order_writer::OrderWriter).
//! - [`config`]: the settings this function reads from its environment.
//! - [`wire`]: the live writer from [`Config`]; the local stack uses it too.

pub mod handler;

use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::order_writer::OrderWriter;
use seckill_shared::config::{Config, ConfigError, Lookup, Reads, WireError};
use seckill_shared::observe::metrics::{Function, Metrics};
use std::time::Duration;

pub type LiveWriter = OrderWriter<DynamoOrders, RedisStock, CachedCatalog<DynamoCatalog>>;

/// A sale's payment window rarely changes; the writer re-reads it this often.
const SALE_CACHE: Duration = Duration::from_secs(30);

/// This function's settings: the orders table and the queue's receive
/// limit (when a failure sends a message to the DLQ) besides the common
/// ones. No queue URL: it only consumes, through the event source mapping.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            max_receive_count: true,
            ..Reads::COMMON
        },
    )
}

/// Once per execution environment: its cold start is counted here, and
/// the Redis AUTH token is fetched (a failed fetch fails the init).
pub async fn wire(config: &Config) -> Result<LiveWriter, WireError> {
    let caller = aws::Caller::Function(seckill_shared::observe::metrics::Function::OrderWriter);
    let config = &seckill_shared::adapters::secrets::resolve(
        config,
        caller,
        seckill_shared::adapters::secrets::Uses::Redis,
    )
    .await?;
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
        SALE_CACHE,
    )
    .forgetting_missing();
    let metrics = Metrics::new(Function::OrderWriter, &config.metrics_namespace);
    metrics.cold_start();
    if config.max_receive_count.is_none() {
        tracing::warn!("MAX_RECEIVE_COUNT is not set: records moved to the DLQ are not counted");
    }
    Ok(OrderWriter::new(orders, stock, catalog).with_metrics(metrics, config.max_receive_count))
}
