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
//!
//! Who runs it: [`drive`], a bounded part of the draw under a short lock,
//! called by the first purchases after the window and by a ticket holder's
//! read of their ticket ([`Drawer`], for the buyer's orders route), so the
//! draw needs no scheduler; reconcile's run finishes any draw nobody drove.

use crate::clock;
use crate::domain::draw::{DrawSeed, draw_order};
use crate::domain::{OrderMessage, SaleId, UserId};
use crate::ports::{
    ChunkStep, DrawProgress, DrawStore, OrderQueue, OrderStep, StoreError, TicketView,
};
use std::future::Future;
use std::pin::Pin;

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

/// How many chunks [`drive`] runs before it returns: the purchase or read
/// that runs it stays quick, and the next one carries on.
pub const CHUNKS_PER_DRIVE: u64 = 10;

/// How long one [`drive`] may hold the draw's lock: longer than its chunks
/// take, short enough that a crashed holder delays the draw little.
const DRIVE_LOCK_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs up to [`CHUNKS_PER_DRIVE`] chunks of a due draw, if no one else is
/// (a lock in Redis keeps environments from all drawing at once; the
/// draw's compare-and-set keeps it exact without the lock); whether the
/// draw is over.
pub async fn drive<S: DrawStore, Q: OrderQueue>(store: &S, queue: &Q, sale_id: &SaleId) -> bool {
    // Whose lock it is: only the holder gives it back.
    let mut nonce = [0u8; 8];
    let _ = aws_lc_rs::rand::fill(&mut nonce);
    let token = format!("draw-{}-{}", clock::now_ms(), u64::from_le_bytes(nonce));
    match store.claim(sale_id, &token, DRIVE_LOCK_TTL).await {
        Ok(true) => {}
        Ok(false) => return false,
        Err(err) => {
            tracing::warn!(%sale_id, %err, "draw lock unavailable");
            return false;
        }
    }
    let ran = run(store, queue, sale_id, CHUNK, Some(CHUNKS_PER_DRIVE)).await;
    if let Err(err) = store.unclaim(sale_id, &token).await {
        tracing::debug!(%sale_id, %err, "draw lock left to expire");
    }
    match ran {
        Ok(report) => report.done,
        Err(err) => {
            tracing::warn!(%sale_id, %err, "draw step failed; the next caller retries");
            false
        }
    }
}

/// Drives a closed window's draw to its end (reconcile's run: a sale
/// nobody visits after its window still gets its draw). Each drive is
/// bounded and takes the draw's lock; this stops early when a drive moves
/// nothing (another caller holds the lock, or the draw cannot go on: the
/// next run tries again).
pub async fn finish(lottery: &dyn Lottery, sale_id: &SaleId) {
    const MAX_DRIVES: usize = 1_000;
    let mut last = None;
    for _ in 0..MAX_DRIVES {
        if lottery.drive(sale_id).await {
            return;
        }
        let progress = lottery.progress(sale_id).await.ok().flatten();
        let progress = progress.map(|p| (p.decided, p.done));
        if progress.is_none_or(|(_, done)| done) || progress == last {
            return;
        }
        last = progress;
    }
}

/// A boxed future: [`Lottery`] is held as a trait object by the query
/// service, whose own type does not name a queue.
pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The lottery as the buyer's and the operator's reads need it: a buyer's
/// ticket, the draw's progress, and a bounded drive of a due draw.
pub trait Lottery: Send + Sync {
    fn ticket<'a>(
        &'a self,
        sale_id: &'a SaleId,
        user_id: &'a UserId,
    ) -> Boxed<'a, Result<Option<TicketView>, StoreError>>;
    fn progress<'a>(
        &'a self,
        sale_id: &'a SaleId,
    ) -> Boxed<'a, Result<Option<DrawProgress>, StoreError>>;
    fn drive<'a>(&'a self, sale_id: &'a SaleId) -> Boxed<'a, bool>;
}

/// [`Lottery`] on a draw store and the queue winners are sent to.
pub struct Drawer<S, Q> {
    pub store: S,
    pub queue: Q,
}

impl<S: DrawStore, Q: OrderQueue> Lottery for Drawer<S, Q> {
    fn ticket<'a>(
        &'a self,
        sale_id: &'a SaleId,
        user_id: &'a UserId,
    ) -> Boxed<'a, Result<Option<TicketView>, StoreError>> {
        Box::pin(self.store.ticket(sale_id, user_id))
    }

    fn progress<'a>(
        &'a self,
        sale_id: &'a SaleId,
    ) -> Boxed<'a, Result<Option<DrawProgress>, StoreError>> {
        Box::pin(self.store.draw_progress(sale_id))
    }

    fn drive<'a>(&'a self, sale_id: &'a SaleId) -> Boxed<'a, bool> {
        Box::pin(drive(&self.store, &self.queue, sale_id))
    }
}
