//! The HTTP load generator: purchase decisions per second and their latency
//! through the local stack's API Gateway stand-in, the way buyers reach it.
//!
//! [`run`] is a plain keep-alive HTTP/1.1 client over tokio `TcpStream`s:
//! `N` connections, each sending the next pre-built request as soon as the
//! previous answer is in (a closed loop, like `N` buyers each waiting for
//! their answer). Requests are bytes built before the clock starts, so the
//! figure is the server's, not the client's formatting. It is hand-written
//! rather than hyper's client because the generator shares two cores with
//! the gateway and Redis: parsing a status line and a `content-length` is
//! all it needs, and every cycle it spends is one the server does not get.
//!
//! [`http_decisions`] is the benchmark: it prepares the local stack
//! in-process ([`crate::local::prepare`], port 0, its own queue and tables),
//! opens a fresh sale, mints one token per buyer, drives the workload and
//! checks in Redis that the sale sold exactly its stock.

use crate::gateway::{self, Gateway};
use crate::local::{self, LocalError, LocalSettings};
use crate::token::{TokenError, TokenSettings};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::{RedisStock, SaleKeys};
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::clock;
use seckill_shared::config::{Config, RateLimits};
use seckill_shared::domain::{OrderMessage, Sale};
use seckill_shared::ports::{OrderQueue, SaleCatalog, SendError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every buyer arrives from 127.0.0.1: the per-address bucket must not be
/// what is measured. The limiter script still runs, as in production.
pub const UNLIMITED: RateLimits = RateLimits {
    user_per_sec: 1e9,
    user_burst: 1e9,
    ip_per_sec: 1e9,
    ip_burst: 1e9,
};

/// One answer slower than this means the server is stuck, not slow: the run
/// fails instead of hanging.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Tokens outlive any run by far; they expire so a leaked one is harmless.
const TOKEN_TTL_SECS: i64 = 3_600;

/// The purchase body of every request.
const BODY: &str = r#"{"quantity": 1}"#;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("local stack: {0}")]
    Stack(#[from] LocalError),
    #[error("set-up: {0}")]
    Setup(String),
    #[error("minting a buyer's token: {0}")]
    Token(#[from] TokenError),
    #[error("connection {conn}: {source}")]
    Io { conn: usize, source: std::io::Error },
    #[error("connection {conn}: malformed response: {why}")]
    Protocol { conn: usize, why: &'static str },
    #[error("connection {conn}: no answer within {} s", ANSWER_TIMEOUT.as_secs())]
    Timeout { conn: usize },
    #[error("a load task ended abnormally: {0}")]
    Task(#[from] tokio::task::JoinError),
}

fn setup(err: impl std::fmt::Display) -> LoadError {
    LoadError::Setup(err.to_string())
}

/// A queue that takes every message and keeps none: the decision is
/// measured without the emulator's SendMessage (about 150 a second), which
/// would otherwise be the figure.
pub struct NullQueue;

impl OrderQueue for NullQueue {
    async fn send(&self, _message: &OrderMessage) -> Result<(), SendError> {
        Ok(())
    }
}

/// One request, ready to write.
pub struct Prepared {
    pub bytes: Vec<u8>,
    /// Who sends it (the buyer's index), to tell a replay from a double sale.
    pub buyer: u32,
}

/// What [`run`] measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// From the first request written to the last answer read.
    pub wall: Duration,
    /// One per request, in microseconds, sorted.
    pub latencies_us: Vec<u32>,
    pub statuses: BTreeMap<u16, usize>,
    /// `(buyer, orderId)` of every 202, replays included.
    pub accepted: Vec<(u32, String)>,
}

impl LoadReport {
    /// Nearest-rank percentile in microseconds (`p` in 0..=1).
    pub fn percentile_us(&self, p: f64) -> Option<u32> {
        let n = self.latencies_us.len();
        let rank = (p * n as f64).ceil() as usize;
        self.latencies_us.get(rank.clamp(1, n.max(1)) - 1).copied()
    }
}

/// Sends every request to `addr` over `connections` keep-alive connections
/// (opened before the clock starts), each taking the next unsent request as
/// soon as its previous answer is in.
pub async fn run(
    addr: SocketAddr,
    requests: Arc<Vec<Prepared>>,
    connections: usize,
) -> Result<LoadReport, LoadError> {
    let mut streams = Vec::with_capacity(connections);
    for conn in 0..connections.max(1) {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| LoadError::Io { conn, source })?;
        // One write per request; no reason to let Nagle hold any of it.
        stream
            .set_nodelay(true)
            .map_err(|source| LoadError::Io { conn, source })?;
        streams.push(stream);
    }
    let next = Arc::new(AtomicUsize::new(0));
    let per_conn = requests.len() / streams.len() + 1;
    let started = Instant::now();
    let workers: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(conn, stream)| {
            let (requests, next) = (requests.clone(), next.clone());
            tokio::spawn(connection(conn, stream, requests, next, per_conn))
        })
        .collect();
    let mut report = LoadReport {
        wall: Duration::ZERO,
        latencies_us: Vec::with_capacity(requests.len()),
        statuses: BTreeMap::new(),
        accepted: Vec::new(),
    };
    let mut first_error = None;
    for worker in workers {
        match worker.await? {
            Ok(part) => {
                report.latencies_us.extend(part.latencies_us);
                for (status, n) in part.statuses {
                    *report.statuses.entry(status).or_default() += n;
                }
                report.accepted.extend(part.accepted);
            }
            // Every task is awaited even after a failure, so none is left
            // writing to the server after `run` returns.
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    report.wall = started.elapsed();
    if let Some(err) = first_error {
        return Err(err);
    }
    report.latencies_us.sort_unstable();
    Ok(report)
}

/// One connection's loop: write a request, read its answer, repeat.
async fn connection(
    conn: usize,
    mut stream: TcpStream,
    requests: Arc<Vec<Prepared>>,
    next: Arc<AtomicUsize>,
    expected: usize,
) -> Result<LoadReport, LoadError> {
    let io = |source| LoadError::Io { conn, source };
    let mut part = LoadReport {
        wall: Duration::ZERO,
        latencies_us: Vec::with_capacity(expected),
        statuses: BTreeMap::new(),
        accepted: Vec::new(),
    };
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    loop {
        let Some(request) = requests.get(next.fetch_add(1, Ordering::Relaxed)) else {
            return Ok(part);
        };
        let t = Instant::now();
        stream.write_all(&request.bytes).await.map_err(io)?;
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, read_response(&mut stream, &mut buf))
            .await
            .map_err(|_| LoadError::Timeout { conn })?;
        let (status, head, len) = answer.map_err(|e| match e {
            ReadError::Io(source) => LoadError::Io { conn, source },
            ReadError::Protocol(why) => LoadError::Protocol { conn, why },
        })?;
        part.latencies_us
            .push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
        *part.statuses.entry(status).or_default() += 1;
        if status == 202 {
            let body = buf.get(head..head + len).unwrap_or_default();
            part.accepted
                .push((request.buyer, order_id(body).unwrap_or_default()));
        }
        buf.drain(..head + len);
    }
}

#[derive(Debug)]
enum ReadError {
    Io(std::io::Error),
    Protocol(&'static str),
}

/// Reads until `buf` holds one whole response; returns its status, the
/// length of its head and of its body. The gateway always answers with a
/// `content-length` (hyper does for a full body), so chunked bodies are a
/// protocol error here rather than code nobody runs.
async fn read_response(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<(u16, usize, usize), ReadError> {
    loop {
        if let Some((status, head, len)) = parse_head(buf)?
            && buf.len() >= head + len
        {
            return Ok((status, head, len));
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(4096);
        }
        if stream.read_buf(buf).await.map_err(ReadError::Io)? == 0 {
            return Err(ReadError::Protocol("connection closed mid-response"));
        }
    }
}

/// `Some((status, head length, content length))` once the head is complete.
fn parse_head(buf: &[u8]) -> Result<Option<(u16, usize, usize)>, ReadError> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| ReadError::Protocol("head"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.strip_prefix("HTTP/1.1 "))
        .and_then(|l| l.get(..3))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or(ReadError::Protocol("status line"))?;
    let len = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or(ReadError::Protocol("no content-length"))?;
    Ok(Some((status, end + 4, len)))
}

fn order_id(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    Some(value.get("orderId")?.as_str()?.to_owned())
}

/// Which queue adapter the purchase route uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueStep {
    /// [`NullQueue`]: the decision figure.
    Skipped,
    /// The real SQS adapter on `AWS_ENDPOINT_URL`: bound by the emulator.
    Sqs,
}

impl QueueStep {
    pub fn label(self) -> &'static str {
        match self {
            Self::Skipped => "HTTP, queue step skipped",
            Self::Sqs => "HTTP, with SQS (emulator, queue-bound)",
        }
    }
}

/// What [`http_decisions`] runs.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub redis_url: String,
    /// Distinct buyers, one request each.
    pub buyers: usize,
    /// Extra requests repeating an earlier buyer's, same `Idempotency-Key`.
    pub retries: usize,
    /// Units of the sale (one per buyer).
    pub stock: u32,
    pub connections: usize,
    pub queue: QueueStep,
    /// Prefix of the sale, queue and table names: unique per run, since the
    /// Redis and emulator may be shared.
    pub name: String,
    /// The purchase service's sold-out flag when the queue step is skipped
    /// (zero: every decision in Redis, as the bench's handler row).
    pub sold_out_flag: Duration,
}

