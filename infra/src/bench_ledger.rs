//! `make bench`'s ledger row: the jobs on a sale of many orders, each in a
//! process of its own ([`crate::peak`]), its peak memory (what Lambda
//! reports as "Max Memory Used") and its time next to its function's
//! `MemorySize` and `Timeout`.
//!
//! The orders are planted in the emulator's orders table with
//! `BatchWriteItem`, as the order-writer's transactions leave them (the
//! same items: [`order_index::order_item`] and the buyers' records; a
//! million through the writer would take the emulator hours), every one
//! `PENDING_PAYMENT` and past its payment window, [`ORDERS_PER_BUYER`] to a
//! buyer; the sale item says every unit sold. Redis holds nothing of the
//! sale: it was lost. Then, in turn:
//!
//! 0. **the index's pages alone**: the ledger read as the rebuild and
//!    reconcile read it, each page dropped: the part of their time that
//!    is the emulator's index, not the job.
//! 1. **prewarm**: `Jobs::prewarm_sale` rebuilds the live sale from the
//!    ledger (the queue and the DLQ empty).
//! 2. **prewarm, one shard lost**: the sale is spread over
//!    [`LEDGER_SHARDS`] shards; the bench deletes the keys of shard 0 of
//!    the sale prewarm just rebuilt, and prewarm rebuilds that shard alone,
//!    from the ledger and what the other shards hold
//!    (`RedisStock::survivors`).
//! 3. **reconcile**: reconcile's read and judgement of the sale
//!    (`InvariantChecker::read` in slices of `SLICE_ORDERS`, `judge`); it
//!    must find nothing wrong with the sale prewarm rebuilt.
//! 4. **release-unpaid**: one run with the function's time, expiring what
//!    it can of the due orders (on the emulator, its transactions set the
//!    pace; the memory is the figure).
//! 5. **every order in memory** (`all_orders_of_sale`, what the jobs did
//!    before they read a page at a time), only up to
//!    [`WHOLE_READ_UP_TO`] orders: the curve is enough.
//!
//! A job over its function's memory, or prewarm or reconcile over its
//! `Timeout` once the emulator's index (the pages read alone) is taken off
//! its time, fails the run (release-unpaid keeps its own deadline, between
//! chunks the emulator paces); prewarm must rebuild the sale, and
//! reconcile find it clean.

use crate::emulator;
use crate::peak::{self, Peak, Read, Target};
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::order_index;
use seckill_shared::adapters::dynamo::orders::buyer_key;
use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::{SaleKeys, home_shard};
use seckill_shared::app::invariants::SLICE_ORDERS;
use seckill_shared::clock;
use seckill_shared::domain::orders::{NewOrder, OrderStatus};
use seckill_shared::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};
use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

/// Shards of the sale: a sale of a million units spreads its stock over
/// several, and a rebuild of one lost shard reads the others.
pub const LEDGER_SHARDS: u32 = 8;
/// Orders each buyer holds (the sale's per-user limit).
pub const ORDERS_PER_BUYER: u32 = 4;
/// The largest sale whose every order is also read into memory at once.
pub const WHOLE_READ_UP_TO: u32 = 100_000;
/// `BatchWriteItem` calls in flight while planting.
const PLANTERS: usize = 16;
/// DynamoDB's most items a `BatchWriteItem` takes.
const BATCH: usize = 25;
const TIMEOUT: Duration = Duration::from_secs(60);

/// The memory at which a Lambda function has one vCPU; below it, its
/// share of one is its memory over this (AWS's Lambda documentation).
const VCPU_MB: f64 = 1_769.0;

/// A function's limits, as `template.yaml` gives them.
struct Limits {
    memory_mb: u64,
    timeout: Duration,
    /// Whether the run's time is checked against `timeout`.
    timed: bool,
    /// Whether its function takes `JobsMemorySize`, which `make plan` sizes
    /// for the sale: its CPU is then also shown at the plan's memory.
    sized_by_plan: bool,
}

