//! The `admin-api` function: the operators' routes, `seckill/admin` scope only.
//!
//! # Layout
//!
//! - `main.rs`: wires the jobs and the reconciler once ([`wire`]), runs the runtime.
//! - [`config`]: the settings this function reads from its environment.
//! - [`handler`]: routes by `routeKey`, checks the scope, validates the sale
//!   definition field by field, and answers with what was done.

pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
use seckill_shared::jobs::Jobs;
use seckill_shared::reconcile::Reconciler;

/// What the admin routes act on.
pub struct Admin {
    pub jobs: Jobs,
    pub reconciler: Reconciler,
}

/// This function's settings: the orders table, both queues (reconcile on
/// demand relays to the queue and reports on the DLQ) and the prewarm lead
/// besides the common ones.
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

/// The admin service over the live adapters.
pub async fn wire(config: &Config) -> Result<Admin, Box<dyn std::error::Error + Send + Sync>> {
    Ok(Admin {
        jobs: seckill_shared::jobs::wire(config).await?,
        reconciler: seckill_shared::reconcile::wire(config).await?,
    })
}
