//! The arguments of the scripts that keep a sale in Redis: loading and
//! rebuilding it, moving units between shards, reconcile's reads and
//! repairs, pause and resume, locks. See [`super::ScriptCall`] for how
//! each struct is sent.

use super::super::keys::{SaleKeys, StagedKeys};
use super::super::rebuild::StagedOrder;
use super::{
    HOLDING, LEND, LOAD_SALE, NO_ARGV, REBUILD, REBUILD_STAGE, RECEIVE, SET_BUYER, SET_STATUS,
    SET_STOCK, SNAPSHOT_HEAD, SURVIVOR, ScriptCall, UNLOCK, status_of,
};
use crate::domain::Sale;
use redis::{Script, ToRedisArgs};

/// ARGV[1..8] of `load_sale.lua` and `rebuild.lua`: total, startMs, endMs,
/// perUserLimit, shards, status, version, expireAtMs; and the gate flag,
/// which the two read at different positions.
pub(in super::super) struct SaleMeta<'a> {
    pub sale: &'a Sale,
    pub version: i64,
    pub expire_at_ms: i64,
}

impl SaleMeta<'_> {
    fn fields(&self) -> impl ToRedisArgs {
        let s = self.sale;
        (
            s.total_stock,
            s.start_ms,
            s.end_ms,
            s.per_user_limit,
            s.shards,
            status_of(s),
            self.version,
            self.expire_at_ms,
        )
    }

    /// "1" for a gated sale, else "0".
    fn gate(&self) -> &'static str {
        if self.sale.gate { "1" } else { "0" }
    }
}

/// Which key group `load_sale.lua` loads, and so which keys and trailing
/// arguments it gets.
pub(in super::super) enum LoadPart<'a> {
    /// A sale of one shard: every key of its group and its outcome tally;
    /// no ARGV past the gate, or for a lottery window ARGV[10..12] "", "0",
    /// "" and `ARGV[13]` windowEndMs, `ARGV[14]` the draw's seed.
    Whole,
    /// A sharded sale's directory: meta and the outcome tally only.
    /// `ARGV[10]` "0", `ARGV[11]` "1", `ARGV[12]` the home table it proposes.
    Directory { homes: &'a str },
    /// Shard k of a sharded sale: every key of its group. `ARGV[10]` its
    /// share of the stock, `ARGV[11]` "0".
    Shard { stock: i64 },
}

/// `load_sale.lua`: puts a sale into Redis, once.
pub(in super::super) struct LoadSaleArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock, then the keys whose expiry follows the
    /// sale's end: buyers, resv, userorders, gateused, keyed, and for a
    /// whole sale outcomes ([`LoadPart`]; a directory: meta, outcomes).
    pub keys: &'a SaleKeys,
    /// ARGV[1..8], and `ARGV[9]` gate.
    pub meta: &'a SaleMeta<'a>,
    /// ARGV[10..12].
    pub part: LoadPart<'a>,
    /// A refresh only (`ARGV[15]` "1"): create no group (the reply is
    /// `MISSING` when it has no keys), and write nothing when the group was
    /// refreshed from a later version of the sale item (`ARGV[16]`, this
    /// read's version; the reply is `STALE`).
    pub refresh: Option<i64>,
}

