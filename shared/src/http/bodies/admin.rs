//! The operator routes' answers as types (`/admin/*`, and the scheduled
//! prewarm's result, which answers with the same outcome per sale). The use
//! cases answer values (`Sale`, `PrewarmOutcome`, `DlqEntry`, ...); these
//! say how each reads on the wire.

use super::{MoneyBody, OrderView};
use crate::app::console::DlqEntry;
use crate::app::jobs::PrewarmOutcome;
use crate::clock;
use crate::domain::ledger::SaleCounters;
use crate::domain::payment::PaymentRecord;
use crate::domain::{Sale, SalePhase};
use crate::ports::DrawProgress;
use serde::Serialize;
use utoipa::ToSchema;

/// A lottery window as the operator defined it.
#[derive(Debug, Serialize, ToSchema)]
pub struct WindowBody {
    /// Seconds from `startAt` during which purchases are tickets.
    pub window: u32,
}

/// A sale's definition as the operator gave it (and as the audit trail
/// keeps it before a change).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaleDefinitionView {
    pub name: String,
    pub total_stock: u32,
    pub start_at: String,
    pub end_at: String,
    pub per_user_limit: u32,
    pub payment_window_seconds: u32,
    pub shards: u32,
    pub gate: bool,
    pub pow_bits: Option<u8>,
    pub paused: bool,
    pub price: Option<MoneyBody>,
    pub admission: Option<WindowBody>,
}

impl SaleDefinitionView {
    pub fn of(sale: &Sale) -> Self {
        Self {
            name: sale.name.clone(),
            total_stock: sale.total_stock,
            start_at: clock::rfc3339_ms(sale.start_ms),
            end_at: clock::rfc3339_ms(sale.end_ms),
            per_user_limit: sale.per_user_limit,
            payment_window_seconds: sale.payment_window_seconds,
            shards: sale.shards,
            gate: sale.gate,
            pow_bits: sale.pow_bits,
            paused: sale.paused,
            price: sale.price.as_ref().map(MoneyBody::of),
            admission: sale.admission.as_ref().map(|a| WindowBody {
                window: a.window_secs,
            }),
        }
    }
}

/// A sale as the admin routes answer it: its definition, `saleId`, the
/// operator's `status` and the table's counters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaleRecord {
    #[serde(flatten)]
    pub definition: SaleDefinitionView,
    pub sale_id: String,
    /// `NOT_STARTED`, `LIVE`, `PAUSED`, `ENDED`.
    pub status: &'static str,
    pub available: i64,
    pub sold: i64,
    /// A lottery sale: the SHA-256 of the draw's seed, fixed in advance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draw_seed_hash: Option<String>,
    /// A lottery sale once its window has closed: the seed itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draw_seed: Option<String>,
}

impl SaleRecord {
    /// `sale` with its counters, as it stands at `now`.
    pub fn of(sale: &Sale, counters: &SaleCounters, now: i64) -> Self {
        // The draw's seed is a secret until the window closes (whoever knew
        // it could pick user ids that draw first); before, its SHA-256
        // commits to it, so anyone can check afterwards that the draw used
        // the seed fixed in advance.
        let (draw_seed_hash, draw_seed) = match (&sale.admission, sale.window_end_ms()) {
            (Some(admission), Some(closes)) => (
                Some(admission.seed.commitment()),
                (now >= closes).then(|| admission.seed.to_hex()),
            ),
            _ => (None, None),
        };
        Self {
            definition: SaleDefinitionView::of(sale),
            sale_id: sale.sale_id.as_str().to_owned(),
            status: operator_status(sale, now),
            available: counters.available,
            sold: counters.sold,
            draw_seed_hash,
            draw_seed,
        }
    }
}

/// The operator's view of where a sale stands.
fn operator_status(sale: &Sale, now: i64) -> &'static str {
    match sale.phase_at(now) {
        SalePhase::Ended => "ENDED",
        _ if sale.paused => "PAUSED",
        SalePhase::NotStarted => "NOT_STARTED",
        SalePhase::Live => "LIVE",
    }
}

/// What prewarm did for one sale.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "outcome", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PrewarmBody {
    NotFound,
    NotDue,
    Ended,
    Refreshed,
    Loaded {
        stock: i64,
        buyers: usize,
    },
    WaitingForQueue {
        #[serde(rename = "inFlight")]
        in_flight: u64,
        dlq: u64,
    },
    Settling {
        until: String,
    },
    Busy,
}

