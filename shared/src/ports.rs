//! Ports: the traits where the domain meets Redis, SQS and DynamoDB: the
//! stock store, the order queue, the sale catalog, the order store, and
//! what the operations path (jobs, reconcile, invariants, live view) needs
//! beyond them: stock administration ([`StockAdmin`]), the catalog's
//! counters and reports ([`CatalogAdmin`]), the order ledger's reads
//! ([`OrderLedger`]) and queue inspection ([`QueueInspector`]), declared in
//! `ports/operations.rs` and re-exported here; and the
//! payment store ([`PaymentStore`]: payments applied to orders, refunds);
//! the lottery draw's store ([`DrawStore`], `ports/draw.rs`).
//! Real adapters live in [`crate::adapters`]; [`crate::adapters::memory`] has
//! in-memory ones.
//!
//! Futures are declared `Send` so services generic over these traits can be
//! driven from a multi-threaded runtime.

use crate::domain::ledger::{LedgerPage, LedgerPosition, SaleCounters};
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::stock_state::{
    Holding, LoadOutcome, PendingTransfer, RedisSnapshot, Returned, SnapshotHead, SnapshotSink,
};
use crate::domain::{IdempotencyKey, OrderId, OrderMessage, Quantity, Sale, SaleId, UserId};
use std::collections::HashMap;
use std::future::Future;

mod dead_letters;
mod draw;
mod operations;
mod waitlist;
pub use dead_letters::*;
pub use draw::*;
pub use operations::*;
pub use waitlist::*;

/// One purchase attempt, already parsed.
#[derive(Debug, Clone, Copy)]
pub struct ReserveRequest<'a> {
    pub sale_id: &'a SaleId,
    pub user_id: &'a UserId,
    pub quantity: Quantity,
    pub idempotency_key: Option<&'a IdempotencyKey>,
    /// The nonce of a gate pass whose signature, binding and expiry were
    /// verified; the script checks it was not used before.
    pub gate_nonce: Option<&'a str>,
    /// When that pass was issued: one from before the sale's keys were
    /// last loaded from the ledger is refused.
    pub gate_issued_ms: Option<i64>,
    /// The caller's address, for the per-address token bucket.
    pub source_ip: Option<&'a str>,
}

/// A reservation: what the purchase script recorded atomically with the
/// deduction. It is the outbox: reconciliation finds reservations without an
/// order and relays them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub order_id: OrderId,
    pub quantity: Quantity,
    pub reserved_at_ms: i64,
    pub shard: u32,
}

/// Every answer the stock store can give to one purchase attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    /// Stock taken, buyer counted, reservation recorded.
    Reserved(Reservation),
    /// The same `Idempotency-Key` was reserved before: nothing changed but
    /// the reservation's marks.
    Replayed {
        reservation: Reservation,
        /// Its order is not written yet: whether any send of its message
        /// reached the queue is unknown (the first request's answer may
        /// have been lost before it sent), so the caller sends it again
        /// before answering. The buyer's rate limit paid for the send.
        resend: bool,
    },
    /// The same `Idempotency-Key` was reserved before, and its order has
    /// since ended without being paid (`EXPIRED`, or `REJECTED`: given up,
    /// or refused by the ledger): nothing changed, and no order is coming.
    ReplayedEnded {
        order_id: OrderId,
        status: crate::domain::orders::OrderStatus,
    },
    /// No keys for this sale: unknown, not loaded yet, or lost.
    SaleMissing,
    /// An operator paused the sale.
    Paused,
    NotStarted {
        start_ms: i64,
    },
    Ended,
    /// A gated sale and no valid, unused pass.
    GateRequired,
    /// The buyer's or the address's token bucket is empty.
    RateLimited {
        retry_after_ms: u64,
    },
    LimitExceeded {
        order_ids: Vec<OrderId>,
    },
    SoldOut {
        remaining: u32,
    },
    /// A lottery window has closed and its draw is not done.
    Drawing,
    /// A lottery window is open: the buyer holds a ticket (new, or the one
    /// they got before) and no stock was taken.
    Ticket {
        quantity: Quantity,
        at_ms: i64,
        /// When the window closes and the draw is due (epoch ms).
        draw_at_ms: i64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Stock returned (capped at the sale's total), buyer count lowered.
    Released { stock: u32 },
    /// No reservation with that id: already released, or never made.
    NotFound,
    /// The reservation moved past `QUEUED` (its order was written): its
    /// stock is not ours to give back.
    NotReleasable,
    /// Still `QUEUED`, and a keyed retry with its key was answered with it
    /// (`replayed`): not this caller's to give back (that retry may have
    /// promised it), and nothing says its message reached the queue.
    HeldByRetry,
    /// The sale's keys are gone; nothing was changed.
    SaleMissing,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Connection refused, timed out, or Redis answered with an error.
    /// The outcome of a write is unknown.
    #[error("stock store unavailable: {0}")]
    Unavailable(String),
    /// The script answered something this code does not understand.
    #[error("unexpected reply from the stock store: {0}")]
    Protocol(String),
}

/// What became of a reservation after the order-writer dealt with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The order row exists.
    Written,
    /// DynamoDB had no units for it; the buyer holds nothing, and the unit
    /// Redis took was one it over-counted: it stays taken.
    Rejected,
    /// The buyer's ledger record was at the limit: Redis had lost count of
    /// an order of theirs (a failover). This reservation stands in for that
    /// lost one: its units and the buyer's count stay.
    RejectedOverLimit,
    /// Reconcile gave it up; no units were ever taken in DynamoDB, so Redis
    /// gives them back (once: only from `QUEUED`).
    Abandoned,
    /// Reconcile gave it up and the ledger offered `offered` of its units
    /// to the sale's waitlist in the same transaction: Redis gives back
    /// only the rest (the offers are other buyers' orders).
    AbandonedToLine { offered: u32 },
}

