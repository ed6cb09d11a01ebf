//! The `prewarm` function (every minute, and on demand through admin-api).
//!
//! # Layout
//!
//! - [`config`]: the settings this function reads from its environment.
//! - `main.rs`: wires once ([`wire`]), runs the runtime.
//! - [`handler`]: any scheduler event in, the per-sale outcomes out.
//! - [`wire`]: [`Jobs`] over the live adapters, counting as `prewarm`; the
//!   local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads, WireError};

/// This function's settings: the orders table (a live sale is rebuilt from
/// its orders), the orders queue and its DLQ (read only: their backlog says
/// whether a rebuild must wait) and the prewarm lead besides the common ones.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            orders_queue: true,
            orders_dlq: true,
            prewarm_lead: true,
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
    let metrics = Metrics::new(Function::Prewarm, &config.metrics_namespace);
    metrics.cold_start();
    Ok(seckill_shared::app::jobs::wire(
        config,
        seckill_shared::adapters::aws::Caller::Function(
            seckill_shared::observe::metrics::Function::Prewarm,
        ),
    )
    .await?
    .with_metrics(metrics))
}
