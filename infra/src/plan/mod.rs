//! `seckill-local plan` (`make plan`): a capacity plan for one sale on AWS,
//! worked out from the sale's size and the project's own figures, before
//! anything is deployed. Pure arithmetic: no AWS call, no local service.
//!
//! - [`PlanInput`]: the sale (units, buyers, how they arrive, first come
//!   first served or a lottery window), the region's quotas at AWS's
//!   defaults, and the latency figures the model assumes; the three
//!   built-in examples are [`Example`]s.
//! - [`plan`]: the model (`docs/operations.md`, "Capacity plan", writes
//!   each formula down). Refuses input that cannot describe a sale
//!   ([`PlanError`]).
//! - [`Plan`]: every figure, the table of need against default with a
//!   verdict, the quota requests, the `sam deploy --parameter-overrides`
//!   line and the cost of the sale's hour; its `Display` is what the
//!   command prints.
//! - [`PlanArgs`]: the command line's flags, one per [`PlanInput`] field.

use crate::lambda_limits;
use seckill_shared::adapters::dynamo::order_index::{MAX_IN_FLIGHT, SALE_BUCKETS, STREAM_PAGE};
use seckill_shared::app::draw::{CHUNK as DRAW_CHUNK, SEND_CONCURRENCY};
use seckill_shared::domain::sale_spec::{
    ADMISSION_WINDOW_SECS, MAX_SHARDS, MAX_TOTAL_STOCK, PAYMENT_WINDOW_SECS,
};
use std::fmt;

// ------------------------------------------------------------ the project's figures

/// The order-writer's event source: `BatchSize` and
/// `MaximumBatchingWindowInSeconds` in `template.yaml`.
const BATCH_SIZE: f64 = 10.0;
const BATCHING_WINDOW_SECS: f64 = 1.0;
/// `OrderWriterConcurrency`: the template's default, and the range the event
/// source's `ScalingConfig.MaximumConcurrency` takes.
const WRITERS_DEFAULT: u64 = 5;
const WRITERS_MIN: u64 = 2;
const WRITERS_MAX: u64 = 1_000;
/// The stage throttle's defaults (`ApiThrottlingRateLimit`,
/// `ApiThrottlingBurstLimit`): the plan never sets them lower.
const STAGE_RATE_DEFAULT: f64 = 5_000.0;
const STAGE_BURST_DEFAULT: f64 = 5_000.0;
/// `ApiPollRateLimit`'s default: the plan never sets it lower.
const POLL_RATE_DEFAULT: f64 = 2_000.0;
/// `RedisShards`: the template's `AllowedValues` are 1 to this.
const TEMPLATE_MAX_REDIS_SHARDS: u64 = 3;
/// A master is planned at no more than this share of its measured ceiling:
/// latency climbs toward `REDIS_TIMEOUT_MS` (250 ms, then `503`) long
/// before the engine thread is saturated.
const REDIS_HEADROOM: f64 = 0.5;

/// Write units one order costs at batch size 10 (`docs/operations.md`,
/// "Costs"): the order put and the buyer's ledger record at 2 WRU each
/// (transactional) into the orders table, one entry in each of its three
/// indexes, and a tenth of the sale item's 2 WRU update.
const ORDERS_TABLE_WRU_PER_ORDER: f64 = 4.0;
const INDEXES: f64 = 3.0;
const INDEX_WRU_PER_ORDER: f64 = 1.0;
const SALE_ITEM_WRU_PER_TRANSACTION: f64 = 2.0;
const WRU_PER_ORDER: f64 = ORDERS_TABLE_WRU_PER_ORDER
    + INDEXES * INDEX_WRU_PER_ORDER
    + SALE_ITEM_WRU_PER_TRANSACTION / BATCH_SIZE;
