//! Unit tests of the draw's drive on tokio's paused clock: a drive fits in
//! its time budget however slow the queue, and a drive killed midway (as
//! Lambda kills a function at its timeout) is finished by the next drivers,
//! its unsent winners relayed by reconcile. The draw store here is a
//! stand-in for `draw_chunk.lua` over the in-memory stock store: each won
//! ticket is reserved exactly as a purchase is, so reconcile's relay sees
//! the draw's `QUEUED` reservations as it sees them in Redis.

use super::*;
use crate::adapters::memory::MemoryQueue;
use crate::app::fixture::Stores;
use crate::domain::Quantity;
use crate::ports::{
    DrawState, OrderStore, Reservation, ReserveOutcome, ReserveRequest, Resolution, StockStore,
    TicketStatus, Won,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The purchase and orders-api functions' drive budget.
const BUDGET: Duration = HTTP_DRIVE_BUDGET;

/// A Redis script's round trip, in the paused clock.
const SCRIPT_TRIP: Duration = Duration::from_millis(2);

#[derive(Default)]
struct Inner {
    tickets: BTreeMap<String, u64>,
    order: Option<Vec<String>>,
    pos: u64,
    done: bool,
    decided: HashMap<String, TicketStatus>,
    lock: Option<(String, Instant)>,
}

/// `draw_order.lua`, `draw_chunk.lua` and the draw's lock, over the
/// fixture's stock store.
#[derive(Clone)]
struct TestDraw {
    stock: crate::adapters::memory::MemoryStock,
    inner: Arc<tokio::sync::Mutex<Inner>>,
}

impl TestDraw {
    fn new(world: &Stores, tickets: u64) -> Self {
        let inner = Inner {
            tickets: (0..tickets).map(|i| (format!("t{i:04}"), 1)).collect(),
            ..Inner::default()
        };
        Self {
            stock: world.stock.clone(),
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
        }
    }

    async fn pos(&self) -> u64 {
        self.inner.lock().await.pos
    }

    async fn winners(&self) -> BTreeSet<String> {
        self.inner
            .lock()
            .await
            .decided
            .values()
            .filter_map(|s| match s {
                TicketStatus::Won(id) => Some(id.to_string()),
                _ => None,
            })
            .collect()
    }
}

impl DrawStore for TestDraw {
    async fn draw_state(&self, _sale_id: &SaleId) -> Result<Option<DrawState>, StoreError> {
        let inner = self.inner.lock().await;
        Ok(Some(DrawState {
            window_end_ms: 0,
            seed_hex: "00".repeat(32),
            pos: inner.order.as_ref().map(|_| inner.pos),
            done: inner.done,
        }))
    }

    async fn ticket(
        &self,
        _sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Option<TicketView>, StoreError> {
        let inner = self.inner.lock().await;
        Ok(inner.tickets.get(user_id.as_str()).map(|q| TicketView {
            quantity: Quantity::new(*q).unwrap(),
            status: inner
                .decided
                .get(user_id.as_str())
                .cloned()
                .unwrap_or(TicketStatus::Held),
        }))
    }

    async fn draw_progress(&self, _sale_id: &SaleId) -> Result<Option<DrawProgress>, StoreError> {
        let inner = self.inner.lock().await;
        Ok(Some(DrawProgress {
            tickets: inner.tickets.len() as u64,
            decided: inner.pos,
            total: inner.order.as_ref().map(|o| o.len() as u64),
            done: inner.done,
        }))
    }

    async fn ticket_holders(&self, _sale_id: &SaleId) -> Result<Vec<String>, StoreError> {
        Ok(self.inner.lock().await.tickets.keys().cloned().collect())
    }

    async fn record_order(
        &self,
        _sale_id: &SaleId,
        order: &[String],
    ) -> Result<OrderStep, StoreError> {
        let mut inner = self.inner.lock().await;
        if let Some(recorded) = &inner.order {
            return Ok(OrderStep::Ordered(recorded.len() as u64));
        }
        let given: BTreeSet<&String> = order.iter().collect();
        if given.len() != inner.tickets.len() || !inner.tickets.keys().all(|t| given.contains(t)) {
            return Ok(OrderStep::Stale);
        }
        inner.order = Some(order.to_vec());
        Ok(OrderStep::Ordered(order.len() as u64))
    }

    async fn claim(
        &self,
        _sale_id: &SaleId,
        token: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut inner = self.inner.lock().await;
        let now = Instant::now();
        if inner.lock.as_ref().is_some_and(|(_, until)| *until > now) {
            return Ok(false);
        }
        inner.lock = Some((token.to_owned(), now + ttl));
        Ok(true)
    }

    async fn unclaim(&self, _sale_id: &SaleId, token: &str) -> Result<(), StoreError> {
        let mut inner = self.inner.lock().await;
        if inner.lock.as_ref().is_some_and(|(t, _)| t == token) {
            inner.lock = None;
        }
        Ok(())
    }

    /// Atomic as the script is: the round trip comes first, then the whole
    /// chunk with the store held (the stock store's calls never wait).
    async fn decide_chunk(
        &self,
        sale_id: &SaleId,
        pos: u64,
        size: u64,
    ) -> Result<ChunkStep, StoreError> {
        tokio::time::sleep(SCRIPT_TRIP).await;
        let mut inner = self.inner.lock().await;
        if inner.done {
            return Ok(ChunkStep::Done);
        }
        let Some(order) = inner.order.clone() else {
            return Ok(ChunkStep::NoOrder);
        };
        if inner.pos != pos {
            return Ok(ChunkStep::Moved(inner.pos));
        }
        let total = order.len() as u64;
        let end = (pos + size).min(total);
        let mut won = Vec::new();
        for user in &order[pos as usize..end as usize] {
            let quantity = Quantity::new(inner.tickets[user]).unwrap();
            let user_id = UserId::parse(user).unwrap();
            let outcome = self
                .stock
                .reserve(ReserveRequest {
                    sale_id,
                    user_id: &user_id,
                    quantity,
                    idempotency_key: None,
                    gate_nonce: None,
                    gate_issued_ms: None,
                    source_ip: None,
                })
                .await?;
            let status = match outcome {
                ReserveOutcome::Reserved(r) => {
                    won.push(Won {
                        order_id: r.order_id.clone(),
                        user_id,
                        quantity,
                        at_ms: r.reserved_at_ms,
                    });
                    TicketStatus::Won(r.order_id)
                }
                _ => TicketStatus::Lost,
            };
            inner.decided.insert(user.clone(), status);
        }
        inner.pos = end;
        inner.done = end >= total;
        Ok(ChunkStep::Decided {
            pos: end,
            total,
            won,
        })
    }
}

/// The orders queue as SQS is from a Lambda function: every call takes
/// `latency`, however many messages it carries.
#[derive(Clone)]
struct SlowQueue {
    inner: MemoryQueue,
    latency: Duration,
    calls: Arc<AtomicU64>,
}

impl SlowQueue {
    fn new(inner: &MemoryQueue, latency: Duration) -> Self {
        Self {
            inner: inner.clone(),
            latency,
            calls: Arc::default(),
        }
    }
}

impl OrderQueue for SlowQueue {
    async fn send(&self, message: &OrderMessage) -> Result<(), crate::ports::SendError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.latency).await;
        self.inner.send(message).await
    }

    async fn send_batch(
        &self,
        messages: &[OrderMessage],
    ) -> Vec<Result<(), crate::ports::SendError>> {
        assert!(
            messages.len() <= crate::ports::SEND_BATCH_MAX,
            "one call takes at most ten"
        );
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.latency).await;
        self.inner.send_batch(messages).await
    }
}

