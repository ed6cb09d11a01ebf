//! The `prewarm` function (every minute, and on demand through admin-api).
//!
//! # Layout
//!
//! - [`config`]: the settings this function reads from its environment.
//! - `main.rs`: wires once ([`wire`]), runs the runtime.
//! - [`handler`]: any scheduler event in, the per-sale outcomes out.
//! - [`wire`]: [`LiveJobs`]: the jobs over the live adapters, counting as `prewarm`; the
//!   local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
use seckill_shared::wire::{LiveJobs, WireError};

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

/// Once per execution environment ([`seckill_shared::wire::prewarm`]).
pub async fn wire(config: &Config) -> Result<LiveJobs, WireError> {
    seckill_shared::wire::prewarm(config).await
}
