//! A reservation reconcile gives up (accepted, its message lost, never an
//! order) is a returned unit too: while buyers wait on the sale's line, the
//! give-up's own ledger write offers its units to the head of the line
//! instead of putting them back for whoever buys next (invariant 10); and
//! a head that cannot take its unit is passed over (one transaction serves
//! both sources of returned units). On the real Redis and emulator.

use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::sqs::SqsQueue;
use seckill_shared::app::order_queries::{JoinAnswer, JoinRequest};
use seckill_shared::app::reconcile::{ReconcileReport, ReconcileSettings};
use seckill_shared::clock;
use seckill_shared::domain::orders::{NewOrder, OrderStatus, RejectReason};
use seckill_shared::domain::{OrderMessage, UserId};
use seckill_shared::ports::{
    Candidate, GiveUp, OfferTerms, OrderLedger, OrderQueue, StockReading, WaitlistStore,
};
use seckill_shared::wire::LiveReconciler;
use seckill_tests::{App, live_sale};
use std::time::Duration;

const MAX_AGE: Duration = Duration::from_secs(3_600);

async fn reconciler(app: &App) -> LiveReconciler {
    seckill_shared::wire::reconciler(&app.config, seckill_shared::adapters::aws::Caller::Tool)
        .await
        .unwrap()
        .with_settings(ReconcileSettings {
            grace: Duration::from_secs(60),
            max_age: MAX_AGE,
            ..ReconcileSettings::default()
        })
}

/// The app's ledger.
fn ledger(app: &App) -> DynamoOrders {
    DynamoOrders::new(
        app.db.clone(),
        &app.config.orders_table,
        &app.config.sales_table,
    )
}

/// `users` join the sale's line through the orders API's use case, each a
/// new entry, in this order.
async fn join_the_line(app: &App, sale: &seckill_shared::domain::Sale, users: &[&str]) {
    let queries = orders_api::wire(&app.config).await.unwrap();
    for user in users {
        let joined = queries
            .join_waitlist(&JoinRequest {
                sale_id: sale.sale_id.clone(),
                user_id: UserId::parse(user).unwrap(),
                sale_token: None,
                source_ip: None,
            })
            .await
            .unwrap();
        assert!(matches!(joined, JoinAnswer::New(_)), "{joined:?}");
    }
}

/// Reconcile as it would run once every reservation is past the maximum age.
async fn reconcile_late(reconciler: &LiveReconciler, app: &App, sale: &str) -> ReconcileReport {
    let later = clock::now_ms() + i64::try_from(MAX_AGE.as_millis()).unwrap() + 60_000;
    reconciler
        .reconcile_sale(&seckill_shared::domain::SaleId::parse(sale).unwrap(), later)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{sale} of {} not found", app.config.sales_table))
}

