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
use seckill_shared::adapters::dynamo::order_index::{MAX_IN_FLIGHT, SALE_BUCKETS};
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
/// An expiry (`DynamoOrders::expire`): one transaction of three updates
/// (order, sale item, buyer record) at 2 WRU each, plus the four index
/// writes a payment also makes (the status index's delete and put, the
/// pending index's delete, `byBuyer`'s update): 6 + 4.
const WRU_PER_EXPIRY: f64 = 10.0;
/// Reads: an order poll is one consistent `GetItem` (1 RRU under 4 KB); a
/// ticket poll one `byBuyer` query (eventually consistent, 0.5); a payment
/// one consistent read; an expiry two consistent reads (the order, the
/// sale's return position).
const RRU_PER_ORDER_POLL: f64 = 1.0;
const RRU_PER_TICKET_POLL: f64 = 0.5;
const RRU_PER_PAYMENT: f64 = 1.0;
const RRU_PER_EXPIRY: f64 = 2.0;
/// Redis calls per poll: `GET /orders/{id}` of a `QUEUED` order reads its
/// reservation; `GET /sales/{id}/orders` reads the ticket and the buyer's
/// reservations (`OrderQueries::my_ticket`, `my_orders`).
const REDIS_CALLS_PER_ORDER_POLL: f64 = 1.0;
const REDIS_CALLS_PER_TICKET_POLL: f64 = 2.0;

/// release-unpaid (`shared/src/app/jobs.rs`): `RELEASE_CHUNK` due orders
/// per query of every bucket ([`MAX_IN_FLIGHT`] queries at a time), then
/// each released one after the other, until none is due or the run's time
/// is up: the function's `Timeout` (60 s) less the handler's 5-s margin.
/// The schedule runs it once a minute (`rate(1 minute)`).
const RELEASE_CHUNK: f64 = 25.0;
const RELEASE_RUN_SECS: f64 = 55.0;
const RELEASE_PERIOD_SECS: f64 = 60.0;
/// One query of one bucket inside the region (an assumption).
const DYNAMO_QUERY_MS: f64 = 10.0;
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
const JOB_RUNS_PER_HOUR: f64 = 60.0 + 60.0 + 12.0;

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
/// row (`seckill-bench --only-ceiling` against the node): on a 2-core
/// machine one local master ran the purchase script at 42,000-52,000/s
/// (`docs/testing.md`, "Performance"). The script runs on the engine's one
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
pub const PARAMETERS: [&str; 10] = [
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
];

// ------------------------------------------------------------ input

/// One sale to plan for, the region's quotas and the latencies assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    /// The plan's title.
    pub name: String,
    /// Units for sale (one per buyer: `perUserLimit` 1, quantity 1).
    pub units: i64,
    /// People expected.
    pub buyers: i64,
    /// Purchase requests per buyer at the opening (retries, double clicks).
    pub attempts_per_buyer: f64,
    /// Seconds over which most buyers arrive at the opening.
    pub arrival_secs: f64,
    /// Purchase requests per second at the peak, given instead of derived.
    pub peak_rps: Option<f64>,
    /// The buyer page's `GET /sales/{id}` interval.
    pub sale_poll_secs: f64,
    /// Seconds the CDN keeps `GET /sales/{id}` (the `max-age` of its `Cache-Control`).
    pub sale_cache_secs: i64,
    /// CDN edge locations the buyers come through.
    pub edge_locations: i64,
    /// The page's `GET /orders/{id}` interval while the order is `QUEUED`.
    pub order_poll_secs: f64,
    /// The page's `GET /sales/{id}/orders` interval while a ticket waits
    /// for the draw (`TICKET_POLL_MS` in `web/assets/buyer.js`).
    pub ticket_poll_secs: f64,
    /// How long a buyer's page is open during the sale's hour (the CDN's
    /// requests).
    pub page_open_secs: f64,
    /// The sale's `paymentWindowSeconds`.
    pub payment_window_secs: i64,
    /// Share of orders paid within their window.
    pub paid_fraction: f64,
    /// 0: first come, first served; else the sale's `admission.window`.
    pub lottery_window_secs: i64,
    /// API Gateway's throttle per account and region: rate and burst.
    pub api_account_rps: i64,
    pub api_account_burst: i64,
    /// Lambda's concurrency per account and region.
    pub lambda_account_concurrency: i64,
    /// New execution environments a function may gain every 10 s.
    pub lambda_scale_per_10s: i64,
    /// Write units per second a new on-demand table takes at once.
    pub dynamodb_table_initial_wru: i64,
    /// Write units per second one partition key takes.
    pub partition_wcu: i64,
    /// Billed duration of a purchase invocation, ms.
    pub purchase_ms: f64,
    /// Billed duration of an orders-api invocation (a poll), ms.
    pub orders_api_ms: f64,
    /// Billed duration of an order-writer invocation (a batch of 10), ms.
    pub writer_batch_ms: f64,
    /// One call of the draw's chunk script (100 tickets), ms.
    pub draw_chunk_ms: f64,
    /// One expiry by release-unpaid (two reads, a transaction, a Redis
    /// script), ms.
    pub release_order_ms: f64,
    /// `RedisNodeType`.
    pub redis_node_type: String,
    /// Decisions per second of one master; `None`: the node's figure in
    /// [`REDIS_NODES`].
    pub redis_decisions_per_shard: Option<f64>,
    /// `RedisReplicasPerShard` (billed node-hours).
    pub redis_replicas: i64,
}

impl Default for PlanInput {
    fn default() -> Self {
        PlanInput {
            name: "custom".to_owned(),
            units: 10_000,
            buyers: 1_000_000,
            attempts_per_buyer: 3.0,
            arrival_secs: 10.0,
            peak_rps: None,
            sale_poll_secs: 3.0,
            // What the API's Cache-Control lets a CDN keep the sale view.
            sale_cache_secs: i64::from(seckill_shared::http::SALE_VIEW_MAX_AGE_SECS),
            edge_locations: 50,
            order_poll_secs: 2.0,
            ticket_poll_secs: 1.0,
            page_open_secs: 600.0,
            payment_window_secs: 900,
            paid_fraction: 0.7,
            lottery_window_secs: 0,
            api_account_rps: lambda_limits::API_RATE_PER_SEC as i64,
            api_account_burst: i64::from(lambda_limits::API_BURST),
            lambda_account_concurrency: i64::from(lambda_limits::ACCOUNT_CONCURRENCY),
            lambda_scale_per_10s: i64::from(lambda_limits::SCALING_PER_10_SECONDS),
            dynamodb_table_initial_wru: 4_000,
            partition_wcu: 1_000,
            purchase_ms: 5.0,
            orders_api_ms: 10.0,
            writer_batch_ms: 50.0,
            draw_chunk_ms: 2.0,
            release_order_ms: 30.0,
            redis_node_type: "cache.m7g.large".to_owned(),
            redis_decisions_per_shard: None,
            redis_replicas: 1,
        }
    }
}

/// The built-in examples (`--example NAME`; all three without flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Example {
    /// 10,000 units met by a million buyers, first come, first served.
    Scarce,
    /// A million units for 100,000 buyers: every buyer gets one.
    Plenty,
    /// A 10-second lottery window: 1,000 units, a million people.
    Lottery,
}

impl Example {
    pub const ALL: [Example; 3] = [Example::Scarce, Example::Plenty, Example::Lottery];

    pub fn name(self) -> &'static str {
        match self {
            Example::Scarce => "scarce",
            Example::Plenty => "plenty",
            Example::Lottery => "lottery",
        }
    }

    pub fn parse(name: &str) -> Result<Example, PlanError> {
        Example::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| PlanError::UnknownExample(name.to_owned()))
    }

    pub fn input(self) -> PlanInput {
        match self {
            Example::Scarce => PlanInput::scarce(),
            Example::Plenty => PlanInput::plenty(),
            Example::Lottery => PlanInput::lottery(),
        }
    }
}

impl PlanInput {
    /// (a) 10k units / 1M buyers, first come, first served.
    pub fn scarce() -> Self {
        PlanInput {
            name: "(a) 10k units / 1M buyers".to_owned(),
            units: 10_000,
            buyers: 1_000_000,
            ..PlanInput::default()
        }
    }

    /// (b) 1M units / 100k buyers, first come, first served.
    pub fn plenty() -> Self {
        PlanInput {
            name: "(b) 1M units / 100k buyers".to_owned(),
            units: 1_000_000,
            buyers: 100_000,
            ..PlanInput::default()
        }
    }

    /// (c) a 10-second lottery of 1,000 units for 1M people.
    pub fn lottery() -> Self {
        PlanInput {
            name: "(c) 10-second lottery of 1,000 units for 1M people".to_owned(),
            units: 1_000,
            buyers: 1_000_000,
            lottery_window_secs: 10,
            ..PlanInput::default()
        }
    }
}

/// Input that cannot describe a sale.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("{flag} must be from {min} to {max}, not {value}")]
    OutOfRange {
        flag: &'static str,
        value: String,
        min: String,
        max: String,
    },
    #[error(
        "--lottery-window-secs must be 0 (first come, first served) or a sale's admission window of {min} to {max} seconds, not {value}",
        min = ADMISSION_WINDOW_SECS.start(),
        max = ADMISSION_WINDOW_SECS.end()
    )]
    LotteryWindow { value: i64 },
    #[error("unknown --redis-node-type {0:?}; the template allows {known}", known = node_names())]
    RedisNodeType(String),
    #[error("unknown --example {0:?}; known: scarce, plenty, lottery")]
    UnknownExample(String),
    #[error("--example prints a built-in plan: give no other flag with it ({0} given)")]
    ExampleWithFlags(String),
}

fn node_names() -> String {
    REDIS_NODES.map(|n| n.name).join(", ")
}

