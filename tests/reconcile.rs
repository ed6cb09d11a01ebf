//! Reconciliation on a real Redis and the emulator, with time injected: the
//! outbox relay after a crash between Redis and SQS, giving up on a
//! reservation that never became an order, refusing to "fix" an oversell
//! risk, and a whole sale run end to end that reconciles clean.

use redis::AsyncCommands;
use seckill_infra::token::TokenSettings;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::app::reconcile::{ReconcileReport, ReconcileSettings};
use seckill_shared::clock;
use seckill_shared::domain::orders::OrderStatus;
use seckill_shared::domain::{Quantity, Sale, UserId};
use seckill_shared::ports::{AuditTrail, ReserveOutcome, ReserveRequest, StockStore};
use seckill_shared::wire::LiveReconciler;
use seckill_tests::{App, LocalStack, eventually, live_sale, unique};
use std::time::Duration;

async fn reconciler(app: &App) -> LiveReconciler {
    seckill_shared::wire::reconciler(&app.config, seckill_shared::adapters::aws::Caller::Tool)
        .await
        .unwrap()
        .with_settings(ReconcileSettings {
            grace: Duration::from_secs(60),
            max_age: Duration::from_secs(3_600),
            ..ReconcileSettings::default()
        })
}

/// One reconcile of `sale` now; the sale exists.
async fn reconcile_now(reconciler: &LiveReconciler, sale: &Sale) -> ReconcileReport {
    reconciler
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap()
}

/// Whether the report names a violation with this code.
fn names(report: &ReconcileReport, code: &str) -> bool {
    report.violations.iter().any(|v| v.code == code)
}