#[tokio::test]
async fn a_given_up_reservations_unit_goes_to_the_line_once_not_back_on_sale() {
    let app = App::spawn().await;
    let mut sale = live_sale(3, 1);
    // Open past the reconcile run below (past the maximum age): a give-up
    // after the end goes back to the stock.
    sale.end_ms = clock::now_ms() + 3 * i64::try_from(MAX_AGE.as_millis()).unwrap();
    app.open_sale(&sale).await;
    let id = sale.sale_id.to_string();
    // w0's order is written; w1's and w2's purchases are accepted, and
    // their messages lost.
    assert_eq!(app.purchase(&id, "w0", "").await.status, 202);
    app.write_queued_orders().await;
    for user in ["w1", "w2"] {
        assert_eq!(app.purchase(&id, user, "").await.status, 202);
    }
    let lost: Vec<OrderMessage> = app.drain_queue().await;
    assert_eq!(lost.len(), 2);
    // Sold out: two buyers wait.
    join_the_line(&app, &sale, &["first", "second"]).await;
    let orders = ledger(&app);
    let stock = app.service.stock();

    // A give-up whose Redis step never ran (reconcile died after the
    // ledger's transaction): w2's unit is offered to "first" in the ledger.
    let w2 = lost.iter().find(|m| m.user_id.as_str() == "w2").unwrap();
    let heads = orders.heads(&sale.sale_id, 10).await.unwrap();
    let candidates: Vec<Candidate> = heads
        .iter()
        .map(|entry| Candidate {
            entry: entry.clone(),
            offer_id: seckill_shared::domain::waitlist::offer_order_id(
                &id,
                entry.user_id.as_str(),
                "",
            )
            .unwrap(),
        })
        .collect();
    let terms = OfferTerms::of(&sale);
    let new = NewOrder::new(w2.clone(), clock::now_ms(), clock::now_ms(), 60);
    let given = orders
        .abandon_to_line(&new, &candidates[..1], &terms, clock::now_ms())
        .await
        .unwrap();
    let GiveUp::Offered { rejected, offers } = given else {
        panic!("not offered: {given:?}");
    };
    assert_eq!(
        (rejected.offered, offers.len(), offers[0].user_id.as_str()),
        (1, 1, "first")
    );

    // Reconcile: w1's reservation is given up with "second" waiting, and
    // w2's (recorded already) is marked without its unit back in stock.
    let reconciler = reconciler(&app).await;
    let report = reconcile_late(&reconciler, &app, &id).await;
    let kinds: Vec<&str> = report.repairs.iter().map(|r| r.kind).collect();
    assert!(kinds.contains(&"OFFERED_TO_LINE"), "{:?}", report.repairs);
    let rows = orders.all_orders_of_sale(&sale.sale_id).await.unwrap();
    let w1_row = rows
        .iter()
        .find(|o| {
            o.order_id
                == lost
                    .iter()
                    .find(|m| m.user_id.as_str() == "w1")
                    .unwrap()
                    .order_id
        })
        .unwrap();
    assert_eq!(
        (w1_row.status, w1_row.reject_reason, w1_row.offered),
        (OrderStatus::Rejected, Some(RejectReason::Abandoned), 1)
    );
    let offered_to: Vec<&str> = rows
        .iter()
        .filter(|o| o.offer_of.is_some())
        .map(|o| o.user_id.as_str())
        .collect();
    assert_eq!(offered_to.len(), 2, "{offered_to:?}");
    assert!(offered_to.contains(&"first") && offered_to.contains(&"second"));
    // Redis: nothing back on sale, each offer counted for its buyer.
    let snap = stock.snapshot(&sale.sale_id).await.unwrap().unwrap();
    assert_eq!(
        snap.stock, 0,
        "a unit offered to the line went back on sale"
    );
    for user in ["first", "second"] {
        assert_eq!(snap.buyers.get(user).copied(), Some(1), "{user}");
    }
    for user in ["w1", "w2"] {
        assert_eq!(snap.buyers.get(user).copied().unwrap_or(0), 0, "{user}");
    }
    // Run again: nothing left to repair, nothing offered twice.
    let again = reconcile_late(&reconciler, &app, &id).await;
    assert!(again.repairs.is_empty(), "{:?}", again.repairs);
    assert_eq!(again.violations, vec![], "{again:?}");

    // The lost messages delivered late: the rows decide, nothing changes.
    let queue = SqsQueue::new(app.sqs.clone(), &app.queue_url);
    for message in &lost {
        queue.send(message).await.unwrap();
    }
    app.write_queued_orders().await;
    let snap = stock.snapshot(&sale.sale_id).await.unwrap().unwrap();
    assert_eq!(snap.stock, 0, "a late delivery put a unit back on sale");
    let after = orders.all_orders_of_sale(&sale.sale_id).await.unwrap();
    assert_eq!(after.len(), rows.len(), "a late delivery wrote an order");
    // The whole stock held once: w0's order and the two offers.
    let held: Vec<&str> = after
        .iter()
        .filter(|o| o.status == OrderStatus::PendingPayment)
        .map(|o| o.user_id.as_str())
        .collect();
    assert_eq!(held.len(), 3, "{held:?}");
    seckill_tests::assert_clean(&app.checker(), &id, &[]).await;
}

