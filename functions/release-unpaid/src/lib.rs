//! The `release-unpaid` function (every minute).
//!
//! # Layout
//!
//! - [`config`]: the settings this function reads from its environment.
//! - `main.rs`: wires once ([`wire`]), runs the runtime.
//! - [`handler`]: any scheduler event in, the release report out; stops
//!   before the invocation's deadline and leaves the rest to the next tick.
//! - [`wire`]: [`LiveJobs`]: the jobs over the live adapters, counting as
//!   `release-unpaid`; the local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
use seckill_shared::wire::{LiveJobs, WireError};

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

/// Once per execution environment ([`seckill_shared::wire::release_unpaid`]).
pub async fn wire(config: &Config) -> Result<LiveJobs, WireError> {
    seckill_shared::wire::release_unpaid(config).await
}
