//! The local stack in-process ([`LocalStack`]), as `seckill-local up`
//! runs it, and its HTTP clients: [`http_request`] (one request, bounded
//! by [`HTTP_ANSWER_DEADLINE`]) and [`StackClient`] (an operator's and
//! buyers' tokens).

use crate::app::{GENEROUS_LIMITS, TEST_VISIBILITY_SECS, env, unique};
use seckill_infra::emulator;
use seckill_infra::event_source::{EventSource, EventSourceSettings};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::config::Config;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The local stack of `seckill-local up`, started in-process on a free port
/// with its own queue, tables and demo sale, the order-writer polling its
/// queue like Lambda's event source mapping.
pub struct LocalStack {
    pub addr: std::net::SocketAddr,
    pub demo_sale: String,
    pub config: Config,
    pub queues: emulator::Queues,
    pub writer: Arc<order_writer::LiveWriter>,
    pub admin: Arc<admin_api::Admin>,
    /// The scheduled functions, each wired as its own Lambda.
    pub scheduled: Arc<seckill_infra::local::Scheduled>,
    /// The gateway being served (its token settings, its per-route counts).
    pub gateway: Arc<seckill_infra::gateway::Gateway>,
    pub source: Option<seckill_infra::event_source::EventSource>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Writes the purchase answers' tally to Redis every second, as `up` does.
    outcomes: tokio::task::JoinHandle<()>,
}

impl LocalStack {
    pub async fn start() -> LocalStack {
        Self::start_with(TEST_VISIBILITY_SECS, None).await
    }

    /// With the queue's visibility timeout and the event source's number of
    /// pollers chosen by the test (`None`: the template's).
    pub async fn start_with(visibility_secs: u32, pollers: Option<usize>) -> LocalStack {
        Self::start_full(visibility_secs, pollers, None, None).await
    }

    /// With pages that sign in through the hosted UI at `login_url`.
    pub async fn start_signing_in_at(login_url: &str) -> LocalStack {
        Self::start_full(TEST_VISIBILITY_SECS, None, Some(login_url.to_owned()), None).await
    }

    /// As [`start_with`](Self::start_with), on the Redis at `redis_url`
    /// instead of `REDIS_URL` (a cluster's `?cluster=true` URL).
    pub async fn start_on_redis(
        redis_url: &str,
        visibility_secs: u32,
        pollers: Option<usize>,
    ) -> LocalStack {
        Self::start_full(visibility_secs, pollers, None, Some(redis_url.to_owned())).await
    }

    async fn start_full(
        visibility_secs: u32,
        pollers: Option<usize>,
        login_url: Option<String>,
        redis_url: Option<String>,
    ) -> LocalStack {
        // Logs only when asked for (`RUST_LOG=warn make nemesis`).
        if std::env::var_os("RUST_LOG").is_some() {
            seckill_shared::observe::telemetry::init();
        }
        let name = unique("l");
        let settings = seckill_infra::local::LocalSettings {
            listen: "127.0.0.1:0".into(),
            redis_url: redis_url.unwrap_or_else(|| env("REDIS_URL")),
            queue_name: name.clone(),
            dlq_name: format!("{name}-dlq"),
            sales_table: format!("{name}-sales"),
            orders_table: format!("{name}-orders"),
            demo_sale: format!("{name}-demo"),
            visibility_timeout_secs: visibility_secs,
            // Every request of these tests comes from 127.0.0.1.
            rate_limits: Some(GENEROUS_LIMITS),
            login_url,
        };
        let stack = seckill_infra::local::prepare(&settings).await.unwrap();
        let source = match pollers {
            None => stack.start_order_writer(),
            Some(n) => {
                let mut es = EventSourceSettings::template(
                    &stack.queues.orders_url,
                    &stack.queue_arn,
                    "us-east-1",
                );
                es.maximum_concurrency = n;
                EventSource::spawn(
                    stack.sqs.clone(),
                    es,
                    seckill_infra::local::writer_handler(stack.writer.clone()),
                )
            }
        };
        let addr = stack.listener.local_addr().unwrap();
        let outcomes = stack.start_outcome_flusher();
        let scheduled = stack.scheduled.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let gateway = stack.gateway.clone();
        tokio::spawn(seckill_infra::gateway::serve(
            stack.listener,
            stack.gateway,
            async {
                let _ = stopped.await;
            },
        ));
        LocalStack {
            addr,
            demo_sale: settings.demo_sale,
            config: stack.config,
            queues: stack.queues,
            writer: stack.writer,
            admin: stack.admin,
            scheduled,
            gateway,
            source: Some(source),
            stop: Some(stop),
            outcomes,
        }
    }

    /// The invariant checker over this stack's Redis, tables, queue and DLQ.
    pub async fn checker(&self) -> seckill_shared::wire::LiveChecker {
        use seckill_shared::adapters::dynamo::orders::DynamoOrders;
        use seckill_shared::adapters::redis::RedisStock;
        use seckill_shared::adapters::sqs::SqsInspector;
        let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
        let db = aws::dynamodb(&sdk);
        seckill_shared::app::invariants::InvariantChecker::new(
            RedisStock::connect_lazy(&self.config.redis_url, Duration::from_secs(2)).unwrap(),
            DynamoCatalog::new(db.clone(), &self.config.sales_table),
            DynamoOrders::new(db, &self.config.orders_table, &self.config.sales_table),
            SqsInspector::new(
                aws::sqs(&sdk),
                self.queues.orders_url.clone(),
                Some(self.queues.dlq_url.clone()),
            ),
        )
    }