/// A payment (`docs/operations.md`, "Costs"): the update, the status
/// index's delete and put, the pending index's delete, `byBuyer`'s update.
const WRU_PER_PAYMENT: f64 = 5.0;
/// An expiry (`DynamoOrders::expire_many`): in a transaction of
/// [`EXPIRE_BATCH`], the order's update and its buyer record's at 2 WRU
/// each (transactional), a share of the sale item's, plus the four index
/// writes a payment also makes (the status index's delete and put, the
/// pending index's delete, `byBuyer`'s update): 4 + 2 / 49 + 4.
const WRU_PER_EXPIRY: f64 = 8.0 + SALE_ITEM_WRU_PER_TRANSACTION / EXPIRE_BATCH;
/// Reads: an order poll is one consistent `GetItem` (1 RRU under 4 KB); a
/// ticket poll one `byBuyer` query (eventually consistent, 0.5); a payment
/// one consistent read; an expiry one consistent read (its order, in a
/// `BatchGetItem`) and a share of its batch's read of the sale's return
/// position.
const RRU_PER_ORDER_POLL: f64 = 1.0;
const RRU_PER_TICKET_POLL: f64 = 0.5;
const RRU_PER_PAYMENT: f64 = 1.0;
const RRU_PER_EXPIRY: f64 = 1.0 + 1.0 / EXPIRE_BATCH;
/// An order item, index attributes and all, at most: the pending index
/// projects it whole (`ProjectionType: ALL`), so a due order found costs
/// its size (`plan::tests::an_order_item_is_within_its_planned_size`
/// measures one).
pub const ORDER_ITEM_BYTES: f64 = 512.0;

/// An expiry's share of the queries that found it: each chunk queries
/// every bucket of the sale for up to [`RELEASE_CHUNK`] due orders
/// (eventually consistent: 0.5 RRU a 4 KB read, rounded up a query) and
/// releases the first [`RELEASE_CHUNK`] of them. Counted with every bucket
/// holding that many due, as it does through the bulk of a sale's expiry.
fn rru_per_expiry_queries() -> f64 {
    let per_query = (RELEASE_CHUNK * ORDER_ITEM_BYTES / 4_096.0).ceil() * 0.5;
    f64::from(SALE_BUCKETS) * per_query / RELEASE_CHUNK
}
/// The operator console open for the hour: its one shared count of the
/// orders (`seckill_shared::app::live::count_holds`) reads the index once
/// a second, or as often as 100 read units a second pay for, however many
/// consoles poll.
fn console_rru_per_hour(orders: f64) -> f64 {
    use seckill_shared::app::live::{
        COUNT_READ_UNITS_PER_SECOND, INDEX_BUCKETS, READ_UNITS_PER_ORDER, STORED_STATUSES,
    };
    let per_count = 0.5 * STORED_STATUSES.len() as f64 * f64::from(INDEX_BUCKETS)
        + READ_UNITS_PER_ORDER * orders;
    per_count.min(COUNT_READ_UNITS_PER_SECOND) * 3_600.0
}

/// Redis calls per poll: `GET /orders/{id}` of a `QUEUED` order reads its
/// reservation; `GET /sales/{id}/orders` reads the ticket and the buyer's
/// reservations (`OrderQueries::my_ticket`, `my_orders`).
const REDIS_CALLS_PER_ORDER_POLL: f64 = 1.0;
const REDIS_CALLS_PER_TICKET_POLL: f64 = 2.0;

