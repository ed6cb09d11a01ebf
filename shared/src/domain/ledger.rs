//! What the ledger (DynamoDB) says of a sale, as the operations path reads
//! it: the sale item's counters, and what a rebuild of Redis loads from the
//! ledger (the decided orders as reservations, each buyer's units). Values
//! only; [`crate::ports::CatalogAdmin`] and [`crate::ports::OrderLedger`]
//! read them, [`crate::ports::StockAdmin::rebuild_sale`] loads them.

/// The counters the order-writer and the unpaid release move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaleCounters {
    pub available: i64,
    pub sold: i64,
    pub version: i64,
    /// How many expiries have returned units to `available` (each sets the
    /// next number on its order row): the ledger position a rebuild loads
    /// Redis at. 0 before the first.
    pub return_seq: u64,
    /// Prewarm has loaded it into Redis (`loadedAtMs`): its shard count is
    /// fixed from then on.
    pub loaded: bool,
}

/// A buyer as the source of truth knows them, for a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldUnits {
    pub user_id: String,
    pub units: u64,
    pub order_ids: Vec<String>,
}

/// What a rebuild reads from the ledger: the sale item's `available` and
/// `returnSeq` (one consistent read), and every decided order as the
/// reservation Redis keeps for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerRead {
    pub available: i64,
    pub return_seq: u64,
    pub decided: Vec<DecidedOrder>,
    /// Every `EXPIRED` order (id, units), whatever its position: a shard
    /// that survived a partial loss may still be owed their return.
    pub expired: Vec<(String, i64)>,
}

/// An order the ledger has decided, as a reservation in `resv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedOrder {
    pub order_id: String,
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: i64,
    /// `WRITTEN`, `EXPIRED` or `REJECTED`.
    pub state: &'static str,
}

impl DecidedOrder {
    /// The reservation as the purchase script stores it in `resv`.
    pub fn reservation_json(&self) -> String {
        serde_json::json!({
            "userId": self.user_id,
            "quantity": self.quantity,
            "atMs": self.at_ms.to_string(),
            "state": self.state,
        })
        .to_string()
    }
}
