//! The order-writer at the template's concurrency on one sale: `--drain-orders`
//! order messages of one sale drained by the template's five writers, once
//! through the strict layer (started here, in front of the emulator, with
//! its default knobs) and once on the lenient emulator itself, side by side.
//!
//! Every writer's transaction updates the same sale item, so this is where
//! transaction conflicts, their retries and a hot partition show; the
//! emulator alone has none of them, which is why both are printed.

mod checks;
mod print;
mod timed;

use crate::handler::queue_depth;
use crate::{BoxError, REDIS_TIMEOUT, SQS_TIMEOUT};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_dynamodb::types::AttributeValue;
use checks::{EXPIRY_CHUNK, ExpiryCheck, MemoryCheck, expiry_check, memory_check};
use print::print;
use seckill_infra::emulator;
use seckill_infra::event_source::{self, EventSource, EventSourceCounts, EventSourceSettings};
use seckill_infra::local::writer_handler;
use seckill_infra::strict::{self, StrictSettings};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::order_writer::OrderWriter;
use seckill_shared::clock;
use seckill_shared::domain::{OrderId, OrderMessage, Quantity, Sale, UserId};
use seckill_shared::observe::metrics::{self, Counter, Emitter, Flush, Function, Metrics, Sink};
use seckill_shared::ports::StockLoading;
use seckill_shared::ports::{AuditTrail, CatalogAdmin};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timed::{Written, timed};

/// The default of `--drain-orders`.
pub(crate) const DEFAULT_ORDERS: u32 = 10_000;
/// `template.yaml`'s OrderWriterFunction: `ScalingConfig.MaximumConcurrency`
/// of its SQS event and `ReservedConcurrentExecutions`, both 5.
const TEMPLATE_WRITERS: usize = 5;
/// As `order_writer::wire` gives the function's DynamoDB calls.
const WRITER_DYNAMO_TIMEOUT: Duration = Duration::from_secs(4);
/// As `order_writer::wire` caches the sale.
const WRITER_SALE_CACHE: Duration = Duration::from_secs(30);
/// The template's 61 s would leave a failed batch out of sight for a minute
/// on a bench that must finish; 20 s still outlasts any batch here (the
/// writer's retries are bounded by its 4 s budget, its calls by 4 s each).
const VISIBILITY_SECS: u32 = 20;
/// The drain is over when the queue (visible and in flight) has read empty
/// this many polls in a row: a message a writer failed comes back visible
/// after the timeout, so one empty read between two is not the end.
const EMPTY_POLLS: u32 = 3;
const POLL: Duration = Duration::from_millis(200);
/// Admin actions (audit entries) and reconcile reports written for the sale
/// before its drain: a long operator history, which must not make the hot
/// sale item any larger (each order transaction pays per KB of it).
const ADMIN_HISTORY: u32 = 300;
const REPORTS: u32 = 10;
/// The template's `BatchSize` of the order-writer's SQS event.
const BATCH_SIZE: u32 = 10;

/// Where a run's writers send their calls.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The strict layer, started in-process in front of the emulator.
    Strict,
    /// The emulator itself.
    Lenient,
}

impl Target {
    fn label(self) -> &'static str {
        match self {
            Self::Strict => "strict layer (default knobs)",
            Self::Lenient => "lenient emulator",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Self::Strict => "ws",
            Self::Lenient => "wl",
        }
    }
}

/// What the strict layer refused or changed during a run.
#[derive(Clone, Copy, Default)]
struct LayerCounts {
    conflicts: u64,
    throttles: u64,
    duplicates: u64,
}

