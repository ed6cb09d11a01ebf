//! The strict layer (`seckill_infra::strict`): each limit AWS documents
//! bites through it, and the same request against the emulator alone shows
//! the emulator's kindness. Each test starts its own layer, with the knob
//! it tests, in front of the suite's emulator (`SECKILL_EMULATOR_URL`, or
//! `AWS_ENDPOINT_URL` when the suite runs without the layer).

use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, ConditionCheck, KeySchemaElement, KeyType,
    Put, ScalarAttributeType, TransactWriteItem, Update,
};
use seckill_infra::strict::{self, StrictSettings};
use seckill_tests::{clients_without_retries, unique};
use std::time::Duration;

/// The emulator itself, without the suite's layer.
fn emulator() -> String {
    std::env::var("SECKILL_EMULATOR_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .expect("make test exports SECKILL_EMULATOR_URL")
}

/// A layer of this test's own in front of the emulator.
async fn layer(settings: StrictSettings) -> strict::Strict {
    strict::start("127.0.0.1:0", &emulator(), settings)
        .await
        .expect("the strict layer starts")
}

fn knobs(tweak: impl FnOnce(&mut StrictSettings)) -> StrictSettings {
    let mut settings = StrictSettings::lenient();
    tweak(&mut settings);
    settings
}

/// Clients of `url` with no retries: each answer is the endpoint's own.
async fn clients(url: &str) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
    // Generous: the suite loads the emulator, and one test holds a
    // transaction open on purpose.
    clients_without_retries(url, Duration::from_secs(60)).await
}

async fn dynamo(url: &str) -> aws_sdk_dynamodb::Client {
    clients(url).await.0
}

/// A client of `url` whose attempts give up after 0.45 s, with no retries.
async fn impatient_dynamo(url: &str) -> aws_sdk_dynamodb::Client {
    clients_without_retries(url, Duration::from_secs(1)).await.0
}

async fn sqs_of(url: &str) -> aws_sdk_sqs::Client {
    clients(url).await.1
}