    /// One HTTP/1.1 request over a fresh connection; returns status and JSON body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, serde_json::Value) {
        let (status, _, body) = self.request_with_headers(method, path, headers, body).await;
        (status, body)
    }

    /// [`Self::request`] with the response's headers (names lower-cased).
    pub async fn request_with_headers(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, HashMap<String, String>, serde_json::Value) {
        http_request(self.addr, method, path, headers, body).await
    }
}

impl Drop for LocalStack {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.outcomes.abort();
    }
}

/// How long [`http_request`] waits for a whole answer: far past any
/// answer of the local stack or a Lambda container's cold start, so a
/// request that reaches it is hung, not slow.
pub const HTTP_ANSWER_DEADLINE: Duration = Duration::from_secs(180);

/// One HTTP/1.1 request to `addr` over a fresh connection: status, headers
/// (names lower-cased) and JSON body (`Null` if it is not JSON).
///
/// The request goes out in one write, and an answer with a
/// `content-length` is complete when that many bytes have come: a server
/// may answer before it reads the body and close only once the client has
/// stopped sending (werkzeug, under `sam local start-api`, does both), so
/// waiting for its close would wait for ever. Panics when no whole answer
/// comes within [`HTTP_ANSWER_DEADLINE`].
pub async fn http_request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, HashMap<String, String>, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        // On the heap: a buffer in the future would grow every future that
        // awaits this one (a test thread's stack overflowed on it).
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .filter_map(|line| line.split_once(':'))
                    .find(|(name, _)| name.trim() == "content-length")
                    .and_then(|(_, value)| value.trim().parse::<usize>().ok());
                if length.is_some_and(|length| raw.len() >= end + 4 + length) {
                    break;
                }
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
        }
        Ok::<_, std::io::Error>(raw)
    };
    let raw = match tokio::time::timeout(HTTP_ANSWER_DEADLINE, exchange).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(e)) => panic!("{method} {path} to {addr}: {e}"),
        Err(_) => {
            panic!("{method} {path} to {addr}: no whole answer within {HTTP_ANSWER_DEADLINE:?}")
        }
    };
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (
        status,
        headers,
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    )
}

/// A client of a local stack's HTTP API with local tokens: the operator
/// `ops-1` (admin scope) and any buyer.
pub struct StackClient<'a> {
    pub stack: &'a LocalStack,
    pub tokens: seckill_infra::token::TokenSettings,
    admin: String,
}

impl<'a> StackClient<'a> {
    pub fn new(stack: &'a LocalStack) -> Self {
        let tokens = seckill_infra::token::TokenSettings::from_env();
        let admin = format!("Bearer {}", tokens.mint("ops-1", true, 600).unwrap());
        StackClient {
            stack,
            tokens,
            admin,
        }
    }

    /// `Authorization` for `user`.
    pub fn buyer(&self, user: &str) -> String {
        format!("Bearer {}", self.tokens.mint(user, false, 600).unwrap())
    }

    pub async fn admin(&self, method: &str, path: &str, body: &str) -> (u16, serde_json::Value) {
        self.stack
            .request(method, path, &[("authorization", &self.admin)], body)
            .await
    }

    pub async fn put_sale(&self, id: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        self.admin("PUT", &format!("/admin/sales/{id}"), &body.to_string())
            .await
    }

    /// A request with `user`'s token and a JSON content type.
    pub async fn as_buyer(
        &self,
        method: &str,
        path: &str,
        user: &str,
        body: &str,
    ) -> (u16, serde_json::Value) {
        self.stack
            .request(
                method,
                path,
                &[
                    ("authorization", &self.buyer(user)),
                    ("content-type", "application/json"),
                ],
                body,
            )
            .await
    }

    /// One unit of `sale` for `user`.
    pub async fn buy(&self, sale: &str, user: &str) -> (u16, serde_json::Value) {
        self.as_buyer(
            "POST",
            &format!("/sales/{sale}/purchase"),
            user,
            r#"{"quantity": 1}"#,
        )
        .await
    }

    /// `GET /sales/{sale}/orders` as `user`.
    pub async fn my_orders(&self, sale: &str, user: &str) -> (u16, serde_json::Value) {
        self.as_buyer("GET", &format!("/sales/{sale}/orders"), user, "")
            .await
    }
}

/// `Authorization` for an admin token signed with a guessed key: what a
/// forger would send.
pub fn forged_admin_bearer(tokens: &seckill_infra::token::TokenSettings) -> String {
    let forger = seckill_infra::token::TokenSettings {
        secret: "guessed".into(),
        ..tokens.clone()
    };
    format!("Bearer {}", forger.mint("ops", true, 300).unwrap())
}
