//! The `reconcile` function (every 5 minutes, and on demand through admin-api).
//!
//! # Layout
//!
//! - `main.rs`: wires the [`Reconciler`](seckill_shared::reconcile::Reconciler) once.
//! - [`handler`]: any scheduler event in, one report per open sale out.

pub mod handler;
