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
use seckill_shared::metrics::{Function, Metrics};
use seckill_shared::reconcile::Reconciler;

/// What the admin routes act on.
pub struct Admin {
    pub jobs: Jobs,
    pub reconciler: Reconciler,
    /// What the jobs and the reconciler count on demand, as `admin-api`.
    pub metrics: Metrics,
}

/// The admin service over the live adapters. Once per execution
/// environment: its cold start is counted here.
pub async fn wire(config: &Config) -> Result<Admin, Box<dyn std::error::Error + Send + Sync>> {
    let metrics = Metrics::new(Function::AdminApi, &config.metrics_namespace);
    metrics.cold_start();
    Ok(Admin {
        jobs: seckill_shared::jobs::wire(config)
            .await?
            .with_metrics(metrics.clone()),
        reconciler: seckill_shared::reconcile::wire(config)
            .await?
            .with_metrics(metrics.clone()),
        metrics,
    })
}
