//! The strict layer: an endpoint in front of the AWS emulator that answers
//! as AWS documents at its limits, where the emulator is kinder (or, for
//! concurrent transactions, unsound). `make run`, `make test`, `make chaos`
//! and `make bench` point `AWS_ENDPOINT_URL` at it; `SECKILL_STRICT=0`
//! points them at the emulator itself. Each knob is an environment variable
//! ([`StrictSettings::from_env`]); `docs/local.md` says what each is, what
//! AWS does and where AWS documents it.
//!
//! # Layout
//!
//! - [`dynamo`]: writes applied one at a time, transaction conflicts,
//!   partition throughput, item size.
//! - [`sqs`]: queue counts that lag, duplicate deliveries.
//! - [`sqs_server`]: SQS itself, served here (the emulator's is too slow
//!   to stand in for AWS's), unless `STRICT_SQS_NATIVE=0`.
//! - [`recording`]: the SQS calls served here, added to the emulator's
//!   recording of calls (the IAM test reads it).
//! - [`settings`]: the knobs, from the environment.
//! - here: the server and the forwarding.

pub mod dynamo;
mod recording;
mod settings;
pub mod sqs;
pub mod sqs_server;

pub use settings::{StrictError, StrictSettings};

use dynamo::{Conflicts, KeySchema, Kind, Verdict};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use recording::Recorder;
use serde_json::Value;
use sqs::Queues;
use sqs_server::SqsServer;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::RwLock;

/// What the layer has refused or changed, for tests and the bench.
#[derive(Debug, Default)]
pub struct Tally {
    pub conflicts: std::sync::atomic::AtomicU64,
    pub throttles: std::sync::atomic::AtomicU64,
    pub oversized: std::sync::atomic::AtomicU64,
    pub lagged_counts: std::sync::atomic::AtomicU64,
    pub duplicates: std::sync::atomic::AtomicU64,
    /// Transactions arrived and not answered yet.
    pub transactions_in_flight: std::sync::atomic::AtomicI64,
}

struct Layer {
    settings: StrictSettings,
    upstream: hyper::Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    /// Writes alone, reads together.
    /// Per table. moto copies the tables a transaction touches and puts the
    /// copies back if it is cancelled, and checks a conditional write's
    /// condition apart from applying it: a table's writes are applied one
    /// at a time, and its reads never beside a transaction (which could be
    /// undone under them); reads do not wait for single writes, which moto
    /// applies to one item at once. Tables apart from each other.
    gates: std::sync::Mutex<HashMap<String, Gate>>,
    schemas: RwLock<HashMap<String, KeySchema>>,
    conflicts: Arc<Conflicts>,
    queues: Queues,
    /// SQS served here (`None`: the emulator's, forwarded).
    sqs_server: Option<SqsServer>,
    recorder: Recorder,
    tally: Arc<Tally>,
    random: std::collections::hash_map::RandomState,
    draws: std::sync::atomic::AtomicU64,
}

/// A running layer: where it listens and what it has done.
pub struct Strict {
    pub addr: SocketAddr,
    pub tally: Arc<Tally>,
    layer: Arc<Layer>,
    task: tokio::task::JoinHandle<()>,
}

impl Strict {
    /// `http://addr`, for `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The visible, in-flight and delayed messages of the queue at `url`
    /// as they are now (what `GetQueueAttributes` answers lags behind);
    /// `None` when SQS is the emulator's or there is no such queue.
    pub fn exact_queue_counts(&self, url: &str) -> Option<(usize, usize, usize)> {
        self.layer.sqs_server.as_ref()?.exact_counts(url)
    }
}

