//! The order pipeline on a real Redis and the SQS/DynamoDB emulator: the
//! order-writer's idempotency, poison records and the DLQ, the database's
//! last guard against oversell, transient failures, pay/expire races, the
//! local event source draining a sale, and the orders API over HTTP.

use aws_sdk_dynamodb::types::AttributeValue;
use seckill_infra::token::TokenSettings;
use seckill_shared::clock;
use seckill_shared::domain::orders::OrderStatus;
use seckill_shared::domain::{OrderId, UserId};
use seckill_shared::ports::{CatalogAdmin, ExpireOutcome, OrderStore, PayOutcome, SaleEditor};
use seckill_tests::{
    App, EventSource, EventSourceSettings, LocalStack, eventually, invoke_writer, live_sale,
    order_body, sqs_event,
};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn buy_poll_pay_over_http() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let alice = format!("Bearer {}", tokens.mint("alice", false, 300).unwrap());
    let mallory = format!("Bearer {}", tokens.mint("mallory", false, 300).unwrap());
    let sale = &stack.demo_sale;

    let (status, view) = stack
        .request("GET", &format!("/sales/{sale}"), &[], "")
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["remaining"].as_i64(), view["status"].as_str()),
        (Some(100), Some("LIVE"))
    );

    let (status, body) = stack
        .request(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &[("authorization", &alice)],
            "",
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let order_id = body["orderId"].as_str().unwrap().to_owned();
    let path = format!("/orders/{order_id}");

    // QUEUED until the order-writer has written the row, then PENDING_PAYMENT.
    let seen = std::sync::Mutex::new(Vec::new());
    let pending = eventually(Duration::from_secs(30), || {
        let (stack, path, alice, seen) = (&stack, &path, &alice, &seen);
        async move {
            let (status, order) = stack
                .request("GET", path, &[("authorization", alice)], "")
                .await;
            assert_eq!(status, 200, "{order}");
            let state = order["status"].as_str().unwrap_or("").to_owned();
            seen.lock().unwrap().push(state.clone());
            state == "PENDING_PAYMENT"
        }
    })
    .await;
    let seen = seen.into_inner().unwrap();
    assert!(pending, "order never became PENDING_PAYMENT: {seen:?}");
    assert!(
        seen.iter().all(|s| s == "QUEUED" || s == "PENDING_PAYMENT"),
        "{seen:?}"
    );

    // Someone else's token: the same 404 as for no order at all.
    let (status, body) = stack
        .request("GET", &path, &[("authorization", &mallory)], "")
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("ORDER_NOT_FOUND"))
    );
    let (status, _) = stack
        .request(
            "POST",
            &format!("{path}/pay"),
            &[("authorization", &mallory)],
            "",
        )
        .await;
    assert_eq!(status, 404);

    let (status, paid) = stack
        .request(
            "POST",
            &format!("{path}/pay"),
            &[("authorization", &alice)],
            "",
        )
        .await;
    assert_eq!(
        (status, paid["status"].as_str()),
        (200, Some("PAID")),
        "{paid}"
    );
    let (status, again) = stack
        .request(
            "POST",
            &format!("{path}/pay"),
            &[("authorization", &alice)],
            "",
        )
        .await;
    assert_eq!(
        (status, again["status"].as_str()),
        (200, Some("PAID")),
        "paying twice is 200 twice"
    );
    let (_, order) = stack
        .request("GET", &path, &[("authorization", &alice)], "")
        .await;
    assert_eq!(order["status"], "PAID");
    assert_eq!(order["userId"], "alice");
    assert!(order["expiresAt"].as_str().is_some());

    let (status, _) = stack
        .request("GET", "/orders/nope", &[("authorization", &alice)], "")
        .await;
    assert_eq!(status, 404);
    let (status, _) = stack.request("GET", &path, &[], "").await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn redelivered_message_writes_one_order() {
    let app = App::spawn().await;
    let sale = live_sale(10, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let reply = app.purchase(id, "u1", "").await;
    let order_id = reply.body["orderId"].as_str().unwrap().to_owned();
    let message = app.drain_queue().await.remove(0);
    let body = serde_json::to_string(&message).unwrap();
    let writer = app.writer().await;

    // Twice inside one batch, then once more in another batch.
    let failures = invoke_writer(&writer, sqs_event(&[("m1", &body), ("m2", &body)]))
        .await
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let failures = invoke_writer(&writer, sqs_event(&[("m3", &body)]))
        .await
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");

    let orders = app.orders().await;
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[&order_id].status, OrderStatus::PendingPayment);
    assert_eq!(app.sale_counters(id).await, (9, 1), "stock taken once");
    assert_eq!(app.reservations(id).await[&order_id].state, "WRITTEN");
}

