//! The use cases: what the functions do, written against the ports.
//!
//! - [`purchase`]: the purchase decision (reserve, queue, release only what
//!   is proven unsent).
//! - [`order_writer`]: queue messages in, orders out.
//! - [`order_queries`]: sale info, order status and payment for the orders
//!   API.
//! - [`payments`]: the payment provider's callback (signature, amount,
//!   once per payment id) and the payment metrics.
//! - [`catalog_cache`]: the per-environment cache in front of the catalog.
//! - [`jobs`]: prewarm and the unpaid release.
//! - [`release`]: one unpaid order released (the job's step, and the
//!   orders API's the moment it would say `EXPIRED`).
//! - [`draw`]: a lottery window's draw (order once, then chunks).
//! - [`reconcile`]: compare the stores, repair what is provably safe.
//! - [`invariants`]: the invariants of `docs/design.md` over one sale's state.
//! - [`live`]: the operator dashboard's view of one sale.
//! - [`console`]: the operator console: the list of sales, ending a sale
//!   now, the DLQ's messages and their redrive.
//! - [`operators`]: an operator's commands on one sale (define, pause,
//!   resume) and its history (audit trail, last report).
//!
//! The operations path (`jobs`, `reconcile`, `invariants`, `live`) is
//! generic over its ports ([`crate::ports::StockAdmin`],
//! [`crate::ports::CatalogAdmin`], [`crate::ports::OrderLedger`],
//! [`crate::ports::QueueInspector`]); [`crate::wire`] builds it over the
//! live adapters. Its rules are unit-tested on the in-memory adapters, in a
//! world of one sale (`fixture.rs`, tests only), in `jobs/tests.rs` and
//! `reconcile/tests.rs`.

pub mod catalog_cache;
pub mod console;
pub mod draw;
#[cfg(test)]
pub(crate) mod fixture;
pub mod invariants;
pub mod jobs;
pub mod live;
pub mod operators;
pub mod order_queries;
pub mod order_writer;
pub mod payments;
pub mod purchase;
pub mod reconcile;
pub mod release;