/// Reserves in Redis and sends nothing: a purchase that crashed between the
/// script and SendMessage.
async fn reserve_only(app: &App, sale: &str, user: &str) -> (String, i64) {
    let sale_id = seckill_shared::domain::SaleId::parse(sale).unwrap();
    let user_id = UserId::parse(user).unwrap();
    let outcome = app
        .service
        .stock()
        .reserve(ReserveRequest {
            sale_id: &sale_id,
            user_id: &user_id,
            quantity: Quantity::ONE,
            idempotency_key: None,
            gate_nonce: None,
            gate_issued_ms: None,
            source_ip: None,
        })
        .await
        .unwrap();
    match outcome {
        ReserveOutcome::Reserved(r) => (r.order_id.to_string(), r.reserved_at_ms),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn crash_between_redis_and_sqs_is_relayed_exactly_once() {
    let app = App::spawn().await;
    let sale = live_sale(5, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let (order_id, at) = reserve_only(&app, id, "ghost").await;
    let reconciler = reconciler(&app).await;

    // Within the grace period the reservation may still be on its way.
    let report = reconciler
        .reconcile_sale(&sale.sale_id, at + 10_000)
        .await
        .unwrap()
        .unwrap();
    assert!(report.repairs.is_empty(), "{:?}", report.repairs);
    assert_eq!(app.queue_depth().await, 0);

    // Past it, and reconcile runs twice: two relays, one order.
    for minutes in [2, 3] {
        let report = reconciler
            .reconcile_sale(&sale.sale_id, at + minutes * 60_000)
            .await
            .unwrap()
            .unwrap();
        assert!(
            report
                .repairs
                .iter()
                .any(|r| r.kind == "RELAYED" && r.order_id.as_deref() == Some(&order_id)),
            "{:?}",
            report.repairs
        );
    }
    app.write_queued_orders().await;
    let orders = app.orders().await;
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[&order_id].status, OrderStatus::PendingPayment);
    assert_eq!(app.sale_counters(id).await, (4, 1), "stock taken once");
    assert_eq!(app.reservations(id).await[&order_id].state, "WRITTEN");

    let report = reconcile_now(&reconciler, &sale).await;
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert!(
        report.repairs.is_empty(),
        "nothing left to repair: {:?}",
        report.repairs
    );
}

#[tokio::test]
async fn a_reservation_that_never_became_an_order_is_released_and_recorded() {
    let app = App::spawn().await;
    let sale = live_sale(3, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // Its message went to the DLQ for good (here: was never sent at all).
    let (order_id, at) = reserve_only(&app, id, "unlucky").await;
    assert_eq!(app.stock(id).await, Some(2));
    let reconciler = reconciler(&app).await;

    let report = reconciler
        .reconcile_sale(&sale.sale_id, at + 2 * 3_600_000)
        .await
        .unwrap()
        .unwrap();
    assert!(
        report.repairs.iter().any(|r| r.kind == "RELEASED_FAILED"),
        "{:?}",
        report.repairs
    );
    assert_eq!(app.stock(id).await, Some(3), "stock back");
    assert!(!app.buyers(id).await.contains_key("unlucky"));
    let orders = app.orders().await;
    assert_eq!(
        orders[&order_id].status,
        OrderStatus::Rejected,
        "recorded as failed"
    );

    // The message redriven from the DLQ later cannot take the unit back.
    let body = seckill_tests::order_body(&order_id, id, "unlucky", 1, at);
    let failures = seckill_tests::invoke_writer(
        &*app.writer().await,
        seckill_tests::sqs_event(&[("late", &body)]),
    )
    .await
    .unwrap();
    assert!(failures.is_empty());
    assert_eq!(app.sale_counters(id).await, (3, 0));
    assert_eq!(app.orders().await[&order_id].status, OrderStatus::Rejected);
}

/// Redis is derived from the ledger: a stock that offers more than
/// DynamoDB has is reported (it pages) and, with nothing in flight, set back
/// to the ledger's figure; one that offers less (units stuck) is set back
/// too.
#[tokio::test]
async fn oversell_risk_is_reported_and_redis_reset_to_the_ledger() {
    let app = App::spawn().await;
    let sale = live_sale(5, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // Redis believes in more units than DynamoDB has.
    let keys = SaleKeys::new(&sale.sale_id);
    let _: () = app.redis.clone().set(&keys.stock, 9).await.unwrap();
    let reconciler = reconciler(&app).await;
    let report = reconcile_now(&reconciler, &sale).await;
    assert!(names(&report, "OVERSELL_RISK"), "{:?}", report.violations);
    assert!(
        report.repairs.iter().any(|r| r.kind == "STOCK_RESET"),
        "{:?}",
        report.repairs
    );
    assert_eq!(app.stock(id).await, Some(5), "reset to available");
    // The report is kept for the admin API.
    let stored = app
        .catalog
        .last_report(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert!(stored.contains("OVERSELL_RISK"));
    // And the other way: units stuck in Redis come back.
    let _: () = app.redis.clone().set(&keys.stock, 2).await.unwrap();
    let stuck = reconcile_now(&reconciler, &sale).await;
    assert!(names(&stuck, "STOCK_DRIFT"), "{:?}", stuck.violations);
    assert_eq!(app.stock(id).await, Some(5), "stuck units back");
    assert!(
        reconcile_now(&reconciler, &sale)
            .await
            .violations
            .is_empty()
    );
}

#[tokio::test]
async fn a_buyer_count_is_lowered_only_when_nothing_proves_it() {
    let app = App::spawn().await;
    let sale = live_sale(5, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // Counted, and holding nothing anywhere: a count left behind.
    let keys = SaleKeys::new(&sale.sale_id);
    let _: () = app
        .redis
        .clone()
        .hset(&keys.buyers, "ghost", 1)
        .await
        .unwrap();
    // Written (its reservation says so), its row not in the orders index
    // yet: the index lags the table on AWS.
    let (order_id, _) = reserve_only(&app, id, "late").await;
    let resolved = app
        .service
        .stock()
        .resolve(
            &sale.sale_id,
            &seckill_shared::domain::OrderId::parse(&order_id).unwrap(),
            seckill_shared::ports::Resolution::Written,
        )
        .await
        .unwrap();
    assert!(resolved);
    let report = reconcile_now(&reconciler(&app).await, &sale).await;
    let cleared: Vec<&str> = report
        .repairs
        .iter()
        .filter(|r| r.kind == "BUYER_CLEARED")
        .map(|r| r.detail.as_str())
        .collect();
    assert_eq!(cleared, vec!["ghost: 1 -> 0"], "{:?}", report.repairs);
    let buyers = app.buyers(id).await;
    assert_eq!(
        (buyers.get("ghost"), buyers.get("late")),
        (None, Some(&1)),
        "the late buyer keeps the count that holds them to the limit"
    );
    let reply = app.purchase(id, "late", "").await;
    assert_eq!(reply.code(), "LIMIT_EXCEEDED", "{:?}", reply.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciling_while_orders_are_written_reports_nothing_false() {
    // Orders written while reconcile reads: the sale item, the rows and
    // Redis are read one after another, so an order written in between
    // must not show as counts that disagree.
    let app = std::sync::Arc::new(App::spawn().await);
    let sale = live_sale(60, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    for n in 0..60 {
        let reply = app.purchase(id, &format!("busy{n}"), "").await;
        assert_eq!(reply.status, 202, "{}", reply.body);
    }
    // The writer waits after each batch until another reconcile has
    // started (a permit of `started`), so reconciles overlap the writes at
    // any pace (a fast writer once finished all 60 before a slow machine's
    // first reconcile).
    let started = std::sync::Arc::new(tokio::sync::Notify::new());
    let writing = tokio::spawn({
        let app = app.clone();
        let started = started.clone();
        async move {
            app.write_queued_orders_pausing(|| {
                let started = started.clone();
                async move {
                    tokio::time::timeout(std::time::Duration::from_secs(300), started.notified())
                        .await
                        .expect("no reconcile started in 300 s");
                }
            })
            .await
        }
    });
    let reconciler = reconciler(&app).await;
    let mut during = 0;
    let mut uncompared = 0;
    while !writing.is_finished() {
        started.notify_one();
        let report = reconcile_now(&reconciler, &sale).await;
        assert!(
            report.violations.is_empty(),
            "while {} of 60 were written: {:?}",
            report.sold,
            report.violations
        );
        if report.sold < 60 {
            during += 1;
        }
        if !report.counts_compared {
            uncompared += 1;
        }
    }
    writing.await.unwrap();
    assert!(during > 0, "no reconcile ran while orders were written");
    eprintln!("{during} reconciles while writing, {uncompared} with counts moving throughout");

    let report = reconcile_now(&reconciler, &sale).await;
    assert!(report.counts_compared);
    assert_eq!((report.sold, report.available), (60, 0));
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // The comparison still bites once the counters are still: a sale item
    // that lost a unit is reported.
    app.db
        .update_item()
        .table_name(&app.config.sales_table)
        .key(
            "saleId",
            aws_sdk_dynamodb::types::AttributeValue::S(id.into()),
        )
        .update_expression("SET sold = sold - :one")
        .expression_attribute_values(
            ":one",
            aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
        )
        .send()
        .await
        .unwrap();
    let report = reconcile_now(&reconciler, &sale).await;
    assert!(names(&report, "COUNTS_DISAGREE"), "{:?}", report.violations);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_sale_run_reconciles_clean() {
    // One poller and a visibility timeout longer than a batch: see the drain
    // test in orders.rs for the emulator's limits this works around.
    let stack = LocalStack::start_with(15, Some(1)).await;
    let tokens = TokenSettings::from_env();
    let admin = format!("Bearer {}", tokens.mint("ops", true, 600).unwrap());
    let sale = unique("run");
    let now = clock::now_ms();
    let definition = serde_json::json!({
        "name": "Full run", "totalStock": 200,
        "startAt": clock::rfc3339_ms(now + 3_000), "endAt": clock::rfc3339_ms(now + 3_600_000),
        "perUserLimit": 1, "paymentWindowSeconds": 60,
    });
    let (status, body) = stack
        .request(
            "PUT",
            &format!("/admin/sales/{sale}"),
            &[("authorization", &admin)],
            &definition.to_string(),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // Prewarmed by the scheduler's job (it starts within the lead time).
    seckill_infra::local::run_job(&stack.admin, seckill_infra::local::Job::Prewarm).await;
    let path = format!("/sales/{sale}/purchase");
    let (status, body) = stack
        .request(
            "POST",
            &path,
            &[(
                "authorization",
                &format!("Bearer {}", tokens.mint("early", false, 60).unwrap()),
            )],
            "",
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (425, Some("SALE_NOT_STARTED"))
    );
    assert!(
        eventually(Duration::from_secs(10), || async {
            clock::now_ms() > now + 3_000
        })
        .await
    );

    // 2,000 buyers for 200 units, 16 at a time over HTTP.
    let stack = std::sync::Arc::new(stack);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (stack, next, path) = (stack.clone(), next.clone(), path.clone());
            tokio::spawn(async move {
                let tokens = TokenSettings::from_env();
                let mut won = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if n >= 2_000 {
                        return won;
                    }
                    let user = format!("buyer{n}");
                    let auth = format!("Bearer {}", tokens.mint(&user, false, 600).unwrap());
                    let (status, body) = stack
                        .request("POST", &path, &[("authorization", &auth)], "")
                        .await;
                    match status {
                        202 => won.push((user, auth, body["orderId"].as_str().unwrap().to_owned())),
                        410 => {}
                        other => panic!("{other}: {body}"),
                    }
                }
            })
        })
        .collect();
    let mut winners = Vec::new();
    for w in workers {
        winners.extend(w.await.unwrap());
    }
    assert_eq!(winners.len(), 200);

    // Every order written by the event source, then 150 of 200 pay.
    let all_pending = eventually(Duration::from_secs(120), || {
        let (stack, winners) = (&stack, &winners);
        async move {
            let (_, auth, order) = &winners[winners.len() - 1];
            let (_, first) = stack
                .request(
                    "GET",
                    &format!("/orders/{}", winners[0].2),
                    &[("authorization", &winners[0].1)],
                    "",
                )
                .await;
            let (_, last) = stack
                .request(
                    "GET",
                    &format!("/orders/{order}"),
                    &[("authorization", auth)],
                    "",
                )
                .await;
            first["status"] == "PENDING_PAYMENT" && last["status"] == "PENDING_PAYMENT"
        }
    })
    .await;
    assert!(all_pending);
    for (_, auth, order) in winners.iter().take(150) {
        let paid = eventually(Duration::from_secs(60), || async {
            let (status, body) = stack
                .request(
                    "POST",
                    &format!("/orders/{order}/pay"),
                    &[("authorization", auth)],
                    "",
                )
                .await;
            status == 200 && body["status"] == "PAID"
        })
        .await;
        assert!(paid, "{order}");
    }
    // Every payment acknowledged is still there: a write the store undid
    // (an emulator's cancelled transaction putting back its copy of the
    // table) fails here as that, not as a miscount of the release below.
    for (_, auth, order) in winners.iter().take(150) {
        let (_, row) = stack
            .request(
                "GET",
                &format!("/orders/{order}"),
                &[("authorization", auth)],
                "",
            )
            .await;
        assert_eq!(
            row["status"], "PAID",
            "an acknowledged payment was undone: {row}"
        );
    }

    // The payment window passes (time injected): the release job expires the 50.
    let later = clock::now_ms() + 61_000;
    // The scheduled release-unpaid function, with its own role (admin-api
    // has no route that expires orders).
    let report = stack
        .scheduled
        .release_unpaid
        .release_unpaid(later, std::time::Instant::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        (report.expired, report.units_returned),
        (50, 50),
        "{report:?}"
    );

    let sale_id = seckill_shared::domain::SaleId::parse(&sale).unwrap();
    let (view_status, view) = stack
        .request("GET", &format!("/sales/{sale}"), &[], "")
        .await;
    assert_eq!(
        (view_status, view["remaining"].as_i64()),
        (200, Some(50)),
        "{view}"
    );
    let (_, counters) = seckill_shared::app::operators::record(&stack.admin.jobs, &sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (counters.available, counters.sold),
        (50, 150),
        "DynamoDB agrees with Redis"
    );

    let report = stack
        .admin
        .reconciler
        .reconcile_sale(&sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.orders.get("PAID"), Some(&150));
    assert_eq!(report.orders.get("EXPIRED"), Some(&50));
    let (status, stored) = stack
        .request(
            "GET",
            &format!("/admin/sales/{sale}/report"),
            &[("authorization", &admin)],
            "",
        )
        .await;
    assert_eq!(
        (status, stored["violations"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{stored}"
    );
}
