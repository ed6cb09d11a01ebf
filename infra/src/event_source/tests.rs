//! The event source against stand-in handlers, and against the emulator.

use super::batching::invoke;
use super::polling::receive;
use super::*;
use aws_lambda_events::event::sqs::SqsMessage;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::MessageAttributeValue;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use std::sync::Mutex;
use tokio::time::Instant;

const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:seckill-orders";

fn message(id: &str) -> Message {
    Message::builder()
        .message_id(id)
        .receipt_handle(format!("rh-{id}"))
        .body(format!("body-{id}"))
        .md5_of_body("md5")
        .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "2")
        .attributes(MessageSystemAttributeName::SentTimestamp, "1796007600012")
        .attributes(MessageSystemAttributeName::SenderId, "AIDEXAMPLE")
        .attributes(
            MessageSystemAttributeName::ApproximateFirstReceiveTimestamp,
            "1796007600518",
        )
        .build()
}

fn batch(ids: &[&str]) -> Vec<SqsMessage> {
    ids.iter()
        .map(|id| to_record(&message(id), ARN, "us-east-1"))
        .collect()
}

fn failing(ids: &[&str]) -> Result<SqsBatchResponse, String> {
    let mut response = SqsBatchResponse::default();
    for id in ids {
        response.add_failure(*id);
    }
    Ok(response)
}

#[test]
fn record_has_lambda_shape() {
    let mut msg = message("m1");
    msg.message_attributes = Some(
        [
            (
                "trace".to_owned(),
                MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value("abc")
                    .build()
                    .unwrap(),
            ),
            (
                "raw".to_owned(),
                MessageAttributeValue::builder()
                    .data_type("Binary")
                    .binary_value(Blob::new(b"hi".to_vec()))
                    .build()
                    .unwrap(),
            ),
        ]
        .into(),
    );
    let json = serde_json::to_value(to_record(&msg, ARN, "us-east-1")).unwrap();
    assert_eq!(json["messageId"], "m1");
    assert_eq!(json["receiptHandle"], "rh-m1");
    assert_eq!(json["body"], "body-m1");
    assert_eq!(json["md5OfBody"], "md5");
    assert_eq!(json["eventSource"], "aws:sqs");
    assert_eq!(json["eventSourceARN"], ARN);
    assert_eq!(json["awsRegion"], "us-east-1");
    assert_eq!(json["attributes"]["ApproximateReceiveCount"], "2");
    assert_eq!(json["attributes"]["SentTimestamp"], "1796007600012");
    assert_eq!(json["attributes"]["SenderId"], "AIDEXAMPLE");
    assert_eq!(
        json["attributes"]["ApproximateFirstReceiveTimestamp"],
        "1796007600518"
    );
    assert_eq!(json["messageAttributes"]["trace"]["stringValue"], "abc");
    assert_eq!(json["messageAttributes"]["trace"]["dataType"], "String");
    assert_eq!(json["messageAttributes"]["raw"]["binaryValue"], "aGk=");
    assert_eq!(json["messageAttributes"]["raw"]["dataType"], "Binary");
}

#[test]
fn record_parses_like_the_sample_event() {
    // The handler parses what Lambda sends; our record must survive the
    // same JSON round trip as the sample event in `events/`.
    let mut event = SqsEvent::default();
    event.records = batch(&["a", "b"]);
    let json = serde_json::to_string(&event).unwrap();
    let back: SqsEvent = serde_json::from_str(&json).unwrap();
    assert_eq!(back, event);
    assert!(json.starts_with("{\"Records\":["));
}

#[test]
fn message_without_attributes_gives_empty_maps() {
    let msg = Message::builder()
        .message_id("x")
        .receipt_handle("r")
        .build();
    let record = to_record(&msg, ARN, "eu-west-1");
    assert!(record.attributes.is_empty());
    assert!(record.message_attributes.is_empty());
    assert_eq!(record.body, None);
    assert_eq!(record.aws_region.as_deref(), Some("eu-west-1"));
}

