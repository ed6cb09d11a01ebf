//! The API's error codes and their one mapping to HTTP.
//!
//! Every handler turns its domain error into an [`ApiError`]; [`crate::http`]
//! turns an `ApiError` into the response `{"code","message",...}`. No other
//! place picks a status code, and no internal detail reaches the body.

use crate::domain::OrderId;

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
    #[error("no such order")]
    OrderNotFound,
    #[error("the payment window of this order has closed")]
    OrderExpired,
    #[error("{0}")]
    OrderNotPayable(String),
    #[error("the sale has started: its stock, shards and start can no longer change")]
    SaleStarted,
    #[error("{0}")]
    SaleLoaded(&'static str),
    #[error("the sale changed meanwhile; read it and retry")]
    Conflict,
    #[error(
        "this sale needs a pass: answer the question at /sales/{{saleId}}/challenge and send the token as X-Sale-Token"
    )]
    GateRequired,
    #[error("internal error")]
    Internal,
}

impl ApiError {
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidRequest(_) => 400,
            Self::Unauthenticated | Self::UnusableIdentity(_) => 401,
            Self::Forbidden | Self::GateRequired => 403,
            Self::SaleNotFound | Self::RouteNotFound | Self::OrderNotFound => 404,
            Self::LimitExceeded { .. }
            | Self::OrderExpired
            | Self::OrderNotPayable(_)
            | Self::SaleStarted
            | Self::SaleLoaded(_)
            | Self::Conflict => 409,
            Self::SaleEnded | Self::SoldOut { .. } => 410,
            Self::SaleNotStarted { .. } => 425,
            Self::RateLimited { .. } => 429,
            Self::Internal => 500,
            Self::SalePaused { .. } => 503,
        }
    }

    /// The machine-readable code of the API's contract (`docs/api.md`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::Unauthenticated | Self::UnusableIdentity(_) => "UNAUTHENTICATED",
            Self::Forbidden => "FORBIDDEN",
            Self::SaleNotFound => "SALE_NOT_FOUND",
            Self::RouteNotFound => "NOT_FOUND",
            Self::SaleNotStarted { .. } => "SALE_NOT_STARTED",
            Self::SaleEnded => "SALE_ENDED",
            Self::SoldOut { .. } => "SOLD_OUT",
            Self::LimitExceeded { .. } => "LIMIT_EXCEEDED",
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::SalePaused { .. } => "SALE_PAUSED",
            Self::Internal => "INTERNAL",
            Self::OrderNotFound => "ORDER_NOT_FOUND",
            Self::OrderExpired => "ORDER_EXPIRED",
            Self::OrderNotPayable(_) => "ORDER_NOT_PAYABLE",
            Self::SaleStarted => "SALE_STARTED",
            Self::SaleLoaded(_) => "SALE_LOADED",
            Self::Conflict => "CONFLICT",
            Self::GateRequired => "GATE_REQUIRED",
        }
    }

    /// Seconds for the `Retry-After` header, where the contract has one.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after_secs }
            | Self::SalePaused {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::SaleNotStarted { retry_after_secs } => *retry_after_secs,
            _ => None,
        }
    }

    /// The JSON body: `{"code","message"}` plus the fields a code carries.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({
            "code": self.code(),
            "message": self.to_string(),
        });
        if let Self::LimitExceeded { order_ids } = self {
            body["orderIds"] = serde_json::json!(order_ids);
        }
        body
    }

    /// [`body`](Self::body) as text, written straight from the fields
    /// (no JSON tree in between: most purchases end here, as `SOLD_OUT`).
    pub fn body_text(&self) -> String {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Body<'a> {
            code: &'a str,
            message: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            order_ids: Option<&'a [crate::domain::OrderId]>,
        }
        let order_ids = match self {
            Self::LimitExceeded { order_ids } => Some(order_ids.as_slice()),
            _ => None,
        };
        serde_json::to_string(&Body {
            code: self.code(),
            message: self.to_string(),
            order_ids,
        })
        .unwrap_or_else(|_| self.body().to_string())
    }

    pub fn paused(message: impl Into<String>) -> Self {
        Self::SalePaused {
            message: message.into(),
            retry_after_secs: 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let written: serde_json::Value = serde_json::from_str(&err.body_text()).unwrap();
            assert_eq!(written, err.body(), "{err:?}");
        }
    }

    #[test]
    fn limit_exceeded_carries_the_callers_orders() {
        let err = ApiError::LimitExceeded {
            order_ids: vec![OrderId::parse("o1").unwrap()],
        };
        assert_eq!(err.status(), 409);
        assert_eq!(err.body()["orderIds"][0], "o1");
        assert_eq!(err.body()["code"], "LIMIT_EXCEEDED");
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
