//! The plan itself: the arithmetic from a sale to what it needs.

use super::*;

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

/// The jobs that read the whole sale: prewarm's rebuild of a sale Redis
/// lost, and reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Jobs {
    /// `MemorySize` of prewarm and reconcile (`JobsMemorySize`): the
    /// smallest of [`JOBS_MEMORY_MB`] whose share of a vCPU holds both to
    /// their `Timeout`, or the last.
    pub memory_mb: u32,
    /// Pages of the sale's index: at least one a bucket.
    pub ledger_pages: f64,
    /// The index read, [`MAX_IN_FLIGHT`] buckets at once.
    pub ledger_secs: f64,
    /// Prewarm's CPU at its function's share of a vCPU.
    pub rebuild_cpu_secs: f64,
    /// Prewarm's rebuild: the index read, or its CPU if longer (Redis's
    /// staging overlaps the reads).
    pub rebuild_secs: f64,
    /// Reconcile's CPU at its function's share of a vCPU.
    pub reconcile_cpu_secs: f64,
    /// Reconcile: the index, Redis's buyers, and its CPU.
    pub reconcile_secs: f64,
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
    pub jobs: Jobs,
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

impl Jobs {
    /// Prewarm's rebuild and reconcile each end within their function's
    /// `Timeout`.
    pub fn within_timeouts(&self) -> bool {
        self.rebuild_secs <= PREWARM_TIMEOUT_SECS && self.reconcile_secs <= RECONCILE_TIMEOUT_SECS
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
/// orders released together (`chunk_secs`). `make bench` checks it against
/// a run it measures (its query and chunk times fed in).
pub fn expiry_model(run_secs: f64, query_secs: f64, chunk_secs: f64) -> f64 {
    (run_secs / (query_secs + chunk_secs)).floor().max(1.0) * RELEASE_CHUNK
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

    // Expiry by release-unpaid: chunks of 98 within each run.
    let unpaid = (orders * (1.0 - input.paid_fraction)).round();
    let query_round_secs =
        (f64::from(SALE_BUCKETS) / MAX_IN_FLIGHT as f64).ceil() * DYNAMO_QUERY_MS / 1_000.0;
    let per_run = expiry_model(
        RELEASE_RUN_SECS,
        query_round_secs,
        input.release_chunk_ms / 1_000.0,
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
        // Orders fall due over the drain: none is released sooner than
        // the run after the last one falls due, whatever the job's speed.
        target_secs: target_secs
            .max(2.0 * RELEASE_PERIOD_SECS)
            .max(drain_secs + RELEASE_PERIOD_SECS),
    };

    // The jobs that read the whole sale, each run a page of the index at a
    // time; one buyer an order.
    let ledger_pages = (orders / f64::from(STREAM_PAGE))
        .ceil()
        .max(f64::from(SALE_BUCKETS));
    let ledger_secs = (ledger_pages / MAX_IN_FLIGHT as f64).ceil() * DYNAMO_PAGE_MS / 1_000.0;
    let jobs_at = |memory_mb: u32| {
        let vcpu_share = f64::from(memory_mb).min(VCPU_MB) / VCPU_MB;
        let rebuild_cpu_secs = orders * PREWARM_CPU_US_PER_ORDER / 1_000_000.0 / vcpu_share;
        let reconcile_cpu_secs = orders * RECONCILE_CPU_US_PER_ORDER / 1_000_000.0 / vcpu_share;
        Jobs {
            memory_mb,
            ledger_pages,
            ledger_secs,
            rebuild_cpu_secs,
            rebuild_secs: ledger_secs.max(rebuild_cpu_secs),
            reconcile_cpu_secs,
            reconcile_secs: ledger_secs
                + orders * REDIS_READ_US_PER_BUYER / 1_000_000.0
                + reconcile_cpu_secs,
        }
    };
    let jobs = JOBS_MEMORY_MB
        .into_iter()
        .map(jobs_at)
        .find(Jobs::within_timeouts)
        .unwrap_or_else(|| jobs_at(JOBS_MEMORY_MB[JOBS_MEMORY_MB.len() - 1]));

    let mut plan = Plan {
        input: input.clone(),
        load,
        concurrency,
        redis,
        dynamo,
        drain,
        expiry,
        jobs,
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

pub(super) fn api_stage_rate(plan: &Plan) -> u64 {
    nice_up(plan.load.api_rps.max(STAGE_RATE_DEFAULT))
}

/// The busiest polling route's requests a second (`ApiPollRateLimit`
/// throttles each polling route apart), never under the template's default.
pub(super) fn api_poll_rate(plan: &Plan) -> u64 {
    let load = &plan.load;
    let busiest = load
        .sale_polls_rps
        .max(load.order_polls_rps)
        .max(load.ticket_polls_rps);
    nice_up(busiest.max(POLL_RATE_DEFAULT))
}

pub(super) fn api_stage_burst(plan: &Plan) -> u64 {
    nice_up(plan.load.api_burst.max(STAGE_BURST_DEFAULT))
}