impl PrewarmBody {
    pub fn of(outcome: &PrewarmOutcome) -> Self {
        match outcome {
            PrewarmOutcome::NotFound => Self::NotFound,
            PrewarmOutcome::NotDue => Self::NotDue,
            PrewarmOutcome::Ended => Self::Ended,
            PrewarmOutcome::Refreshed => Self::Refreshed,
            PrewarmOutcome::Loaded { stock, buyers } => Self::Loaded {
                stock: *stock,
                buyers: *buyers,
            },
            PrewarmOutcome::WaitingForQueue { in_flight, dlq } => Self::WaitingForQueue {
                in_flight: *in_flight,
                dlq: *dlq,
            },
            PrewarmOutcome::Settling { until_ms } => Self::Settling {
                until: clock::rfc3339_ms(*until_ms),
            },
            PrewarmOutcome::Busy => Self::Busy,
        }
    }
}

/// `PUT /admin/sales/{saleId}`, `pause`, `resume`, `end`: the sale as it now
/// stands, with what the action did to Redis.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaleChanged {
    #[serde(flatten)]
    pub record: SaleRecord,
    /// `PUT` and `end`: the prewarm run at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prewarm: Option<PrewarmBody>,
    /// `pause` and `resume`: the Redis groups that took the flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_groups: Option<u32>,
}

/// A lottery sale's draw as Redis holds it; every field `null` when Redis
/// cannot say or does not hold the sale yet.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct DrawBody {
    pub tickets: Option<u64>,
    pub decided: Option<u64>,
    /// `null` until the draw's order is recorded.
    pub total: Option<u64>,
    pub done: Option<bool>,
}

impl DrawBody {
    pub fn of(progress: Option<&DrawProgress>) -> Self {
        progress.map_or_else(Self::default, |p| Self {
            tickets: Some(p.tickets),
            decided: Some(p.decided),
            total: p.total,
            done: Some(p.done),
        })
    }
}

/// When a sale first sold out, and how long from its start; both `null`
/// before (or when unknown).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SellOutBody {
    pub sold_out_at: Option<String>,
    pub time_to_sell_out_ms: Option<i64>,
}

impl SellOutBody {
    pub fn of(sale: &Sale, sold_out_at_ms: Option<i64>) -> Self {
        Self {
            sold_out_at: sold_out_at_ms.map(clock::rfc3339_ms),
            time_to_sell_out_ms: sold_out_at_ms.map(|at| (at - sale.start_ms).max(0)),
        }
    }
}

/// `GET /admin/sales/{saleId}`: the sale, its sell-out time and its draw.
#[derive(Debug, Serialize, ToSchema)]
pub struct SaleDetail {
    #[serde(flatten)]
    pub record: SaleRecord,
    #[serde(flatten)]
    pub sell_out: SellOutBody,
    /// `null` for a sale without a lottery window.
    pub draw: Option<DrawBody>,
}

/// `GET /admin/sales`: every sale, newest start first.
#[derive(Debug, Serialize, ToSchema)]
pub struct SaleList {
    pub sales: Vec<SaleRecord>,
}

/// `POST /admin/sales/{saleId}/prewarm` answers one outcome; the scheduled
/// prewarm answers one per sale.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SalePrewarmed {
    pub sale_id: String,
    #[serde(flatten)]
    pub outcome: PrewarmBody,
}

/// The scheduled prewarm's result.
#[derive(Debug, Serialize, ToSchema)]
pub struct PrewarmRun {
    pub sales: Vec<SalePrewarmed>,
}

impl PrewarmRun {
    pub fn of(done: &[(crate::domain::SaleId, PrewarmOutcome)]) -> Self {
        Self {
            sales: done
                .iter()
                .map(|(sale_id, outcome)| SalePrewarmed {
                    sale_id: sale_id.as_str().to_owned(),
                    outcome: PrewarmBody::of(outcome),
                })
                .collect(),
        }
    }
}

/// What the audit trail keeps of a reconcile run.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReconcileSummary {
    pub violations: usize,
    pub repairs: usize,
}