/// A head of the line that cannot take its unit when the transaction runs
/// (it left since the line was read, or it holds the limit) is passed
/// over, and the unit goes to the next: the handover's own conditions
/// decide, not the read of the line.
#[tokio::test]
async fn a_head_that_left_or_holds_the_limit_is_passed_over() {
    use seckill_shared::domain::waitlist::{EntryStatus, LineKey, offer_order_id};
    let app = App::spawn().await;
    let sale = live_sale(2, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.to_string();
    assert_eq!(app.purchase(&id, "w0", "").await.status, 202);
    app.write_queued_orders().await;
    assert_eq!(app.purchase(&id, "w1", "").await.status, 202);
    let lost = app.drain_queue().await;
    assert_eq!(lost.len(), 1);
    let orders = ledger(&app);
    let queries = orders_api::wire(&app.config).await.unwrap();
    let join = |user: &str| JoinRequest {
        sale_id: sale.sale_id.clone(),
        user_id: UserId::parse(user).unwrap(),
        sale_token: None,
        source_ip: None,
    };
    queries.join_waitlist(&join("gone")).await.unwrap();
    // The line as read before "gone" left, with w0 in it (the ledger's
    // entry alone: w0 holds the limit, which the join's admission in
    // Redis would have refused).
    let now = clock::now_ms();
    let w0 = UserId::parse("w0").unwrap();
    let key = LineKey::Joined(u64::try_from(now).unwrap(), "w0".into()).sort_key();
    orders.join(&sale.sale_id, &w0, &key, now).await.unwrap();
    queries.join_waitlist(&join("next")).await.unwrap();
    let read = orders.heads(&sale.sale_id, 10).await.unwrap();
    assert_eq!(read.len(), 3, "{read:?}");
    queries
        .leave_waitlist(&sale.sale_id, &UserId::parse("gone").unwrap())
        .await
        .unwrap();
    // In this order, whatever the clocks made of joins a millisecond apart.
    let candidates: Vec<Candidate> = ["gone", "w0", "next"]
        .iter()
        .map(|user| {
            let entry = read.iter().find(|e| e.user_id.as_str() == *user).unwrap();
            Candidate {
                entry: entry.clone(),
                offer_id: offer_order_id(&id, user, "").unwrap(),
            }
        })
        .collect();
    let terms = OfferTerms::of(&sale);
    let new = NewOrder::new(lost[0].clone(), now, now, 60);
    let given = orders
        .abandon_to_line(&new, &candidates, &terms, now)
        .await
        .unwrap();
    let GiveUp::Offered { offers, .. } = given else {
        panic!("not offered: {given:?}");
    };
    let offered: Vec<&str> = offers.iter().map(|o| o.user_id.as_str()).collect();
    assert_eq!(offered, vec!["next"]);
    let status = |user: &'static str| {
        let orders = &orders;
        let sale_id = &sale.sale_id;
        async move {
            orders
                .entry(sale_id, &UserId::parse(user).unwrap())
                .await
                .unwrap()
                .unwrap()
                .status
        }
    };
    assert_eq!(status("gone").await, EntryStatus::Left);
    assert_eq!(status("w0").await, EntryStatus::Waiting);
    assert!(matches!(status("next").await, EntryStatus::Offered(_)));
    let held: Vec<String> = orders
        .all_orders_of_sale(&sale.sale_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.status == OrderStatus::PendingPayment)
        .map(|o| o.user_id.to_string())
        .collect();
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(held.contains(&"w0".to_owned()) && held.contains(&"next".to_owned()));
}

