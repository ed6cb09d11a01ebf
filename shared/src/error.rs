//! The API's error codes and their one mapping to HTTP.
//!
//! Every handler turns its domain error into an [`ApiError`]; [`crate::http`]
//! turns an `ApiError` into the response `{"code","message",...}`. No other
//! place picks a status code, and no internal detail reaches the body.

use crate::domain::{OrderId, Outcome};

/// An error as the caller sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("a valid bearer token is required")]
    Unauthenticated,
    /// The token is valid but its `sub` cannot be a user id (empty, over
    /// 255 bytes, or with a control character): `401` like no token, with
    /// the reason, since the caller cannot act as anyone.
    #[error("the token's sub is not a usable user id: {0}")]
    UnusableIdentity(String),
    #[error("this route needs the seckill/admin scope")]
    Forbidden,
    #[error("no such sale")]
    SaleNotFound,
    #[error("no such route")]
    RouteNotFound,
    #[error("the sale has not started yet")]
    SaleNotStarted { retry_after_secs: Option<u64> },
    #[error("the sale has ended")]
    SaleEnded,
    #[error("{message}")]
    SoldOut { message: String },
    #[error("you already hold the most units this sale allows")]
    LimitExceeded { order_ids: Vec<OrderId> },
    #[error("too many requests; retry later")]
    RateLimited { retry_after_secs: u64 },
    #[error("{message}")]
    SalePaused {
        message: String,
        retry_after_secs: u64,
    },
    #[error("the lottery draw is running; retry in a second")]
    Drawing,
    #[error("no such order")]
    OrderNotFound,
    #[error("the payment window of this order has closed")]
    OrderExpired,
    #[error("{0}")]
    OrderNotPayable(String),
    /// A purchase retried with its `Idempotency-Key` after its order ended
    /// unpaid: `ORDER_EXPIRED` or (rejected) `ORDER_NOT_PAYABLE`, naming it.
    #[error("{}", ended_message(*.status))]
    OrderEnded {
        order_id: OrderId,
        status: crate::domain::orders::OrderStatus,
    },
    #[error(
        "the sale has started: its stock, shards, start, per-user limit, price and lottery window can no longer change"
    )]
    SaleStarted,
    #[error("{0}")]
    SaleLoaded(&'static str),
    #[error("the sale changed meanwhile; read it and retry")]
    Conflict,
    #[error(
        "this sale needs a pass: answer the question at /sales/{{saleId}}/challenge and send the token as X-Sale-Token"
    )]
    GateRequired,
    /// `POST /payments/callback` without a valid, fresh signature.
    #[error("the Payment-Signature header is missing, malformed, wrong or too old")]
    InvalidSignature,
    /// A payment whose amount or currency is not the order's.
    #[error("{0}")]
    AmountMismatch(String),
    /// A join of the waitlist while units are on sale.
    #[error("units are still on sale ({remaining} left): buy one instead of joining the waitlist")]
    NotSoldOut { remaining: u32 },
    /// A leave of the waitlist by a buyer who never joined it.
    #[error("you are not on this sale's waitlist")]
    NotInWaitlist,
    #[error("internal error")]
    Internal,
}