impl HttpSettings {
    /// The workload of the target: 100,000 buyers, 10% retrying, 1,000
    /// units, 256 connections, queue step skipped.
    pub fn new(redis_url: impl Into<String>) -> Self {
        Self {
            redis_url: redis_url.into(),
            buyers: 100_000,
            retries: 10_000,
            stock: 1_000,
            connections: 256,
            queue: QueueStep::Skipped,
            name: format!("http{}-{}", std::process::id(), clock::now_ms()),
            sold_out_flag: seckill_shared::app::purchase::SOLD_OUT_FLAG,
        }
    }
}

/// The figures of one [`http_decisions`] run.
#[derive(Debug, Clone)]
pub struct HttpRun {
    pub queue: QueueStep,
    pub sale_id: String,
    pub buyers: usize,
    pub retries: usize,
    pub connections: usize,
    /// Minting the tokens and building the requests (not timed).
    pub prepared_in: Duration,
    pub report: LoadReport,
    /// Every request got an answer, so requests per second are decisions.
    pub decisions_per_sec: f64,
    pub p50_us: Option<u32>,
    pub p99_us: Option<u32>,
    pub p999_us: Option<u32>,
    /// The distinct order ids of the 202s.
    pub order_ids: BTreeSet<String>,
    /// Why the figures cannot be trusted: empty when the sale sold exactly
    /// its stock, to distinct buyers, and every answer was 202 or 410.
    pub failures: Vec<String>,
}

