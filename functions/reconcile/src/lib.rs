//! The `reconcile` function (every 5 minutes, and on demand through admin-api).
//!
//! # Layout
//!
//! - [`config`]: the settings this function reads from its environment.
//! - `main.rs`: wires the [`Reconciler`] once ([`wire`]).
//! - [`handler`]: any scheduler event in, one report per open sale out.
//! - [`wire`]: the reconciler over the live adapters, counting as
//!   `reconcile`; the local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads, WireError};

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

use seckill_shared::app::reconcile::Reconciler;
use seckill_shared::observe::metrics::{Function, Metrics};

/// Once per execution environment: its cold start is counted here, and
/// the shared wiring fetches the Redis AUTH token (a failed fetch fails the
/// init).
pub async fn wire(config: &Config) -> Result<Reconciler, WireError> {
    let metrics = Metrics::new(Function::Reconcile, &config.metrics_namespace);
    metrics.cold_start();
    Ok(seckill_shared::app::reconcile::wire(
        config,
        seckill_shared::adapters::aws::Caller::Function(
            seckill_shared::observe::metrics::Function::Reconcile,
        ),
    )
    .await?
    .with_metrics(metrics))
}