impl ScriptCall for LoadSaleArgs<'_> {
    fn script() -> &'static Script {
        &LOAD_SALE
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        let group = [
            k.meta.as_str(),
            &k.stock,
            &k.buyers,
            &k.resv,
            &k.user_orders,
            &k.gate_used,
            &k.keyed,
        ];
        match self.part {
            LoadPart::Whole => [group.as_slice(), &[k.outcomes.as_str()]].concat(),
            LoadPart::Directory { .. } => vec![k.meta.as_str(), &k.outcomes],
            LoadPart::Shard { .. } => group.to_vec(),
        }
    }

    fn argv(&self) -> impl ToRedisArgs {
        let s = self.meta.sale;
        let tail = match self.part {
            LoadPart::Whole => match (&s.admission, s.window_end_ms()) {
                (Some(admission), Some(closes)) => vec![
                    String::new(),
                    "0".to_owned(),
                    String::new(),
                    closes.to_string(),
                    admission.seed.to_hex(),
                ],
                _ => Vec::new(),
            },
            LoadPart::Directory { homes } => vec!["0".to_owned(), "1".to_owned(), homes.to_owned()],
            LoadPart::Shard { stock } => vec![stock.to_string(), "0".to_owned()],
        };
        let mut tail = tail;
        if let Some(version) = self.refresh {
            // ARGV[10..14] as the script reads them when absent.
            let absent = ["", "0", "", "", ""];
            let have = tail.len();
            tail.extend(absent.iter().skip(have).map(|a| (*a).to_owned()));
            tail.push("1".to_owned());
            tail.push(version.to_string());
        }
        (self.meta.fields(), self.meta.gate(), tail)
    }
}

/// Which key group `rebuild.lua` loads from the ledger.
pub(in super::super) enum RebuildPart<'a> {
    /// A sharded sale's directory (meta only): `ARGV[9]` "0", `ARGV[11]` "1",
    /// `ARGV[12]` the home table it proposes.
    Directory { homes: &'a str },
    /// A key group with stock (the sale, or one shard of it).
    Group {
        /// `ARGV[9]` this group's share of the sale item's `available`.
        stock: i64,
        /// `ARGV[12]` ledgerSeq: the `returnSeq` read with `available`
        /// (`ARGV[11]` is "", or "windowEndMs|seed" for a lottery window).
        ledger_seq: u64,
        /// KEYS[7..10]: what `rebuild_stage.lua` staged for this group,
        /// renamed into place when the group is loaded.
        staged: &'a StagedKeys,
    },
}