#[test]
fn no_failures_deletes_everything() {
    let b = batch(&["a", "b", "c"]);
    assert_eq!(
        settlement(&b, failing(&[])),
        Settlement::Delete {
            receipt_handles: vec!["rh-a".into(), "rh-b".into(), "rh-c".into()],
            failed: 0,
        }
    );
}

#[test]
fn reported_failures_are_kept() {
    let b = batch(&["a", "b", "c"]);
    assert_eq!(
        settlement(&b, failing(&["b"])),
        Settlement::Delete {
            receipt_handles: vec!["rh-a".into(), "rh-c".into()],
            failed: 1,
        }
    );
    assert_eq!(
        settlement(&b, failing(&["a", "b", "c"])),
        Settlement::Delete {
            receipt_handles: vec![],
            failed: 3,
        }
    );
}

#[test]
fn duplicate_failure_ids_count_once() {
    let b = batch(&["a", "b"]);
    assert_eq!(
        settlement(&b, failing(&["a", "a"])),
        Settlement::Delete {
            receipt_handles: vec!["rh-b".into()],
            failed: 1,
        }
    );
}

#[test]
fn unknown_or_empty_identifier_fails_the_whole_batch() {
    let b = batch(&["a", "b"]);
    assert!(matches!(
        settlement(&b, failing(&["a", "zzz"])),
        Settlement::Retry { .. }
    ));
    assert!(matches!(
        settlement(&b, failing(&[""])),
        Settlement::Retry { .. }
    ));
}

#[test]
fn handler_error_deletes_nothing() {
    let b = batch(&["a"]);
    assert_eq!(
        settlement(&b, Err("boom".into())),
        Settlement::Retry {
            reason: "boom".into()
        }
    );
}

#[test]
fn settings_are_clamped_to_what_sqs_and_lambda_accept() {
    let mut s = EventSourceSettings::template("url", ARN, "us-east-1");
    assert_eq!((s.batch_size(), s.wait_time_seconds()), (10, 1));
    s.batch_size = 0;
    s.wait_time_seconds = 0;
    assert_eq!((s.batch_size(), s.wait_time_seconds()), (1, 1));
    s.batch_size = 50_000;
    s.wait_time_seconds = 60;
    assert_eq!((s.batch_size(), s.wait_time_seconds()), (10_000, 20));
}

#[tokio::test]
async fn panicking_handler_fails_its_batch() {
    // The panic message this test prints is expected.
    let stats = EventSourceStats::default();
    let handler = |_event: SqsEvent| async move {
        if true {
            panic!("handler bug");
        }
        Ok(SqsBatchResponse::default())
    };
    let outcome = invoke(&handler, &batch(&["a"]), &stats, None).await;
    assert!(outcome.is_err());
    assert_eq!(stats.snapshot().invocations, 1);
    assert_eq!(stats.snapshot().records_delivered, 1);
}

#[tokio::test(start_paused = true)]
async fn a_handler_past_its_timeout_is_stopped_and_fails_its_batch() {
    use crate::lambda_limits::{Function, FunctionLimit};
    use std::sync::atomic::AtomicBool;
    let stats = EventSourceStats::default();
    let finished = Arc::new(AtomicBool::new(false));
    let handler = {
        let finished = finished.clone();
        move |_event: SqsEvent| {
            let finished = finished.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                finished.store(true, Ordering::SeqCst);
                Ok(SqsBatchResponse::default())
            }
        }
    };
    let limit = FunctionLimit::template(Function::OrderWriter);
    let started = Instant::now();
    let outcome = invoke(&handler, &batch(&["a", "b"]), &stats, Some(&limit)).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(10),
        "the template's Timeout"
    );
    assert!(
        outcome
            .as_ref()
            .is_err_and(|e| e.contains("Task timed out after 10.00 seconds")),
        "{outcome:?}"
    );
    assert_eq!(
        settlement(&batch(&["a", "b"]), outcome),
        Settlement::Retry {
            reason: "order-writer: Task timed out after 10.00 seconds".into()
        }
    );
    let counts = stats.snapshot();
    assert_eq!(
        (counts.invocations, counts.timed_out, counts.throttled),
        (1, 1, 0)
    );
    // The spawned invocation was aborted, not left to finish its work.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!finished.load(Ordering::SeqCst));
    // Without the timeout the same handler's batch succeeds.
    let lenient = limit.with_timeout(None);
    let outcome = invoke(&handler, &batch(&["a"]), &stats, Some(&lenient)).await;
    assert!(outcome.is_ok());
}

