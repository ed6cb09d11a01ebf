//! Unit tests of prewarm and the unpaid release on the in-memory adapters
//! (`tests/lifecycle.rs` and `tests/operators.rs` run the same jobs on
//! Redis and the emulator).

use super::*;
use crate::app::fixture::Stores;
use crate::domain::orders::OrderStatus;
use crate::ports::{OrderLedger, OrderQueue, OrderStore, ReserveOutcome, StockLoading};
use std::time::{Duration, Instant};

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[tokio::test]
async fn prewarm_loads_a_sale_from_the_ledger_and_keeps_its_pause() {
    let mut sale = crate::adapters::memory::test_sale("s1", 10, 2).unwrap();
    sale.paused = true;
    let w = Stores::with(sale);
    let jobs = w.jobs();
    let now = crate::clock::now_ms();

    let outcome = jobs.prewarm_sale(w.sale_id(), now).await.unwrap();
    assert_eq!(
        outcome,
        PrewarmOutcome::Loaded {
            stock: 10,
            buyers: 0
        }
    );
    assert!(w.counters().await.loaded, "marked loaded on the sale item");
    let view = w.view().await.unwrap();
    assert_eq!((view.remaining, view.paused), (10, true));
    assert_eq!(w.try_reserve("u1", 1).await, ReserveOutcome::Paused);

    // Every later run refreshes the sale and keeps the operator's pause.
    let again = jobs.prewarm_sale(w.sale_id(), now + 60_000).await.unwrap();
    assert_eq!(again, PrewarmOutcome::Refreshed);
    assert!(w.view().await.unwrap().paused);
    assert_eq!(w.try_reserve("u1", 1).await, ReserveOutcome::Paused);

    // The resume, kept in the catalog, reaches the loaded sale at once.
    let mut resumed = w.sale.clone();
    resumed.paused = false;
    w.catalog.insert(resumed.clone());
    assert_eq!(jobs.apply_status(&resumed).await.unwrap(), 1);
    assert!(!w.view().await.unwrap().paused);
    let r = w.reserve("u1", 1).await;
    assert_eq!(r.quantity.get(), 1);
    assert_eq!(w.view().await.unwrap().remaining, 9);
}

#[tokio::test]
async fn a_pause_applied_while_loaded_survives_the_next_prewarm() {
    let w = Stores::new(10, 2);
    let jobs = w.jobs();
    let now = crate::clock::now_ms();
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now).await.unwrap(),
        PrewarmOutcome::Loaded {
            stock: 10,
            buyers: 0
        }
    );
    let mut paused = w.sale.clone();
    paused.paused = true;
    w.catalog.insert(paused.clone());
    assert_eq!(jobs.apply_status(&paused).await.unwrap(), 1);

    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now + 60_000).await.unwrap(),
        PrewarmOutcome::Refreshed
    );
    assert!(w.view().await.unwrap().paused);
    assert_eq!(w.try_reserve("u1", 1).await, ReserveOutcome::Paused);
}

#[tokio::test]
async fn a_lost_sale_waits_for_the_queue_then_is_rebuilt_from_the_ledger() {
    let w = Stores::new(10, 2);
    let jobs = w.jobs();
    let now = crate::clock::now_ms();
    jobs.prewarm_sale(w.sale_id(), now).await.unwrap();
    let r = w.reserve("u1", 2).await;
    let order = w.order_of("u1", &r, r.reserved_at_ms);
    w.queue.send(&order.message).await.unwrap();
    w.stock.forget(w.sale_id());

    // Its order is still on the queue: rebuilding now could sell it twice.
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now).await.unwrap(),
        PrewarmOutcome::WaitingForQueue {
            in_flight: 1,
            dlq: 0
        }
    );
    assert!(w.view().await.is_none(), "still not loaded");

    // The writer takes it off the queue and writes it; then the rebuild.
    w.queue.sent.lock().unwrap().clear();
    let written = w.orders.write_single(&order, 2).await.unwrap();
    assert_eq!(written, crate::ports::SingleWrite::Written);
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now).await.unwrap(),
        PrewarmOutcome::Loaded {
            stock: 8,
            buyers: 1
        }
    );
    let snap = w.snapshot().await;
    assert_eq!(snap.stock, 8);
    assert_eq!(snap.buyers.get("u1"), Some(&2));
    assert_eq!(snap.reservations[r.order_id.as_str()].state, "WRITTEN");
    assert_eq!(w.try_reserve("u1", 1).await, {
        ReserveOutcome::LimitExceeded {
            order_ids: vec![r.order_id.clone()],
        }
    });
}