fn in_range<T>(flag: &'static str, value: T, min: T, max: T) -> Result<(), PlanError>
where
    T: PartialOrd + fmt::Display + Copy,
{
    // Written so that NaN, which compares false with everything, fails.
    if value >= min && value <= max {
        Ok(())
    } else {
        Err(PlanError::OutOfRange {
            flag,
            value: value.to_string(),
            min: min.to_string(),
            max: max.to_string(),
        })
    }
}

impl PlanInput {
    /// Refuses zero, negative and absurd values: the bounds are the sale
    /// definition's own where it has one, else far beyond any real sale.
    pub fn validate(&self) -> Result<(), PlanError> {
        let max_stock = i64::try_from(MAX_TOTAL_STOCK).unwrap_or(i64::MAX);
        in_range("--units", self.units, 1, max_stock)?;
        in_range("--buyers", self.buyers, 1, 10_000_000_000)?;
        in_range("--attempts-per-buyer", self.attempts_per_buyer, 1.0, 100.0)?;
        in_range("--arrival-secs", self.arrival_secs, 0.1, 86_400.0)?;
        if let Some(peak) = self.peak_rps {
            in_range("--peak-rps", peak, 1.0, 100_000_000.0)?;
        }
        in_range("--sale-poll-secs", self.sale_poll_secs, 0.1, 3_600.0)?;
        in_range("--sale-cache-secs", self.sale_cache_secs, 1, 3_600)?;
        in_range("--edge-locations", self.edge_locations, 1, 10_000)?;
        in_range("--order-poll-secs", self.order_poll_secs, 0.1, 3_600.0)?;
        in_range("--ticket-poll-secs", self.ticket_poll_secs, 0.1, 3_600.0)?;
        in_range("--page-open-secs", self.page_open_secs, 1.0, 3_600.0)?;
        let window = PAYMENT_WINDOW_SECS;
        in_range(
            "--payment-window-secs",
            self.payment_window_secs,
            i64::try_from(*window.start()).unwrap_or(60),
            i64::try_from(*window.end()).unwrap_or(86_400),
        )?;
        in_range("--paid-fraction", self.paid_fraction, 0.0, 1.0)?;
        let lottery = u64::try_from(self.lottery_window_secs);
        match lottery {
            Ok(0) => {}
            Ok(w) if ADMISSION_WINDOW_SECS.contains(&w) => {}
            _ => {
                return Err(PlanError::LotteryWindow {
                    value: self.lottery_window_secs,
                });
            }
        }
        in_range("--api-account-rps", self.api_account_rps, 1, 100_000_000)?;
        in_range(
            "--api-account-burst",
            self.api_account_burst,
            1,
            100_000_000,
        )?;
        in_range(
            "--lambda-account-concurrency",
            self.lambda_account_concurrency,
            1,
            10_000_000,
        )?;
        in_range(
            "--lambda-scale-per-10s",
            self.lambda_scale_per_10s,
            1,
            10_000_000,
        )?;
        in_range(
            "--dynamodb-table-initial-wru",
            self.dynamodb_table_initial_wru,
            1,
            100_000_000,
        )?;
        in_range("--partition-wcu", self.partition_wcu, 1, 1_000_000)?;
        // Each duration within its function's Timeout.
        in_range("--purchase-ms", self.purchase_ms, 1.0, 5_000.0)?;
        in_range("--orders-api-ms", self.orders_api_ms, 1.0, 5_000.0)?;
        in_range("--writer-batch-ms", self.writer_batch_ms, 1.0, 10_000.0)?;
        in_range("--draw-chunk-ms", self.draw_chunk_ms, 0.1, 1_500.0)?;
        in_range(
            "--release-order-ms",
            self.release_order_ms,
            1.0,
            RELEASE_RUN_SECS * 1_000.0,
        )?;
        self.node()?;
        if let Some(per_shard) = self.redis_decisions_per_shard {
            in_range("--redis-decisions-per-shard", per_shard, 1.0, 10_000_000.0)?;
        }
        in_range("--redis-replicas", self.redis_replicas, 1, 2)?;
        Ok(())
    }

    fn node(&self) -> Result<RedisNode, PlanError> {
        REDIS_NODES
            .into_iter()
            .find(|n| n.name == self.redis_node_type)
            .ok_or_else(|| PlanError::RedisNodeType(self.redis_node_type.clone()))
    }

    fn is_lottery(&self) -> bool {
        self.lottery_window_secs > 0
    }
}

// ------------------------------------------------------------ the plan

/// What a row's need asks of the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within the default.
    Ok,
    /// A template parameter (or the sale's definition) must change.
    Parameter,
    /// An AWS quota must be raised first.
    QuotaRequest,
    /// Over a limit no parameter or quota raises: a hard AWS limit, or the
    /// code's own pace; the notes say what would help.
    Limit,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Ok => "ok",
            Verdict::Parameter => "parameter",
            Verdict::QuotaRequest => "quota request",
            Verdict::Limit => "limit (see notes)",
        })
    }
}

/// One line of the table: `need | default or limit | verdict`. A line that
/// breaks down the one above it has no default and no verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub item: String,
    pub need: String,
    pub default: String,
    pub verdict: Option<Verdict>,
}

/// Requests per second at the peak, by kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Purchase requests/s: at the opening, or in the lottery's window.
    pub purchase_rps: f64,
    /// `GET /sales/{id}` from every open page, at the CDN.
    pub edge_polls_rps: f64,
    /// The part of those the CDN passes to the API.
    pub sale_polls_rps: f64,
    /// `GET /orders/{id}` of buyers whose order is `QUEUED`.
    pub order_polls_rps: f64,
    /// `GET /sales/{id}/orders` of ticket holders from the draw (lottery).
    pub ticket_polls_rps: f64,
    /// The API's peak: the opening's (first come, first served), or the
    /// greater of the window's and the draw's (lottery).
    pub api_rps: f64,
    /// The burst the API must take: one second of the peak.
    pub api_burst: f64,
    /// Redis calls/s at the peak, over every master.
    pub redis_ops: f64,
}

