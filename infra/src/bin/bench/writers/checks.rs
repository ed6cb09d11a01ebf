//! What the writers table measures besides the drain: `make plan`'s
//! expiry model against a release-unpaid run over the drained orders, and
//! how much memory the jobs' whole-sale reads of the sale take.

use crate::{BoxError, REDIS_TIMEOUT};
use seckill_infra::peak::{Peak, Read, Target, in_child};
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::clock;
use seckill_shared::domain::Sale;
use seckill_shared::ports::OrderLedger;
use std::time::{Duration, Instant};

/// release-unpaid's run in the expiry check: the function's, its
/// `Timeout` less the handler's margin.
pub(super) const EXPIRY_RUN: Duration = Duration::from_secs(55);

/// Orders of release-unpaid's chunk (`shared/src/app/jobs.rs`), the first
/// of which is timed for the check's model input.
pub(super) const EXPIRY_CHUNK: usize = 98;

/// The jobs' reads of the drained sale, each in a process of its own
/// (`seckill_infra::peak`): its peak resident memory, and what it held
/// before the read.
pub(super) struct MemoryCheck {
    pub(super) orders: u64,
    /// Every order of the sale in memory (`all_orders_of_sale`).
    pub(super) all_orders: Peak,
    /// The checker's whole read in one slice (`observe`).
    pub(super) observe: Peak,
    /// A rebuild's staging of the whole ledger, a page at a time (the sale
    /// is loaded, so the commit drops what was staged).
    pub(super) rebuild: Peak,
    /// Reconcile's read and judgement of the sale cut into `slices` slices
    /// of its buyers (on local disk, judged one at a time).
    pub(super) sliced: Peak,
    pub(super) slices: u64,
}

/// The slices the sliced read cuts the drained sale into, about.
const BENCH_SLICES: u64 = 10;

/// release-unpaid over the drained orders, all past their payment window,
/// for [`EXPIRY_RUN`], next to what `make plan`'s model says of a run that
/// long, fed this run's own query and chunk times.
pub(super) struct ExpiryCheck {
    pub(super) run: Duration,
    pub(super) query_ms: f64,
    pub(super) chunk_ms: f64,
    pub(super) predicted: f64,
    pub(super) expired: usize,
    /// Whether the run used its whole time; one that expired every due
    /// order first says only that the model's figure was not reached.
    pub(super) ran_its_time: bool,
}

/// The jobs' reads of the drained sale, each in a process of its own
/// calling `endpoint` (the strict layer).
pub(super) async fn memory_check(
    endpoint: &str,
    redis_url: &str,
    (sales_table, orders_table): (&str, &str),
    (queue_url, dlq_url): (&str, &str),
    sale: &Sale,
) -> Result<Option<MemoryCheck>, BoxError> {
    // Slices are sized by the sale's stock, the rows it can hold.
    let slice_orders = u64::from(sale.total_stock).div_ceil(BENCH_SLICES).max(1);
    let target = Target {
        sale_id: sale.sale_id.to_string(),
        redis_url: redis_url.to_owned(),
        endpoint: endpoint.to_owned(),
        sales_table: sales_table.to_owned(),
        orders_table: orders_table.to_owned(),
        queue_url: queue_url.to_owned(),
        dlq_url: dlq_url.to_owned(),
        slice_orders,
        slices: 1,
    };
    if seckill_infra::peak::resident().is_none() {
        return Ok(None);
    }
    Ok(Some(MemoryCheck {
        orders: u64::from(sale.total_stock),
        all_orders: in_child(Read::Orders, &target).await?,
        observe: in_child(Read::Observe, &target).await?,
        rebuild: in_child(Read::Rebuild, &target).await?,
        sliced: in_child(Read::Sliced, &target).await?,
        slices: u64::from(sale.total_stock).div_ceil(slice_orders),
    }))
}

/// release-unpaid, through `db` (the strict layer), over the drained
/// orders of `sale`, all past their payment window at the job's clock:
/// first the model's inputs measured (one query of every bucket, one
/// chunk released), then one run of [`EXPIRY_RUN`] counted.
pub(super) async fn expiry_check(
    db: &aws_sdk_dynamodb::Client,
    redis_url: &str,
    sales_table: &str,
    orders_table: &str,
    sale: &Sale,
) -> Result<ExpiryCheck, BoxError> {
    use seckill_shared::app::jobs::Jobs;
    use seckill_shared::app::release::release_many;
    let orders = DynamoOrders::new(db.clone(), orders_table, sales_table);
    let stock = RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?;
    // Past the sale's payment window, so every written order is due, and
    // within the hours after its end in which the job still looks.
    let window_ms = i64::from(sale.payment_window_seconds) * 1_000;
    let now = clock::now_ms() + window_ms + 60_000;
    let began = Instant::now();
    let due = orders.due_unpaid(&sale.sale_id, now, EXPIRY_CHUNK).await?;
    let query_ms = began.elapsed().as_secs_f64() * 1_000.0;
    let began = Instant::now();
    release_many(&orders, &stock, None, &due, now).await?;
    let chunk_ms = began.elapsed().as_secs_f64() * 1_000.0;
    let jobs = Jobs::<seckill_shared::adapters::sqs::SqsInspector, _, _, _>::new(
        stock,
        DynamoCatalog::new(db.clone(), sales_table),
        orders,
        None,
        Duration::from_secs(600),
    );
    let report = jobs
        .release_unpaid(now, Instant::now() + EXPIRY_RUN)
        .await?;
    Ok(ExpiryCheck {
        run: EXPIRY_RUN,
        query_ms,
        chunk_ms,
        predicted: seckill_infra::plan::expiry_model(
            EXPIRY_RUN.as_secs_f64(),
            query_ms / 1_000.0,
            chunk_ms / 1_000.0,
        ),
        expired: report.expired,
        ran_its_time: report.stopped_early,
    })
}
