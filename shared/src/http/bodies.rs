//! The HTTP API's bodies as types: what each route of `docs/api.md` takes
//! and answers, field for field (names, `null` against absent, number
//! formats). The handlers build their answers from them where the answer is
//! assembled at the edge, and `seckill_infra::openapi` describes the API
//! from their schemas (`seckill-local openapi`, `GET /openapi.json` on the
//! local stack).
//!
//! Times are RFC 3339 strings in UTC; ids match `[A-Za-z0-9_-]{1,64}`.

use crate::clock;
use crate::domain::money::Money;
use crate::domain::orders::Order;
use crate::domain::{OrderId, Sale};
use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error: a machine-readable `code` and a `message` for people, with
/// no internal detail; a few codes carry more.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody<'a> {
    /// `SOLD_OUT`, `SALE_NOT_FOUND`, `INVALID_REQUEST`, ...
    pub code: &'a str,
    pub message: String,
    /// `LIMIT_EXCEEDED`: the caller's existing orders of the sale.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub order_ids: Option<&'a [OrderId]>,
    /// `ORDER_ENDED`: the order a replayed purchase had made.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub order_id: Option<&'a OrderId>,
    /// `ORDER_ENDED`: how that order ended (`EXPIRED`, `REJECTED`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'a str>,
}

impl<'a> ErrorBody<'a> {
    /// The body of `err`: `{"code","message"}` plus the fields its code
    /// carries.
    pub fn of(err: &'a ApiError) -> Self {
        let mut body = ErrorBody {
            code: err.code(),
            message: err.to_string(),
            order_ids: None,
            order_id: None,
            status: None,
        };
        if let ApiError::LimitExceeded { order_ids } = err {
            body.order_ids = Some(order_ids.as_slice());
        }
        if let ApiError::OrderEnded { order_id, status } = err {
            body.order_id = Some(order_id);
            body.status = Some(status.as_str());
        }
        body
    }

    /// [`ErrorBody::of`] as a JSON tree.
    pub fn json(err: &'a ApiError) -> serde_json::Value {
        serde_json::to_value(Self::of(err))
            .unwrap_or_else(|_| serde_json::json!({"code": err.code(), "message": err.to_string()}))
    }

    /// [`ErrorBody::of`] as text, written straight from the fields (no JSON
    /// tree in between: most purchases end here, as `SOLD_OUT`). Its fields
    /// are declared in sorted order, so the text is the tree's.
    pub fn text(err: &'a ApiError) -> String {
        serde_json::to_string(&Self::of(err)).unwrap_or_else(|_| Self::json(err).to_string())
    }
}

/// `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
}

impl Health {
    pub const OK: Health = Health { status: "ok" };
}

/// `POST /sales/{saleId}/purchase`'s body; an empty body is one unit.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PurchaseRequest {
    /// Units to buy (default 1), at most the sale's `perUserLimit`.
    #[schema(minimum = 1, maximum = 1000, default = 1)]
    pub quantity: Option<u32>,
}

/// `202` to a purchase: the order is queued (`Location: /orders/{orderId}`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseAccepted<'a> {
    pub order_id: &'a str,
    pub sale_id: &'a str,
    pub quantity: u32,
    /// Always `QUEUED`.
    pub status: &'static str,
}

/// `202` to a purchase while a sale's lottery window is open: a ticket in
/// the draw, no order yet.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PurchaseTicket<'a> {
    pub sale_id: &'a str,
    pub quantity: u32,
    /// Always `TICKET`.
    pub status: &'static str,
    pub draw_at: String,
}

/// A price: integer minor units and an ISO 4217 currency.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MoneyBody {
    pub amount: u64,
    pub currency: String,
}

impl MoneyBody {
    pub fn of(money: &Money) -> Self {
        Self {
            amount: money.amount,
            currency: money.currency.as_str().to_owned(),
        }
    }
}

/// A lottery window as the public sale view shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionView {
    /// Seconds from `startAt` during which purchases are tickets.
    pub window: u32,
    pub window_end_at: Option<String>,
}

