//! Each arguments struct against its Lua file: the EVALSHA it builds names
//! the right script and sends its KEYS and ARGV in the file's order. The
//! keys are also checked against the `KEYS[i] name` the file's header gives.

use super::super::keys::{SaleKeys, StagedKeys};
use super::super::rebuild::{DecidedOrder, StagedOrder};
use super::*;
use crate::domain::SaleId;

fn sale_id() -> SaleId {
    SaleId::parse("s").unwrap()
}

/// What an EVALSHA of `call` sends: its key names and its ARGV.
fn sent<C: ScriptCall>(call: &C) -> (Vec<String>, Vec<String>) {
    let cmd = call.command();
    let parts: Vec<String> = cmd
        .args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
            _ => panic!("a script call has plain arguments only"),
        })
        .collect();
    assert_eq!(parts[0], "EVALSHA");
    assert_eq!(parts[1], C::script().get_hash());
    let n: usize = parts[2].parse().unwrap();
    (parts[3..3 + n].to_vec(), parts[3 + n..].to_vec())
}

/// The `KEYS[i] name` pairs of a Lua file's header comment: those that open
/// a line or follow two spaces (not a mention in a sentence).
fn header_keys(lua: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for line in lua.lines().take_while(|l| l.starts_with("--")) {
        let text = &line[2..];
        for (at, _) in text.match_indices("KEYS[") {
            let before = &text[..at];
            if !(before.trim().is_empty() || before.ends_with("  ")) {
                continue;
            }
            let rest = &text[at + 5..];
            let Some((index, rest)) = rest.split_once("] ") else {
                continue;
            };
            let Ok(index) = index.parse::<usize>() else {
                continue;
            };
            let name = rest.split_whitespace().next().unwrap_or("");
            let name = name.rsplit(':').next().unwrap_or(name);
            out.push((index, name.to_owned()));
        }
    }
    out
}

/// The highest `ARGV[n]` (a single index) the header names.
fn header_argc(lua: &str) -> usize {
    lua.lines()
        .take_while(|l| l.starts_with("--"))
        .flat_map(|l| l.match_indices("ARGV[").map(move |(at, _)| &l[at + 5..]))
        .filter_map(|rest| rest.split_once(']')?.0.parse::<usize>().ok())
        .max()
        .unwrap_or(0)
}

/// `call` sends `keys` (each named by the segment of its key name after
/// the last `:` but one, as in `sale:{S}:lock:<name>`, or the last) and
/// `argv`, and the header of `lua` agrees with those key names; with
/// `fixed`, the header's highest `ARGV[n]` is the count sent.
fn check<C: ScriptCall>(call: &C, lua: &str, keys: &[&str], argv: &[&str], fixed: bool) {
    let (sent_keys, sent_argv) = sent(call);
    assert_eq!(sent_keys.len(), keys.len(), "keys sent: {sent_keys:?}");
    for (key, name) in sent_keys.iter().zip(keys) {
        assert!(
            key.ends_with(&format!(":{name}")) || key.contains(&format!(":{name}:")),
            "{key} is not {name}"
        );
    }
    for (index, name) in header_keys(lua) {
        if let Some(key) = keys.get(index - 1) {
            assert_eq!(*key, name, "KEYS[{index}] in the header");
        }
    }
    assert_eq!(sent_argv, argv);
    if fixed {
        assert_eq!(header_argc(lua), argv.len(), "the header's ARGV count");
    }
}

#[test]
fn the_header_parser_reads_key_names_not_sentences() {
    let lua = "-- KEYS[1] sale:{S:j}:meta  KEYS[2] stock\n--   KEYS[3] resv (x)\n-- Without KEYS[7] there is none.\nlocal x = KEYS[9]\n";
    assert_eq!(
        header_keys(lua),
        vec![
            (1, "meta".to_owned()),
            (2, "stock".to_owned()),
            (3, "resv".to_owned())
        ]
    );
}

#[test]
fn draw_order_and_chunk() {
    let keys = SaleKeys::new(&sale_id());
    let order = ["b".to_owned(), "a".to_owned()];
    check(
        &DrawOrderArgs {
            keys: &keys,
            order: &order,
        },
        include_str!("../../../../lua/draw_order.lua"),
        &["meta", "tickets", "drawq"],
        &["b", "a"],
        false,
    );
    check(
        &DrawChunkArgs {
            keys: &keys,
            pos: 4,
            size: 100,
            sale_id: "s",
        },
        include_str!("../../../../lua/draw_chunk.lua"),
        &[
            "meta",
            "stock",
            "buyers",
            "resv",
            "userorders",
            "tickets",
            "drawq",
        ],
        &["4", "100", "s"],
        true,
    );
}

