//! The `release-unpaid` function (every minute).
//!
//! # Layout
//!
//! - `main.rs`: wires [`Jobs`](seckill_shared::jobs::Jobs) once, runs the runtime.
//! - [`handler`]: any scheduler event in, the release report out; stops
//!   before the invocation's deadline and leaves the rest to the next tick.

pub mod handler;
