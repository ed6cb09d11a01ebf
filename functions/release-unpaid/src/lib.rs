//! The `release-unpaid` function (every minute).
//!
//! # Layout
//!
//! - [`config`]: the settings this function reads from its environment.
//! - `main.rs`: wires once ([`wire`]), runs the runtime.
//! - [`handler`]: any scheduler event in, the release report out; stops
//!   before the invocation's deadline and leaves the rest to the next tick.
//! - [`wire`]: [`Jobs`] over the live adapters, counting as
//!   `release-unpaid`; the local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads, WireError};

/// This function's settings: the orders table besides the common ones.
/// Expiry never touches the queue and never prewarms.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            ..Reads::COMMON
        },
    )
}

use seckill_shared::app::jobs::Jobs;
use seckill_shared::observe::metrics::{Function, Metrics};

/// Once per execution environment: its cold start is counted here, and
/// the shared wiring fetches the Redis AUTH token (a failed fetch fails the
/// init).
pub async fn wire(config: &Config) -> Result<Jobs, WireError> {
    let metrics = Metrics::new(Function::ReleaseUnpaid, &config.metrics_namespace);
    metrics.cold_start();
    Ok(seckill_shared::app::jobs::wire(
        config,
        seckill_shared::adapters::aws::Caller::Function(
            seckill_shared::observe::metrics::Function::ReleaseUnpaid,
        ),
    )
    .await?
    .with_metrics(metrics))
}
