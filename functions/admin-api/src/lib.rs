//! The `admin-api` function: the operators' routes, `seckill/admin` scope only.
//!
//! # Layout
//!
//! - `main.rs`: wires the jobs and the reconciler once ([`wire`]), runs the runtime.
//! - [`handler`]: routes by `routeKey`, checks the scope, validates the sale
//!   definition field by field, and answers with what was done.

pub mod handler;

use seckill_shared::config::Config;
use seckill_shared::jobs::Jobs;
use seckill_shared::reconcile::Reconciler;

/// What the admin routes act on.
pub struct Admin {
    pub jobs: Jobs,
    pub reconciler: Reconciler,
}

/// The admin service over the live adapters.
pub async fn wire(config: &Config) -> Result<Admin, Box<dyn std::error::Error + Send + Sync>> {
    Ok(Admin {
        jobs: seckill_shared::jobs::wire(config).await?,
        reconciler: seckill_shared::reconcile::wire(config).await?,
    })
}
