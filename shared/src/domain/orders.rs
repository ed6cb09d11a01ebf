//! Orders: the rows the order-writer turns reservations into and their
//! states. The port to the table that holds them is
//! [`crate::ports::OrderStore`].
//!
//! States: `QUEUED` (accepted, row not written yet; never stored, derived
//! from the reservation) → `PENDING_PAYMENT` → `PAID` or `EXPIRED`;
//! `REJECTED` when DynamoDB refused the units Redis had let through (no
//! stock, or the buyer's limit: the ledger enforces both) or reconcile gave
//! the reservation up.
//!
//! What the API shows (`http::bodies::OrderView`): an order `PENDING_PAYMENT` past
//! its `expiresAt` is shown `EXPIRED` at once ([`Order::status_at`]); the
//! orders API releases it first (`app::release`), whoever reads it, so the
//! row, the unit and the buyer's count agree with what it says.

use crate::domain::money::Money;
use crate::domain::{OrderId, OrderMessage, PaymentId, Quantity, SaleId, UserId};

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
    /// What it costs: the sale's price times the quantity, recorded when
    /// the row is written (`None`: a sale without a price).
    pub amount: Option<Money>,
    /// When it was paid, and by which payment.
    pub paid_at_ms: Option<i64>,
    pub payment_id: Option<PaymentId>,
    /// Payments for it that came when it could no longer be paid (expired,
    /// paid by another payment, rejected): each is owed back to the buyer.
    pub refunds: Vec<PaymentId>,
    /// An order the waitlist was offered: the expired order whose unit it
    /// is (`offerOf`).
    pub offer_of: Option<OrderId>,
    /// For an `EXPIRED` order: how many of its units went to the waitlist
    /// as offers (`offeredUnits`); the rest went back to the stock.
    pub offered: u32,
}

impl Order {
    /// The status the API answers at `now_ms`: a `PENDING_PAYMENT` order
    /// whose payment window has closed is `EXPIRED` from that instant (it
    /// can no longer be paid). The orders API releases such an order before
    /// it answers (`app::release`), so its unit is back by then.
    pub fn status_at(&self, now_ms: i64) -> OrderStatus {
        match (self.status, self.expires_at_ms) {
            (OrderStatus::PendingPayment, Some(at)) if at <= now_ms => OrderStatus::Expired,
            (status, _) => status,
        }
    }
}

/// An order about to be written, from one queue message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    pub message: OrderMessage,
    /// `createdAt` is the reservation time, not the write time: the moment
    /// the buyer was told yes, the same for every delivery of the message.
    pub created_at_ms: i64,
    /// The payment deadline: the whole window from the write (invariant
    /// 11), however long the queue held the message. A reservation time
    /// later than the writer's clock (clocks of two machines) starts it
    /// there instead, so the window is never cut short.
    pub expires_at_ms: i64,
    /// The sale's price times the quantity; `None` without a price.
    pub amount: Option<Money>,
}

impl NewOrder {
    /// The order of `message`, reserved at `reserved_at_ms` and written at
    /// `written_at_ms` (the writer's clock).
    pub fn new(
        message: OrderMessage,
        reserved_at_ms: i64,
        written_at_ms: i64,
        payment_window_secs: u32,
    ) -> Self {
        Self {
            message,
            created_at_ms: reserved_at_ms,
            expires_at_ms: reserved_at_ms.max(written_at_ms)
                + i64::from(payment_window_secs) * 1000,
            amount: None,
        }
    }

    /// This order's row recorded `REJECTED` for `reason`: it holds no
    /// units and has no payment window.
    pub fn rejected(&self, reason: RejectReason) -> Order {
        Order {
            order_id: self.message.order_id.clone(),
            sale_id: self.message.sale_id.clone(),
            user_id: self.message.user_id.clone(),
            quantity: self.message.quantity,
            status: OrderStatus::Rejected,
            created_at_ms: self.created_at_ms,
            expires_at_ms: None,
            reject_reason: Some(reason),
            return_seq: None,
            amount: self.amount,
            paid_at_ms: None,
            payment_id: None,
            refunds: Vec::new(),
            offer_of: None,
            offered: 0,
        }
    }

    /// The same order at the sale's `price` (frozen from the start, so
    /// every redelivery computes the same amount, and a retried batch
    /// sends the same items).
    pub fn priced(mut self, price: Option<Money>) -> Self {
        self.amount = price.and_then(|p| p.times(self.message.quantity));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(status: OrderStatus, expires_at_ms: Option<i64>) -> Order {
        Order {
            order_id: OrderId::parse("o1").unwrap(),
            sale_id: SaleId::parse("s1").unwrap(),
            user_id: UserId::parse("u1").unwrap(),
            quantity: Quantity::ONE,
            status,
            created_at_ms: 0,
            expires_at_ms,
            reject_reason: None,
            return_seq: None,
            amount: None,
            paid_at_ms: None,
            payment_id: None,
            refunds: Vec::new(),
            offer_of: None,
            offered: 0,
        }
    }

    #[test]
    fn a_pending_order_past_its_window_is_expired_at_once() {
        let pending = order(OrderStatus::PendingPayment, Some(1_000));
        assert_eq!(pending.status_at(999), OrderStatus::PendingPayment);
        assert_eq!(pending.status_at(1_000), OrderStatus::Expired);
        // Every other state is what its row says.
        for status in [
            OrderStatus::Paid,
            OrderStatus::Rejected,
            OrderStatus::Queued,
        ] {
            assert_eq!(order(status, Some(1_000)).status_at(5_000), status);
        }
    }
}
