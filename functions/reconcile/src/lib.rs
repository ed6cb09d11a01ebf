//! The `reconcile` function (every 5 minutes, and on demand through admin-api).
//!
//! # Layout
//!
//! - `main.rs`: wires the [`Reconciler`] once ([`wire`]).
//! - [`handler`]: any scheduler event in, one report per open sale out.
//! - [`wire`]: the reconciler over the live adapters, counting as
//!   `reconcile`; the local stack's schedule uses it too.

pub mod handler;

use seckill_shared::config::{Config, ConfigError};
use seckill_shared::metrics::{Function, Metrics};
use seckill_shared::reconcile::Reconciler;

/// Once per execution environment: its cold start is counted here.
pub async fn wire(config: &Config) -> Result<Reconciler, ConfigError> {
    let metrics = Metrics::new(Function::Reconcile, &config.metrics_namespace);
    metrics.cold_start();
    Ok(seckill_shared::reconcile::wire(config)
        .await?
        .with_metrics(metrics))
}
