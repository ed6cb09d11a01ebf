//! What the system tells its operators.
//!
//! - [`metrics`]: CloudWatch metrics as embedded-metric-format lines.
//! - [`outcomes`]: purchase answers per sale and outcome, counted in memory
//!   and added to `sale:{S}:outcomes` in Redis at most once a second.
//! - [`telemetry`]: tracing set-up (JSON in Lambda, readable locally).

pub mod metrics;
pub mod outcomes;
pub mod telemetry;