impl HttpRun {
    pub fn requests(&self) -> usize {
        self.report.latencies_us.len()
    }

    pub fn status(&self, status: u16) -> usize {
        self.report.statuses.get(&status).copied().unwrap_or(0)
    }
}

/// Starts the local stack's gateway in-process on 127.0.0.1:0 (its own
/// queue and tables on `AWS_ENDPOINT_URL`, Redis at `settings.redis_url`,
/// rate limits that never bite, no account throttle), opens a fresh sale of `settings.stock` units,
/// sends the workload over HTTP and checks the outcome in Redis.
pub async fn http_decisions(settings: &HttpSettings) -> Result<HttpRun, LoadError> {
    let name = &settings.name;
    let local = LocalSettings {
        listen: "127.0.0.1:0".into(),
        redis_url: settings.redis_url.clone(),
        queue_name: format!("{name}-q"),
        dlq_name: format!("{name}-dlq"),
        sales_table: format!("{name}-sales"),
        orders_table: format!("{name}-orders"),
        demo_sale: String::new(),
        visibility_timeout_secs: crate::emulator::VISIBILITY_TIMEOUT_SECS,
        rate_limits: Some(UNLIMITED),
        login_url: None,
    };
    let stack = local::prepare(&local).await?;
    let config = stack.config.clone();
    let listener = stack.listener;
    // The benchmark measures the gateway's own capacity: API Gateway's
    // account throttle (scaled down locally) would be the figure instead.
    // The functions' Lambda limits stay.
    let gateway = Arc::try_unwrap(stack.gateway)
        .map_err(|_| setup("the prepared gateway is shared"))?
        .with_api_throttle(None);
    match settings.queue {
        QueueStep::Sqs => drive_stack(settings, &config, listener, Arc::new(gateway)).await,
        QueueStep::Skipped => {
            let gateway = gateway.with_purchase(
                null_purchase(&config)
                    .await?
                    .with_sold_out_flag(settings.sold_out_flag),
            );
            drive_stack(settings, &config, listener, Arc::new(gateway)).await
        }
    }
}

