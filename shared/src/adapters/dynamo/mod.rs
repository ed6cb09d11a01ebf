//! DynamoDB: the two tables.
//!
//! - [`catalog`]: the sale catalog on the `sales` table
//!   ([`crate::ports::SaleCatalog`], [`crate::ports::CatalogAdmin`],
//!   [`crate::ports::SaleEditor`]) and a sale's history beside it
//!   ([`crate::ports::AuditTrail`]).
//! - [`orders`]: the `orders` table and the sale counters it moves.
//! - [`expiry`]: unpaid orders expired in batches, one sale-item write each.
//! - [`order_index`]: the order item, the sale buckets that spread a sale's
//!   index entries, the reads that fan out over them
//!   ([`crate::ports::OrderLedger`]), and their backfill.
//! - [`payments`]: payments, applied once per payment id by a conditional
//!   write of their order, and their records; the refunds of a sale.
//! - [`waitlist`]: a sale's waitlist entries and the handover of an
//!   expired order's units to the head of its line
//!   ([`crate::ports::WaitlistStore`]).

pub mod catalog;
mod contention;
pub mod expiry;
pub mod order_index;
pub mod orders;
pub mod payments;
pub mod waitlist;