impl Resolution {
    /// The mode `resolve.lua` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Written => "WRITTEN",
            Self::Rejected => "REJECTED",
            Self::RejectedOverLimit => "REJECTED_LIMIT",
            Self::Abandoned | Self::AbandonedToLine { .. } => "ABANDONED",
        }
    }

    /// Units of the reservation the ledger offered to the waitlist.
    pub fn offered(self) -> u32 {
        match self {
            Self::AbandonedToLine { offered } => offered,
            _ => 0,
        }
    }

    /// What `row` says of its reservation ([`Self::of_row`]), with the
    /// units a give-up offered to the waitlist.
    pub fn of_order(row: &crate::domain::orders::Order) -> Option<Self> {
        match Self::of_row(row.status, row.reject_reason)? {
            Self::Abandoned if row.offered > 0 => Some(Self::AbandonedToLine {
                offered: row.offered,
            }),
            other => Some(other),
        }
    }

    /// What a row in the ledger says of its reservation; `None` while it
    /// holds nothing that Redis must follow (expired: the release's part).
    pub fn of_row(
        status: crate::domain::orders::OrderStatus,
        reason: Option<crate::domain::orders::RejectReason>,
    ) -> Option<Self> {
        use crate::domain::orders::{OrderStatus as S, RejectReason as R};
        match (status, reason) {
            (S::PendingPayment | S::Paid, _) => Some(Self::Written),
            (S::Rejected, Some(R::OverLimit)) => Some(Self::RejectedOverLimit),
            (S::Rejected, Some(R::Abandoned)) => Some(Self::Abandoned),
            (S::Rejected, _) => Some(Self::Rejected),
            (S::Queued | S::Expired, _) => None,
        }
    }
}

/// What Redis holds for a sale right now (read-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StockView {
    pub remaining: i64,
    pub paused: bool,
    /// The reservation asked for, if any.
    pub reservation: Option<ReservationRecord>,
}

/// A reservation as stored by the purchase script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationRecord {
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: i64,
    /// `QUEUED`, `WRITTEN` or `REJECTED`.
    pub state: String,
}

pub trait StockStore: Send + Sync {
    fn reserve(
        &self,
        request: ReserveRequest<'_>,
    ) -> impl Future<Output = Result<ReserveOutcome, StoreError>> + Send;

    fn release(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
    ) -> impl Future<Output = Result<ReleaseOutcome, StoreError>> + Send;

