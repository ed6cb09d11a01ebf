//! The lottery draw's port ([`DrawStore`]): where a sale's tickets, the
//! draw's order and its progress are kept (Redis, next to the stock the
//! draw takes), and the steps `app::draw` runs on them.

use crate::domain::{OrderId, Quantity, SaleId, UserId};
use crate::ports::StoreError;
use std::future::Future;

/// Where a lottery sale's draw stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawState {
    /// When the window closes (epoch ms).
    pub window_end_ms: i64,
    /// The seed, hex, as recorded.
    pub seed_hex: String,
    /// Tickets decided so far (`None`: the order is not recorded yet).
    pub pos: Option<u64>,
    pub done: bool,
}

/// Where one buyer's ticket stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TicketStatus {
    /// Held; the draw has not decided it yet.
    Held,
    /// Drawn: its order (a reservation sent like any purchase's).
    Won(OrderId),
    /// Drawn: too little stock, or the buyer was at their limit.
    Lost,
}

/// A buyer's ticket, as the buyer's orders route shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketView {
    pub quantity: Quantity,
    pub status: TicketStatus,
}

/// How far a sale's draw has come (the operator's view).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawProgress {
    /// Tickets held.
    pub tickets: u64,
    /// Tickets decided so far.
    pub decided: u64,
    /// Tickets in the recorded order; `None` until it is recorded.
    pub total: Option<u64>,
    pub done: bool,
}

/// The answer of recording the draw's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderStep {
    /// Recorded (now, or by another drawer before) with this many tickets.
    Ordered(u64),
    /// The window is still open.
    Open,
    /// The list given is not every ticket: read them again.
    Stale,
    /// Not a lottery sale, or not in the store.
    NotLottery,
}

/// A ticket the draw won: its reservation, to be sent as an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Won {
    pub order_id: OrderId,
    pub user_id: UserId,
    pub quantity: Quantity,
    pub at_ms: i64,
}

/// The answer of deciding one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkStep {
    /// Decided up to `pos` of `total`; these tickets won.
    Decided { pos: u64, total: u64, won: Vec<Won> },
    /// Another drawer moved the position first: nothing done.
    Moved(u64),
    /// The draw is over.
    Done,
    /// The order is not recorded.
    NoOrder,
    /// The sale is paused: nothing done.
    Paused,
    /// The sale has ended: nothing is decided after the end.
    Ended,
}

/// The draw's reads and steps, each one atomic.
pub trait DrawStore: Send + Sync {
    /// The sale's window, seed and progress; `None` for a sale without a
    /// window (or not in the store).
    fn draw_state(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<DrawState>, StoreError>> + Send;

    /// One buyer's ticket; `None` when they hold none.
    fn ticket(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> impl Future<Output = Result<Option<TicketView>, StoreError>> + Send;

    /// The draw's progress; `None` for a sale without a window in the store.
    fn draw_progress(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<DrawProgress>, StoreError>> + Send;

    /// Every ticket holder (in no particular order).
    fn ticket_holders(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Vec<String>, StoreError>> + Send;

    /// Records the order, only if none is recorded.
    fn record_order(
        &self,
        sale_id: &SaleId,
        order: &[String],
    ) -> impl Future<Output = Result<OrderStep, StoreError>> + Send;

    /// Takes the lock that lets one purchase at a time run the draw
    /// (`sale:{S}:lock:draw`, expiring after `ttl`); false when taken.
    fn claim(
        &self,
        sale_id: &SaleId,
        token: &str,
        ttl: std::time::Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Gives the lock back, if `token` still holds it.
    fn unclaim(
        &self,
        sale_id: &SaleId,
        token: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Decides up to `size` tickets from `pos`, only if the draw is at `pos`.
    fn decide_chunk(
        &self,
        sale_id: &SaleId,
        pos: u64,
        size: u64,
    ) -> impl Future<Output = Result<ChunkStep, StoreError>> + Send;
}
