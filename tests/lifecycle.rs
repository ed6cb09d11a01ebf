//! The sale lifecycle: the admin API, prewarm (once, from the truth, never
//! over live stock), the unpaid release, and a sale that loses its Redis keys
//! mid-flight.

use seckill_infra::token::TokenSettings;
use seckill_shared::app::jobs::PrewarmOutcome;
use seckill_shared::clock;
use seckill_shared::domain::orders::OrderStatus;
use seckill_shared::ports::{OrderLedger, OrderStore};
use seckill_tests::{App, LocalStack, eventually, live_sale, unique};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn sale_json(total: u64, start_ms: i64, end_ms: i64) -> serde_json::Value {
    serde_json::json!({
        "name": "Lamp", "totalStock": total,
        "startAt": clock::rfc3339_ms(start_ms), "endAt": clock::rfc3339_ms(end_ms),
        "perUserLimit": 1, "paymentWindowSeconds": 900, "shards": 1, "gate": false,
    })
}

#[tokio::test]
async fn admin_api_validates_authorizes_and_guards_started_sales() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
    let buyer = format!("Bearer {}", tokens.mint("bob", false, 300).unwrap());
    let now = clock::now_ms();
    let id = unique("adm");
    let path = format!("/admin/sales/{id}");
    let good = sale_json(100, now + 3_600_000, now + 7_200_000);

    let bad_fields: [(&str, serde_json::Value); 9] = [
        ("totalStock", serde_json::json!(0)),
        ("totalStock", serde_json::json!("100")),
        ("perUserLimit", serde_json::json!(0)),
        ("shards", serde_json::json!(65)),
        ("paymentWindowSeconds", serde_json::json!(30)),
        ("paymentWindowSeconds", serde_json::json!(100_000)),
        ("startAt", serde_json::json!("soon")),
        ("name", serde_json::json!("")),
        ("gate", serde_json::json!(1)),
    ];
    for (field, value) in bad_fields {
        let mut body = good.clone();
        body[field] = value.clone();
        let (status, reply) = stack
            .request(
                "PUT",
                &path,
                &[("authorization", &admin)],
                &body.to_string(),
            )
            .await;
        assert_eq!(status, 400, "{field}={value}: {reply}");
        assert!(
            reply["message"].as_str().unwrap().contains(field),
            "{field}: {reply}"
        );
    }
    let mut backwards = good.clone();
    backwards["endAt"] = backwards["startAt"].clone();
    let (status, reply) = stack
        .request(
            "PUT",
            &path,
            &[("authorization", &admin)],
            &backwards.to_string(),
        )
        .await;
    assert_eq!(status, 400);
    assert!(reply["message"].as_str().unwrap().contains("startAt"));
    // None of that created the sale.
    let (status, _) = stack.request("GET", &format!("/sales/{id}"), &[], "").await;
    assert_eq!(status, 404);

    let (status, reply) = stack
        .request(
            "PUT",
            &path,
            &[("authorization", &buyer)],
            &good.to_string(),
        )
        .await;
    assert_eq!((status, reply["code"].as_str()), (403, Some("FORBIDDEN")));
    let (status, _) = stack.request("PUT", &path, &[], &good.to_string()).await;
    assert_eq!(status, 401);

    let (status, reply) = stack
        .request(
            "PUT",
            &path,
            &[("authorization", &admin)],
            &good.to_string(),
        )
        .await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(
        (reply["available"].as_i64(), reply["sold"].as_i64()),
        (Some(100), Some(0))
    );
    let mut more = good.clone();
    more["totalStock"] = serde_json::json!(150);
    let (status, reply) = stack
        .request(
            "PUT",
            &path,
            &[("authorization", &admin)],
            &more.to_string(),
        )
        .await;
    assert_eq!(
        (status, reply["available"].as_i64()),
        (200, Some(150)),
        "{reply}"
    );

    // A started sale: stock and shards are frozen, its end may move.
    let started = unique("adm");
    let started_path = format!("/admin/sales/{started}");
    let running = sale_json(10, now - 60_000, now + 3_600_000);
    let (status, reply) = stack
        .request(
            "PUT",
            &started_path,
            &[("authorization", &admin)],
            &running.to_string(),
        )
        .await;
    assert_eq!(status, 201, "{reply}");
    assert_eq!(
        reply["prewarm"]["outcome"], "LOADED",
        "a running sale is loaded at once"
    );
    let mut restock = running.clone();
    restock["totalStock"] = serde_json::json!(20);
    let (status, reply) = stack
        .request(
            "PUT",
            &started_path,
            &[("authorization", &admin)],
            &restock.to_string(),
        )
        .await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (409, Some("SALE_STARTED"))
    );
    let mut longer = running.clone();
    longer["endAt"] = serde_json::json!(clock::rfc3339_ms(now + 7_200_000));
    let (status, reply) = stack
        .request(
            "PUT",
            &started_path,
            &[("authorization", &admin)],
            &longer.to_string(),
        )
        .await;
    assert_eq!(
        (status, reply["prewarm"]["outcome"].as_str()),
        (200, Some("REFRESHED"))
    );

    let (status, reply) = stack
        .request(
            "POST",
            &format!("{started_path}/prewarm"),
            &[("authorization", &admin)],
            "",
        )
        .await;
    assert_eq!(
        (status, reply["outcome"].as_str()),
        (200, Some("REFRESHED"))
    );
    let (status, _) = stack
        .request(
            "POST",
            "/admin/sales/nothing-here/prewarm",
            &[("authorization", &admin)],
            "",
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_prewarms_load_once() {
    let app = App::spawn().await;
    let mut sale = live_sale(250, 1);
    sale.start_ms = clock::now_ms() + 60_000;
    assert!(app.catalog.create_sale(&sale).await.unwrap());
    let jobs = Arc::new(app.jobs().await);
    let now = clock::now_ms();
    let runs: Vec<_> = (0..10)
        .map(|_| {
            let (jobs, id) = (jobs.clone(), sale.sale_id.clone());
            tokio::spawn(async move { jobs.prewarm_sale(&id, now).await.unwrap() })
        })
        .collect();
    let mut loaded = 0;
    for run in runs {
        match run.await.unwrap() {
            PrewarmOutcome::Loaded { stock, .. } => {
                loaded += 1;
                assert_eq!(stock, 250);
            }
            PrewarmOutcome::Busy | PrewarmOutcome::Refreshed => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(loaded, 1, "loaded exactly once");
    assert_eq!(app.stock(sale.sale_id.as_str()).await, Some(250));

    // Not due yet: a sale far in the future is left alone.
    let mut later = live_sale(5, 1);
    later.start_ms = clock::now_ms() + 86_400_000;
    later.end_ms = later.start_ms + 3_600_000;
    assert!(app.catalog.create_sale(&later).await.unwrap());
    assert_eq!(
        jobs.prewarm_sale(&later.sale_id, clock::now_ms())
            .await
            .unwrap(),
        PrewarmOutcome::NotDue
    );
    assert_eq!(app.stock(later.sale_id.as_str()).await, None);
}

#[tokio::test]
async fn a_sale_created_live_loads_at_once_while_other_orders_are_queued() {
    let app = App::spawn().await;
    let busy = live_sale(20, 1);
    app.open_sale(&busy).await;
    for n in 0..3 {
        let reply = app
            .purchase(busy.sale_id.as_str(), &format!("b{n}"), "")
            .await;
        assert_eq!(reply.status, 202, "{:?}", reply.body);
    }
    // Created already running, never loaded: nothing of it can be on the
    // queue, so the other sale's messages do not hold it up.
    let fresh = live_sale(5, 1);
    let id = fresh.sale_id.as_str();
    assert!(app.catalog.create_sale(&fresh).await.unwrap());
    let jobs = app.jobs().await;
    match jobs
        .prewarm_sale(&fresh.sale_id, clock::now_ms())
        .await
        .unwrap()
    {
        PrewarmOutcome::Loaded { stock, buyers } => assert_eq!((stock, buyers), (5, 0)),
        other => panic!("a new live sale was held up: {other:?}"),
    }
    let reply = app.purchase(id, "first", "").await;
    assert_eq!(reply.status, 202, "{:?}", reply.body);
    // Loaded once, then lost: now it waits, as its own purchase is queued.
    app.lose_redis_keys(id).await;
    match jobs
        .prewarm_sale(&fresh.sale_id, clock::now_ms())
        .await
        .unwrap()
    {
        PrewarmOutcome::WaitingForQueue { in_flight, dlq } => assert_eq!((in_flight, dlq), (4, 0)),
        other => panic!("rebuilt while its order was in flight: {other:?}"),
    }
    assert_eq!(app.stock(id).await, None);
}

#[tokio::test]
async fn lost_keys_pause_the_sale_until_the_queue_drains_then_rebuild_from_the_truth() {
    let app = App::spawn().await;
    let sale = live_sale(20, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    for n in 0..10 {
        assert_eq!(app.purchase(id, &format!("b{n}"), "").await.status, 202);
    }
    // Redis restarts empty mid-sale.
    app.lose_redis_keys(id).await;
    let started = Instant::now();
    let reply = app.purchase(id, "late", "").await;
    assert_eq!((reply.status, reply.code()), (503, "SALE_PAUSED"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "503 at once, no hang"
    );

    let jobs = app.jobs().await;
    // The purchase that found the keys missing started a rebuild of its
    // own (it waits for the queue too); while it holds the sale's lock,
    // prewarm answers BUSY.
    let outcome = std::cell::RefCell::new(PrewarmOutcome::Busy);
    let settled = eventually(Duration::from_secs(10), || async {
        let now = jobs
            .prewarm_sale(&sale.sale_id, clock::now_ms())
            .await
            .unwrap();
        let busy = now == PrewarmOutcome::Busy;
        *outcome.borrow_mut() = now;
        !busy
    })
    .await;
    assert!(settled, "the sale's lock was never released");
    match outcome.into_inner() {
        PrewarmOutcome::WaitingForQueue { in_flight, dlq } => assert_eq!((in_flight, dlq), (10, 0)),
        other => panic!("rebuilt while orders were in flight: {other:?}"),
    }
    assert_eq!(app.stock(id).await, None);

    app.write_queued_orders().await;
    match jobs
        .prewarm_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
    {
        PrewarmOutcome::Loaded { stock, buyers } => assert_eq!((stock, buyers), (10, 10)),
        other => panic!("expected a rebuild: {other:?}"),
    }
    assert_eq!(app.stock(id).await, Some(10), "total minus units held");
    // The first buyers hold their limit; ten new buyers get the rest, no more.
    for n in 0..10 {
        let reply = app.purchase(id, &format!("b{n}"), "").await;
        assert_eq!(
            (reply.status, reply.code()),
            (409, "LIMIT_EXCEEDED"),
            "b{n}"
        );
    }
    let mut accepted = 0;
    for n in 0..15 {
        if app.purchase(id, &format!("c{n}"), "").await.status == 202 {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 10);
    app.write_queued_orders().await;
    let orders = app.orders().await;
    assert_eq!(orders.len(), 20);
    let mut users: Vec<&str> = orders.values().map(|o| o.user_id.as_str()).collect();
    users.sort_unstable();
    users.dedup();
    assert_eq!(users.len(), 20, "no user over the limit");
    assert_eq!(app.sale_counters(id).await, (0, 20), "no oversell");
}

#[tokio::test]
async fn unpaid_orders_expire_and_their_units_sell_again() {
    let app = App::spawn().await;
    let mut sale = live_sale(1, 1);
    sale.payment_window_seconds = 1;
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    assert_eq!(app.purchase(id, "slow", "").await.status, 202);
    app.write_queued_orders().await;
    assert_eq!(app.purchase(id, "other", "").await.code(), "SOLD_OUT");
    let order = app.orders().await.into_values().next().unwrap();
    let expires_at = order.expires_at_ms.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || async {
            clock::now_ms() > expires_at
        })
        .await
    );

    let jobs = app.jobs().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let report = jobs
        .release_unpaid(clock::now_ms(), deadline)
        .await
        .unwrap();
    assert_eq!(
        (report.expired, report.units_returned),
        (1, 1),
        "{report:?}"
    );
    assert!(report.errors.is_empty(), "{report:?}");
    // Re-running is harmless.
    let again = jobs
        .release_unpaid(clock::now_ms(), deadline)
        .await
        .unwrap();
    assert_eq!(again.expired, 0);

    let stored = app.orders().await.remove(order.order_id.as_str()).unwrap();
    assert_eq!(stored.status, OrderStatus::Expired);
    assert_eq!(app.stock(id).await, Some(1), "unit back in Redis");
    assert_eq!(app.sale_counters(id).await, (1, 0), "and in DynamoDB");
    assert!(!app.buyers(id).await.contains_key("slow"));

    // Someone else buys the unit; DynamoDB and Redis agree afterwards.
    assert_eq!(app.purchase(id, "other", "").await.status, 202);
    app.write_queued_orders().await;
    assert_eq!(app.stock(id).await, Some(0));
    assert_eq!(app.sale_counters(id).await, (0, 1));
}

/// The sale item takes a batch of expiries in one write: a release of many
/// unpaid orders costs a few transactions, not one per order, so the hot
/// item's write rate stops bounding how fast a big sale's unpaid units go
/// back on sale. Two orders of one buyer in one batch take both units off
/// their record; a paid order stays paid. The job runs at a clock past
/// every window, so nothing waits for one.
#[tokio::test]
async fn unpaid_orders_expire_in_batches_of_one_sale_item_write() {
    let app = App::spawn().await;
    let mut sale = live_sale(70, 2);
    sale.payment_window_seconds = 60;
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // 60 orders: 20 buyers with two, 20 with one.
    for n in 0..40 {
        let user = format!("b{n}");
        assert_eq!(app.purchase(id, &user, "").await.status, 202);
        if n < 20 {
            assert_eq!(app.purchase(id, &user, "").await.status, 202);
        }
    }
    app.write_queued_orders().await;
    let orders = app.orders().await;
    assert_eq!(orders.len(), 60);
    let jobs = app.jobs().await;
    let paid = orders
        .values()
        .find(|o| o.user_id.as_str() == "b0")
        .unwrap();
    assert!(matches!(
        jobs.orders()
            .pay(&paid.order_id, &paid.user_id, clock::now_ms())
            .await
            .unwrap(),
        seckill_shared::ports::PayOutcome::Paid(_)
    ));
    let past_every_window = orders
        .values()
        .filter_map(|o| o.expires_at_ms)
        .max()
        .unwrap()
        + 1;

    let sale_item_updates = || {
        jobs.orders()
            .counters
            .sale_item_updates
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = sale_item_updates();
    let report = jobs
        .release_unpaid(past_every_window, Instant::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(
        (report.expired, report.units_returned),
        (59, 59),
        "{report:?}"
    );
    let spent = sale_item_updates() - before;
    assert!(spent < 10, "59 expiries wrote the sale item {spent} times");

    let after = app.orders().await;
    let mut seqs: Vec<u64> = after
        .values()
        .filter(|o| o.status == OrderStatus::Expired)
        .map(|o| o.return_seq.unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=59).collect::<Vec<u64>>(),
        "one ledger position each"
    );
    assert_eq!(after[paid.order_id.as_str()].status, OrderStatus::Paid);
    assert_eq!(app.sale_counters(id).await, (69, 1));
    assert_eq!(app.stock(id).await, Some(69), "every unit back in Redis");
    let buyers = app.buyers(id).await;
    assert_eq!(buyers.get("b0"), Some(&1), "the payer still holds one");
    assert!(buyers.keys().all(|u| u == "b0"), "{buyers:?}");
    let held = jobs
        .orders()
        .held_by_all(
            &sale.sale_id,
            &[
                &paid.user_id,
                &seckill_shared::domain::UserId::parse("b1").unwrap(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        (held["b0"], held["b1"]),
        (1, 0),
        "the ledger's buyer records"
    );
    let violations = app
        .checker()
        .check_sale(&sale.sale_id, &[])
        .await
        .unwrap()
        .unwrap();
    assert!(violations.is_empty(), "{violations:?}");
}

/// Several sales ending together share one run of release-unpaid (a few
/// at a time, each sale's chunks in turn): every due order of each is
/// expired, its units back in its own sale, and nothing else moves.
#[tokio::test]
async fn one_run_releases_the_unpaid_orders_of_several_sales() {
    let app = App::spawn().await;
    let mut sales = Vec::new();
    for _ in 0..6 {
        let mut sale = live_sale(5, 1);
        sale.payment_window_seconds = 60;
        app.open_sale(&sale).await;
        for n in 0..3 {
            let id = sale.sale_id.as_str();
            assert_eq!(app.purchase(id, &format!("b{n}"), "").await.status, 202);
        }
        sales.push(sale);
    }
    app.write_queued_orders().await;
    let orders = app.orders().await;
    assert_eq!(orders.len(), 18);
    let past_every_window = orders
        .values()
        .filter_map(|o| o.expires_at_ms)
        .max()
        .unwrap()
        + 1;
    let report = app
        .jobs()
        .await
        .release_unpaid(past_every_window, Instant::now() + Duration::from_secs(120))
        .await
        .unwrap();
    assert!(
        report.errors.is_empty() && !report.stopped_early,
        "{report:?}"
    );
    assert_eq!((report.expired, report.units_returned), (18, 18));
    for sale in &sales {
        let id = sale.sale_id.as_str();
        assert_eq!(app.sale_counters(id).await, (5, 0), "{id}");
        assert_eq!(app.stock(id).await, Some(5), "{id}");
    }
    assert!(
        app.orders()
            .await
            .values()
            .all(|o| o.status == OrderStatus::Expired)
    );
}

/// A batch of expiries whose answer is lost (applied, then answered after
/// the job's attempt gave up, as a timeout on AWS may be) is settled from
/// the ledger: each order found `EXPIRED` at a position the batch sent it
/// with is this batch's expiry, so its unit goes back to Redis at once
/// instead of waiting for reconcile, and the sale item moved once.
#[tokio::test]
async fn a_batch_of_expiries_whose_answer_was_lost_is_settled_from_the_ledger() {
    use seckill_infra::strict::{self, StrictSettings};
    use seckill_shared::adapters::aws;
    use seckill_shared::adapters::dynamo::orders::DynamoOrders;
    use seckill_shared::ports::ExpireOutcome;
    let app = App::spawn().await;
    let mut sale = live_sale(10, 1);
    sale.payment_window_seconds = 60;
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    for n in 0..5 {
        assert_eq!(app.purchase(id, &format!("late{n}"), "").await.status, 202);
    }
    app.write_queued_orders().await;
    let orders = app.orders().await;
    let past_every_window = orders
        .values()
        .filter_map(|o| o.expires_at_ms)
        .max()
        .unwrap()
        + 1;
    let ids: Vec<_> = orders.values().map(|o| o.order_id.clone()).collect();

    let emulator = std::env::var("SECKILL_EMULATOR_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .expect("make test exports SECKILL_EMULATOR_URL");
    let mut settings = StrictSettings::lenient();
    settings.dynamo.transaction_answer_delay = Duration::from_secs(3);
    let layer = strict::start("127.0.0.1:0", &emulator, settings)
        .await
        .expect("the strict layer starts");
    // Attempts of 0.9 s: every transaction's answer comes after them.
    let sdk = aws::loader(aws::Caller::Tool, Duration::from_secs(2))
        .endpoint_url(layer.url())
        .load()
        .await;
    let ledger = DynamoOrders::new(
        aws::dynamodb(&sdk),
        &app.config.orders_table,
        &app.config.sales_table,
    );
    let stock = app.jobs().await;
    let outcomes = seckill_shared::app::release::release_many(
        &ledger,
        stock.stock(),
        None,
        &ids,
        past_every_window,
    )
    .await
    .unwrap();
    let mut seqs = Vec::new();
    for (order_id, outcome) in ids.iter().zip(&outcomes) {
        match outcome {
            Ok(seckill_shared::app::release::Released::Now {
                order, returned, ..
            }) => {
                assert!(returned.is_ok(), "{order_id}: {returned:?}");
                seqs.push(order.return_seq.unwrap());
            }
            other => panic!("{order_id}: {other:?}"),
        }
    }
    seqs.sort_unstable();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    // Once in the ledger, once in Redis.
    assert_eq!(app.sale_counters(id).await, (10, 0));
    assert_eq!(app.stock(id).await, Some(10));
    let after = app.orders().await;
    assert!(after.values().all(|o| o.status == OrderStatus::Expired));
    let again = ledger.expire_many(&ids, past_every_window).await.unwrap();
    assert!(
        again
            .iter()
            .all(|o| matches!(o, Ok(ExpireOutcome::NotExpirable))),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_and_unpaid_release_race_never_sell_a_unit_twice() {
    let app = App::spawn().await;
    let mut sale = live_sale(50, 1);
    // Long enough for the emulator to write all 50 orders (with their
    // buyers' records) before the first deadline, even while other tests
    // keep it busy: the race is only a race if every order is payable when
    // its payer starts.
    sale.payment_window_seconds = 6;
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    for n in 0..50 {
        assert_eq!(app.purchase(id, &format!("r{n}"), "").await.status, 202);
    }
    app.write_queued_orders().await;
    let orders = app.orders().await;
    assert_eq!(orders.len(), 50);
    let store = Arc::new(seckill_shared::adapters::dynamo::orders::DynamoOrders::new(
        app.db.clone(),
        &app.config.orders_table,
        &app.config.sales_table,
    ));
    let jobs = Arc::new(app.jobs().await);
    // 50 payments fired around each order's deadline, against release runs
    // looping over the same deadline.
    let payers: Vec<_> = orders
        .values()
        .zip(-30_i64..)
        .map(|(order, spread)| {
            let store = store.clone();
            let (order_id, user) = (order.order_id.clone(), order.user_id.clone());
            // Spread evenly from 30 ms before to 19 ms after the deadline, by
            // position. (A spread hashed from the order id was not even: ids
            // differ only in a counter's last hex digits, whose byte sums
            // fall in two narrow clusters, so now and then every payer came
            // early, 50 paid, or every payer late, 0 paid.)
            let at = order.expires_at_ms.unwrap() + spread;
            tokio::spawn(async move {
                while clock::now_ms() < at {
                    tokio::task::yield_now().await;
                }
                store.pay(&order_id, &user, clock::now_ms()).await.unwrap()
            })
        })
        .collect();
    let last_deadline = orders
        .values()
        .filter_map(|o| o.expires_at_ms)
        .max()
        .unwrap();
    let releaser = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            let mut expired = 0;
            while clock::now_ms() < last_deadline + 300 {
                let report = jobs
                    .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(10))
                    .await
                    .unwrap();
                expired += report.expired;
            }
            expired
        })
    };
    let mut paid = 0;
    for payer in payers {
        if matches!(
            payer.await.unwrap(),
            seckill_shared::ports::PayOutcome::Paid(_)
        ) {
            paid += 1;
        }
    }
    // The next scheduled run sweeps whatever the racing run had not reached
    // (on a loaded machine a run can take longer than the race window). Not
    // concurrently with it: moto applies concurrent transactions on one sale
    // item without isolation (a lost update DynamoDB would not allow), and
    // the scheduler never overlaps two runs either.
    let raced = releaser.await.unwrap();
    let sweep = jobs
        .release_unpaid(clock::now_ms(), Instant::now() + Duration::from_secs(30))
        .await
        .unwrap();
    let expired = raced + sweep.expired;
    let orders = app.orders().await;
    let stored_paid = orders
        .values()
        .filter(|o| o.status == OrderStatus::Paid)
        .count();
    let stored_expired = orders
        .values()
        .filter(|o| o.status == OrderStatus::Expired)
        .count();
    assert_eq!(
        (stored_paid, stored_expired),
        (paid, expired),
        "one winner per order"
    );
    assert_eq!(paid + expired, 50);
    assert!(
        paid > 0 && expired > 0,
        "both sides won some: {paid} paid, {expired} expired"
    );
    let (available, sold) = app.sale_counters(id).await;
    assert_eq!((available, sold), (50 - paid as i64, paid as i64));
    assert_eq!(
        app.stock(id).await,
        Some(available),
        "Redis and DynamoDB agree: no unit twice"
    );
    println!("race: {paid} paid, {expired} expired");
}
