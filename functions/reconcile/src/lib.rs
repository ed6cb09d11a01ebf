//! The `reconcile` function (every 5 minutes, and on demand through admin-api).
//!
//! # Layout
//!
//! - [`config`]: the settings this function reads from its environment.
//! - `main.rs`: wires the [`LiveReconciler`] once ([`wire`]).
//! - [`handler`]: any scheduler event in, one report per open sale out.
//! - [`wire`]: the reconciler over the live adapters, counting as
//!   `reconcile`; the local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
use seckill_shared::wire::{LiveReconciler, WireError};

/// This function's settings: the orders table, the orders queue (the
/// outbox relay, and its backlog) and its DLQ (the report) besides the
/// common ones.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            orders_queue: true,
            orders_dlq: true,
            ..Reads::COMMON
        },
    )
}

/// Once per execution environment ([`seckill_shared::wire::reconcile`]).
pub async fn wire(config: &Config) -> Result<LiveReconciler, WireError> {
    seckill_shared::wire::reconcile(config).await
}