// The DLQ's redrive sends a message to the queue, then deletes it from the
// DLQ. Read the queue before the move and the DLQ after it, and the
// accepted order is in neither: the rebuild sold its units again (seen in
// `ledger::defect3_…` when a purchase's rebuild met the test's redrive).
#[tokio::test]
async fn a_redrive_between_the_two_depth_reads_does_not_let_the_rebuild_through() {
    let w = Stores::new(10, 2);
    let jobs = w.jobs();
    let now = crate::clock::now_ms();
    jobs.prewarm_sale(w.sale_id(), now).await.unwrap();
    let r = w.reserve("u1", 2).await;
    let order = w.order_of("u1", &r, r.reserved_at_ms);
    w.queue.dead.lock().unwrap().push(order.message.clone());
    w.stock.forget(w.sale_id());

    w.queue.redrive_after_next_depth();
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now).await.unwrap(),
        PrewarmOutcome::WaitingForQueue {
            in_flight: 1,
            dlq: 0
        },
        "rebuilt while the accepted order moved from the DLQ to the queue"
    );
    assert!(w.view().await.is_none(), "still not loaded");
}

// The rebuild a purchase asks for was dropped after a 10 s budget, its lock
// still held for the rest of its 30 s: a sale whose ledger takes longer than
// the budget to read was never brought back by the purchases (each ask after
// the lock lapsed was cut again). On tokio's paused clock: no real wait
// (and the wall-clock ask interval and lock do not move, so one ask is made,
// and it has to finish).
#[tokio::test(start_paused = true)]
async fn a_rebuild_slower_than_ten_seconds_still_brings_the_sale_back() {
    use crate::app::purchase::{PurchaseError, PurchaseRequest, PurchaseService};
    let w = Stores::new(10, 2);
    w.jobs()
        .prewarm_sale(w.sale_id(), crate::clock::now_ms())
        .await
        .unwrap();
    w.stock.forget(w.sale_id());
    w.orders.delay_ledger_reads(Duration::from_secs(15));
    let purchases = PurchaseService::new(w.stock.clone(), w.queue.clone(), w.catalog.clone())
        .with_rebuild(std::sync::Arc::new(w.jobs()));
    let request = PurchaseRequest {
        sale_id: w.sale_id().clone(),
        user_id: crate::domain::UserId::parse("u1").unwrap(),
        quantity: crate::domain::Quantity::new(1).unwrap(),
        idempotency_key: None,
        source_ip: None,
        sale_token: None,
    };
    // Buyers keep coming, one a second, as they do at a sale; each that
    // finds the sale missing may ask for the rebuild.
    let started = tokio::time::Instant::now();
    loop {
        match purchases.purchase(&request).await {
            Ok(_) => break,
            Err(PurchaseError::Paused | PurchaseError::KeysMissing) => {}
            Err(other) => panic!("unexpected answer: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the purchases' rebuild never brought the sale back"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_secs(15),
        "rebuilt before the ledger was read"
    );
    assert_eq!(w.view().await.unwrap().remaining, 9);
}

/// A reservation can become an order up to reconcile's maximum age after
/// it was made (a message redriven from the DLQ, say), and the order's
/// payment window, up to a day, starts at that write. The job took a sale
/// only until a day after its end, so such an order stayed pending for
/// good (found by reading the operator commands against the code).
#[tokio::test]
async fn an_order_written_late_after_the_end_is_still_released_by_the_job() {
    let mut sale = crate::adapters::memory::test_sale("s1", 10, 2).unwrap();
    sale.payment_window_seconds = 86_400;
    let w = Stores::with(sale);
    let jobs = w.jobs();
    w.load().await;
    let r = w.reserve("u1", 1).await;
    // Written 50 minutes after the end: within the maximum age.
    let written_at = w.sale.end_ms + 50 * 60_000;
    w.write("u1", &r, written_at).await;
    let now = written_at + 86_400_000 + 1;
    let report = jobs.release_unpaid(now, deadline()).await.unwrap();
    assert_eq!(
        (report.expired, report.units_returned),
        (1, 1),
        "{report:?}"
    );
}

#[tokio::test]
async fn release_unpaid_returns_a_due_orders_units_exactly_once() {
    let w = Stores::new(10, 2);
    let jobs = w.jobs();
    w.load().await;
    let due = w.reserve("u1", 2).await;
    w.write("u1", &due, due.reserved_at_ms).await;
    // Another order, made a minute later: not due yet at `now`.
    let later = w.reserve("u2", 1).await;
    w.write("u2", &later, due.reserved_at_ms + 60_000).await;
    assert_eq!(w.view().await.unwrap().remaining, 7);
    let now = due.reserved_at_ms + 900_000 + 1;

    let report = jobs.release_unpaid(now, deadline()).await.unwrap();
    assert_eq!(
        report,
        ReleaseReport {
            expired: 1,
            units_returned: 2,
            ..ReleaseReport::default()
        }
    );
    assert_eq!(w.view().await.unwrap().remaining, 9);
    let snap = w.snapshot().await;
    assert_eq!(snap.buyers.get("u1"), None, "u1 may buy again");
    assert_eq!(snap.buyers.get("u2"), Some(&1));
    assert_eq!(snap.reservations[due.order_id.as_str()].state, "EXPIRED");
    let counters = w.counters().await;
    assert_eq!(
        (counters.available, counters.sold, counters.return_seq),
        (9, 1, 1)
    );
    let row = w.orders.get(&due.order_id).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.return_seq),
        (OrderStatus::Expired, Some(1))
    );
    let u1 = crate::domain::UserId::parse("u1").unwrap();
    let held = w.orders.held_by_all(w.sale_id(), &[&u1]).await.unwrap();
    assert_eq!(held["u1"], 0);
    let pending = w.orders.get(&later.order_id).await.unwrap().unwrap();
    assert_eq!(pending.status, OrderStatus::PendingPayment);

    // A second run finds nothing due and returns nothing.
    let again = jobs.release_unpaid(now, deadline()).await.unwrap();
    assert_eq!(again, ReleaseReport::default());
    assert_eq!(w.view().await.unwrap().remaining, 9);
    // Nor does a late retry of the Redis step.
    let retried = w
        .stock
        .return_units(w.sale_id(), &due.order_id, "u1", 2, Some(1), 2)
        .await
        .unwrap();
    assert_eq!(retried, Returned::Already);
    assert_eq!(w.view().await.unwrap().remaining, 9);
}

