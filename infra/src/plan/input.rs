//! What a plan is asked for: one sale, the region's quotas, the latencies
//! assumed; its checks and the three examples.

use super::*;

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
    /// for the draw (`TICKET_POLL_MS` in `web/assets/buyer-ticket.js`).
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
    /// One chunk of release-unpaid after its query (98 orders: a
    /// `BatchGetItem`, two transactions of 49 expiries, the Redis returns
    /// together), ms.
    pub release_chunk_ms: f64,
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
            release_chunk_ms: 250.0,
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

pub(super) fn node_names() -> String {
    REDIS_NODES.map(|n| n.name).join(", ")
}

pub(super) fn in_range<T>(flag: &'static str, value: T, min: T, max: T) -> Result<(), PlanError>
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
            "--release-chunk-ms",
            self.release_chunk_ms,
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

    pub(super) fn node(&self) -> Result<RedisNode, PlanError> {
        REDIS_NODES
            .into_iter()
            .find(|n| n.name == self.redis_node_type)
            .ok_or_else(|| PlanError::RedisNodeType(self.redis_node_type.clone()))
    }

    pub(super) fn is_lottery(&self) -> bool {
        self.lottery_window_secs > 0
    }
}
