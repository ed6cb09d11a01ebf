//! DynamoDB is the ledger, Redis is derived from it: one test per defect of
//! the issue that made it so (each failed on the code before the fix), on a
//! real Redis and the emulator. Failovers that lose recent Redis writes are
//! made by restoring the sale's keys as they were before the lost writes
//! (what a replica that lagged behind holds when it is promoted); races are
//! made by handing reconcile a read taken before the stores moved.

use redis::AsyncCommands;
use seckill_shared::adapters::redis::{PURCHASE_SOURCE, SaleKeys};
use seckill_shared::app::invariants;
use seckill_shared::app::jobs::PrewarmOutcome;
use seckill_shared::app::reconcile::ReconcileSettings;
use seckill_shared::clock;
use seckill_shared::domain::orders::{NewOrder, OrderStatus, RejectReason};
use seckill_shared::domain::{OrderId, OrderMessage, Sale, SaleId, UserId};
use seckill_shared::ports::StockLoading;
use seckill_shared::ports::{CatalogAdmin, OrderLedger, OrderStore};
use seckill_shared::wire::LiveReconciler;
use seckill_tests::{App, Reply, eventually, live_sale, purchase_event};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A reconciler that gives up on a reservation as soon as it is `max_age`
/// old, and relays after `grace`.
async fn reconciler(app: &App, grace: Duration, max_age: Duration) -> LiveReconciler {
    seckill_shared::wire::reconciler(&app.config, seckill_shared::adapters::aws::Caller::Tool)
        .await
        .unwrap()
        .with_settings(ReconcileSettings {
            grace,
            max_age,
            confirm_after: Duration::from_millis(200),
        })
}

async fn reconcile(app: &App, sale: &Sale) -> seckill_shared::app::reconcile::ReconcileReport {
    reconciler(app, Duration::from_secs(60), Duration::from_secs(3_600))
        .await
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap()
}

/// A live sale whose orders expire one second after they are accepted.
fn quick_expiring_sale(stock: u32, limit: u32) -> Sale {
    let mut sale = live_sale(stock, limit);
    sale.payment_window_seconds = 1;
    sale
}

/// Waits until `order`'s payment window has closed, then runs the release.
async fn expire_unpaid(app: &App, order_id: &str) {
    let order = app.orders().await.remove(order_id).unwrap();
    let expires_at = order.expires_at_ms.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            clock::now_ms() > expires_at
        })
        .await
    );
    let report = app
        .jobs()
        .await
        .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(30))
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(
        app.orders().await[order_id].status,
        OrderStatus::Expired,
        "{report:?}"
    );
}

fn order_id(reply: &Reply) -> String {
    assert_eq!(reply.status, 202, "{reply:?}");
    reply.body["orderId"].as_str().unwrap().to_owned()
}

async fn buy_with_key(app: &App, sale: &str, user: &str, key: &str) -> Reply {
    app.call(purchase_event(
        sale,
        Some(user),
        "",
        &[("Idempotency-Key", key)],
    ))
    .await
}

/// The sale's Redis keys as they are now (`DUMP`), to be put back later.
type Saved = Vec<(String, Option<Vec<u8>>)>;

async fn save_keys(app: &App, sale: &str) -> Saved {
    let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
    let mut conn = app.redis.clone();
    let mut out = Vec::new();
    for key in [
        &keys.meta,
        &keys.stock,
        &keys.buyers,
        &keys.resv,
        &keys.user_orders,
    ] {
        let dump: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.push((key.clone(), dump));
    }
    out
}

/// Redis fails over to a replica that had not received the writes made
/// since `saved`: the keys are put back as they were.
async fn fail_over_to(app: &App, saved: &Saved) {
    let mut conn = app.redis.clone();
    for (key, dump) in saved {
        match dump {
            Some(bytes) => {
                let _: () = redis::cmd("RESTORE")
                    .arg(key)
                    .arg(0)
                    .arg(bytes.as_slice())
                    .arg("REPLACE")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
            }
            None => {
                let _: () = conn.del(key).await.unwrap();
            }
        }
    }
}