/// release-unpaid (`shared/src/app/jobs.rs`): `RELEASE_CHUNK` due orders
/// per query of every bucket ([`MAX_IN_FLIGHT`] queries at a time), then
/// released together (one `BatchGetItem`, a transaction per
/// [`EXPIRE_BATCH`], the Redis returns sent together), until none is due or
/// the run's time is up: the function's `Timeout` (60 s) less the
/// handler's 5-s margin. The schedule runs it once a minute
/// (`rate(1 minute)`).
const RELEASE_CHUNK: f64 = 98.0;
const EXPIRE_BATCH: f64 = seckill_shared::adapters::dynamo::expiry::EXPIRE_BATCH as f64;
const RELEASE_RUN_SECS: f64 = 55.0;
const RELEASE_PERIOD_SECS: f64 = 60.0;
/// One query of one bucket inside the region (an assumption).
const DYNAMO_QUERY_MS: f64 = 10.0;
/// One page of a sale's index ([`STREAM_PAGE`] orders, a few hundred KB)
/// inside the region (an assumption): prewarm's rebuild and reconcile read
/// the ledger a page at a time, [`MAX_IN_FLIGHT`] buckets at once. Locally
/// the rebuild took as long as the pages alone (`seckill-bench
/// --only-ledger`): Redis's staging hides behind the reads.
const DYNAMO_PAGE_MS: f64 = 40.0;
/// Reconcile's Redis read of a sale, per buyer: its `HSCAN` chunks are
/// paced to leave the purchases their Redis (`seckill-bench
/// --only-reconcile` measures it).
const REDIS_READ_US_PER_BUYER: f64 = 25.0;
/// CPU each job spends per order of the sale, all its work (parsing the
/// pages, staging or slicing, judging), measured in a process of its own
/// by `seckill-bench --only-ledger`, a little above what its runs used.
const PREWARM_CPU_US_PER_ORDER: f64 = 11.0;
const RECONCILE_CPU_US_PER_ORDER: f64 = 20.0;
/// Lambda gives a function one vCPU at 1,769 MB, and below that a share
/// of one in proportion to its memory: the jobs' 256 MB get a seventh.
const VCPU_MB: f64 = 1_769.0;
/// The `JobsMemorySize` steps the plan picks from for prewarm and
/// reconcile, the smallest that holds both to their `Timeout`: the first
/// is the template's default, the last a whole vCPU (more memory adds a
/// second vCPU, which the jobs' one thread of work cannot use).
pub const JOBS_MEMORY_MB: [u32; 4] = [256, 512, 1_024, 1_769];
/// The `Timeout` of `PrewarmFunction` and `ReconcileFunction` in
/// `template.yaml`.
pub const PREWARM_TIMEOUT_SECS: f64 = 60.0;
pub const RECONCILE_TIMEOUT_SECS: f64 = 120.0;
/// One `SendMessageBatch` inside the region (an assumption): the draw sends
/// its winners ten to a call, [`SEND_CONCURRENCY`] calls at a time.
const SQS_CALL_MS: f64 = 20.0;

/// Functions besides purchase and orders-api that run on demand during a
/// sale, one environment each: admin-api, prewarm, release-unpaid,
/// reconcile.
const OTHER_FUNCTIONS: f64 = 4.0;
/// Lambda keeps this much of the account's concurrency unreserved: the
/// order-writer's reservation and the purchase's provisioned concurrency
/// must leave it to every other function.
const UNRESERVED_MINIMUM: f64 = 100.0;
/// A quota request asks for the need plus a quarter: the account's other
/// APIs and functions, and the estimate's own error.
const QUOTA_HEADROOM: f64 = 1.25;
/// Scheduled runs in an hour: prewarm and release-unpaid every minute,
/// reconcile every five.
const JOB_RUNS_PER_HOUR: f64 = 60.0 + 60.0 + RECONCILE_RUNS_PER_HOUR;
const RECONCILE_RUNS_PER_HOUR: f64 = 12.0;

/// `MemorySize` in `template.yaml`: purchase 512 MB, every other function
/// 256 MB.
const PURCHASE_GB: f64 = 0.5;
const OTHER_GB: f64 = 0.25;