#[tokio::test(start_paused = true)]
async fn an_invocation_over_the_reserved_concurrency_never_reaches_the_handler() {
    use crate::lambda_limits::{Function, FunctionLimit};
    use std::sync::atomic::AtomicU64;
    let stats = Arc::new(EventSourceStats::default());
    let calls = Arc::new(AtomicU64::new(0));
    let handler = {
        let calls = calls.clone();
        move |_event: SqsEvent| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(SqsBatchResponse::default())
            }
        }
    };
    let limit = FunctionLimit::template(Function::OrderWriter).with_concurrency(Some(1));
    let first = tokio::spawn({
        let (handler, stats, limit) = (handler.clone(), stats.clone(), limit.clone());
        async move { invoke(&handler, &batch(&["a"]), &stats, Some(&limit)).await }
    });
    tokio::task::yield_now().await;
    let second = invoke(&handler, &batch(&["b"]), &stats, Some(&limit)).await;
    assert!(
        second
            .as_ref()
            .is_err_and(|e| e.contains("TooManyRequestsException")),
        "{second:?}"
    );
    assert!(first.await.unwrap().is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let counts = stats.snapshot();
    assert_eq!((counts.invocations, counts.throttled), (1, 1));
    // With no cap both run.
    let open = limit.with_concurrency(None);
    let (c, d) = (batch(&["c"]), batch(&["d"]));
    let (a, b) = tokio::join!(
        invoke(&handler, &c, &stats, Some(&open)),
        invoke(&handler, &d, &stats, Some(&open))
    );
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A client for an endpoint where nothing listens.
fn unreachable_client() -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "test",
        ))
        .endpoint_url("http://127.0.0.1:9")
        // One attempt per receive keeps the test short; the poller's own
        // backoff is what is under test.
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

