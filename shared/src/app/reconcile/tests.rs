//! Unit tests of reconcile's repairs and of the invariant check on the
//! in-memory adapters (`tests/reconcile.rs` and `tests/ledger.rs` run them
//! on Redis and the emulator).

use super::*;
use crate::app::fixture::{MemoryReconciler, Stores};
use crate::domain::orders::{Order, RejectReason};
use crate::domain::{OrderId, Quantity, UserId};
use crate::ports::{OrderStore, StockRepair};

const HOUR_MS: i64 = 3_600_000;

fn repair(kind: &'static str, order_id: Option<&OrderId>, detail: &str) -> Repair {
    Repair {
        kind,
        order_id: order_id.map(ToString::to_string),
        detail: detail.into(),
    }
}

#[tokio::test]
async fn a_reservation_never_written_is_given_up_once_past_the_maximum_age() {
    let w = Stores::new(10, 2);
    w.load().await;
    let r = w.reserve("u1", 1).await;
    assert_eq!(w.view().await.unwrap().remaining, 9);
    let reconciler = w.reconciler();
    let now = r.reserved_at_ms + HOUR_MS + 1;

    let report = reconciler
        .reconcile_sale(w.sale_id(), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.violations, vec![]);
    assert_eq!(
        report.repairs,
        vec![repair(
            "RELEASED_FAILED",
            Some(&r.order_id),
            "never became an order within the maximum age; stock released"
        )]
    );
    // The row first, so a late redelivery is a duplicate; then the units.
    let row = w.orders.get(&r.order_id).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.reject_reason),
        (OrderStatus::Rejected, Some(RejectReason::Abandoned))
    );
    assert_eq!(w.view().await.unwrap().remaining, 10);
    assert!(w.snapshot().await.buyers.is_empty(), "u1 counts nothing");
    let counters = w.counters().await;
    assert_eq!(
        (counters.available, counters.sold),
        (10, 0),
        "the ledger never had it"
    );
    assert!(w.queue.messages().is_empty(), "given up, not relayed");
    let (_, stored) = w
        .catalog
        .sale_with_report(w.sale_id())
        .await
        .unwrap()
        .unwrap();
    assert!(stored.unwrap().contains("RELEASED_FAILED"));

    // The next run finds it decided: nothing is released twice.
    let again = reconciler
        .reconcile_sale(w.sale_id(), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.repairs, vec![]);
    assert_eq!(w.view().await.unwrap().remaining, 10);
}

#[tokio::test]
async fn a_give_up_follows_the_row_written_after_the_read() {
    let w = Stores::new(10, 2);
    w.load().await;
    let r = w.reserve("u1", 1).await;
    let reconciler = w.reconciler();
    let stale = reconciler
        .checker()
        .observe(w.sale_id())
        .await
        .unwrap()
        .unwrap();
    // The writer gets there between reconcile's read and its repair.
    let order = w.order_of("u1", &r, r.reserved_at_ms);
    w.orders.write_single(&order, 2).await.unwrap();

    let now = r.reserved_at_ms + HOUR_MS + 1;
    let (repairs, violations) = reconciler.repair_observed(&stale, now).await;
    assert_eq!(violations, vec![]);
    assert_eq!(
        repairs,
        vec![repair(
            "MARKED",
            Some(&r.order_id),
            "written meanwhile: reservation marked WRITTEN"
        )]
    );
    assert_eq!(
        w.view().await.unwrap().remaining,
        9,
        "the order keeps its unit"
    );
    let row = w.orders.get(&r.order_id).await.unwrap().unwrap();
    assert_eq!(row.status, OrderStatus::PendingPayment);
}

#[tokio::test]
async fn a_reservation_past_the_grace_is_relayed_to_the_queue() {
    let w = Stores::new(10, 2);
    w.load().await;
    let r = w.reserve("u1", 1).await;
    let report = w
        .reconciler()
        .reconcile_sale(w.sale_id(), r.reserved_at_ms + 61_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        report.repairs,
        vec![repair(
            "RELAYED",
            Some(&r.order_id),
            "reservation without an order relayed to the queue"
        )]
    );
    let sent: Vec<String> = w
        .queue
        .messages()
        .iter()
        .map(|m| m.order_id.to_string())
        .collect();
    assert_eq!(sent, vec![r.order_id.to_string()]);
    assert_eq!(w.view().await.unwrap().remaining, 9, "still reserved");
}

