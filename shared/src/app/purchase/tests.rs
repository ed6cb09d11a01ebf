//! Unit tests of the purchase decision on the in-memory adapters.

use super::*;
use crate::adapters::memory::{MemoryCatalog, MemoryQueue, MemoryStock, QueueMode, test_sale};
use std::sync::atomic::Ordering;

struct World {
    stock: MemoryStock,
    queue: MemoryQueue,
    catalog: MemoryCatalog,
    service: PurchaseService<MemoryStock, MemoryQueue, MemoryCatalog>,
}

fn world() -> World {
    let (stock, queue, catalog) = (
        MemoryStock::default(),
        MemoryQueue::default(),
        MemoryCatalog::default(),
    );
    let service = PurchaseService::new(stock.clone(), queue.clone(), catalog.clone());
    World {
        stock,
        queue,
        catalog,
        service,
    }
}

fn request(sale: &str, user: &str, q: u64, key: Option<&str>) -> PurchaseRequest {
    PurchaseRequest {
        sale_id: SaleId::parse(sale).unwrap(),
        user_id: UserId::parse(user).unwrap(),
        quantity: Quantity::new(q).unwrap(),
        idempotency_key: key.map(|k| IdempotencyKey::parse(k).unwrap()),
        source_ip: None,
        sale_token: None,
    }
}

#[tokio::test]
async fn accepted_purchase_queues_one_message() {
    let w = world();
    w.stock.load(test_sale("s", 10, 2).unwrap());
    let ok = w
        .service
        .purchase(&request("s", "u", 2, None))
        .await
        .unwrap();
    assert_eq!(ok.quantity.get(), 2);
    let sent = w.queue.messages();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].order_id, ok.order_id);
    assert_eq!(w.stock.stock_of(&ok.sale_id), Some(8));
}