#[tokio::test]
async fn an_expiry_the_rebuild_already_counted_is_not_returned_again() {
    let w = Stores::new(10, 2);
    let jobs = w.jobs();
    w.load().await;
    let r = w.reserve("u1", 2).await;
    w.write("u1", &r, r.reserved_at_ms).await;
    let now = r.reserved_at_ms + 900_001;
    // The ledger step of the release, then Redis lost the sale before
    // the units went back: the rebuild reads them from `available`.
    let expired = w.orders.expire(&r.order_id, now).await.unwrap();
    assert!(matches!(expired, crate::ports::ExpireOutcome::Expired(_)));
    w.stock.forget(w.sale_id());
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), crate::clock::now_ms())
            .await
            .unwrap(),
        PrewarmOutcome::Loaded {
            stock: 10,
            buyers: 0
        }
    );
    let late = w
        .stock
        .return_units(w.sale_id(), &r.order_id, "u1", 2, Some(1), 2)
        .await
        .unwrap();
    assert_eq!(late, Returned::Already);
    assert_eq!(w.view().await.unwrap().remaining, 10);
}

/// SQS's counts as AWS documents them: they may lag for about a minute.
/// This one answers the count it took before the test's last send.
struct LaggingCounts(crate::adapters::memory::MemoryQueue, QueueDepth);