async fn table(db: &aws_sdk_dynamodb::Client, name: &str) {
    db.create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("id")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("id")
                .key_type(KeyType::Hash)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

/// Writes that were acknowledged and then read back otherwise, out of
/// `updates`, while cancelled transactions run beside them.
async fn lost_acknowledged_writes(url: &str, updates: usize) -> usize {
    let db = dynamo(url).await;
    let name = unique("strict-undo");
    table(&db, &name).await;
    for i in 0..updates {
        db.put_item()
            .table_name(&name)
            .item("id", s(&format!("o{i}")))
            .item("status", s("PENDING_PAYMENT"))
            .send()
            .await
            .unwrap();
    }
    // A table of some size: moto's copy of it, and with it the window in
    // which a concurrent write is undone, takes longer.
    let filler = "f".repeat(200);
    for chunk in 0..40 {
        let requests = (0..25)
            .map(|i| {
                aws_sdk_dynamodb::types::WriteRequest::builder()
                    .put_request(
                        aws_sdk_dynamodb::types::PutRequest::builder()
                            .item("id", s(&format!("filler-{chunk}-{i}")))
                            .item("pad", s(&filler))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        db.batch_write_item()
            .request_items(&name, requests)
            .send()
            .await
            .unwrap();
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Transactions whose condition always fails: each is cancelled, and
    // moto puts back the copy of the table it took when it started.
    let cancelling: Vec<_> = (0..4)
        .map(|t| {
            let (db, name, done) = (db.clone(), name.clone(), done.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let result = db
                        .transact_write_items()
                        .transact_items(
                            TransactWriteItem::builder()
                                .condition_check(
                                    ConditionCheck::builder()
                                        .table_name(&name)
                                        .key("id", s("o0"))
                                        .condition_expression("attribute_exists(nothing)")
                                        .build()
                                        .unwrap(),
                                )
                                .build(),
                        )
                        .transact_items(
                            TransactWriteItem::builder()
                                .put(
                                    Put::builder()
                                        .table_name(&name)
                                        .item("id", s(&format!("t{t}-{n}")))
                                        .build()
                                        .unwrap(),
                                )
                                .build(),
                        )
                        .send()
                        .await;
                    assert!(
                        result.is_err(),
                        "a transaction whose condition fails went through"
                    );
                }
            })
        })
        .collect();
    let mut acknowledged = Vec::new();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (db, name) = (db.clone(), name.clone());
            tokio::spawn(async move {
                let mut ok = Vec::new();
                for i in (w..updates).step_by(4) {
                    let id = format!("o{i}");
                    if db
                        .update_item()
                        .table_name(&name)
                        .key("id", s(&id))
                        .update_expression("SET #s = :paid")
                        .condition_expression("#s = :pending")
                        .expression_attribute_names("#s", "status")
                        .expression_attribute_values(":paid", s("PAID"))
                        .expression_attribute_values(":pending", s("PENDING_PAYMENT"))
                        .send()
                        .await
                        .is_ok()
                    {
                        ok.push(id);
                    }
                }
                ok
            })
        })
        .collect();
    for writer in writers {
        acknowledged.extend(writer.await.unwrap());
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in cancelling {
        task.await.unwrap();
    }
    let mut lost = 0;
    for id in &acknowledged {
        let item = db
            .get_item()
            .table_name(&name)
            .key("id", s(id))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .unwrap_or_default();
        if item.get("status") != Some(&s("PAID")) {
            lost += 1;
        }
    }
    let _ = db.delete_table().table_name(&name).send().await;
    lost
}

#[tokio::test]
async fn the_emulator_undoes_acknowledged_writes_and_the_strict_layer_never_does() {
    let strict = layer(StrictSettings::lenient()).await;
    for round in 1..=3 {
        let lost = lost_acknowledged_writes(&strict.url(), 120).await;
        assert_eq!(
            lost, 0,
            "round {round}: the strict layer lost {lost} acknowledged writes"
        );
    }
    // The emulator alone: the same load loses writes it acknowledged (if a
    // new moto ever stops doing so, this says the layer's serialisation is
    // then belt and braces, not that the layer is wrong).
    let mut lost_plain = 0;
    for _ in 0..5 {
        lost_plain = lost_acknowledged_writes(&emulator(), 120).await;
        if lost_plain > 0 {
            break;
        }
    }
    println!("emulator alone: {lost_plain} of 120 acknowledged writes undone");
    assert!(
        lost_plain > 0,
        "the emulator alone lost no acknowledged write in 5 rounds"
    );
}

/// The emulator as `make run` and `make bench` start it: moto's server
/// through `infra/moto/server.py` (`MOTO_ITEM_UNDO=1`).
#[tokio::test]
async fn the_item_undo_emulator_never_undoes_an_acknowledged_write() {
    let (mut moto, url) = seckill_tests::spawn_moto(true).await;
    // The load that makes moto's own server lose writes (the test above),
    // with no layer in front.
    for round in 1..=3 {
        let lost = lost_acknowledged_writes(&url, 120).await;
        assert_eq!(
            lost, 0,
            "round {round}: infra/moto/server.py lost {lost} acknowledged writes"
        );
    }
    let _ = moto.kill().await;
}

fn order_put(table: &str, id: &str) -> TransactWriteItem {
    TransactWriteItem::builder()
        .put(
            Put::builder()
                .table_name(table)
                .item("id", s(id))
                .build()
                .unwrap(),
        )
        .build()
}

fn sale_update(table: &str) -> TransactWriteItem {
    TransactWriteItem::builder()
        .update(
            Update::builder()
                .table_name(table)
                .key("id", s("hot-sale"))
                .update_expression("ADD sold :one")
                .expression_attribute_values(":one", AttributeValue::N("1".into()))
                .build()
                .unwrap(),
        )
        .build()
}

async fn order_transaction(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    order: &str,
) -> Result<(), Vec<String>> {
    match db
        .transact_write_items()
        .transact_items(order_put(table, order))
        .transact_items(sale_update(table))
        .send()
        .await
    {
        Ok(_) => Ok(()),
        Err(err) => match err.into_service_error() {
            aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(e) => Err(e
                .cancellation_reasons()
                .iter()
                .map(|r| r.code().unwrap_or("None").to_owned())
                .collect()),
            other => panic!("not a cancellation: {other:?}"),
        },
    }
}

#[tokio::test]
async fn a_transaction_on_an_item_another_holds_is_cancelled_with_transaction_conflict() {
    // The first transaction takes long (AWS's latency, stretched): the
    // second arrives while it is in flight, for certain, however fast or
    // slow the machine.
    let strict = layer(knobs(|k| {
        k.dynamo.transaction_hold = Duration::from_secs(60);
        k.dynamo.transaction_latency = Duration::from_secs(5);
    }))
    .await;
    let strict_db = dynamo(&strict.url()).await;
    let plain_db = dynamo(&emulator()).await;
    let name = unique("strict-conflict");
    table(&plain_db, &name).await;

    let first = tokio::spawn({
        let (db, name) = (strict_db.clone(), name.clone());
        async move { order_transaction(&db, &name, "o1").await }
    });
    // The first is in flight before the second is sent.
    let tally = strict.tally.clone();
    let in_flight = seckill_tests::eventually(Duration::from_secs(30), || {
        let tally = tally.clone();
        async move {
            tally
                .transactions_in_flight
                .load(std::sync::atomic::Ordering::SeqCst)
                == 1
        }
    })
    .await;
    assert!(in_flight, "the first transaction never reached the layer");
    assert_eq!(
        order_transaction(&strict_db, &name, "o2").await,
        Err(vec!["None".to_owned(), "TransactionConflict".to_owned()]),
        "the second transaction on the hot item"
    );
    let single = strict_db
        .update_item()
        .table_name(&name)
        .key("id", s("hot-sale"))
        .update_expression("ADD sold :one")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .send()
        .await
        .expect_err("a single write to a held item went through");
    assert_eq!(single.code(), Some("TransactionConflictException"));
    assert_eq!(first.await.unwrap(), Ok(()));
    // The emulator alone never conflicts.
    assert_eq!(order_transaction(&plain_db, &name, "o3").await, Ok(()));
    assert_eq!(order_transaction(&plain_db, &name, "o4").await, Ok(()));
    assert!(
        strict
            .tally
            .conflicts
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 2
    );
    let _ = plain_db.delete_table().table_name(&name).send().await;
}

#[tokio::test]
async fn a_hot_partition_is_throttled_and_the_emulator_never_throttles() {
    let strict = layer(knobs(|k| k.dynamo.partition_write_units = Some(2))).await;
    let strict_db = dynamo(&strict.url()).await;
    let plain_db = dynamo(&emulator()).await;
    let name = unique("strict-throttle");
    table(&plain_db, &name).await;
    let put = |db: aws_sdk_dynamodb::Client, n: u32| {
        let name = name.clone();
        async move {
            db.put_item()
                .table_name(&name)
                .item("id", s("hot-sale"))
                .item("n", AttributeValue::N(n.to_string()))
                .send()
                .await
        }
    };
    // Two units a second: of six writes in a row, at most those two plus
    // what refills while they run can pass (each write would have to take
    // half a second for all to).
    let mut throttled = 0;
    for n in 0..6 {
        if let Err(err) = put(strict_db.clone(), n).await {
            assert_eq!(err.code(), Some("ProvisionedThroughputExceededException"));
            throttled += 1;
        }
    }
    assert!(
        throttled >= 1,
        "six writes of one partition in a row, none throttled"
    );
    // In a transaction the throttled item's reason is ThrottlingError.
    let reasons = order_transaction(&strict_db, &name, "o1").await;
    assert!(
        matches!(&reasons, Err(r) if r.iter().any(|c| c == "ThrottlingError")),
        "{reasons:?}"
    );
    for n in 0..6 {
        put(plain_db.clone(), n)
            .await
            .expect("the emulator alone never throttles");
    }
    let _ = plain_db.delete_table().table_name(&name).send().await;
}

#[tokio::test]
async fn an_item_over_400_kb_is_refused() {
    let strict = layer(StrictSettings::default()).await;
    let db = dynamo(&strict.url()).await;
    let name = unique("strict-size");
    table(&db, &name).await;
    let big = "x".repeat(400 * 1024);
    let err = db
        .put_item()
        .table_name(&name)
        .item("id", s("big"))
        .item("audit", s(&big))
        .send()
        .await
        .expect_err("a 400 KB item was written");
    assert_eq!(err.code(), Some("ValidationException"));
    db.put_item()
        .table_name(&name)
        .item("id", s("small"))
        .item("audit", s(&big[..300 * 1024]))
        .send()
        .await
        .expect("a 300 KB item is fine");
    let _ = db.delete_table().table_name(&name).send().await;
}

async fn queue(sqs: &aws_sdk_sqs::Client) -> String {
    sqs.create_queue()
        .queue_name(unique("strict-q"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap()
}

async fn visible(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default()
        .get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn queue_counts_lag_behind_a_send_as_aws_says_they_may() {
    let strict = layer(knobs(|k| {
        k.sqs.count_lag = Duration::from_secs(600);
        k.sqs.native = true;
    }))
    .await;
    let strict_sqs = sqs_of(&strict.url()).await;
    let plain_sqs = sqs_of(&emulator()).await;
    for (sqs, lags) in [(&strict_sqs, true), (&plain_sqs, false)] {
        let url = queue(sqs).await;
        assert_eq!(visible(sqs, &url).await, "0");
        sqs.send_message()
            .queue_url(&url)
            .message_body("accepted order")
            .send()
            .await
            .unwrap();
        if lags {
            assert_eq!(
                strict.exact_queue_counts(&url),
                Some((1, 0, 0)),
                "the message is there"
            );
            assert_eq!(
                visible(sqs, &url).await,
                "0",
                "the strict layer's count still lags"
            );
        } else {
            assert_eq!(visible(sqs, &url).await, "1", "the emulator counts at once");
        }
    }
}

#[tokio::test]
async fn a_standard_queue_delivers_a_message_twice() {
    let strict = layer(knobs(|k| {
        k.sqs.duplicate_rate = 1.0;
        k.sqs.native = true;
    }))
    .await;
    let strict_sqs = sqs_of(&strict.url()).await;
    let plain_sqs = sqs_of(&emulator()).await;
    for (sqs, copies) in [(&strict_sqs, 1), (&plain_sqs, 0)] {
        let url = queue(sqs).await;
        let sent = sqs
            .send_message()
            .queue_url(&url)
            .message_body("order o1")
            .send()
            .await
            .unwrap()
            .message_id
            .unwrap();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        // Receive and delete until the queue is quiet: a copy comes after
        // the original was deleted, as AWS's duplicates do.
        while tokio::time::Instant::now() < deadline {
            let got = sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            if got.is_empty() && !seen.is_empty() {
                break;
            }
            for m in got {
                seen.push(m.message_id.clone().unwrap());
                sqs.delete_message()
                    .queue_url(&url)
                    .receipt_handle(m.receipt_handle.unwrap())
                    .send()
                    .await
                    .expect("deleting a delivery (a copy too) succeeds");
            }
        }
        assert_eq!(seen.len(), 1 + copies, "{seen:?}");
        assert!(seen.iter().all(|id| *id == sent), "{seen:?}");
    }
    assert_eq!(
        strict
            .tally
            .duplicates
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

/// A transaction applied and answered late: the client that gave up first
/// got a timeout for a write that took effect, as AWS warns a client of a
/// lost answer may (its outcome is unknown until it reads or retries with
/// the same `ClientRequestToken`).
#[tokio::test]
async fn a_transaction_answered_after_the_client_gave_up_took_effect_all_the_same() {
    let strict = layer(knobs(|k| {
        k.dynamo.transaction_answer_delay = Duration::from_secs(3);
    }))
    .await;
    // The answer comes long after the client gave up.
    let impatient = impatient_dynamo(&strict.url()).await;
    let plain_db = dynamo(&emulator()).await;
    let name = unique("strict-late");
    table(&plain_db, &name).await;

    let err = impatient
        .transact_write_items()
        .transact_items(order_put(&name, "o1"))
        .transact_items(sale_update(&name))
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(err, aws_sdk_dynamodb::error::SdkError::TimeoutError(_)),
        "{err:?}"
    );
    let applied = seckill_tests::eventually(Duration::from_secs(30), || {
        let (db, name) = (plain_db.clone(), name.clone());
        async move {
            db.get_item()
                .table_name(&name)
                .key("id", s("o1"))
                .consistent_read(true)
                .send()
                .await
                .unwrap()
                .item
                .is_some()
        }
    })
    .await;
    assert!(applied, "the timed-out transaction was applied");
}

/// An emulator that answers every request `{}` at once, but holds the
/// first `PutItem` until another `PutItem` arrives or `hold` has passed
/// (a deadline: a layer that lets a second write through is caught at
/// once, however slow the machine); it notes when each `PutItem` arrived
/// and when it was answered.
async fn slow_first_put(
    hold: Duration,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, std::time::Instant)>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let puts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = puts.clone();
    tokio::spawn(async move {
        let first = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let another = std::sync::Arc::new(tokio::sync::Notify::new());
        while let Ok((mut stream, _)) = listener.accept().await {
            let (seen, first, another) = (seen.clone(), first.clone(), another.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: its head, then its body.
                    let head_end = loop {
                        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        let mut chunk = [0_u8; 4096];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + length {
                        let mut chunk = [0_u8; 4096];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + length);
                    let arrived = std::time::Instant::now();
                    let put = head.contains("dynamodb_20120810.putitem");
                    if put && first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                        let _ = tokio::time::timeout(hold, another.notified()).await;
                    } else if put {
                        another.notify_one();
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 2\r\n\r\n{}";
                    // Answered (or its caller gone) now.
                    let sent = stream.write_all(answer.as_bytes()).await;
                    if put {
                        seen.lock()
                            .unwrap()
                            .push((arrived, std::time::Instant::now()));
                    }
                    if sent.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, puts)
}

// A write whose client gave up was still being applied by the emulator
// when the layer let the next write of its table through: the client's
// drop cancelled the request's future, and the table's write lock with
// it. The emulator then applied two writes at once (a cancelled
// transaction's put-back undid the other: `reconcile::a_whole_sale_run_
// reconciles_clean` saw a sale item's expiry undone on a loaded machine).
#[tokio::test]
async fn a_write_the_client_gave_up_on_holds_its_table_until_the_emulator_answers() {
    let (upstream, puts) = slow_first_put(Duration::from_secs(3)).await;
    let strict = strict::start("127.0.0.1:0", &upstream, StrictSettings::lenient())
        .await
        .unwrap();
    // This client gives up long before the emulator answers.
    let impatient = impatient_dynamo(&strict.url()).await;
    let patient = dynamo(&strict.url()).await;
    let put = |db: &aws_sdk_dynamodb::Client, id: &str| {
        db.put_item().table_name("t").item("id", s(id)).send()
    };
    let err = put(&impatient, "first").await.unwrap_err();
    assert!(
        matches!(err, aws_sdk_dynamodb::error::SdkError::TimeoutError(_)),
        "{err:?}"
    );
    put(&patient, "second").await.unwrap();
    // The first is noted once the emulator is done with it.
    assert!(
        seckill_tests::eventually(Duration::from_secs(10), || async {
            puts.lock().unwrap().len() == 2
        })
        .await
    );
    let puts = puts.lock().unwrap().clone();
    assert_eq!(puts.len(), 2, "{puts:?}");
    let (first, second) = if puts[0].0 <= puts[1].0 {
        (puts[0], puts[1])
    } else {
        (puts[1], puts[0])
    };
    assert!(
        second.0 >= first.1,
        "the second write reached the emulator {:?} before the first was answered",
        first.1 - second.0
    );
}

/// The DLQ view through a layer that delivers every message twice: a copy
/// of a message a redrive sent back is not listed again (the operator
/// would send it back twice, and take the redrive for one that failed),
/// and where the original is still there (a redrive that moved a copy),
/// the next look deletes it; the other message is listed all along.
#[tokio::test]
async fn a_copy_of_a_redriven_message_is_never_listed_again() {
    use seckill_shared::adapters::dead_letters::SqsDeadLetters;
    use seckill_shared::adapters::redis::RedisStock;
    use seckill_shared::app::console;
    let strict = layer(knobs(|k| {
        k.sqs.duplicate_rate = 1.0;
        k.sqs.native = true;
    }))
    .await;
    let sqs = sqs_of(&strict.url()).await;
    let (orders, dlq_url) = (queue(&sqs).await, queue(&sqs).await);
    let stock = RedisStock::connect_lazy(
        &std::env::var("REDIS_URL").expect("make test exports REDIS_URL"),
        Duration::from_secs(5),
    )
    .unwrap();
    let sale = unique("dlq-copies");
    let now = seckill_shared::clock::now_ms();
    let mut ids = Vec::new();
    for n in 1..=3 {
        let body = seckill_tests::order_body(&format!("{sale}-o{n}"), &sale, "auth0|b", 1, now);
        let sent = sqs
            .send_message()
            .queue_url(&dlq_url)
            .message_body(body)
            .send()
            .await
            .unwrap();
        ids.push(sent.message_id.unwrap());
    }
    let dlq = SqsDeadLetters::new(sqs.clone(), &orders, &dlq_url);
    let listed = |entries: Vec<console::DlqEntry>| {
        let mut ids: Vec<String> = entries.into_iter().map(|e| e.letter.message_id).collect();
        ids.sort();
        ids
    };
    let mut all = ids.clone();
    all.sort();
    assert_eq!(
        listed(console::dead_letters(&dlq, &stock).await.unwrap()),
        all
    );

    let moved = console::redrive(&dlq, &stock, Some(&ids[..1]), now)
        .await
        .unwrap();
    assert_eq!(moved.moved.len(), 1, "{moved:?}");
    let mut rest = ids[1..].to_vec();
    rest.sort();
    // Every receive hands out a copy of what it received to the next one:
    // each look below meets a copy of the moved message if any is left.
    for look in 0..3 {
        assert_eq!(
            listed(console::dead_letters(&dlq, &stock).await.unwrap()),
            rest,
            "look {look}: the redriven message is listed again"
        );
    }
    assert_eq!(strict.exact_queue_counts(&dlq_url), Some((2, 0, 0)));

    // A redrive that moved a copy left the original behind (as if it had
    // been sent back): the next look lists it no more, and deletes it.
    use seckill_shared::ports::WriteErrorLog;
    let sale_id = seckill_shared::domain::SaleId::parse(&sale).unwrap();
    stock
        .keep_redriven(&sale_id, &[ids[1].as_str()], now)
        .await
        .unwrap();
    for look in 0..3 {
        assert_eq!(
            listed(console::dead_letters(&dlq, &stock).await.unwrap()),
            [ids[2].clone()],
            "look {look}: a message sent back is listed"
        );
    }
    assert_eq!(strict.exact_queue_counts(&dlq_url), Some((1, 0, 0)));
}