#[tokio::test]
async fn a_buyer_count_is_lowered_only_if_it_is_still_the_count_read() {
    let w = Stores::new(10, 3);
    w.load().await;
    // Redis counts two units u1 does not hold (a lost release).
    assert_eq!(w.stock.set_buyer(w.sale_id(), "u1", 0, 2).await.unwrap(), 2);
    let reconciler = w.reconciler();
    let stale = reconciler
        .checker()
        .observe(w.sale_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stale.redis.as_ref().unwrap().holdings["u1"].count, Some(2));

    // u1 buys after the read: the repair planned on it must not erase that.
    let r = w.reserve("u1", 1).await;
    let (repairs, violations) = reconciler.repair_observed(&stale, r.reserved_at_ms).await;
    assert_eq!((repairs, violations), (vec![], vec![]));
    assert_eq!(w.snapshot().await.buyers["u1"], 3);

    // A fresh read lowers the count to what u1 provably holds: the one
    // queued reservation.
    let now = r.reserved_at_ms + 1_000;
    let report = reconciler
        .reconcile_sale(w.sale_id(), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.violations, vec![]);
    assert_eq!(
        report.repairs,
        vec![repair("BUYER_CLEARED", None, "u1: 3 -> 1")]
    );
    assert_eq!(w.snapshot().await.buyers["u1"], 1);
    assert_eq!(w.view().await.unwrap().remaining, 9);
}

#[tokio::test]
async fn units_of_an_expiry_redis_never_got_back_are_returned_once() {
    let w = Stores::new(10, 2);
    w.load().await;
    let r = w.reserve("u1", 2).await;
    w.write("u1", &r, r.reserved_at_ms).await;
    // The release expired it in the ledger and stopped before Redis.
    let now = r.reserved_at_ms + 900_001;
    w.orders.expire(&r.order_id, now).await.unwrap();
    let reconciler = w.reconciler();

    let report = reconciler
        .reconcile_sale(w.sale_id(), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.violations, vec![]);
    assert_eq!(
        report.repairs,
        vec![repair(
            "UNITS_RETURNED",
            Some(&r.order_id),
            "expired order's units given back to Redis"
        )]
    );
    assert_eq!(w.view().await.unwrap().remaining, 10);
    assert!(w.snapshot().await.buyers.is_empty());

    let again = reconciler
        .reconcile_sale(w.sale_id(), now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.repairs, again.violations), (vec![], vec![]));
    assert_eq!(w.view().await.unwrap().remaining, 10);
}

