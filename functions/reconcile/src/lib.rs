//! The `reconcile` function (every 5 minutes, and on demand through admin-api).
//!
//! # Layout
//!
//! - `main.rs`: wires the [`Reconciler`](seckill_shared::reconcile::Reconciler) once.
//! - [`config`]: the settings this function reads from its environment.
//! - [`handler`]: any scheduler event in, one report per open sale out.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};

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