#[tokio::test]
async fn unreachable_queue_keeps_polling_and_stops_promptly() {
    let settings = EventSourceSettings::template("http://127.0.0.1:9/q", ARN, "us-east-1");
    let source = EventSource::spawn(unreachable_client(), settings, |_e: SqsEvent| async {
        Ok(SqsBatchResponse::default())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    // Every one of the five pollers fails at least twice and carries on.
    while source.stats().snapshot().receive_errors < 10 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    let counts = source.stop().await;
    assert!(counts.receive_errors >= 10, "{counts}");
    assert_eq!(counts.invocations, 0);
    assert!(started.elapsed() < Duration::from_millis(500));
}

/// A fresh queue (and DLQ) on the emulator holding `count` messages.
async fn queue_with_messages(
    prefix: &str,
    count: usize,
) -> (aws_sdk_sqs::Client, crate::emulator::Queues, String) {
    let sdk = seckill_shared::adapters::aws::sdk_config(
        seckill_shared::adapters::aws::Caller::Tool,
        Duration::from_secs(5),
    )
    .await;
    let sqs = seckill_shared::adapters::aws::sqs(&sdk);
    let suffix = seckill_shared::clock::now_ms();
    let queues = crate::emulator::ensure_queues(
        &sqs,
        &format!("{prefix}-{suffix}"),
        &format!("{prefix}-dlq-{suffix}"),
        crate::emulator::VISIBILITY_TIMEOUT_SECS,
    )
    .await
    .unwrap();
    let arn = queue_arn(&sqs, &queues.orders_url).await.unwrap();
    for i in 0..count {
        sqs.send_message()
            .queue_url(&queues.orders_url)
            .message_body(format!("msg-{i}"))
            .send()
            .await
            .unwrap();
    }
    (sqs, queues, arn)
}

/// Against the emulator `make test` starts (`AWS_ENDPOINT_URL`).
#[tokio::test]
async fn emulator_partial_batch_failure() {
    let (sqs, queues, arn) = queue_with_messages("esm-test", 25).await;

    let seen: Arc<Mutex<Vec<SqsMessage>>> = Arc::default();
    // In flight now / at most: never above the concurrency setting.
    let in_flight = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let handler = {
        let seen = Arc::clone(&seen);
        let in_flight = Arc::clone(&in_flight);
        move |event: SqsEvent| {
            let seen = Arc::clone(&seen);
            let in_flight = Arc::clone(&in_flight);
            async move {
                let now = in_flight.0.fetch_add(1, Ordering::SeqCst) + 1;
                in_flight.1.fetch_max(now, Ordering::SeqCst);
                // Long enough for invocations of other pollers to overlap.
                tokio::time::sleep(Duration::from_millis(50)).await;
                in_flight.0.fetch_sub(1, Ordering::SeqCst);
                let mut response = SqsBatchResponse::default();
                for record in &event.records {
                    if record.body.as_deref() == Some("msg-7") {
                        response.add_failure(record.message_id.clone().unwrap_or_default());
                    }
                }
                seen.lock().unwrap().extend(event.records);
                Ok(response)
            }
        }
    };
    let mut settings = EventSourceSettings::template(&queues.orders_url, &arn, "us-east-1");
    settings.maximum_concurrency = 3;
    let source = EventSource::spawn(sqs.clone(), settings, handler);
    let deadline = Instant::now() + Duration::from_secs(20);
    while source.stats().snapshot().records_deleted < 24 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let counts = source.stop().await;
    println!("{counts}");
    assert!(in_flight.1.load(Ordering::SeqCst) <= 3);

    // moto's server can hand one message to two concurrent receives (it
    // is not thread-safe there; SQS hides a received message). Then the
    // failed record may also arrive in a batch that deletes it. Judge the
    // settlement by what was delivered, and say when the emulator did it.
    let duplicates = counts.records_delivered.saturating_sub(25);
    if duplicates > 0 {
        println!("emulator delivered {duplicates} message(s) twice");
    }
    assert!(counts.records_failed >= 1);
    assert_eq!(
        counts.records_deleted + counts.records_failed,
        counts.records_delivered
    );
    assert!(counts.records_delivered >= 25);
    if duplicates == 0 {
        assert_eq!(counts.records_deleted, 24);
    }
    assert_eq!(counts.batch_errors, 0);
    assert!(counts.invocations >= 3, "batches of at most 10");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len() as u64, counts.records_delivered);
    let first = &seen[0];
    assert_eq!(first.event_source_arn.as_deref(), Some(arn.as_str()));
    assert_eq!(first.event_source.as_deref(), Some("aws:sqs"));
    assert_eq!(
        first
            .attributes
            .get("ApproximateReceiveCount")
            .map(String::as_str),
        Some("1")
    );
    assert!(first.attributes.contains_key("SentTimestamp"));
    assert!(first.attributes.contains_key("SenderId"));
    assert!(
        first
            .attributes
            .contains_key("ApproximateFirstReceiveTimestamp")
    );

    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&queues.orders_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap_or_default();
    let count = |name| {
        attrs
            .get(&name)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    };
    assert_eq!(count(QueueAttributeName::ApproximateNumberOfMessages), 0);
    // The failed record waits out its visibility timeout, untouched.
    assert_eq!(
        count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        1
    );
    for url in [&queues.orders_url, &queues.dlq_url] {
        sqs.delete_queue().queue_url(url).send().await.unwrap();
    }
}

#[tokio::test]
async fn emulator_long_poll_outlasts_a_short_client_timeout() {
    // The purchase path's clients time out within a second; a long poll
    // through such a client must still end as an empty receive.
    let sdk = seckill_shared::adapters::aws::sdk_config(
        seckill_shared::adapters::aws::Caller::Tool,
        Duration::from_millis(800),
    )
    .await;
    let sqs = seckill_shared::adapters::aws::sqs(&sdk);
    let name = format!("esm-poll-{}", seckill_shared::clock::now_ms());
    let url = sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let settings = EventSourceSettings::template(&url, ARN, "us-east-1");
    let started = Instant::now();
    let got = receive(&sqs, &settings, 10, 2).await;
    assert_eq!(got.map(|m| m.len()), Ok(0));
    assert!(started.elapsed() >= Duration::from_secs(1));
    sqs.delete_queue().queue_url(&url).send().await.unwrap();
}

#[tokio::test]
async fn emulator_whole_batch_error_deletes_nothing() {
    let (sqs, queues, arn) = queue_with_messages("esm-err", 5).await;
    let mut settings = EventSourceSettings::template(&queues.orders_url, &arn, "us-east-1");
    settings.maximum_concurrency = 1;
    settings.batching_window = Duration::ZERO;
    let source = EventSource::spawn(sqs.clone(), settings, |_e: SqsEvent| async {
        Err::<SqsBatchResponse, _>("downstream unavailable".to_owned())
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while source.stats().snapshot().records_delivered < 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let counts = source.stop().await;
    println!("{counts}");
    assert_eq!(counts.records_delivered, 5);
    assert_eq!(counts.records_deleted, 0);
    assert!(counts.batch_errors >= 1);
    for url in [&queues.orders_url, &queues.dlq_url] {
        sqs.delete_queue().queue_url(url).send().await.unwrap();
    }
}

#[tokio::test]
async fn emulator_stop_mid_window_hands_records_back() {
    let sdk = seckill_shared::adapters::aws::sdk_config(
        seckill_shared::adapters::aws::Caller::Tool,
        Duration::from_secs(5),
    )
    .await;
    let sqs = seckill_shared::adapters::aws::sqs(&sdk);
    let suffix = seckill_shared::clock::now_ms();
    let queues = crate::emulator::ensure_queues(
        &sqs,
        &format!("esm-win-{suffix}"),
        &format!("esm-win-dlq-{suffix}"),
        crate::emulator::VISIBILITY_TIMEOUT_SECS,
    )
    .await
    .unwrap();
    sqs.send_message()
        .queue_url(&queues.orders_url)
        .message_body("lonely")
        .send()
        .await
        .unwrap();
    let mut settings = EventSourceSettings::template(&queues.orders_url, ARN, "us-east-1");
    settings.maximum_concurrency = 1;
    // A long window: the one record waits in a partial batch.
    settings.batching_window = Duration::from_secs(30);
    let source = EventSource::spawn(sqs.clone(), settings, |_e: SqsEvent| async {
        Ok(SqsBatchResponse::default())
    });
    let in_flight = || async {
        sqs.get_queue_attributes()
            .queue_url(&queues.orders_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap()
            .attributes
            .and_then(|a| {
                a.get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                    .cloned()
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while in_flight().await != "1" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // An absence over a span cannot be polled for: for 2.5 s (a few empty
    // receives; the window is 30 s) the record must stay undelivered.
    let watch_until = Instant::now() + Duration::from_millis(2_500);
    while Instant::now() < watch_until {
        assert_eq!(source.stats().snapshot().invocations, 0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(source.stats().snapshot().invocations, 0);
    let counts = source.stop().await;
    assert_eq!(counts.invocations, 0);
    let back = sqs
        .receive_message()
        .queue_url(&queues.orders_url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default();
    assert_eq!(back.len(), 1, "released at once, not after 60 s");
    for url in [&queues.orders_url, &queues.dlq_url] {
        sqs.delete_queue().queue_url(url).send().await.unwrap();
    }
}
