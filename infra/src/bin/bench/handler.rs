//! The handler rows' machinery: `purchase::handler::handle` driven
//! in-process by concurrent tasks with real-shaped events, and what a run
//! produced.

use crate::table::Row;
use crate::{BoxError, REDIS_TIMEOUT, SALE_CACHE_TTL};
use lambda_http::{Body, Request};
use purchase::handler;
use seckill_infra::loadgen::{NullQueue, Planned, UNLIMITED, idempotency_key};
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::clock;
use seckill_shared::domain::Sale;
use seckill_shared::observe::metrics;
use seckill_shared::ports::StockLoading;
use seckill_shared::ports::{DrawStore, OrderQueue, SaleCatalog, StockStore};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<u64, BoxError> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?
        .attributes
        .unwrap_or_default();
    let count = |name: A| {
        attrs
            .get(&name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(count(A::ApproximateNumberOfMessages) + count(A::ApproximateNumberOfMessagesNotVisible))
}

/// Builds one Lambda request per planned call from `events/purchase.json`,
/// the same way `lambda_http` would receive it from API Gateway.
pub(crate) fn build_requests(
    template: &serde_json::Value,
    sale: &Sale,
    plan: &[Planned],
    keyed: bool,
    first_user: u32,
) -> Result<Vec<Request>, BoxError> {
    let sale_id = sale.sale_id.as_str();
    let path = format!("/sales/{sale_id}/purchase");
    let mut event = template.clone();
    let set = |event: &mut serde_json::Value, pointer: &str, value: String| {
        let slot = event
            .pointer_mut(pointer)
            .ok_or_else(|| format!("events/purchase.json has no {pointer}"))?;
        *slot = serde_json::Value::String(value);
        Ok::<(), BoxError>(())
    };
    set(&mut event, "/pathParameters/saleId", sale_id.to_owned())?;
    set(&mut event, "/rawPath", path.clone())?;
    set(&mut event, "/requestContext/http/path", path)?;
    if !keyed && let Some(headers) = event.get_mut("headers").and_then(|h| h.as_object_mut()) {
        headers.remove("idempotency-key");
    }
    plan.iter()
        .enumerate()
        .map(|(n, p)| {
            let user = format!("u{}", first_user + p.user);
            set(
                &mut event,
                "/requestContext/authorizer/jwt/claims/sub",
                user,
            )?;
            if keyed {
                set(
                    &mut event,
                    "/headers/idempotency-key",
                    idempotency_key(first_user + p.user),
                )?;
            }
            set(
                &mut event,
                "/requestContext/requestId",
                format!("bench-{n}"),
            )?;
            Ok(lambda_http::request::from_str(&event.to_string())?)
        })
        .collect()
}

/// What one handler run produced.
pub(crate) struct Stats {
    pub(crate) wall: Duration,
    pub(crate) latencies_us: Vec<u32>,
    pub(crate) statuses: BTreeMap<u16, usize>,
    /// The orderId of every 202, replays included.
    pub(crate) order_ids: Vec<String>,
}

impl Stats {
    pub(crate) fn row(&self, label: &str) -> Row {
        let n = self.latencies_us.len();
        let mut sorted = self.latencies_us.clone();
        sorted.sort_unstable();
        Row {
            label: label.into(),
            requests: n,
            per_sec: n as f64 / self.wall.as_secs_f64(),
            p50: percentile(&sorted, 0.50),
            p99: percentile(&sorted, 0.99),
            p999: percentile(&sorted, 0.999),
        }
    }
}

/// Nearest-rank percentile of sorted microseconds.
pub(crate) fn percentile(sorted: &[u32], p: f64) -> Option<f64> {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .map(|&us| f64::from(us))
}

/// What every handler variant shares: the catalog, the event template, the
/// request plan and the concurrency.
pub(crate) struct Workload<'a> {
    pub(crate) catalog: &'a DynamoCatalog,
    pub(crate) template: &'a serde_json::Value,
    pub(crate) plan: &'a [Planned],
    pub(crate) concurrency: usize,
    /// Whether requests carry an `Idempotency-Key` (a keyed request always
    /// goes to Redis: it may be a winner's retry).
    pub(crate) keyed: bool,
    /// Buyer numbers start here (so a second crowd is new buyers).
    pub(crate) first_user: u32,
}

/// A purchase service of its own (a new environment: no flag armed yet)
/// for the rows after the sell-out, the queue step skipped.
pub(crate) fn sold_out_service(
    redis_url: &str,
    db: &aws_sdk_dynamodb::Client,
    sales_table: &str,
    flag: Duration,
) -> Result<PurchaseService<RedisStock, NullQueue, CachedCatalog<DynamoCatalog>>, BoxError> {
    Ok(PurchaseService::new(
        RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?.with_rate_limits(UNLIMITED),
        NullQueue,
        CachedCatalog::new(DynamoCatalog::new(db.clone(), sales_table), SALE_CACHE_TTL),
    )
    .with_sold_out_flag(flag))
}

