//! The arguments of the stock store's scripts: the purchase, release,
//! resolve and return of a reservation, the orders API's reads and the
//! outcome tally. See [`super::ScriptCall`] for how each struct is sent.

use super::super::keys::SaleKeys;
use super::{
    BUYER_ORDERS, DRAW_CHUNK, DRAW_ORDER, HOLD_OFFER, KEYED_FILTER, NO_ARGV, OUTCOMES, PEEK,
    PURCHASE, RELEASE, RESOLVE, RETURN_UNITS, ScriptCall, WAITLIST_ADMIT,
};
use redis::{Script, ToRedisArgs};

/// `purchase.lua` (with `ratelimit.lua` and `keyed.lua` before it): the
/// purchase decision. The hot path: every field is borrowed, so building
/// it allocates nothing.
pub(in super::super) struct PurchaseArgs<'a> {
    /// The buyer's key group: `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` buyers,
    /// `KEYS[4]` resv, `KEYS[5]` userorders, `KEYS[6]` gateused, `KEYS[7]`
    /// ratelimit, `KEYS[8]` keyed, `KEYS[9]` tickets; and `ARGV[11]`, the order id suffix
    /// (`id_suffix`: "" for a sale of one shard, `"-s<k>"` for shard k).
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` saleId.
    pub sale_id: &'a str,
    /// `ARGV[2]` userId.
    pub user_id: &'a str,
    /// `ARGV[3]` quantity ([`super::quantity_arg`]).
    pub quantity: &'a str,
    /// `ARGV[4]` Idempotency-Key, or "".
    pub idempotency_key: &'a str,
    /// `ARGV[5]` the nonce of a verified gate pass, or "".
    pub gate_nonce: &'a str,
    /// `ARGV[6]` the source address, or "" when unknown.
    pub source_ip: &'a str,
    /// ARGV[7..10] the limiter's defaults: user rate/s, user burst, ip
    /// rate/s, ip burst ([`super::limit_args`], formatted once).
    pub limits: &'a [String; 4],
    /// `ARGV[12]` the request id ([`super::request_id`]).
    pub request_id: &'a str,
    /// `ARGV[13]` when the gate pass was issued (ms), or "".
    pub gate_issued_ms: &'a str,
}

impl ScriptCall for PurchaseArgs<'_> {
    fn script() -> &'static Script {
        &PURCHASE
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        [
            k.meta.as_str(),
            &k.stock,
            &k.buyers,
            &k.resv,
            &k.user_orders,
            &k.gate_used,
            &k.rate_limit,
            &k.keyed,
            &k.tickets,
        ]
    }

    fn argv(&self) -> impl ToRedisArgs {
        let [user_rate, user_burst, ip_rate, ip_burst] = self.limits;
        // Tuples, not a `Vec`: nothing is allocated before the command
        // (two of them: the trait stops at twelve elements; they are
        // written one after the other).
        (
            (
                self.sale_id,
                self.user_id,
                self.quantity,
                self.idempotency_key,
                self.gate_nonce,
                self.source_ip,
                user_rate.as_str(),
                user_burst.as_str(),
                ip_rate.as_str(),
                ip_burst.as_str(),
            ),
            (
                self.keys.id_suffix.as_str(),
                self.request_id,
                self.gate_issued_ms,
            ),
        )
    }
}

/// The five keys `release.lua`, `resolve.lua` and `return_units.lua` take
/// ("KEYS as in purchase.lua"): `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]`
/// buyers, `KEYS[4]` resv, `KEYS[5]` userorders.
fn holding_keys(k: &SaleKeys) -> [&str; 5] {
    [&k.meta, &k.stock, &k.buyers, &k.resv, &k.user_orders]
}

/// `release.lua`: gives back the stock of a reservation proven unused.
pub(in super::super) struct ReleaseArgs<'a> {
    /// The order's key group: KEYS[1..5] meta, stock, buyers, resv, userorders.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` orderId.
    pub order_id: &'a str,
}

impl ScriptCall for ReleaseArgs<'_> {
    fn script() -> &'static Script {
        &RELEASE
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        holding_keys(self.keys)
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.order_id
    }
}

