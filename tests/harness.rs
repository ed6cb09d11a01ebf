//! The harness a hung test would otherwise hold CI in.
//!
//! - The suite's own HTTP client (`seckill_tests::http_request`) against a
//!   server shape it meets: one that answers before it has read the
//!   request's body, then reads what is left of the request to its end
//!   before it closes. Werkzeug, which `sam local start-api` serves with,
//!   does this (its `run_wsgi` drains the socket until end of file after
//!   every answer): a route the local gateway refuses without reading the
//!   body, such as a missing token, answers so.
//! - `make test`'s time limit on a phase (`infra/stack.sh`'s `bounded`):
//!   the command and what it started are killed at the limit, with a line
//!   that says so.

use seckill_tests::http_request;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn an_answer_given_before_the_body_is_read_is_taken_without_waiting_for_the_close() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let refusal = br#"{"message":"Unauthorized"}"#;
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        // The head, a byte at a time: the body stays on the socket.
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.unwrap());
        }
        let answer = format!(
            "HTTP/1.1 401 UNAUTHORIZED\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            refusal.len()
        );
        stream.write_all(answer.as_bytes()).await.unwrap();
        stream.write_all(refusal).await.unwrap();
        stream.flush().await.unwrap();
        // As werkzeug: the rest of the request, read to its end, then the close.
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        String::from_utf8(rest).unwrap()
    });
    let body = r#"{"totalStock": 5}"#;
    // A loopback exchange of a few hundred bytes: a minute is "hung", never "slow".
    let answer = tokio::time::timeout(
        Duration::from_secs(60),
        http_request(
            addr,
            "PUT",
            "/admin/sales/s-1",
            &[("content-type", "application/json")],
            body,
        ),
    )
    .await
    .expect("the client waited for a close the server makes only once the client stops sending");
    let (status, headers, answer) = answer;
    assert_eq!((status, answer), (401, json!({"message": "Unauthorized"})));
    assert_eq!(headers["content-length"], refusal.len().to_string());
    // The server got the whole request body, then the client's close.
    assert_eq!(server.await.unwrap(), body);
}

#[tokio::test]
async fn a_phase_over_its_time_limit_is_killed_with_what_it_started_and_says_so() {
    let pid_file = std::env::temp_dir().join(format!("{}.pid", seckill_tests::unique("bounded")));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // A test binary that hangs, with a child of its own (as a test's
    // `sam local start-api`): a shell that starts a long sleep and waits.
    let script = format!(
        "sleep 600 >/dev/null 2>&1 & echo $! > {}; wait",
        pid_file.display()
    );
    let out = Command::new("bash")
        .arg(root.join("infra/stack.sh"))
        .args(["bounded", "2", "bash", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(
        stderr.contains("over its 2 s limit, killed"),
        "no line says why: {stderr}"
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let _ = std::fs::remove_file(&pid_file);
    let proc = Path::new("/proc").join(pid.trim());
    // The kill is sent at the limit; the child is gone once it is reaped.
    let gone = seckill_tests::eventually(Duration::from_secs(30), || {
        let proc = proc.clone();
        async move {
            std::fs::read_to_string(proc.join("stat"))
                .map(|stat| stat.split_whitespace().nth(2) == Some("Z"))
                .unwrap_or(true)
        }
    })
    .await;
    assert!(
        gone,
        "the phase's own child outlived the limit: {}",
        proc.display()
    );
}