/// Puts the sale in the catalog and Redis, builds its events, drives them
/// through the handler and records one line of detail.
pub(crate) async fn run_variant<Q, C>(
    label: &str,
    service: PurchaseService<RedisStock, Q, C>,
    sale: &Sale,
    work: &Workload<'_>,
    notes: &mut Vec<String>,
) -> Result<Stats, BoxError>
where
    Q: OrderQueue + 'static,
    C: SaleCatalog + 'static,
{
    work.catalog.create_sale(sale).await?;
    // The rows built here rather than by `purchase::wire` count too.
    let service = if service.metrics().is_on() {
        service
    } else {
        service.with_metrics(metrics::Metrics::new(
            metrics::Function::Purchase,
            metrics::DEFAULT_NAMESPACE,
        ))
    };
    // Loading through the service's own connection also opens it, so the
    // first timed calls do not pay the connect.
    service.stock().load_sale(sale, clock::now_ms()).await?;
    let started = Instant::now();
    let requests = build_requests(work.template, sale, work.plan, work.keyed, work.first_user)?;
    let built = started.elapsed();
    let stats = drive(Arc::new(service), requests, work.concurrency).await?;
    let fresh = stats.order_ids.iter().collect::<HashSet<_>>().len();
    let replays = stats.order_ids.len() - fresh;
    let others: Vec<String> = stats
        .statuses
        .iter()
        .filter(|(s, _)| !matches!(s, 202 | 410))
        .map(|(s, n)| format!("{s} x{n}"))
        .collect();
    notes.push(format!(
        "  {label}: {} requests in {:.2} s ({} events built in {:.2} s, not timed): 202 x{} ({fresh} orders + {replays} replays to a retrying winner), 410 x{}, other: {}",
        stats.latencies_us.len(),
        stats.wall.as_secs_f64(),
        work.plan.len(),
        built.as_secs_f64(),
        stats.statuses.get(&202).copied().unwrap_or(0),
        stats.statuses.get(&410).copied().unwrap_or(0),
        if others.is_empty() { "none".into() } else { others.join(", ") },
    ));
    Ok(stats)
}

/// `concurrency` tasks take the next request from a shared index until none
/// is left, like that many buyers' connections each waiting for its answer.
pub(crate) async fn drive<S, Q, C>(
    service: Arc<PurchaseService<S, Q, C>>,
    requests: Vec<Request>,
    concurrency: usize,
) -> Result<Stats, BoxError>
where
    S: StockStore + DrawStore + 'static,
    Q: OrderQueue + 'static,
    C: SaleCatalog + 'static,
{
    let total = requests.len();
    // A slot per request so each task takes its request by value (the
    // handler owns it) without a lock shared by all tasks.
    let slots: Arc<Vec<Mutex<Option<Request>>>> =
        Arc::new(requests.into_iter().map(|r| Mutex::new(Some(r))).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (service, slots, next) = (service.clone(), slots.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(total / concurrency + 1);
                let mut statuses = BTreeMap::<u16, usize>::new();
                let mut order_ids = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = slots.get(i) else { break };
                    let Some(request) = slot.lock().ok().and_then(|mut s| s.take()) else {
                        continue;
                    };
                    // A call answered from memory never waits, so without
                    // this the task would hold its worker for the whole run
                    // while others' Redis replies sit unread (in Lambda every
                    // request is its own invocation).
                    tokio::task::consume_budget().await;
                    let t = Instant::now();
                    let Ok(response) = handler::handle(&*service, request).await;
                    latencies.push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
                    let status = response.status().as_u16();
                    *statuses.entry(status).or_default() += 1;
                    if status == 202 {
                        order_ids.push(order_id(response.body()).unwrap_or_default());
                    }
                }
                (latencies, statuses, order_ids)
            })
        })
        .collect();
    let mut stats = Stats {
        wall: Duration::ZERO,
        latencies_us: Vec::with_capacity(total),
        statuses: BTreeMap::new(),
        order_ids: Vec::new(),
    };
    for worker in workers {
        let (latencies, statuses, order_ids) = worker.await?;
        stats.latencies_us.extend(latencies);
        for (status, n) in statuses {
            *stats.statuses.entry(status).or_default() += n;
        }
        stats.order_ids.extend(order_ids);
    }
    stats.wall = started.elapsed();
    Ok(stats)
}

pub(crate) fn order_id(body: &Body) -> Option<String> {
    let Body::Text(text) = body else { return None };
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(value.get("orderId")?.as_str()?.to_owned())
}

/// Exactly `stock` distinct orders, every request answered.
pub(crate) fn check_run(stats: &Stats, stock: u32, label: &str, failures: &mut Vec<String>) {
    let fresh = stats.order_ids.iter().collect::<HashSet<_>>().len();
    if fresh != stock as usize {
        failures.push(format!(
            "{label}: {fresh} distinct orders accepted, expected exactly {stock}"
        ));
    }
    if stats.order_ids.iter().any(String::is_empty) {
        failures.push(format!("{label}: a 202 without an orderId"));
    }
}