/// us-east-1 list prices (`docs/operations.md`, "Costs"; the provisioned
/// concurrency and CloudFront prices are assumptions of this plan, to
/// re-check like the others).
mod price {
    pub const API_PER_MILLION: f64 = 1.00;
    pub const LAMBDA_REQUESTS_PER_MILLION: f64 = 0.20;
    pub const LAMBDA_GB_SECOND: f64 = 0.000_016_666_7;
    pub const PROVISIONED_GB_SECOND: f64 = 0.000_004_166_7;
    pub const PROVISIONED_DURATION_GB_SECOND: f64 = 0.000_009_722_2;
    pub const SQS_PER_MILLION: f64 = 0.40;
    pub const WRU_PER_MILLION: f64 = 0.625;
    pub const RRU_PER_MILLION: f64 = 0.125;
    pub const LOGS_PER_GB: f64 = 0.50;
    pub const XRAY_PER_MILLION: f64 = 5.00;
    pub const CLOUDFRONT_PER_10K: f64 = 0.0075;
    /// Log written per invocation: START, END, REPORT and one EMF line.
    pub const LOG_GB_PER_INVOCATION: f64 = 0.8 / 1_000_000.0;
    /// X-Ray's default sampling keeps about this share of requests.
    pub const XRAY_SAMPLED: f64 = 0.05;
}

/// An ElastiCache node type the template allows, with the purchase
/// decisions per second one master of it is assumed to run and its price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedisNode {
    pub name: &'static str,
    /// Assumed `EVALSHA`s of the purchase script per second on one master.
    pub decisions_per_sec: f64,
    /// On-demand $ per node-hour, us-east-1.
    pub dollars_per_hour: f64,
}

/// `RedisNodeType`'s allowed values. The decisions per second are
/// assumptions, to re-check on the node itself with `make bench`'s ceiling
/// row (`seckill-bench --only-ceiling` against the node; past local runs
/// in `docs/performance-log.md`). The script runs on the engine's one
/// thread, so a bigger node of the same family adds network I/O threads,
/// not script speed; t4g nodes run on CPU credits. Prices: t4g.small and
/// m7g.large from "Costs", the others assumed from the same price list.
pub const REDIS_NODES: [RedisNode; 7] = [
    RedisNode {
        name: "cache.t4g.micro",
        decisions_per_sec: 10_000.0,
        dollars_per_hour: 0.016,
    },
    RedisNode {
        name: "cache.t4g.small",
        decisions_per_sec: 15_000.0,
        dollars_per_hour: 0.032,
    },
    RedisNode {
        name: "cache.t4g.medium",
        decisions_per_sec: 20_000.0,
        dollars_per_hour: 0.065,
    },
    RedisNode {
        name: "cache.m7g.large",
        decisions_per_sec: 40_000.0,
        dollars_per_hour: 0.158,
    },
    RedisNode {
        name: "cache.m7g.xlarge",
        decisions_per_sec: 50_000.0,
        dollars_per_hour: 0.315,
    },
    RedisNode {
        name: "cache.r7g.large",
        decisions_per_sec: 40_000.0,
        dollars_per_hour: 0.219,
    },
    RedisNode {
        name: "cache.r7g.xlarge",
        decisions_per_sec: 50_000.0,
        dollars_per_hour: 0.437,
    },
];

/// The template parameters the plan sets, spelled as `template.yaml` names
/// them, in the order the `--parameter-overrides` line gives them.
pub const PARAMETERS: [&str; 11] = [
    "ApiThrottlingRateLimit",
    "ApiThrottlingBurstLimit",
    "RedisNodeType",
    "RedisShards",
    "OrderWriterConcurrency",
    "OrderWriterReserved",
    "PurchaseProvisionedConcurrency",
    "OrdersApiProvisionedConcurrency",
    "OrdersTableWarmWriteUnitsPerSecond",
    "ApiPollRateLimit",
    "JobsMemorySize",
];

mod cli;
mod input;
mod model;
mod render;
mod report;
#[cfg(test)]
mod tests;

pub use self::cli::*;
pub use self::input::*;
pub use self::model::*;
use self::render::*;
use self::report::*;
