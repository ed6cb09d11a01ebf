//! Money: a sale's price and an order's amount, in minor units (cents,
//! pence, yen) of an ISO 4217 currency.
//!
//! - [`Currency`]: three upper-case ASCII letters (`EUR`, `USD`, `JPY`).
//!   The list of real codes changes; the shape is what this service can
//!   check, and the payment provider refuses a code it does not know.
//! - [`Money`]: an amount and its currency. Integers only: a float never
//!   holds a price (0.1 + 0.2 is not 0.3).
//! - [`parse_price`]: the `price` field of `PUT /admin/sales/{saleId}`,
//!   each refusal naming `price.amount` or `price.currency`.

use crate::domain::Quantity;

/// The largest price a sale may have, in minor units (a billion in a
/// two-decimal currency). Times the largest quantity it stays far below
/// what a DynamoDB number and an `f64` in a page hold exactly (2^53).
pub const MAX_PRICE: u64 = 100_000_000_000;

/// An ISO 4217 code: three upper-case ASCII letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency([u8; 3]);

impl Currency {
    pub fn parse(raw: &str) -> Option<Self> {
        let bytes: [u8; 3] = raw.as_bytes().try_into().ok()?;
        bytes
            .iter()
            .all(u8::is_ascii_uppercase)
            .then_some(Self(bytes))
    }

    pub fn as_str(&self) -> &str {
        // Three ASCII letters, checked by `parse`.
        std::str::from_utf8(&self.0).unwrap_or("XXX")
    }
}

impl std::fmt::Display for Currency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An amount in minor units of a currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Money {
    pub amount: u64,
    pub currency: Currency,
}

impl Money {
    /// The amount of `quantity` units at this price. `None` only past
    /// `u64`, which [`MAX_PRICE`] times [`Quantity::MAX`] never reaches.
    pub fn times(self, quantity: Quantity) -> Option<Money> {
        Some(Money {
            amount: self.amount.checked_mul(u64::from(quantity.get()))?,
            currency: self.currency,
        })
    }
}

/// The `price` of a sale definition: absent or `null` is no price (a sale
/// as every sale was before prices); otherwise an object with exactly
/// `amount` (integer minor units, 0 to [`MAX_PRICE`]) and `currency`. The
/// message names the field that is wrong.
pub fn parse_price(value: Option<&serde_json::Value>) -> Result<Option<Money>, String> {
    let obj = match value {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::Object(obj)) => obj,
        Some(_) => {
            return Err(
                "price must be null or {\"amount\": <integer minor units>, \"currency\": \"EUR\"}"
                    .into(),
            );
        }
    };
    if let Some(unknown) = obj
        .keys()
        .find(|k| !["amount", "currency"].contains(&k.as_str()))
    {
        return Err(format!(
            "unknown field price.{unknown}; allowed: amount, currency"
        ));
    }
    let amount = obj
        .get("amount")
        .and_then(serde_json::Value::as_u64)
        .filter(|n| *n <= MAX_PRICE)
        .ok_or_else(|| {
            format!("price.amount must be an integer number of minor units from 0 to {MAX_PRICE}")
        })?;
    let currency = obj
        .get("currency")
        .and_then(serde_json::Value::as_str)
        .and_then(Currency::parse)
        .ok_or_else(|| {
            "price.currency must be an ISO 4217 code: three upper-case letters, e.g. EUR".to_owned()
        })?;
    Ok(Some(Money { amount, currency }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn currencies_are_three_upper_case_letters() {
        assert_eq!(Currency::parse("EUR").unwrap().as_str(), "EUR");
        for bad in ["eur", "EU", "EURO", "E1R", "", "ÉUR"] {
            assert_eq!(Currency::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_price_is_null_or_an_amount_and_a_currency() {
        assert_eq!(parse_price(None), Ok(None));
        assert_eq!(parse_price(Some(&json!(null))), Ok(None));
        let p = parse_price(Some(&json!({"amount": 1999, "currency": "EUR"})))
            .unwrap()
            .unwrap();
        assert_eq!((p.amount, p.currency.as_str()), (1999, "EUR"));
        assert!(
            parse_price(Some(&json!({"amount": 0, "currency": "JPY"})))
                .unwrap()
                .is_some()
        );
        let cases = [
            (json!({"amount": -1, "currency": "EUR"}), "price.amount"),
            (json!({"amount": 1.5, "currency": "EUR"}), "price.amount"),
            (json!({"amount": "10", "currency": "EUR"}), "price.amount"),
            (
                json!({"amount": MAX_PRICE + 1, "currency": "EUR"}),
                "price.amount",
            ),
            (json!({"currency": "EUR"}), "price.amount"),
            (json!({"amount": 10, "currency": "eur"}), "price.currency"),
            (json!({"amount": 10}), "price.currency"),
            (
                json!({"amount": 10, "currency": "EUR", "tax": 1}),
                "price.tax",
            ),
            (json!(10), "price"),
        ];
        for (bad, field) in cases {
            let err = parse_price(Some(&bad)).unwrap_err();
            assert!(err.contains(field), "{bad}: {err}");
        }
    }

    #[test]
    fn an_amount_is_the_price_times_the_quantity() {
        let p = Money {
            amount: MAX_PRICE,
            currency: Currency::parse("USD").unwrap(),
        };
        let q = Quantity::new(u64::from(Quantity::MAX)).unwrap();
        assert_eq!(p.times(q).unwrap().amount, MAX_PRICE * 1000);
        assert!(p.times(q).unwrap().amount < 1 << 53);
    }
}
