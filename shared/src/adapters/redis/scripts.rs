//! The Lua scripts (from `shared/lua/`, compiled in), the typed arguments
//! of each, and the arguments the store builds once rather than per call.
//!
//! A script is called with one `*Args` struct, never with a list built at
//! the call site: the order of KEYS and ARGV lives in one place per script,
//! next to the names the Lua file gives them. Each struct's doc names its
//! file in `shared/lua/`, each field's the `KEYS[i]` / `ARGV[i]` it becomes.
//!
//! # Layout
//!
//! - here: the scripts, [`ScriptCall`], and the prepared arguments
//!   (request id, quantity, rate limits, status).
//! - `stock.rs`: the arguments of the stock store's scripts (purchase,
//!   release, resolve, return, the orders API's reads, the outcome tally,
//!   the lottery draw's order and chunks).
//! - `upkeep.rs`: the arguments of the scripts that load, rebuild, borrow,
//!   reconcile, pause and lock.
//! - `tests.rs`: each struct's KEYS and ARGV against its Lua file.

mod stock;
#[cfg(test)]
mod tests;
mod upkeep;

pub(super) use stock::{
    BuyerOrdersArgs, DrawChunkArgs, DrawOrderArgs, HoldOfferArgs, KeyedFilterArgs, OutcomesArgs,
    PeekArgs, PurchaseArgs, ReleaseArgs, ResolveArgs, ReturnUnitsArgs, WaitlistAdmitArgs,
};
pub(super) use upkeep::{
    HoldingArgs, LendArgs, LoadPart, LoadSaleArgs, RebuildArgs, RebuildPart, RebuildStageArgs,
    ReceiveArgs, SaleMeta, SetBuyerArgs, SetStatusArgs, SetStockArgs, SnapshotHeadArgs,
    SurvivorArgs, UnlockArgs,
};

use crate::config::RateLimits;
use crate::domain::Sale;
use redis::{Script, ToRedisArgs};
use std::sync::LazyLock;

/// The ARGV of a script that reads none.
const NO_ARGV: &[&str] = &[];

/// One call of one script: which script, and its KEYS and ARGV in the
/// order its Lua file reads them.
pub(super) trait ScriptCall {
    fn script() -> &'static Script;

    /// `KEYS[1]`, `KEYS[2]`, ...
    fn keys(&self) -> impl AsRef<[&str]>;

    /// `ARGV[1]`, `ARGV[2]`, ...
    fn argv(&self) -> impl ToRedisArgs;

    /// The call as one EVALSHA command, built in one buffer: a
    /// `redis::ScriptInvocation` would first copy every key and argument
    /// into an allocation of its own, and the purchase is the hot path.
    fn command(&self) -> redis::Cmd {
        let keys = self.keys();
        let keys = keys.as_ref();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(Self::script().get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(self.argv());
        cmd
    }
}

/// The purchase script as it runs: the rate limiter's, the keyed filter's
/// and the reservation's functions, then the decision. One EVALSHA, one
/// round trip.
pub const PURCHASE_SOURCE: &str = concat!(
    include_str!("../../../lua/ratelimit.lua"),
    include_str!("../../../lua/keyed.lua"),
    include_str!("../../../lua/reserve.lua"),
    include_str!("../../../lua/purchase.lua")
);
static PURCHASE: LazyLock<Script> = LazyLock::new(|| Script::new(PURCHASE_SOURCE));
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/release.lua")
    ))
});
static RESOLVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/resolve.lua")
    ))
});
static PEEK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/peek.lua")));
static REBUILD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/rebuild.lua")));
static REBUILD_STAGE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/keyed.lua"),
        include_str!("../../../lua/rebuild_stage.lua")
    ))
});
static KEYED_FILTER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/keyed_filter.lua")));
static RETURN_UNITS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/return_units.lua")
    ))
});
static HOLD_OFFER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/hold_offer.lua")
    ))
});
static WAITLIST_ADMIT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/ratelimit.lua"),
        include_str!("../../../lua/waitlist_admit.lua")
    ))
});
static SURVIVOR: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/survivor.lua")));
static SNAPSHOT_HEAD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/snapshot_head.lua")));
static HOLDING: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/holding.lua")));
static SET_BUYER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/set_buyer.lua")));
static BUYER_ORDERS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/buyer_orders.lua")));
static SET_STATUS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/set_status.lua")));
static SET_STOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/set_stock.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/unlock.lua")));
static DRAW_ORDER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/draw_order.lua")));
static DRAW_CHUNK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/reserve.lua"),
        include_str!("../../../lua/draw_chunk.lua")
    ))
});
static LOAD_SALE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/load_sale.lua")));
static LEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/lend.lua")));
static RECEIVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/receive.lua")));
static OUTCOMES: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/outcomes.lua")));

/// A purchase's request id for `purchase.lua` (`ARGV[12]`): 31 hex digits,
/// a random 64-bit prefix drawn once per execution environment and a
/// 60-bit counter. Order ids without an Idempotency-Key are made of it, so
/// they never repeat: not after a rebuild, not after a failover that rolled
/// Redis back (a sequence kept in Redis would), and not between
/// environments. A borrow's transfer id carries one too, for the same reason.
pub(super) fn request_id() -> String {
    // std's `RandomState` is keyed from the operating system's random
    // source once per thread: random enough that environments never share
    // a prefix, and cheap on a cold start (aws-lc's generator is seeded
    // on first use, which `make bench`'s cold-start row showed on the first
    // purchase).
    static PREFIX: LazyLock<u64> = LazyLock::new(|| {
        use std::hash::BuildHasher;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()))
    });
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & ((1 << 60) - 1);
    format!("{:016x}{n:015x}", *PREFIX)
}

/// The `status` field of a sale's meta: an operator's pause is kept by
/// every load, refresh and rebuild.
pub(super) fn status_of(sale: &Sale) -> &'static str {
    if sale.paused { "PAUSED" } else { "LIVE" }
}

/// A quantity as a script argument; the usual ones without an allocation.
pub(super) fn quantity_arg(quantity: u32) -> std::borrow::Cow<'static, str> {
    const SMALL: [&str; 11] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"];
    match SMALL.get(quantity as usize) {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => std::borrow::Cow::Owned(quantity.to_string()),
    }
}

pub(super) fn limit_args(l: RateLimits) -> std::sync::Arc<[String; 4]> {
    std::sync::Arc::new([
        l.user_per_sec.to_string(),
        l.user_burst.to_string(),
        l.ip_per_sec.to_string(),
        l.ip_burst.to_string(),
    ])
}
