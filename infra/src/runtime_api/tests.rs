//! The Runtime API driven by hand, and a stand-in function's cold start.

use super::cold_start::spread;
use super::*;
use std::io::{Read, Write};

/// A blocking one-shot HTTP/1.1 client (`Connection: close`): enough to
/// drive the server without depending on a client stack.
fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, HashMap<String, String>, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status.parse().unwrap(), headers, body.to_owned())
}

async fn call_async(
    addr: SocketAddr,
    method: &'static str,
    path: String,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
) -> (u16, HashMap<String, String>, String) {
    tokio::task::spawn_blocking(move || call(addr, method, &path, &headers, &body))
        .await
        .unwrap()
}

#[tokio::test]
async fn next_long_polls_then_response_round_trips() {
    let api = RuntimeApi::start("purchase", FUNCTION_TIMEOUT)
        .await
        .unwrap();
    let addr = api.addr();
    // The poll goes out before any event exists: it must wait, not fail.
    let poll = tokio::spawn(call_async(addr, "GET", NEXT.into(), vec![], String::new()));
    let polled = tokio::time::timeout(Duration::from_secs(5), async {
        while api.first_poll().is_none() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(polled.is_ok(), "the poll never arrived");
    assert!(!poll.is_finished(), "/next answered with nothing queued");

    let mut invocation = api.invoke(r#"{"hello":"world"}"#);
    let (status, headers, body) = poll.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body, r#"{"hello":"world"}"#);
    let id = headers["lambda-runtime-aws-request-id"].clone();
    assert_eq!(id, invocation.request_id);
    let deadline: u128 = headers["lambda-runtime-deadline-ms"].parse().unwrap();
    assert!(deadline > epoch_nanos() / 1_000_000);
    assert!(headers["lambda-runtime-invoked-function-arn"].ends_with(":function:purchase"));
    assert!(headers["lambda-runtime-trace-id"].starts_with("Root=1-"));
    assert_eq!(headers["content-type"], "application/json");

    let answer = r#"{"statusCode":202,"body":"{}"}"#;
    let (status, _, _) = call_async(
        addr,
        "POST",
        format!("{INVOCATION}{id}/response"),
        vec![("content-type", "application/json")],
        answer.into(),
    )
    .await;
    assert_eq!(status, 202);
    let outcome = invocation.answer().await.unwrap();
    assert!(!outcome.is_error());
    assert_eq!(outcome.http_status(), Some(202));
    assert!(outcome.delivered_at.unwrap() <= outcome.answered_at);

    // A second answer for the same id is refused.
    let (status, _, body) = call_async(
        addr,
        "POST",
        format!("{INVOCATION}{id}/response"),
        vec![],
        answer.into(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn invocation_and_init_errors_are_captured() {
    let mut api = RuntimeApi::start("purchase", FUNCTION_TIMEOUT)
        .await
        .unwrap();
    let addr = api.addr();
    let mut invocation = api.invoke("{}");
    let (_, headers, _) = call_async(addr, "GET", NEXT.into(), vec![], String::new()).await;
    let id = headers["lambda-runtime-aws-request-id"].clone();
    let (status, _, _) = call_async(
        addr,
        "POST",
        format!("{INVOCATION}{id}/error"),
        vec![(ERROR_TYPE, "unhandled")],
        r#"{"errorType":"boom","errorMessage":"it broke"}"#.into(),
    )
    .await;
    assert_eq!(status, 202);
    let outcome = invocation.answer().await.unwrap();
    assert_eq!(outcome.error_type.as_deref(), Some("unhandled"));
    assert!(String::from_utf8_lossy(&outcome.body).contains("it broke"));

    let (status, _, _) = call_async(
        addr,
        "POST",
        INIT_ERROR.into(),
        vec![(ERROR_TYPE, "Runtime.InitError")],
        r#"{"errorType":"Config","errorMessage":"REDIS_URL is required"}"#.into(),
    )
    .await;
    assert_eq!(status, 202);
    let init = api.init_error().await.unwrap();
    assert_eq!(init.error_type, "Runtime.InitError");
    assert!(String::from_utf8_lossy(&init.body).contains("REDIS_URL"));

    let (status, _, _) = call_async(
        addr,
        "GET",
        "/2018-06-01/nope".into(),
        vec![],
        String::new(),
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn dropping_the_server_ends_a_waiting_poll() {
    let api = RuntimeApi::start("purchase", FUNCTION_TIMEOUT)
        .await
        .unwrap();
    let addr = api.addr();
    let poll = tokio::spawn(call_async(addr, "GET", NEXT.into(), vec![], String::new()));
    tokio::time::timeout(Duration::from_secs(5), async {
        while api.first_poll().is_none() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    drop(api);
    let (status, _, _) = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 500);
}

/// The whole measurement against a stand-in function: a shell script
/// speaking the protocol with curl (polls, answers, polls again).
#[tokio::test]
async fn measures_a_stand_in_function() {
    let dir = std::env::temp_dir().join(format!("seckill-rt-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("bootstrap");
    std::fs::write(
        &script,
        r#"#!/bin/sh
set -e
base="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime"
[ "$GREETING" = hi ] || { curl -sf -X POST -H 'Lambda-Runtime-Function-Error-Type: Runtime.InitError' -d '{"errorMessage":"no GREETING"}' "$base/init/error"; exit 1; }
id=$(curl -sf -D - -o /dev/null "$base/invocation/next" | tr -d '\r' | sed -n 's/^[Ll]ambda-[Rr]untime-[Aa]ws-[Rr]equest-[Ii]d: //p')
curl -sf -X POST -d '{"statusCode":410,"body":"{}"}' "$base/invocation/$id/response" > /dev/null
curl -sf "$base/invocation/next" > /dev/null
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let env = vec![("GREETING".to_owned(), "hi".to_owned())];
    let events = vec!["{}".to_owned(); 3];
    let measured = measure_cold_start(&script, &env, &events).await.unwrap();
    assert_eq!(measured.runs.len(), 3);
    assert_eq!(measured.statuses(), vec![(Some(410), 3)]);
    let answer = measured.to_first_answer().unwrap();
    assert!(answer.min <= answer.median);
    let init = measured.init().unwrap();
    assert!(init.min <= answer.min);
    assert!(measured.peak_rss_bytes().unwrap() > 0);
    assert!(measured.binary_bytes > 0);

    // Without the variable, the stand-in reports an init error.
    let err = measure_cold_start(&script, &[], &events[..1])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ColdStartError::InitFailed { error_type, .. } if error_type == "Runtime.InitError"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_purchase_function_env_is_all_its_loader_reads() {
    let lookup = |name: &str| match name {
        "REDIS_URL" => Some("redis://127.0.0.1:1".to_owned()),
        "ORDERS_QUEUE_URL" | "ORDERS_DLQ_URL" => Some("http://127.0.0.1:1/0/q".to_owned()),
        "SALES_TABLE" | "ORDERS_TABLE" => Some("t".to_owned()),
        "REDIS_AUTH_SECRET_ARN" => Some("x-redis".to_owned()),
        "GATE_SECRET_ARN" => Some("x-gate".to_owned()),
        "EDGE_SECRET_ARN" => Some("x-edge".to_owned()),
        _ => None,
    };
    let config = purchase::config(&lookup).unwrap();
    let env: HashMap<String, String> = function_env(&config).into_iter().collect();
    // What the measured binary's own loader reads, every name present.
    let read = crate::consistency::reads(purchase::config).unwrap();
    let missing: Vec<&String> = read.iter().filter(|n| !env.contains_key(*n)).collect();
    assert!(missing.is_empty(), "{missing:?}");
    let parsed = purchase::config(&|name| env.get(name).cloned()).unwrap();
    assert_eq!(parsed.secrets, config.secrets);
    assert_eq!(parsed.orders_table, "t");
}

#[test]
fn purchase_event_targets_the_sale_and_buyer() {
    let event: serde_json::Value =
        serde_json::from_str(&purchase_event("cs-1", "buyer-7", "key-7").unwrap()).unwrap();
    assert_eq!(event["rawPath"], "/sales/cs-1/purchase");
    assert_eq!(event["pathParameters"]["saleId"], "cs-1");
    assert_eq!(
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"],
        "buyer-7"
    );
    assert_eq!(event["headers"]["idempotency-key"], "key-7");
}

#[test]
fn median_of_even_and_odd_counts() {
    let ms = Duration::from_millis;
    let odd = spread(vec![ms(5), ms(1), ms(3)]).unwrap();
    assert_eq!((odd.min, odd.median), (ms(1), ms(3)));
    let even = spread(vec![ms(4), ms(1), ms(2), ms(8)]).unwrap();
    assert_eq!((even.min, even.median), (ms(1), ms(3)));
    assert!(spread(vec![]).is_none());
}