impl Drop for Strict {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the layer on `listen` in front of `upstream` (the emulator's URL).
pub async fn start(
    listen: &str,
    upstream: &str,
    settings: StrictSettings,
) -> Result<Strict, StrictError> {
    let upstream: hyper::Uri = upstream
        .trim_end_matches('/')
        .parse()
        .map_err(|_| StrictError::Upstream(upstream.to_owned()))?;
    if upstream.scheme_str() != Some("http") || upstream.authority().is_none() {
        return Err(StrictError::Upstream(upstream.to_string()));
    }
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| StrictError::Listen {
            addr: listen.to_owned(),
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| StrictError::Listen {
            addr: listen.to_owned(),
            source,
        })?;
    let tally = Arc::new(Tally::default());
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let sqs_server = settings
        .sqs
        .native
        .then(|| SqsServer::new(addr.to_string()));
    let recorder = Recorder::new(settings.record_file.clone());
    let layer = Arc::new(Layer {
        sqs_server,
        recorder,
        settings,
        upstream,
        client: Client::builder(TokioExecutor::new()).build(connector),
        gates: std::sync::Mutex::new(HashMap::new()),
        schemas: RwLock::new(HashMap::new()),
        conflicts: Arc::new(Conflicts::default()),
        queues: Queues::default(),
        tally: tally.clone(),
        random: std::collections::hash_map::RandomState::new(),
        draws: std::sync::atomic::AtomicU64::new(0),
    });
    let task = tokio::spawn(serve(listener, layer.clone()));
    Ok(Strict {
        addr,
        tally,
        layer,
        task,
    })
}

async fn serve(listener: TcpListener, layer: Arc<Layer>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let layer = layer.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<Incoming>| {
                let layer = layer.clone();
                // A DynamoDB request runs to its end in a task of its own,
                // even if its client leaves first: a write keeps its
                // table's lock until the emulator has answered it (dropped
                // with the connection, the lock went while the emulator was
                // still applying the write, and the next write ran beside
                // it). Others end with their client: a long poll whose
                // caller left must not take messages nobody will see.
                let dynamo = req
                    .headers()
                    .get("x-amz-target")
                    .is_some_and(|t| t.as_bytes().starts_with(b"DynamoDB_"));
                let handling = if dynamo {
                    let layer = layer.clone();
                    Handling::Detached(tokio::spawn(async move { layer.handle(req).await }))
                } else {
                    Handling::Inline(Box::new(req))
                };
                async move {
                    Ok::<_, Infallible>(match handling {
                        Handling::Detached(task) => match task.await {
                            Ok(response) => response,
                            Err(err) => bad_gateway(&err.to_string()),
                        },
                        Handling::Inline(req) => layer.handle(*req).await,
                    })
                }
            });
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%err, "strict: connection ended with an error");
            }
        });
    }
}

type Response = hyper::Response<Full<Bytes>>;

/// Where a request is handled: in a task of its own, to its end, or in the
/// connection's, ending with it.
enum Handling {
    Detached(tokio::task::JoinHandle<Response>),
    Inline(Box<hyper::Request<Incoming>>),
}

/// A table's two locks: one write at a time, and transactions apart from
/// reads.
#[derive(Default, Clone)]
struct Gate {
    writes: Arc<tokio::sync::Mutex<()>>,
    transaction: Arc<RwLock<()>>,
}

/// Held while a request is applied; dropped, the table is free again
/// (never read: holding it is the point).
#[allow(dead_code)]
enum TableGuard {
    Read(tokio::sync::OwnedRwLockReadGuard<()>),
    Writes(tokio::sync::OwnedMutexGuard<()>),
    Transaction(tokio::sync::OwnedRwLockWriteGuard<()>),
}

/// A request as read whole.
struct Whole {
    parts: hyper::http::request::Parts,
    body: Bytes,
}

fn json_response(status: u16, body: &Value) -> Response {
    let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    if let Some(kind) = body["__type"].as_str()
        && let Ok(value) = HeaderValue::from_str(kind)
    {
        response
            .headers_mut()
            .insert(HeaderName::from_static("x-amzn-errortype"), value);
    }
    response
}

/// An SQS error as SQS answers it over its JSON protocol, with the
/// query-compatible code the SDKs read.
fn fault_response(fault: &sqs_server::Fault) -> Response {
    let mut response = json_response(fault.status, &fault.body());
    if let Ok(value) = HeaderValue::from_str(&format!("{};Sender", fault.query_code)) {
        response
            .headers_mut()
            .insert(HeaderName::from_static("x-amzn-query-error"), value);
    }
    response
}

/// The access key id a signed request names (`Credential=AKID/...`).
fn access_key(headers: &hyper::HeaderMap) -> Option<&str> {
    let auth = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    auth.split("Credential=").nth(1)?.split('/').next()
}

