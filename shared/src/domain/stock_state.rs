//! What the stock store (Redis) holds for a sale, as the operations path
//! reads and repairs it: the reservations the purchase script records, a
//! buyer's holding, a borrow between shards still under way, a whole sale's
//! snapshot, and what loading a sale or returning an order's units did.
//! Values only; [`crate::ports::StockAdmin`] reads and writes them.

use serde::{Deserialize, Serialize};

/// A sale's keys in the stock store outlive its end by this much, so late
/// reconciliation and order-status reads still find reservations.
pub const KEY_TTL_AFTER_END_MS: i64 = 60 * 60 * 1000;

/// A reservation as the purchase script stores it (the value in `resv`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
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
/// ([`crate::ports::StockReading::snapshot`]).
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
    /// ([`crate::ports::StockReading::holdings`]): their count and
    /// reservations as at one instant. Where a buyer is here, the per-buyer
    /// checks and repairs go by this, not by `buyers` and `reservations`
    /// (read in chunks, at different moments).
    pub holdings: std::collections::BTreeMap<String, Holding>,
}

impl RedisSnapshot {
    /// The whole-sale part of the snapshot, without its buyers and
    /// reservations.
    pub fn head(&self) -> SnapshotHead {
        SnapshotHead {
            stock: self.stock,
            stock_seq: self.stock_seq,
            total: self.total,
            in_transit: self.in_transit,
            pending_transfers: self.pending_transfers.clone(),
            shards: self.shards,
            moving: self.moving,
        }
    }

    /// A snapshot of `head` holding the buyers and reservations given.
    pub fn of_head(
        head: SnapshotHead,
        buyers: std::collections::BTreeMap<String, i64>,
        reservations: std::collections::BTreeMap<String, StoredReservation>,
    ) -> Self {
        Self {
            stock: head.stock,
            stock_seq: head.stock_seq,
            total: head.total,
            buyers,
            reservations,
            in_transit: head.in_transit,
            pending_transfers: head.pending_transfers,
            shards: head.shards,
            moving: head.moving,
            holdings: std::collections::BTreeMap::new(),
        }
    }
}

/// What a streamed read of a sale's Redis state keeps whole
/// ([`crate::ports::StockReading::stream_snapshot`]): everything of a
/// [`RedisSnapshot`] but its buyers and reservations, which it hands to a
/// [`SnapshotSink`] as they are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotHead {
    pub stock: i64,
    pub stock_seq: Option<u64>,
    pub total: i64,
    pub in_transit: i64,
    pub pending_transfers: Vec<PendingTransfer>,
    pub shards: u32,
    pub moving: bool,
}

/// Where a streamed read hands a sale's buyers and reservations, key group
/// after key group (every buyer of a group before the next group's), in the
/// order it reads them. A scan may hand an entry twice (the later one
/// stands); a buyer counted on several groups (a sharded sale) holds the
/// sum of their groups' counts.
pub trait SnapshotSink: Send {
    /// A read of group `group`'s reservations starts again (its stock moved
    /// during the last one): every reservation of that group handed so far
    /// is void.
    fn restart_reservations(&mut self, group: u32);
    fn buyer(&mut self, group: u32, user: String, count: i64);
    fn reservation(&mut self, group: u32, order_id: String, reservation: StoredReservation);
}

/// A [`SnapshotSink`] that keeps what it is handed in memory: the buyers
/// and reservations of a [`RedisSnapshot`]. Groups are handed one after
/// the other, so a group's counts are kept apart (a repeat replaces) only
/// until the next group starts, then added to the sums.
#[derive(Debug, Default)]
pub struct SnapshotCollector {
    /// Each buyer's count summed over the groups read before `group`.
    buyers: std::collections::BTreeMap<String, i64>,
    group: u32,
    group_buyers: std::collections::HashMap<String, i64>,
    reservations: std::collections::BTreeMap<String, (u32, StoredReservation)>,
}

impl SnapshotCollector {
    /// The snapshot of `head` with what was collected.
    pub fn into_snapshot(mut self, head: SnapshotHead) -> RedisSnapshot {
        self.fold_group();
        let reservations = self
            .reservations
            .into_iter()
            .map(|(id, (_, r))| (id, r))
            .collect();
        RedisSnapshot::of_head(head, self.buyers, reservations)
    }

    fn fold_group(&mut self) {
        if self.buyers.is_empty() {
            // The first group's counts are taken whole: adding a million
            // buyers one by one into another map costs as much as reading them.
            self.buyers = std::mem::take(&mut self.group_buyers).into_iter().collect();
        } else {
            for (user, count) in self.group_buyers.drain() {
                *self.buyers.entry(user).or_default() += count;
            }
        }
    }
}

impl SnapshotSink for SnapshotCollector {
    fn restart_reservations(&mut self, group: u32) {
        self.reservations.retain(|_, (g, _)| *g != group);
    }

    fn buyer(&mut self, group: u32, user: String, count: i64) {
        if group != self.group {
            self.fold_group();
            self.group = group;
        }
        self.group_buyers.insert(user, count);
    }

    fn reservation(&mut self, group: u32, order_id: String, reservation: StoredReservation) {
        self.reservations.insert(order_id, (group, reservation));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn resv(state: &str) -> StoredReservation {
        StoredReservation {
            user_id: "alice".into(),
            quantity: 1,
            at_ms: "1".into(),
            state: state.into(),
        }
    }

    #[test]
    fn the_collector_replaces_a_repeat_sums_groups_and_voids_a_restarted_group() {
        let mut c = SnapshotCollector::default();
        c.buyer(0, "alice".into(), 1);
        c.buyer(0, "alice".into(), 2);
        c.buyer(0, "bob".into(), 1);
        c.reservation(0, "o-gone".into(), resv("QUEUED"));
        c.restart_reservations(0);
        c.reservation(0, "o0".into(), resv("WRITTEN"));
        c.buyer(1, "alice".into(), 3);
        c.reservation(1, "o1".into(), resv("QUEUED"));
        let snap = c.into_snapshot(SnapshotHead::default());
        assert_eq!(
            snap.buyers,
            [("alice".to_string(), 5), ("bob".to_string(), 1)].into()
        );
        let ids: Vec<&str> = snap.reservations.keys().map(String::as_str).collect();
        assert_eq!(ids, ["o0", "o1"]);
    }
}
