//! DynamoDB: the two tables.
//!
//! - [`catalog`]: the sale catalog on the `sales` table.
//! - [`orders`]: the `orders` table and the sale counters it moves.
//! - [`expiry`]: unpaid orders expired in batches, one sale-item write each.
//! - [`order_index`]: the order item, the sale buckets that spread a sale's
//!   index entries, the reads that fan out over them, and their backfill.
//! - `ports`: the operations path's ports ([`crate::ports::CatalogAdmin`],
//!   [`crate::ports::OrderLedger`]) by delegation to the two above.
//! - [`payments`]: payments, applied once per payment id by a conditional
//!   write of their order, and their records; the refunds of a sale.

pub mod catalog;
mod contention;
pub mod expiry;
pub mod order_index;
pub mod orders;
pub mod payments;
mod ports;