impl QueueInspector for LaggingCounts {
    async fn depth(&self) -> Result<QueueDepth, crate::ports::QueueError> {
        Ok(self.1)
    }
    async fn dlq_depth(&self) -> Result<Option<QueueDepth>, crate::ports::QueueError> {
        Ok(Some(QueueDepth::default()))
    }
    async fn order_ids(
        &self,
    ) -> Result<std::collections::HashSet<String>, crate::ports::QueueError> {
        self.0.order_ids().await
    }
}

// A purchase accepted just before Redis lost the sale sends its message
// while (or just after) the rebuild reads the queue's count, which still
// says 0: the old rebuild trusted that zero, sold the unit again, and the
// accepted order ended REJECTED.
#[tokio::test]
async fn a_rebuild_does_not_trust_a_zero_count_read_before_the_counts_can_have_caught_up() {
    let w = Stores::new(1, 1);
    let settle = Duration::from_secs(61);
    let lagging = |depth| {
        Jobs::new(
            w.stock.clone(),
            w.catalog.clone(),
            w.orders.clone(),
            Some(LaggingCounts(w.queue.clone(), depth)),
            Duration::from_secs(300),
        )
        .with_settle(settle)
    };
    let now = crate::clock::now_ms();
    w.jobs().prewarm_sale(w.sale_id(), now).await.unwrap();
    let r = w.reserve("u1", 1).await;
    let order = w.order_of("u1", &r, r.reserved_at_ms);
    w.queue.send(&order.message).await.unwrap();
    w.stock.forget(w.sale_id());

    // The counts still say nothing is on its way.
    let jobs = lagging(QueueDepth::default());
    let outcome = jobs.prewarm_sale(w.sale_id(), now + 1_000).await.unwrap();
    assert_eq!(
        outcome,
        PrewarmOutcome::Settling {
            until_ms: now + 1_000 + 61_000
        },
        "rebuilt on a zero count read a second after the loss"
    );
    assert!(w.view().await.is_none(), "still not loaded");
    // A later notice does not move the moment on.
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now + 30_000).await.unwrap(),
        PrewarmOutcome::Settling {
            until_ms: now + 62_000
        }
    );
    // Once the counts have caught up they show the message ...
    let caught_up = lagging(QueueDepth {
        visible: 1,
        ..QueueDepth::default()
    });
    assert_eq!(
        caught_up
            .prewarm_sale(w.sale_id(), now + 62_000)
            .await
            .unwrap(),
        PrewarmOutcome::WaitingForQueue {
            in_flight: 1,
            dlq: 0
        }
    );
    // ... and after the writer wrote it, the rebuild counts its unit.
    w.queue.sent.lock().unwrap().clear();
    w.orders.write_single(&order, 1).await.unwrap();
    let drained = lagging(QueueDepth::default());
    assert_eq!(
        drained
            .prewarm_sale(w.sale_id(), now + 70_000)
            .await
            .unwrap(),
        PrewarmOutcome::Loaded {
            stock: 0,
            buyers: 1
        }
    );
    // The notice is cleared with the rebuild: a later loss waits from its own.
    w.stock.forget(w.sale_id());
    assert_eq!(
        drained
            .prewarm_sale(w.sale_id(), now + 200_000)
            .await
            .unwrap(),
        PrewarmOutcome::Settling {
            until_ms: now + 261_000
        }
    );
}

/// The sales table as a prewarm that read it just before an operator's
/// command sees it: its first consistent read answers `stale`, every later
/// one the table as it is.
struct ReadBeforeTheCommand {
    table: crate::adapters::memory::MemoryCatalog,
    stale: std::sync::Mutex<Option<(crate::domain::Sale, SaleCounters)>>,
}