/// A sale of `tickets` units, one per buyer, with `tickets` tickets of one
/// unit: every ticket wins.
async fn world(tickets: u64) -> (Stores, TestDraw) {
    let w = Stores::new(u32::try_from(tickets).unwrap(), 1);
    w.load().await;
    let draw = TestDraw::new(&w, tickets);
    (w, draw)
}

/// How many times each order id is on the queue.
fn sent_counts(queue: &MemoryQueue) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in queue.messages() {
        *counts.entry(m.order_id.to_string()).or_default() += 1;
    }
    counts
}

#[tokio::test(start_paused = true)]
async fn a_thousand_ticket_draw_fits_in_every_drives_budget_and_sends_each_winner_once() {
    for latency in [Duration::from_millis(30), Duration::from_millis(250)] {
        let (w, draw) = world(1_000).await;
        let queue = SlowQueue::new(&w.queue, latency);
        let mut drives = 0;
        loop {
            drives += 1;
            assert!(drives <= 200, "latency {latency:?}: the draw never ended");
            let started = Instant::now();
            let done = super::drive(&draw, &queue, w.sale_id()).await;
            let took = started.elapsed();
            assert!(
                took <= BUDGET,
                "latency {latency:?}: drive {drives} took {took:?}, over its budget {BUDGET:?} \
                 (decided {} of 1000, {} send calls)",
                draw.pos().await,
                queue.calls.load(Ordering::SeqCst),
            );
            if done {
                break;
            }
        }
        let winners = draw.winners().await;
        assert_eq!(winners.len(), 1_000, "latency {latency:?}");
        assert_eq!(
            queue.calls.load(Ordering::SeqCst),
            100,
            "latency {latency:?}: ten winners a call"
        );
        if latency > BUDGET / 10 {
            assert!(drives > 1, "latency {latency:?}: the budget cut the drives");
        }
        let counts = sent_counts(&w.queue);
        assert_eq!(
            counts.keys().cloned().collect::<BTreeSet<_>>(),
            winners,
            "latency {latency:?}: every winner sent"
        );
        assert!(
            counts.values().all(|n| *n == 1),
            "latency {latency:?}: each winner sent once"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_drive_killed_midway_is_finished_by_the_next_drivers_and_reconcile_relays_its_unsent_winners()
 {
    let (w, draw) = world(1_000).await;
    let queue = SlowQueue::new(&w.queue, Duration::from_millis(30));
    let sale_id = w.sale_id().clone();

    // Lambda kills the function while it drives: its future is dropped, its
    // lock is never given back.
    let killed = tokio::time::timeout(
        Duration::from_millis(400),
        super::drive(&draw, &queue, &sale_id),
    )
    .await;
    assert!(killed.is_err(), "the drive was cut short");
    let at_kill = draw.pos().await;
    assert!(at_kill > 0 && at_kill < 1_000, "killed midway: {at_kill}");

    // Buyers' polls try every 100 ms; the draw moves again once the dead
    // driver's lock lapses.
    let cut = Instant::now();
    let mut drives = 0;
    let stalled = loop {
        drives += 1;
        assert!(drives <= 1_000, "the draw never moved again");
        let started = Instant::now();
        super::drive(&draw, &queue, &sale_id).await;
        if draw.pos().await != at_kill {
            break started - cut;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        stalled <= Duration::from_secs(5),
        "the killed driver's lock held the draw for {stalled:?}"
    );
    for n in 0.. {
        assert!(n < 200, "the draw never ended");
        if super::drive(&draw, &queue, &sale_id).await {
            break;
        }
    }
    let winners = draw.winners().await;
    assert_eq!(winners.len(), 1_000);

    // The order-writer writes what reached the queue.
    let sent = sent_counts(&w.queue);
    for m in w.queue.messages() {
        let at = w.stock.view(&sale_id, Some(&m.order_id)).await.unwrap();
        let at_ms = at.and_then(|v| v.reservation).map(|r| r.at_ms).unwrap();
        let reservation = Reservation {
            order_id: m.order_id.clone(),
            quantity: m.quantity,
            reserved_at_ms: at_ms,
            shard: 0,
        };
        let order = w.order_of(m.user_id.as_str(), &reservation, at_ms);
        w.orders.write_single(&order, 1).await.unwrap();
        w.stock
            .resolve(&sale_id, &m.order_id, Resolution::Written)
            .await
            .unwrap();
    }
    let unsent: BTreeSet<String> = winners
        .iter()
        .filter(|id| !sent.contains_key(*id))
        .cloned()
        .collect();
    assert!(!unsent.is_empty(), "the kill cut some sends");

    // Past the grace, reconcile's outbox relay sends exactly those.
    let report = w
        .reconciler()
        .reconcile_sale(&sale_id, clock::now_ms() + 120_000)
        .await
        .unwrap()
        .unwrap();
    let relayed: BTreeSet<String> = report
        .repairs
        .iter()
        .filter(|r| r.kind == "RELAYED")
        .filter_map(|r| r.order_id.clone())
        .collect();
    assert_eq!(relayed, unsent, "{:?}", report.violations);
    let counts = sent_counts(&w.queue);
    assert_eq!(counts.keys().cloned().collect::<BTreeSet<_>>(), winners);
    assert!(counts.values().all(|n| *n == 1), "each winner sent once");
}
