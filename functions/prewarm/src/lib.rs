//! The `prewarm` function (every minute, and on demand through admin-api).
//!
//! # Layout
//!
//! - `main.rs`: wires [`Jobs`](seckill_shared::jobs::Jobs) once, runs the runtime.
//! - [`config`]: the settings this function reads from its environment.
//! - [`handler`]: any scheduler event in, the per-sale outcomes out.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};

/// This function's settings: the orders table (a live sale is rebuilt from
/// its orders), the orders queue (read only: its backlog says whether a
/// rebuild must wait) and the prewarm lead besides the common ones.
pub fn config(env: Lookup<'_>) -> Result<Config, ConfigError> {
    Config::reading(
        env,
        Reads {
            orders_table: true,
            orders_queue: true,
            prewarm_lead: true,
            ..Reads::COMMON
        },
    )
}