/// One audit entry: who (the token's `sub`), what, when, before and after.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntry<'a> {
    pub at: String,
    pub actor: &'a str,
    /// `create`, `update`, `prewarm`, `reconcile`, `pause`, `resume`,
    /// `end`, `redrive`.
    pub action: &'a str,
    /// The definition before the action, where it changed one.
    #[schema(value_type = Option<Object>)]
    pub before: Option<serde_json::Value>,
    /// What the action answered.
    #[schema(value_type = Option<Object>)]
    pub after: Option<serde_json::Value>,
}

/// `GET /admin/sales/{saleId}/audit`: a page of the trail.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPageBody<'a> {
    #[schema(value_type = Vec<Object>)]
    pub entries: &'a [serde_json::Value],
    /// Entries numbered so far.
    pub total: u64,
    /// The `after` of the next page; `null` at the end.
    pub next: Option<u64>,
}

/// A payment owed back to its buyer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundBody {
    pub payment_id: String,
    pub order_id: String,
    pub user_id: String,
    pub amount: Option<MoneyBody>,
    pub at: String,
}

/// `GET /admin/sales/{saleId}/refunds`: oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Refunds {
    pub refunds: Vec<RefundBody>,
}

impl Refunds {
    pub fn of(records: &[PaymentRecord]) -> Self {
        Self {
            refunds: records
                .iter()
                .map(|r| RefundBody {
                    payment_id: r.payment_id.as_str().to_owned(),
                    order_id: r.order_id.as_str().to_owned(),
                    user_id: r.user_id.as_str().to_owned(),
                    amount: r.amount.as_ref().map(MoneyBody::of),
                    at: clock::rfc3339_ms(r.at_ms),
                })
                .collect(),
        }
    }
}

/// `GET /admin/sales/{saleId}/waitlist`: the sale's waitlist in figures.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitlistStats<'a> {
    pub sale_id: &'a str,
    /// Entries waiting now.
    pub waiting: u64,
    /// Entries offered a returned unit (each offer is an order).
    pub offered: u64,
    /// Offers paid.
    pub taken: u64,
    /// Offers that lapsed unpaid (their unit went on down the line).
    pub expired: u64,
    /// Entries whose buyer left.
    pub left: u64,
    /// Orders the sale has had back so far (expiries).
    pub returned: u64,
}

impl<'a> WaitlistStats<'a> {
    pub fn of(sale_id: &'a crate::domain::SaleId, stats: &crate::ports::LineStats) -> Self {
        Self {
            sale_id: sale_id.as_str(),
            waiting: stats.waiting,
            offered: stats.offered,
            taken: stats.taken,
            expired: stats.expired,
            left: stats.left,
            returned: stats.returned,
        }
    }
}

/// `GET /admin/sales/{saleId}/orders?buyer=`: that buyer's orders.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrderList<'a> {
    pub orders: Vec<OrderView<'a>>,
}

/// One message of the DLQ, left where it is.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DlqMessage {
    pub message_id: String,
    /// The order it carries; `null` (with `saleId`, `userId`, `quantity`)
    /// when the body is not an order message.
    pub order_id: Option<String>,
    pub sale_id: Option<String>,
    pub user_id: Option<String>,
    pub quantity: Option<u32>,
    pub receive_count: u32,
    /// Why the body is not an order message, or what the order-writer last
    /// failed with for the order.
    pub last_error: Option<String>,
}

impl DlqMessage {
    pub fn of(entry: &DlqEntry) -> Self {
        let order = entry.order.as_ref().ok();
        let last_error = match &entry.order {
            Err(why) => Some(format!("not an order message: {why}")),
            Ok(_) => entry.last_failure.as_ref().map(|f| f.error.clone()),
        };
        Self {
            message_id: entry.letter.message_id.clone(),
            order_id: order.map(|o| o.order_id.as_str().to_owned()),
            sale_id: order.map(|o| o.sale_id.as_str().to_owned()),
            user_id: order.map(|o| o.user_id.as_str().to_owned()),
            quantity: order.map(|o| o.quantity.get()),
            receive_count: entry.letter.receive_count,
            last_error,
        }
    }
}

/// `GET /admin/dlq`: at most `limit` messages.
#[derive(Debug, Serialize, ToSchema)]
pub struct DlqView {
    pub messages: Vec<DlqMessage>,
    pub limit: usize,
}