/// `resolve.lua`: what became of a reservation once the ledger decided it.
pub(in super::super) struct ResolveArgs<'a> {
    /// The order's key group: KEYS[1..5] meta, stock, buyers, resv, userorders.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` orderId.
    pub order_id: &'a str,
    /// `ARGV[2]` mode: WRITTEN, REJECTED, REJECTED_LIMIT or ABANDONED.
    pub mode: &'a str,
    /// `ARGV[3]` (ABANDONED) units the ledger offered to the waitlist,
    /// which do not go back to the stock.
    pub offered: u32,
}

impl ScriptCall for ResolveArgs<'_> {
    fn script() -> &'static Script {
        &RESOLVE
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        holding_keys(self.keys)
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.order_id, self.mode, self.offered)
    }
}

/// `return_units.lua`: an expired order's units back to the sale, once.
pub(in super::super) struct ReturnUnitsArgs<'a> {
    /// The order's key group: KEYS[1..5] meta, stock, buyers, resv, userorders.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` orderId.
    pub order_id: &'a str,
    /// `ARGV[2]` userId.
    pub user_id: &'a str,
    /// `ARGV[3]` quantity.
    pub quantity: u32,
    /// `ARGV[4]` nowMs.
    pub now_ms: i64,
    /// `ARGV[5]` the expiry's position in the ledger (`returnSeq`); "" when
    /// unknown.
    pub return_seq: Option<u64>,
    /// `ARGV[6]` the units that go back to the stock (the rest were
    /// offered to the waitlist).
    pub to_stock: u32,
}

impl ScriptCall for ReturnUnitsArgs<'_> {
    fn script() -> &'static Script {
        &RETURN_UNITS
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        holding_keys(self.keys)
    }

    fn argv(&self) -> impl ToRedisArgs {
        // An absent argument would also read as unknown, but the script
        // has always been sent five: "" keeps the call as it was.
        let seq = self.return_seq.map(|s| s.to_string()).unwrap_or_default();
        (
            self.order_id,
            self.user_id,
            self.quantity,
            self.now_ms,
            seq,
            self.to_stock,
        )
    }
}

/// `hold_offer.lua`: the buyer of an order the waitlist was offered holds
/// it, once.
pub(in super::super) struct HoldOfferArgs<'a> {
    /// The order's key group: KEYS[1..5] meta, stock, buyers, resv, userorders.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` orderId.
    pub order_id: &'a str,
    /// `ARGV[2]` userId.
    pub user_id: &'a str,
    /// `ARGV[3]` quantity.
    pub quantity: u32,
    /// `ARGV[4]` when it was written (ms).
    pub at_ms: i64,
    /// `ARGV[5]` the handover's position in the ledger (`returnSeq`;
    /// `None` before it, for a claim).
    pub return_seq: Option<u64>,
    /// `ARGV[6]` CLAIM, HOLD or UNCLAIM.
    pub mode: &'a str,
}

impl ScriptCall for HoldOfferArgs<'_> {
    fn script() -> &'static Script {
        &HOLD_OFFER
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        holding_keys(self.keys)
    }

    fn argv(&self) -> impl ToRedisArgs {
        (
            self.order_id,
            self.user_id,
            self.quantity,
            self.at_ms,
            self.return_seq
                .map(|seq| seq.to_string())
                .unwrap_or_default(),
            self.mode,
        )
    }
}

/// `waitlist_admit.lua` (with `ratelimit.lua` before it): whether a buyer
/// may join the waitlist.
pub(in super::super) struct WaitlistAdmitArgs<'a> {
    /// The buyer's key group: `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]`
    /// buyers, `KEYS[4]` userorders, `KEYS[5]` gateused, `KEYS[6]`
    /// ratelimit, `KEYS[7]` tickets.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` userId.
    pub user_id: &'a str,
    /// `ARGV[2]` the nonce of a verified gate pass, or "".
    pub gate_nonce: &'a str,
    /// `ARGV[3]` when that pass was issued (ms), or "".
    pub gate_issued_ms: &'a str,
    /// `ARGV[4]` the source address, or "".
    pub source_ip: &'a str,
    /// `ARGV[5..8]` the limiter's defaults ([`super::limit_args`]).
    pub limits: &'a [String; 4],
}