/// `GET /sales/{saleId}` (public; `Cache-Control: public, max-age=1`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaleView {
    pub sale_id: String,
    pub name: String,
    pub start_at: String,
    pub end_at: String,
    pub total_stock: u64,
    /// May lag by a second.
    pub remaining: i64,
    pub per_user_limit: u32,
    /// `UPCOMING`, `ACTIVE`, `PAUSED`, `SOLD_OUT`, `ENDED`, ...
    pub status: String,
    pub price: Option<MoneyBody>,
    /// Whether a purchase needs the gate's pass (`X-Sale-Token`): the
    /// buyer page asks for a question only then (no wasted request per
    /// buyer at the busiest moment).
    pub gate: bool,
    /// The gate's kind: `null` for the arithmetic question, else the proof
    /// of work's leading zero bits.
    pub pow_bits: Option<u8>,
    /// A lottery window: the buyer page says "you are in the draw" for a
    /// ticket, and when the draw starts. Never the seed.
    pub admission: Option<AdmissionView>,
}

impl SaleView {
    /// `sale` with what is left of it and its public status
    /// (`app::order_queries::public_status`).
    pub fn of(sale: &Sale, remaining: i64, status: &str) -> Self {
        Self {
            sale_id: sale.sale_id.as_str().to_owned(),
            name: sale.name.clone(),
            start_at: clock::rfc3339_ms(sale.start_ms),
            end_at: clock::rfc3339_ms(sale.end_ms),
            total_stock: u64::from(sale.total_stock),
            remaining,
            per_user_limit: sale.per_user_limit,
            status: status.to_owned(),
            price: sale.price.as_ref().map(MoneyBody::of),
            gate: sale.gate,
            pow_bits: sale.pow_bits,
            admission: sale.admission.as_ref().map(|a| AdmissionView {
                window: a.window_secs,
                window_end_at: sale.window_end_ms().map(clock::rfc3339_ms),
            }),
        }
    }
}

/// `GET /orders/{orderId}`, `POST /orders/{orderId}/pay`, and each order of
/// `GET /sales/{saleId}/orders`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderView<'a> {
    #[schema(value_type = String)]
    pub order_id: &'a OrderId,
    pub sale_id: &'a str,
    pub user_id: &'a str,
    pub quantity: u32,
    /// `QUEUED`, `PENDING_PAYMENT`, `PAID`, `EXPIRED`, `REJECTED`.
    pub status: &'static str,
    pub created_at: String,
    pub expires_at: Option<String>,
    /// The price times the quantity; `null` without a price.
    pub amount: Option<MoneyBody>,
    pub paid_at: Option<String>,
    pub payment_id: Option<&'a str>,
    /// `NEEDED` when a payment came for it after it expired.
    pub refund: Option<&'static str>,
}

impl<'a> OrderView<'a> {
    /// The order as its owner sees it at `now_ms`.
    pub fn of(order: &'a Order, now_ms: i64) -> Self {
        Self {
            order_id: &order.order_id,
            sale_id: order.sale_id.as_str(),
            user_id: order.user_id.as_str(),
            quantity: order.quantity.get(),
            status: order.status_at(now_ms).as_str(),
            created_at: clock::rfc3339_ms(order.created_at_ms),
            expires_at: order.expires_at_ms.map(clock::rfc3339_ms),
            amount: order.amount.as_ref().map(MoneyBody::of),
            paid_at: order.paid_at_ms.map(clock::rfc3339_ms),
            payment_id: order.payment_id.as_ref().map(|p| p.as_str()),
            refund: if order.refunds.is_empty() {
                None
            } else {
                Some("NEEDED")
            },
        }
    }
}

/// A lottery ticket as its holder sees it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketView {
    /// `TICKET`, `WON`, `LOST`, `ENDED`.
    pub status: &'static str,
    pub quantity: u32,
    /// The order a won ticket made.
    pub order_id: Option<String>,
    pub draw_at: String,
}

impl TicketView {
    pub fn of(ticket: &crate::app::order_queries::TicketAnswer) -> Self {
        Self {
            status: ticket.status,
            quantity: ticket.quantity.get(),
            order_id: ticket.order_id.as_ref().map(|o| o.as_str().to_owned()),
            draw_at: clock::rfc3339_ms(ticket.draw_at_ms),
        }
    }
}

/// `GET /sales/{saleId}/orders`: the caller's own orders of the sale,
/// `QUEUED` ones included, their lottery ticket and their waitlist entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct MyOrders<'a> {
    pub orders: Vec<OrderView<'a>>,
    /// The caller's ticket, on a sale with a lottery window.
    pub ticket: Option<TicketView>,
    /// The caller's waitlist entry, if they joined.
    pub waitlist: Option<WaitlistBody<'a>>,
}