/// Units each buyer holds in the ledger (rows pending payment or paid).
async fn held_in_rows(app: &App) -> HashMap<String, u32> {
    let mut held = HashMap::new();
    for o in app.orders().await.values() {
        if matches!(o.status, OrderStatus::PendingPayment | OrderStatus::Paid) {
            *held.entry(o.user_id.to_string()).or_default() += o.quantity.get();
        }
    }
    held
}

/// Redis offers exactly what DynamoDB has (nothing in flight).
async fn assert_redis_matches_ledger(app: &App, sale: &str) {
    let (available, _) = app.sale_counters(sale).await;
    assert_eq!(
        app.stock(sale).await,
        Some(available),
        "Redis stock vs DynamoDB available"
    );
}

// Defect 1 (a): an expired order's unit went back to Redis a second time
// after a rebuild (reconcile found no EXPIRED marker in the rebuilt keys),
// and the buyer's count was lowered below what they hold.
#[tokio::test]
async fn defect1a_an_expired_unit_goes_back_once_across_a_rebuild() {
    let app = App::spawn().await;
    let sale = quick_expiring_sale(2, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let x = order_id(&app.purchase(id, "u1", "").await);
    app.write_queued_orders().await;
    expire_unpaid(&app, &x).await;
    assert_eq!(app.stock(id).await, Some(2));
    // u1 buys again (Z), and holds one unit.
    let _z = order_id(&app.purchase(id, "u1", "").await);
    app.write_queued_orders().await;
    assert_eq!(app.sale_counters(id).await, (1, 1));

    // Redis loses the sale (the OVERSELL_RISK runbook's own step); the
    // rebuild reads `available`, which already has X's unit.
    app.lose_redis_keys(id).await;
    let outcome = app
        .jobs()
        .await
        .prewarm_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap();
    assert!(
        matches!(outcome, PrewarmOutcome::Loaded { stock: 1, .. }),
        "{outcome:?}"
    );
    let report = reconcile(&app, &sale).await;
    assert_eq!(
        app.stock(id).await,
        Some(1),
        "X's unit went back a second time: {:?}",
        report.repairs
    );
    assert_eq!(
        app.buyers(id).await.get("u1"),
        Some(&1),
        "u1 holds Z: their count stays"
    );
    assert_eq!(
        app.purchase(id, "u1", "").await.code(),
        "LIMIT_EXCEEDED",
        "u1 is at the limit"
    );
    assert_redis_matches_ledger(&app, id).await;
}

// Defect 1 (b): a redelivery of an expired order's message marked its
// reservation WRITTEN over EXPIRED, and the next reconcile returned the
// unit again.
#[tokio::test]
async fn defect1b_a_redelivered_expired_order_is_not_returned_twice() {
    let app = App::spawn().await;
    let sale = quick_expiring_sale(2, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let x = order_id(&app.purchase(id, "u1", "").await);
    let delivered = app.take_messages().await;
    assert_eq!(delivered.len(), 1);
    let writer = app.writer().await;
    let records: Vec<(&str, &str)> = delivered
        .iter()
        .map(|(m, b)| (m.as_str(), b.as_str()))
        .collect();
    let failures = seckill_tests::invoke_writer(&writer, seckill_tests::sqs_event(&records))
        .await
        .unwrap();
    assert!(failures.is_empty());
    expire_unpaid(&app, &x).await;
    assert_eq!(app.stock(id).await, Some(2));
    let _y = order_id(&app.purchase(id, "u2", "").await);
    app.write_queued_orders().await;
    assert_eq!(app.stock(id).await, Some(1));

    // X's message again (a redelivery, or a DLQ redrive).
    let failures = seckill_tests::invoke_writer(&writer, seckill_tests::sqs_event(&records))
        .await
        .unwrap();
    assert!(failures.is_empty());
    assert_eq!(app.reservations(id).await[&x].state, "EXPIRED");
    let report = reconcile(&app, &sale).await;
    assert_eq!(
        app.stock(id).await,
        Some(1),
        "X's unit went back twice: {:?}",
        report.repairs
    );
    assert_redis_matches_ledger(&app, id).await;
}

// Defect 2 (a): Redis was the only keeper of the per-user limit; a failover
// that lost a buyer's purchase let them buy again, and both orders were
// written.
#[tokio::test]
async fn defect2a_a_failover_that_loses_a_purchase_cannot_put_its_buyer_over_the_limit() {
    let app = App::spawn().await;
    let sale = live_sale(5, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let before = save_keys(&app, id).await;
    let first = order_id(&app.purchase(id, "u", "").await);
    fail_over_to(&app, &before).await;
    // Someone else buys, then u again: Redis no longer knows u's order.
    order_id(&app.purchase(id, "v", "").await);
    let second = order_id(&app.purchase(id, "u", "").await);
    assert_ne!(first, second);
    app.write_queued_orders().await;

    let held = held_in_rows(&app).await;
    assert_eq!(
        held.get("u"),
        Some(&1),
        "u is over the limit of 1: {held:?}"
    );
    let orders = app.orders().await;
    assert_eq!(orders[&first].status, OrderStatus::PendingPayment);
    assert_eq!(orders[&second].status, OrderStatus::Rejected);
    assert_eq!(app.sale_counters(id).await, (3, 2));
    // Read with the test's own client: the writer's would count as the
    // order-writer's call in the IAM test, and the order-writer never reads
    // buyer records in bulk.
    let ledger = seckill_shared::adapters::dynamo::orders::DynamoOrders::new(
        app.db.clone(),
        &app.config.orders_table,
        &app.config.sales_table,
    );
    let (u, v) = (UserId::parse("u").unwrap(), UserId::parse("v").unwrap());
    let records = ledger.held_by_all(&sale.sale_id, &[&u, &v]).await.unwrap();
    assert_eq!(
        (records["u"], records["v"]),
        (1, 1),
        "the buyers' ledger records"
    );
    // Redis took a unit for the rejected order in place of the one the
    // failover lost: it offers exactly what DynamoDB has, and still counts u.
    assert_redis_matches_ledger(&app, id).await;
    assert_eq!(app.purchase(id, "u", "").await.code(), "LIMIT_EXCEEDED");
}

// Defect 2 (b): the failover rolled the order sequence back, so the same
// buyer's next purchase got the order id of the one the failover lost.
#[tokio::test]
async fn defect2b_order_ids_never_repeat_after_a_failover() {
    let app = App::spawn().await;
    let sale = live_sale(5, 2);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let before = save_keys(&app, id).await;
    let first = order_id(&app.purchase(id, "u", "").await);
    fail_over_to(&app, &before).await;
    let second = order_id(&app.purchase(id, "u", r#"{"quantity": 2}"#).await);
    assert_ne!(first, second, "the same order id for two purchases");
    app.write_queued_orders().await;
    let orders = app.orders().await;
    assert_eq!(orders.len(), 2);
    assert_eq!(orders[&second].quantity.get(), 2);
    // u bought 3 units against a limit of 2: the ledger takes the first.
    assert_eq!(held_in_rows(&app).await.get("u"), Some(&1));
}

// Defect 3: the rebuild counted only the orders queue; an accepted order
// in the DLQ had its unit sold again.
#[tokio::test]
async fn defect3_the_rebuild_waits_for_accepted_orders_in_the_dlq() {
    let app = App::spawn().await;
    let sale = live_sale(2, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    order_id(&app.purchase(id, "u", "").await);
    // The writer failed it maxReceiveCount times: SQS moved it to the DLQ.
    for (_, body) in app.take_messages().await {
        app.sqs
            .send_message()
            .queue_url(&app.dlq_url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    app.lose_redis_keys(id).await;
    let jobs = app.jobs().await;
    let outcome = jobs
        .prewarm_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap();
    assert!(
        matches!(outcome, PrewarmOutcome::WaitingForQueue { .. }),
        "rebuilt while an accepted order sat in the DLQ: {outcome:?}"
    );
    let reply = app.purchase(id, "w", "").await;
    assert_eq!((reply.status, reply.code()), (503, "SALE_PAUSED"));

    // The operator redrives the DLQ; the order is written; the sale comes back.
    let got = app
        .sqs
        .receive_message()
        .queue_url(&app.dlq_url)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    for m in got {
        app.sqs
            .send_message()
            .queue_url(&app.queue_url)
            .message_body(m.body.unwrap())
            .send()
            .await
            .unwrap();
        app.sqs
            .delete_message()
            .queue_url(&app.dlq_url)
            .receipt_handle(m.receipt_handle.unwrap())
            .send()
            .await
            .unwrap();
    }
    app.write_queued_orders().await;
    // The purchase refused above also asked for the rebuild (a purchase
    // that finds a live sale missing does): whichever of the two runs
    // first loads the sale, and the other meets its lock (`Busy`) or the
    // loaded sale (`Refreshed`), as a scheduled prewarm would.
    let loaded = eventually(Duration::from_secs(20), || async {
        matches!(
            jobs.prewarm_sale(&sale.sale_id, clock::now_ms()).await,
            Ok(PrewarmOutcome::Loaded { .. } | PrewarmOutcome::Refreshed)
        )
    })
    .await;
    assert!(
        loaded,
        "the sale was not rebuilt: {:?}",
        jobs.prewarm_sale(&sale.sale_id, clock::now_ms()).await
    );
    assert_eq!(app.stock(id).await, Some(1), "rebuilt from the ledger");
    assert_eq!(app.purchase(id, "u", "").await.code(), "LIMIT_EXCEEDED");
}

/// Keys and arguments of one purchase as the store sends them, with the
/// request id the store adds (ignored by a script that knows none).
fn purchase_call(keys: &SaleKeys, sale: &str, user: &str, request: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(PURCHASE_SOURCE)
        .arg(7)
        .arg(&keys.meta)
        .arg(&keys.stock)
        .arg(&keys.buyers)
        .arg(&keys.resv)
        .arg(&keys.user_orders)
        .arg(&keys.gate_used)
        .arg(&keys.rate_limit)
        .arg(sale)
        .arg(user)
        .arg("1")
        .arg("")
        .arg("")
        .arg("")
        .arg("10000")
        .arg("10000")
        .arg("1000000")
        .arg("1000000")
        .arg("")
        .arg(request);
    cmd
}

// Defect 5: the cluster client resends a script whose connection dropped;
// the purchase script run twice made two reservations, and `lend.lua` run
// twice lent twice under one transfer id.
#[tokio::test]
async fn defect5_a_script_run_twice_has_one_effect() {
    let app = App::spawn().await;
    let sale = live_sale(10, 5);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let keys = SaleKeys::new(&sale.sale_id);
    let mut conn = app.redis.clone();
    let request = "0123456789abcdef0123456789abcde";
    let first: Vec<String> = purchase_call(&keys, id, "u", request)
        .query_async(&mut conn)
        .await
        .unwrap();
    let again: Vec<String> = purchase_call(&keys, id, "u", request)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(first[0], "OK");
    assert_eq!(app.reservations(id).await.len(), 1, "reserved twice");
    assert_eq!(app.stock(id).await, Some(9));
    assert_eq!((again[0].as_str(), &again[1]), ("REPLAY", &first[1]));

    // lend.lua twice with one transfer id.
    let lend = redis::Script::new(include_str!("../shared/lua/lend.lua"));
    let donor = SaleKeys::shard(&sale.sale_id, 7);
    let _: () = conn.set(&donor.stock, 10).await.unwrap();
    for _ in 0..2 {
        let _: Vec<String> = lend
            .key(&donor.meta)
            .key(&donor.stock)
            .key(&donor.lent)
            .arg("t-1")
            .arg(2)
            .arg(0)
            .arg(clock::now_ms())
            .invoke_async(&mut conn)
            .await
            .unwrap();
    }
    let left: i64 = conn.get(&donor.stock).await.unwrap();
    assert_eq!(left, 5, "lent twice under one transfer id");
    let _: () = conn.del(&[&donor.stock, &donor.lent]).await.unwrap();
}

// Defect 7 (a): a reconcile that read "no row" gave the reservation up
// after the writer had written it: the failed condition counted as
// success and the units went back while the order holds them.
#[tokio::test]
async fn defect7a_a_give_up_never_releases_a_written_order() {
    let app = App::spawn().await;
    let sale = live_sale(3, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let x = order_id(&app.purchase(id, "u", "").await);
    let reconciler = reconciler(&app, Duration::ZERO, Duration::ZERO).await;
    let stale = reconciler
        .checker()
        .observe(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    // The writer writes the row after that read, before it marks Redis.
    let message: OrderMessage = serde_json::from_str(&app.take_messages().await[0].1).unwrap();
    let reserved = clock::parse_rfc3339_ms(&message.reserved_at).unwrap();
    let writer = app.writer().await;
    writer
        .orders()
        .write_single(
            &NewOrder::new(message, reserved, reserved, sale.payment_window_seconds),
            sale.per_user_limit,
        )
        .await
        .unwrap();

    reconciler
        .repair_observed(&stale, clock::now_ms() + 1)
        .await;
    assert_eq!(app.orders().await[&x].status, OrderStatus::PendingPayment);
    assert_eq!(
        app.buyers(id).await.get("u"),
        Some(&1),
        "u's count released"
    );
    assert_redis_matches_ledger(&app, id).await;
}

// Defect 7 (b): a give-up that died between its REJECTED row and its
// release left the reservation QUEUED; the relayed message was then a
// duplicate, marked WRITTEN, and the unit stayed taken in Redis for good.
#[tokio::test]
async fn defect7b_a_unit_of_a_given_up_order_never_stays_stuck() {
    let app = App::spawn().await;
    let sale = live_sale(3, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    order_id(&app.purchase(id, "u", "").await);
    let messages = app.take_messages().await;
    let message: OrderMessage = serde_json::from_str(&messages[0].1).unwrap();
    let reserved = clock::parse_rfc3339_ms(&message.reserved_at).unwrap();
    let writer = app.writer().await;
    // The give-up's first step: the row that says the order never was.
    let _ = writer
        .orders()
        .write_rejected(
            &NewOrder::new(message, reserved, reserved, sale.payment_window_seconds),
            RejectReason::Abandoned,
        )
        .await;
    // Then the relayed message arrives, and reconcile runs.
    let records: Vec<(&str, &str)> = messages
        .iter()
        .map(|(m, b)| (m.as_str(), b.as_str()))
        .collect();
    seckill_tests::invoke_writer(&writer, seckill_tests::sqs_event(&records))
        .await
        .unwrap();
    reconcile(&app, &sale).await;
    assert_redis_matches_ledger(&app, id).await;
    assert_eq!(app.buyers(id).await.get("u"), None, "u holds nothing");
}

// Defect 7 (c): lowering a buyer's count set it to a value read earlier,
// erasing a purchase made in between.
#[tokio::test]
async fn defect7c_lowering_a_count_never_erases_a_purchase_made_since_the_read() {
    let app = App::spawn().await;
    let sale = live_sale(5, 2);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // A count nothing proves (its reservation was lost).
    let keys = SaleKeys::new(&sale.sale_id);
    let _: () = app.redis.clone().hset(&keys.buyers, "u", 1).await.unwrap();
    let reconciler = reconciler(&app, Duration::from_secs(60), Duration::from_secs(3_600)).await;
    let stale = reconciler
        .checker()
        .observe(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert!(stale.settled);
    // u buys after the read.
    order_id(&app.purchase(id, "u", "").await);
    reconciler.repair_observed(&stale, clock::now_ms()).await;
    let count = app.buyers(id).await.get("u").copied().unwrap_or(0);
    assert!(
        count >= 1,
        "u's new purchase was erased from their count ({count})"
    );
}

// Defect 8 (a): after a rebuild, an Idempotency-Key retry of a written
// order reserved again under the same order id: Redis lost the unit for
// good.
#[tokio::test]
async fn defect8a_a_key_retry_after_a_rebuild_replays_its_order() {
    let app = App::spawn().await;
    let sale = live_sale(3, 2);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let first = order_id(&buy_with_key(&app, id, "u", "key-1").await);
    app.write_queued_orders().await;
    app.lose_redis_keys(id).await;
    let outcome = app
        .jobs()
        .await
        .prewarm_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap();
    assert!(matches!(outcome, PrewarmOutcome::Loaded { .. }));
    let retry = buy_with_key(&app, id, "u", "key-1").await;
    assert_eq!(order_id(&retry), first);
    app.write_queued_orders().await;
    assert_redis_matches_ledger(&app, id).await;
    assert_eq!(app.orders().await.len(), 1);
}

// Defect 8 (b): after reconcile gave a keyed reservation up, a retry with
// the same key reserved again under the id of the REJECTED row.
#[tokio::test]
async fn defect8b_a_key_retry_after_a_give_up_takes_no_unit() {
    let app = App::spawn().await;
    let sale = live_sale(3, 2);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let first = order_id(&buy_with_key(&app, id, "u", "key-1").await);
    // Its message is lost; reconcile gives the reservation up.
    app.take_messages().await;
    let reconciler = reconciler(&app, Duration::ZERO, Duration::ZERO).await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            reconciler
                .reconcile_sale(&sale.sale_id, clock::now_ms() + 1)
                .await
                .unwrap();
            app.orders()
                .await
                .get(&first)
                .is_some_and(|o| o.status == OrderStatus::Rejected)
        })
        .await
    );
    // The retry names the given-up order (and says it was rejected).
    let retry = buy_with_key(&app, id, "u", "key-1").await;
    assert_eq!(
        (retry.status, retry.body["orderId"].as_str()),
        (409, Some(first.as_str())),
        "{retry:?}"
    );
    app.write_queued_orders().await;
    assert_redis_matches_ledger(&app, id).await;
    assert_eq!(app.orders().await[&first].status, OrderStatus::Rejected);
    // And the invariants hold over the whole sale.
    let state = reconciler
        .checker()
        .observe(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(invariants::check(&state), vec![]);
    let _ = OrderId::parse(&first).unwrap();
}

/// The stock of every shard of a sharded sale, summed.
async fn sharded_stock(app: &App, sale: &Sale) -> i64 {
    let mut total = 0;
    for k in 0..sale.shards {
        let keys = SaleKeys::shard(&sale.sale_id, k);
        let stock: Option<i64> = app.redis.clone().get(&keys.stock).await.unwrap();
        total += stock.unwrap_or(0);
    }
    total
}

/// `sale` spread over two shards, opened.
async fn open_on_two_shards(app: &App, mut sale: Sale) -> Sale {
    sale.shards = 2;
    app.open_sale(&sale).await;
    sale
}

/// Buyers whose home is shard 0 of a sale of two shards.
fn homed_on_shard0() -> impl Iterator<Item = String> {
    use seckill_shared::adapters::redis::home_shard;
    (0..)
        .map(|n| format!("b{n}"))
        .filter(|u| home_shard(u, 2) == 0)
}

/// Rebuilds `sale`'s lost key groups from the ledger as prewarm does (the
/// sale item's position, then every row, here in one page), from the
/// survivors read before; returns the ledger's `available`.
async fn rebuild_from_the_ledger(
    app: &App,
    sale: &Sale,
    survivors: Option<seckill_shared::adapters::redis::Survivors>,
) -> i64 {
    use seckill_shared::adapters::redis::{LedgerPage, LedgerPosition};
    let stock = app.service.stock();
    let (_, counters) = app
        .catalog
        .get_record(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    let at = LedgerPosition {
        available: counters.available,
        return_seq: counters.return_seq,
    };
    let rows: Vec<_> = app.orders().await.into_values().collect();
    let mut rebuild = stock
        .begin_rebuild(sale, clock::now_ms(), survivors)
        .await
        .unwrap();
    stock
        .stage_rebuild(&mut rebuild, &LedgerPage::of_rows(&rows, at))
        .await
        .unwrap();
    assert!(stock.commit_rebuild(rebuild, at).await.unwrap().is_some());
    counters.available
}

// Defect 6: a shard lost alone was rebuilt from `available` read at the
// start of prewarm and a snapshot of the surviving shards taken later; what
// they sold and wrote in between was counted neither in the stale
// `available` nor in their lower stock, and went to the lost shard again.
// The survivors are now read first: whatever they sell meanwhile lowers
// `available` read after, so the lost shard can only get fewer units.
#[tokio::test]
async fn defect6_a_lost_shard_is_rebuilt_from_survivors_read_before_the_ledger() {
    let app = App::spawn().await;
    let sale = open_on_two_shards(&app, live_sale(20, 1)).await;
    let id = sale.sale_id.as_str();
    let mut on_shard0 = homed_on_shard0();
    for _ in 0..2 {
        order_id(&app.purchase(id, &on_shard0.next().unwrap(), "").await);
    }
    app.write_queued_orders().await;
    app.lose_group(&SaleKeys::shard(&sale.sale_id, 1)).await;

    let stock = app.service.stock();
    let survivors = stock.survivors(&sale).await.unwrap();
    // Shard 0 goes on selling, and its orders are written, before the
    // ledger is read.
    for _ in 0..3 {
        order_id(&app.purchase(id, &on_shard0.next().unwrap(), "").await);
    }
    app.write_queued_orders().await;
    let available = rebuild_from_the_ledger(&app, &sale, survivors).await;
    let offered = sharded_stock(&app, &sale).await;
    assert_eq!(available, 15);
    assert!(
        offered <= available,
        "Redis offers {offered} units, the ledger has {available}"
    );
}

// A partly lost sharded sale was rebuilt from a whole copy of each
// surviving shard (`snapshot.lua`): every buyer and every reservation,
// parsed and held in memory through the rebuild, so a sale of a million
// buyers that lost one of eight shards held seven eighths of them in
// prewarm's 256 MB. The shares need of a survivor only its stock, the units
// its expired reservations returned, its `QUEUED` reservations (the pages
// strike off those written) and its transfers: the copy is now that, and
// the units offered come out the same.
#[tokio::test]
async fn a_lost_shard_is_rebuilt_from_the_survivors_sums_not_a_copy_of_them() {
    let app = App::spawn().await;
    let sale = open_on_two_shards(&app, quick_expiring_sale(40, 1)).await;
    let id = sale.sale_id.as_str();
    let mut on_shard0 = homed_on_shard0();
    let mut written = Vec::new();
    for _ in 0..8 {
        written.push(order_id(
            &app.purchase(id, &on_shard0.next().unwrap(), "").await,
        ));
    }
    app.write_queued_orders().await;
    // One more, accepted by Redis and never written: its message is gone.
    order_id(&app.purchase(id, &on_shard0.next().unwrap(), "").await);
    assert_eq!(app.drain_queue().await.len(), 1);

    // Three expire in the ledger; two of them have their units back in
    // Redis, the third is owed (its Redis step failed).
    let stock = app.service.stock();
    let checker = app.checker();
    let orders = checker.orders();
    let rows = app.orders().await;
    let due = written
        .iter()
        .take(3)
        .map(|o| rows[o].expires_at_ms.unwrap())
        .max()
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || async { clock::now_ms() > due }).await);
    let now = clock::now_ms();
    for o in &written[..2] {
        let released = seckill_shared::app::release::release(
            orders,
            stock,
            None,
            &OrderId::parse(o).unwrap(),
            now,
        )
        .await
        .unwrap();
        assert!(
            matches!(
                released,
                seckill_shared::app::release::Released::Now {
                    returned: Ok(_),
                    ..
                }
            ),
            "{o}: {released:?}"
        );
    }
    let owed = orders
        .expire(&OrderId::parse(&written[2]).unwrap(), now)
        .await
        .unwrap();
    assert!(
        matches!(owed, seckill_shared::ports::ExpireOutcome::Expired(_)),
        "{owed:?}"
    );

    app.lose_group(&SaleKeys::shard(&sale.sale_id, 1)).await;
    let survivors = stock.survivors(&sale).await.unwrap().unwrap();
    // Of its 9 orders and 7 buyers, shard 0's copy keeps the two orders
    // it has had back (a 16-byte digest each) and the queued one.
    assert_eq!(
        survivors.held_entries(),
        3,
        "the survivors' copy holds {} entries for 9 orders and 7 buyers",
        survivors.held_entries()
    );
    let available = rebuild_from_the_ledger(&app, &sale, Some(survivors)).await;
    // 40 - 8 written + 3 expired; Redis offers all of it but the owed unit
    // (it goes back when the release is retried) and the queued one (it is
    // sold, and leaves `available` when written).
    assert_eq!(available, 35);
    assert_eq!(sharded_stock(&app, &sale).await, 35 - 1 - 1);
}

// STOCK_RESET took the units owed back to Redis from the
// orders index (eventually consistent) and `available` from a consistent
// read, and recorded no ledger position. With the index behind an expiry
// whose Redis step had failed, the reset added the unit (it is in
// `available`, and the index did not show it owed), and the next return of
// that expiry added it again. The lagging index is the read reconcile took
// before the expiry, with the counters read after it.
#[tokio::test]
async fn a_stock_reset_while_the_index_lags_never_returns_an_expired_unit_twice() {
    let app = App::spawn().await;
    let sale = quick_expiring_sale(3, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let x = order_id(&app.purchase(id, "u1", "").await);
    let y = order_id(&app.purchase(id, "u2", "").await);
    app.write_queued_orders().await;
    let due = app.orders().await[&x].expires_at_ms.unwrap();
    assert!(eventually(Duration::from_secs(5), || async { clock::now_ms() > due }).await);

    let reconciler = reconciler(&app, Duration::from_secs(60), Duration::from_secs(3_600)).await;
    let lagging = reconciler
        .checker()
        .observe(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    // The release's DynamoDB step only: its Redis step failed.
    let expired = app
        .checker()
        .orders()
        .expire(&OrderId::parse(&x).unwrap(), clock::now_ms())
        .await
        .unwrap();
    assert!(
        matches!(expired, seckill_shared::ports::ExpireOutcome::Expired(_)),
        "{expired:?}"
    );
    assert_eq!(app.sale_counters(id).await.0, 2);
    assert_eq!(app.stock(id).await, Some(1), "Redis has not had it back");

    // A settled read whose counters have the expiry and whose index does not.
    let mut state = reconciler
        .checker()
        .observe(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert!(state.settled);
    state.rows = lagging.rows.clone();
    let (repairs, violations) = reconciler.repair_observed(&state, clock::now_ms()).await;
    println!("with the index behind: {repairs:?} {violations:?}");
    // The index catches up; the expiry's return is made (reconcile's, as
    // the release job's retry would).
    let report = reconcile(&app, &sale).await;
    assert_eq!(
        app.stock(id).await,
        Some(2),
        "X's unit went back twice: {repairs:?} then {:?}",
        report.repairs
    );
    assert_eq!(app.buyers(id).await.get("u1"), None, "u1 holds nothing");
    assert_eq!(app.buyers(id).await.get("u2"), Some(&1));
    assert_redis_matches_ledger(&app, id).await;
    seckill_tests::assert_clean(&app.checker(), id, &[x, y]).await;
}

// A retry with the same Idempotency-Key replayed the
// first answer, `202 QUEUED`, even when its order had since been given up
// (`REJECTED`) or had expired unpaid: a buyer was told their purchase was
// accepted and on its way for an order that would never be payable. The
// replay now says what became of it: 409 with the order id and its status.
#[tokio::test]
async fn a_keyed_retry_of_an_expired_or_rejected_order_says_so_instead_of_queued() {
    let app = App::spawn().await;
    let sale = quick_expiring_sale(5, 2);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    // Expired unpaid.
    let x = order_id(&buy_with_key(&app, id, "u1", "key-x").await);
    app.write_queued_orders().await;
    expire_unpaid(&app, &x).await;
    let again = buy_with_key(&app, id, "u1", "key-x").await;
    assert_eq!(
        (again.status, again.code(), again.body["orderId"].as_str()),
        (409, "ORDER_EXPIRED", Some(x.as_str())),
        "{again:?}"
    );
    assert_eq!(again.body["status"], "EXPIRED", "{again:?}");

    // Given up: its message was lost and reconcile recorded it REJECTED.
    let y = order_id(&buy_with_key(&app, id, "u2", "key-y").await);
    assert_eq!(app.take_messages().await.len(), 1);
    let report = reconciler(&app, Duration::ZERO, Duration::ZERO)
        .await
        .reconcile_sale(&sale.sale_id, clock::now_ms() + 1)
        .await
        .unwrap()
        .unwrap();
    assert!(
        report.repairs.iter().any(|r| r.kind == "RELEASED_FAILED"),
        "{report:?}"
    );
    let again = buy_with_key(&app, id, "u2", "key-y").await;
    assert_eq!(
        (again.status, again.code(), again.body["orderId"].as_str()),
        (409, "ORDER_NOT_PAYABLE", Some(y.as_str())),
        "{again:?}"
    );
    assert_eq!(again.body["status"], "REJECTED", "{again:?}");

    // A written order's retry is still the same 202.
    let z = order_id(&buy_with_key(&app, id, "u3", "key-z").await);
    app.write_queued_orders().await;
    let again = buy_with_key(&app, id, "u3", "key-z").await;
    assert_eq!(
        (again.status, again.body["orderId"].as_str()),
        (202, Some(z.as_str())),
        "{again:?}"
    );
    seckill_tests::assert_clean(&app.checker(), id, &[x, y, z]).await;
}
