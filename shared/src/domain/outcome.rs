//! How a purchase request ended: the one list of outcome codes.
//!
//! Every place that names an outcome derives it from [`Outcome`]: the
//! `Purchases` metric's `Outcome` dimension ([`crate::observe::metrics`]),
//! the per-sale tally in `sale:{S}:outcomes` ([`crate::observe::outcomes`]),
//! the live view's `outcomes` and `outcomeCodes` ([`crate::app::live`]) and,
//! for the refusals, the API error codes ([`crate::error::ApiError::code`]).
//!
//! It lives in the domain, not in `observe`, because the error codes at the
//! crate's root and the use cases in `app` name it as much as the metrics
//! do, and every layer may depend on the domain; what a code means on the
//! wire (an HTTP status) stays with [`crate::error::ApiError::status`].

use std::fmt;
use std::str::FromStr;

/// One answer of the purchase route, by the code the `Purchases` metric,
/// the tally and the error body all use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// `202`: a new order was accepted.
    Accepted,
    /// `202`: the retry of an accepted purchase (same `Idempotency-Key`).
    Replayed,
    /// `202`: a lottery window's ticket (no order yet; the draw decides).
    Ticket,
    SoldOut,
    LimitExceeded,
    RateLimited,
    SaleNotStarted,
    SaleEnded,
    SalePaused,
    /// `503`: a lottery window has closed and its draw is not done yet.
    Drawing,
    SaleNotFound,
    InvalidRequest,
    Unauthenticated,
    GateRequired,
    Forbidden,
    Internal,
}

impl Outcome {
    /// Every outcome, in the order the metrics write them.
    pub const ALL: [Outcome; 16] = [
        Self::Accepted,
        Self::Replayed,
        Self::Ticket,
        Self::SoldOut,
        Self::LimitExceeded,
        Self::RateLimited,
        Self::SaleNotStarted,
        Self::SaleEnded,
        Self::SalePaused,
        Self::Drawing,
        Self::SaleNotFound,
        Self::InvalidRequest,
        Self::Unauthenticated,
        Self::GateRequired,
        Self::Forbidden,
        Self::Internal,
    ];

    /// The code on the wire: the metric's dimension value, the tally's hash
    /// field, the live view's key and (for a refusal) the error code.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "ACCEPTED",
            Self::Replayed => "REPLAYED",
            Self::Ticket => "TICKET",
            Self::SoldOut => "SOLD_OUT",
            Self::LimitExceeded => "LIMIT_EXCEEDED",
            Self::RateLimited => "RATE_LIMITED",
            Self::SaleNotStarted => "SALE_NOT_STARTED",
            Self::SaleEnded => "SALE_ENDED",
            Self::SalePaused => "SALE_PAUSED",
            Self::Drawing => "DRAWING",
            Self::SaleNotFound => "SALE_NOT_FOUND",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::GateRequired => "GATE_REQUIRED",
            Self::Forbidden => "FORBIDDEN",
            Self::Internal => "INTERNAL",
        }
    }

    /// The outcome with this code, if it is one.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == code)
    }

    /// Its place in [`Outcome::ALL`] (for per-outcome counters in arrays).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether the buyer got an order or a lottery ticket (`202`); every
    /// other outcome is a refusal answered with its error code.
    pub const fn is_accepted(self) -> bool {
        matches!(self, Self::Accepted | Self::Replayed | Self::Ticket)
    }

    /// Whether the per-sale tally counts it: not `SALE_NOT_FOUND`, so junk
    /// sale ids cost neither memory nor a key in Redis.
    pub const fn is_tallied(self) -> bool {
        !matches!(self, Self::SaleNotFound)
    }

    /// Whether the live view lists it even at 0: every answer the purchase
    /// route gives once the sale id is parsed, the sale exists and the
    /// caller is a signed-in buyer.
    pub const fn is_listed(self) -> bool {
        matches!(
            self,
            Self::Accepted
                | Self::Replayed
                | Self::Ticket
                | Self::SoldOut
                | Self::LimitExceeded
                | Self::RateLimited
                | Self::SaleNotStarted
                | Self::SaleEnded
                | Self::SalePaused
                | Self::Drawing
                | Self::GateRequired
        )
    }

    /// The outcomes the live view lists, in [`Outcome::ALL`]'s order.
    pub fn listed() -> impl Iterator<Item = Outcome> {
        Self::ALL.into_iter().filter(|o| o.is_listed())
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code that is not an [`Outcome`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a purchase outcome: {0}")]
pub struct UnknownOutcome(pub String);

impl FromStr for Outcome {
    type Err = UnknownOutcome;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        Self::from_code(code).ok_or_else(|| UnknownOutcome(code.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_round_trips_through_its_code() {
        for (i, outcome) in Outcome::ALL.into_iter().enumerate() {
            assert_eq!(outcome.index(), i, "ALL is in declaration order");
            assert_eq!(outcome.as_str().parse::<Outcome>(), Ok(outcome));
            assert_eq!(outcome.to_string(), outcome.as_str());
        }
        let codes: std::collections::BTreeSet<_> =
            Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(codes.len(), Outcome::ALL.len(), "codes are distinct");
        assert_eq!(
            "SOME_NEW_CODE".parse::<Outcome>(),
            Err(UnknownOutcome("SOME_NEW_CODE".into()))
        );
        assert_eq!(Outcome::from_code("sold_out"), None, "codes are exact");
    }

    #[test]
    fn the_subsets_are_the_intended_ones() {
        let accepted: Vec<_> = Outcome::ALL
            .into_iter()
            .filter(|o| o.is_accepted())
            .collect();
        assert_eq!(
            accepted,
            [Outcome::Accepted, Outcome::Replayed, Outcome::Ticket]
        );
        let untallied: Vec<_> = Outcome::ALL
            .into_iter()
            .filter(|o| !o.is_tallied())
            .collect();
        assert_eq!(untallied, [Outcome::SaleNotFound]);
        let listed: Vec<_> = Outcome::listed().map(Outcome::as_str).collect();
        assert_eq!(
            listed,
            [
                "ACCEPTED",
                "REPLAYED",
                "TICKET",
                "SOLD_OUT",
                "LIMIT_EXCEEDED",
                "RATE_LIMITED",
                "SALE_NOT_STARTED",
                "SALE_ENDED",
                "SALE_PAUSED",
                "DRAWING",
                "GATE_REQUIRED",
            ]
        );
    }
}