/// An expired order of more units than one transaction can offer (each
/// offer is three of DynamoDB's hundred actions) hands the most it can to
/// the line and the rest to the stock, in one transaction that DynamoDB
/// takes.
#[tokio::test]
async fn an_order_of_more_units_than_a_transaction_offers_hands_over_the_most_it_can() {
    use seckill_shared::adapters::dynamo::waitlist::MAX_OFFERS;
    use seckill_shared::domain::waitlist::{LineKey, offer_order_id};
    use seckill_shared::ports::Handover;
    let app = App::spawn().await;
    let units = MAX_OFFERS + 8;
    let sale = live_sale(units, units);
    app.open_sale(&sale).await;
    let id = sale.sale_id.to_string();
    let reply = app
        .purchase(&id, "bulk", &format!(r#"{{"quantity": {units}}}"#))
        .await;
    assert_eq!(reply.status, 202, "{reply:?}");
    app.write_queued_orders().await;
    let orders = ledger(&app);
    let order = orders
        .all_orders_of_sale(&sale.sale_id)
        .await
        .unwrap()
        .pop()
        .unwrap();
    let now = clock::now_ms();
    let mut candidates = Vec::new();
    for i in 0..units {
        let user = UserId::parse(&format!("waiter-{i:02}")).unwrap();
        let key = LineKey::Joined(u64::try_from(now).unwrap() + u64::from(i), user.to_string())
            .sort_key();
        let joined = orders.join(&sale.sale_id, &user, &key, now).await.unwrap();
        let seckill_shared::ports::Joined::New(entry) = joined else {
            panic!("{joined:?}");
        };
        candidates.push(Candidate {
            offer_id: offer_order_id(&id, user.as_str(), "").unwrap(),
            entry,
        });
    }
    let terms = OfferTerms::of(&sale);
    let due = order.expires_at_ms.unwrap() + 1;
    let handover = orders
        .expire_to_line(&order, &candidates, &terms, due)
        .await
        .unwrap();
    let Handover::Done {
        expired,
        offers,
        to_stock,
    } = handover
    else {
        panic!("not handed over: {handover:?}");
    };
    assert_eq!(
        (expired.offered, offers.len(), to_stock),
        (MAX_OFFERS, MAX_OFFERS as usize, 8)
    );
    let rows = orders.all_orders_of_sale(&sale.sale_id).await.unwrap();
    assert_eq!(
        rows.iter().filter(|o| o.offer_of.is_some()).count(),
        MAX_OFFERS as usize
    );
}

/// Redis's claim of an offer (`hold_offer.lua`): within the limit as Redis
/// counts it (a purchase still queued included), counted once however many
/// overlapping runs claim it, given back only when the last of them gives
/// it up, and kept once the ledger wrote the offer.
#[tokio::test]
async fn an_offer_is_claimed_within_the_limit_once_whoever_claims_it() {
    use seckill_shared::domain::waitlist::offer_order_id;
    use seckill_shared::ports::{OfferClaim, WaitlistStock};
    let app = App::spawn().await;
    let sale = live_sale(3, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.to_string();
    let stock = app.service.stock();
    let sale_id = &sale.sale_id;
    let count = |user: &'static str| async move {
        stock
            .snapshot(sale_id)
            .await
            .unwrap()
            .unwrap()
            .buyers
            .get(user)
            .copied()
            .unwrap_or(0)
    };
    // "queued" bought; its order is still on the queue (the ledger does
    // not know it): no offer for them.
    assert_eq!(app.purchase(&id, "queued", "").await.status, 202);
    let user = UserId::parse("queued").unwrap();
    let offer = offer_order_id(&id, "queued", "").unwrap();
    let now = clock::now_ms();
    assert_eq!(
        stock
            .claim_offer(&sale.sale_id, &offer, &user, now)
            .await
            .unwrap(),
        OfferClaim::AtLimit
    );
    assert_eq!(count("queued").await, 1);
    // Two overlapping runs claim "a"'s offer: counted once.
    let a = UserId::parse("a").unwrap();
    let offer = offer_order_id(&id, "a", "").unwrap();
    for _ in 0..2 {
        assert_eq!(
            stock
                .claim_offer(&sale.sale_id, &offer, &a, now)
                .await
                .unwrap(),
            OfferClaim::Claimed
        );
    }
    assert_eq!(count("a").await, 1);
    // While claimed, "a" cannot buy past the limit.
    assert_eq!(app.purchase(&id, "a", "").await.status, 409);
    // One run gives up: the other's claim stands; the last one gives it back.
    stock
        .unclaim_offer(&sale.sale_id, &offer, &a)
        .await
        .unwrap();
    assert_eq!(count("a").await, 1);
    stock
        .unclaim_offer(&sale.sale_id, &offer, &a)
        .await
        .unwrap();
    assert_eq!(count("a").await, 0);
    // Claimed, then written by the ledger (HOLD): a late give-up of another
    // run takes nothing back.
    stock
        .claim_offer(&sale.sale_id, &offer, &a, now)
        .await
        .unwrap();
    stock
        .claim_offer(&sale.sale_id, &offer, &a, now)
        .await
        .unwrap();
    stock
        .hold_offer(&sale.sale_id, &offer, &a, now, 1)
        .await
        .unwrap();
    stock
        .unclaim_offer(&sale.sale_id, &offer, &a)
        .await
        .unwrap();
    assert_eq!(count("a").await, 1);
}

/// The release killed between its steps, at each point of a handover: after
/// Redis's claim (the ledger never wrote the offer), and after the
/// ledger's transaction (Redis never heard of it). Reconcile finishes
/// both from the ledger: the offered buyer counted once, the unclaimed
/// buyer's count given back, no unit back on sale.
#[tokio::test]
async fn a_release_killed_between_its_steps_is_finished_by_reconcile() {
    use seckill_shared::domain::waitlist::offer_order_id;
    use seckill_shared::ports::{Handover, OfferClaim, WaitlistStock};
    let app = App::spawn().await;
    let mut sale = live_sale(1, 1);
    sale.end_ms = clock::now_ms() + 3 * i64::try_from(MAX_AGE.as_millis()).unwrap();
    app.open_sale(&sale).await;
    let id = sale.sale_id.to_string();
    assert_eq!(app.purchase(&id, "w0", "").await.status, 202);
    app.write_queued_orders().await;
    join_the_line(&app, &sale, &["first", "second"]).await;
    let orders = ledger(&app);
    let stock = app.service.stock();
    let heads = orders.heads(&sale.sale_id, 10).await.unwrap();
    let candidate = |user: &str| Candidate {
        entry: heads
            .iter()
            .find(|e| e.user_id.as_str() == user)
            .unwrap()
            .clone(),
        offer_id: offer_order_id(&id, user, "").unwrap(),
    };
    let (first, second) = (candidate("first"), candidate("second"));
    let w0 = orders
        .all_orders_of_sale(&sale.sale_id)
        .await
        .unwrap()
        .pop()
        .unwrap();
    let due = w0.expires_at_ms.unwrap() + 1;
    // Both claimed; only "first" offered by the ledger; then the release dies.
    for c in [&first, &second] {
        assert_eq!(
            stock
                .claim_offer(
                    &sale.sale_id,
                    &c.offer_id,
                    &c.entry.user_id,
                    clock::now_ms()
                )
                .await
                .unwrap(),
            OfferClaim::Claimed
        );
    }
    let terms = OfferTerms::of(&sale);
    let handover = orders
        .expire_to_line(&w0, std::slice::from_ref(&first), &terms, due)
        .await
        .unwrap();
    assert!(matches!(handover, Handover::Done { .. }), "{handover:?}");

    // Reconcile past the maximum age: w0's reservation marked with no unit
    // back, "first"'s claim stands (its order exists), "second"'s is
    // given back.
    let reconciler = reconciler(&app).await;
    let report = reconcile_late(&reconciler, &app, &id).await;
    let kinds: Vec<&str> = report.repairs.iter().map(|r| r.kind).collect();
    assert!(kinds.contains(&"UNITS_RETURNED"), "{:?}", report.repairs);
    let snap = stock.snapshot(&sale.sale_id).await.unwrap().unwrap();
    assert_eq!(snap.stock, 0, "the offered unit went back on sale");
    let counted = |user: &str| snap.buyers.get(user).copied().unwrap_or(0);
    assert_eq!(
        (counted("w0"), counted("first"), counted("second")),
        (0, 1, 0),
        "{:?} after {:?}",
        snap.buyers,
        report.repairs
    );
    let again = reconcile_late(&reconciler, &app, &id).await;
    assert!(again.repairs.is_empty(), "{:?}", again.repairs);
    seckill_tests::assert_clean(&app.checker(), &id, &[]).await;
}
