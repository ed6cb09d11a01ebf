//! A lottery window's draw, run once whoever runs it and however often.
//!
//! 1. After the window closes, the order of the draw is the ticket holders
//!    sorted by HMAC-SHA256(seed, userId) ([`crate::domain::draw`]),
//!    recorded once (`draw_order.lua`: only if absent, only when the list
//!    is every ticket, only after the window by Redis's clock).
//! 2. Then chunks: `draw_chunk.lua` decides the tickets from the position
//!    the drawer read, only if meta `drawPos` is still there (a racing
//!    drawer that lost gets `Moved` and carries on from the new position),
//!    each ticket exactly as a purchase (stock, per-user limit,
//!    reservation, buyer count), and advances `drawPos`.
//! 3. After each chunk the winners' order messages are sent. A crash between
//!    the chunk and the send leaves QUEUED reservations, which reconcile's
//!    outbox relay sends; a second send of the same order id is written
//!    once by the order-writer.
//!
//! Until `drawDone`, purchases answer `DRAWING`, so nobody takes stock
//! ahead of the tickets.

use crate::clock;
use crate::domain::draw::{DrawSeed, draw_order};
use crate::domain::{OrderMessage, SaleId};
use crate::ports::{ChunkStep, DrawStore, OrderQueue, OrderStep, StoreError};

/// Tickets one script call decides: short enough that Redis answers
/// purchases in between.
pub const CHUNK: u64 = 100;

/// How often the holders are read again when a ticket came in between the
/// read and the order's record (only possible at the window's last
/// milliseconds).
const ORDER_ATTEMPTS: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum DrawError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the sale has no lottery window in the stock store")]
    NotLottery,
    #[error("the lottery window is still open")]
    WindowOpen,
    #[error("the sale is paused")]
    Paused,
    #[error("the recorded draw seed is malformed")]
    Seed,
    #[error("the tickets kept changing while the order was recorded")]
    Unsettled,
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrawReport {
    /// Tickets in the draw.
    pub tickets: u64,
    /// Chunks this run decided.
    pub chunks: u64,
    /// Tickets this run decided as won.
    pub won: u64,
    /// The draw is over (by this run or another).
    pub done: bool,
}

/// Runs the draw of `sale_id` to its end, or for at most `max_chunks`
/// chunks (a test's drawer stopped halfway).
pub async fn run<S: DrawStore, Q: OrderQueue>(
    store: &S,
    queue: &Q,
    sale_id: &SaleId,
    chunk: u64,
    max_chunks: Option<u64>,
) -> Result<DrawReport, DrawError> {
    let state = store
        .draw_state(sale_id)
        .await?
        .ok_or(DrawError::NotLottery)?;
    let mut report = DrawReport::default();
    if state.done {
        report.done = true;
        return Ok(report);
    }
    let mut pos = match state.pos {
        Some(pos) => pos,
        None => {
            let seed = DrawSeed::parse_hex(&state.seed_hex).map_err(|_| DrawError::Seed)?;
            record_order(store, sale_id, &seed).await?;
            0
        }
    };
    loop {
        if max_chunks.is_some_and(|max| report.chunks >= max) {
            return Ok(report);
        }
        match store.decide_chunk(sale_id, pos, chunk.max(1)).await? {
            ChunkStep::Decided {
                pos: next,
                total,
                won,
            } => {
                report.chunks += 1;
                report.tickets = total;
                report.won += won.len() as u64;
                for w in won {
                    let message = OrderMessage {
                        v: OrderMessage::VERSION,
                        order_id: w.order_id,
                        sale_id: sale_id.clone(),
                        user_id: w.user_id,
                        quantity: w.quantity,
                        shard: 0,
                        reserved_at: clock::rfc3339_ms(w.at_ms),
                    };
                    // The reservation is the outbox: a failed send is
                    // relayed by reconcile, never undone here.
                    if let Err(err) = queue.send(&message).await {
                        tracing::warn!(%sale_id, order_id = %message.order_id, %err, "draw: order message not sent; reconcile relays the reservation");
                    }
                }
                if next >= total {
                    report.done = true;
                    return Ok(report);
                }
                pos = next;
            }
            ChunkStep::Moved(now_at) => pos = now_at,
            ChunkStep::Done => {
                report.done = true;
                return Ok(report);
            }
            ChunkStep::NoOrder => return Err(DrawError::NotLottery),
            ChunkStep::Paused => return Err(DrawError::Paused),
        }
    }
}

/// Records the order of the draw, once (another drawer's counts too).
async fn record_order<S: DrawStore>(
    store: &S,
    sale_id: &SaleId,
    seed: &DrawSeed,
) -> Result<(), DrawError> {
    for _ in 0..ORDER_ATTEMPTS {
        let holders = store.ticket_holders(sale_id).await?;
        let order = draw_order(seed, &holders);
        match store.record_order(sale_id, &order).await? {
            OrderStep::Ordered(_) => return Ok(()),
            OrderStep::Open => return Err(DrawError::WindowOpen),
            OrderStep::NotLottery => return Err(DrawError::NotLottery),
            OrderStep::Stale => continue,
        }
    }
    Err(DrawError::Unsettled)
}