impl crate::ports::SaleCatalog for ReadBeforeTheCommand {
    async fn get_sale(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<crate::domain::Sale>, CatalogError> {
        self.table.get_sale(sale_id).await
    }
    async fn list_sales(&self) -> Result<Vec<crate::domain::Sale>, CatalogError> {
        self.table.list_sales().await
    }
}

impl CatalogAdmin for ReadBeforeTheCommand {
    async fn get_record(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(crate::domain::Sale, SaleCounters)>, CatalogError> {
        let stale = self
            .stale
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match stale {
            Some(record) => Ok(Some(record)),
            None => self.table.get_record(sale_id).await,
        }
    }
    async fn mark_loaded(&self, sale_id: &SaleId, now_ms: i64) -> Result<bool, CatalogError> {
        self.table.mark_loaded(sale_id, now_ms).await
    }
    async fn store_report(&self, sale_id: &SaleId, json: &str) -> Result<(), CatalogError> {
        self.table.store_report(sale_id, json).await
    }
    async fn sale_with_report(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(crate::domain::Sale, Option<String>)>, CatalogError> {
        self.table.sale_with_report(sale_id).await
    }
}

impl Stores {
    /// Jobs whose prewarm reads the sale as it was before `command` was
    /// applied to the table (and, through `apply_status`, to Redis).
    async fn jobs_reading_before(
        &self,
        command: impl FnOnce(&mut crate::domain::Sale),
    ) -> Jobs<
        crate::adapters::memory::MemoryQueue,
        crate::adapters::memory::MemoryStock,
        ReadBeforeTheCommand,
        crate::adapters::memory::MemoryOrders,
    > {
        let before = self
            .catalog
            .get_record(self.sale_id())
            .await
            .unwrap()
            .unwrap();
        let mut after = before.0.clone();
        command(&mut after);
        self.catalog.insert(after.clone());
        self.jobs().apply_status(&after).await.unwrap();
        Jobs::new(
            self.stock.clone(),
            ReadBeforeTheCommand {
                table: self.catalog.clone(),
                stale: std::sync::Mutex::new(Some(before)),
            },
            self.orders.clone(),
            Some(self.queue.clone()),
            Duration::from_secs(300),
        )
    }
}

// A pause that lands between a prewarm's read of the sale and its write to
// Redis (while the keys are lost, set_status finds none and answers 0) was
// undone: the rebuild wrote the LIVE it had read.
#[tokio::test]
async fn a_pause_during_a_rebuild_is_not_undone() {
    let w = Stores::new(10, 2);
    let now = crate::clock::now_ms();
    let jobs = w.jobs_reading_before(|sale| sale.paused = true).await;
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now).await.unwrap(),
        PrewarmOutcome::Loaded {
            stock: 10,
            buyers: 0
        }
    );
    assert!(
        w.view().await.unwrap().paused,
        "the rebuild undid the pause"
    );
    assert_eq!(w.try_reserve("u1", 1).await, ReserveOutcome::Paused);
}

// The same for a loaded sale: a refresh that read the sale before a pause
// (whose own Redis step did apply) wrote the old status back over it.
#[tokio::test]
async fn a_pause_during_a_refresh_is_not_undone() {
    let w = Stores::new(10, 2);
    let now = crate::clock::now_ms();
    w.jobs().prewarm_sale(w.sale_id(), now).await.unwrap();
    let jobs = w.jobs_reading_before(|sale| sale.paused = true).await;
    assert!(w.view().await.unwrap().paused, "the pause reached Redis");
    assert_eq!(
        jobs.prewarm_sale(w.sale_id(), now + 60_000).await.unwrap(),
        PrewarmOutcome::Refreshed
    );
    assert!(
        w.view().await.unwrap().paused,
        "the refresh undid the pause"
    );
    assert_eq!(w.try_reserve("u1", 1).await, ReserveOutcome::Paused);
}

// An operator's end, then a scheduled prewarm that had read the sale before
// it: the old endAt went back to Redis, and the ended sale sold again.
#[tokio::test]
async fn an_end_is_not_moved_back_by_a_prewarm_that_read_the_sale_before_it() {
    let w = Stores::new(10, 2);
    let now = crate::clock::now_ms();
    w.jobs().prewarm_sale(w.sale_id(), now).await.unwrap();
    let ended_at = now - 1;
    let jobs = w.jobs_reading_before(|sale| sale.end_ms = ended_at).await;
    // The end's own prewarm.
    w.jobs().prewarm_sale(w.sale_id(), now + 2).await.unwrap();
    assert_eq!(w.try_reserve("u1", 1).await, ReserveOutcome::Ended);
    jobs.prewarm_sale(w.sale_id(), now + 2).await.unwrap();
    assert_eq!(
        w.try_reserve("u1", 1).await,
        ReserveOutcome::Ended,
        "the ended sale sells again"
    );
}