impl ApiError {
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidRequest(_) | Self::AmountMismatch(_) => 400,
            Self::Unauthenticated | Self::UnusableIdentity(_) | Self::InvalidSignature => 401,
            Self::Forbidden | Self::GateRequired => 403,
            Self::SaleNotFound
            | Self::RouteNotFound
            | Self::OrderNotFound
            | Self::NotInWaitlist => 404,
            Self::LimitExceeded { .. }
            | Self::OrderExpired
            | Self::OrderNotPayable(_)
            | Self::OrderEnded { .. }
            | Self::SaleStarted
            | Self::SaleLoaded(_)
            | Self::NotSoldOut { .. }
            | Self::Conflict => 409,
            Self::SaleEnded | Self::SoldOut { .. } => 410,
            Self::SaleNotStarted { .. } => 425,
            Self::RateLimited { .. } => 429,
            Self::Internal => 500,
            Self::SalePaused { .. } | Self::Drawing => 503,
        }
    }

    /// The machine-readable code of the API's contract (`docs/api.md`).
    /// A code a purchase can be answered with is spelled by its [`Outcome`];
    /// the others (orders and admin routes only) are spelled here.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => Outcome::InvalidRequest.as_str(),
            Self::Unauthenticated | Self::UnusableIdentity(_) => Outcome::Unauthenticated.as_str(),
            Self::Forbidden => Outcome::Forbidden.as_str(),
            Self::SaleNotFound => Outcome::SaleNotFound.as_str(),
            Self::RouteNotFound => "NOT_FOUND",
            Self::SaleNotStarted { .. } => Outcome::SaleNotStarted.as_str(),
            Self::SaleEnded => Outcome::SaleEnded.as_str(),
            Self::SoldOut { .. } => Outcome::SoldOut.as_str(),
            Self::LimitExceeded { .. } => Outcome::LimitExceeded.as_str(),
            Self::RateLimited { .. } => Outcome::RateLimited.as_str(),
            Self::SalePaused { .. } => Outcome::SalePaused.as_str(),
            Self::Drawing => Outcome::Drawing.as_str(),
            Self::Internal => Outcome::Internal.as_str(),
            Self::OrderNotFound => "ORDER_NOT_FOUND",
            Self::OrderExpired => "ORDER_EXPIRED",
            Self::OrderNotPayable(_) => "ORDER_NOT_PAYABLE",
            Self::OrderEnded { status, .. } => match status {
                crate::domain::orders::OrderStatus::Expired => "ORDER_EXPIRED",
                _ => "ORDER_NOT_PAYABLE",
            },
            Self::SaleStarted => "SALE_STARTED",
            Self::SaleLoaded(_) => "SALE_LOADED",
            Self::Conflict => "CONFLICT",
            Self::GateRequired => Outcome::GateRequired.as_str(),
            Self::InvalidSignature => "INVALID_SIGNATURE",
            Self::AmountMismatch(_) => "AMOUNT_MISMATCH",
            Self::NotSoldOut { .. } => "NOT_SOLD_OUT",
            Self::NotInWaitlist => "NOT_IN_WAITLIST",
        }
    }

    /// The purchase [`Outcome`] this error is, if a purchase can end with
    /// its code (the `Purchases` metric counts it under that outcome).
    pub fn outcome(&self) -> Option<Outcome> {
        Outcome::from_code(self.code())
    }

    /// Seconds for the `Retry-After` header, where the contract has one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after_secs }
            | Self::SalePaused {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::SaleNotStarted { retry_after_secs } => *retry_after_secs,
            Self::Drawing => Some(1),
            _ => None,
        }
    }

    pub fn paused(message: impl Into<String>) -> Self {
        Self::SalePaused {
            message: message.into(),
            retry_after_secs: 2,
        }
    }
}

fn ended_message(status: crate::domain::orders::OrderStatus) -> &'static str {
    match status {
        crate::domain::orders::OrderStatus::Expired => {
            "this purchase's order expired unpaid: its unit went back on sale; buy again with a new Idempotency-Key"
        }
        _ => {
            "this purchase's order was rejected: no unit was left for it; buy again with a new Idempotency-Key"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every refusal outcome is the code of an error, with the status the
    /// contract gives it; no error outside the purchase route's answers is
    /// an outcome.
    #[test]
    fn every_refusal_outcome_is_an_error_code() {
        let errors = [
            ApiError::InvalidRequest(String::new()),
            ApiError::Unauthenticated,
            ApiError::UnusableIdentity(String::new()),
            ApiError::Forbidden,
            ApiError::SaleNotFound,
            ApiError::RouteNotFound,
            ApiError::SaleNotStarted {
                retry_after_secs: None,
            },
            ApiError::SaleEnded,
            ApiError::SoldOut {
                message: String::new(),
            },
            ApiError::LimitExceeded { order_ids: vec![] },
            ApiError::RateLimited {
                retry_after_secs: 1,
            },
            ApiError::paused(""),
            ApiError::OrderNotFound,
            ApiError::OrderExpired,
            ApiError::OrderNotPayable(String::new()),
            ApiError::SaleStarted,
            ApiError::SaleLoaded(""),
            ApiError::Conflict,
            ApiError::GateRequired,
            ApiError::Drawing,
            ApiError::Internal,
        ];
        let statuses: std::collections::BTreeMap<Outcome, u16> = errors
            .iter()
            .filter_map(|e| e.outcome().map(|o| (o, e.status())))
            .collect();
        let refusals: Vec<Outcome> = Outcome::ALL
            .into_iter()
            .filter(|o| !o.is_accepted())
            .collect();
        assert_eq!(statuses.keys().copied().collect::<Vec<_>>(), refusals);
        assert_eq!(statuses[&Outcome::SoldOut], 410);
        assert_eq!(statuses[&Outcome::SalePaused], 503);
        for err in &errors {
            if let Some(outcome) = err.outcome() {
                assert_eq!(err.code(), outcome.as_str());
            }
        }
        assert_eq!(ApiError::OrderNotFound.outcome(), None);
        assert_eq!(ApiError::Conflict.outcome(), None);
    }

    #[test]
    fn limit_exceeded_is_a_conflict() {
        let err = ApiError::LimitExceeded {
            order_ids: vec![OrderId::parse("o1").unwrap()],
        };
        assert_eq!(err.status(), 409);
    }

    #[test]
    fn paused_and_rate_limited_say_when_to_retry() {
        assert_eq!(ApiError::paused("x").retry_after_secs(), Some(2));
        assert_eq!(ApiError::paused("x").status(), 503);
        let rl = ApiError::RateLimited {
            retry_after_secs: 3,
        };
        assert_eq!((rl.status(), rl.retry_after_secs()), (429, Some(3)));
        assert_eq!(ApiError::SaleEnded.retry_after_secs(), None);
    }
}