#[tokio::test]
async fn definite_rejection_returns_the_stock() {
    let w = world();
    w.stock.load(test_sale("s", 10, 1).unwrap());
    w.queue.set_mode(QueueMode::Reject);
    let err = w
        .service
        .purchase(&request("s", "u", 1, None))
        .await
        .unwrap_err();
    assert!(matches!(err, PurchaseError::QueueRejected));
    let sale = SaleId::parse("s").unwrap();
    assert_eq!(w.stock.stock_of(&sale), Some(10));
    assert_eq!(w.stock.reservations_of(&sale), 0);
    assert_eq!(ApiError::from(err).status(), 503);
    // The buyer may try again once the queue is back.
    w.queue.set_mode(QueueMode::Accept);
    assert!(
        w.service
            .purchase(&request("s", "u", 1, None))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn ambiguous_send_keeps_the_reservation_and_accepts() {
    let w = world();
    w.stock.load(test_sale("s", 10, 1).unwrap());
    w.queue.set_mode(QueueMode::Ambiguous);
    let ok = w
        .service
        .purchase(&request("s", "u", 1, None))
        .await
        .unwrap();
    assert_eq!(w.stock.stock_of(&ok.sale_id), Some(9));
    assert_eq!(w.stock.reservations_of(&ok.sale_id), 1);
}

#[tokio::test]
async fn idempotency_key_replays_the_first_answer() {
    let w = world();
    w.stock.load(test_sale("s", 10, 1).unwrap());
    let first = w
        .service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap();
    let again = w
        .service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap();
    assert_eq!(
        (&first.order_id, &first.sale_id, first.quantity),
        (&again.order_id, &again.sale_id, again.quantity)
    );
    assert!(again.replayed);
    // The retry cannot know the first request sent (its answer may have
    // been lost before), so it sends the same order again; once written,
    // a retry sends nothing.
    let sent: Vec<_> = w.queue.messages().into_iter().map(|m| m.order_id).collect();
    assert_eq!(sent, [first.order_id.clone(), first.order_id.clone()]);
    w.stock
        .resolve(
            &first.sale_id,
            &first.order_id,
            crate::ports::Resolution::Written,
        )
        .await
        .unwrap();
    let third = w
        .service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap();
    assert_eq!(
        (&first.order_id, &first.sale_id, first.quantity),
        (&third.order_id, &third.sale_id, third.quantity)
    );
    assert_eq!(w.queue.messages().len(), 2);
    assert_eq!(w.stock.stock_of(&first.sale_id), Some(9));
}

// A keyed retry's 202 must not rest on the reservation alone: when its
// resend is refused, the buyer is told to retry, and the reservation (which
// an earlier answer may have promised) is neither released nor forgotten.
#[tokio::test]
async fn a_keyed_retry_whose_resend_is_refused_is_not_a_202() {
    let w = world();
    w.stock.load(test_sale("s", 10, 1).unwrap());
    let first = w
        .service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap();
    w.queue.set_mode(QueueMode::Reject);
    let err = w
        .service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap_err();
    assert!(matches!(err, PurchaseError::ResendRefused), "{err:?}");
    assert_eq!(ApiError::from(err).status(), 503);
    assert_eq!(w.stock.reservations_of(&first.sale_id), 1);
    assert_eq!(w.stock.stock_of(&first.sale_id), Some(9));
    w.queue.set_mode(QueueMode::Accept);
    let again = w
        .service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap();
    assert_eq!(again.order_id, first.order_id);
}

#[tokio::test]
async fn missing_keys_are_explained_by_the_catalog() {
    let w = world();
    let err = w
        .service
        .purchase(&request("ghost", "u", 1, None))
        .await
        .unwrap_err();
    assert!(matches!(err, PurchaseError::NotFound));

    w.catalog.insert(test_sale("lost", 10, 1).unwrap());
    let err = w
        .service
        .purchase(&request("lost", "u", 1, None))
        .await
        .unwrap_err();
    assert!(matches!(err, PurchaseError::KeysMissing));
    assert_eq!(ApiError::from(err).code(), "SALE_PAUSED");

    let mut later = test_sale("later", 10, 1).unwrap();
    later.start_ms += 3_600_000;
    later.end_ms += 3_600_000;
    w.catalog.insert(later);
    let err = w
        .service
        .purchase(&request("later", "u", 1, None))
        .await
        .unwrap_err();
    assert!(matches!(err, PurchaseError::NotStarted { .. }));
}

#[tokio::test]
async fn store_outage_fails_closed() {
    let w = world();
    w.stock.load(test_sale("s", 10, 1).unwrap());
    w.stock.unavailable.store(true, Ordering::SeqCst);
    let err = w
        .service
        .purchase(&request("s", "u", 1, None))
        .await
        .unwrap_err();
    assert_eq!(ApiError::from(err).status(), 503);
    assert!(w.queue.messages().is_empty());
    assert_eq!(w.catalog.reads(), 0, "no fallback to the database");
}

#[tokio::test]
async fn limit_and_sold_out() {
    let w = world();
    w.stock.load(test_sale("s", 2, 1).unwrap());
    let ok = w
        .service
        .purchase(&request("s", "u", 1, None))
        .await
        .unwrap();
    match w.service.purchase(&request("s", "u", 1, None)).await {
        Err(PurchaseError::LimitExceeded { order_ids }) => assert_eq!(order_ids, [ok.order_id]),
        other => panic!("expected limit, got {other:?}"),
    }
    w.service
        .purchase(&request("s", "v", 1, None))
        .await
        .unwrap();
    // Sold out comes first: the holder at their limit is told so too.
    let err = w
        .service
        .purchase(&request("s", "u", 1, None))
        .await
        .unwrap_err();
    assert_eq!(ApiError::from(err).code(), "SOLD_OUT");
    let err = w
        .service
        .purchase(&request("s", "v", 1, None))
        .await
        .unwrap_err();
    assert_eq!(ApiError::from(err).code(), "SOLD_OUT");
}

#[tokio::test]
async fn a_winners_replay_does_not_clear_the_sold_out_flag() {
    let w = world();
    w.stock.load(test_sale("s", 1, 1).unwrap());
    let key = Some("k-1");
    let won = w
        .service
        .purchase(&request("s", "u", 1, key))
        .await
        .unwrap();
    // The first refusal comes from the store and arms the flag.
    assert!(
        w.service
            .purchase(&request("s", "v", 1, None))
            .await
            .is_err()
    );
    let hits = w.service.sold_out_fast_path_hits();
    assert!(
        w.service
            .purchase(&request("s", "w", 1, None))
            .await
            .is_err()
    );
    assert_eq!(w.service.sold_out_fast_path_hits(), hits + 1);
    // The winner's keyed retry reaches the store and gets its order...
    let again = w
        .service
        .purchase(&request("s", "u", 1, key))
        .await
        .unwrap();
    assert_eq!(again.order_id, won.order_id);
    // ...and the flag still answers the next buyer.
    assert!(
        w.service
            .purchase(&request("s", "x", 1, None))
            .await
            .is_err()
    );
    assert_eq!(w.service.sold_out_fast_path_hits(), hits + 2);
}

#[tokio::test]
async fn after_a_sell_out_keyed_requests_are_answered_from_memory_unless_their_key_won() {
    let w = world();
    w.stock.load(test_sale("s", 1, 1).unwrap());
    let won = w
        .service
        .purchase(&request("s", "u", 1, Some("page-1")))
        .await
        .unwrap();
    // The store's refusal arms the flag.
    assert!(
        w.service
            .purchase(&request("s", "v", 1, Some("page-2")))
            .await
            .is_err()
    );
    let hits = w.service.sold_out_fast_path_hits();
    for n in 0..5 {
        let err = w
            .service
            .purchase(&request("s", &format!("b{n}"), 1, Some(&format!("p{n}"))))
            .await
            .unwrap_err();
        assert_eq!(ApiError::from(err).code(), "SOLD_OUT");
    }
    assert_eq!(w.service.sold_out_fast_path_hits(), hits + 5);
    // The winner's retry reaches the store and gets its order again.
    let again = w
        .service
        .purchase(&request("s", "u", 1, Some("page-1")))
        .await
        .unwrap();
    assert_eq!((again.order_id, again.replayed), (won.order_id, true));
    assert_eq!(w.service.sold_out_fast_path_hits(), hits + 5);
}

/// A queue whose first send waits for the test, then is refused for good
/// (`SendError::Rejected`); later sends go through.
#[derive(Clone, Default)]
struct RefusedAfterAWait {
    entered: std::sync::Arc<tokio::sync::Notify>,
    go: std::sync::Arc<tokio::sync::Notify>,
    sends: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Later sends are refused too.
    refuse_all: bool,
}

impl OrderQueue for RefusedAfterAWait {
    async fn send(&self, _message: &OrderMessage) -> Result<(), SendError> {
        if self.sends.fetch_add(1, Ordering::SeqCst) == 0 {
            self.entered.notify_one();
            self.go.notified().await;
            return Err(SendError::Rejected("queue refuses".into()));
        }
        if self.refuse_all {
            return Err(SendError::Rejected("queue refuses".into()));
        }
        Ok(())
    }
}

// A keyed retry that arrived while the first request's send was being
// refused was answered 202 (REPLAY); the first request's refusal then
// deleted the reservation and answered 503: an accepted order that would
// never exist.
type Racing = PurchaseService<MemoryStock, RefusedAfterAWait, MemoryCatalog>;
type Answer = Result<Accepted, PurchaseError>;

/// A keyed purchase whose send `queue` holds, and its retry made while it
/// waits: what the stock holds, the service, then the first request's and
/// the retry's answers.
async fn a_retry_during_a_held_send(
    queue: &RefusedAfterAWait,
) -> (MemoryStock, std::sync::Arc<Racing>, Answer, Answer) {
    let stock = MemoryStock::default();
    stock.load(test_sale("s", 10, 1).unwrap());
    let service = std::sync::Arc::new(PurchaseService::new(
        stock.clone(),
        queue.clone(),
        MemoryCatalog::default(),
    ));
    let first = tokio::spawn({
        let service = service.clone();
        async move { service.purchase(&request("s", "u", 1, Some("k1"))).await }
    });
    queue.entered.notified().await;
    let retry = service.purchase(&request("s", "u", 1, Some("k1"))).await;
    queue.go.notify_one();
    let first = first.await.unwrap();
    (stock, service, first, retry)
}

// A keyed retry that arrived while the first request's send was being
// refused was answered 202 (REPLAY); the first request's refusal then
// deleted the reservation and answered 503: an accepted order that would
// never exist.
#[tokio::test]
async fn a_keyed_replay_answered_during_a_refused_send_keeps_its_order() {
    let queue = RefusedAfterAWait::default();
    let (stock, service, first, retry) = a_retry_during_a_held_send(&queue).await;
    let retry = retry.expect("the retry is answered 202");
    assert!(retry.replayed);
    let sale = SaleId::parse("s").unwrap();
    // What the retry promised holds: the reservation stays, its unit still
    // taken, and the retry's own send carries the order. The first
    // request's send made nothing, so it promises nothing (a retry of it
    // is answered with the order).
    assert_eq!(
        stock.reservations_of(&sale),
        1,
        "the replayed reservation was released (first answered {first:?})"
    );
    assert_eq!(stock.stock_of(&sale), Some(9));
    assert!(
        matches!(first, Err(PurchaseError::ResendRefused)),
        "{first:?}"
    );
    assert_eq!(queue.sends.load(Ordering::SeqCst), 2);
    let again = service
        .purchase(&request("s", "u", 1, Some("k1")))
        .await
        .unwrap();
    assert_eq!(again.order_id, retry.order_id);
}

// The simulation's seed 16430: the queue refused every send. A keyed
// retry arrived while the first request's send was being refused; its own
// send was refused too (503), but it had marked the reservation replayed,
// so the first request's release found it not releasable and answered 202,
// for an order whose only trace was the reservation: a loss of Redis then
// lost it.
#[tokio::test]
async fn a_refused_send_whose_reservation_a_retry_holds_is_not_a_202() {
    let queue = RefusedAfterAWait {
        refuse_all: true,
        ..RefusedAfterAWait::default()
    };
    let (stock, _, first, retry) = a_retry_during_a_held_send(&queue).await;
    assert!(
        matches!(retry, Err(PurchaseError::ResendRefused)),
        "{retry:?}"
    );
    assert!(
        matches!(first, Err(PurchaseError::ResendRefused)),
        "nothing reached the queue, and the first request answered {first:?}"
    );
    // Kept for the next retry or reconcile's relay: an earlier answer may
    // have promised it.
    assert_eq!(stock.reservations_of(&SaleId::parse("s").unwrap()), 1);
}

/// Redis whose release takes effect and then times out (its answer lost).
#[derive(Clone)]
struct ReleaseTimesOut(MemoryStock);

impl StockStore for ReleaseTimesOut {
    async fn reserve(
        &self,
        request: crate::ports::ReserveRequest<'_>,
    ) -> Result<ReserveOutcome, crate::ports::StoreError> {
        self.0.reserve(request).await
    }

    async fn release(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
    ) -> Result<ReleaseOutcome, crate::ports::StoreError> {
        let _ = self.0.release(sale_id, order_id).await;
        Err(crate::ports::StoreError::Unavailable("timed out".into()))
    }

    async fn resolve(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        resolution: crate::ports::Resolution,
    ) -> Result<bool, crate::ports::StoreError> {
        self.0.resolve(sale_id, order_id, resolution).await
    }

    async fn view(
        &self,
        sale_id: &SaleId,
        order_id: Option<&OrderId>,
    ) -> Result<Option<crate::ports::StockView>, crate::ports::StoreError> {
        self.0.view(sale_id, order_id).await
    }

    async fn add_outcomes(
        &self,
        sale_id: &SaleId,
        counts: &[(&'static str, u64)],
    ) -> Result<bool, crate::ports::StoreError> {
        self.0.add_outcomes(sale_id, counts).await
    }
}

// The simulation's seed 3702: the queue refused the send, the release of
// the reservation went through but its answer was lost, and the buyer was
// told 202 for an order nothing would ever make (no row, reservation or
// message).
#[tokio::test]
async fn a_refused_send_whose_release_times_out_is_not_a_202() {
    let stock = MemoryStock::default();
    stock.load(test_sale("s", 10, 1).unwrap());
    let queue = MemoryQueue::default();
    queue.set_mode(QueueMode::Reject);
    let service = PurchaseService::new(
        ReleaseTimesOut(stock.clone()),
        queue.clone(),
        MemoryCatalog::default(),
    );
    let answer = service.purchase(&request("s", "u", 1, None)).await;
    let sale = SaleId::parse("s").unwrap();
    assert_eq!(stock.reservations_of(&sale), 0, "the release took effect");
    assert!(
        matches!(answer, Err(PurchaseError::Store(_))),
        "an order nothing will make was answered {answer:?}"
    );
}

/// The sold-out flag lasts its time on the runtime's clock, not the wall's:
/// the simulation runs on a paused clock, and a seed must replay the same
/// however fast the machine runs it.
#[tokio::test(start_paused = true)]
async fn the_sold_out_flag_lasts_its_time_on_the_runtimes_clock() {
    let w = world();
    w.stock.load(test_sale("s", 1, 1).unwrap());
    w.service
        .purchase(&request("s", "u", 1, None))
        .await
        .unwrap();
    // The store's refusal arms the flag.
    assert!(
        w.service
            .purchase(&request("s", "v", 1, None))
            .await
            .is_err()
    );
    let hits = w.service.sold_out_fast_path_hits();
    // Past the flag's time on the wall (a slow machine's stall), not on the
    // runtime's clock: still answered from memory. The sleep is the point
    // here, not a wait for something.
    std::thread::sleep(SOLD_OUT_FLAG + std::time::Duration::from_millis(50));
    assert!(
        w.service
            .purchase(&request("s", "b1", 1, None))
            .await
            .is_err()
    );
    assert_eq!(w.service.sold_out_fast_path_hits(), hits + 1);
    // Past it on the runtime's clock: the store is asked again.
    tokio::time::advance(SOLD_OUT_FLAG).await;
    assert!(
        w.service
            .purchase(&request("s", "b2", 1, None))
            .await
            .is_err()
    );
    assert_eq!(w.service.sold_out_fast_path_hits(), hits + 1);
}
