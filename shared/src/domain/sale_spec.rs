//! The body of `PUT /admin/sales/{saleId}`, parsed field by field so every
//! refusal names the field that is wrong, and the rule for changing a sale
//! that exists ([`edit_refusal`]).

use crate::clock;
use crate::domain::draw::DrawSeed;
use crate::domain::{Admission, Quantity, Sale, SaleId};

/// Bounds of the admin contract.
pub const MAX_TOTAL_STOCK: u64 = 10_000_000;
pub const MAX_SHARDS: u64 = 64;
pub const PAYMENT_WINDOW_SECS: std::ops::RangeInclusive<u64> = 60..=86_400;
pub const DEFAULT_PAYMENT_WINDOW_SECS: u32 = 900;

/// The least time a lottery sale runs after its window closes: its draw.
pub const DRAW_TIME_MS: i64 = 60_000;

/// Bounds of a lottery window (`admission.window`), seconds after the start.
pub const ADMISSION_WINDOW_SECS: std::ops::RangeInclusive<u64> = 1..=10;

const FIELDS: [&str; 11] = [
    "name",
    "totalStock",
    "startAt",
    "endAt",
    "perUserLimit",
    "paymentWindowSeconds",
    "shards",
    "gate",
    "price",
    "powBits",
    "admission",
];

/// Parses and validates a sale definition. The message of the error names
/// the field and what it must be.
pub fn parse_sale(sale_id: &SaleId, body: &[u8]) -> Result<Sale, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "body is not valid JSON".to_owned())?;
    let obj = value
        .as_object()
        .ok_or_else(|| "body must be a JSON object".to_owned())?;
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?}; allowed: {}",
            FIELDS.join(", ")
        ));
    }
    let int = |name: &str, range: std::ops::RangeInclusive<u64>, default: Option<u64>| match obj
        .get(name)
    {
        None | Some(serde_json::Value::Null) => {
            default.ok_or_else(|| format!("{name} is required"))
        }
        Some(v) => v.as_u64().filter(|n| range.contains(n)).ok_or_else(|| {
            format!(
                "{name} must be an integer from {} to {}",
                range.start(),
                range.end()
            )
        }),
    };
    let time = |name: &str| match obj.get(name).and_then(|v| v.as_str()) {
        Some(raw) => clock::parse_rfc3339_ms(raw)
            .ok_or_else(|| format!("{name} must be an RFC 3339 time, e.g. 2026-12-01T12:00:00Z")),
        None => Err(format!("{name} is required (RFC 3339)")),
    };
    let name = match obj.get("name").and_then(|v| v.as_str()).map(str::trim) {
        Some(n) if !n.is_empty() && n.chars().count() <= 200 => n.to_owned(),
        _ => return Err("name must be a non-empty string of at most 200 characters".into()),
    };
    let total_stock = int("totalStock", 1..=MAX_TOTAL_STOCK, None)?;
    let start_ms = time("startAt")?;
    let end_ms = time("endAt")?;
    if start_ms >= end_ms {
        return Err("startAt must be before endAt".into());
    }
    let per_user_limit = int("perUserLimit", 1..=u64::from(Quantity::MAX), None)?;
    let window = int(
        "paymentWindowSeconds",
        PAYMENT_WINDOW_SECS,
        Some(u64::from(DEFAULT_PAYMENT_WINDOW_SECS)),
    )?;
    let shards = int("shards", 1..=MAX_SHARDS, Some(1))?;
    let gate = match obj.get("gate") {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(_) => return Err("gate must be true or false".into()),
    };
    let price = crate::domain::money::parse_price(obj.get("price"))?;
    // `powBits` implies the gate: a sale that sets it without `gate` is
    // gated; one that says `gate: false` and sets it is a contradiction.
    let bits = crate::domain::pow::POW_BITS;
    let pow_bits = match obj.get("powBits") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .filter(|n| bits.contains(n))
                .ok_or_else(|| {
                    format!(
                        "powBits must be an integer from {} to {}, or null for the arithmetic question",
                        bits.start(),
                        bits.end()
                    )
                })?,
        ),
    };
    if pow_bits.is_some() && matches!(obj.get("gate"), Some(serde_json::Value::Bool(false))) {
        return Err("powBits needs the gate: drop gate: false (powBits turns the gate on)".into());
    }
    let gate = gate || pow_bits.is_some();
    let admission = parse_admission(obj.get("admission"), shards)?;
    if let Some(window) = &admission {
        // The draw runs when the window closes, and nothing is decided
        // from the end on: a sale that ends as its window closes, or just
        // after, never draws (every ticket would read ENDED).
        let closes = start_ms + i64::from(window.window_secs) * 1_000;
        if end_ms < closes + DRAW_TIME_MS {
            return Err(format!(
                "endAt must be at least {} s after the lottery window closes (startAt + admission.window = {}), so the draw can run",
                DRAW_TIME_MS / 1_000,
                clock::rfc3339_ms(closes)
            ));
        }
    }
    // The ranges above are all within u32.
    let small = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(Sale {
        sale_id: sale_id.clone(),
        name,
        total_stock: small(total_stock),
        start_ms,
        end_ms,
        per_user_limit: small(per_user_limit),
        payment_window_seconds: small(window),
        shards: small(shards),
        gate,
        // Not part of the definition: pause and resume have their own
        // routes, and a PUT never changes it.
        paused: false,
        price,
        pow_bits,
        admission,
    })
}

