//! The domain: values and the rules on them, with no I/O.
//!
//! - [`values`]: the ids, quantities, the `Sale` and the order message
//!   (re-exported here: `crate::domain::SaleId` is the path to use).
//! - [`sale_spec`]: the admin's sale definition, validated field by field.
//! - [`shard_layout`]: each buyer's home shard and each shard's stock.
//! - [`borrowing`]: when a short home shard borrows from the others, and
//!   for how long empty shards are not looked at again.
//! - [`gate`]: the sale gate's questions and passes (HMAC, stateless).
//! - [`keyed_filter`]: the bit logic of the sold-out fast path for keyed
//!   requests.
//! - [`orders`]: order states, reject reasons and the order row.

pub mod borrowing;
pub mod gate;
pub mod keyed_filter;
pub mod orders;
pub mod sale_spec;
pub mod shard_layout;
pub mod values;

pub use values::*;
