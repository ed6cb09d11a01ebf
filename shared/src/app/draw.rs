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
//! 3. After each chunk the winners' order messages are sent, ten to a
//!    `SendMessageBatch` call and a few calls at once ([`SEND_CONCURRENCY`]).
//!    A crash between the chunk and the send (or a send that failed) leaves
//!    QUEUED reservations, which reconcile's outbox relay sends; a second
//!    send of the same order id is written once by the order-writer.
//!
//! Until `drawDone`, purchases answer `DRAWING`, so nobody takes stock
//! ahead of the tickets.
//!
//! Who runs it: [`drive`], a part of the draw bounded in time
//! ([`HTTP_DRIVE_BUDGET`]) under a short lock, called by the first
//! purchases after the window and by a ticket holder's read of their ticket
//! ([`Drawer`], for the buyer's orders route), so the draw needs no
//! scheduler; reconcile's run finishes any draw nobody drove ([`finish`],
//! with a larger budget: its function may run longer).
//!
//! The budget, not a count of chunks, bounds a drive because the function
//! that drives is killed at its timeout whatever it was doing: a killed
//! drive answers its buyer with a gateway error instead of `DRAWING`,
//! holds the lock until it lapses and leaves the winners it had not sent to
//! reconcile. A drive starts a chunk only if the slowest chunk so far still
//! fits in what is left, and stops sending when the budget is spent; the
//! next driver carries on from `drawPos`.

use crate::clock;
use crate::domain::draw::{DrawSeed, draw_order};
use crate::domain::{OrderMessage, SaleId, UserId};
use crate::ports::{
    ChunkStep, DrawProgress, DrawStore, OrderQueue, OrderStep, SEND_BATCH_MAX, StoreError,
    TicketView, Won,
};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::time::Instant;

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
    #[error("the sale has ended")]
    Ended,
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
    /// Winners' messages this run sent.
    pub sent: u64,
    /// Winners' messages this run did not send (a failed entry, or the
    /// budget ran out between calls): reconcile's relay sends them.
    pub unsent: u64,
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
    run_until(store, queue, sale_id, chunk, max_chunks, None).await
}

/// [`run`], and with a `deadline` no chunk starts unless the slowest so far
/// (its decision and its sends) would still end by it, and no send call
/// starts after it.
pub async fn run_until<S: DrawStore, Q: OrderQueue>(
    store: &S,
    queue: &Q,
    sale_id: &SaleId,
    chunk: u64,
    max_chunks: Option<u64>,
    deadline: Option<Instant>,
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
    let mut slowest = Duration::ZERO;
    loop {
        if max_chunks.is_some_and(|max| report.chunks >= max) {
            return Ok(report);
        }
        if deadline.is_some_and(|d| Instant::now() + slowest >= d) {
            tracing::debug!(%sale_id, pos, "draw: budget spent; the next driver carries on");
            return Ok(report);
        }
        let started = Instant::now();
        match store.decide_chunk(sale_id, pos, chunk.max(1)).await? {
            ChunkStep::Decided {
                pos: next,
                total,
                won,
            } => {
                report.chunks += 1;
                report.tickets = total;
                report.won += won.len() as u64;
                let messages: Vec<OrderMessage> =
                    won.into_iter().map(|w| message_of(sale_id, w)).collect();
                let sent = send_winners(queue, sale_id, &messages, deadline).await;
                report.sent += sent;
                report.unsent += messages.len() as u64 - sent;
                slowest = slowest.max(started.elapsed());
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
            ChunkStep::Ended => return Err(DrawError::Ended),
        }
    }
}

/// A won ticket's order message, as a purchase's.
fn message_of(sale_id: &SaleId, w: Won) -> OrderMessage {
    OrderMessage {
        v: OrderMessage::VERSION,
        order_id: w.order_id,
        sale_id: sale_id.clone(),
        user_id: w.user_id,
        quantity: w.quantity,
        shard: 0,
        reserved_at: clock::rfc3339_ms(w.at_ms),
    }
}

/// How many batch calls of one chunk's winners are in flight at once: a
/// chunk of 100 winners is ten calls, sent in three rounds instead of ten,
/// without one drive opening many connections to the queue.
pub const SEND_CONCURRENCY: usize = 4;

/// Sends a chunk's winners in batches, [`SEND_CONCURRENCY`] calls at a time,
/// no round starting after `deadline`; how many were sent. The reservation
/// is the outbox: a message that failed or was never sent is relayed by
/// reconcile, never undone here.
async fn send_winners<Q: OrderQueue>(
    queue: &Q,
    sale_id: &SaleId,
    messages: &[OrderMessage],
    deadline: Option<Instant>,
) -> u64 {
    let mut sent = 0;
    let batches: Vec<&[OrderMessage]> = messages.chunks(SEND_BATCH_MAX).collect();
    for (n, round) in batches.chunks(SEND_CONCURRENCY).enumerate() {
        if n > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            let left: usize = batches[n * SEND_CONCURRENCY..]
                .iter()
                .map(|b| b.len())
                .sum();
            tracing::warn!(%sale_id, left, "draw: budget spent mid-chunk; reconcile relays the winners not sent");
            break;
        }
        let answers = join_all(round.iter().map(|batch| queue.send_batch(batch))).await;
        for (batch, outcomes) in round.iter().zip(answers) {
            for (message, outcome) in batch.iter().zip(outcomes) {
                match outcome {
                    Ok(()) => sent += 1,
                    Err(err) => {
                        tracing::warn!(%sale_id, order_id = %message.order_id, %err, "draw: order message not sent; reconcile relays the reservation");
                    }
                }
            }
        }
    }
    sent
}