/// The figures of one run.
struct WritersRow {
    target: Target,
    orders: u32,
    /// From the first send to the last order written.
    wall: Option<Duration>,
    push: Duration,
    /// `reservedAt` to written, per order written, sorted.
    latencies_ms: Vec<i64>,
    conflicts_retried: u64,
    /// `None` on the emulator itself.
    layer: Option<LayerCounts>,
    dlq: u64,
    statuses: BTreeMap<String, u64>,
    available: i64,
    sold: i64,
    /// The sale item's size at its creation, and after the history and
    /// the drain.
    sale_item_bytes_created: usize,
    sale_item_bytes: usize,
    write_requests: u64,
    counts: EventSourceCounts,
    /// Mean records and milliseconds per writer invocation.
    batches: Option<(f64, f64)>,
    /// From the first send to the write of the last order that was not
    /// reported failed once (a record reported failed comes back only
    /// after the visibility timeout, which the drain model leaves out),
    /// and how many were.
    bulk: Option<(Duration, u64)>,
    /// `make plan`'s expiry model against a release-unpaid run over the
    /// drained orders (the strict row only).
    expiry: Option<ExpiryCheck>,
    /// What the jobs' whole-sale reads hold (the strict row only, where
    /// Linux lets the peak be reset).
    memory: Option<MemoryCheck>,
}

impl WritersRow {
    /// `make plan`'s drain model fed this run's writers, batches and sends.
    fn drain_model_secs(&self) -> Option<f64> {
        let (batch, batch_ms) = self.batches?;
        Some(seckill_infra::plan::drain_model(
            f64::from(self.orders),
            self.push.as_secs_f64(),
            TEMPLATE_WRITERS as f64,
            batch,
            batch_ms,
        ))
    }
}

impl WritersRow {
    fn status(&self, status: &str) -> u64 {
        self.statuses.get(status).copied().unwrap_or(0)
    }

    /// Nearest rank.
    fn percentile(&self, p: f64) -> Option<i64> {
        let n = self.latencies_ms.len();
        if n == 0 {
            return None;
        }
        let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
        self.latencies_ms.get(rank - 1).copied()
    }
}

/// What the run shares.
pub(crate) struct WritersEnv<'a> {
    pub(crate) tag: &'a str,
    pub(crate) redis_url: &'a str,
    pub(crate) region: String,
    /// The emulator itself (`SECKILL_EMULATOR_URL`).
    pub(crate) emulator_url: String,
    pub(crate) orders: u32,
}

/// Both runs, then their table. Failures (DLQ messages, `REJECTED` orders,
/// an order or unit missing) go into `failures`.
pub(crate) async fn writers_rows(
    env: &WritersEnv<'_>,
    failures: &mut Vec<String>,
) -> Result<(), BoxError> {
    let strict = run(env, Target::Strict, failures).await?;
    // The emulator alone runs the five writers' transactions on the sale
    // item without isolation: what it loses is its own unsoundness, which
    // the strict row beside it shows the layer removes. Printed, not a
    // failure of the run.
    let mut lenient_losses = Vec::new();
    let lenient = run(env, Target::Lenient, &mut lenient_losses).await?;
    print(&[strict, lenient]);
    for loss in lenient_losses {
        println!("  the emulator alone, without isolation between transactions: {loss}");
    }
    Ok(())
}

/// An SQS and a DynamoDB client calling `endpoint`.
async fn clients(endpoint: &str, caller: aws::Caller, timeout: Duration) -> Clients {
    let sdk = aws::loader(caller, timeout)
        .endpoint_url(endpoint)
        .load()
        .await;
    (aws::sqs(&sdk), aws::dynamodb(&sdk))
}

type Clients = (aws_sdk_sqs::Client, aws_sdk_dynamodb::Client);

