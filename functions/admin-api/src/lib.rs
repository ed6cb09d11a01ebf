//! The `admin-api` function: the operators' routes, `seckill/admin` scope only.
//!
//! # Layout
//!
//! - `main.rs`: wires [`Jobs`](seckill_shared::jobs::Jobs) once, runs the runtime.
//! - [`handler`]: routes by `routeKey`, checks the scope, validates the sale
//!   definition field by field, and answers with what was done.

pub mod handler;
