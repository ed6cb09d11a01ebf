//! What the writers table measures besides the drain: `make plan`'s
//! expiry model against a release-unpaid run over the drained orders, and
//! how much memory the jobs' whole-sale reads of the sale take.

use crate::{BoxError, REDIS_TIMEOUT};
use seckill_infra::peak::peak_added;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::clock;
use seckill_shared::domain::Sale;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// release-unpaid's run in the expiry check: the function's, its
/// `Timeout` less the handler's margin.
pub(super) const EXPIRY_RUN: Duration = Duration::from_secs(55);

/// Orders of release-unpaid's chunk (`shared/src/app/jobs.rs`), the first
/// of which is timed for the check's model input.
pub(super) const EXPIRY_CHUNK: i32 = 98;

/// The peak resident memory each whole-sale read of the jobs adds over
/// what the process held before it: the orders of the sale (what the
/// rebuild and the checker read), and reconcile's observation (those
/// orders, Redis's view of the sale and the queues).
pub(super) struct MemoryCheck {
    pub(super) orders: usize,
    pub(super) all_orders_bytes: u64,
    pub(super) observe_bytes: u64,
    /// A rebuild's staging of the whole ledger, a page at a time (the sale
    /// is loaded, so the commit drops what was staged).
    pub(super) rebuild_bytes: u64,
    /// Reconcile's read and judgement of the sale cut into `slices` slices
    /// of its buyers (on local disk, judged one at a time).
    pub(super) sliced_bytes: u64,
    pub(super) slices: u32,
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

/// The jobs' whole-sale reads over the drained sale, each measured by
/// [`peak_added`].
pub(super) async fn memory_check(
    db: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    redis_url: &str,
    (sales_table, orders_table): (&str, &str),
    (queue_url, dlq_url): (&str, &str),
    sale: &Sale,
) -> Result<Option<MemoryCheck>, BoxError> {
    use seckill_shared::adapters::sqs::SqsInspector;
    use seckill_shared::app::invariants::InvariantChecker;
    let orders = DynamoOrders::new(db.clone(), orders_table, sales_table);
    let read = std::sync::atomic::AtomicUsize::new(0);
    let all_orders = peak_added(async {
        let all = orders.all_orders_of_sale(&sale.sale_id).await?;
        read.store(all.len(), Ordering::Relaxed);
        Ok::<_, BoxError>(())
    })
    .await;
    let checker = InvariantChecker::new(
        RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?,
        DynamoCatalog::new(db.clone(), sales_table),
        orders,
        SqsInspector::new(sqs.clone(), queue_url, Some(dlq_url.to_owned())),
    );
    let observe = peak_added(async {
        checker.observe(&sale.sale_id).await?;
        Ok::<_, BoxError>(())
    })
    .await;
    // Slices are sized by the sale's stock, the rows it can hold.
    let checker =
        checker.with_slice_orders(u64::from(sale.total_stock).div_ceil(BENCH_SLICES).max(1));
    let slices = std::sync::atomic::AtomicU32::new(0);
    let sliced = peak_added(async {
        let mut read = checker
            .read(&sale.sale_id)
            .await?
            .ok_or("the sale is gone")?;
        checker.judge(&mut read, true, &[]).await?;
        slices.store(read.slices(), Ordering::Relaxed);
        Ok::<_, BoxError>(())
    })
    .await;
    let stock = RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?;
    let jobs = seckill_shared::app::jobs::Jobs::<SqsInspector>::new(
        stock.clone(),
        DynamoCatalog::new(db.clone(), sales_table),
        DynamoOrders::new(db.clone(), orders_table, sales_table),
        None,
        Duration::ZERO,
    );
    let rebuild = peak_added(async {
        let survivors = stock.survivors(sale).await?;
        let mut rebuild = stock
            .begin_rebuild(sale, clock::now_ms(), survivors)
            .await?;
        let at = jobs.stage_ledger(&sale.sale_id, &mut rebuild).await?;
        stock.commit_rebuild(rebuild, at).await?;
        Ok::<_, BoxError>(())
    })
    .await;
    Ok(match (all_orders, observe, rebuild, sliced) {
        (
            Some((all_orders_bytes, ())),
            Some((observe_bytes, ())),
            Some((rebuild_bytes, ())),
            Some((sliced_bytes, ())),
        ) => Some(MemoryCheck {
            orders: read.load(Ordering::Relaxed),
            all_orders_bytes,
            observe_bytes,
            rebuild_bytes,
            sliced_bytes,
            slices: slices.load(Ordering::Relaxed),
        }),
        _ => None,
    })
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
    release_many(&orders, &stock, &due, now).await?;
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
