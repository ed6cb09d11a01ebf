//! The `release-unpaid` function (every minute).
//!
//! # Layout
//!
//! - `main.rs`: wires [`Jobs`](seckill_shared::jobs::Jobs) once, runs the runtime.
//! - [`config`]: the settings this function reads from its environment.
//! - [`handler`]: any scheduler event in, the release report out; stops
//!   before the invocation's deadline and leaves the rest to the next tick.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};

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