    /// Marks a reservation written or rejected (see `resolve.lua`). Returns
    /// false when there was no such reservation.
    fn resolve(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        resolution: Resolution,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Remaining stock, status and optionally one reservation; `None` when
    /// the sale has no keys.
    fn view(
        &self,
        sale_id: &SaleId,
        order_id: Option<&OrderId>,
    ) -> impl Future<Output = Result<Option<StockView>, StoreError>> + Send;

    /// Adds purchase answers (outcome code, count) to the sale's tally for
    /// the operator dashboard. Returns false when the store does not hold
    /// the sale (nothing is written for it).
    fn add_outcomes(
        &self,
        sale_id: &SaleId,
        counts: &[(&'static str, u64)],
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// A buyer's reservations of a sale (their order ids and states), for
    /// `GET /sales/{saleId}/orders`; empty when the store holds none.
    fn buyer_reservations(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
    ) -> impl Future<Output = Result<Vec<(OrderId, ReservationRecord)>, StoreError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }

    /// Whether a reservation of `(sale, user, key)` may exist, as known
    /// from a read made after `since` (`false` is certain). The sold-out
    /// fast path answers a keyed request itself only on `false`
    /// ([`crate::domain::keyed_filter`]); a store that cannot tell says `true`.
    fn keyed_may_exist(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
        _key: &IdempotencyKey,
        _since: tokio::time::Instant,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        std::future::ready(Ok(true))
    }

    /// How often the rate limiter failed open (its own key broken) in this
    /// environment; the purchase went ahead each time.
    fn limiter_failures(&self) -> u64 {
        0
    }

    /// Keeps why the order-writer could not write an order this time (the
    /// DLQ view's `lastError`), replacing what was kept before. Best effort:
    /// a store that keeps nothing says `Ok`.
    fn record_write_error(
        &self,
        _sale_id: &SaleId,
        _failure: &WriteFailure,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(Ok(()))
    }
}

/// Why the order-writer could not write one order on one receive.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteFailure {
    pub order_id: OrderId,
    pub message_id: String,
    pub error: String,
    pub at_ms: i64,
}

/// How a send failed. The distinction decides whether stock may go back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The queue definitely did not take the message (it answered with an
    /// error, or the request was never sent).
    #[error("queue rejected the message: {0}")]
    Rejected(String),
    /// The message may or may not be on the queue (timeout, broken
    /// connection after sending). Keep the reservation; reconcile decides.
    #[error("queue outcome unknown: {0}")]
    Ambiguous(String),
}

/// The most messages one [`OrderQueue::send_batch`] call carries (SQS's
/// `SendMessageBatch` takes at most ten entries).
pub const SEND_BATCH_MAX: usize = 10;

pub trait OrderQueue: Send + Sync {
    fn send(&self, message: &OrderMessage) -> impl Future<Output = Result<(), SendError>> + Send;

