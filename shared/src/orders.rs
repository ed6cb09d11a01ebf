//! Orders: the rows the order-writer turns reservations into, their states,
//! and the port to the table that holds them.
//!
//! States: `QUEUED` (accepted, row not written yet; never stored, derived
//! from the reservation) → `PENDING_PAYMENT` → `PAID` or `EXPIRED`;
//! `REJECTED` when DynamoDB refused the units Redis had let through.

use crate::clock;
use crate::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};
use std::future::Future;

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

/// How writing one order on its own went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SingleWrite {
    Written,
    /// The row was already there (a redelivery): success, nothing changed.
    Duplicate,
    /// The sale item has fewer units than the order: the database stopped an
    /// oversell that Redis let through.
    NoStock,
}

/// How writing a whole sale group in one transaction went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupWrite {
    Written,
    /// Cancelled; the reasons' codes, one per item (orders first, then the
    /// sale update), for the log. The caller falls back to single writes.
    Cancelled(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayOutcome {
    Paid(Order),
    /// Paid before: paying again is the same success.
    AlreadyPaid(Order),
    Expired,
    NotPayable(OrderStatus),
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpireOutcome {
    /// Now `EXPIRED`; its units went back to the sale item.
    Expired(Order),
    /// Paid, expired already, or not yet due: nothing changed.
    NotExpirable,
    NotFound,
}

#[derive(Debug, thiserror::Error)]
pub enum OrderStoreError {
    /// Throttling, a conflict, a network fault: retrying may succeed.
    #[error("order store unavailable: {0}")]
    Transient(String),
    /// The sale item is missing: orders for it cannot be written.
    #[error("sale {0} is not in the sales table")]
    SaleMissing(SaleId),
    #[error("order item is malformed: {0}")]
    Malformed(String),
}

/// The `orders` table (and the counters of the `sales` table it moves).
pub trait OrderStore: Send + Sync {
    /// All orders of one sale and one update of the sale item, in one
    /// transaction: all written or none.
    fn write_group(
        &self,
        sale_id: &SaleId,
        orders: &[NewOrder],
        request_token: &str,
    ) -> impl Future<Output = Result<GroupWrite, OrderStoreError>> + Send;

    fn write_single(
        &self,
        order: &NewOrder,
    ) -> impl Future<Output = Result<SingleWrite, OrderStoreError>> + Send;

    /// Records an order the database refused as `REJECTED` (no units held).
    fn write_rejected(
        &self,
        order: &NewOrder,
    ) -> impl Future<Output = Result<(), OrderStoreError>> + Send;

    fn get(
        &self,
        order_id: &OrderId,
    ) -> impl Future<Output = Result<Option<Order>, OrderStoreError>> + Send;

    /// `PENDING_PAYMENT` and not expired becomes `PAID`; one conditional write.
    fn pay(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> impl Future<Output = Result<PayOutcome, OrderStoreError>> + Send;

    /// `PENDING_PAYMENT` past its deadline becomes `EXPIRED` and its units go
    /// back to the sale item, in one transaction. Races with `pay` have
    /// exactly one winner: both are conditional on `PENDING_PAYMENT`.
    fn expire(
        &self,
        order_id: &OrderId,
        now_ms: i64,
    ) -> impl Future<Output = Result<ExpireOutcome, OrderStoreError>> + Send;
}