/// Every future's output, the futures polled together (a few batch calls,
/// so a scan of them on each wake costs nothing).
pub async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut running: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = running.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in running.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
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

/// How long a [`drive`] run by the purchase and orders-api functions may
/// take (their timeout is 5 s): with the one call in flight when it runs
/// out (an SQS call is bounded by `SQS_TIMEOUT_MS`, 1.5 s by default; a
/// Redis call by `REDIS_TIMEOUT_MS`) and the purchase's own work, the
/// function still ends well before it is killed.
pub const HTTP_DRIVE_BUDGET: Duration = Duration::from_millis(1_500);

/// How long each drive of reconcile's [`finish`] may take, and how long the
/// whole finish may take: its function's timeout is minutes, but it has
/// every other sale to reconcile after this one.
pub const FINISH_DRIVE_BUDGET: Duration = Duration::from_secs(10);
pub const FINISH_BUDGET: Duration = Duration::from_secs(30);

/// How much longer than its budget a drive holds the draw's lock: the call
/// in flight when the budget runs out ends within it. A lock that lapses
/// while its holder still runs costs a racing drawer at worst (the
/// compare-and-set on `drawPos` keeps the draw exact); one whose holder was
/// killed delays the draw by at most its budget plus this.
const LOCK_SLACK: Duration = Duration::from_millis(2_500);

/// The draw lock's TTL for a drive of `budget`.
pub fn lock_ttl(budget: Duration) -> Duration {
    budget + LOCK_SLACK
}

/// Runs a due draw for at most [`HTTP_DRIVE_BUDGET`], if no one else is;
/// whether the draw is over.
pub async fn drive<S: DrawStore, Q: OrderQueue>(store: &S, queue: &Q, sale_id: &SaleId) -> bool {
    drive_within(store, queue, sale_id, HTTP_DRIVE_BUDGET).await
}

/// Runs a due draw for at most `budget`, if no one else is (a lock in Redis,
/// held [`lock_ttl`], keeps environments from all drawing at once; the
/// draw's compare-and-set keeps it exact without the lock); whether the
/// draw is over.
pub async fn drive_within<S: DrawStore, Q: OrderQueue>(
    store: &S,
    queue: &Q,
    sale_id: &SaleId,
    budget: Duration,
) -> bool {
    let deadline = Instant::now() + budget;
    // Whose lock it is: only the holder gives it back.
    let mut nonce = [0u8; 8];
    let _ = aws_lc_rs::rand::fill(&mut nonce);
    let token = format!("draw-{}-{}", clock::now_ms(), u64::from_le_bytes(nonce));
    match store.claim(sale_id, &token, lock_ttl(budget)).await {
        Ok(true) => {}
        Ok(false) => return false,
        Err(err) => {
            tracing::warn!(%sale_id, %err, "draw lock unavailable");
            return false;
        }
    }
    let ran = run_until(store, queue, sale_id, CHUNK, None, Some(deadline)).await;
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
/// nobody visits after its window still gets its draw), for at most
/// [`FINISH_BUDGET`]. Each drive is bounded and takes the draw's lock; this
/// stops early when a drive moves nothing (another caller holds the lock,
/// or the draw cannot go on: the next run tries again).
pub async fn finish(lottery: &dyn Lottery, sale_id: &SaleId) {
    let deadline = Instant::now() + FINISH_BUDGET;
    let mut last = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        if lottery
            .drive_within(sale_id, left.min(FINISH_DRIVE_BUDGET))
            .await
        {
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
    /// A drive of a due draw within `budget`.
    fn drive_within<'a>(&'a self, sale_id: &'a SaleId, budget: Duration) -> Boxed<'a, bool>;
    /// A drive as the HTTP functions run it ([`HTTP_DRIVE_BUDGET`]).
    fn drive<'a>(&'a self, sale_id: &'a SaleId) -> Boxed<'a, bool> {
        self.drive_within(sale_id, HTTP_DRIVE_BUDGET)
    }
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

    fn drive_within<'a>(&'a self, sale_id: &'a SaleId, budget: Duration) -> Boxed<'a, bool> {
        Box::pin(drive_within(&self.store, &self.queue, sale_id, budget))
    }
}

#[cfg(test)]
mod tests;