async fn run(
    env: &WritersEnv<'_>,
    target: Target,
    failures: &mut Vec<String>,
) -> Result<WritersRow, BoxError> {
    let layer = match target {
        Target::Strict => {
            Some(strict::start("127.0.0.1:0", &env.emulator_url, StrictSettings::default()).await?)
        }
        Target::Lenient => None,
    };
    let endpoint = layer
        .as_ref()
        .map_or_else(|| env.emulator_url.clone(), strict::Strict::url);
    // The run's own calls (set-up, sends) go where its writers' go; its
    // reads of the outcome go to the emulator itself, whose queue counts
    // are exact and at once (the layer's lag by design), or, for the
    // queues the layer serves itself, to the layer's exact counts.
    let (sqs, db) = clients(&endpoint, aws::Caller::Tool, SQS_TIMEOUT).await;
    let (direct_sqs, direct_db) = clients(&env.emulator_url, aws::Caller::Tool, SQS_TIMEOUT).await;

    let name = format!("{}-{}", env.tag, target.key());
    let (sales_table, orders_table) = (format!("{name}-sales"), format!("{name}-orders"));
    emulator::ensure_tables(&db, &sales_table, &orders_table).await?;
    let queues = emulator::ensure_queues(
        &sqs,
        &format!("{name}-q"),
        &format!("{name}-dlq"),
        VISIBILITY_SECS,
    )
    .await?;
    let queue_arn = event_source::queue_arn(&sqs, &queues.orders_url).await?;
    let sale = test_sale(&name, env.orders, 1)?;
    let catalog = DynamoCatalog::new(db.clone(), &sales_table);
    catalog.create_sale(&sale).await?;
    let sale_item_bytes_created = item_size(&sale_item(&direct_db, &sales_table, &sale).await?);
    admin_history(&catalog, &sale).await?;
    // Live in Redis as in a real sale; the messages skip the purchase, so
    // there are no reservations for the writer to mark.
    RedisStock::connect_lazy(env.redis_url, REDIS_TIMEOUT)?
        .load_sale(&sale, clock::now_ms())
        .await?;

    // The writer as `order_writer::wire` builds it, its calls to `endpoint`,
    // its metric lines kept to read its counters back.
    let caller = aws::Caller::Function(Function::OrderWriter);
    let (_, writer_db) = clients(&endpoint, caller, WRITER_DYNAMO_TIMEOUT).await;
    let lines = Lines::default();
    let writer = Arc::new(
        OrderWriter::new(
            DynamoOrders::new(writer_db.clone(), &orders_table, &sales_table),
            RedisStock::connect_lazy(env.redis_url, REDIS_TIMEOUT)?,
            CachedCatalog::new(
                DynamoCatalog::new(writer_db, &sales_table).consistent_reads(),
                WRITER_SALE_CACHE,
            )
            .forgetting_missing(),
        )
        .with_metrics(
            Metrics::with_emitter(
                Function::OrderWriter,
                metrics::DEFAULT_NAMESPACE,
                Emitter::new(Sink::new(lines.clone()), Flush::EachInvocation),
            ),
            Some(emulator::MAX_RECEIVE_COUNT),
        ),
    );
    let mut settings =
        EventSourceSettings::template(&queues.orders_url, queue_arn, env.region.clone());
    settings.maximum_concurrency = TEMPLATE_WRITERS;
    let written = Written::default();
    let source = EventSource::spawn(
        sqs.clone(),
        settings,
        timed(writer_handler(writer.clone()), written.clone()),
    );

    // The burst: every message sent as fast as one sender can, while the
    // writers already drain, as the purchases of a sale's first seconds do.
    let first_send_ms = clock::now_ms();
    let started = Instant::now();
    let pushed = push(&sqs, &queues.orders_url, &sale, env.orders).await;
    let push_wall = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(120 + u64::from(env.orders) / 8);
    let mut empty = 0;
    let mut last_error = None;
    let depth = |url: String| {
        let (layer, direct_sqs) = (&layer, &direct_sqs);
        async move {
            match layer.as_ref().and_then(|l| l.exact_queue_counts(&url)) {
                Some((visible, in_flight, delayed)) => {
                    Ok(u64::try_from(visible + in_flight + delayed).unwrap_or(u64::MAX))
                }
                None => queue_depth(direct_sqs, &url).await,
            }
        }
    };
    while pushed.is_ok() && empty < EMPTY_POLLS && Instant::now() < deadline {
        match depth(queues.orders_url.clone()).await {
            Ok(0) => empty += 1,
            Ok(_) => empty = 0,
            Err(err) => last_error = Some(err.to_string()),
        }
        tokio::time::sleep(POLL).await;
    }
    let counts = source.stop().await;
    let layer_counts = layer.as_ref().map(|l| LayerCounts {
        conflicts: l.tally.conflicts.load(Ordering::Relaxed),
        throttles: l.tally.throttles.load(Ordering::Relaxed),
        duplicates: l.tally.duplicates.load(Ordering::Relaxed),
    });
    pushed?;

    let label = target.label();
    let target_n = i64::from(env.orders);
    let left = depth(queues.orders_url.clone()).await?;
    let dlq = depth(queues.dlq_url.clone()).await?;
    let (latencies_ms, last_written_ms) = written.latencies();
    // Read before the expiry check changes them.
    let statuses = statuses(&direct_db, &orders_table).await?;
    let sale_item = sale_item(&direct_db, &sales_table, &sale).await?;
    let (memory, expiry) = match target {
        Target::Strict if left == 0 => (
            memory_check(
                &endpoint,
                env.redis_url,
                (&sales_table, &orders_table),
                (&queues.orders_url, &queues.dlq_url),
                &sale,
            )
            .await?,
            Some(expiry_check(&db, env.redis_url, &sales_table, &orders_table, &sale).await?),
        ),
        _ => (None, None),
    };
    drop(layer);
    let number = |name: &str| match sale_item.get(name) {
        Some(AttributeValue::N(n)) => n.parse::<i64>().unwrap_or(-1),
        _ => -1,
    };
    let (available, sold) = (number("available"), number("sold"));
    let row = WritersRow {
        target,
        orders: env.orders,
        wall: last_written_ms
            .filter(|_| left == 0)
            .and_then(|last| u64::try_from(last - first_send_ms).ok())
            .map(Duration::from_millis),
        push: push_wall,
        latencies_ms,
        conflicts_retried: lines.counter(Counter::TransactionConflictsRetried),
        layer: layer_counts,
        dlq,
        statuses,
        available,
        sold,
        sale_item_bytes_created,
        sale_item_bytes: item_size(&sale_item),
        write_requests: writer
            .orders()
            .counters
            .write_requests
            .load(Ordering::Relaxed),
        counts,
        batches: written.batches(),
        memory,
        bulk: {
            // Records back only after the visibility timeout: those
            // reported failed, and at most a batch's worth per batch that
            // errored or timed out whole.
            let late = counts.records_failed
                + u64::from(BATCH_SIZE) * (counts.batch_errors + counts.timed_out);
            let late_n = usize::try_from(late).unwrap_or(usize::MAX);
            written
                .done_in_order()
                .get((env.orders as usize).saturating_sub(late_n.saturating_add(1)))
                .and_then(|last| u64::try_from(last - first_send_ms).ok())
                .map(|ms| (Duration::from_millis(ms), late))
        },
        expiry,
    };
    let last_error = last_error.map_or_else(String::new, |e| format!("; last poll error: {e}"));
    if left != 0 {
        failures.push(format!(
            "{label}: {left} messages still queued after {} s ({counts}){last_error}",
            (deadline - started).as_secs()
        ));
    }
    // The counters' digits and the version may move; nothing may grow.
    if row.sale_item_bytes > row.sale_item_bytes_created + 32 {
        failures.push(format!(
            "{label}: the sale item grew from {} to {} bytes with its history",
            row.sale_item_bytes_created, row.sale_item_bytes
        ));
    }
    if dlq != 0 {
        failures.push(format!("{label}: {dlq} messages in the DLQ"));
    }
    let rejected = row.status("REJECTED");
    if rejected != 0 {
        failures.push(format!("{label}: {rejected} orders REJECTED"));
    }
    let pending = row.status("PENDING_PAYMENT");
    if pending != u64::from(env.orders) || (available, sold) != (0, target_n) {
        failures.push(format!(
            "{label}: {pending} of {target_n} orders PENDING_PAYMENT ({:?}); the sale item holds available={available} sold={sold}, expected 0 and {target_n}",
            row.statuses
        ));
    }
    if row.latencies_ms.len() != env.orders as usize {
        failures.push(format!(
            "{label}: {} of {target_n} orders seen written by a writer",
            row.latencies_ms.len()
        ));
    }
    Ok(row)
}

