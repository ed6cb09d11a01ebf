//! Key names: one hash tag per sale (or per shard of a sharded sale), so a
//! script touches one slot; and which shard an order id or a buyer belongs to.

use crate::domain::shard_layout::ShardLayout;
use crate::domain::{OrderId, SaleId};

pub use crate::domain::stock_state::KEY_TTL_AFTER_END_MS;

/// The Redis key names of one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleKeys {
    pub meta: String,
    pub stock: String,
    pub buyers: String,
    pub resv: String,
    pub user_orders: String,
    /// Nonces of gate passes already used (gated sales only).
    pub gate_used: String,
    /// The rate limiter's token buckets.
    pub rate_limit: String,
    /// The filter of reservations made under an Idempotency-Key
    /// (`keyed.lua`).
    pub keyed: String,
    /// Transfers this shard lent to others (sharded sales).
    pub lent: String,
    /// Transfers this shard received (sharded sales).
    pub received: String,
    /// Purchase answers by outcome, for the operator dashboard. Used on
    /// the sale's own tag only (a sharded sale's directory), never per shard.
    pub outcomes: String,
    /// A lottery window's tickets: userId -> `{"q","at"}`, and after the
    /// draw decided it, also `"r"` (`WON`/`LOST`) and `"o"` (the order id).
    pub tickets: String,
    /// The draw's order: a list of the ticket holders, written once.
    pub draw_order: String,
    /// The live view's last count of the sale's orders by status, shared by
    /// every console (JSON `{"atMs","counts"}`; on the sale's own tag).
    pub order_counts: String,
    /// Held by the console that counts the orders next, for as long as the
    /// count's read budget says (`SET NX PX`).
    pub order_counting: String,
    /// What the purchase script appends to the order ids it makes here.
    pub id_suffix: String,
}

impl SaleKeys {
    /// The keys of a sale of one shard, and the directory of a sharded one.
    pub fn new(sale_id: &SaleId) -> Self {
        Self::tagged(sale_id.as_str(), String::new())
    }

    /// The key group of shard `k` of a sale with more than one shard.
    pub fn shard(sale_id: &SaleId, k: u32) -> Self {
        Self::tagged(&format!("{sale_id}:{k}"), format!("-s{k}"))
    }

    /// Every key a node restarted without its data loses of this group
    /// (the sale's own, not the operator's tallies on its tag): what the
    /// tests and the bench delete to lose a sale or a shard.
    pub fn lost_with_the_node(&self) -> [&str; 12] {
        [
            &self.meta,
            &self.stock,
            &self.buyers,
            &self.resv,
            &self.user_orders,
            &self.gate_used,
            &self.rate_limit,
            &self.keyed,
            &self.lent,
            &self.received,
            &self.tickets,
            &self.draw_order,
        ]
    }

    /// Shard `k`'s keys of a sale of `shards`: the plain keys when it has one.
    pub fn of(sale_id: &SaleId, shards: u32, k: u32) -> Self {
        if shards <= 1 {
            Self::new(sale_id)
        } else {
            Self::shard(sale_id, k)
        }
    }

    /// The keys holding an order's reservation, from its id.
    pub fn of_order(sale_id: &SaleId, order_id: &OrderId) -> Self {
        match shard_of_order(order_id.as_str()) {
            Some(k) => Self::shard(sale_id, k),
            None => Self::new(sale_id),
        }
    }

    pub(super) fn tagged(tag: &str, id_suffix: String) -> Self {
        let key = |suffix: &str| format!("sale:{{{tag}}}:{suffix}");
        Self {
            meta: key("meta"),
            stock: key("stock"),
            buyers: key("buyers"),
            resv: key("resv"),
            user_orders: key("userorders"),
            gate_used: key("gateused"),
            rate_limit: key("ratelimit"),
            keyed: key("keyed"),
            lent: key("lent"),
            received: key("received"),
            outcomes: key("outcomes"),
            tickets: key("tickets"),
            draw_order: key("drawq"),
            order_counts: key("ordercounts"),
            order_counting: key("ordercounting"),
            id_suffix,
        }
    }
}

/// The keys a rebuild stages a key group's buyers, user orders,
/// reservations and keyed filter in (`rebuild_stage.lua`) before
/// `rebuild.lua` renames them into place: under the group's hash tag (one
/// slot) and the rebuild's own token (two rebuilds never mix).
pub struct StagedKeys {
    pub buyers: String,
    pub user_orders: String,
    pub resv: String,
    pub keyed: String,
}

impl StagedKeys {
    /// The staged keys of `group` (a sale's plain keys, or one shard's) for
    /// the rebuild `token`.
    pub fn of(group: &SaleKeys, token: &str) -> Self {
        let staged = |live: &str| format!("{live}:rebuild:{token}");
        Self {
            buyers: staged(&group.buyers),
            user_orders: staged(&group.user_orders),
            resv: staged(&group.resv),
            keyed: staged(&group.keyed),
        }
    }
}

/// A buyer's home shard under the uniform hash (FNV-1a of the user id,
/// modulo the shard count): every sale on one Redis node. On a cluster the
/// sale's directory may carry a home table instead ([`ShardLayout`]).
pub fn home_shard(user_id: &str, shards: u32) -> u32 {
    ShardLayout::uniform(shards).home(user_id)
}

pub use crate::domain::shard_layout::shard_of_order;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_id_names_its_shard() {
        let id = format!("n{}", "a".repeat(31));
        assert_eq!(shard_of_order(&id), None);
        assert_eq!(shard_of_order(&format!("{id}-s7")), Some(7));
        assert_eq!(shard_of_order("ord-s1"), None, "only the script's ids");
        assert_eq!(shard_of_order(&format!("{id}-x7")), None);
    }
}