/// `admission`: absent or null for first come, first served; else
/// `{"window": W}`. A fresh seed comes with it; the catalog keeps the one
/// already recorded when the sale has one ([`keep_seed`]).
fn parse_admission(
    value: Option<&serde_json::Value>,
    shards: u64,
) -> Result<Option<Admission>, String> {
    let obj = match value {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::Object(obj)) => obj,
        Some(_) => return Err("admission must be an object {\"window\": seconds} or null".into()),
    };
    if let Some(unknown) = obj.keys().find(|k| k.as_str() != "window") {
        return Err(format!(
            "unknown field admission.{unknown}; allowed: admission.window"
        ));
    }
    let window = obj
        .get("window")
        .and_then(serde_json::Value::as_u64)
        .filter(|w| ADMISSION_WINDOW_SECS.contains(w))
        .ok_or_else(|| {
            format!(
                "admission.window must be an integer from {} to {} (seconds after the start)",
                ADMISSION_WINDOW_SECS.start(),
                ADMISSION_WINDOW_SECS.end()
            )
        })?;
    // The draw decides tickets against one stock and one buyer count;
    // across shards it would have to borrow per ticket. Not yet.
    if shards > 1 {
        return Err("admission.window is for sales of one shard (shards: 1) only".into());
    }
    let seed = DrawSeed::generate().map_err(|e| e.to_string())?;
    Ok(Some(Admission {
        window_secs: u32::try_from(window).unwrap_or(u32::MAX),
        seed,
    }))
}

/// An edit of a sale that has a seed keeps it: the seed's commitment may
/// have been shown, and a draw must be replayable from the recorded seed.
pub fn keep_seed(current: &Sale, edit: &mut Sale) {
    if let (Some(old), Some(new)) = (&current.admission, &mut edit.admission) {
        new.seed = old.seed.clone();
    }
}

/// Why an edit of an existing sale is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditRefusal {
    /// The sale has ended: it is never sold again, so nothing of it
    /// changes (an end moved later would reopen it).
    Ended,
    /// The sale has started: its stock, shards, start, price and
    /// admission can no longer change.
    Started,
    /// The sale is loaded into Redis and the edit cannot follow it there
    /// exactly; why, for the operator.
    Loaded(&'static str),
}