/// `count` order messages of `sale`, one unit each for distinct users,
/// ten per SendMessageBatch, each batch's `reservedAt` the moment it is
/// sent (when the purchase would have answered `202`).
async fn push(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    sale: &Sale,
    count: u32,
) -> Result<(), BoxError> {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
    for start in (0..count).step_by(10) {
        let reserved_at = clock::rfc3339_ms(clock::now_ms());
        let entries = (start..count.min(start + 10))
            .map(|n| {
                let message = OrderMessage {
                    v: OrderMessage::VERSION,
                    order_id: OrderId::parse(&format!("{}-o{n}", sale.sale_id))?,
                    sale_id: sale.sale_id.clone(),
                    user_id: UserId::parse(&format!("u{n}"))?,
                    quantity: Quantity::ONE,
                    shard: 0,
                    reserved_at: reserved_at.clone(),
                };
                Ok(SendMessageBatchRequestEntry::builder()
                    .id(format!("m{n}"))
                    .message_body(serde_json::to_string(&message)?)
                    .build()?)
            })
            .collect::<Result<Vec<_>, BoxError>>()?;
        let out = sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        if !out.failed.is_empty() {
            return Err(format!("SendMessageBatch refused {:?}", out.failed).into());
        }
    }
    Ok(())
}

/// The writer's metric lines (one per invocation), to sum a counter.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut all) = self.0.lock() {
            all.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn counter(&self, counter: Counter) -> u64 {
        let Ok(all) = self.0.lock() else {
            return 0;
        };
        String::from_utf8_lossy(&all)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|doc| doc.get(counter.name())?.as_u64())
            .sum()
    }
}