const PREWARM: Limits = Limits {
    memory_mb: 256,
    timeout: Duration::from_secs(60),
    timed: true,
    sized_by_plan: true,
};
const RECONCILE: Limits = Limits {
    memory_mb: 256,
    timeout: Duration::from_secs(120),
    timed: true,
    sized_by_plan: true,
};
const RELEASE: Limits = Limits {
    memory_mb: 256,
    timeout: Duration::from_secs(60),
    timed: false,
    sized_by_plan: false,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One job's run on the sale.
pub struct Step {
    pub job: &'static str,
    pub peak: Peak,
    limits: Option<Limits>,
    /// Of its time, what the emulator's index took: the pages read alone
    /// (for the jobs that read them once), which on DynamoDB is a few
    /// seconds a million orders (`make plan`).
    index: Duration,
}

impl Step {
    /// Its time less the emulator's index.
    pub fn own(&self) -> Duration {
        self.peak.wall.saturating_sub(self.index)
    }
}

/// What the row measured.
pub struct LedgerRun {
    pub orders: u32,
    pub buyers: u32,
    pub plant: Duration,
    pub steps: Vec<Step>,
    /// The `JobsMemorySize` `make plan` sets for a sale of this many
    /// orders; the memory checked is still the template's default, the
    /// stricter.
    pub planned_jobs_mb: u32,
}

impl LedgerRun {
    /// Every step that ran over its function's memory or time.
    pub fn over_limits(&self) -> Vec<String> {
        self.steps
            .iter()
            .filter_map(|s| {
                let limits = s.limits.as_ref()?;
                let over_memory = s.peak.peak > limits.memory_mb * 1024 * 1024;
                // release-unpaid keeps its own deadline (it stops between
                // chunks), so its time is the deadline and the last chunk,
                // and the emulator sets a chunk's pace.
                let over_time = limits.timed && s.own() > limits.timeout;
                (over_memory || over_time).then(|| {
                    format!(
                        "{} on {} orders: {} MiB in {:.1} s (less the emulator's index), its function has {} MB and {} s",
                        s.job,
                        self.orders,
                        mib(s.peak.peak),
                        s.own().as_secs_f64(),
                        limits.memory_mb,
                        limits.timeout.as_secs()
                    )
                })
            })
            .collect()
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

impl fmt::Display for LedgerRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "ledger: {} orders of {} buyers planted in {:.0} s; each job in a process of its own",
            self.orders,
            self.buyers,
            self.plant.as_secs_f64()
        )?;
        writeln!(
            f,
            "| job | peak RSS | added by the job | time | less the index's pages | CPU | CPU on its Lambda | at JobsMemorySize={} | its function | outcome |",
            self.planned_jobs_mb
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|")?;
        for step in &self.steps {
            let function = step.limits.as_ref().map_or("-".to_owned(), |l| {
                format!("{} MB, {} s", l.memory_mb, l.timeout.as_secs())
            });
            // Lambda gives memory / 1,769 MB of a vCPU, and no more than one
            // to the jobs' one thread.
            let on_lambda = |mb: u64| {
                format!(
                    "{:.0} s",
                    step.peak.cpu.as_secs_f64() * VCPU_MB / (mb as f64).min(VCPU_MB)
                )
            };
            let planned = step
                .limits
                .as_ref()
                .filter(|l| l.sized_by_plan)
                .map_or("-".to_owned(), |_| {
                    on_lambda(u64::from(self.planned_jobs_mb))
                });
            writeln!(
                f,
                "| {} | {} MiB | {} MiB | {:.1} s | {:.1} s | {:.1} s | {} | {} | {} | {} |",
                step.job,
                mib(step.peak.peak),
                mib(step.peak.added()),
                step.peak.wall.as_secs_f64(),
                step.own().as_secs_f64(),
                step.peak.cpu.as_secs_f64(),
                step.limits
                    .as_ref()
                    .map_or("-".to_owned(), |l| on_lambda(l.memory_mb)),
                planned,
                function,
                step.peak.note
            )?;
        }
        Ok(())
    }
}

/// Plants a sale of `orders` orders and runs the jobs on it. `endpoint` is
/// the emulator (not the strict layer: the planting is set-up).
pub async fn run(
    orders: u32,
    tag: &str,
    redis_url: &str,
    endpoint: &str,
) -> Result<LedgerRun, Error> {
    let sdk = aws::loader(aws::Caller::Tool, TIMEOUT)
        .endpoint_url(endpoint)
        .load()
        .await;
    let (db, sqs) = (aws::dynamodb(&sdk), aws::sqs(&sdk));
    let name = format!("{tag}-ledger");
    let (sales_table, orders_table) = (format!("{name}-sales"), format!("{name}-orders"));
    emulator::ensure_tables(&db, &sales_table, &orders_table).await?;
    let queues =
        emulator::ensure_queues(&sqs, &format!("{name}-q"), &format!("{name}-dlq"), 61).await?;
    let mut sale = test_sale(&name, orders, ORDERS_PER_BUYER)?;
    sale.shards = LEDGER_SHARDS;
    DynamoCatalog::new(db.clone(), &sales_table)
        .create_sale(&sale)
        .await?;

    let started = Instant::now();
    let buyers = plant(&db, &orders_table, &sale.sale_id, orders).await?;
    db.update_item()
        .table_name(&sales_table)
        .key("saleId", AttributeValue::S(sale.sale_id.to_string()))
        .update_expression("SET available = :zero, sold = :all")
        .expression_attribute_values(":zero", AttributeValue::N("0".into()))
        .expression_attribute_values(":all", AttributeValue::N(orders.to_string()))
        .send()
        .await?;
    let plant_time = started.elapsed();
    warm_indexes(endpoint, &orders_table, &sale.sale_id).await?;

    let target = Target {
        sale_id: sale.sale_id.to_string(),
        redis_url: redis_url.to_owned(),
        endpoint: endpoint.to_owned(),
        sales_table,
        orders_table,
        queue_url: queues.orders_url,
        dlq_url: queues.dlq_url,
        slice_orders: SLICE_ORDERS,
        slices: 0,
    };
    let pages = peak::in_child(Read::Pages, &target).await?;
    let index = pages.wall;
    let mut steps = vec![Step {
        job: "the index's pages alone",
        peak: pages,
        limits: None,
        index,
    }];
    for (job, read, limits, reads_index) in [
        ("prewarm (rebuild)", Read::Prewarm, PREWARM, true),
        ("prewarm (one shard lost)", Read::Prewarm, PREWARM, true),
        ("reconcile (read, judge)", Read::Sliced, RECONCILE, true),
        ("release-unpaid (one run)", Read::Release, RELEASE, false),
    ] {
        if job == "prewarm (one shard lost)" {
            lose_shard(redis_url, &sale.sale_id, 0).await?;
        }
        steps.push(Step {
            job,
            peak: peak::in_child(read, &target).await?,
            limits: Some(limits),
            index: if reads_index { index } else { Duration::ZERO },
        });
    }
    if orders <= WHOLE_READ_UP_TO {
        steps.push(Step {
            job: "every order in memory",
            peak: peak::in_child(Read::Orders, &target).await?,
            limits: None,
            index,
        });
    }
    let planned = crate::plan::plan(&crate::plan::PlanInput {
        units: i64::from(orders),
        buyers: i64::from(orders),
        ..crate::plan::PlanInput::default()
    })?;
    Ok(LedgerRun {
        orders,
        buyers,
        plant: plant_time,
        steps,
        planned_jobs_mb: planned.jobs.memory_mb,
    })
}

/// Deletes every key of shard `k` of the sale, as a Redis node lost with
/// its data would.
async fn lose_shard(redis_url: &str, sale_id: &SaleId, k: u32) -> Result<(), Error> {
    let keys = SaleKeys::shard(sale_id, k);
    let mut conn = redis::Client::open(redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    let _: () = redis::cmd("DEL")
        .arg(&keys.lost_with_the_node())
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// One query of each index the jobs read, with all the time it takes:
/// the emulator (`infra/moto/server.py`) files a table's items under each
/// index key at the index's first query, one pass over the table that
/// holds every other request to it (most of a minute at a million
/// orders), which the jobs' clients would time out on. Set-up, like the
/// planting.
async fn warm_indexes(endpoint: &str, table: &str, sale_id: &SaleId) -> Result<(), Error> {
    let sdk = aws::loader(aws::Caller::Tool, Duration::from_secs(600))
        .endpoint_url(endpoint)
        .load()
        .await;
    let db = aws::dynamodb(&sdk);
    let bucket = AttributeValue::S(order_index::bucket_key(sale_id, 0));
    for (index, key) in [
        (order_index::BY_SALE_BUCKET_STATUS, "saleBucket"),
        (order_index::PENDING_BUCKET_BY_EXPIRY, "pendingBucket"),
    ] {
        db.query()
            .table_name(table)
            .index_name(index)
            .key_condition_expression("#k = :k")
            .expression_attribute_names("#k", key)
            .expression_attribute_values(":k", bucket.clone())
            .limit(1)
            .send()
            .await?;
    }
    Ok(())
}

/// The items of order `n` of the sale and, for a buyer's first order, the
/// buyer's record holding all of theirs.
fn items_of(
    sale_id: &SaleId,
    n: u32,
    orders: u32,
    reserved_at_ms: i64,
) -> Result<Vec<HashMap<String, AttributeValue>>, Error> {
    let buyer = n / ORDERS_PER_BUYER;
    let user_id = UserId::parse(&format!("u{buyer}"))?;
    // Reserved on the buyer's home shard, named as `purchase.lua` names
    // an order made there.
    let shard = home_shard(user_id.as_str(), LEDGER_SHARDS);
    let message = OrderMessage {
        v: OrderMessage::VERSION,
        order_id: OrderId::parse(&format!("n{n:031}-s{shard}"))?,
        sale_id: sale_id.clone(),
        user_id: user_id.clone(),
        quantity: Quantity::ONE,
        shard,
        reserved_at: clock::rfc3339_ms(reserved_at_ms),
    };
    // Written when reserved, its window long past.
    let order = NewOrder::new(message, reserved_at_ms, reserved_at_ms, 900);
    let mut items = vec![order_index::order_item(
        &order,
        OrderStatus::PendingPayment,
        None,
    )];
    if n.is_multiple_of(ORDERS_PER_BUYER) {
        let held = ORDERS_PER_BUYER.min(orders - n);
        items.push(HashMap::from([
            (
                "orderId".to_owned(),
                AttributeValue::S(buyer_key(sale_id, &user_id)),
            ),
            ("held".to_owned(), AttributeValue::N(held.to_string())),
            (
                "buyerSaleId".to_owned(),
                AttributeValue::S(sale_id.to_string()),
            ),
            (
                "buyerUserId".to_owned(),
                AttributeValue::S(user_id.to_string()),
            ),
        ]));
    }
    Ok(items)
}

/// Plants the sale's orders and buyers' records; returns the buyers.
async fn plant(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    sale_id: &SaleId,
    orders: u32,
) -> Result<u32, Error> {
    let reserved_at_ms = clock::now_ms() - 2 * 3_600_000;
    let mut planters = tokio::task::JoinSet::new();
    for planter in 0..PLANTERS {
        let (db, table, sale_id) = (db.clone(), table.to_owned(), sale_id.clone());
        planters.spawn(async move {
            let mut pending = Vec::new();
            let stride = u32::try_from(PLANTERS).unwrap_or(1) * ORDERS_PER_BUYER;
            let first = u32::try_from(planter).unwrap_or(0) * ORDERS_PER_BUYER;
            // Each planter takes whole buyers, so a batch never names a
            // buyer's record twice.
            for start in (first..orders).step_by(stride as usize) {
                for n in start..(start + ORDERS_PER_BUYER).min(orders) {
                    pending.extend(items_of(&sale_id, n, orders, reserved_at_ms)?);
                }
                while pending.len() >= BATCH {
                    let batch: Vec<_> = pending.drain(..BATCH).collect();
                    write_batch(&db, &table, batch).await?;
                }
            }
            if !pending.is_empty() {
                write_batch(&db, &table, pending).await?;
            }
            Ok::<(), Error>(())
        });
    }
    while let Some(done) = planters.join_next().await {
        done??;
    }
    Ok(orders.div_ceil(ORDERS_PER_BUYER))
}

/// One `BatchWriteItem`, its unprocessed items sent again until none are.
async fn write_batch(
    db: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<HashMap<String, AttributeValue>>,
) -> Result<(), Error> {
    let mut requests: Vec<WriteRequest> = items
        .into_iter()
        .map(|item| {
            PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map(|put| WriteRequest::builder().put_request(put).build())
        })
        .collect::<Result<_, _>>()?;
    for _ in 0..20 {
        let out = db
            .batch_write_item()
            .request_items(table, requests)
            .send()
            .await?;
        requests = out
            .unprocessed_items()
            .and_then(|u| u.get(table))
            .cloned()
            .unwrap_or_default();
        if requests.is_empty() {
            return Ok(());
        }
    }
    Err(format!("{table}: items still unprocessed after 20 sends").into())
}
