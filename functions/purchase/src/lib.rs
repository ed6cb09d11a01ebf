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

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
/// The purchase service over the real adapters.
pub use seckill_shared::wire::LivePurchase;
/// Why the function could not be wired at cold start (settings, secrets, Redis URL).
pub use seckill_shared::wire::WireError;

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

/// Builds the live service ([`seckill_shared::wire::purchase`]).
pub async fn wire(config: &Config) -> Result<LivePurchase, WireError> {
    seckill_shared::wire::purchase(config).await
}