fn row(w: &Stores, id: &str, user: &str, status: OrderStatus) -> Order {
    Order {
        order_id: OrderId::parse(id).unwrap(),
        sale_id: w.sale.sale_id.clone(),
        user_id: UserId::parse(user).unwrap(),
        quantity: Quantity::new(1).unwrap(),
        status,
        created_at_ms: w.sale.start_ms,
        expires_at_ms: Some(w.sale.start_ms + 900_000),
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

#[tokio::test]
async fn the_check_of_a_consistent_sale_finds_nothing() {
    let w = Stores::new(10, 2);
    w.load().await;
    let r = w.reserve("u1", 2).await;
    w.write("u1", &r, r.reserved_at_ms).await;
    let queued = w.reserve("u2", 1).await;
    let found = w
        .reconciler()
        .checker()
        .check_sale(w.sale_id(), &[r.order_id.clone(), queued.order_id.clone()])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, vec![]);
}

#[tokio::test]
async fn the_check_reports_an_oversell_and_a_buyer_over_the_limit() {
    let w = Stores::new(1, 1);
    w.load().await;
    // Two rows of one buyer for a stock of one and a limit of one, written
    // past the ledger's conditions (as a bug would).
    w.orders
        .insert_row(row(&w, "o1", "u1", OrderStatus::PendingPayment));
    w.orders.insert_row(row(&w, "o2", "u1", OrderStatus::Paid));
    let found = w
        .reconciler()
        .checker()
        .check_sale(w.sale_id(), &[])
        .await
        .unwrap()
        .unwrap();
    let codes: Vec<&str> = found.iter().map(|v| v.code).collect();
    assert_eq!(
        codes,
        vec![
            "OVERSELL",
            "COUNTS_DISAGREE",
            "USER_OVER_LIMIT",
            "OVERSELL_RISK",
            "LEDGER_DISAGREES"
        ]
    );
    assert_eq!(found[0].detail, "orders hold 2 units, sold 0, total 1");
    assert_eq!(found[2].detail, "u1 holds 2 > 1");
    assert_eq!(
        found[3].detail,
        "u1 holds 2 units but Redis does not count them"
    );
    assert_eq!(found[4].detail, "u1: buyer record holds 0, rows hold 2");
}

#[tokio::test]
async fn the_check_reports_a_buyer_redis_counts_over_the_limit() {
    let w = Stores::new(10, 2);
    w.load().await;
    w.stock.set_buyer(w.sale_id(), "u1", 0, 3).await.unwrap();
    let found = w
        .reconciler()
        .checker()
        .check_sale(w.sale_id(), &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found,
        vec![Violation {
            code: "USER_OVER_LIMIT",
            detail: "Redis counts u1 at 3 > 2".into(),
        }]
    );
}

/// A sale of 40 units with something of every kind to find and repair:
/// rows past the limit, counts below and above what buyers hold, one over
/// the limit, an expiry Redis never got back, reservations to relay.
/// Returns the moment to reconcile at.
async fn broken_sale(w: &Stores) -> i64 {
    w.load().await;
    let mut last = 0;
    let mut reservations = Vec::new();
    for i in 0..24 {
        let r = w.reserve(&format!("u{i}"), 1).await;
        last = last.max(r.reserved_at_ms);
        reservations.push(r);
    }
    for (i, r) in reservations.iter().enumerate().take(16) {
        w.write(&format!("u{i}"), r, r.reserved_at_ms).await;
    }
    let now = last + 61_000;
    // Expired in the ledger, the release stopped before Redis.
    let unpaid = &reservations[2];
    let expired = w
        .orders
        .expire(&unpaid.order_id, unpaid.reserved_at_ms + 900_001)
        .await
        .unwrap();
    assert!(matches!(expired, crate::ports::ExpireOutcome::Expired(_)));
    w.stock.set_buyer(w.sale_id(), "u0", 1, 0).await.unwrap();
    w.stock.set_buyer(w.sale_id(), "u1", 1, 2).await.unwrap();
    w.stock.set_buyer(w.sale_id(), "u30", 0, 3).await.unwrap();
    w.orders.insert_row(row(w, "ox1", "u5", OrderStatus::Paid));
    w.orders.insert_row(row(w, "ox2", "u5", OrderStatus::Paid));
    now
}

fn sorted_violations(mut v: Vec<Violation>) -> Vec<(&'static str, String)> {
    v.sort_by(|a, b| (a.code, &a.detail).cmp(&(b.code, &b.detail)));
    v.into_iter().map(|v| (v.code, v.detail)).collect()
}

#[tokio::test]
async fn a_sale_read_in_slices_is_judged_as_a_whole_read_judges_it() {
    let w = Stores::new(40, 2);
    broken_sale(&w).await;
    let whole = w.reconciler();
    let sliced = w.reconciler().with_slice_orders(3);
    let mut read = sliced.checker().read(w.sale_id()).await.unwrap().unwrap();
    assert!(read.slices() >= 14, "{} slices", read.slices());
    let judged = sliced.checker().judge(&mut read, true, &[]).await.unwrap();
    let state = whole.checker().observe(w.sale_id()).await.unwrap().unwrap();
    assert_eq!(judged.totals, state.totals());

    let found = |r: &MemoryReconciler| {
        let checker = r.checker().clone();
        let sale_id = w.sale_id().clone();
        async move { checker.check_sale(&sale_id, &[]).await.unwrap().unwrap() }
    };
    let in_whole = sorted_violations(found(&whole).await);
    let in_slices = sorted_violations(found(&sliced).await);
    let codes: std::collections::BTreeSet<&str> = in_whole.iter().map(|v| v.0).collect();
    assert_eq!(
        codes,
        [
            "COUNTS_DISAGREE",
            "LEDGER_DISAGREES",
            "OVERSELL_RISK",
            "USER_OVER_LIMIT"
        ]
        .into(),
        "{in_whole:?}"
    );
    assert_eq!(in_slices, in_whole);
}

#[tokio::test]
async fn a_sale_reconciled_in_slices_is_repaired_as_a_whole_read_repairs_it() {
    let mut outcomes = Vec::new();
    for slice_orders in [super::invariants::SLICE_ORDERS, 3] {
        let w = Stores::new(40, 2);
        let now = broken_sale(&w).await;
        let report = w
            .reconciler()
            .with_slice_orders(slice_orders)
            .reconcile_sale(w.sale_id(), now)
            .await
            .unwrap()
            .unwrap();
        let mut repairs: Vec<(&str, String)> = report
            .repairs
            .iter()
            .map(|r| (r.kind, r.detail.clone()))
            .collect();
        repairs.sort();
        let snap = w.snapshot().await;
        outcomes.push((
            repairs,
            sorted_violations(report.violations),
            report.orders,
            report.reservations,
            snap.buyers,
            w.view().await.unwrap().remaining,
        ));
    }
    let kinds: std::collections::BTreeSet<&str> = outcomes[0].0.iter().map(|r| r.0).collect();
    assert_eq!(
        kinds,
        ["BUYER_CLEARED", "BUYER_RAISED", "RELAYED", "UNITS_RETURNED"].into(),
        "{:?}",
        outcomes[0].0
    );
    assert_eq!(outcomes[1], outcomes[0]);
}

/// Three open sales in one catalog, each loaded.
async fn three_sales() -> (Stores, Vec<SaleId>) {
    let w = Stores::new(10, 2);
    w.load().await;
    let mut ids = vec![w.sale_id().clone()];
    for id in ["s2", "s3"] {
        let sale = crate::adapters::memory::test_sale(id, 10, 2).unwrap();
        w.catalog.insert(sale.clone());
        crate::app::jobs::mark_and_load(&w.catalog, &w.stock, &sale, clock::now_ms())
            .await
            .unwrap();
        ids.push(sale.sale_id);
    }
    (w, ids)
}

#[tokio::test]
async fn a_run_out_of_time_stops_and_the_next_runs_start_where_it_stopped() {
    let (w, ids) = three_sales().await;
    let reconciler = w.reconciler();
    let now = clock::now_ms();
    // Time enough: every sale.
    let all = reconciler
        .reconcile_all(
            now,
            std::time::Instant::now() + std::time::Duration::from_secs(600),
        )
        .await
        .unwrap();
    assert_eq!(all.len(), 3);

    // Out of time from the start (a run that reached its deadline on a big
    // sale): each run still reconciles one sale, and the runs that follow,
    // one schedule period apart, take the others in turn.
    let mut seen = std::collections::BTreeSet::new();
    for run in 0..3 {
        let reports = reconciler
            .reconcile_all(now + run * super::RUN_PERIOD_MS, std::time::Instant::now())
            .await
            .unwrap();
        let names: Vec<&str> = reports.iter().map(|r| r.sale_id.as_str()).collect();
        assert_eq!(
            names.len(),
            1,
            "run {run} reconciled {names:?} past its deadline"
        );
        seen.insert(names[0].to_string());
    }
    let every: std::collections::BTreeSet<String> = ids.iter().map(ToString::to_string).collect();
    assert_eq!(seen, every, "three runs out of time reached every sale");
}
