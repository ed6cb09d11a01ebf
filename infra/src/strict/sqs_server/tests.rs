use super::*;

fn server() -> SqsServer {
    SqsServer::new("127.0.0.1:4566")
}

fn queue_with_dlq(s: &SqsServer, max: u32, visibility: u32) -> (String, String) {
    let dlq = s
        .call_now("CreateQueue", &json!({"QueueName": "q-dlq"}), "t")
        .unwrap();
    let dlq_url = dlq["QueueUrl"].as_str().unwrap().to_owned();
    let arn = s
        .call_now(
            "GetQueueAttributes",
            &json!({"QueueUrl": dlq_url, "AttributeNames": ["QueueArn"]}),
            "t",
        )
        .unwrap()["Attributes"]["QueueArn"]
        .as_str()
        .unwrap()
        .to_owned();
    let policy = json!({"deadLetterTargetArn": arn, "maxReceiveCount": max}).to_string();
    let q = s
        .call_now(
            "CreateQueue",
            &json!({"QueueName": "q", "Attributes": {"VisibilityTimeout": visibility.to_string(), "RedrivePolicy": policy}}),
            "t",
        )
        .unwrap();
    (q["QueueUrl"].as_str().unwrap().to_owned(), dlq_url)
}

fn counts(s: &SqsServer, url: &str) -> (String, String) {
    let a = s
        .call_now(
            "GetQueueAttributes",
            &json!({"QueueUrl": url, "AttributeNames": ["All"]}),
            "t",
        )
        .unwrap();
    (
        a["Attributes"]["ApproximateNumberOfMessages"]
            .as_str()
            .unwrap()
            .to_owned(),
        a["Attributes"]["ApproximateNumberOfMessagesNotVisible"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_message_received_and_not_deleted_comes_back_then_goes_to_the_dlq() {
    let s = server();
    let (url, dlq) = queue_with_dlq(&s, 2, 10);
    let sent = s
        .call_now(
            "SendMessage",
            &json!({"QueueUrl": url, "MessageBody": "order o1"}),
            "AKID",
        )
        .unwrap();
    assert_eq!(sent["MD5OfMessageBody"], md5_hex("order o1"));
    let receive = json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "AttributeNames": ["All"]});
    for count in 1..=2 {
        let got = s.call("ReceiveMessage", &receive, "t").await.unwrap();
        let m = &got["Messages"][0];
        assert_eq!(m["Body"], "order o1");
        assert_eq!(
            m["Attributes"]["ApproximateReceiveCount"],
            count.to_string()
        );
        assert_eq!(m["Attributes"]["SenderId"], "AKID");
        assert_eq!(counts(&s, &url), ("0".into(), "1".into()));
        // In flight: not received again until its visibility ends.
        assert_eq!(
            s.call("ReceiveMessage", &receive, "t").await.unwrap(),
            json!({})
        );
        tokio::time::advance(Duration::from_secs(10)).await;
    }
    // Received twice (maxReceiveCount): the third receive moves it.
    assert_eq!(
        s.call("ReceiveMessage", &receive, "t").await.unwrap(),
        json!({})
    );
    assert_eq!(counts(&s, &url), ("0".into(), "0".into()));
    assert_eq!(counts(&s, &dlq), ("1".into(), "0".into()));
    let moved = s
        .call("ReceiveMessage", &json!({"QueueUrl": dlq}), "t")
        .await
        .unwrap();
    assert_eq!(moved["Messages"][0]["MessageId"], sent["MessageId"]);
}

#[tokio::test(start_paused = true)]
async fn a_long_poll_answers_when_a_message_arrives_and_any_receives_handle_deletes() {
    let s = std::sync::Arc::new(server());
    let (url, _) = queue_with_dlq(&s, 5, 30);
    let poll = {
        let (s, url) = (s.clone(), url.clone());
        tokio::spawn(async move {
            s.call(
                "ReceiveMessage",
                &json!({"QueueUrl": url, "WaitTimeSeconds": 20}),
                "t",
            )
            .await
        })
    };
    tokio::time::advance(Duration::from_secs(3)).await;
    s.call_now(
        "SendMessage",
        &json!({"QueueUrl": url, "MessageBody": "m"}),
        "t",
    )
    .unwrap();
    let got = poll.await.unwrap().unwrap();
    let first = got["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_owned();
    // Visible again at once, then received with a new handle.
    s.call_now(
        "ChangeMessageVisibility",
        &json!({"QueueUrl": url, "ReceiptHandle": first, "VisibilityTimeout": 0}),
        "t",
    )
    .unwrap();
    let again = s
        .call("ReceiveMessage", &json!({"QueueUrl": url}), "t")
        .await
        .unwrap();
    let second = again["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(first, second);
    // The earlier receive's handle deletes it too (a handler slower
    // than its visibility timeout); the latest one is then a no-op.
    s.call_now(
        "DeleteMessage",
        &json!({"QueueUrl": url, "ReceiptHandle": first}),
        "t",
    )
    .unwrap();
    assert_eq!(counts(&s, &url), ("0".into(), "0".into()));
    s.call_now(
        "DeleteMessage",
        &json!({"QueueUrl": url, "ReceiptHandle": second}),
        "t",
    )
    .unwrap();
    let refused = s
        .call(
            "ReceiveMessage",
            &json!({"QueueUrl": url, "MaxNumberOfMessages": 11}),
            "t",
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind, "InvalidParameterValueException");
    // A long poll with nothing to come ends at its wait, empty.
    let wait = json!({"QueueUrl": url, "WaitTimeSeconds": 1});
    assert_eq!(
        s.call("ReceiveMessage", &wait, "t").await.unwrap(),
        json!({})
    );
}

#[test]
fn batches_fail_entry_by_entry_and_bad_calls_are_refused() {
    let s = server();
    let (url, _) = queue_with_dlq(&s, 5, 30);
    let big = "x".repeat(MAX_MESSAGE_BYTES + 1);
    let sent = s
        .call_now(
            "SendMessageBatch",
            &json!({"QueueUrl": url, "Entries": [{"Id": "a", "MessageBody": "ok"}, {"Id": "b", "MessageBody": ""}]}),
            "t",
        )
        .unwrap();
    assert_eq!(sent["Successful"][0]["Id"], "a");
    assert_eq!(sent["Failed"][0]["Id"], "b");
    for (operation, body, kind) in [
        (
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": big}),
            "InvalidParameterValueException",
        ),
        (
            "SendMessage",
            json!({"QueueUrl": "http://h/1/nope", "MessageBody": "m"}),
            "QueueDoesNotExist",
        ),
        (
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": []}),
            "EmptyBatchRequest",
        ),
        (
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": [{"Id": "a", "MessageBody": "1"}, {"Id": "a", "MessageBody": "2"}]}),
            "BatchEntryIdsNotDistinct",
        ),
        (
            "DeleteMessage",
            json!({"QueueUrl": url, "ReceiptHandle": "junk"}),
            "ReceiptHandleIsInvalid",
        ),
        ("TagQueue", json!({"QueueUrl": url}), "UnsupportedOperation"),
    ] {
        let refused = s.call_now(operation, &body, "t").unwrap_err();
        assert_eq!((refused.status, refused.kind), (400, kind), "{operation}");
    }
    // One message only: the refused ones changed nothing.
    assert_eq!(counts(&s, &url), ("1".into(), "0".into()));
}
