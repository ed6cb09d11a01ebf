//! The `prewarm` function (every minute, and on demand through admin-api).
//!
//! # Layout
//!
//! - `main.rs`: wires [`Jobs`](seckill_shared::jobs::Jobs) once, runs the runtime.
//! - [`handler`]: any scheduler event in, the per-sale outcomes out.

pub mod handler;