#[test]
fn purchase() {
    let keys = SaleKeys::shard(&sale_id(), 3);
    let limits = [
        "10".to_owned(),
        "20".to_owned(),
        "30".to_owned(),
        "40".to_owned(),
    ];
    let call = PurchaseArgs {
        keys: &keys,
        sale_id: "s",
        user_id: "u",
        quantity: "2",
        idempotency_key: "idem",
        gate_nonce: "nonce",
        source_ip: "10.0.0.1",
        limits: &limits,
        request_id: "req",
        gate_issued_ms: "1000",
    };
    check(
        &call,
        include_str!("../../../../lua/purchase.lua"),
        &[
            "meta",
            "stock",
            "buyers",
            "resv",
            "userorders",
            "gateused",
            "ratelimit",
            "keyed",
            "tickets",
        ],
        &[
            "s", "u", "2", "idem", "nonce", "10.0.0.1", "10", "20", "30", "40", "-s3", "req",
            "1000",
        ],
        true,
    );
}

const HOLDING_KEYS: [&str; 5] = ["meta", "stock", "buyers", "resv", "userorders"];

#[test]
fn release_resolve_and_return_units() {
    let keys = SaleKeys::new(&sale_id());
    check(
        &ReleaseArgs {
            keys: &keys,
            order_id: "o",
        },
        include_str!("../../../../lua/release.lua"),
        &HOLDING_KEYS,
        &["o"],
        true,
    );
    check(
        &ResolveArgs {
            keys: &keys,
            order_id: "o",
            mode: "WRITTEN",
            offered: 0,
        },
        include_str!("../../../../lua/resolve.lua"),
        &HOLDING_KEYS,
        &["o", "WRITTEN", "0"],
        true,
    );
    let lua = include_str!("../../../../lua/return_units.lua");
    let mut call = ReturnUnitsArgs {
        keys: &keys,
        order_id: "o",
        user_id: "u",
        quantity: 3,
        now_ms: 1_000,
        return_seq: Some(7),
        to_stock: 3,
    };
    check(
        &call,
        lua,
        &HOLDING_KEYS,
        &["o", "u", "3", "1000", "7", "3"],
        true,
    );
    call.return_seq = None;
    call.to_stock = 1;
    check(
        &call,
        lua,
        &HOLDING_KEYS,
        &["o", "u", "3", "1000", "", "1"],
        true,
    );
    check(
        &HoldOfferArgs {
            keys: &keys,
            order_id: "w",
            user_id: "u",
            quantity: 1,
            at_ms: 1_000,
            return_seq: Some(4),
            mode: "HOLD",
        },
        include_str!("../../../../lua/hold_offer.lua"),
        &HOLDING_KEYS,
        &["w", "u", "1", "1000", "4", "HOLD"],
        true,
    );
    check(
        &HoldOfferArgs {
            keys: &keys,
            order_id: "w",
            user_id: "u",
            quantity: 1,
            at_ms: 1_000,
            return_seq: None,
            mode: "CLAIM",
        },
        include_str!("../../../../lua/hold_offer.lua"),
        &HOLDING_KEYS,
        &["w", "u", "1", "1000", "", "CLAIM"],
        true,
    );
}

#[test]
fn the_waitlist_admission() {
    let keys = SaleKeys::new(&sale_id());
    let limits = [
        "1".to_owned(),
        "2".to_owned(),
        "3".to_owned(),
        "4".to_owned(),
    ];
    check(
        &WaitlistAdmitArgs {
            keys: &keys,
            user_id: "u",
            gate_nonce: "n",
            gate_issued_ms: "9",
            source_ip: "1.2.3.4",
            limits: &limits,
        },
        include_str!("../../../../lua/waitlist_admit.lua"),
        &[
            "meta",
            "stock",
            "buyers",
            "userorders",
            "gateused",
            "ratelimit",
            "tickets",
        ],
        &["u", "n", "9", "1.2.3.4", "1", "2", "3", "4"],
        true,
    );
}