/// Lambda concurrency (environments busy at the peak).
#[derive(Debug, Clone, PartialEq)]
pub struct Concurrency {
    pub purchase: u64,
    pub orders_api: u64,
    pub writers: u64,
    /// `PurchaseProvisionedConcurrency`.
    pub provisioned: u64,
    /// `OrdersApiProvisionedConcurrency`: the polls' peak when it grows
    /// faster than Lambda adds environments, else 0.
    pub orders_api_provisioned: u64,
    /// What the account's quota must hold.
    pub account: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RedisPlan {
    pub node: RedisNode,
    /// Decisions/s one master is assumed to run.
    pub per_master: f64,
    /// `RedisShards`.
    pub masters: u64,
    /// The sale's `shards`.
    pub sale_shards: u64,
    /// Calls/s on the busiest master at the peak.
    pub per_master_load: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DynamoPlan {
    /// Orders table writes/s during the drain (its indexes take
    /// [`INDEX_WRU_PER_ORDER`] per order each).
    pub table_wru: f64,
    pub index_wru: f64,
    /// The sale item's partition, WCU/s.
    pub sale_item_wcu: f64,
    /// One of a sale's [`SALE_BUCKETS`] keys in an index, WRU/s.
    pub bucket_wru: f64,
    /// `OrdersTableWarmWriteUnitsPerSecond`.
    pub warm: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Drain {
    /// Orders the sale takes (one unit per buyer).
    pub orders: f64,
    /// Seconds over which the orders are accepted (`202`, or the draw's
    /// winners).
    pub accept_secs: f64,
    /// `OrderWriterConcurrency`.
    pub writers: u64,
    /// Writers the target asks for, before the sale item's partition caps
    /// them.
    pub wanted_writers: u64,
    /// The most writers the sale item's partition takes.
    pub partition_writers: u64,
    /// Orders/s one writer drains.
    pub per_writer: f64,
    /// Orders/s all writers drain.
    pub rate: f64,
    /// From the first order accepted to the last written.
    pub secs: f64,
    /// A tenth of the payment window.
    pub target_secs: f64,
    /// Buyers holding a `QUEUED` order at the peak.
    pub peak_queued: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expiry {
    pub unpaid: f64,
    /// Chunks of 25 one run gets through.
    pub chunks_per_run: f64,
    pub per_run: f64,
    /// Orders/s over the minute.
    pub rate: f64,
    pub runs: f64,
    /// From the first payment window closing to the last unpaid order
    /// released.
    pub secs: f64,
    /// A tenth of the payment window, but not under two runs.
    pub target_secs: f64,
}

/// The lottery's draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    pub holders: f64,
    pub chunks: f64,
    /// From the window's close to the last ticket decided.
    pub secs: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QuotaRequest {
    pub quota: &'static str,
    pub value: u64,
    pub unit: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CostLine {
    pub item: &'static str,
    pub arithmetic: String,
    pub dollars: f64,
}

/// A sale's capacity plan: see [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub input: PlanInput,
    pub load: Load,
    pub concurrency: Concurrency,
    pub redis: RedisPlan,
    pub dynamo: DynamoPlan,
    pub drain: Drain,
    pub expiry: Expiry,
    pub draw: Option<Draw>,
    /// orders-api requests/s at its peak (polls).
    pub orders_api_rps: f64,
    pub rows: Vec<Row>,
    pub quota_requests: Vec<QuotaRequest>,
    /// `--parameter-overrides`, in [`PARAMETERS`] order.
    pub overrides: Vec<(&'static str, String)>,
    pub costs: Vec<CostLine>,
    pub notes: Vec<String>,
}

impl Drain {
    /// The writers keep pace: the drain ends within the target, or as soon
    /// as the last order is accepted (the buyers' arrival, not the writers,
    /// sets that).
    pub fn on_time(&self) -> bool {
        self.secs
            <= self
                .target_secs
                .max(self.accept_secs + BATCHING_WINDOW_SECS)
    }
}

impl Plan {
    pub fn total_cost(&self) -> f64 {
        self.costs.iter().map(|c| c.dollars).sum()
    }

    /// The `sam deploy` line.
    pub fn deploy_line(&self) -> String {
        let pairs: Vec<String> = self
            .overrides
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        format!("sam deploy --parameter-overrides {}", pairs.join(" "))
    }
}

/// Works out the plan (`docs/operations.md`, "Capacity plan").
/// The drain: `orders` accepted over `accept_secs` and written by
/// `writers`, each writing `batch` orders per invocation of `batch_ms`,
/// busy while messages wait: seconds from the first acceptance to the last
/// write, the batching window included. `make bench` checks it against a
/// drain it measures (its batch size and duration fed in).
pub fn drain_model(orders: f64, accept_secs: f64, writers: f64, batch: f64, batch_ms: f64) -> f64 {
    let rate = writers * batch / (batch_ms / 1_000.0);
    accept_secs.max(orders / rate) + BATCHING_WINDOW_SECS
}

/// Orders release-unpaid expires in one run of `run_secs`: chunks of
/// [`RELEASE_CHUNK`], each a query of every bucket (`query_secs`) then its
/// orders one after the other (`expire_secs` each). `make bench` checks it
/// against a run it measures (its query and expiry times fed in).
pub fn expiry_model(run_secs: f64, query_secs: f64, expire_secs: f64) -> f64 {
    let chunk_secs = query_secs + RELEASE_CHUNK * expire_secs;
    (run_secs / chunk_secs).floor().max(1.0) * RELEASE_CHUNK
}

pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    input.validate()?;
    let node = input.node()?;
    let lottery = input.is_lottery();
    let units = input.units as f64;
    let buyers = input.buyers as f64;
    let window = input.lottery_window_secs as f64;
    let payment_window = input.payment_window_secs as f64;

    // Orders: one unit per buyer, so the smaller of the two.
    let orders = units.min(buyers);

    // Purchases at the peak: every attempt of every buyer within the
    // arrival window; in a lottery every buyer enters once in the window.
    let purchase_rps = input.peak_rps.unwrap_or(if lottery {
        buyers / window
    } else {
        buyers * input.attempts_per_buyer / input.arrival_secs
    });

    // The draw decides every ticket, a chunk of 100 per script call; the
    // winners come first in the draw's order (the stock runs out on them),
    // each chunk of them also sent ten to a call, four calls at a time.
    let send_secs = |winners: f64| {
        (winners / (BATCH_SIZE * SEND_CONCURRENCY as f64)).ceil() * SQS_CALL_MS / 1_000.0
    };
    let chunk_secs = input.draw_chunk_ms / 1_000.0;
    let draw = lottery.then(|| {
        let chunks = (buyers / DRAW_CHUNK as f64).ceil();
        Draw {
            holders: buyers,
            chunks,
            secs: chunks * chunk_secs + send_secs(orders),
        }
    });

    // How fast orders are accepted: first come, first served, each
    // buyer's first attempt takes a unit while any is left, so at the
    // buyers' arrival rate; in a lottery the draw's first chunks decide
    // every winner.
    let accept_secs = if lottery {
        (orders / DRAW_CHUNK as f64).ceil() * chunk_secs + send_secs(orders)
    } else {
        let arrivals = purchase_rps / input.attempts_per_buyer;
        orders / arrivals
    };
    let accept_rate = orders / accept_secs.max(f64::MIN_POSITIVE);

    // Writers: enough to drain every order within a tenth of the payment
    // window (the first buyers' windows start at their write), never
    // fewer than the template's default, and never so many that the sale
    // item's partition (one 2-WRU update per transaction of 10) is over
    // its limit.
    let per_writer = BATCH_SIZE / (input.writer_batch_ms / 1_000.0);
    let target_secs = payment_window / 10.0;
    let wanted = (orders / (target_secs * per_writer)).ceil() as u64;
    let partition_writers = (input.partition_wcu as f64
        / (SALE_ITEM_WRU_PER_TRANSACTION * 1_000.0 / input.writer_batch_ms))
        .floor() as u64;
    let writers = wanted
        .max(WRITERS_DEFAULT)
        .min(partition_writers)
        .clamp(WRITERS_MIN, WRITERS_MAX);
    let drain_rate = writers as f64 * per_writer;
    let drain_secs = drain_model(
        orders,
        accept_secs,
        writers as f64,
        BATCH_SIZE,
        input.writer_batch_ms,
    );
    // Buyers holding a QUEUED order at the peak: what is accepted and not
    // yet drained, and at least one poll interval's worth of acceptances.
    let peak_queued =
        orders.min((orders - drain_rate * accept_secs).max(accept_rate * input.order_poll_secs));
    let drain = Drain {
        orders,
        accept_secs,
        writers,
        wanted_writers: wanted,
        partition_writers,
        per_writer,
        rate: drain_rate,
        secs: drain_secs,
        target_secs,
        peak_queued,
    };

    // Polls. Every open page asks for the sale every few seconds, at the
    // CDN; each edge location passes one request per cache period to the
    // API.
    let edge_polls_rps = buyers / input.sale_poll_secs;
    let sale_polls_rps =
        edge_polls_rps.min(input.edge_locations as f64 / input.sale_cache_secs as f64);
    let order_polls_rps = peak_queued / input.order_poll_secs;
    let ticket_polls_rps = if lottery {
        buyers / input.ticket_poll_secs
    } else {
        0.0
    };
    let opening_api = purchase_rps + sale_polls_rps + if lottery { 0.0 } else { order_polls_rps };
    let draw_api = if lottery {
        ticket_polls_rps + sale_polls_rps + order_polls_rps
    } else {
        0.0
    };
    let api_rps = opening_api.max(draw_api);
    let api_burst = api_rps;
    let opening_polls = if lottery { 0.0 } else { order_polls_rps };
    let redis_opening = purchase_rps + opening_polls * REDIS_CALLS_PER_ORDER_POLL;
    let redis_draw = if lottery {
        ticket_polls_rps * REDIS_CALLS_PER_TICKET_POLL
            + order_polls_rps * REDIS_CALLS_PER_ORDER_POLL
    } else {
        0.0
    };
    let redis_ops = redis_opening.max(redis_draw);
    let load = Load {
        purchase_rps,
        edge_polls_rps,
        sale_polls_rps,
        order_polls_rps,
        ticket_polls_rps,
        api_rps,
        api_burst,
        redis_ops,
    };

    // Lambda. Concurrency is requests/s x seconds per request. The purchase
    // function's peak is provisioned ahead, so the opening meets warm
    // environments and no ramp; orders-api scales on demand.
    let purchase = (purchase_rps * input.purchase_ms / 1_000.0).ceil() as u64;
    let orders_api_rps = if lottery {
        draw_api
    } else {
        sale_polls_rps + order_polls_rps
    };
    let orders_api = (orders_api_rps * input.orders_api_ms / 1_000.0).ceil() as u64;
    let provisioned = purchase;
    // The polls come at once (a draw, a long drain): more than a ramp of
    // 10 s can add are kept warm ahead.
    let orders_api_provisioned = if orders_api > input.lambda_scale_per_10s as u64 {
        orders_api
    } else {
        0
    };
    let on_demand = (orders_api - orders_api_provisioned) as f64 + OTHER_FUNCTIONS;
    let account = (provisioned as f64
        + orders_api_provisioned as f64
        + writers as f64
        + on_demand.max(UNRESERVED_MINIMUM))
    .ceil() as u64;
    let concurrency = Concurrency {
        purchase,
        orders_api,
        writers,
        provisioned,
        orders_api_provisioned,
        account,
    };

    // Redis. A first-come sale spreads over its shards, one key group per
    // master at least; a lottery sale is one shard, on one master.
    let per_master = input
        .redis_decisions_per_shard
        .unwrap_or(node.decisions_per_sec);
    let ceiling = per_master * REDIS_HEADROOM;
    let wanted_masters = (redis_ops / ceiling).ceil().max(1.0) as u64;
    let (masters, sale_shards) = if lottery {
        (1, 1)
    } else {
        (wanted_masters, wanted_masters.min(MAX_SHARDS))
    };
    let per_master_load = redis_ops / sale_shards.min(masters) as f64;
    let redis = RedisPlan {
        node,
        per_master,
        masters,
        sale_shards,
        per_master_load,
    };

    // DynamoDB, during the drain.
    let table_wru = drain_rate * ORDERS_TABLE_WRU_PER_ORDER;
    let index_wru = drain_rate * INDEX_WRU_PER_ORDER;
    let sale_item_wcu = drain_rate / BATCH_SIZE * SALE_ITEM_WRU_PER_TRANSACTION;
    let bucket_wru = index_wru / f64::from(SALE_BUCKETS);
    let initial = input.dynamodb_table_initial_wru as f64;
    let warm = if table_wru > initial {
        nice_up(table_wru)
    } else {
        0
    };
    let dynamo = DynamoPlan {
        table_wru,
        index_wru,
        sale_item_wcu,
        bucket_wru,
        warm,
    };

    // Expiry by release-unpaid: serial chunks of 25 within each run.
    let unpaid = (orders * (1.0 - input.paid_fraction)).round();
    let query_round_secs =
        (f64::from(SALE_BUCKETS) / MAX_IN_FLIGHT as f64).ceil() * DYNAMO_QUERY_MS / 1_000.0;
    let per_run = expiry_model(
        RELEASE_RUN_SECS,
        query_round_secs,
        input.release_order_ms / 1_000.0,
    );
    let chunks_per_run = per_run / RELEASE_CHUNK;
    let runs = (unpaid / per_run).ceil();
    // Each run starts on the minute; the orders fall due over the drain.
    let expiry_secs = if unpaid > 0.0 {
        (runs * RELEASE_PERIOD_SECS).max(drain_secs + RELEASE_PERIOD_SECS)
    } else {
        0.0
    };
    let expiry = Expiry {
        unpaid,
        chunks_per_run,
        per_run,
        rate: per_run / RELEASE_PERIOD_SECS,
        runs,
        secs: expiry_secs,
        target_secs: target_secs.max(2.0 * RELEASE_PERIOD_SECS),
    };

    let mut plan = Plan {
        input: input.clone(),
        load,
        concurrency,
        redis,
        dynamo,
        drain,
        expiry,
        draw,
        orders_api_rps,
        rows: Vec::new(),
        quota_requests: Vec::new(),
        overrides: Vec::new(),
        costs: Vec::new(),
        notes: Vec::new(),
    };
    plan.rows = rows(&plan);
    plan.quota_requests = quota_requests(&plan);
    plan.overrides = overrides(&plan);
    plan.costs = costs(&plan);
    plan.notes = notes(&plan);
    Ok(plan)
}

/// Up to three significant digits, rounding up: a figure to type into a
/// quota request or a parameter.
pub fn nice_up(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let digits = x.log10().floor();
    let step = 10f64.powf((digits - 2.0).max(0.0));
    ((x / step).ceil() * step) as u64
}

fn api_stage_rate(plan: &Plan) -> u64 {
    nice_up(plan.load.api_rps.max(STAGE_RATE_DEFAULT))
}

/// The busiest polling route's requests a second (`ApiPollRateLimit`
/// throttles each polling route apart), never under the template's default.
fn api_poll_rate(plan: &Plan) -> u64 {
    let load = &plan.load;
    let busiest = load
        .sale_polls_rps
        .max(load.order_polls_rps)
        .max(load.ticket_polls_rps);
    nice_up(busiest.max(POLL_RATE_DEFAULT))
}

fn api_stage_burst(plan: &Plan) -> u64 {
    nice_up(plan.load.api_burst.max(STAGE_BURST_DEFAULT))
}

fn rows(plan: &Plan) -> Vec<Row> {
    let input = &plan.input;
    let load = &plan.load;
    let c = &plan.concurrency;
    let lottery = input.is_lottery();
    let mut rows = Vec::new();
    let mut row = |item: String, need: String, default: String, verdict: Option<Verdict>| {
        rows.push(Row {
            item,
            need,
            default,
            verdict,
        })
    };
    let detail = |item: &str, need: f64| (format!("  {item}"), int(need));

    // API Gateway.
    let account_rps = input.api_account_rps as f64;
    let api_verdict = |need: f64, stage_default: f64, account: f64| {
        if need <= stage_default {
            Verdict::Ok
        } else if need <= account {
            Verdict::Parameter
        } else {
            Verdict::QuotaRequest
        }
    };
    row(
        "API Gateway requests/s at the peak".into(),
        int(load.api_rps),
        int(account_rps),
        Some(api_verdict(load.api_rps, STAGE_RATE_DEFAULT, account_rps)),
    );
    let phase = |s: &'static str| if lottery { s } else { "" };
    let parts = [
        (
            format!("purchases{}", phase(" (window)")),
            load.purchase_rps,
        ),
        (
            format!(
                "sale-page polls past the CDN ({} edges / {} s)",
                input.edge_locations, input.sale_cache_secs
            ),
            load.sale_polls_rps,
        ),
        (
            format!(
                "order polls ({} QUEUED / {} s)",
                int(plan.drain.peak_queued),
                num(input.order_poll_secs)
            ),
            load.order_polls_rps,
        ),
    ];
    for (item, need) in parts {
        let (item, need) = detail(&item, need);
        row(item, need, String::new(), None);
    }
    if lottery {
        let (item, need) = detail(
            &format!(
                "ticket polls (draw: {} holders / {} s)",
                int(input.buyers as f64),
                num(input.ticket_poll_secs)
            ),
            load.ticket_polls_rps,
        );
        row(item, need, String::new(), None);
    }
    let burst = input.api_account_burst as f64;
    row(
        "API Gateway burst (one second of the peak)".into(),
        int(load.api_burst),
        int(burst),
        Some(api_verdict(load.api_burst, STAGE_BURST_DEFAULT, burst)),
    );

    // Lambda.
    row(
        format!(
            "Lambda purchase concurrency ({} x {} ms)",
            int(load.purchase_rps),
            num(input.purchase_ms)
        ),
        int(c.purchase as f64),
        String::new(),
        None,
    );
    row(
        format!(
            "Lambda orders-api concurrency ({} x {} ms)",
            int(plan.orders_api_rps),
            num(input.orders_api_ms)
        ),
        int(c.orders_api as f64),
        String::new(),
        None,
    );
    row(
        "Lambda order-writer concurrency (reserved)".into(),
        int(c.writers as f64),
        String::new(),
        None,
    );
    row(
        "purchase provisioned concurrency".into(),
        int(c.provisioned as f64),
        "0".into(),
        Some(if c.provisioned == 0 {
            Verdict::Ok
        } else {
            Verdict::Parameter
        }),
    );
    row(
        "orders-api provisioned concurrency".into(),
        int(c.orders_api_provisioned as f64),
        "0".into(),
        Some(if c.orders_api_provisioned == 0 {
            Verdict::Ok
        } else {
            Verdict::Parameter
        }),
    );
    let scale = input.lambda_scale_per_10s as f64;
    let ramp = |need: u64| {
        if need as f64 <= scale {
            Verdict::Ok
        } else {
            Verdict::Limit
        }
    };
    let purchase_ramp = c.purchase.saturating_sub(c.provisioned);
    row(
        "purchase: new environments in the first 10 s".into(),
        int(purchase_ramp as f64),
        int(scale),
        Some(ramp(purchase_ramp)),
    );
    let orders_api_ramp = c.orders_api.saturating_sub(c.orders_api_provisioned);
    row(
        "orders-api: new environments in the first 10 s".into(),
        int(orders_api_ramp as f64),
        int(scale),
        Some(ramp(orders_api_ramp)),
    );
    let account = input.lambda_account_concurrency as f64;
    row(
        "Lambda concurrency of the account".into(),
        int(c.account as f64),
        int(account),
        Some(if c.account as f64 <= account {
            Verdict::Ok
        } else {
            Verdict::QuotaRequest
        }),
    );

    // Redis.
    let r = &plan.redis;
    let ceiling = r.per_master * REDIS_HEADROOM;
    row(
        "Redis calls/s at the peak".into(),
        int(load.redis_ops),
        String::new(),
        None,
    );
    row(
        format!(
            "  on the busiest master ({} of {}/s)",
            pct(REDIS_HEADROOM),
            int(r.per_master)
        ),
        int(r.per_master_load),
        int(ceiling),
        Some(if r.per_master_load <= ceiling * 1.000_001 {
            Verdict::Ok
        } else {
            Verdict::Limit
        }),
    );
    row(
        format!("Redis masters (RedisShards), {}", r.node.name),
        int(r.masters as f64),
        "1".into(),
        Some(if r.masters <= 1 {
            Verdict::Ok
        } else {
            Verdict::Parameter
        }),
    );

    // DynamoDB.
    let d = &plan.dynamo;
    let initial = input.dynamodb_table_initial_wru as f64;
    row(
        format!("DynamoDB orders table WRU/s (drain x {ORDERS_TABLE_WRU_PER_ORDER})"),
        int(d.table_wru),
        int(initial),
        Some(if d.table_wru <= initial {
            Verdict::Ok
        } else {
            Verdict::Parameter
        }),
    );
    row(
        "  each of its 3 indexes (drain x 1)".into(),
        int(d.index_wru),
        int(initial),
        Some(if d.index_wru <= initial {
            Verdict::Ok
        } else {
            Verdict::Parameter
        }),
    );
    let partition = input.partition_wcu as f64;
    let hard = |need: f64| {
        if need <= partition {
            Verdict::Ok
        } else {
            Verdict::Limit
        }
    };
    row(
        format!(
            "DynamoDB sale item ({} transactions/s x 2 WRU)",
            int(plan.drain.rate / BATCH_SIZE)
        ),
        int(d.sale_item_wcu),
        int(partition),
        Some(hard(d.sale_item_wcu)),
    );
    row(
        format!("DynamoDB index key of a sale bucket (1 of {SALE_BUCKETS})"),
        int(d.bucket_wru),
        int(partition),
        Some(hard(d.bucket_wru)),
    );

    // The drain and the expiry.
    let dr = &plan.drain;
    row(
        "order-writers (MaximumConcurrency)".into(),
        int(dr.writers as f64),
        int(WRITERS_DEFAULT as f64),
        Some(if dr.writers == WRITERS_DEFAULT {
            Verdict::Ok
        } else {
            Verdict::Parameter
        }),
    );
    row(
        format!("drain time, {} orders", int(dr.orders)),
        secs(dr.secs),
        format!("{} target", secs(dr.target_secs)),
        Some(if dr.on_time() {
            Verdict::Ok
        } else {
            Verdict::Limit
        }),
    );
    let ex = &plan.expiry;
    row(
        format!("expiry of {} unpaid orders", int(ex.unpaid)),
        secs(ex.secs),
        format!("{} target", secs(ex.target_secs)),
        Some(if ex.secs <= ex.target_secs {
            Verdict::Ok
        } else {
            Verdict::Limit
        }),
    );
    rows
}

fn quota_requests(plan: &Plan) -> Vec<QuotaRequest> {
    let input = &plan.input;
    let mut out = Vec::new();
    if plan.load.api_rps > input.api_account_rps as f64 {
        out.push(QuotaRequest {
            quota: "API Gateway throttle quota per account per Region (rate)",
            value: nice_up(api_stage_rate(plan) as f64 * QUOTA_HEADROOM),
            unit: "requests/s",
        });
    }
    if plan.load.api_burst > input.api_account_burst as f64 {
        out.push(QuotaRequest {
            quota: "API Gateway throttle quota per account per Region (burst)",
            value: nice_up(api_stage_burst(plan) as f64 * QUOTA_HEADROOM),
            unit: "requests",
        });
    }
    if plan.concurrency.account as f64 > input.lambda_account_concurrency as f64 {
        out.push(QuotaRequest {
            quota: "Lambda concurrent executions per account per Region",
            value: nice_up(plan.concurrency.account as f64 * QUOTA_HEADROOM),
            unit: "",
        });
    }
    out
}

fn overrides(plan: &Plan) -> Vec<(&'static str, String)> {
    let c = &plan.concurrency;
    // Lambda refuses a reservation that leaves the account fewer than
    // 100 unreserved.
    let reserve = plan.input.lambda_account_concurrency - c.writers as i64 >= 100;
    let values = [
        api_stage_rate(plan).to_string(),
        api_stage_burst(plan).to_string(),
        plan.redis.node.name.to_owned(),
        plan.redis.masters.to_string(),
        c.writers.to_string(),
        reserve.to_string(),
        c.provisioned.to_string(),
        c.orders_api_provisioned.to_string(),
        plan.dynamo.warm.to_string(),
        api_poll_rate(plan).to_string(),
    ];
    PARAMETERS.into_iter().zip(values).collect()
}

fn costs(plan: &Plan) -> Vec<CostLine> {
    let input = &plan.input;
    let lottery = input.is_lottery();
    let buyers = input.buyers as f64;
    let orders = plan.drain.orders;
    let paid = (orders * input.paid_fraction).round();
    let unpaid = plan.expiry.unpaid;
    let hour = 3_600.0;

    // Requests over the hour.
    let purchases = if lottery {
        buyers
    } else {
        buyers * input.attempts_per_buyer
    };
    let sale_polls = plan.load.sale_polls_rps * hour;
    // A QUEUED order waits half the drain on average, polled meanwhile.
    let order_polls = orders * (1.0 + plan.drain.secs / 2.0 / input.order_poll_secs);
    // A holder waits half the draw on average.
    let ticket_polls = plan.draw.as_ref().map_or(0.0, |d| {
        d.holders * (1.0 + d.secs / 2.0 / input.ticket_poll_secs)
    });
    let api_requests = purchases + sale_polls + order_polls + ticket_polls + paid;
    let orders_api_invocations = sale_polls + order_polls + ticket_polls + paid;
    let writer_invocations = (orders / BATCH_SIZE).ceil();
    let invocations = purchases + orders_api_invocations + writer_invocations + JOB_RUNS_PER_HOUR;

    let mut lines = Vec::new();
    let mut line = |item: &'static str, arithmetic: String, dollars: f64| {
        lines.push(CostLine {
            item,
            arithmetic,
            dollars,
        })
    };
    line(
        "API Gateway",
        format!(
            "{} requests (purchases {}, polls {}, payments {}) x $1.00/M",
            int(api_requests),
            int(purchases),
            int(sale_polls + order_polls + ticket_polls),
            int(paid)
        ),
        api_requests / 1e6 * price::API_PER_MILLION,
    );
    line(
        "Lambda requests",
        format!("{} invocations x $0.20/M", int(invocations)),
        invocations / 1e6 * price::LAMBDA_REQUESTS_PER_MILLION,
    );
    let provisioned = plan.concurrency.provisioned as f64;
    let purchase_gbs = purchases * input.purchase_ms / 1_000.0 * PURCHASE_GB;
    let release_busy = unpaid * input.release_order_ms / 1_000.0;
    let other_gbs = (orders_api_invocations * input.orders_api_ms / 1_000.0
        + writer_invocations * input.writer_batch_ms / 1_000.0
        + release_busy)
        * OTHER_GB;
    // Invocations served by provisioned environments bill the lower
    // duration price; the plan provisions the whole peak.
    let purchase_price = if provisioned > 0.0 {
        price::PROVISIONED_DURATION_GB_SECOND
    } else {
        price::LAMBDA_GB_SECOND
    };
    line(
        "Lambda duration",
        format!(
            "purchase {} GB-s, others {} GB-s",
            int(purchase_gbs),
            int(other_gbs)
        ),
        purchase_gbs * purchase_price + other_gbs * price::LAMBDA_GB_SECOND,
    );
    let orders_api_provisioned = plan.concurrency.orders_api_provisioned as f64;
    let provisioned_gbs = (provisioned * PURCHASE_GB + orders_api_provisioned * OTHER_GB) * hour;
    line(
        "Provisioned concurrency",
        if orders_api_provisioned > 0.0 {
            format!(
                "({} x 0.5 GB + {} x 0.25 GB) x 3,600 s x $0.0000041667",
                int(provisioned),
                int(orders_api_provisioned)
            )
        } else {
            format!("{} x 0.5 GB x 3,600 s x $0.0000041667", int(provisioned))
        },
        provisioned_gbs * price::PROVISIONED_GB_SECOND,
    );
    // A lottery's winners are sent ten to a call; a purchase sends one.
    let sends = if lottery {
        (orders / BATCH_SIZE).ceil()
    } else {
        orders
    };
    let sqs = sends + 2.0 * writer_invocations;
    line(
        "SQS",
        format!("{} requests (send, receive, delete) x $0.40/M", int(sqs)),
        sqs / 1e6 * price::SQS_PER_MILLION,
    );
    let wru = orders * WRU_PER_ORDER + paid * WRU_PER_PAYMENT + unpaid * WRU_PER_EXPIRY;
    line(
        "DynamoDB writes",
        format!(
            "{} orders x {WRU_PER_ORDER} + {} paid x {WRU_PER_PAYMENT} + {} expired x {WRU_PER_EXPIRY} = {} WRU x $0.625/M",
            int(orders),
            int(paid),
            int(unpaid),
            int(wru)
        ),
        wru / 1e6 * price::WRU_PER_MILLION,
    );
    let rru = order_polls * RRU_PER_ORDER_POLL
        + ticket_polls * RRU_PER_TICKET_POLL
        + paid * RRU_PER_PAYMENT
        + unpaid * RRU_PER_EXPIRY;
    line(
        "DynamoDB reads",
        format!("{} RRU x $0.125/M", int(rru)),
        rru / 1e6 * price::RRU_PER_MILLION,
    );
    let nodes = plan.redis.masters as f64 * (1.0 + input.redis_replicas as f64);
    line(
        "ElastiCache",
        format!(
            "{} nodes ({} master(s) x {} with replicas) x ${}/h",
            int(nodes),
            plan.redis.masters,
            1 + input.redis_replicas,
            plan.redis.node.dollars_per_hour
        ),
        nodes * plan.redis.node.dollars_per_hour,
    );
    let edge = buyers * input.page_open_secs / input.sale_poll_secs;
    line(
        "CloudFront",
        format!(
            "{} sale-page polls ({} pages x {} s / {} s) x $0.0075/10k",
            int(edge),
            int(buyers),
            int(input.page_open_secs),
            num(input.sale_poll_secs)
        ),
        edge / 10_000.0 * price::CLOUDFRONT_PER_10K,
    );
    let log_gb = invocations * price::LOG_GB_PER_INVOCATION;
    line(
        "CloudWatch Logs",
        format!(
            "{} invocations x 0.8 KB = {} GB x $0.50",
            int(invocations),
            num(log_gb)
        ),
        log_gb * price::LOGS_PER_GB,
    );
    let traces = api_requests * price::XRAY_SAMPLED;
    line(
        "X-Ray",
        format!("5% of requests = {} traces x $5/M", int(traces)),
        traces / 1e6 * price::XRAY_PER_MILLION,
    );
    lines
}

fn notes(plan: &Plan) -> Vec<String> {
    let input = &plan.input;
    let mut notes = Vec::new();
    if let Some(draw) = &plan.draw {
        notes.push(format!(
            "The draw is the lottery's peak, not the window: every ticket holder's page polls /sales/{{id}}/orders once a second from drawAt until its ticket is decided (web/assets/buyer.js, TICKET_POLL_MS), \
             {} requests/s for about {} ({} chunks of {} tickets), none of them cacheable, each {} Redis calls on the sale's one master. \
             No quota or parameter serves that; a page that spreads its first look over the draw and asks less often would.",
            int(plan.load.ticket_polls_rps),
            secs(draw.secs),
            int(draw.chunks),
            DRAW_CHUNK,
            REDIS_CALLS_PER_TICKET_POLL
        ));
    }
    let ceiling = plan.redis.per_master * REDIS_HEADROOM;
    if input.is_lottery() && plan.redis.per_master_load > ceiling {
        notes.push(format!(
            "A lottery sale is one shard (admission.window needs shards: 1): more masters do not help it. {} calls/s is {}x one master's planned {}/s.",
            int(plan.redis.per_master_load),
            num(plan.redis.per_master_load / ceiling),
            int(ceiling)
        ));
    }
    if plan.redis.masters > TEMPLATE_MAX_REDIS_SHARDS {
        notes.push(format!(
            "RedisShards={} is above what the template's AllowedValues take (1-{TEMPLATE_MAX_REDIS_SHARDS}): widen them, or run RedisMode=existing on a cluster of that many masters.",
            plan.redis.masters
        ));
    }
    if !input.is_lottery() && plan.redis.masters > MAX_SHARDS {
        notes.push(format!(
            "A sale takes at most {MAX_SHARDS} shards: {} masters cannot all take one of its key groups.",
            plan.redis.masters
        ));
    }
    if plan.concurrency.orders_api as f64 > input.lambda_scale_per_10s as f64 {
        notes.push(format!(
            "orders-api needs {} environments within seconds and gains at most {} every 10 s: OrdersApiProvisionedConcurrency keeps them warm ahead (in the hour's cost). Without it, polls are throttled until it has scaled.",
            int(plan.concurrency.orders_api as f64),
            int(input.lambda_scale_per_10s as f64)
        ));
    }
    let d = &plan.drain;
    if d.wanted_writers > d.partition_writers {
        notes.push(format!(
            "The drain is capped by the sale item's partition ({} WCU/s, one 2-WRU update per transaction of 10 orders): {} writers at most, where the target asks for {}. Buyers see QUEUED longer; their payment window starts at the write.",
            int(input.partition_wcu as f64),
            d.partition_writers,
            d.wanted_writers
        ));
    }
    if plan.load.order_polls_rps > plan.load.purchase_rps && d.writers < d.partition_writers {
        // The same sale with as many writers as the sale item takes.
        let rate = d.partition_writers as f64 * d.per_writer;
        let accept_rate = d.orders / d.accept_secs.max(f64::MIN_POSITIVE);
        let queued = d
            .orders
            .min((d.orders - rate * d.accept_secs).max(accept_rate * input.order_poll_secs));
        notes.push(format!(
            "Order polls are most of the peak: {} buyers wait QUEUED, each asking every {} s. {} writers (the most the sale item's partition takes) would drain in {} and cut them to {}/s; each writer adds {} WRU/s to the orders table.",
            int(d.peak_queued),
            num(input.order_poll_secs),
            d.partition_writers,
            secs(d.orders / rate + BATCHING_WINDOW_SECS),
            int(queued / input.order_poll_secs),
            int(d.per_writer * ORDERS_TABLE_WRU_PER_ORDER)
        ));
    }
    if plan.expiry.secs > plan.expiry.target_secs {
        notes.push(format!(
            "release-unpaid expires one order at a time, {} per query of the {SALE_BUCKETS} buckets, for {} s of each minute: about {} a run ({}/s). Unpaid units stay off sale until then (an undersell, never an oversell); reading an expired order through the API releases it at once.",
            RELEASE_CHUNK,
            RELEASE_RUN_SECS,
            int(plan.expiry.per_run),
            num(plan.expiry.rate)
        ));
    }
    if plan.dynamo.warm > 0 {
        notes.push(
            "Warm throughput is set on the table and each index, ahead of the sale; it cannot be lowered afterwards and is billed once (not priced here)."
                .to_owned(),
        );
    }
    notes.push(format!(
        "The sale-page polls assume a CDN in front of GET /sales/{{id}} (the view answers Cache-Control: max-age={}); the template does not put one in front of the API yet: without it all {} polls/s reach the API and count against its quota.",
        plan.input.sale_cache_secs,
        int(plan.input.buyers as f64 / plan.input.sale_poll_secs)
    ));
    notes.push(
        "A --parameter-overrides on the command line replaces samconfig.toml's list: merge these values into it (or add the rest of the parameters to the line)."
            .to_owned(),
    );
    notes
}

// ------------------------------------------------------------ rendering

/// An integer with thousands separators.
fn int(x: f64) -> String {
    let rounded = x.round();
    let negative = rounded < 0.0;
    let digits = format!("{:.0}", rounded.abs());
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if negative { format!("-{out}") } else { out }
}

/// A figure: whole from 100 up, else with what decimals it needs.
fn num(x: f64) -> String {
    if x.abs() >= 100.0 || x.fract() == 0.0 {
        int(x)
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn secs(x: f64) -> String {
    if x >= 120.0 {
        format!(
            "{} s ({} min)",
            int(x),
            num((x / 60.0 * 10.0).round() / 10.0)
        )
    } else {
        format!("{} s", num(x))
    }
}

fn pct(x: f64) -> String {
    format!("{}%", int(x * 100.0))
}

fn usd(x: f64) -> String {
    if x > 0.0 && x < 0.001 {
        "<$0.001".to_owned()
    } else if x >= 100.0 {
        format!("${}", int(x))
    } else if x >= 1.0 {
        format!("${x:.2}")
    } else {
        format!("${x:.3}")
    }
}

/// Prose at most [`WRAP`] columns wide, words kept whole: the first line
/// starts with `first`, the others with `indent`.
const WRAP: usize = 100;

fn wrapped(f: &mut fmt::Formatter<'_>, first: &str, text: &str, indent: &str) -> fmt::Result {
    let mut line = first.to_owned();
    let mut words_on_line = 0;
    for word in text.split_whitespace() {
        let width = line.chars().count() + 1 + word.chars().count();
        if words_on_line > 0 && width > WRAP {
            writeln!(f, "{line}")?;
            line = indent.to_owned();
            words_on_line = 0;
        }
        if words_on_line > 0 {
            line.push(' ');
        }
        line.push_str(word);
        words_on_line += 1;
    }
    writeln!(f, "{line}")
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = &self.input;
        let mode = if input.is_lottery() {
            format!(
                "lottery window {} s, every buyer enters once",
                input.lottery_window_secs
            )
        } else {
            "first come, first served".to_owned()
        };
        writeln!(f, "Plan {}: {mode}", input.name)?;
        let arrival = match input.peak_rps {
            Some(peak) => format!("a peak of {} purchases/s given", int(peak)),
            None if input.is_lottery() => {
                format!("{} buyers over the window", int(input.buyers as f64))
            }
            None => format!(
                "{} buyers x {} attempts, most within {} s of the opening",
                int(input.buyers as f64),
                num(input.attempts_per_buyer),
                num(input.arrival_secs)
            ),
        };
        writeln!(
            f,
            "{} units; {arrival}; payment window {} s, {} paid",
            int(input.units as f64),
            input.payment_window_secs,
            pct(input.paid_fraction)
        )?;
        writeln!(f)?;

        let header = Row {
            item: String::new(),
            need: "need".into(),
            default: "default or limit".into(),
            verdict: None,
        };
        let width = |get: fn(&Row) -> usize| {
            self.rows
                .iter()
                .chain(std::iter::once(&header))
                .map(get)
                .max()
                .unwrap_or(0)
        };
        let w_item = width(|r| r.item.chars().count());
        let w_need = width(|r| r.need.chars().count());
        let w_default = width(|r| r.default.chars().count());
        let line = |f: &mut fmt::Formatter<'_>, r: &Row, verdict: &str| {
            let text = format!(
                "{:<w_item$}  {:>w_need$}  {:>w_default$}  {verdict}",
                r.item, r.need, r.default
            );
            writeln!(f, "{}", text.trim_end())
        };
        line(f, &header, "verdict")?;
        for r in &self.rows {
            let verdict = r.verdict.map(|v| v.to_string()).unwrap_or_default();
            line(f, r, &verdict)?;
        }
        writeln!(f)?;

        let d = &self.drain;
        let drain = format!(
            "Drain: {} orders at {} writers x {} orders / {} ms = {} orders/s: {} from the first accepted (target {}, a tenth of the payment window).",
            int(d.orders),
            d.writers,
            BATCH_SIZE,
            num(input.writer_batch_ms),
            int(d.rate),
            secs(d.secs),
            secs(d.target_secs)
        );
        wrapped(f, "", &drain, "")?;
        let e = &self.expiry;
        let expiry = format!(
            "Expiry: {} unpaid orders; release-unpaid runs every minute for {} s, {} chunks of {} ({} DynamoDB queries, then one expiry at a time at {} ms) = {} a run, {}/s: the last released {} after the first payment window closes.",
            int(e.unpaid),
            RELEASE_RUN_SECS,
            int(e.chunks_per_run),
            RELEASE_CHUNK,
            SALE_BUCKETS,
            num(input.release_order_ms),
            int(e.per_run),
            num(e.rate),
            secs(e.secs)
        );
        wrapped(f, "", &expiry, "")?;
        if let Some(draw) = &self.draw {
            let text = format!(
                "Draw: {} tickets in {} chunks at {} ms, plus the winners' sends: about {} after the window.",
                int(draw.holders),
                int(draw.chunks),
                num(input.draw_chunk_ms),
                secs(draw.secs)
            );
            wrapped(f, "", &text, "")?;
        }
        writeln!(f)?;

        writeln!(f, "Quota requests to file:")?;
        if self.quota_requests.is_empty() {
            writeln!(f, "  none")?;
        }
        for q in &self.quota_requests {
            let unit = if q.unit.is_empty() {
                String::new()
            } else {
                format!(" {}", q.unit)
            };
            writeln!(f, "  - {}: {}{unit}", q.quota, int(q.value as f64))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "The sale's definition: \"shards\": {}",
            self.redis.sale_shards
        )?;
        writeln!(f, "{}", self.deploy_line())?;
        writeln!(f)?;

        writeln!(
            f,
            "Cost of the sale's hour (us-east-1 list prices, docs/operations.md \"Costs\"):"
        )?;
        let w_cost_item = self.costs.iter().map(|c| c.item.len()).max().unwrap_or(0);
        let amounts: Vec<String> = self.costs.iter().map(|c| usd(c.dollars)).collect();
        let total = usd(self.total_cost());
        let w_amount = amounts
            .iter()
            .map(String::len)
            .chain(std::iter::once(total.len()))
            .max()
            .unwrap_or(0);
        for (c, amount) in self.costs.iter().zip(&amounts) {
            writeln!(
                f,
                "  {:<w_cost_item$}  {amount:>w_amount$}  {}",
                c.item, c.arithmetic
            )?;
        }
        writeln!(f, "  {:<w_cost_item$}  {total:>w_amount$}", "total")?;
        writeln!(f)?;

        writeln!(f, "Notes:")?;
        for note in &self.notes {
            wrapped(f, "  - ", note, "    ")?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------ command line

/// `seckill-local plan`'s flags. Without any, the command prints the three
/// examples.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Print one built-in example: scarce (10k units / 1M buyers), plenty
    /// (1M units / 100k buyers) or lottery (a 10-s window, 1,000 units, 1M
    /// people).
    #[arg(long, value_name = "NAME")]
    pub example: Option<String>,
    /// Units for sale (one per buyer).
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().units, allow_negative_numbers = true)]
    pub units: i64,
    /// People expected.
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().buyers, allow_negative_numbers = true)]
    pub buyers: i64,
    /// Purchase requests per buyer at the opening.
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().attempts_per_buyer, allow_negative_numbers = true)]
    pub attempts_per_buyer: f64,
    /// Seconds over which most buyers arrive at the opening.
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().arrival_secs, allow_negative_numbers = true)]
    pub arrival_secs: f64,
    /// Purchase requests per second at the peak (instead of buyers x
    /// attempts / arrival).
    #[arg(long, value_name = "RPS", allow_negative_numbers = true)]
    pub peak_rps: Option<f64>,
    /// The buyer page's GET /sales/{id} interval.
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().sale_poll_secs, allow_negative_numbers = true)]
    pub sale_poll_secs: f64,
    /// Seconds the CDN caches GET /sales/{id} (the max-age of its Cache-Control).
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().sale_cache_secs, allow_negative_numbers = true)]
    pub sale_cache_secs: i64,
    /// CDN edge locations the buyers come through.
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().edge_locations, allow_negative_numbers = true)]
    pub edge_locations: i64,
    /// The page's GET /orders/{id} interval while an order is QUEUED.
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().order_poll_secs, allow_negative_numbers = true)]
    pub order_poll_secs: f64,
    /// The page's GET /sales/{id}/orders interval while a ticket waits for
    /// the draw.
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().ticket_poll_secs, allow_negative_numbers = true)]
    pub ticket_poll_secs: f64,
    /// How long each buyer's page is open in the sale's hour (CloudFront's
    /// requests).
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().page_open_secs, allow_negative_numbers = true)]
    pub page_open_secs: f64,
    /// The sale's paymentWindowSeconds.
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().payment_window_secs, allow_negative_numbers = true)]
    pub payment_window_secs: i64,
    /// Share of orders paid (0 to 1).
    #[arg(long, value_name = "FRACTION", default_value_t = PlanInput::default().paid_fraction, allow_negative_numbers = true)]
    pub paid_fraction: f64,
    /// 0: first come, first served; 1 to 10: the sale's lottery window.
    #[arg(long, value_name = "SECONDS", default_value_t = PlanInput::default().lottery_window_secs, allow_negative_numbers = true)]
    pub lottery_window_secs: i64,
    /// API Gateway's throttle per account and region (AWS default).
    #[arg(long, value_name = "RPS", default_value_t = PlanInput::default().api_account_rps, allow_negative_numbers = true)]
    pub api_account_rps: i64,
    /// API Gateway's burst per account and region (AWS default).
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().api_account_burst, allow_negative_numbers = true)]
    pub api_account_burst: i64,
    /// Lambda concurrency per account and region (AWS default).
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().lambda_account_concurrency, allow_negative_numbers = true)]
    pub lambda_account_concurrency: i64,
    /// New execution environments a function gains every 10 s.
    #[arg(long = "lambda-scale-per-10s", value_name = "N", default_value_t = PlanInput::default().lambda_scale_per_10s, allow_negative_numbers = true)]
    pub lambda_scale_per_10s: i64,
    /// Write units/s a new on-demand table takes at once.
    #[arg(long, value_name = "WRU", default_value_t = PlanInput::default().dynamodb_table_initial_wru, allow_negative_numbers = true)]
    pub dynamodb_table_initial_wru: i64,
    /// Write units/s of one partition key.
    #[arg(long, value_name = "WCU", default_value_t = PlanInput::default().partition_wcu, allow_negative_numbers = true)]
    pub partition_wcu: i64,
    /// Billed duration of a purchase, ms.
    #[arg(long, value_name = "MS", default_value_t = PlanInput::default().purchase_ms, allow_negative_numbers = true)]
    pub purchase_ms: f64,
    /// Billed duration of an orders-api poll, ms.
    #[arg(long, value_name = "MS", default_value_t = PlanInput::default().orders_api_ms, allow_negative_numbers = true)]
    pub orders_api_ms: f64,
    /// Billed duration of an order-writer batch of 10, ms.
    #[arg(long, value_name = "MS", default_value_t = PlanInput::default().writer_batch_ms, allow_negative_numbers = true)]
    pub writer_batch_ms: f64,
    /// One draw chunk (100 tickets, one script call), ms.
    #[arg(long, value_name = "MS", default_value_t = PlanInput::default().draw_chunk_ms, allow_negative_numbers = true)]
    pub draw_chunk_ms: f64,
    /// One expiry by release-unpaid, ms.
    #[arg(long, value_name = "MS", default_value_t = PlanInput::default().release_order_ms, allow_negative_numbers = true)]
    pub release_order_ms: f64,
    /// RedisNodeType: cache.t4g.micro, cache.t4g.small, cache.t4g.medium,
    /// cache.m7g.large, cache.m7g.xlarge, cache.r7g.large or cache.r7g.xlarge.
    #[arg(long, value_name = "TYPE", default_value_t = PlanInput::default().redis_node_type)]
    pub redis_node_type: String,
    /// Purchase decisions/s one master runs (default: the node type's
    /// assumed figure; measure it with make bench's ceiling row).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub redis_decisions_per_shard: Option<f64>,
    /// RedisReplicasPerShard (1 or 2), for the node-hours.
    #[arg(long, value_name = "N", default_value_t = PlanInput::default().redis_replicas, allow_negative_numbers = true)]
    pub redis_replicas: i64,
}

