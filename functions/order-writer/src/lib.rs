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

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
pub use seckill_shared::wire::LiveWriter;
use seckill_shared::wire::WireError;

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

/// The live writer ([`seckill_shared::wire::order_writer`]).
pub async fn wire(config: &Config) -> Result<LiveWriter, WireError> {
    seckill_shared::wire::order_writer(config).await
}