#[test]
fn the_reads_of_the_orders_api() {
    let keys = SaleKeys::new(&sale_id());
    check(
        &PeekArgs {
            keys: &keys,
            order_id: "",
        },
        include_str!("../../../../lua/peek.lua"),
        &["meta", "stock", "resv"],
        &[""],
        true,
    );
    check(
        &BuyerOrdersArgs {
            keys: &keys,
            user_id: "u",
        },
        include_str!("../../../../lua/buyer_orders.lua"),
        &["userorders", "resv"],
        &["u"],
        true,
    );
    check(
        &KeyedFilterArgs { keys: &keys },
        include_str!("../../../../lua/keyed_filter.lua"),
        &["keyed", "resv"],
        &[],
        true,
    );
    check(
        &OutcomesArgs {
            keys: &keys,
            funnel: "sale:{s}:funnel",
            bucket_ms: 20_000,
            keep: 360,
            counts: &[("OK", 3), ("SOLD_OUT", 12)],
        },
        include_str!("../../../../lua/outcomes.lua"),
        &["meta", "outcomes", "funnel"],
        &["20000", "360", "OK", "3", "SOLD_OUT", "12"],
        false,
    );
}

fn sale(shards: u32, gate: bool, paused: bool) -> Sale {
    Sale {
        payment_window_seconds: 60,
        shards,
        gate,
        paused,
        ..Sale::plain(sale_id(), "n", 100, 3, 1, 2)
    }
}

#[test]
fn load_sale_whole_directory_and_shard() {
    let lua = include_str!("../../../../lua/load_sale.lua");
    let whole = sale(1, true, false);
    let meta = SaleMeta {
        sale: &whole,
        version: 5,
        expire_at_ms: 9,
    };
    let head = ["100", "1", "2", "3", "1", "LIVE", "5", "9", "1"];
    let group = [
        "meta",
        "stock",
        "buyers",
        "resv",
        "userorders",
        "gateused",
        "keyed",
    ];
    let keys = SaleKeys::new(&sale_id());
    let call = LoadSaleArgs {
        refresh: None,
        keys: &keys,
        meta: &meta,
        part: LoadPart::Whole,
    };
    check(
        &call,
        lua,
        &[&group[..], &["outcomes"]].concat(),
        &head,
        false,
    );

    let sharded = sale(4, false, true);
    let meta = SaleMeta {
        sale: &sharded,
        version: 5,
        expire_at_ms: 9,
    };
    let head = ["100", "1", "2", "3", "4", "PAUSED", "5", "9", "0"];
    // A directory sends meta and outcomes only (the header says so in
    // words; its KEYS[2] is not the stock here).
    let call = LoadSaleArgs {
        refresh: None,
        keys: &keys,
        meta: &meta,
        part: LoadPart::Directory { homes: "h" },
    };
    let (names, argv) = sent(&call);
    assert_eq!(names, [keys.meta.as_str(), &keys.outcomes]);
    assert_eq!(argv, [&head[..], &["0", "1", "h"]].concat());
    let shard = SaleKeys::shard(&sale_id(), 2);
    let call = LoadSaleArgs {
        refresh: None,
        keys: &shard,
        meta: &meta,
        part: LoadPart::Shard { stock: 25 },
    };
    check(
        &call,
        lua,
        &group,
        &[&head[..], &["25", "0"]].concat(),
        false,
    );
}

#[test]
fn rebuild_directory_and_group() {
    let lua = include_str!("../../../../lua/rebuild.lua");
    let sharded = sale(2, true, false);
    let meta = SaleMeta {
        sale: &sharded,
        version: 5,
        expire_at_ms: 9,
    };
    let head = ["100", "1", "2", "3", "2", "LIVE", "5", "9"];
    let keys = SaleKeys::new(&sale_id());
    let call = RebuildArgs {
        keys: &keys,
        meta: &meta,
        part: RebuildPart::Directory { homes: "h" },
    };
    check(
        &call,
        lua,
        &["meta", "stock", "buyers", "userorders"],
        &[&head[..], &["0", "1", "1", "h"]].concat(),
        false,
    );
    let shard = SaleKeys::shard(&sale_id(), 1);
    let staged = StagedKeys::of(&shard, "t1");
    let call = RebuildArgs {
        keys: &shard,
        meta: &meta,
        part: RebuildPart::Group {
            stock: 40,
            ledger_seq: 8,
            staged: &staged,
        },
    };
    let group = ["meta", "stock", "buyers", "userorders", "resv", "keyed"];
    check(
        &call,
        lua,
        &[&group[..], &["buyers", "userorders", "resv", "keyed"]].concat(),
        &[&head[..], &["40", "1", "", "8"]].concat(),
        true,
    );
    let (names, _) = sent(&call);
    assert!(
        names[6..]
            .iter()
            .all(|k| k.starts_with("sale:{s:1}:") && k.ends_with(":rebuild:t1")),
        "staged under the shard's tag and the rebuild's token: {names:?}"
    );
}