    /// Sends `messages` (at most [`SEND_BATCH_MAX`] make one call; more are
    /// sent as several): each message's own outcome, in the same order, as
    /// [`Self::send`] would report it. One call instead of ten is what lets
    /// a lottery draw's winners fit in the function that draws them. The
    /// default sends them one by one, for a queue with no batch call.
    fn send_batch(
        &self,
        messages: &[OrderMessage],
    ) -> impl Future<Output = Vec<Result<(), SendError>>> + Send {
        async move {
            let mut outcomes = Vec::with_capacity(messages.len());
            for message in messages {
                outcomes.push(self.send(message).await);
            }
            outcomes
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("sale catalog unavailable: {0}")]
    Unavailable(String),
    #[error("sale item is malformed: {0}")]
    Malformed(String),
}

/// The source of truth for which sales exist (the `sales` table).
pub trait SaleCatalog: Send + Sync {
    fn get_sale(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<Sale>, CatalogError>> + Send;

    /// Every sale (the table holds one small item per sale).
    fn list_sales(&self) -> impl Future<Output = Result<Vec<Sale>, CatalogError>> + Send;
}

// ---------------------------------------------------------------- orders

/// How writing one order on its own went.
// One value per write, returned and dropped: an `Order` inline costs
// less than boxing it on every answer.
#[allow(clippy::large_enum_variant)]
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
// One value per write, returned and dropped: an `Order` inline costs
// less than boxing it on every answer.
#[allow(clippy::large_enum_variant)]
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
    /// sale update), DynamoDB's `CancellationReasons`. Cancelled only for
    /// contention ([`only_contention`]), the same transaction may succeed
    /// if sent again; otherwise the caller falls back to single writes.
    Cancelled(Vec<String>),
}

/// Whether a transaction's cancellation reasons (one code per item) say
/// it met only contention: another transaction in flight on one of its
/// items (`TransactionConflict`) or a throttled item (`ThrottlingError`,
/// `ProvisionedThroughputExceeded`), every other item `None`. No condition
/// failed, so the same transaction sent again after a pause can succeed.
pub fn only_contention(codes: &[String]) -> bool {
    const CONTENTION: [&str; 3] = [
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
    ];
    codes.iter().any(|c| CONTENTION.contains(&c.as_str()))
        && codes
            .iter()
            .all(|c| c == "None" || CONTENTION.contains(&c.as_str()))
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

impl PayOutcome {
    /// What the buyer's stand-in answers for its settlement (one that
    /// records no refund: no money moved).
    pub fn of_stand_in(settlement: Settlement) -> Self {
        match settlement {
            Settlement::Paid(order) => Self::Paid(order),
            Settlement::Replayed(_, order) => Self::AlreadyPaid(order),
            // Recording no refund, a store never answers these.
            Settlement::RefundNeeded(order) => Self::NotPayable(order.status),
            Settlement::ForeignPayment(_) => Self::NotPayable(OrderStatus::Paid),
            Settlement::NotPayable(order) => match order.status {
                // Paid by the provider: a click after it is the same success.
                OrderStatus::Paid => Self::AlreadyPaid(order),
                OrderStatus::Expired | OrderStatus::PendingPayment => Self::Expired,
                other => Self::NotPayable(other),
            },
        }
    }
}

// One value per write, returned and dropped: an `Order` inline costs
// less than boxing it on every answer.
#[allow(clippy::large_enum_variant)]
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
    /// A network fault, a timeout, an error of the service: retrying may
    /// succeed.
    #[error("order store unavailable: {0}")]
    Transient(String),
    /// Nothing was written because an item of the write was held by
    /// another transaction in flight or throttled (a cancellation only for
    /// contention, or `TransactionConflictException`): the same write
    /// after a short pause is likely to succeed.
    #[error("order store contended: {0}")]
    Contention(String),
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

    /// The buyer's stand-in for the payment provider: `PENDING_PAYMENT`
    /// and not expired becomes `PAID`, through the same settlement as the
    /// provider's callback ([`PaymentStore::settle`]) with the order's own
    /// payment id, so paying again is the same success.
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

    /// [`Self::expire`] of many orders, in as few transactions as the store
    /// takes: each moves a sale item once for all of its orders in it and
    /// numbers their returns consecutively, so the hot item's write rate,
    /// not the number of orders, bounds how fast a sale's unpaid units go
    /// back. Each order's outcome, in the order given; `Err` only when
    /// nothing could be read.
    fn expire_many(
        &self,
        order_ids: &[OrderId],
        now_ms: i64,
    ) -> impl Future<Output = Result<Vec<Result<ExpireOutcome, OrderStoreError>>, OrderStoreError>> + Send;
}

// --------------------------------------------------------------- payments

pub use crate::domain::payment::{Payment, PaymentOutcome, PaymentRecord};

/// How applying one payment went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// This payment made the order `PAID`, now; the order as it is.
    Paid(Order),
    /// This payment was recorded as owed back, now: the order could not be
    /// paid, and stays as it was but for the refund mark.
    RefundNeeded(Order),
    /// This payment id was applied before: what it did then, and the order
    /// as it stands. Nothing changed.
    Replayed(PaymentOutcome, Order),
    /// This payment id was applied to another order: nothing changed.
    ForeignPayment(PaymentRecord),
    /// The order cannot be paid and the caller asked not to record refunds
    /// (the stand-in: no money moved). Nothing changed; the order as it is.
    NotPayable(Order),
}

/// The payments' records and their effect on orders (the `orders` table
/// holds them beside the orders they pay).
pub trait PaymentStore: Send + Sync {
    /// Applies `payment` to `order` (as the caller read it), exactly once
    /// per payment id: the order becomes `PAID` by it (only if it is
    /// `PENDING_PAYMENT` and its window is open at `payment.at_ms`), or,
    /// when it cannot be paid and `record_refund`, is marked as owed a
    /// refund for it (its status stays); then the payment is recorded.
    /// Concurrent calls (same or other payment ids, and the expiry) have
    /// exactly one effect on the order.
    fn settle(
        &self,
        order: &Order,
        payment: &Payment,
        record_refund: bool,
    ) -> impl Future<Output = Result<Settlement, OrderStoreError>> + Send;

    /// The payments of a sale recorded as needing a refund, oldest first.
    fn refunds_of_sale(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Vec<PaymentRecord>, OrderStoreError>> + Send;
}
