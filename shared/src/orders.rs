//! Orders: the rows the order-writer turns reservations into, their states,
//! and the port to the table that holds them.
//!
//! States: `QUEUED` (accepted, row not written yet; never stored, derived
//! from the reservation) → `PENDING_PAYMENT` → `PAID` or `EXPIRED`;
//! `REJECTED` when DynamoDB refused the units Redis had let through (no
//! stock, or the buyer's limit: the ledger enforces both) or reconcile gave
//! the reservation up.

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

/// How writing one order on its own went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SingleWrite {
    Written,
    /// The row was already there (a redelivery, or reconcile's give-up got
    /// there first): nothing changed; the row as it stands.
    Duplicate(Order),
    /// The sale item has fewer units than the order: the database stopped an
    /// oversell that Redis let through.
    NoStock,
    /// The buyer's record would pass the per-user limit: the database
    /// stopped a buyer Redis lost count of (a failover that lost writes).
    OverLimit,
}

/// How recording a rejection went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectWrite {
    /// The `REJECTED` row is written.
    Recorded,
    /// A row was there already, and stays as it is.
    Exists(Order),
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
    /// All orders of one sale, their buyers' records (each kept within
    /// `per_user_limit`) and one update of the sale item, in one
    /// transaction: all written or none.
    fn write_group(
        &self,
        sale_id: &SaleId,
        orders: &[NewOrder],
        per_user_limit: u32,
        request_token: &str,
    ) -> impl Future<Output = Result<GroupWrite, OrderStoreError>> + Send;

    fn write_single(
        &self,
        order: &NewOrder,
        per_user_limit: u32,
    ) -> impl Future<Output = Result<SingleWrite, OrderStoreError>> + Send;

    /// Records an order that holds no units as `REJECTED`, only if no row
    /// has that id: a written order is never turned into a rejection.
    fn write_rejected(
        &self,
        order: &NewOrder,
        reason: RejectReason,
    ) -> impl Future<Output = Result<RejectWrite, OrderStoreError>> + Send;

    fn get(
        &self,
        order_id: &OrderId,
    ) -> impl Future<Output = Result<Option<Order>, OrderStoreError>> + Send;

    /// One buyer's orders of one sale, every status (an index: it may lag
    /// the table by a moment).
    fn orders_of_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> impl Future<Output = Result<Vec<Order>, OrderStoreError>> + Send;

    /// `PENDING_PAYMENT` and not expired becomes `PAID`; one conditional write.
    fn pay(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> impl Future<Output = Result<PayOutcome, OrderStoreError>> + Send;

    /// `PENDING_PAYMENT` past its deadline becomes `EXPIRED`, its units go
    /// back to the sale item and off its buyer's record, in one transaction
    /// that also numbers the return (`returnSeq`). Races with `pay` have
    /// exactly one winner: both are conditional on `PENDING_PAYMENT`.
    fn expire(
        &self,
        order_id: &OrderId,
        now_ms: i64,
    ) -> impl Future<Output = Result<ExpireOutcome, OrderStoreError>> + Send;
}