/// The chance of a waitlist offer before the sale ends (`docs/api.md`
/// says how it is reckoned).
#[derive(Debug, Serialize, ToSchema)]
pub struct OddsBody {
    /// From 0 to 1.
    pub chance: f64,
    /// Below one in ten: the page says plainly an offer is unlikely.
    pub poor: bool,
}

/// A buyer's waitlist entry: `POST`/`DELETE /sales/{saleId}/waitlist`, and
/// `waitlist` in `GET /sales/{saleId}/orders`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitlistBody<'a> {
    pub sale_id: &'a str,
    /// `WAITING`, `OFFERED`, `LEFT`, `ENDED`.
    pub status: &'static str,
    /// Place in the line, 1 for the head; only while `WAITING`.
    pub position: Option<u64>,
    /// Entries still waiting ahead; only while `WAITING`.
    pub ahead: Option<u64>,
    /// The order a returned unit became for this buyer; only when `OFFERED`.
    pub offer: Option<OrderView<'a>>,
    /// Only while `WAITING`, once the sale has had a unit back (before
    /// that there is no pace of returns to go by).
    pub odds: Option<OddsBody>,
    pub joined_at: String,
}

impl<'a> WaitlistBody<'a> {
    pub fn of(entry: &'a crate::app::order_queries::WaitlistAnswer, now_ms: i64) -> Self {
        Self {
            sale_id: entry.sale_id.as_str(),
            status: entry.status,
            position: entry.ahead.map(|a| a + 1),
            ahead: entry.ahead,
            offer: entry.offer.as_ref().map(|o| OrderView::of(o, now_ms)),
            odds: entry.odds.map(|o| OddsBody {
                chance: o.chance,
                poor: o.poor,
            }),
            joined_at: clock::rfc3339_ms(entry.joined_at_ms),
        }
    }
}

/// `GET /sales/{saleId}/challenge`: the gate's question (`kind`
/// `arithmetic`) or a proof of work (`kind` `pow`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Challenge {
    /// `arithmetic` or `pow`.
    pub kind: String,
    /// `arithmetic`: the question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// `pow`: the prefix to extend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenge: Option<String>,
    /// `pow`: the leading zero bits the hash needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits: Option<u8>,
    pub challenge_id: String,
    pub expires_at: String,
}

impl Challenge {
    /// The arithmetic question.
    pub fn arithmetic(c: &crate::domain::gate::Challenge) -> Self {
        Self {
            kind: "arithmetic".into(),
            question: Some(c.question.clone()),
            challenge: None,
            bits: None,
            challenge_id: c.challenge_id.clone(),
            expires_at: clock::rfc3339_ms(c.expires_at_ms),
        }
    }

    /// The proof of work.
    pub fn pow(c: &crate::domain::pow::PowChallenge) -> Self {
        Self {
            kind: "pow".into(),
            question: None,
            challenge: Some(c.challenge.clone()),
            bits: Some(c.bits),
            challenge_id: c.challenge_id.clone(),
            expires_at: clock::rfc3339_ms(c.expires_at_ms),
        }
    }
}

/// `POST /sales/{saleId}/challenge`'s body: `{"answer"}` (with the
/// question's `challengeId` if kept) or a proof of work's
/// `{"challengeId","nonce"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChallengeAnswer {
    pub answer: Option<i64>,
    pub challenge_id: Option<String>,
    pub nonce: Option<String>,
}

/// `200` to a right answer: the pass for `X-Sale-Token`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SalePass {
    pub token: String,
    pub expires_at: String,
}

impl SalePass {
    pub fn of(pass: &crate::domain::gate::Pass) -> Self {
        Self {
            token: pass.token.clone(),
            expires_at: clock::rfc3339_ms(pass.expires_at_ms),
        }
    }
}

/// `POST /payments/callback`'s body (signed with `Payment-Signature`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentCallback {
    pub payment_id: String,
    pub order_id: String,
    /// Minor units.
    pub amount: u64,
    pub currency: String,
    /// `SUCCEEDED`.
    pub status: String,
}

/// `200` to a payment callback.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentAnswerBody<'a> {
    pub payment_id: &'a str,
    pub order_id: &'a str,
    /// `PAID` or `REFUND_NEEDED`.
    pub outcome: &'static str,
    pub order: OrderView<'a>,
}