#[test]
fn rebuild_stage() {
    let shard = SaleKeys::shard(&sale_id(), 1);
    let staged = StagedKeys::of(&shard, "t1");
    let held = DecidedOrder {
        order_id: "o1".into(),
        user_id: "u".into(),
        quantity: 2,
        at_ms: 4,
        state: "WRITTEN",
    };
    let expired = DecidedOrder {
        order_id: "o2".into(),
        state: "EXPIRED",
        ..held.clone()
    };
    check(
        &RebuildStageArgs {
            staged: &staged,
            ttl_ms: 60_000,
            total: 100,
            orders: vec![
                StagedOrder {
                    order: &held,
                    reservation: true,
                    held: true,
                },
                StagedOrder {
                    order: &expired,
                    reservation: true,
                    held: false,
                },
                StagedOrder {
                    order: &held,
                    reservation: false,
                    held: false,
                },
            ],
        },
        include_str!("../../../../lua/rebuild_stage.lua"),
        &["buyers", "userorders", "resv", "keyed"],
        &[
            "60000",
            "100",
            "o1",
            &super::upkeep::reservation_json(&held),
            "u",
            "2",
            "o2",
            &super::upkeep::reservation_json(&expired),
            "u",
            "0",
            "o1",
            "",
            "u",
            "0",
        ],
        false,
    );
}

#[test]
fn lend_and_receive() {
    let donor = SaleKeys::shard(&sale_id(), 1);
    check(
        &LendArgs {
            donor: &donor,
            transfer_id: "t1",
            need: 5,
            home: 0,
            now_ms: 99,
        },
        include_str!("../../../../lua/lend.lua"),
        &["meta", "stock", "lent"],
        &["t1", "5", "0", "99"],
        true,
    );
    let home = SaleKeys::shard(&sale_id(), 0);
    check(
        &ReceiveArgs {
            home: &home,
            transfer_id: "t1",
            units: "5",
        },
        include_str!("../../../../lua/receive.lua"),
        &["meta", "stock", "received"],
        &["t1", "5"],
        true,
    );
}

#[test]
fn a_survivors_read() {
    let keys = SaleKeys::shard(&sale_id(), 0);
    check(
        &SurvivorArgs { keys: &keys },
        include_str!("../../../../lua/survivor.lua"),
        &["meta", "stock", "resv", "lent", "received"],
        &[],
        true,
    );
}

#[test]
fn reconcile_reads() {
    let keys = SaleKeys::shard(&sale_id(), 0);
    for sharded in [false, true] {
        let extra: &[&str] = if sharded { &["lent", "received"] } else { &[] };
        check(
            &SnapshotHeadArgs {
                keys: &keys,
                sharded,
            },
            include_str!("../../../../lua/snapshot_head.lua"),
            &[&["meta", "stock", "resv"][..], extra].concat(),
            &[],
            true,
        );
    }
    check(
        &HoldingArgs {
            keys: &keys,
            user_id: "u",
        },
        include_str!("../../../../lua/holding.lua"),
        &["buyers", "userorders", "resv"],
        &["u"],
        true,
    );
}

#[test]
fn repairs_pause_and_locks() {
    let keys = SaleKeys::new(&sale_id());
    check(
        &SetBuyerArgs {
            keys: &keys,
            user_id: "u",
            units: 2,
            read: 3,
        },
        include_str!("../../../../lua/set_buyer.lua"),
        &["buyers", "meta"],
        &["u", "2", "3"],
        true,
    );
    check(
        &SetStatusArgs {
            keys: &keys,
            status: "PAUSED",
        },
        include_str!("../../../../lua/set_status.lua"),
        &["meta"],
        &["PAUSED"],
        true,
    );
    check(
        &SetStockArgs {
            keys: &keys,
            read: 7,
            units: 6,
            ledger_seq: 3,
        },
        include_str!("../../../../lua/set_stock.lua"),
        &["meta", "stock"],
        &["7", "6", "3"],
        true,
    );
    check(
        &UnlockArgs {
            lock: "sale:{s}:lock:reconcile",
            token: "tok",
        },
        include_str!("../../../../lua/unlock.lua"),
        &["lock"],
        &["tok"],
        true,
    );
}
