//! Domain values. Parse, don't validate: once a value of one of these types
//! exists it is valid, so no code past the edge checks ids or quantities again.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a raw value was refused. The message is safe to show to a caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidValue(pub String);

/// The id alphabet of `docs/api.md` for the ids this service makes or keys by
/// (sale, order, `Idempotency-Key`): `[A-Za-z0-9_-]{1,64}`. Anything else could
/// break a Redis hash tag (`{`, `}`), a key pattern (`*`) or a log line. A
/// user id is the identity provider's and wider: see [`UserId`].
fn check_id(kind: &str, raw: &str) -> Result<(), InvalidValue> {
    let ok_len = (1..=64).contains(&raw.len());
    let ok_chars = raw
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok_len && ok_chars {
        Ok(())
    } else {
        Err(InvalidValue(format!(
            "{kind} must match [A-Za-z0-9_-]{{1,64}}"
        )))
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
                check_id($kind, raw)?;
                Ok(Self(raw.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::parse(&raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

id_type!(
    /// A sale, as in `POST /sales/{saleId}/purchase`.
    SaleId,
    "saleId"
);
id_type!(
    /// An order. Derived deterministically by the purchase script from the
    /// sale, the user and the purchase sequence or `Idempotency-Key`.
    OrderId,
    "orderId"
);
id_type!(
    /// A payment provider's id of one payment (`paymentId` of
    /// `POST /payments/callback`): what makes the callback idempotent.
    PaymentId,
    "paymentId"
);
id_type!(
    /// The `Idempotency-Key` header: a retry with the same key gets the same 202.
    IdempotencyKey,
    "Idempotency-Key"
);

impl PaymentId {
    /// `local-<orderId>`: the payment of `POST /orders/{orderId}/pay`. An
    /// order id has at most 64 characters of the same alphabet; the longest
    /// keep their last 58 (the unique end), so this is a valid id too.
    pub fn stand_in(order_id: &OrderId) -> Self {
        let id = order_id.as_str();
        let tail = id.get(id.len().saturating_sub(58)..).unwrap_or(id);
        Self(format!("local-{tail}"))
    }
}

/// A buyer: the JWT `sub` claim exactly as the identity provider issued it
/// (never the body or the query string). Providers issue many shapes:
/// Cognito's UUIDs, `auth0|5f7c…`, `google-oauth2|1234`, e-mail-like ids,
/// long federated ids. So any string of 1 to [`UserId::MAX_BYTES`] bytes
/// without control characters (`char::is_control`) is one; control
/// characters are refused because no provider issues them and they would
/// forge log lines.
///
/// It is an opaque value, never trusted to be key-safe: it may hold `{`,
/// `}`, `|`, `,`, `:`, `#`, quotes, spaces and any Unicode. Wherever it
/// meets a key it is used only where such characters cannot change the
/// key's meaning, each place saying why: a Redis hash field or script
/// argument (binary-safe; never part of a key name, so it cannot move a
/// key to another cluster slot), the last field of a separator-joined
/// string whose other fields cannot hold the separator (the order id's
/// SHA-1 input, the ledger's buyer key, the gate pass), a JSON string
/// (escaped by the encoder). Two ids are the same buyer only when they are
/// byte-for-byte equal: no case folding, trimming or normalising.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct UserId(String);

impl UserId {
    /// The most bytes (UTF-8) a user id may have.
    pub const MAX_BYTES: usize = 255;

    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let ok_len = (1..=Self::MAX_BYTES).contains(&raw.len());
        if ok_len && !raw.chars().any(char::is_control) {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidValue(format!(
                "userId must be 1 to {} bytes without control characters",
                Self::MAX_BYTES
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for UserId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Units in one purchase. Upper bound is a sanity cap far above any
/// per-user limit; the real limit is the sale's `perUserLimit`, checked
/// atomically in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Quantity(u32);

impl Quantity {
    pub const MAX: u32 = 1_000;
    pub const ONE: Quantity = Quantity(1);

    pub fn new(units: u64) -> Result<Self, InvalidValue> {
        match u32::try_from(units) {
            Ok(q) if (1..=Self::MAX).contains(&q) => Ok(Self(q)),
            _ => Err(InvalidValue(format!(
                "quantity must be an integer from 1 to {}",
                Self::MAX
            ))),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = u64::deserialize(d)?;
        Self::new(raw).map_err(serde::de::Error::custom)
    }
}

/// A sale's configuration, as stored in the `sales` table and loaded into Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sale {
    pub sale_id: SaleId,
    pub name: String,
    pub total_stock: u32,
    pub start_ms: i64,
    pub end_ms: i64,
    pub per_user_limit: u32,
    pub payment_window_seconds: u32,
    pub shards: u32,
    pub gate: bool,
    /// An operator paused it: durable (the `sales` table's `paused`), kept
    /// by every job; purchases get `503 SALE_PAUSED` until it is resumed.
    pub paused: bool,
    /// The price of one unit; `None` for a sale without one (every sale
    /// made before prices). Frozen from the start, like the stock, so the
    /// order-writer's read of it is the price the buyer was shown.
    pub price: Option<crate::domain::money::Money>,
    /// `Some(k)`: the gate asks for a proof of work of `k` leading zero
    /// bits instead of the arithmetic question (`gate` is then true);
    /// frozen from the start, like the price.
    pub pow_bits: Option<u8>,
    /// The lottery window, when the sale has one: purchases in the first
    /// seconds after the start get tickets, drawn when it closes. Frozen
    /// from the start, like the price.
    pub admission: Option<Admission>,
}

/// A sale's lottery window: its length and the seed of its draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Seconds after the start during which purchases get tickets.
    pub window_secs: u32,
    /// Drawn when the window is set, kept with the sale, never changed
    /// once the sale has started.
    pub seed: crate::domain::draw::DrawSeed,
}

/// Where a sale stands at a given instant, by its configured window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SalePhase {
    NotStarted,
    Live,
    Ended,
}

impl Sale {
    /// A sale at its plainest: these fields, and one shard, no gate, no
    /// price, no proof of work, no lottery window, not paused, a payment
    /// window of [`Sale::DEFAULT_PAYMENT_WINDOW_SECONDS`]. The rest is set
    /// with struct update syntax (`Sale { shards: 4, ..Sale::plain(..) }`).
    pub fn plain(
        sale_id: SaleId,
        name: impl Into<String>,
        total_stock: u32,
        per_user_limit: u32,
        start_ms: i64,
        end_ms: i64,
    ) -> Sale {
        Sale {
            sale_id,
            name: name.into(),
            total_stock,
            start_ms,
            end_ms,
            per_user_limit,
            payment_window_seconds: Self::DEFAULT_PAYMENT_WINDOW_SECONDS,
            shards: 1,
            gate: false,
            paused: false,
            price: None,
            pow_bits: None,
            admission: None,
        }
    }

    /// The payment window of [`Sale::plain`]: fifteen minutes.
    pub const DEFAULT_PAYMENT_WINDOW_SECONDS: u32 = 900;

    pub fn phase_at(&self, now_ms: i64) -> SalePhase {
        if now_ms < self.start_ms {
            SalePhase::NotStarted
        } else if now_ms >= self.end_ms {
            SalePhase::Ended
        } else {
            SalePhase::Live
        }
    }

    /// When the lottery window closes (epoch ms), for a sale with one.
    pub fn window_end_ms(&self) -> Option<i64> {
        self.admission
            .as_ref()
            .map(|a| self.start_ms + i64::from(a.window_secs) * 1000)
    }
}

/// The order message on the SQS queue (`v: 1`). Every relay of the same
/// reservation carries the same `orderId`, so the order-writer's conditional
/// put makes redelivery harmless.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrderMessage {
    pub v: u32,
    pub order_id: OrderId,
    pub sale_id: SaleId,
    pub user_id: UserId,
    pub quantity: Quantity,
    pub shard: u32,
    /// RFC 3339, UTC, from the Redis clock at reservation time.
    pub reserved_at: String,
}

impl OrderMessage {
    pub const VERSION: u32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_accept_the_design_alphabet_only() {
        assert!(SaleId::parse("flash-2026_A").is_ok());
        assert!(SaleId::parse(&"a".repeat(64)).is_ok());
        for bad in ["", "a b", "a{b", "a}b", "a*b", "é", "a:b", "a/b", "a\n"] {
            assert!(SaleId::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(SaleId::parse(&"a".repeat(65)).is_err());
    }

    #[test]
    fn user_ids_are_any_sub_of_1_to_255_bytes_without_control_characters() {
        for good in [
            "auth0|5f7c1e2a9b3d4c0012345678",
            "google-oauth2|1234",
            "jane.doe+sale@example.com",
            "{brace}",
            "a,b",
            "x:y:z",
            "用户:é",
            "auth0|x ",
            " ",
            "q\"uote\\d/",
        ] {
            assert_eq!(
                UserId::parse(good).map(|u| u.to_string()),
                Ok(good.to_owned())
            );
        }
        // 255 bytes (85 three-byte characters) is the most; bytes count,
        // not characters.
        assert!(UserId::parse(&"用".repeat(85)).is_ok());
        assert!(UserId::parse(&"a".repeat(255)).is_ok());
        for bad in [
            String::new(),
            "a".repeat(256),
            format!("a{}", "用".repeat(85)),
            "a\nb".into(),
            "a\tb".into(),
            "a\u{0}".into(),
            "a\u{7f}".into(),
            "a\u{85}".into(),
        ] {
            let err = UserId::parse(&bad).unwrap_err();
            assert_eq!(
                err.0, "userId must be 1 to 255 bytes without control characters",
                "{bad:?}"
            );
        }
        let m: Result<UserId, _> = serde_json::from_str("\"a\\u0000\"");
        assert!(m.is_err());
    }

    #[test]
    fn quantity_bounds() {
        assert!(Quantity::new(0).is_err());
        assert_eq!(Quantity::new(1).map(Quantity::get), Ok(1));
        assert!(Quantity::new(u64::from(Quantity::MAX) + 1).is_err());
        assert!(Quantity::new(1_000_000_000_000).is_err());
    }

    #[test]
    fn quantity_from_json_is_strict() {
        for bad in ["0", "-1", "1.5", "\"1\"", "1000000000000", "null", "true"] {
            assert!(serde_json::from_str::<Quantity>(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Quantity>("3").is_ok());
    }

    #[test]
    fn order_message_round_trips_and_rejects_bad_ids() {
        let raw = r#"{"v":1,"orderId":"o1","saleId":"s1","userId":"u1","quantity":2,"shard":0,"reservedAt":"2026-11-30T00:00:00Z"}"#;
        let m: OrderMessage = serde_json::from_str(raw).unwrap();
        assert_eq!(m.quantity.get(), 2);
        let bad = raw.replace("\"s1\"", "\"s{1}\"");
        assert!(serde_json::from_str::<OrderMessage>(&bad).is_err());
        // Any usable sub goes through the message as it is, escaped by JSON.
        let wide = r#"auth0|{x},"é":\"#;
        let sent = OrderMessage {
            user_id: UserId::parse(wide).unwrap(),
            ..m
        };
        let back: OrderMessage =
            serde_json::from_str(&serde_json::to_string(&sent).unwrap()).unwrap();
        assert_eq!(back.user_id.as_str(), wide);
    }

    #[test]
    fn phase_is_half_open() {
        let sale = Sale::plain(SaleId::parse("s").unwrap(), "n", 1, 1, 10, 20);
        assert_eq!(sale.phase_at(9), SalePhase::NotStarted);
        assert_eq!(sale.phase_at(10), SalePhase::Live);
        assert_eq!(sale.phase_at(20), SalePhase::Ended);
    }
}