/// `purchase::wire` with the queue swapped for [`NullQueue`]: the same
/// secrets, Redis adapter, limits, catalog and gate.
async fn null_purchase(
    config: &Config,
) -> Result<PurchaseService<RedisStock, NullQueue, CachedCatalog<DynamoCatalog>>, LoadError> {
    let config = &seckill_shared::adapters::secrets::resolve(
        config,
        aws::Caller::Tool,
        seckill_shared::adapters::secrets::Uses::RedisGateAndEdge,
    )
    .await
    .map_err(setup)?;
    let sdk = aws::sdk_config(aws::Caller::Tool, config.sqs_timeout).await;
    let stock = RedisStock::connect_lazy(&config.redis_url, config.redis_timeout)
        .map_err(setup)?
        .with_rate_limits(config.rate_limits);
    let catalog = CachedCatalog::new(
        DynamoCatalog::new(aws::dynamodb(&sdk), &config.sales_table),
        config.sale_cache_ttl,
    );
    let service = PurchaseService::new(stock, NullQueue, catalog);
    Ok(match &config.gate_secret {
        Some(secret) => {
            service.with_gate(seckill_shared::domain::gate::Gate::new(secret.as_bytes()))
        }
        None => service,
    })
}

async fn drive_stack<Q, C>(
    settings: &HttpSettings,
    config: &Config,
    listener: tokio::net::TcpListener,
    gateway: Arc<Gateway<RedisStock, Q, C>>,
) -> Result<HttpRun, LoadError>
where
    Q: OrderQueue + 'static,
    C: SaleCatalog + 'static,
{
    let sale = seckill_shared::adapters::memory::test_sale(&settings.name, settings.stock, 1)
        .map_err(|e| setup(e.0))?;
    let catalog = DynamoCatalog::new(
        aws::dynamodb(&aws::sdk_config(aws::Caller::Tool, config.sqs_timeout).await),
        &config.sales_table,
    );
    catalog.create_sale(&sale).await.map_err(setup)?;
    // Through the service's own connection, so the first timed request does
    // not pay the connect.
    seckill_shared::app::jobs::mark_and_load(
        &catalog,
        gateway.purchase.stock(),
        &sale,
        clock::now_ms(),
    )
    .await
    .map_err(setup)?;
    let addr = listener.local_addr().map_err(setup)?;

    let prepared_at = Instant::now();
    let plan = plan(settings.buyers, settings.retries);
    let requests = Arc::new(build_requests(&sale, addr, &plan, gateway.tokens())?);
    let prepared_in = prepared_at.elapsed();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(gateway::serve(listener, gateway, async {
        let _ = stopped.await;
    }));
    let report = run(addr, requests, settings.connections).await;
    let _ = stop.send(());
    // The accept loop ends at once; open connections end when the
    // generator's streams, already dropped, are seen closed.
    served.await?;
    let report = report?;

    let mut failures = Vec::new();
    let order_ids = check_orders(&report, settings.stock, &mut failures);
    check_redis(&settings.redis_url, &sale, &mut failures).await?;
    let others: usize = report
        .statuses
        .iter()
        .filter(|(s, _)| !matches!(s, 202 | 410))
        .map(|(_, n)| n)
        .sum();
    if others > 0 {
        failures.push(format!(
            "{others} answers were neither 202 nor 410: {:?}",
            report.statuses
        ));
    }
    let requests = report.latencies_us.len();
    Ok(HttpRun {
        queue: settings.queue,
        sale_id: sale.sale_id.to_string(),
        buyers: settings.buyers,
        retries: plan.iter().filter(|p| p.retry).count(),
        connections: settings.connections,
        prepared_in,
        decisions_per_sec: requests as f64 / report.wall.as_secs_f64().max(1e-9),
        p50_us: report.percentile_us(0.50),
        p99_us: report.percentile_us(0.99),
        p999_us: report.percentile_us(0.999),
        report,
        order_ids,
        failures,
    })
}