/// `POST /admin/dlq/redrive`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Redrive<'a> {
    pub redriven: usize,
    pub message_ids: Vec<&'a str>,
    /// Ids asked for that the DLQ did not hold.
    pub missing: &'a [String],
}

#[cfg(test)]
mod tests {
    //! Each body against the literal the routes wrote before they were
    //! types: the same JSON, field for field.
    use super::*;
    use crate::domain::draw::DrawSeed;
    use crate::domain::money::{Currency, Money};
    use crate::domain::{Admission, OrderId, PaymentId, SaleId, UserId};
    use serde_json::{Value, json};

    fn counters() -> SaleCounters {
        SaleCounters {
            available: 7,
            sold: 3,
            version: 4,
            return_seq: 0,
            loaded: true,
        }
    }

    fn lottery_sale() -> Sale {
        let mut sale = crate::adapters::memory::test_sale("s1", 10, 2).unwrap();
        sale.price = Some(Money {
            amount: 1999,
            currency: Currency::parse("EUR").unwrap(),
        });
        sale.pow_bits = Some(12);
        sale.gate = true;
        sale.admission = Some(Admission {
            window_secs: 30,
            seed: DrawSeed::parse_hex(&"ab".repeat(32)).unwrap(),
        });
        sale
    }

    /// The record as `answers.rs` wrote it with `json!`.
    fn old_record(sale: &Sale, counters: &SaleCounters, now: i64) -> Value {
        let mut body = json!({
            "name": sale.name,
            "totalStock": sale.total_stock,
            "startAt": clock::rfc3339_ms(sale.start_ms),
            "endAt": clock::rfc3339_ms(sale.end_ms),
            "perUserLimit": sale.per_user_limit,
            "paymentWindowSeconds": sale.payment_window_seconds,
            "shards": sale.shards,
            "gate": sale.gate,
            "powBits": sale.pow_bits,
            "paused": sale.paused,
            "price": sale.price.as_ref().map(|p| json!({"amount": p.amount, "currency": p.currency.as_str()})),
            "admission": sale.admission.as_ref().map(|a| json!({"window": a.window_secs})),
        });
        body["saleId"] = json!(sale.sale_id);
        body["status"] = json!(operator_status(sale, now));
        body["available"] = json!(counters.available);
        body["sold"] = json!(counters.sold);
        if let (Some(admission), Some(closes)) = (&sale.admission, sale.window_end_ms()) {
            body["drawSeedHash"] = json!(admission.seed.commitment());
            if now >= closes {
                body["drawSeed"] = json!(admission.seed.to_hex());
            }
        }
        body
    }

    fn text(body: impl Serialize) -> String {
        serde_json::to_value(body).unwrap().to_string()
    }

    #[test]
    fn a_sale_record_is_the_old_record_and_shows_the_seed_only_after_the_window() {
        let plain = crate::adapters::memory::test_sale("s1", 10, 2).unwrap();
        let lottery = lottery_sale();
        let closes = lottery.window_end_ms().unwrap();
        for (sale, now) in [
            (&plain, plain.start_ms - 1),
            (&plain, plain.end_ms),
            (&lottery, closes - 1),
            (&lottery, closes),
        ] {
            let record = SaleRecord::of(sale, &counters(), now);
            assert_eq!(
                text(&record),
                old_record(sale, &counters(), now).to_string()
            );
        }
        let before =
            serde_json::to_value(SaleRecord::of(&lottery, &counters(), closes - 1)).unwrap();
        assert!(before.get("drawSeed").is_none() && before["drawSeedHash"].is_string());
        let mut paused = plain.clone();
        paused.paused = true;
        let now = paused.start_ms + 1;
        assert_eq!(SaleRecord::of(&paused, &counters(), now).status, "PAUSED");
        assert_eq!(
            SaleRecord::of(&paused, &counters(), paused.end_ms).status,
            "ENDED"
        );
    }

    #[test]
    fn a_changed_sale_adds_what_the_action_did_and_nothing_else() {
        let sale = crate::adapters::memory::test_sale("s1", 10, 2).unwrap();
        let now = sale.start_ms;
        let mut old = old_record(&sale, &counters(), now);
        old["prewarm"] = json!({"outcome": "LOADED", "stock": 10, "buyers": 0});
        let changed = SaleChanged {
            record: SaleRecord::of(&sale, &counters(), now),
            prewarm: Some(PrewarmBody::of(&PrewarmOutcome::Loaded {
                stock: 10,
                buyers: 0,
            })),
            redis_groups: None,
        };
        assert_eq!(text(&changed), old.to_string());
        let mut old = old_record(&sale, &counters(), now);
        old["redisGroups"] = json!(2);
        let paused = SaleChanged {
            record: SaleRecord::of(&sale, &counters(), now),
            prewarm: None,
            redis_groups: Some(2),
        };
        assert_eq!(text(&paused), old.to_string());
    }