/// `PUT /admin/sales/{saleId}`'s body: a sale's definition. Unknown
/// fields are refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaleDefinition {
    /// 1 to 200 characters.
    pub name: String,
    #[schema(minimum = 1, maximum = 10_000_000)]
    pub total_stock: u64,
    pub start_at: String,
    pub end_at: String,
    #[schema(minimum = 1)]
    pub per_user_limit: u32,
    /// Default 900.
    #[schema(minimum = 60, maximum = 86_400)]
    pub payment_window_seconds: Option<u32>,
    /// Default 1.
    #[schema(minimum = 1, maximum = 64)]
    pub shards: Option<u32>,
    pub gate: Option<bool>,
    pub price: Option<MoneyBody>,
    /// The proof of work's leading zero bits (turns the gate on).
    pub pow_bits: Option<u8>,
    /// A lottery window: `{"window": seconds}`.
    #[schema(value_type = Option<Object>)]
    pub admission: Option<serde_json::Value>,
}

pub mod admin;
pub mod live;

/// A reconcile report (`GET /admin/sales/{saleId}/report` and the answer of
/// `POST .../reconcile`): the checks, violations and repairs, described in
/// `docs/api.md`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(value_type = Object)]
pub struct ReconcileReportBody(pub serde_json::Value);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::money::Currency;

    #[test]
    fn the_written_body_is_the_json_body() {
        for err in [
            ApiError::SoldOut {
                message: "not enough stock left: 0 remaining".into(),
            },
            ApiError::LimitExceeded {
                order_ids: vec![crate::domain::OrderId::parse("o1").unwrap()],
            },
            ApiError::paused("retry \"soon\""),
            ApiError::Unauthenticated,
            ApiError::UnusableIdentity("userId must be ...".into()),
        ] {
            let written: serde_json::Value = serde_json::from_str(&ErrorBody::text(&err)).unwrap();
            assert_eq!(written, ErrorBody::json(&err), "{err:?}");
        }
    }

    #[test]
    fn limit_exceeded_carries_the_callers_orders() {
        let err = ApiError::LimitExceeded {
            order_ids: vec![OrderId::parse("o1").unwrap()],
        };
        assert_eq!(ErrorBody::json(&err)["orderIds"][0], "o1");
        assert_eq!(ErrorBody::json(&err)["code"], "LIMIT_EXCEEDED");
    }

    use crate::domain::orders::OrderStatus;
    use crate::domain::{PaymentId, Quantity, SaleId, UserId};

    #[test]
    fn a_sale_view_is_the_sale_views_json_as_it_was_written() {
        let mut sale = Sale {
            sale_id: SaleId::parse("s1").unwrap(),
            name: "Drop".into(),
            total_stock: 100,
            start_ms: 1_700_000_000_000,
            end_ms: 1_700_000_600_000,
            per_user_limit: 2,
            payment_window_seconds: 900,
            shards: 1,
            gate: true,
            paused: false,
            price: Some(Money {
                amount: 1999,
                currency: Currency::parse("EUR").unwrap(),
            }),
            pow_bits: Some(18),
            admission: Some(crate::domain::Admission {
                window_secs: 10,
                seed: crate::domain::draw::DrawSeed::from_bytes([7; 32]),
            }),
        };
        // The literal GET /sales/{saleId} wrote before it had a type.
        let before = |sale: &Sale, remaining: i64, status: &str| {
            serde_json::json!({
                "saleId": sale.sale_id,
                "name": sale.name,
                "startAt": clock::rfc3339_ms(sale.start_ms),
                "endAt": clock::rfc3339_ms(sale.end_ms),
                "totalStock": sale.total_stock,
                "remaining": remaining,
                "perUserLimit": sale.per_user_limit,
                "status": status,
                "price": sale.price.as_ref().map(|p| serde_json::json!({"amount": p.amount, "currency": p.currency.as_str()})),
                "gate": sale.gate,
                "powBits": sale.pow_bits,
                "admission": sale.admission.as_ref().map(|a| serde_json::json!({
                    "window": a.window_secs,
                    "windowEndAt": sale.window_end_ms().map(clock::rfc3339_ms),
                })),
            })
        };
        for _ in 0..2 {
            let view = serde_json::to_value(SaleView::of(&sale, 7, "LIVE")).unwrap();
            assert_eq!(view.to_string(), before(&sale, 7, "LIVE").to_string());
            sale.price = None;
            sale.pow_bits = None;
            sale.admission = None;
            sale.gate = false;
        }
    }

    #[test]
    fn the_gates_bodies_are_the_literals_they_replace() {
        let question = crate::domain::gate::Challenge {
            question: "3 + 4".into(),
            challenge_id: "c1".into(),
            expires_at_ms: 1_700_000_000_000,
        };
        assert_eq!(
            serde_json::to_value(Challenge::arithmetic(&question))
                .unwrap()
                .to_string(),
            serde_json::json!({
                "kind": "arithmetic",
                "question": question.question,
                "challengeId": question.challenge_id,
                "expiresAt": clock::rfc3339_ms(question.expires_at_ms),
            })
            .to_string()
        );
        let pow = crate::domain::pow::PowChallenge {
            challenge: "abc".into(),
            bits: 18,
            challenge_id: "c2".into(),
            expires_at_ms: 1_700_000_000_500,
        };
        assert_eq!(
            serde_json::to_value(Challenge::pow(&pow))
                .unwrap()
                .to_string(),
            serde_json::json!({
                "kind": "pow",
                "challenge": pow.challenge,
                "bits": pow.bits,
                "challengeId": pow.challenge_id,
                "expiresAt": clock::rfc3339_ms(pow.expires_at_ms),
            })
            .to_string()
        );
        let pass = crate::domain::gate::Pass {
            token: "t".into(),
            expires_at_ms: 1_700_000_060_000,
        };
        assert_eq!(
            serde_json::to_value(SalePass::of(&pass))
                .unwrap()
                .to_string(),
            serde_json::json!({
                "token": pass.token,
                "expiresAt": clock::rfc3339_ms(pass.expires_at_ms),
            })
            .to_string()
        );
    }

    #[test]
    fn an_order_view_is_the_orders_body_byte_for_byte() {
        let far = clock::now_ms() + 3_600_000;
        let bare = Order {
            order_id: OrderId::parse("o1").unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse("auth0|u1").unwrap(),
            quantity: Quantity::new(2).unwrap(),
            status: OrderStatus::PendingPayment,
            created_at_ms: 1_700_000_000_123,
            expires_at_ms: Some(far),
            reject_reason: None,
            return_seq: None,
            amount: None,
            paid_at_ms: None,
            payment_id: None,
            refunds: Vec::new(),
            offer_of: None,
            offered: 0,
        };
        let mut paid = bare.clone();
        paid.status = OrderStatus::Paid;
        paid.expires_at_ms = None;
        paid.amount = Some(Money {
            amount: 1999,
            currency: Currency::parse("EUR").unwrap(),
        });
        paid.paid_at_ms = Some(1_700_000_001_000);
        paid.payment_id = Some(PaymentId::parse("pay_1").unwrap());
        paid.refunds = vec![PaymentId::parse("pay_2").unwrap()];
        let mut expired = bare.clone();
        expired.expires_at_ms = Some(1);
        for order in [bare, paid, expired] {
            let now = clock::now_ms();
            let view = serde_json::to_value(OrderView::of(&order, now)).unwrap();
            let old = serde_json::json!({
                "orderId": order.order_id,
                "saleId": order.sale_id,
                "userId": order.user_id,
                "quantity": order.quantity,
                "status": order.status_at(now).as_str(),
                "createdAt": clock::rfc3339_ms(order.created_at_ms),
                "expiresAt": order.expires_at_ms.map(clock::rfc3339_ms),
                "amount": order.amount.as_ref().map(|m| serde_json::json!({"amount": m.amount, "currency": m.currency.as_str()})),
                "paidAt": order.paid_at_ms.map(clock::rfc3339_ms),
                "paymentId": order.payment_id,
                "refund": if order.refunds.is_empty() { None } else { Some("NEEDED") },
            });
            assert_eq!(view.to_string(), old.to_string());
        }
    }

    #[test]
    fn the_error_body_leaves_out_what_a_code_does_not_carry() {
        let body = ErrorBody {
            code: "SOLD_OUT",
            message: "gone".into(),
            order_ids: None,
            order_id: None,
            status: None,
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"code":"SOLD_OUT","message":"gone"}"#
        );
    }
}