impl ScriptCall for WaitlistAdmitArgs<'_> {
    fn script() -> &'static Script {
        &WAITLIST_ADMIT
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        [
            k.meta.as_str(),
            &k.stock,
            &k.buyers,
            &k.user_orders,
            &k.gate_used,
            &k.rate_limit,
            &k.tickets,
        ]
    }

    fn argv(&self) -> impl ToRedisArgs {
        let [user_rate, user_burst, ip_rate, ip_burst] = self.limits;
        (
            self.user_id,
            self.gate_nonce,
            self.gate_issued_ms,
            self.source_ip,
            user_rate.as_str(),
            user_burst.as_str(),
            ip_rate.as_str(),
            ip_burst.as_str(),
        )
    }
}

/// `peek.lua`: the read-only view of a sale for the orders API.
pub(in super::super) struct PeekArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` resv.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` orderId, or "" for none.
    pub order_id: &'a str,
}

impl ScriptCall for PeekArgs<'_> {
    fn script() -> &'static Script {
        &PEEK
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.meta.as_str(), &self.keys.stock, &self.keys.resv]
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.order_id
    }
}

/// `buyer_orders.lua`: one buyer's reservations of a sale.
pub(in super::super) struct BuyerOrdersArgs<'a> {
    /// The buyer's home key group: `KEYS[1]` userorders, `KEYS[2]` resv.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` userId.
    pub user_id: &'a str,
}

impl ScriptCall for BuyerOrdersArgs<'_> {
    fn script() -> &'static Script {
        &BUYER_ORDERS
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.user_orders.as_str(), &self.keys.resv]
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.user_id
    }
}

/// `keyed_filter.lua`: the filter of a key group's keyed reservations.
/// No ARGV.
pub(in super::super) struct KeyedFilterArgs<'a> {
    /// `KEYS[1]` keyed, `KEYS[2]` resv.
    pub keys: &'a SaleKeys,
}

impl ScriptCall for KeyedFilterArgs<'_> {
    fn script() -> &'static Script {
        &KEYED_FILTER
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.keyed.as_str(), &self.keys.resv]
    }

    fn argv(&self) -> impl ToRedisArgs {
        NO_ARGV
    }
}

/// `outcomes.lua`: an environment's purchase answers added to the tally
/// and to their bucket of the funnel.
pub(in super::super) struct OutcomesArgs<'a> {
    /// The sale's own keys (a sharded sale's directory): `KEYS[1]` meta,
    /// `KEYS[2]` outcomes.
    pub keys: &'a SaleKeys,
    /// `KEYS[3]`: the sale's funnel (`sale:{S}:funnel`).
    pub funnel: &'a str,
    /// `ARGV[1]`: the start of the bucket the answers go to.
    pub bucket_ms: i64,
    /// `ARGV[2]`: how many buckets the funnel keeps.
    pub keep: usize,
    /// ARGV[3..]: outcome, count, outcome, count, ...
    pub counts: &'a [(&'static str, u64)],
}

impl ScriptCall for OutcomesArgs<'_> {
    fn script() -> &'static Script {
        &OUTCOMES
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.meta.as_str(), &self.keys.outcomes, self.funnel]
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.bucket_ms, self.keep, self.counts)
    }
}

/// `draw_order.lua`: records the lottery draw's order, once.
pub(in super::super) struct DrawOrderArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` tickets, `KEYS[3]` drawq.
    pub keys: &'a SaleKeys,
    /// ARGV[1..n] the holders in the draw's order.
    pub order: &'a [String],
}

impl ScriptCall for DrawOrderArgs<'_> {
    fn script() -> &'static Script {
        &DRAW_ORDER
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        [k.meta.as_str(), &k.tickets, &k.draw_order]
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.order
    }
}

/// `draw_chunk.lua`: decides the next tickets of the draw.
pub(in super::super) struct DrawChunkArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` buyers, `KEYS[4]` resv, `KEYS[5]`
    /// userorders, `KEYS[6]` tickets, `KEYS[7]` drawq.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` the position the caller read.
    pub pos: u64,
    /// `ARGV[2]` how many tickets at most.
    pub size: u64,
    /// `ARGV[3]` saleId.
    pub sale_id: &'a str,
}

impl ScriptCall for DrawChunkArgs<'_> {
    fn script() -> &'static Script {
        &DRAW_CHUNK
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        [
            k.meta.as_str(),
            &k.stock,
            &k.buyers,
            &k.resv,
            &k.user_orders,
            &k.tickets,
            &k.draw_order,
        ]
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.pos, self.size, self.sale_id)
    }
}
