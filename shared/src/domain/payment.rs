//! The payment provider's callback (`POST /payments/callback`): its
//! signature and its body. No I/O: the use case is
//! [`crate::app::payments`].
//!
//! - [`PaymentKey`]: the HMAC-SHA256 key shared with the provider
//!   (`PAYMENT_SECRET_ARN`). The header is Stripe's scheme,
//!   `Payment-Signature: t=<unix seconds>,v1=<hex HMAC(key, "<t>.<raw body>")>`:
//!   the time is signed with the body, so a captured request replayed more
//!   than [`TOLERANCE_SECS`] later is refused, and several `v1` are allowed
//!   (a provider rotating its key signs with both). The check runs on the
//!   raw bytes before anything is parsed, and compares in constant time
//!   (`aws_lc_rs::hmac::verify`).
//! - [`parse_callback`]: the body, `{"paymentId","orderId","amount",
//!   "currency","status":"SUCCEEDED"}`; fields the contract does not name
//!   are ignored (providers add fields over time).
//! - [`stand_in_id`]: the payment id of `POST /orders/{orderId}/pay`, the
//!   buyer's stand-in for the provider, so paying again is the same payment.
//! - [`Payment`], [`PaymentOutcome`], [`PaymentRecord`]: a payment applied
//!   to an order, what it did, and its record (the values of
//!   [`crate::ports::PaymentStore`]).

use aws_lc_rs::hmac;

use crate::domain::money::{Currency, Money};
use crate::domain::{OrderId, PaymentId, SaleId, UserId};

/// How far the signed time may be from now, either way (Stripe's default).
pub const TOLERANCE_SECS: i64 = 300;

/// The request header that carries the signature.
pub const SIGNATURE_HEADER: &str = "Payment-Signature";

/// The shortest key accepted, like the gate's: under 32 bytes an
/// HMAC-SHA256 key is weaker than the hash.
pub const MIN_KEY_LEN: usize = 32;

/// Why a signature was refused. Every case is `401 INVALID_SIGNATURE`; the
/// reason goes to the log, not to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no Payment-Signature header")]
    Missing,
    #[error("the Payment-Signature header is not t=<seconds>,v1=<hex>")]
    Malformed,
    #[error("the signed time is more than 300 s from now (a replayed request?)")]
    Stale,
    #[error("no v1 signature matches the body")]
    Mismatch,
}

/// The provider's signing key. Never logged: `Debug` prints nothing of it.
#[derive(Clone)]
pub struct PaymentKey {
    key: hmac::Key,
}

impl std::fmt::Debug for PaymentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PaymentKey(<secret>)")
    }
}

impl PaymentKey {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// The header value the provider sends for `body` at `t` (unix
    /// seconds): what `seckill-local sign-payment` and the tests send.
    pub fn sign(&self, t: i64, body: &[u8]) -> String {
        let tag = hmac::sign(&self.key, &signed_payload(t, body));
        let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("t={t},v1={hex}")
    }

    /// Whether `header` signs `body` with this key at a time within
    /// [`TOLERANCE_SECS`] of `now_secs`.
    pub fn verify(
        &self,
        header: Option<&str>,
        body: &[u8],
        now_secs: i64,
    ) -> Result<(), SignatureError> {
        let header = header.ok_or(SignatureError::Missing)?;
        let mut t = None;
        let mut tags = Vec::new();
        for part in header.split(',') {
            let (name, value) = part
                .trim()
                .split_once('=')
                .ok_or(SignatureError::Malformed)?;
            match name {
                "t" if t.is_none() => {
                    t = Some(
                        value
                            .parse::<i64>()
                            .map_err(|_| SignatureError::Malformed)?,
                    );
                }
                "v1" => tags.push(from_hex(value).ok_or(SignatureError::Malformed)?),
                // Other schemes (v0, ...) are the provider's business.
                "t" => return Err(SignatureError::Malformed),
                _ => {}
            }
        }
        let t = t.ok_or(SignatureError::Malformed)?;
        if tags.is_empty() {
            return Err(SignatureError::Malformed);
        }
        if (now_secs - t).abs() > TOLERANCE_SECS {
            return Err(SignatureError::Stale);
        }
        let payload = signed_payload(t, body);
        tags.iter()
            .any(|tag| hmac::verify(&self.key, &payload, tag).is_ok())
            .then_some(())
            .ok_or(SignatureError::Mismatch)
    }
}

/// `"<t>.<raw body>"`: the bytes signed.
fn signed_payload(t: i64, body: &[u8]) -> Vec<u8> {
    let mut payload = format!("{t}.").into_bytes();
    payload.extend_from_slice(body);
    payload
}

/// Lower- or upper-case hex of a SHA-256 tag (32 bytes), else `None`.
fn from_hex(raw: &str) -> Option<Vec<u8>> {
    if raw.len() != 64 {
        return None;
    }
    (0..raw.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(raw.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A successful payment, as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    pub payment_id: PaymentId,
    pub order_id: OrderId,
    /// What the provider took: it must be the order's amount.
    pub paid: Money,
}

/// The callback's body; the message names the field that is wrong.
pub fn parse_callback(body: &[u8]) -> Result<Callback, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "body is not valid JSON".to_owned())?;
    let obj = value
        .as_object()
        .ok_or_else(|| "body must be a JSON object".to_owned())?;
    let text = |name: &str| obj.get(name).and_then(serde_json::Value::as_str);
    let payment_id =
        PaymentId::parse(text("paymentId").unwrap_or_default()).map_err(|e| e.to_string())?;
    let order_id =
        OrderId::parse(text("orderId").unwrap_or_default()).map_err(|e| e.to_string())?;
    let amount = obj
        .get("amount")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| "amount must be a non-negative integer of minor units".to_owned())?;
    let currency = text("currency")
        .and_then(Currency::parse)
        .ok_or_else(|| "currency must be an ISO 4217 code: three upper-case letters".to_owned())?;
    match text("status") {
        Some("SUCCEEDED") => {}
        _ => return Err("status must be \"SUCCEEDED\": only successful payments are sent".into()),
    }
    Ok(Callback {
        payment_id,
        order_id,
        paid: Money { amount, currency },
    })
}