fn bad_gateway(why: &str) -> Response {
    let mut response = hyper::Response::new(Full::new(Bytes::from(format!(
        "strict layer: the emulator did not answer: {why}"
    ))));
    *response.status_mut() = hyper::StatusCode::BAD_GATEWAY;
    response
}

impl Layer {
    async fn handle(&self, req: hyper::Request<Incoming>) -> Response {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => return bad_gateway(&err.to_string()),
        };
        let whole = Whole { parts, body };
        let target = whole
            .parts
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if let Some(operation) = target.strip_prefix("DynamoDB_20120810.") {
            self.dynamo(operation, whole).await
        } else if let Some(operation) = target.strip_prefix("AmazonSQS.") {
            self.sqs(operation, whole).await
        } else if whole.parts.uri.path().starts_with("/moto-api/recorder/") {
            self.recorder_call(whole).await
        } else {
            self.forward(&whole.parts, whole.body.clone()).await
        }
    }

    /// The emulator's recorder, with the SQS calls served here: started,
    /// stopped and reset together; its download has them too.
    async fn recorder_call(&self, whole: Whole) -> Response {
        let action = whole
            .parts
            .uri
            .path()
            .trim_start_matches("/moto-api/recorder/")
            .to_owned();
        match self.send(&whole.parts, whole.body).await {
            Ok((parts, body)) => {
                let body = if parts.status.is_success() {
                    self.recorder.apply(&action, body)
                } else {
                    body
                };
                hyper::Response::from_parts(parts, Full::new(body))
            }
            Err(why) => bad_gateway(&why),
        }
    }

    /// An SQS call answered by the queues served here, or else by the
    /// emulator.
    async fn sqs_send(
        &self,
        operation: &str,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Result<(hyper::http::response::Parts, Bytes), String> {
        let Some(server) = &self.sqs_server else {
            return self.send(parts, body).await;
        };
        self.recorder.record(parts, &body);
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let sender = access_key(&parts.headers).unwrap_or("AIDAEXAMPLE");
        let response = match server.call(operation, &request, sender).await {
            Ok(answer) => json_response(200, &answer),
            Err(fault) => fault_response(&fault),
        };
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((parts, body))
    }

    async fn sqs_forward(
        &self,
        operation: &str,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Response {
        match self.sqs_send(operation, parts, body).await {
            Ok((parts, body)) => hyper::Response::from_parts(parts, Full::new(body)),
            Err(why) => bad_gateway(&why),
        }
    }

    async fn forward(&self, parts: &hyper::http::request::Parts, body: Bytes) -> Response {
        match self.send(parts, body).await {
            Ok((parts, body)) => hyper::Response::from_parts(parts, Full::new(body)),
            Err(why) => bad_gateway(&why),
        }
    }

    /// The request to the emulator, its answer read whole.
    async fn send(
        &self,
        parts: &hyper::http::request::Parts,
        body: Bytes,
    ) -> Result<(hyper::http::response::Parts, Bytes), String> {
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", hyper::http::uri::PathAndQuery::as_str);
        let uri = format!("{}{path}", self.upstream.to_string().trim_end_matches('/'));
        let mut request = hyper::Request::builder()
            .method(parts.method.clone())
            .uri(uri)
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        for (name, value) in &parts.headers {
            if name != hyper::header::HOST && name != hyper::header::CONTENT_LENGTH {
                request.headers_mut().append(name.clone(), value.clone());
            }
        }
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| e.to_string())?;
        let (mut parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        for hop in [
            hyper::header::TRANSFER_ENCODING,
            hyper::header::CONNECTION,
            hyper::header::CONTENT_LENGTH,
        ] {
            parts.headers.remove(hop);
        }
        Ok((parts, body))
    }

    /// The key schemas of `tables`, asked of the emulator once per table
    /// (with the layer's own user agent: the IAM test counts only the
    /// functions' calls).
    async fn learn_schemas(&self, parts: &hyper::http::request::Parts, tables: &[String]) {
        let missing: Vec<&String> = {
            let known = self.schemas.read().await;
            tables.iter().filter(|t| !known.contains_key(*t)).collect()
        };
        for table in missing {
            let mut ask = parts.clone();
            ask.headers.remove("x-amz-user-agent");
            ask.headers.insert(
                hyper::header::USER_AGENT,
                HeaderValue::from_static("seckill-strict"),
            );
            ask.headers.insert(
                "x-amz-target",
                HeaderValue::from_static("DynamoDB_20120810.DescribeTable"),
            );
            let body = serde_json::json!({"TableName": table}).to_string();
            let Ok((status, answer)) = self.send(&ask, Bytes::from(body)).await else {
                continue;
            };
            if !status.status.is_success() {
                continue;
            }
            let Ok(answer) = serde_json::from_slice::<Value>(&answer) else {
                continue;
            };
            let schema = answer["Table"]["KeySchema"].as_array().map(|keys| {
                let mut keys = keys.clone();
                // The hash key first.
                keys.sort_by_key(|k| k["KeyType"].as_str() != Some("HASH"));
                keys.iter()
                    .filter_map(|k| k["AttributeName"].as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            });
            if let Some(schema) = schema.filter(|s| !s.is_empty()) {
                self.schemas.write().await.insert(table.clone(), schema);
            }
        }
    }

    /// The gates of `tables`, taken in name order (so two requests naming
    /// the same tables never wait for each other crosswise).
    async fn lock_tables(&self, tables: &[String], kind: Kind) -> Vec<TableGuard> {
        let gates: Vec<Gate> = {
            let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
            let mut names = tables.to_vec();
            names.sort();
            names.dedup();
            names
                .iter()
                .map(|t| gates.entry(t.clone()).or_default().clone())
                .collect()
        };
        // Always the writes' locks before the transactions', each in name
        // order: no two requests can wait for each other crosswise.
        let mut guards = Vec::with_capacity(gates.len() * 2);
        match kind {
            Kind::Read => {
                for gate in &gates {
                    guards.push(TableGuard::Read(
                        gate.transaction.clone().read_owned().await,
                    ));
                }
            }
            Kind::Write => {
                for gate in &gates {
                    guards.push(TableGuard::Writes(gate.writes.clone().lock_owned().await));
                }
            }
            Kind::Transaction => {
                for gate in &gates {
                    guards.push(TableGuard::Writes(gate.writes.clone().lock_owned().await));
                }
                for gate in &gates {
                    guards.push(TableGuard::Transaction(
                        gate.transaction.clone().write_owned().await,
                    ));
                }
            }
        }
        guards
    }

    async fn dynamo(&self, operation: &str, whole: Whole) -> Response {
        if dynamo::kind(operation) == Kind::Read {
            let body: Value = serde_json::from_slice(&whole.body).unwrap_or(Value::Null);
            let _read = self
                .lock_tables(&dynamo::read_tables(&body), Kind::Read)
                .await;
            return self.forward(&whole.parts, whole.body).await;
        }
        if matches!(operation, "DeleteTable" | "UpdateTable" | "CreateTable") {
            self.schemas.write().await.clear();
        }
        let body: Value = serde_json::from_slice(&whole.body).unwrap_or(Value::Null);
        let tables = dynamo::tables(operation, &body);
        self.learn_schemas(&whole.parts, &tables).await;
        let touches = {
            let schemas = self.schemas.read().await;
            dynamo::touches(operation, &body, &*schemas)
        };
        let (held, token) = match touches {
            Some(touches) => {
                match self.conflicts.check(
                    operation,
                    &touches,
                    &self.settings.dynamo,
                    Instant::now(),
                ) {
                    Verdict::Go(held, token) => (held, token),
                    Verdict::Refuse(status, answer) => {
                        let counter = match answer["__type"].as_str().unwrap_or_default() {
                            t if t.contains("Validation") => &self.tally.oversized,
                            t if t.contains("Throughput") => &self.tally.throttles,
                            _ if answer.to_string().contains("ThrottlingError") => {
                                &self.tally.throttles
                            }
                            _ => &self.tally.conflicts,
                        };
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return json_response(status, &answer);
                    }
                }
            }
            None => (Vec::new(), 0),
        };
        let latency = self.settings.dynamo.transaction_latency;
        let in_flight = operation == "TransactWriteItems";
        if in_flight {
            self.tally
                .transactions_in_flight
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
        }
        let response = {
            let _write = self
                .lock_tables(
                    &dynamo::write_tables(operation, &body),
                    if operation == "TransactWriteItems"
                        || !matches!(
                            operation,
                            "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem"
                        )
                    {
                        Kind::Transaction
                    } else {
                        Kind::Write
                    },
                )
                .await;
            self.forward(&whole.parts, whole.body).await
        };
        self.conflicts.release(&held, token);
        if in_flight {
            self.tally
                .transactions_in_flight
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            let delay = self.settings.dynamo.transaction_answer_delay;
            if !delay.is_zero() {
                // Applied, answered late: a client that gave up first
                // does not know it took effect.
                tokio::time::sleep(delay).await;
            }
        }
        response
    }

    fn draw(&self) -> f64 {
        use std::hash::BuildHasher;
        let n = self
            .draws
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (self.random.hash_one(n) >> 11) as f64 / (1u64 << 53) as f64
    }

    async fn sqs(&self, operation: &str, whole: Whole) -> Response {
        let limits = &self.settings.sqs;
        let body: Value = serde_json::from_slice(&whole.body).unwrap_or(Value::Null);
        match operation {
            "GetQueueAttributes" if !limits.count_lag.is_zero() && sqs::asks_for_counts(&body) => {
                let now = Instant::now();
                if let Some(answer) = self.queues.snapshot(&body, limits.count_lag, now) {
                    self.tally
                        .lagged_counts
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return json_response(200, &answer);
                }
                match self.sqs_send(operation, &whole.parts, whole.body).await {
                    Ok((parts, answer)) => {
                        if parts.status.is_success()
                            && let Ok(json) = serde_json::from_slice::<Value>(&answer)
                        {
                            self.queues.keep_snapshot(&body, json, now);
                        }
                        hyper::Response::from_parts(parts, Full::new(answer))
                    }
                    Err(why) => bad_gateway(&why),
                }
            }
            "ReceiveMessage" if limits.duplicate_rate > 0.0 => {
                match self.sqs_send(operation, &whole.parts, whole.body).await {
                    Ok((parts, answer)) if parts.status.is_success() => {
                        let Ok(json) = serde_json::from_slice::<Value>(&answer) else {
                            return hyper::Response::from_parts(parts, Full::new(answer));
                        };
                        let before = self.queues.copies_waiting();
                        let received = json["Messages"].as_array().map_or(0, Vec::len);
                        let delivered =
                            self.queues
                                .deliver(&body, json, limits.duplicate_rate, || self.draw());
                        let copies = delivered["Messages"]
                            .as_array()
                            .map_or(0, Vec::len)
                            .saturating_sub(received);
                        debug_assert!(copies <= before);
                        self.tally
                            .duplicates
                            .fetch_add(copies as u64, std::sync::atomic::Ordering::Relaxed);
                        json_response(200, &delivered)
                    }
                    Ok((parts, answer)) => hyper::Response::from_parts(parts, Full::new(answer)),
                    Err(why) => bad_gateway(&why),
                }
            }
            "DeleteMessage" | "ChangeMessageVisibility"
                if body["ReceiptHandle"].as_str().is_some_and(sqs::is_copy) =>
            {
                json_response(200, &serde_json::json!({}))
            }
            "DeleteMessageBatch" | "ChangeMessageVisibilityBatch" => {
                let (rest, copies) = sqs::split_batch(&body);
                if copies.is_empty() {
                    return self.sqs_forward(operation, &whole.parts, whole.body).await;
                }
                let upstream = match rest {
                    None => None,
                    Some(rest) => {
                        match self
                            .sqs_send(operation, &whole.parts, Bytes::from(rest.to_string()))
                            .await
                        {
                            Ok((parts, answer)) if parts.status.is_success() => {
                                serde_json::from_slice::<Value>(&answer).ok()
                            }
                            Ok((parts, answer)) => {
                                return hyper::Response::from_parts(parts, Full::new(answer));
                            }
                            Err(why) => return bad_gateway(&why),
                        }
                    }
                };
                json_response(200, &sqs::merge_batch(upstream, &copies))
            }
            _ => self.sqs_forward(operation, &whole.parts, whole.body).await,
        }
    }
}