    #[test]
    fn every_prewarm_outcome_is_the_old_one() {
        let cases = [
            (PrewarmOutcome::NotFound, json!({"outcome": "NOT_FOUND"})),
            (PrewarmOutcome::NotDue, json!({"outcome": "NOT_DUE"})),
            (PrewarmOutcome::Ended, json!({"outcome": "ENDED"})),
            (PrewarmOutcome::Refreshed, json!({"outcome": "REFRESHED"})),
            (PrewarmOutcome::Busy, json!({"outcome": "BUSY"})),
            (
                PrewarmOutcome::Loaded {
                    stock: 5,
                    buyers: 2,
                },
                json!({"outcome": "LOADED", "stock": 5, "buyers": 2}),
            ),
            (
                PrewarmOutcome::WaitingForQueue {
                    in_flight: 3,
                    dlq: 1,
                },
                json!({"outcome": "WAITING_FOR_QUEUE", "inFlight": 3, "dlq": 1}),
            ),
            (
                PrewarmOutcome::Settling { until_ms: 1_000 },
                json!({"outcome": "SETTLING", "until": clock::rfc3339_ms(1_000)}),
            ),
        ];
        for (outcome, old) in &cases {
            assert_eq!(
                text(PrewarmBody::of(outcome)),
                old.to_string(),
                "{outcome:?}"
            );
        }
        let id = SaleId::parse("s9").unwrap();
        let run = PrewarmRun::of(&[(id, PrewarmOutcome::NotDue)]);
        assert_eq!(
            text(&run),
            json!({"sales": [{"outcome": "NOT_DUE", "saleId": "s9"}]}).to_string()
        );
    }

    #[test]
    fn a_sales_draw_is_null_without_a_window_and_all_null_when_unknown() {
        let sale = lottery_sale();
        let detail = |draw: Option<DrawBody>| {
            serde_json::to_value(SaleDetail {
                record: SaleRecord::of(&sale, &counters(), sale.start_ms),
                sell_out: SellOutBody::of(&sale, Some(sale.start_ms + 3_250)),
                draw,
            })
            .unwrap()
        };
        let body = detail(None);
        assert!(body["draw"].is_null());
        assert_eq!(body["timeToSellOutMs"], 3_250);
        assert_eq!(body["soldOutAt"], clock::rfc3339_ms(sale.start_ms + 3_250));
        assert_eq!(
            detail(Some(DrawBody::of(None)))["draw"],
            json!({"tickets": null, "decided": null, "total": null, "done": null})
        );
        let progress = DrawProgress {
            tickets: 9,
            decided: 4,
            total: None,
            done: false,
        };
        assert_eq!(
            detail(Some(DrawBody::of(Some(&progress))))["draw"],
            json!({"tickets": 9, "decided": 4, "total": null, "done": false})
        );
    }

    #[test]
    fn refunds_and_a_redrive_are_the_old_bodies() {
        let record = PaymentRecord {
            payment_id: PaymentId::parse("pay_1").unwrap(),
            order_id: OrderId::parse("o1").unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse("auth0|u").unwrap(),
            amount: None,
            outcome: crate::domain::payment::PaymentOutcome::RefundNeeded,
            at_ms: 1_000,
        };
        assert_eq!(
            text(Refunds::of(std::slice::from_ref(&record))),
            json!({"refunds": [{
                "paymentId": "pay_1", "orderId": "o1", "userId": "auth0|u",
                "amount": null, "at": clock::rfc3339_ms(1_000),
            }]})
            .to_string()
        );
        let missing = vec!["m-9".to_owned()];
        assert_eq!(
            text(Redrive {
                redriven: 1,
                message_ids: vec!["m-1"],
                missing: &missing,
            }),
            json!({"redriven": 1, "messageIds": ["m-1"], "missing": ["m-9"]}).to_string()
        );
    }
}