/// The payment id of `POST /orders/{orderId}/pay`: one per order, so a
/// second click is the same payment (see [`PaymentId::stand_in`]).
pub fn stand_in_id(order_id: &OrderId) -> PaymentId {
    PaymentId::stand_in(order_id)
}

/// A payment to apply to an order: the provider's (`POST
/// /payments/callback`) or the buyer's stand-in (`POST /orders/{id}/pay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    pub payment_id: PaymentId,
    /// What was paid: the order's amount (the use case checked it).
    pub paid: Option<Money>,
    /// When it is applied: the order must be payable at this instant.
    pub at_ms: i64,
}

/// What a recorded payment did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentOutcome {
    /// It made its order `PAID`.
    Paid,
    /// Its order could not be paid (expired, paid by another payment,
    /// rejected): the money is owed back to the buyer.
    RefundNeeded,
}

impl PaymentOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paid => "PAID",
            Self::RefundNeeded => "REFUND_NEEDED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "PAID" => Some(Self::Paid),
            "REFUND_NEEDED" => Some(Self::RefundNeeded),
            _ => None,
        }
    }
}

/// A payment as recorded, once per payment id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRecord {
    pub payment_id: PaymentId,
    pub order_id: OrderId,
    pub sale_id: SaleId,
    pub user_id: UserId,
    pub amount: Option<Money>,
    pub outcome: PaymentOutcome,
    pub at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_500_000;

    fn key() -> PaymentKey {
        PaymentKey::new(b"0123456789abcdef0123456789abcdef")
    }

    #[test]
    fn a_signed_body_verifies_and_nothing_else_does() {
        let body = br#"{"paymentId":"p1"}"#;
        let header = key().sign(NOW, body);
        assert_eq!(key().verify(Some(&header), body, NOW), Ok(()));
        assert_eq!(key().verify(Some(&header), body, NOW + 300), Ok(()));
        assert_eq!(
            key().verify(Some(&header), body, NOW + 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            key().verify(Some(&header), body, NOW - 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            key().verify(Some(&header), br#"{"paymentId":"p2"}"#, NOW),
            Err(SignatureError::Mismatch)
        );
        let other = PaymentKey::new(b"another key of thirty-two bytes!");
        assert_eq!(
            other.verify(Some(&header), body, NOW),
            Err(SignatureError::Mismatch)
        );
        // The time is signed: moving it breaks the signature.
        let moved = header.replace(&format!("t={NOW}"), &format!("t={}", NOW + 1));
        assert_eq!(
            key().verify(Some(&moved), body, NOW),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(key().verify(None, body, NOW), Err(SignatureError::Missing));
        for bad in [
            "",
            "garbage",
            "t=abc,v1=00",
            &format!("t={NOW}"),
            &format!("v1={}", "0".repeat(64)),
            &format!("t={NOW},v1=zz{}", "0".repeat(62)),
            &format!("t={NOW},t={NOW},v1={}", "0".repeat(64)),
        ] {
            assert_eq!(
                key().verify(Some(bad), body, NOW),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
        // A rotating provider's two signatures: one match is enough.
        let two = format!("{header},v1={}", "0".repeat(64));
        assert_eq!(key().verify(Some(&two), body, NOW), Ok(()));
    }

    #[test]
    fn the_body_names_its_bad_field() {
        let good = serde_json::json!({"paymentId": "pay_1", "orderId": "o1",
            "amount": 1999, "currency": "EUR", "status": "SUCCEEDED", "extra": 1});
        let cb = parse_callback(good.to_string().as_bytes()).unwrap();
        assert_eq!(
            (
                cb.payment_id.as_str(),
                cb.paid.amount,
                cb.paid.currency.as_str()
            ),
            ("pay_1", 1999, "EUR")
        );
        for (field, bad) in [
            ("paymentId", serde_json::json!("p#1")),
            ("paymentId", serde_json::json!("x".repeat(65))),
            ("orderId", serde_json::json!(null)),
            ("amount", serde_json::json!(-1)),
            ("amount", serde_json::json!("1999")),
            ("currency", serde_json::json!("eur")),
            ("status", serde_json::json!("FAILED")),
        ] {
            let mut v = good.clone();
            v[field] = bad.clone();
            let err = parse_callback(v.to_string().as_bytes()).unwrap_err();
            assert!(err.contains(field), "{field}={bad}: {err}");
        }
        assert!(parse_callback(b"not json").is_err());
    }

    #[test]
    fn the_stand_in_id_is_one_per_order() {
        let id = OrderId::parse("abc").unwrap();
        assert_eq!(stand_in_id(&id).as_str(), "local-abc");
        let long = OrderId::parse(&"x".repeat(64)).unwrap();
        assert_eq!(stand_in_id(&long).as_str().len(), 64);
    }
}