/// `rebuild.lua`: loads a sale from the ledger (staged by
/// [`RebuildStageArgs`]), only when it is absent.
pub(in super::super) struct RebuildArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` buyers, `KEYS[4]` userorders; for
    /// a group also `KEYS[5]` resv, `KEYS[6]` keyed and the staged keys.
    pub keys: &'a SaleKeys,
    /// ARGV[1..8], and `ARGV[10]` gate.
    pub meta: &'a SaleMeta<'a>,
    /// `ARGV[9]`, ARGV[11..].
    pub part: RebuildPart<'a>,
}

impl ScriptCall for RebuildArgs<'_> {
    fn script() -> &'static Script {
        &REBUILD
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        let head = [k.meta.as_str(), &k.stock, &k.buyers, &k.user_orders];
        match self.part {
            RebuildPart::Directory { .. } => head.to_vec(),
            RebuildPart::Group { staged, .. } => [
                head.as_slice(),
                &[k.resv.as_str(), &k.keyed],
                &[
                    staged.buyers.as_str(),
                    &staged.user_orders,
                    &staged.resv,
                    &staged.keyed,
                ],
            ]
            .concat(),
        }
    }

    fn argv(&self) -> impl ToRedisArgs {
        let gate = self.meta.gate().to_owned();
        let rest = match &self.part {
            RebuildPart::Directory { homes } => {
                vec!["0".to_owned(), gate, "1".to_owned(), (*homes).to_owned()]
            }
            RebuildPart::Group {
                stock, ledger_seq, ..
            } => {
                let s = self.meta.sale;
                let window = match (&s.admission, s.window_end_ms()) {
                    (Some(a), Some(closes)) => format!("{closes}|{}", a.seed.to_hex()),
                    _ => String::new(),
                };
                vec![stock.to_string(), gate, window, ledger_seq.to_string()]
            }
        };
        (self.meta.fields(), rest)
    }
}

/// `rebuild_stage.lua` (with `keyed.lua` before it): one page of the
/// ledger's orders staged for a key group's rebuild.
pub(in super::super) struct RebuildStageArgs<'a> {
    /// KEYS[1..4] staged buyers, userorders, resv, keyed filter.
    pub staged: &'a StagedKeys,
    /// `ARGV[1]` how long the staged keys live (ms).
    pub ttl_ms: u64,
    /// `ARGV[2]` the sale's total (the keyed filter's size).
    pub total: u32,
    /// Then 4-tuples orderId, reservation JSON ("" unless this group made
    /// the order), userId, units held here (0 unless it holds units and
    /// this group is its buyer's home).
    pub orders: Vec<StagedOrder<'a>>,
}

impl ScriptCall for RebuildStageArgs<'_> {
    fn script() -> &'static Script {
        &REBUILD_STAGE
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let st = self.staged;
        [st.buyers.as_str(), &st.user_orders, &st.resv, &st.keyed]
    }

    fn argv(&self) -> impl ToRedisArgs {
        let mut argv = Vec::with_capacity(2 + 4 * self.orders.len());
        argv.push(self.ttl_ms.to_string());
        argv.push(self.total.to_string());
        for staged in &self.orders {
            let o = staged.order;
            let held = if staged.held && o.state == "WRITTEN" {
                o.quantity
            } else {
                0
            };
            argv.extend([
                o.order_id.clone(),
                if staged.reservation {
                    reservation_json(o)
                } else {
                    String::new()
                },
                o.user_id.clone(),
                held.to_string(),
            ]);
        }
        argv
    }
}

/// `lend.lua`: a shard gives units to a buyer's home shard that ran out.
pub(in super::super) struct LendArgs<'a> {
    /// The lending shard: `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` lent.
    pub donor: &'a SaleKeys,
    /// `ARGV[1]` transfer id.
    pub transfer_id: &'a str,
    /// `ARGV[2]` units the home shard needs.
    pub need: u64,
    /// `ARGV[3]` the home shard.
    pub home: usize,
    /// `ARGV[4]` now (ms).
    pub now_ms: i64,
}

impl ScriptCall for LendArgs<'_> {
    fn script() -> &'static Script {
        &LEND
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [
            self.donor.meta.as_str(),
            &self.donor.stock,
            &self.donor.lent,
        ]
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.transfer_id, self.need, self.home, self.now_ms)
    }
}

/// `receive.lua`: the home shard takes the units lent to it, once.
pub(in super::super) struct ReceiveArgs<'a> {
    /// The home shard: `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` received.
    pub home: &'a SaleKeys,
    /// `ARGV[1]` transfer id.
    pub transfer_id: &'a str,
    /// `ARGV[2]` units, as `lend.lua` answered them (passed on unparsed).
    pub units: &'a str,
}

impl ScriptCall for ReceiveArgs<'_> {
    fn script() -> &'static Script {
        &RECEIVE
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [
            self.home.meta.as_str(),
            &self.home.stock,
            &self.home.received,
        ]
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.transfer_id, self.units)
    }
}

/// `survivor.lua`: what a rebuild of lost shards needs of a shard that kept
/// its keys (stock, expired and queued reservations, transfers), in one
/// atomic read. No ARGV.
pub(in super::super) struct SurvivorArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` resv, `KEYS[4]` lent,
    /// `KEYS[5]` received: a shard's keys.
    pub keys: &'a SaleKeys,
}

impl ScriptCall for SurvivorArgs<'_> {
    fn script() -> &'static Script {
        &SURVIVOR
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        [k.meta.as_str(), &k.stock, &k.resv, &k.lent, &k.received]
    }

    fn argv(&self) -> impl ToRedisArgs {
        NO_ARGV
    }
}

/// `snapshot_head.lua`: a key group's stock, total, version, epoch and hash
/// lengths. No ARGV.
pub(in super::super) struct SnapshotHeadArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock, `KEYS[3]` resv; for a shard also `KEYS[4]`
    /// lent, `KEYS[5]` received.
    pub keys: &'a SaleKeys,
    /// A shard of a sharded sale: its transfers are counted too.
    pub sharded: bool,
}