#[tokio::test]
async fn poison_record_is_reported_alone() {
    let app = App::spawn().await;
    let sale = live_sale(20, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let now = clock::now_ms();
    let bodies: Vec<String> = (0..9)
        .map(|n| order_body(&format!("o{n}"), id, &format!("u{n}"), 1, now))
        .collect();
    let mut records: Vec<(String, &str)> = bodies
        .iter()
        .enumerate()
        .map(|(n, b)| (format!("m{n}"), b.as_str()))
        .collect();
    records.insert(4, ("poison".into(), r#"{"v":1,"orderId":"bad{id}"}"#));
    let records: Vec<(&str, &str)> = records.iter().map(|(m, b)| (m.as_str(), *b)).collect();

    let failures = invoke_writer(&*app.writer().await, sqs_event(&records))
        .await
        .unwrap();
    assert_eq!(failures, ["poison"]);
    assert_eq!(app.orders().await.len(), 9);
    assert_eq!(app.sale_counters(id).await, (11, 9));

    // A batch of nothing but poison is an error: Lambda retries it whole.
    let all_bad = invoke_writer(&*app.writer().await, sqs_event(&[("p", "not json")])).await;
    assert!(all_bad.is_err());
}

#[tokio::test]
async fn poison_message_ends_in_the_dlq_after_max_receives() {
    let app = App::spawn().await;
    let sale = live_sale(20, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let now = clock::now_ms();
    for n in 0..9 {
        app.sqs
            .send_message()
            .queue_url(&app.queue_url)
            .message_body(order_body(&format!("o{n}"), id, &format!("u{n}"), 1, now))
            .send()
            .await
            .unwrap();
    }
    app.sqs
        .send_message()
        .queue_url(&app.queue_url)
        .message_body("{\"v\": 1, \"poison\": true}")
        .send()
        .await
        .unwrap();

    let arn = seckill_infra::event_source::queue_arn(&app.sqs, &app.queue_url)
        .await
        .unwrap();
    let mut settings = EventSourceSettings::template(&app.queue_url, arn, "us-east-1");
    settings.batching_window = Duration::from_millis(200);
    let source = EventSource::spawn(
        app.sqs.clone(),
        settings,
        seckill_infra::local::writer_handler(app.writer().await),
    );
    // moto moves the message on the receive after its fifth (maxReceiveCount).
    let settled = eventually(Duration::from_secs(90), || async {
        app.depth_of(&app.dlq_url).await == 1 && app.depth_of(&app.queue_url).await == 0
    })
    .await;
    let counts = source.stop().await;
    assert!(
        settled,
        "poison not in the DLQ: {counts}; dlq {} queue {}",
        app.depth_of(&app.dlq_url).await,
        app.depth_of(&app.queue_url).await
    );
    assert_eq!(app.orders().await.len(), 9, "{counts}");
    let dead = app
        .sqs
        .receive_message()
        .queue_url(&app.dlq_url)
        .max_number_of_messages(10)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].body().unwrap_or("").contains("poison"),
        "only the poison is dead"
    );
    // Reported failed at least once by the handler; the receives that move it
    // are moto's count (a receive cut short by the stop is not a delivery).
    assert!(counts.records_failed + counts.batch_errors >= 1, "{counts}");
}

#[tokio::test]
async fn database_stops_what_redis_oversold() {
    let app = App::spawn().await;
    let sale = live_sale(5, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // By hand: DynamoDB has only 2 of the 5 units Redis believes in (say a
    // Redis failover lost the record of 3 sales).
    app.db
        .update_item()
        .table_name(&app.config.sales_table)
        .key("saleId", AttributeValue::S(id.into()))
        .update_expression("SET available = :a, sold = :s")
        .expression_attribute_values(":a", AttributeValue::N("2".into()))
        .expression_attribute_values(":s", AttributeValue::N("3".into()))
        .send()
        .await
        .unwrap();
    for n in 0..5 {
        assert_eq!(app.purchase(id, &format!("b{n}"), "").await.status, 202);
    }
    let messages = app.drain_queue().await;
    assert_eq!(messages.len(), 5);
    let bodies: Vec<String> = messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    let ids: Vec<String> = (0..5).map(|n| format!("m{n}")).collect();
    let records: Vec<(&str, &str)> = ids
        .iter()
        .zip(&bodies)
        .map(|(i, b)| (i.as_str(), b.as_str()))
        .collect();
    let failures = invoke_writer(&*app.writer().await, sqs_event(&records))
        .await
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");

    let orders = app.orders().await;
    assert_eq!(orders.len(), 5);
    let pending = orders
        .values()
        .filter(|o| o.status == OrderStatus::PendingPayment)
        .count();
    let rejected: Vec<_> = orders
        .values()
        .filter(|o| o.status == OrderStatus::Rejected)
        .collect();
    assert_eq!((pending, rejected.len()), (2, 3));
    let (available, sold) = app.sale_counters(id).await;
    assert_eq!(
        (available, sold),
        (0, 5),
        "sold never above the total, available never below 0"
    );
    let resv = app.reservations(id).await;
    let buyers = app.buyers(id).await;
    for order in rejected {
        assert_eq!(resv[order.order_id.as_str()].state, "REJECTED");
        assert!(
            !buyers.contains_key(order.user_id.as_str()),
            "a rejected buyer holds nothing"
        );
    }
}

#[tokio::test]
async fn transient_failure_writes_nothing_then_everything_once() {
    let app = App::spawn().await;
    let sale = live_sale(10, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let now = clock::now_ms();
    let bodies: Vec<String> = (0..4)
        .map(|n| order_body(&format!("t{n}"), id, &format!("u{n}"), 1, now))
        .collect();
    let records: Vec<(String, &str)> = bodies
        .iter()
        .enumerate()
        .map(|(n, b)| (format!("m{n}"), b.as_str()))
        .collect();
    let records: Vec<(&str, &str)> = records.iter().map(|(m, b)| (m.as_str(), *b)).collect();

    // DynamoDB behind a closed port: every write fails before it starts.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let sdk = seckill_shared::adapters::aws::loader(
        seckill_shared::adapters::aws::Caller::Tool,
        Duration::from_secs(1),
    )
    .endpoint_url(format!("http://{closed}"))
    .load()
    .await;
    let broken_db = aws_sdk_dynamodb::Client::new(&sdk);
    let broken = seckill_shared::app::order_writer::OrderWriter::new(
        seckill_shared::adapters::dynamo::orders::DynamoOrders::new(
            broken_db.clone(),
            &app.config.orders_table,
            &app.config.sales_table,
        ),
        seckill_shared::adapters::redis::RedisStock::connect_lazy(
            &app.config.redis_url,
            Duration::from_secs(2),
        )
        .unwrap(),
        seckill_shared::app::catalog_cache::CachedCatalog::new(
            seckill_shared::adapters::dynamo::catalog::DynamoCatalog::new(
                broken_db,
                &app.config.sales_table,
            ),
            Duration::from_secs(5),
        ),
    );
    assert!(
        invoke_writer(&broken, sqs_event(&records)).await.is_err(),
        "all failed is an error"
    );
    assert!(app.orders().await.is_empty(), "nothing half written");
    assert_eq!(app.sale_counters(id).await, (10, 0));

    // The emulator is back (the healthy client): the retry writes each once,
    // and a second retry changes nothing.
    let writer = app.writer().await;
    assert!(
        invoke_writer(&writer, sqs_event(&records))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        invoke_writer(&writer, sqs_event(&records))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(app.orders().await.len(), 4);
    assert_eq!(app.sale_counters(id).await, (6, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pay_and_expire_race_has_one_winner() {
    let app = App::spawn().await;
    let mut sale = live_sale(100, 1);
    sale.payment_window_seconds = 1;
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let writer = app.writer().await;
    let store = Arc::new(seckill_shared::adapters::dynamo::orders::DynamoOrders::new(
        app.db.clone(),
        &app.config.orders_table,
        &app.config.sales_table,
    ));
    let (mut paid, mut expired) = (0, 0);
    for round in 0..50 {
        // Due 300 ms from now (time for the write): pay and expire are fired
        // around the deadline.
        let reserved_at = clock::now_ms() - 1_000 + 300;
        let order = format!("r{round}");
        let user = format!("u{round}");
        let body = order_body(&order, id, &user, 1, reserved_at);
        // As SQS would: a batch the busy emulator failed is delivered again.
        let mut written = false;
        for _ in 0..5 {
            if invoke_writer(&writer, sqs_event(&[("m", &body)]))
                .await
                .is_ok_and(|failures| failures.is_empty())
            {
                written = true;
                break;
            }
        }
        assert!(written, "round {round}: the order was never written");
        let order_id = OrderId::parse(&order).unwrap();
        // The window runs from the write (a buyer gets all of it), so the
        // deadline is the row's.
        let due_at = store
            .get(&order_id)
            .await
            .unwrap()
            .and_then(|o| o.expires_at_ms)
            .unwrap();
        let user_id = UserId::parse(&user).unwrap();
        let (s1, s2) = (store.clone(), store.clone());
        let (o1, o2) = (order_id.clone(), order_id.clone());
        // Paid from 10 ms before to 10 ms after the deadline.
        let pay_at = due_at + (round % 21) - 10;
        let pay = tokio::spawn(async move {
            while clock::now_ms() < pay_at {
                tokio::task::yield_now().await;
            }
            s1.pay(&o1, &user_id, clock::now_ms()).await.unwrap()
        });
        let expire = tokio::spawn(async move {
            // The scheduler's view: expire as soon as it is due, and keep
            // trying while the order is still pending (on a loaded machine
            // one call can outlast the deadline); give up once it is not.
            let give_up = due_at + 15_000;
            loop {
                match s2.expire(&o2, clock::now_ms()).await.unwrap() {
                    ExpireOutcome::NotExpirable if clock::now_ms() < give_up => {
                        let due = clock::now_ms() >= due_at;
                        let pending = s2
                            .get(&o2)
                            .await
                            .unwrap()
                            .is_some_and(|o| o.status == OrderStatus::PendingPayment);
                        if due && !pending {
                            return ExpireOutcome::NotExpirable;
                        }
                        tokio::task::yield_now().await;
                    }
                    other => return other,
                }
            }
        });
        let (pay, expire) = (pay.await.unwrap(), expire.await.unwrap());
        let pay_won = matches!(pay, PayOutcome::Paid(_));
        let expire_won = matches!(expire, ExpireOutcome::Expired(_));
        assert!(pay_won ^ expire_won, "round {round}: {pay:?} / {expire:?}");
        let stored = store.get(&order_id).await.unwrap().unwrap();
        if pay_won {
            paid += 1;
            assert_eq!(stored.status, OrderStatus::Paid);
        } else {
            expired += 1;
            assert_eq!(stored.status, OrderStatus::Expired);
            assert!(
                matches!(pay, PayOutcome::Expired),
                "loser sees 409: {pay:?}"
            );
        }
    }
    let (available, sold) = app.sale_counters(id).await;
    assert_eq!(
        (available, sold),
        (100 - paid, paid),
        "expired units went back, paid ones did not"
    );
    assert_eq!(paid + expired, 50);
    println!("pay/expire race: {paid} paid, {expired} expired");
    assert!(paid > 0 && expired > 0, "both sides won some rounds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_purchases_drain_into_a_thousand_orders() {
    // Its own emulator: on the suite's shared one, every other test's
    // traffic slowed the drain past the deadline (45 to 103 batches in
    // 120 s under `make test`, with failed transactions costing a
    // visibility timeout each).
    if !seckill_tests::in_own_emulator("orders::a_thousand_purchases_drain_into_a_thousand_orders")
        .await
    {
        return;
    }
    // A visibility timeout longer than any batch can take here (the writer's
    // DynamoDB calls are bounded at 4 s each), not the tests' 1 s: moto runs
    // concurrent transactions without DynamoDB's isolation, so a batch that
    // reappeared while its first delivery was still being written could
    // take a unit twice there (on AWS the second put fails its condition).
    // Shorter than the template's 60 s so a batch that fails on the busy
    // emulator is retried within the test's deadline.
    let app = Arc::new(App::spawn_full(15, |_| {}).await);
    let sale = live_sale(1_000, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.to_string();

    let started = std::time::Instant::now();
    // 32 buyers at a time: the emulator's SendMessage is the bottleneck.
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers: Vec<_> = (0..32)
        .map(|_| {
            let (app, id, next) = (app.clone(), id.clone(), next.clone());
            tokio::spawn(async move {
                let mut accepted = 0;
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if n >= 1_000 {
                        return accepted;
                    }
                    let reply = app.purchase(&id, &format!("buyer{n}"), "").await;
                    assert_eq!(reply.status, 202, "{reply:?}");
                    accepted += 1;
                }
            })
        })
        .collect();
    let mut accepted = 0;
    for w in workers {
        accepted += w.await.unwrap();
    }
    assert_eq!(accepted, 1_000);
    let bought_at = std::time::Instant::now();
    println!("1,000 purchases accepted in {:?}", started.elapsed());

    // Drained after the burst, as a backlog: the emulator is too slow to
    // serve the purchases' sends and the writer's transactions at once
    // within the SDK timeouts, and a timed-out batch waits out the
    // visibility timeout before its retry.
    let arn = seckill_infra::event_source::queue_arn(&app.sqs, &app.queue_url)
        .await
        .unwrap();
    // One poller, not the template's five: moto answers concurrent
    // TransactWriteItems on one table with sporadic 500 pages and timeouts
    // (a thread-safety limit of the emulator, not of DynamoDB). The writer
    // handles those correctly (the batch is retried after the visibility
    // timeout), but each retry costs this test the timeout.
    let mut settings = EventSourceSettings::template(&app.queue_url, arn, "us-east-1");
    settings.maximum_concurrency = 1;
    let source = EventSource::spawn(
        app.sqs.clone(),
        settings,
        seckill_infra::local::writer_handler(app.writer().await),
    );

    // What this test proves is the exact count, whatever the pace: the
    // emulator's (about 100 s for the 1,000 here on a quiet machine, much
    // more under the whole suite on two cores) is not a figure of the code
    // (`make bench` measures the writer's work per order). So the wait
    // goes on while orders are written, and fails only when none has been
    // for longer than a failed batch takes to come back (its visibility
    // timeout) several times over, or after a cap a sound run never needs.
    let drained = seckill_tests::until_reached(
        1_000,
        Duration::from_secs(120),
        Duration::from_secs(1_200),
        // A read the busy emulator leaves unanswered counts as no news.
        || async {
            match app.try_sale_counters(&id).await {
                Ok((_, sold)) => u64::try_from(sold).unwrap_or(0),
                Err(_) => 0,
            }
        },
    )
    .await;
    let emptied = eventually(Duration::from_secs(60), || async {
        app.try_depth_of(&app.queue_url).await == Some(0)
    })
    .await;
    let counts = source.stop().await;
    if let Err(why) = &drained {
        panic!("not drained: {why} ({counts})");
    }
    assert!(emptied, "written, but the queue never emptied: {counts}");
    println!("drained in {:?}: {counts}", bought_at.elapsed());
    assert_eq!(app.sale_counters(&id).await, (0, 1_000));
    let orders = app.orders().await;
    assert_eq!(orders.len(), 1_000);
    let not_pending: Vec<_> = orders
        .values()
        .filter(|o| o.status != OrderStatus::PendingPayment)
        .map(|o| (o.order_id.as_str(), o.status))
        .collect();
    assert!(not_pending.is_empty(), "{not_pending:?}");
    assert_eq!(app.depth_of(&app.dlq_url).await, 0);
    let resv = app.reservations(&id).await;
    assert_eq!(resv.len(), 1_000);
    assert!(
        resv.values().all(|r| r.state == "WRITTEN"),
        "every reservation marked written"
    );
    println!("drained 1,000 orders: {counts}");
}

#[tokio::test]
async fn the_sample_event_file_feeds_the_handler() {
    // events/order-writer.json: two orders of sale "demo" and one poison
    // record, as `sam local invoke OrderWriterFunction -e ...` would send.
    let app = App::spawn().await;
    let mut demo = live_sale(100, 1);
    demo.sale_id = seckill_shared::domain::SaleId::parse("demo").unwrap();
    assert!(app.catalog.create_sale(&demo).await.unwrap());
    let raw = include_str!("../events/order-writer.json");
    let event: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_str(raw).unwrap();
    let poison: Vec<String> = event
        .records
        .iter()
        .filter(|r| {
            seckill_shared::app::order_writer::parse(r.body.as_deref().unwrap_or("")).is_err()
        })
        .map(|r| r.message_id.clone().unwrap())
        .collect();
    assert_eq!(
        poison.len(),
        1,
        "the file carries exactly one poison record"
    );
    let failures = invoke_writer(&*app.writer().await, event).await.unwrap();
    assert_eq!(failures, poison);
    assert_eq!(app.orders().await.len(), 2);
    assert_eq!(app.sale_counters("demo").await, (98, 2));
}

/// A command never undoes what was accepted: an order whose message is
/// still on the queue when an operator pauses the sale, or ends it, is
/// written all the same (the writer reads the sale for its limit, window
/// and price, never its status), and the purchases after the command are
/// refused as it says.
#[tokio::test]
async fn an_order_queued_before_a_pause_or_an_end_is_written_after_it() {
    let app = App::spawn().await;
    let sale = live_sale(10, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let jobs = app.jobs().await;
    let mut accepted = Vec::new();
    for (user, command) in [("before-pause", "pause"), ("before-end", "end")] {
        if command == "end" {
            // Resumed first: the end is what this round is about.
            app.catalog.set_paused(&sale.sale_id, false).await.unwrap();
            jobs.prewarm_sale(&sale.sale_id, clock::now_ms())
                .await
                .unwrap();
        }
        let reply = app.purchase(id, user, "").await;
        assert_eq!(reply.status, 202, "{reply:?}");
        let order = reply.body["orderId"].as_str().unwrap().to_owned();
        accepted.push(order.clone());
        // Held: the message is on its way while the command lands.
        let held = app.take_messages().await;
        match command {
            "pause" => {
                app.catalog.set_paused(&sale.sale_id, true).await.unwrap();
            }
            _ => {
                let mut ended = app
                    .catalog
                    .get_record(&sale.sale_id)
                    .await
                    .unwrap()
                    .unwrap()
                    .0;
                ended.end_ms = clock::now_ms() - 1;
                app.catalog
                    .upsert_sale(&ended, clock::now_ms())
                    .await
                    .unwrap();
            }
        }
        jobs.prewarm_sale(&sale.sale_id, clock::now_ms())
            .await
            .unwrap();
        let refused = app.purchase(id, "after", "").await;
        let expected = if command == "pause" {
            (503, "SALE_PAUSED")
        } else {
            (410, "SALE_ENDED")
        };
        assert_eq!(
            (refused.status, refused.code()),
            expected,
            "{command}: {refused:?}"
        );
        let records: Vec<(&str, &str)> =
            held.iter().map(|(m, b)| (m.as_str(), b.as_str())).collect();
        let failures = invoke_writer(&*app.writer().await, sqs_event(&records))
            .await
            .unwrap();
        assert!(failures.is_empty(), "{command}: {failures:?}");
        assert_eq!(
            app.orders().await[&order].status,
            OrderStatus::PendingPayment,
            "the order accepted before the {command}"
        );
    }
    seckill_tests::assert_clean(&app.checker(), id, &accepted).await;
}
