//! The `admin-api` function: the operators' routes, `seckill/admin` scope only.
//!
//! # Layout
//!
//! - `main.rs`: wires the jobs and the reconciler once ([`wire`]), runs the runtime.
//! - [`config`]: the settings this function reads from its environment.
//! - [`handler`]: routes by `routeKey`, checks the scope, validates the sale
//!   definition field by field, and answers with what was done; the live
//!   view of a sale for the operator dashboard (`seckill_shared::app::live`).
//! - [`console`]: the operator console's routes: the list of sales, one
//!   sale with its sell-out time, end now, order lookups, the DLQ and its
//!   redrive (`seckill_shared::app::console`).
//! - [`answers`]: what both answer about a sale, the audit entry of every
//!   admin action, and the error a store out of reach maps to.

pub mod answers;
pub mod console;
pub mod handler;

use seckill_shared::config::{Config, ConfigError, Lookup, Reads};
/// What the admin routes act on.
pub use seckill_shared::wire::Admin;
use seckill_shared::wire::WireError;

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

/// The admin service over the live adapters ([`seckill_shared::wire::admin`]).
pub async fn wire(config: &Config) -> Result<Admin, WireError> {
    seckill_shared::wire::admin(config).await
}
