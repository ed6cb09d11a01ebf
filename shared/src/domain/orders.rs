//! Orders: the rows the order-writer turns reservations into and their
//! states. The port to the table that holds them is
//! [`crate::ports::OrderStore`].
//!
//! States: `QUEUED` (accepted, row not written yet; never stored, derived
//! from the reservation) → `PENDING_PAYMENT` → `PAID` or `EXPIRED`;
//! `REJECTED` when DynamoDB refused the units Redis had let through (no
//! stock, or the buyer's limit: the ledger enforces both) or reconcile gave
//! the reservation up.

use crate::clock;
use crate::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderStatus {
    Queued,
    PendingPayment,
    Paid,
    Expired,
    Rejected,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "QUEUED",
            Self::PendingPayment => "PENDING_PAYMENT",
            Self::Paid => "PAID",
            Self::Expired => "EXPIRED",
            Self::Rejected => "REJECTED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "QUEUED" => Self::Queued,
            "PENDING_PAYMENT" => Self::PendingPayment,
            "PAID" => Self::Paid,
            "EXPIRED" => Self::Expired,
            "REJECTED" => Self::Rejected,
            _ => return None,
        })
    }
}

/// Why an order was written `REJECTED`. It decides what Redis does with
/// the reservation (see `resolve.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// The sale item had fewer units than the order.
    SoldOut,
    /// The buyer's record in the ledger would pass the per-user limit.
    OverLimit,
    /// Reconcile gave up a reservation that never became an order.
    Abandoned,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SoldOut => "SOLD_OUT",
            Self::OverLimit => "LIMIT_EXCEEDED",
            Self::Abandoned => "ABANDONED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "SOLD_OUT" => Self::SoldOut,
            "LIMIT_EXCEEDED" => Self::OverLimit,
            "ABANDONED" => Self::Abandoned,
            _ => return None,
        })
    }
}

/// An order as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub order_id: OrderId,
    pub sale_id: SaleId,
    pub user_id: UserId,
    pub quantity: Quantity,
    pub status: OrderStatus,
    pub created_at_ms: i64,
    /// The payment deadline; none while `QUEUED` or when `REJECTED`.
    pub expires_at_ms: Option<i64>,
    /// Why it is `REJECTED` (rows written before reasons were kept: none).
    pub reject_reason: Option<RejectReason>,
    /// For an `EXPIRED` order: the sale item's `returnSeq` its expiry set,
    /// the ledger position of its returned units (see `return_units.lua`).
    pub return_seq: Option<u64>,
}

impl Order {
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "orderId": self.order_id,
            "saleId": self.sale_id,
            "userId": self.user_id,
            "quantity": self.quantity,
            "status": self.status.as_str(),
            "createdAt": clock::rfc3339_ms(self.created_at_ms),
            "expiresAt": self.expires_at_ms.map(clock::rfc3339_ms),
        })
    }
}

/// An order about to be written, from one queue message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    pub message: OrderMessage,
    /// `createdAt` is the reservation time, not the write time: a retried
    /// batch then sends byte-identical items, which is what makes the
    /// transaction's `ClientRequestToken` idempotent, and the payment window
    /// runs from the moment the buyer was told yes.
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

impl NewOrder {
    pub fn new(message: OrderMessage, reserved_at_ms: i64, payment_window_secs: u32) -> Self {
        Self {
            message,
            created_at_ms: reserved_at_ms,
            expires_at_ms: reserved_at_ms + i64::from(payment_window_secs) * 1000,
        }
    }
}