/// Exactly `stock` distinct orders, each owned by one buyer, one per buyer.
fn check_orders(report: &LoadReport, stock: u32, failures: &mut Vec<String>) -> BTreeSet<String> {
    let mut owner: HashMap<&str, u32> = HashMap::new();
    let mut per_buyer: HashMap<u32, &str> = HashMap::new();
    for (buyer, id) in &report.accepted {
        if id.is_empty() {
            failures.push(format!("a 202 to buyer u{buyer} carried no orderId"));
            continue;
        }
        if let Some(first) = owner.insert(id, *buyer)
            && first != *buyer
        {
            failures.push(format!("order {id} accepted for u{first} and u{buyer}"));
        }
        if let Some(first) = per_buyer.insert(*buyer, id)
            && first != id
        {
            failures.push(format!(
                "buyer u{buyer} got two orders ({first}, {id}) at one per buyer"
            ));
        }
    }
    if owner.len() != stock as usize {
        failures.push(format!(
            "{} distinct orders accepted, expected exactly {stock}",
            owner.len()
        ));
    }
    owner.into_keys().map(str::to_owned).collect()
}

/// Redis itself: as many reservations as units, none left.
async fn check_redis(url: &str, sale: &Sale, failures: &mut Vec<String>) -> Result<(), LoadError> {
    let client = redis::Client::open(url).map_err(setup)?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(setup)?;
    let keys = SaleKeys::new(&sale.sale_id);
    let reservations: u64 = redis::cmd("HLEN")
        .arg(&keys.resv)
        .query_async(&mut conn)
        .await
        .map_err(setup)?;
    let left: Option<i64> = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(&mut conn)
        .await
        .map_err(setup)?;
    if reservations != u64::from(sale.total_stock) || left != Some(0) {
        failures.push(format!(
            "Redis holds {reservations} reservations and {left:?} units left, expected {} and Some(0)",
            sale.total_stock
        ));
    }
    Ok(())
}

/// One planned request: which buyer, and whether it repeats an earlier one.
#[derive(Debug, Clone, Copy)]
pub struct Planned {
    pub user: u32,
    pub retry: bool,
}

/// A small LCG (Knuth's MMIX constants): deterministic, so every run
/// replays the same order.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // The high bits of an LCG are the random ones.
        usize::try_from(self.0 >> 33).unwrap_or(0) % bound.max(1)
    }
}

/// `buyers` distinct buyers in order, plus `retries` repeats of random
/// buyers, each landing after its original by up to a tenth of the run (a
/// client that timed out and tried again), as `seckill-bench` plans them.
pub fn plan(buyers: usize, retries: usize) -> Vec<Planned> {
    let buyers = buyers.min(u32::MAX as usize);
    let mut rng = Lcg(0x5ec_c1de);
    let spread = (buyers / 10).max(1);
    let user = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let mut keyed: Vec<(usize, Planned)> = (0..buyers)
        .map(|n| {
            let planned = Planned {
                user: user(n),
                retry: false,
            };
            (2 * n, planned)
        })
        .collect();
    if buyers > 0 {
        for _ in 0..retries {
            let n = rng.next(buyers);
            let at = (n + 1 + rng.next(spread)).min(buyers);
            let planned = Planned {
                user: user(n),
                retry: true,
            };
            keyed.push((2 * at + 1, planned));
        }
    }
    keyed.sort_by_key(|(at, _)| *at);
    keyed.into_iter().map(|(_, p)| p).collect()
}

/// A stable per-buyer `Idempotency-Key`, shaped like a client's random one
/// (splitmix64's finaliser: a bijection, so keys never collide).
pub fn idempotency_key(user: u32) -> String {
    let mut z = u64::from(user).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{:016x}", z ^ (z >> 31))
}

/// The bytes of every planned request, with one token per buyer minted by
/// the gateway's own settings (a retry reuses its buyer's token).
fn build_requests(
    sale: &Sale,
    addr: SocketAddr,
    plan: &[Planned],
    tokens: &TokenSettings,
) -> Result<Vec<Prepared>, LoadError> {
    let mut minted: HashMap<u32, String> = HashMap::with_capacity(plan.len());
    let path = format!("/sales/{}/purchase", sale.sale_id);
    plan.iter()
        .map(|p| {
            let token = match minted.get(&p.user) {
                Some(token) => token.clone(),
                None => {
                    let token = tokens.mint(&format!("u{}", p.user), false, TOKEN_TTL_SECS)?;
                    minted.insert(p.user, token.clone());
                    token
                }
            };
            let text = format!(
                "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\nidempotency-key: {}\r\ncontent-length: {}\r\n\r\n{BODY}",
                idempotency_key(p.user),
                BODY.len()
            );
            Ok(Prepared {
                bytes: text.into_bytes(),
                buyer: p.user,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
