//! `seckill-local plan`'s flags.

use super::*;

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
    /// One chunk of release-unpaid after its query (98 orders), ms.
    #[arg(long, value_name = "MS", default_value_t = PlanInput::default().release_chunk_ms, allow_negative_numbers = true)]
    pub release_chunk_ms: f64,
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
            release_chunk_ms: self.release_chunk_ms,
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
