//! What the plan shows: its rows and verdicts, the quota requests, the
//! parameter overrides, the cost of the hour and the notes.

use super::*;

pub(super) fn rows(plan: &Plan) -> Vec<Row> {
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
    let jobs = &plan.jobs;
    // Within the Timeout at the default memory is ok; within it only at
    // more memory is the JobsMemorySize parameter.
    let within = |need: f64, timeout: f64| {
        Some(if need > timeout {
            Verdict::Limit
        } else if jobs.memory_mb > JOBS_MEMORY_MB[0] {
            Verdict::Parameter
        } else {
            Verdict::Ok
        })
    };
    row(
        format!(
            "prewarm's rebuild of the sale ({} index pages, {} MB)",
            int(jobs.ledger_pages),
            jobs.memory_mb
        ),
        secs(jobs.rebuild_secs),
        format!("{} Timeout", secs(PREWARM_TIMEOUT_SECS)),
        within(jobs.rebuild_secs, PREWARM_TIMEOUT_SECS),
    );
    row(
        format!(
            "reconcile of the sale (index, Redis, CPU; {} MB)",
            jobs.memory_mb
        ),
        secs(jobs.reconcile_secs),
        format!("{} Timeout", secs(RECONCILE_TIMEOUT_SECS)),
        within(jobs.reconcile_secs, RECONCILE_TIMEOUT_SECS),
    );
    rows
}

pub(super) fn quota_requests(plan: &Plan) -> Vec<QuotaRequest> {
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

pub(super) fn overrides(plan: &Plan) -> Vec<(&'static str, String)> {
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
        plan.jobs.memory_mb.to_string(),
    ];
    PARAMETERS.into_iter().zip(values).collect()
}

pub(super) fn costs(plan: &Plan) -> Vec<CostLine> {
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
    let release_busy = (unpaid / RELEASE_CHUNK).ceil() * input.release_chunk_ms / 1_000.0;
    let other_gbs = (orders_api_invocations * input.orders_api_ms / 1_000.0
        + writer_invocations * input.writer_batch_ms / 1_000.0
        + release_busy)
        * OTHER_GB
        // Reconcile reads the whole sale each of its runs, at JobsMemorySize.
        + RECONCILE_RUNS_PER_HOUR * plan.jobs.reconcile_secs * f64::from(plan.jobs.memory_mb)
            / 1_024.0;
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
            "{} orders x {WRU_PER_ORDER} + {} paid x {WRU_PER_PAYMENT} + {} expired x {WRU_PER_EXPIRY:.2} = {} WRU x $0.625/M",
            int(orders),
            int(paid),
            int(unpaid),
            int(wru)
        ),
        wru / 1e6 * price::WRU_PER_MILLION,
    );
    let console = console_rru_per_hour(orders);
    let rru = order_polls * RRU_PER_ORDER_POLL
        + ticket_polls * RRU_PER_TICKET_POLL
        + paid * RRU_PER_PAYMENT
        + unpaid * (RRU_PER_EXPIRY + rru_per_expiry_queries())
        + console;
    line(
        "DynamoDB reads",
        format!(
            "{} RRU (the console's order count {}) x $0.125/M",
            int(rru),
            int(console)
        ),
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

pub(super) fn notes(plan: &Plan) -> Vec<String> {
    let input = &plan.input;
    let mut notes = Vec::new();
    if let Some(draw) = &plan.draw {
        notes.push(format!(
            "The draw is the lottery's peak, not the window: every ticket holder's page polls /sales/{{id}}/orders once a second from drawAt until its ticket is decided (web/assets/buyer-ticket.js, TICKET_POLL_MS), \
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
            "release-unpaid expires {} orders per query of the {SALE_BUCKETS} buckets, {} to a transaction, for {} s of each minute: about {} a run ({}/s). Unpaid units stay off sale until then (an undersell, never an oversell); reading an expired order through the API releases it at once.",
            RELEASE_CHUNK,
            EXPIRE_BATCH,
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
        "The sale-page polls assume the API's CloudFront distribution in front of GET /sales/{{id}} (ApiEdge=on, the default; the view answers Cache-Control: max-age={}); with ApiEdge=off all {} polls/s reach the API and count against its quota.",
        plan.input.sale_cache_secs,
        int(plan.input.buyers as f64 / plan.input.sale_poll_secs)
    ));
    let c = &plan.concurrency;
    if c.provisioned + c.orders_api_provisioned > 0 {
        notes.push(
            "Provisioned concurrency is billed every hour it is set: add ProvisionedConcurrencyFrom=<the start less the prewarm lead> and ProvisionedConcurrencyUntil=<the end> (UTC, yyyy-mm-ddThh:mm:ss) to hold it for the sale's window alone; the cost above counts one hour."
                .to_owned(),
        );
    }
    notes.push(
        "A --parameter-overrides on the command line replaces samconfig.toml's list: merge these values into it (or add the rest of the parameters to the line)."
            .to_owned(),
    );
    let jobs = &plan.jobs;
    if !jobs.within_timeouts() {
        notes.push(format!(
            "The sale is too big for its jobs' time even at JobsMemorySize={} (a whole vCPU): prewarm's rebuild of a lost sale reads {} index pages and spends {} of CPU ({} in all, {} s Timeout); reconcile reads the pages and every buyer's Redis entry and spends {} of CPU ({} in all, {} s Timeout). A run cut off starts again from the first page at its next schedule, so it never ends: split the stock over sales.",
            jobs.memory_mb,
            int(jobs.ledger_pages),
            secs(jobs.rebuild_cpu_secs),
            secs(jobs.rebuild_secs),
            int(PREWARM_TIMEOUT_SECS),
            secs(jobs.reconcile_cpu_secs),
            secs(jobs.reconcile_secs),
            int(RECONCILE_TIMEOUT_SECS),
        ));
    }
    notes
}