impl ScriptCall for SnapshotHeadArgs<'_> {
    fn script() -> &'static Script {
        &SNAPSHOT_HEAD
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        let k = self.keys;
        let mut names = vec![k.meta.as_str(), &k.stock, &k.resv];
        if self.sharded {
            names.extend([k.lent.as_str(), &k.received]);
        }
        names
    }

    fn argv(&self) -> impl ToRedisArgs {
        NO_ARGV
    }
}

/// `holding.lua`: one buyer's count and live reservations at one instant.
pub(in super::super) struct HoldingArgs<'a> {
    /// The buyer's home key group: `KEYS[1]` buyers, `KEYS[2]` userorders,
    /// `KEYS[3]` resv.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` userId.
    pub user_id: &'a str,
}

impl ScriptCall for HoldingArgs<'_> {
    fn script() -> &'static Script {
        &HOLDING
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [
            self.keys.buyers.as_str(),
            &self.keys.user_orders,
            &self.keys.resv,
        ]
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.user_id
    }
}

/// `set_buyer.lua`: a buyer's count set by compare and set.
pub(in super::super) struct SetBuyerArgs<'a> {
    /// The buyer's home key group: `KEYS[1]` buyers, `KEYS[2]` meta.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` userId.
    pub user_id: &'a str,
    /// `ARGV[2]` the units they provably hold.
    pub units: i64,
    /// `ARGV[3]` the count reconcile read.
    pub read: i64,
}

impl ScriptCall for SetBuyerArgs<'_> {
    fn script() -> &'static Script {
        &SET_BUYER
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.buyers.as_str(), &self.keys.meta]
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.user_id, self.units, self.read)
    }
}

/// `set_status.lua`: an operator's pause or resume on one key group.
pub(in super::super) struct SetStatusArgs<'a> {
    /// `KEYS[1]` meta.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` LIVE, PAUSED, or OPEN (LIVE only where a load closed it).
    pub status: &'a str,
}

impl ScriptCall for SetStatusArgs<'_> {
    fn script() -> &'static Script {
        &SET_STATUS
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.meta.as_str()]
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.status
    }
}

/// `set_stock.lua`: a sale's stock set by compare and set.
pub(in super::super) struct SetStockArgs<'a> {
    /// `KEYS[1]` meta, `KEYS[2]` stock.
    pub keys: &'a SaleKeys,
    /// `ARGV[1]` the stock reconcile read.
    pub read: i64,
    /// `ARGV[2]` the stock the ledger proves.
    pub units: i64,
    /// `ARGV[3]` the ledger position (`returnSeq`) that figure is at.
    pub ledger_seq: u64,
}

impl ScriptCall for SetStockArgs<'_> {
    fn script() -> &'static Script {
        &SET_STOCK
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.keys.meta.as_str(), &self.keys.stock]
    }

    fn argv(&self) -> impl ToRedisArgs {
        (self.read, self.units, self.ledger_seq)
    }
}

/// `unlock.lua`: releases a lock only if its value is still our token.
pub(in super::super) struct UnlockArgs<'a> {
    /// `KEYS[1]` the lock's key.
    pub lock: &'a str,
    /// `ARGV[1]` the owner's token.
    pub token: &'a str,
}

impl ScriptCall for UnlockArgs<'_> {
    fn script() -> &'static Script {
        &UNLOCK
    }

    fn keys(&self) -> impl AsRef<[&str]> {
        [self.lock]
    }

    fn argv(&self) -> impl ToRedisArgs {
        self.token
    }
}

/// A decided order's reservation as the purchase script stores it in
/// `resv`.
pub(crate) fn reservation_json(order: &crate::domain::ledger::DecidedOrder) -> String {
    serde_json::json!({
        "userId": order.user_id,
        "quantity": order.quantity,
        "atMs": order.at_ms.to_string(),
        "state": order.state,
    })
    .to_string()
}