impl PlanArgs {
    /// The sale the flags describe.
    pub fn input(&self) -> PlanInput {
        PlanInput {
            name: format!(
                "{} units / {} buyers",
                int(self.units as f64),
                int(self.buyers as f64)
            ),
            units: self.units,
            buyers: self.buyers,
            attempts_per_buyer: self.attempts_per_buyer,
            arrival_secs: self.arrival_secs,
            peak_rps: self.peak_rps,
            sale_poll_secs: self.sale_poll_secs,
            sale_cache_secs: self.sale_cache_secs,
            edge_locations: self.edge_locations,
            order_poll_secs: self.order_poll_secs,
            ticket_poll_secs: self.ticket_poll_secs,
            page_open_secs: self.page_open_secs,
            payment_window_secs: self.payment_window_secs,
            paid_fraction: self.paid_fraction,
            lottery_window_secs: self.lottery_window_secs,
            api_account_rps: self.api_account_rps,
            api_account_burst: self.api_account_burst,
            lambda_account_concurrency: self.lambda_account_concurrency,
            lambda_scale_per_10s: self.lambda_scale_per_10s,
            dynamodb_table_initial_wru: self.dynamodb_table_initial_wru,
            partition_wcu: self.partition_wcu,
            purchase_ms: self.purchase_ms,
            orders_api_ms: self.orders_api_ms,
            writer_batch_ms: self.writer_batch_ms,
            draw_chunk_ms: self.draw_chunk_ms,
            release_order_ms: self.release_order_ms,
            redis_node_type: self.redis_node_type.clone(),
            redis_decisions_per_shard: self.redis_decisions_per_shard,
            redis_replicas: self.redis_replicas,
        }
    }
}

