//! What the stock store (Redis) holds for a sale, as the operations path
//! reads and repairs it: the reservations the purchase script records, a
//! buyer's holding, a borrow between shards still under way, a whole sale's
//! snapshot, and what loading a sale or returning an order's units did.
//! Values only; [`crate::ports::StockAdmin`] reads and writes them.

use serde::Deserialize;

/// A reservation as the purchase script stores it (the value in `resv`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredReservation {
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: String,
    pub state: String,
}

/// One buyer's count and reservations, read in one step (`holding.lua`).
#[derive(Debug, Clone, Default)]
pub struct Holding {
    /// `None` when Redis does not count them at all.
    pub count: Option<i64>,
    /// The reservations of the order ids on their list (every `QUEUED` or
    /// `WRITTEN` one of theirs is there), by order id.
    pub reservations: std::collections::BTreeMap<String, StoredReservation>,
}

/// A borrow whose units left one shard and have not arrived at the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTransfer {
    pub id: String,
    pub from: u32,
    pub to: u32,
    pub units: i64,
    pub at_ms: i64,
}

/// A sale's Redis state, read in bounded steps
/// ([`crate::ports::StockAdmin::snapshot`]).
#[derive(Debug, Clone, Default)]
pub struct RedisSnapshot {
    /// Units left, over every shard.
    pub stock: i64,
    /// The ledger position (`returnSeq`) a stock reset last set the stock
    /// at: expiries at or before it are in the stock, whether or not their
    /// marker says `EXPIRED` yet.
    pub stock_seq: Option<u64>,
    pub total: i64,
    pub buyers: std::collections::BTreeMap<String, i64>,
    pub reservations: std::collections::BTreeMap<String, StoredReservation>,
    /// Units lent by one shard and not yet received by another.
    pub in_transit: i64,
    pub pending_transfers: Vec<PendingTransfer>,
    /// 1 for a sale of one shard.
    pub shards: u32,
    /// The stock or the reservations of a key group changed during every
    /// attempt to read them: they are not as at one instant, so the stock
    /// is not compared with the ledger on this read (the next run does).
    pub moving: bool,
    /// Buyers read again one at a time
    /// ([`crate::ports::StockAdmin::holdings`]): their count and
    /// reservations as at one instant. Where a buyer is here, the per-buyer
    /// checks and repairs go by this, not by `buyers` and `reservations`
    /// (read in chunks, at different moments).
    pub holdings: std::collections::BTreeMap<String, Holding>,
}

/// What loading a sale did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    Loaded,
    /// Already there: stock untouched, window and expiry refreshed.
    Refreshed {
        stock: u32,
    },
}

/// What returning an expired order's units did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    Returned {
        stock: i64,
    },
    /// Returned before: nothing changed.
    Already,
    /// The sale has no keys; a rebuild reads the units from DynamoDB.
    SaleMissing,
}
