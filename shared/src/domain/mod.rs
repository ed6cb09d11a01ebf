//! The domain: values and the rules on them, with no I/O.
//!
//! - [`values`]: the ids, quantities, the `Sale` and the order message
//!   (re-exported here: `crate::domain::SaleId` is the path to use).
//! - [`sale_spec`]: the admin's sale definition, validated field by field.
//! - [`shard_layout`]: each buyer's home shard and each shard's stock.
//! - [`borrowing`]: when a short home shard borrows from the others, and
//!   for how long empty shards are not looked at again.
//! - [`gate`]: the sale gate's questions and passes (HMAC, stateless).
//! - [`pow`]: the gate's proof-of-work challenge (a sale with `powBits`).
//! - [`draw`]: the lottery window's seed and draw order (HMAC of the seed).
//! - [`keyed_filter`]: the bit logic of the sold-out fast path for keyed
//!   requests.
//! - [`orders`]: order states, reject reasons and the order row.
//! - [`ledger`]: what the ledger says of a sale for the operations path
//!   (the sale item's counters, what a rebuild of Redis loads).
//! - [`stock_state`]: what the stock store holds for a sale as the
//!   operations path reads it (snapshot, holdings, reservations).
//! - [`money`]: prices and amounts (minor units of an ISO 4217 currency).
//! - [`payment`]: the payment provider's callback: its signature and body.
//! - [`outcome`]: [`Outcome`], the one list of purchase outcome codes
//!   (metrics, tally, live view and error codes derive from it).
//! - [`waitlist`]: a sale's waitlist, its rules alone: an entry resolves
//!   once, the line's order, the odds of an offer.

pub mod borrowing;
pub mod draw;
pub mod gate;
pub mod keyed_filter;
pub mod ledger;
pub mod money;
pub mod orders;
pub mod outcome;
pub mod payment;
pub mod pow;
pub mod sale_spec;
pub mod shard_layout;
pub mod stock_state;
pub mod values;
pub mod waitlist;

pub use outcome::Outcome;
pub use values::*;

/// A hash of `text` that is the same in every process and release (FNV-1a,
/// then MurmurHash3's finaliser: FNV-1a's low bits depend only on the low
/// bits of each byte, and the callers keep only low bits by a remainder).
/// It places an order in its index bucket and a buyer in a read's slice.
pub fn stable_hash(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}