/// Whether `edit` may replace `current` at `now_ms`; `loaded`: prewarm has
/// loaded the sale into Redis. Stock, shards, start and price of a sale that
/// has started cannot change (units may be held against them, buyers were
/// shown the price and orders record their amount from it; and a start
/// moved later first would dodge the rule). Once loaded into Redis, the shard
/// count is fixed (buyers' homes are), and so is a sharded sale's stock
/// (split across the shards); a one-shard sale's stock may still change
/// before the start: prewarm moves Redis's stock by the same amount.
pub fn edit_refusal(current: &Sale, edit: &Sale, now_ms: i64, loaded: bool) -> Option<EditRefusal> {
    if now_ms >= current.end_ms {
        return Some(EditRefusal::Ended);
    }
    let started = now_ms >= current.start_ms;
    let stock_changed = current.total_stock != edit.total_stock;
    let shards_changed = current.shards != edit.shards;
    // The proof of work's difficulty is frozen too: challenges served
    // from the start were computed with it.
    // And whether there is a gate at all: a pass was, or was not, needed
    // from the start.
    let price_changed = current.price != edit.price
        || current.pow_bits != edit.pow_bits
        || current.gate != edit.gate;
    // The window (and so its seed) is part of how buyers were admitted.
    let admission_changed = current.admission != edit.admission;
    // The per-user limit too: Redis decides a purchase under the limit it
    // has at that moment, the order-writer writes it under the one it read
    // (cached), and reconcile judges holdings by today's: changed mid-sale,
    // they disagree, and an accepted order would be written REJECTED.
    let limit_changed = current.per_user_limit != edit.per_user_limit;
    if started
        && (stock_changed
            || shards_changed
            || price_changed
            || admission_changed
            || limit_changed
            || current.start_ms != edit.start_ms)
    {
        Some(EditRefusal::Started)
    } else if loaded && shards_changed {
        Some(EditRefusal::Loaded(
            "the sale is loaded into Redis: its shard count is fixed (buyers' home shards are)",
        ))
    } else if loaded && stock_changed && current.shards > 1 {
        Some(EditRefusal::Loaded(
            "the sale is loaded into Redis: a sharded sale's stock is split across its shards and can no longer change",
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An ended sale is never sold again: pause, resume and end refuse it,
    // and an edit moving its end later reopened it (the nemesis's seed
    // 271828 saw purchases accepted minutes after an end was answered).
    #[test]
    fn an_ended_sale_cannot_be_edited_open_again() {
        let current = parse(&good()).unwrap();
        let after = current.end_ms;
        let mut later = current.clone();
        later.end_ms += 3_600_000;
        assert_eq!(
            edit_refusal(&current, &later, after, true),
            Some(EditRefusal::Ended)
        );
        let mut renamed = current.clone();
        renamed.name = "renamed".into();
        assert_eq!(
            edit_refusal(&current, &renamed, after, true),
            Some(EditRefusal::Ended)
        );
        // Before its end, the end may still move.
        assert_eq!(edit_refusal(&current, &later, after - 1, true), None);
    }

    #[test]
    fn a_started_sale_keeps_its_stock_shards_and_start_but_not_its_name() {
        let current = parse(&good()).unwrap();
        let during = current.start_ms;
        let mut more = current.clone();
        more.total_stock += 1;
        assert_eq!(
            edit_refusal(&current, &more, during, false),
            Some(EditRefusal::Started)
        );
        let mut later = current.clone();
        later.start_ms += 1;
        assert_eq!(
            edit_refusal(&current, &later, during, false),
            Some(EditRefusal::Started)
        );
        let mut priced = current.clone();
        priced.price = crate::domain::money::parse_price(Some(
            &serde_json::json!({"amount": 500, "currency": "EUR"}),
        ))
        .unwrap();
        assert_eq!(
            edit_refusal(&current, &priced, during, false),
            Some(EditRefusal::Started)
        );
        assert_eq!(edit_refusal(&current, &priced, during - 1, true), None);
        let mut renamed = current.clone();
        renamed.name = "Desk lamp".into();
        assert_eq!(edit_refusal(&current, &renamed, during, true), None);
        assert_eq!(edit_refusal(&current, &more, during - 1, false), None);
        let mut sharded = current.clone();
        sharded.shards += 1;
        assert_eq!(
            edit_refusal(&current, &sharded, during, false),
            Some(EditRefusal::Started)
        );
        // The gate too: a pass was, or was not, needed from the start (an
        // edit used to turn it on or off mid-sale).
        let mut gated = current.clone();
        gated.gate = !gated.gate;
        assert_eq!(
            edit_refusal(&current, &gated, during, false),
            Some(EditRefusal::Started)
        );
        assert_eq!(edit_refusal(&current, &gated, during - 1, true), None);
        let mut limit = current.clone();
        limit.per_user_limit += 1;
        assert_eq!(
            edit_refusal(&current, &limit, during, true),
            Some(EditRefusal::Started)
        );
        assert_eq!(edit_refusal(&current, &limit, during - 1, true), None);
    }

    #[test]
    fn a_loaded_sale_keeps_its_shards_and_a_sharded_one_its_stock() {
        let current = parse(&good()).unwrap();
        let before = current.start_ms - 1;
        let mut sharded = current.clone();
        sharded.shards = 4;
        assert!(matches!(
            edit_refusal(&current, &sharded, before, true),
            Some(EditRefusal::Loaded(_))
        ));
        assert_eq!(edit_refusal(&current, &sharded, before, false), None);
        let mut more = current.clone();
        more.total_stock += 1;
        assert_eq!(
            edit_refusal(&current, &more, before, true),
            None,
            "one shard: prewarm follows"
        );
        let four = Sale {
            shards: 4,
            ..current.clone()
        };
        let four_more = Sale {
            total_stock: four.total_stock + 1,
            ..four.clone()
        };
        assert!(matches!(
            edit_refusal(&four, &four_more, before, true),
            Some(EditRefusal::Loaded(_))
        ));
    }

    fn good() -> serde_json::Value {
        serde_json::json!({
            "name": "Lamp", "totalStock": 100, "startAt": "2026-12-01T12:00:00Z",
            "endAt": "2026-12-01T13:00:00Z", "perUserLimit": 1,
            "paymentWindowSeconds": 900, "shards": 1, "gate": false
        })
    }

    fn parse(v: &serde_json::Value) -> Result<Sale, String> {
        parse_sale(&SaleId::parse("s").unwrap(), v.to_string().as_bytes())
    }

    #[test]
    fn a_lottery_window_is_one_to_ten_seconds_on_one_shard() {
        let mut v = good();
        v["admission"] = serde_json::json!({"window": 3});
        let sale = parse(&v).unwrap();
        let admission = sale.admission.clone().unwrap();
        assert_eq!(admission.window_secs, 3);
        assert_eq!(sale.window_end_ms(), Some(sale.start_ms + 3_000));
        assert_ne!(parse(&v).unwrap().admission.unwrap().seed, admission.seed);
        v["admission"] = serde_json::Value::Null;
        assert_eq!(parse(&v).unwrap().admission, None);
        for bad in [
            serde_json::json!({"window": 0}),
            serde_json::json!({"window": 11}),
            serde_json::json!({"window": 2.5}),
            serde_json::json!({"window": "3"}),
            serde_json::json!({}),
            serde_json::json!({"window": 3, "seed": "00"}),
            serde_json::json!(3),
        ] {
            v["admission"] = bad.clone();
            let err = parse(&v).unwrap_err();
            assert!(err.contains("admission"), "{bad}: {err}");
        }
        v["admission"] = serde_json::json!({"window": 3});
        v["shards"] = serde_json::json!(2);
        assert!(parse(&v).unwrap_err().contains("admission.window"));
    }

    #[test]
    fn the_window_and_its_seed_are_frozen_from_the_start() {
        let mut v = good();
        v["admission"] = serde_json::json!({"window": 3});
        let current = parse(&v).unwrap();
        let mut edit = parse(&v).unwrap();
        assert_ne!(edit, current, "a fresh seed");
        keep_seed(&current, &mut edit);
        assert_eq!(edit, current);
        let during = current.start_ms;
        assert_eq!(edit_refusal(&current, &edit, during, true), None);
        let mut longer = edit.clone();
        longer.admission.as_mut().unwrap().window_secs = 4;
        assert_eq!(
            edit_refusal(&current, &longer, during, true),
            Some(EditRefusal::Started)
        );
        assert_eq!(edit_refusal(&current, &longer, during - 1, true), None);
        let none = Sale {
            admission: None,
            ..current.clone()
        };
        assert_eq!(
            edit_refusal(&current, &none, during, true),
            Some(EditRefusal::Started)
        );
        assert_eq!(
            edit_refusal(&none, &current, during, true),
            Some(EditRefusal::Started)
        );
    }

    #[test]
    fn accepts_a_good_sale_with_defaults() {
        let mut v = good();
        v.as_object_mut().unwrap().remove("shards");
        v.as_object_mut().unwrap().remove("paymentWindowSeconds");
        let sale = parse(&v).unwrap();
        assert_eq!((sale.shards, sale.payment_window_seconds), (1, 900));
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: [(&str, serde_json::Value); 14] = [
            ("totalStock", serde_json::json!(0)),
            ("totalStock", serde_json::json!(-5)),
            ("totalStock", serde_json::json!("10")),
            ("perUserLimit", serde_json::json!(0)),
            ("shards", serde_json::json!(65)),
            ("shards", serde_json::json!(0)),
            ("paymentWindowSeconds", serde_json::json!(59)),
            ("paymentWindowSeconds", serde_json::json!(86_401)),
            ("startAt", serde_json::json!("tomorrow")),
            ("endAt", serde_json::json!("2026-12-01T11:00:00Z")),
            ("name", serde_json::json!("")),
            ("gate", serde_json::json!("yes")),
            (
                "price",
                serde_json::json!({"amount": -1, "currency": "EUR"}),
            ),
            (
                "price",
                serde_json::json!({"amount": 1, "currency": "euro"}),
            ),
        ];
        for (field, bad) in cases {
            let mut v = good();
            v[field] = bad.clone();
            let err = parse(&v).unwrap_err();
            let named = if field == "endAt" { "startAt" } else { field };
            assert!(err.contains(named), "{field}={bad}: {err}");
        }
        let mut v = good();
        v["color"] = serde_json::json!("red");
        assert!(parse(&v).unwrap_err().contains("color"));
    }

    #[test]
    fn pow_bits_turn_the_gate_on_within_bounds_and_freeze_at_the_start() {
        let mut v = good();
        v.as_object_mut().unwrap().remove("gate");
        v["powBits"] = serde_json::json!(18);
        let pow = parse(&v).unwrap();
        assert_eq!((pow.gate, pow.pow_bits), (true, Some(18)));
        v["gate"] = serde_json::json!(true);
        assert_eq!(parse(&v).unwrap(), pow);
        v["powBits"] = serde_json::Value::Null;
        assert_eq!(parse(&v).unwrap().pow_bits, None);
        for bad in [
            serde_json::json!(7),
            serde_json::json!(27),
            serde_json::json!(300),
            serde_json::json!(-1),
            serde_json::json!(12.5),
            serde_json::json!("18"),
            serde_json::json!(true),
        ] {
            v["powBits"] = bad.clone();
            let err = parse(&v).unwrap_err();
            assert!(
                err.contains("powBits") && err.contains("8 to 26"),
                "{bad}: {err}"
            );
        }
        v["powBits"] = serde_json::json!(8);
        v["gate"] = serde_json::json!(false);
        assert!(parse(&v).unwrap_err().contains("powBits"));
        v["powBits"] = serde_json::json!(26);
        v["gate"] = serde_json::json!(true);
        assert_eq!(parse(&v).unwrap().pow_bits, Some(26));

        let arithmetic = parse(&good()).unwrap();
        let during = arithmetic.start_ms;
        assert_eq!(
            edit_refusal(&arithmetic, &pow, during, false),
            Some(EditRefusal::Started)
        );
        let harder = Sale {
            pow_bits: Some(20),
            ..pow.clone()
        };
        assert_eq!(
            edit_refusal(&pow, &harder, during, false),
            Some(EditRefusal::Started)
        );
        assert_eq!(edit_refusal(&pow, &harder, during - 1, true), None);
        assert_eq!(edit_refusal(&pow, &arithmetic, during - 1, false), None);
    }
}