/// The flags given on the command line (not defaulted), by id.
pub fn flags_given(matches: &clap::ArgMatches) -> Vec<String> {
    // The struct's own group id is among the ids too: only the flags count.
    let flags = <PlanArgs as clap::Args>::augment_args(clap::Command::new("plan"));
    let mut given = Vec::new();
    for id in matches.ids() {
        let id = id.as_str();
        let is_flag = flags.get_arguments().any(|arg| arg.get_id() == id);
        if is_flag && matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
            given.push(id.to_owned());
        }
    }
    given
}

/// What `seckill-local plan` prints: one example, the plan of the flags,
/// or all three examples when no flag is given.
pub fn render(args: &PlanArgs, given: &[String]) -> Result<String, PlanError> {
    if let Some(name) = &args.example {
        let others: Vec<String> = given
            .iter()
            .filter(|id| id.as_str() != "example")
            .map(|id| format!("--{}", id.replace('_', "-")))
            .collect();
        if !others.is_empty() {
            return Err(PlanError::ExampleWithFlags(others.join(", ")));
        }
        return Ok(plan(&Example::parse(name)?.input())?.to_string());
    }
    if given.is_empty() {
        let plans = Example::ALL
            .into_iter()
            .map(|e| plan(&e.input()).map(|p| p.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(plans.join(&format!("\n{}\n\n", "=".repeat(78))));
    }
    Ok(plan(&args.input())?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= want.abs() * 1e-9 + 1e-9,
            "got {got}, want {want}"
        );
    }

    fn verdict_of(plan: &Plan, item_starts: &str) -> Verdict {
        let row = plan
            .rows
            .iter()
            .find(|r| r.item.trim_start().starts_with(item_starts))
            .unwrap_or_else(|| panic!("no row {item_starts:?}"));
        row.verdict
            .unwrap_or_else(|| panic!("row {item_starts:?} has no verdict"))
    }

    #[test]
    fn scarce_example_matches_the_hand_arithmetic() {
        let p = plan(&PlanInput::scarce()).unwrap();
        // Purchases: 1,000,000 buyers x 3 attempts / 10 s = 300,000/s.
        close(p.load.purchase_rps, 300_000.0);
        // Orders 10,000, taken at the buyers' arrival rate of 100,000/s:
        // 0.1 s. Writers: 10,000 / (90 s x 200/s) = 0.56, so the default 5,
        // 1,000 orders/s; drain = max(0.1, 10) + 1-s batching window = 11 s.
        close(p.drain.accept_secs, 0.1);
        assert_eq!(p.drain.writers, 5);
        close(p.drain.rate, 1_000.0);
        close(p.drain.secs, 11.0);
        // QUEUED at the peak: min(10,000, max(10,000 - 100, 100,000 x 2 s))
        // = 10,000, polled every 2 s: 5,000/s. Sale polls: 50 edges / 1 s
        // (the sale view's max-age).
        close(p.drain.peak_queued, 10_000.0);
        close(p.load.order_polls_rps, 5_000.0);
        close(p.load.sale_polls_rps, 50.0);
        // API: 300,000 + 50 + 5,000.
        close(p.load.api_rps, 305_050.0);
        // Lambda: 300,000 x 5 ms = 1,500 (all provisioned); orders-api
        // 5,050 x 10 ms = 50.5 -> 51; account 1,500 + 5 + max(100, 51 + 4).
        assert_eq!(p.concurrency.purchase, 1_500);
        assert_eq!(p.concurrency.provisioned, 1_500);
        assert_eq!(p.concurrency.orders_api, 51);
        assert_eq!(p.concurrency.account, 1_605);
        // Redis: 300,000 decisions + 5,000 order polls, 20,000/s a master
        // (half of 40,000): 15.25 -> 16 masters and shards.
        close(p.load.redis_ops, 305_000.0);
        assert_eq!(p.redis.masters, 16);
        assert_eq!(p.redis.sale_shards, 16);
        // DynamoDB: 1,000 orders/s x 4 WRU = 4,000, exactly a new table's.
        close(p.dynamo.table_wru, 4_000.0);
        assert_eq!(p.dynamo.warm, 0);
        close(p.dynamo.sale_item_wcu, 200.0);
        // Expiry: 3,000 unpaid; a chunk is 4 rounds of bucket queries x 10
        // ms + 25 x 30 ms = 0.79 s, 69 in 55 s = 1,725 a run: 2 runs, 120 s.
        close(p.expiry.unpaid, 3_000.0);
        close(p.expiry.per_run, 1_725.0);
        close(p.expiry.secs, 120.0);
        assert_eq!(verdict_of(&p, "expiry"), Verdict::Ok);
        assert_eq!(
            verdict_of(&p, "API Gateway requests"),
            Verdict::QuotaRequest
        );
        assert_eq!(
            verdict_of(&p, "Lambda concurrency of the account"),
            Verdict::QuotaRequest
        );
        // Requests: 306,000 x 1.25 = 382,500 -> 383,000; 1,605 x 1.25 =
        // 2,006 -> 2,010.
        let asked: Vec<u64> = p.quota_requests.iter().map(|q| q.value).collect();
        assert_eq!(asked, [383_000, 383_000, 2_010]);
        assert!(p.deploy_line().contains("ApiThrottlingRateLimit=306000 "));
        assert!(p.deploy_line().contains("RedisShards=16 "));
    }

    #[test]
    fn plenty_example_matches_the_hand_arithmetic() {
        let p = plan(&PlanInput::plenty()).unwrap();
        // 100,000 x 3 / 10 s = 30,000/s; every buyer's first attempt takes
        // a unit: 100,000 orders over the 10-s arrival.
        close(p.load.purchase_rps, 30_000.0);
        close(p.drain.orders, 100_000.0);
        close(p.drain.accept_secs, 10.0);
        // 100,000 / (90 s x 200/s) = 5.6 -> 6 writers, 1,200/s:
        // 100,000 / 1,200 + 1 = 84.3 s.
        assert_eq!(p.drain.writers, 6);
        close(p.drain.secs, 100_000.0 / 1_200.0 + 1.0);
        assert_eq!(verdict_of(&p, "drain time"), Verdict::Ok);
        // QUEUED: 100,000 - 1,200 x 10 = 88,000 -> 44,000 polls/s.
        close(p.load.order_polls_rps, 44_000.0);
        close(p.load.api_rps, 30_000.0 + 50.0 + 44_000.0);
        // 150 purchase environments; orders-api 44,050 x 10 ms -> 441;
        // account 150 + 6 + 445 = 601, under the default 1,000.
        assert_eq!(p.concurrency.purchase, 150);
        assert_eq!(p.concurrency.orders_api, 441);
        assert_eq!(p.concurrency.account, 601);
        assert_eq!(
            verdict_of(&p, "Lambda concurrency of the account"),
            Verdict::Ok
        );
        // Redis 74,000 / 20,000 = 3.7 -> 4 masters.
        assert_eq!(p.redis.masters, 4);
        // 1,200 x 4 WRU = 4,800 > 4,000: warm throughput 4,800.
        close(p.dynamo.table_wru, 4_800.0);
        assert_eq!(p.dynamo.warm, 4_800);
        assert_eq!(verdict_of(&p, "DynamoDB orders table"), Verdict::Parameter);
        // Expiry: 30,000 / 1,725 = 17.4 -> 18 runs = 1,080 s.
        close(p.expiry.secs, 1_080.0);
        assert_eq!(verdict_of(&p, "expiry"), Verdict::Limit);
        let quotas: Vec<&str> = p.quota_requests.iter().map(|q| q.quota).collect();
        assert!(!quotas.iter().any(|q| q.starts_with("Lambda")));
    }

    #[test]
    fn lottery_example_matches_the_hand_arithmetic() {
        let p = plan(&PlanInput::lottery()).unwrap();
        // Window: 1,000,000 entries / 10 s = 100,000/s, 500 environments.
        close(p.load.purchase_rps, 100_000.0);
        assert_eq!(p.concurrency.purchase, 500);
        // Draw: 10,000 chunks x 2 ms + 1,000 winners / 40 per round x 20 ms
        // = 20 + 0.5 s.
        let draw = p.draw.clone().unwrap();
        close(draw.chunks, 10_000.0);
        close(draw.secs, 20.5);
        // Every holder polls once a second: 1,000,000/s, plus 50 sale polls
        // and 1,000 QUEUED winners / 2 s.
        close(p.load.ticket_polls_rps, 1_000_000.0);
        close(p.load.order_polls_rps, 500.0);
        close(p.load.api_rps, 1_000_550.0);
        // orders-api: 1,000,550 x 10 ms -> 10,006, over the 1,000 a
        // function gains in 10 s, so all of it provisioned ahead, and none
        // left to the ramp; account 500 + 10,006 + 5 + max(100, 0 + 4).
        assert_eq!(p.concurrency.orders_api, 10_006);
        assert_eq!(p.concurrency.orders_api_provisioned, 10_006);
        assert_eq!(p.concurrency.account, 10_611);
        assert_eq!(verdict_of(&p, "orders-api: new environments"), Verdict::Ok);
        assert_eq!(
            verdict_of(&p, "orders-api provisioned concurrency"),
            Verdict::Parameter
        );
        assert!(
            p.deploy_line()
                .contains("OrdersApiProvisionedConcurrency=10006 ")
        );
        // One shard: 2 calls x 1,000,000 + 500 on one master.
        assert_eq!(p.redis.masters, 1);
        assert_eq!(p.redis.sale_shards, 1);
        close(p.redis.per_master_load, 2_000_500.0);
        assert_eq!(verdict_of(&p, "on the busiest master"), Verdict::Limit);
        // Drain: 1,000 orders at 1,000/s + 1 s = 2 s; 300 unpaid, one run,
        // released by 2 + 60 s.
        close(p.drain.secs, 2.0);
        close(p.expiry.secs, 62.0);
    }

    #[test]
    fn bad_input_is_refused_naming_the_flag() {
        let refused = |change: fn(&mut PlanInput)| {
            let mut input = PlanInput::default();
            change(&mut input);
            plan(&input).unwrap_err()
        };
        let flag_of = |e: PlanError| match e {
            PlanError::OutOfRange { flag, .. } => flag,
            other => panic!("not a range error: {other}"),
        };
        assert_eq!(flag_of(refused(|i| i.units = 0)), "--units");
        assert_eq!(flag_of(refused(|i| i.units = -5)), "--units");
        assert_eq!(flag_of(refused(|i| i.buyers = 0)), "--buyers");
        assert_eq!(
            flag_of(refused(|i| i.attempts_per_buyer = 0.5)),
            "--attempts-per-buyer"
        );
        assert_eq!(
            flag_of(refused(|i| i.arrival_secs = -1.0)),
            "--arrival-secs"
        );
        assert_eq!(
            flag_of(refused(|i| i.peak_rps = Some(f64::NAN))),
            "--peak-rps"
        );
        assert_eq!(
            flag_of(refused(|i| i.sale_poll_secs = 0.0)),
            "--sale-poll-secs"
        );
        assert_eq!(
            flag_of(refused(|i| i.order_poll_secs = 0.0)),
            "--order-poll-secs"
        );
        assert_eq!(
            flag_of(refused(|i| i.sale_cache_secs = 0)),
            "--sale-cache-secs"
        );
        assert_eq!(
            flag_of(refused(|i| i.paid_fraction = 1.5)),
            "--paid-fraction"
        );
        assert_eq!(
            flag_of(refused(|i| i.payment_window_secs = 10)),
            "--payment-window-secs"
        );
        assert_eq!(
            flag_of(refused(|i| i.purchase_ms = f64::INFINITY)),
            "--purchase-ms"
        );
        assert_eq!(flag_of(refused(|i| i.partition_wcu = 0)), "--partition-wcu");
        assert_eq!(
            flag_of(refused(|i| i.redis_replicas = 0)),
            "--redis-replicas"
        );
        assert_eq!(
            refused(|i| i.lottery_window_secs = 11),
            PlanError::LotteryWindow { value: 11 }
        );
        assert_eq!(
            refused(|i| i.lottery_window_secs = -1),
            PlanError::LotteryWindow { value: -1 }
        );
        assert_eq!(
            refused(|i| i.redis_node_type = "cache.m5.large".into()),
            PlanError::RedisNodeType("cache.m5.large".into())
        );
        assert_eq!(
            Example::parse("huge").unwrap_err(),
            PlanError::UnknownExample("huge".into())
        );
        let message = refused(|i| i.units = 0).to_string();
        assert_eq!(message, "--units must be from 1 to 10000000, not 0");
    }

    #[test]
    fn the_overrides_name_only_the_template_parameters() {
        for example in Example::ALL {
            let p = plan(&example.input()).unwrap();
            let names: Vec<&str> = p.overrides.iter().map(|(name, _)| *name).collect();
            assert_eq!(names, PARAMETERS);
            let line = p.deploy_line();
            let rest = line
                .strip_prefix("sam deploy --parameter-overrides ")
                .unwrap();
            for pair in rest.split(' ') {
                let (name, value) = pair.split_once('=').unwrap();
                assert!(PARAMETERS.contains(&name), "{name} is not a parameter");
                assert!(!value.is_empty(), "{name} has no value");
            }
            assert_eq!(rest.split(' ').count(), PARAMETERS.len());
            let node = p.overrides[2].1.as_str();
            assert!(REDIS_NODES.iter().any(|n| n.name == node));
        }
    }

    #[test]
    fn quota_and_parameter_figures_round_up_to_three_digits() {
        assert_eq!(nice_up(0.0), 0);
        assert_eq!(nice_up(441.0), 441);
        assert_eq!(nice_up(2_006.25), 2_010);
        assert_eq!(nice_up(305_025.0), 306_000);
        assert_eq!(nice_up(1_000_525.0), 1_010_000);
        assert_eq!(nice_up(4_800.0), 4_800);
    }

    #[test]
    fn a_small_sale_needs_nothing_raised() {
        let p = plan(&PlanInput {
            units: 100,
            buyers: 1_000,
            ..PlanInput::default()
        })
        .unwrap();
        // 1,000 x 3 / 10 s = 300 purchases/s: everything at its default but
        // the provisioned concurrency (300 x 5 ms = 1.5 -> 2).
        assert!(p.quota_requests.is_empty());
        assert_eq!(p.concurrency.provisioned, 2);
        assert_eq!(p.redis.masters, 1);
        for row in &p.rows {
            if let Some(verdict) = row.verdict {
                let expected = if row.item.starts_with("purchase provisioned") {
                    Verdict::Parameter
                } else {
                    Verdict::Ok
                };
                assert_eq!(verdict, expected, "{}", row.item);
            }
        }
        assert!(p.deploy_line().contains("ApiThrottlingRateLimit=5000 "));
    }

    #[test]
    fn the_table_columns_line_up() {
        let p = plan(&PlanInput::scarce()).unwrap();
        let text = p.to_string();
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("verdict"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), p.rows.len() + 1);
        // The need column ends at one offset on every line that has one.
        let header_end = table[0].find("need").unwrap() + "need".len();
        for (line, row) in table[1..].iter().zip(&p.rows) {
            let after_item = &line[row.item.len()..];
            let end = row.item.len() + after_item.find(&row.need).unwrap() + row.need.len();
            assert!(line.starts_with(&row.item) && end == header_end, "{line:?}");
        }
    }

    #[test]
    fn flags_left_out_take_the_default_input_and_count_as_not_given() {
        use clap::FromArgMatches;
        let command = <PlanArgs as clap::Args>::augment_args(clap::Command::new("plan"));
        let matches = command.clone().try_get_matches_from(["plan"]).unwrap();
        assert!(flags_given(&matches).is_empty());
        let args = PlanArgs::from_arg_matches(&matches).unwrap();
        let input = args.input();
        assert_eq!(
            PlanInput {
                name: PlanInput::default().name,
                ..input
            },
            PlanInput::default()
        );
        let matches = command
            .try_get_matches_from(["plan", "--units", "500", "--lottery-window-secs", "3"])
            .unwrap();
        assert_eq!(flags_given(&matches), ["units", "lottery_window_secs"]);
        let args = PlanArgs::from_arg_matches(&matches).unwrap();
        assert_eq!(args.input().units, 500);
        assert_eq!(args.input().lottery_window_secs, 3);
    }

    #[test]
    fn no_flag_prints_the_three_examples_and_an_example_takes_no_flag() {
        use clap::FromArgMatches;
        let command = <PlanArgs as clap::Args>::augment_args(clap::Command::new("plan"));
        let parse = |argv: &[&str]| {
            let matches = command.clone().try_get_matches_from(argv).unwrap();
            (
                PlanArgs::from_arg_matches(&matches).unwrap(),
                flags_given(&matches),
            )
        };
        let (args, given) = parse(&["plan"]);
        let all = render(&args, &given).unwrap();
        for example in Example::ALL {
            assert!(all.contains(&example.input().name), "{}", example.name());
        }
        let (args, given) = parse(&["plan", "--example", "lottery"]);
        let one = render(&args, &given).unwrap();
        assert!(one.starts_with("Plan (c)"));
        let (args, given) = parse(&["plan", "--example", "lottery", "--units", "5"]);
        assert_eq!(
            render(&args, &given).unwrap_err(),
            PlanError::ExampleWithFlags("--units".into())
        );
        let (args, given) = parse(&["plan", "--buyers", "0"]);
        assert!(matches!(
            render(&args, &given).unwrap_err(),
            PlanError::OutOfRange {
                flag: "--buyers",
                ..
            }
        ));
    }
}
