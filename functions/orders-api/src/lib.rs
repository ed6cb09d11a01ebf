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

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
pub use seckill_shared::wire::LiveQueries;
use seckill_shared::wire::WireError;

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

/// The live service ([`seckill_shared::wire::orders_api`]).
pub async fn wire(config: &Config) -> Result<LiveQueries, WireError> {
    seckill_shared::wire::orders_api(config).await
}