/// Orders by status (a consistent Scan; buyer records have no `saleId`).
async fn statuses(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<BTreeMap<String, u64>, BoxError> {
    let items: Vec<std::collections::HashMap<String, AttributeValue>> = db
        .scan()
        .table_name(table)
        .filter_expression("attribute_exists(saleId)")
        .projection_expression("#s")
        .expression_attribute_names("#s", "status")
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<_, _>>()
        .await
        .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?;
    let mut by_status = BTreeMap::new();
    for item in items {
        let status = match item.get("status") {
            Some(AttributeValue::S(s)) => s.clone(),
            other => format!("{other:?}"),
        };
        *by_status.entry(status).or_insert(0) += 1;
    }
    Ok(by_status)
}

/// [`ADMIN_HISTORY`] audit entries (pauses and resumes, as the console
/// writes them) and [`REPORTS`] reconcile reports of a few KB each.
async fn admin_history(catalog: &DynamoCatalog, sale: &Sale) -> Result<(), BoxError> {
    for n in 0..ADMIN_HISTORY {
        let action = if n % 2 == 0 { "pause" } else { "resume" };
        let entry = serde_json::json!({
            "at": clock::now_ms(),
            "by": "bench-operator",
            "action": action,
            "before": {"status": "LIVE"},
            "after": {"status": if n % 2 == 0 { "PAUSED" } else { "LIVE" }},
        });
        catalog.append_audit(&sale.sale_id, &entry).await?;
    }
    let violations: Vec<_> = (0..40)
        .map(|n| serde_json::json!({"kind": "STALE_RESERVATION", "orderId": format!("o{n:030}")}))
        .collect();
    for _ in 0..REPORTS {
        let report = serde_json::json!({"saleId": sale.sale_id.as_str(), "violations": violations});
        catalog
            .store_report(&sale.sale_id, &report.to_string())
            .await?;
    }
    Ok(())
}

async fn sale_item(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    sale: &Sale,
) -> Result<HashMap<String, AttributeValue>, BoxError> {
    Ok(db
        .get_item()
        .table_name(table)
        .key("saleId", AttributeValue::S(sale.sale_id.to_string()))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?
        .item
        .ok_or_else(|| format!("sale {} is missing from {table}", sale.sale_id))?)
}

/// An item's size as DynamoDB counts it (each attribute's name and value in
/// bytes, "Item sizes and formats"), the count the strict layer's 400 KB
/// check makes on the wire form (`strict::dynamo::item_size`).
fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(value: &AttributeValue) -> usize {
    let number = |n: &str| n.len().div_ceil(2) + 1;
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(all) => all.iter().map(String::len).sum(),
        AttributeValue::Ns(all) => all.iter().map(|n| number(n)).sum(),
        AttributeValue::Bs(all) => all.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(all) => 3 + all.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(all) => {
            3 + all
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
        _ => 0,
    }
}
