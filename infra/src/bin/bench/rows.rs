//! The rows of `seckill-bench`, one function each, in the order `main` runs
//! them; then what closes the run: the invariant check of every sale sold,
//! reconcile's row, the cold start and the order-writer drain.

use crate::ceiling::{ceiling, check_redis, seed_ceiling};
use crate::cluster::{CLUSTER_ROUNDS, cluster_sale, evalsha_calls, node_conn};
use crate::drain::{DRAIN_BATCHED, DRAIN_SINGLE, DrainEnv, drain, print_drain};
use crate::handler::{Stats, Workload, check_run, queue_depth, run_variant, sold_out_service};
use crate::table::Row;
use crate::writers::{WritersEnv, writers_rows};
use crate::{
    Bench, BoxError, CEILING_PIPELINE, Emulator, REDIS_TIMEOUT, SALE_CACHE_TTL, bench_config,
};
use seckill_infra::emulator;
use seckill_infra::loadgen::{HttpSettings, NullQueue, Planned, UNLIMITED, http_decisions};
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::clock;
use seckill_shared::domain::{OrderId, Sale};
use seckill_shared::ports::StockLoading;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// The ceilings: the seed's minimal script (what one Redis can do for this
/// job at all), then the project's script alone, unpipelined and
/// pipelined, all driven by redis-benchmark. The seed's row comes first.
pub(crate) async fn ceiling_rows(bench: &mut Bench) -> Result<Vec<Row>, BoxError> {
    let stock = bench.args.stock;
    let seed = seed_ceiling(
        &bench.host,
        bench.port,
        &mut bench.conn,
        &bench.tag,
        stock,
        &mut bench.failures,
    )
    .await?;
    let mut rows = vec![seed];
    for pipeline in [None, Some(CEILING_PIPELINE)] {
        let sale = test_sale(
            &format!("{}-ceil{}", bench.tag, pipeline.unwrap_or(1)),
            stock,
            1,
        )?;
        bench.loader.load_sale(&sale, clock::now_ms()).await?;
        let row = ceiling(&bench.host, bench.port, &bench.sha, &sale, pipeline).await?;
        check_redis(&mut bench.conn, &sale, &row.label, &mut bench.failures).await?;
        rows.push(row);
    }
    Ok(rows)
}

/// The handler in-process with the real SQS adapter on the emulator, and
/// its wall time; `None` with `--skip-sqs`.
pub(crate) async fn handler_sqs_row(
    bench: &mut Bench,
    emulator: &Emulator,
    work: &Workload<'_>,
) -> Result<Option<(Row, Duration)>, BoxError> {
    if bench.args.skip_sqs {
        return Ok(None);
    }
    let tag = &bench.tag;
    let queues = emulator::ensure_queues(
        &emulator.sqs,
        &format!("{tag}-q"),
        &format!("{tag}-dlq"),
        emulator::VISIBILITY_TIMEOUT_SECS,
    )
    .await
    .map_err(|e| format!("{e} (is AWS_ENDPOINT_URL up?)"))?;
    let config = bench_config(
        &bench.redis_url,
        &queues.orders_url,
        &emulator.sales_table,
        &emulator.orders_table,
        None,
    );
    let service = purchase::wire(&config).await?;
    let stock = bench.args.stock;
    let sale = test_sale(&format!("{tag}-sqs"), stock, 1)?;
    let label = "handler, with SQS (emulator)";
    let stats = run_variant(label, service, &sale, work, &mut bench.notes).await?;
    let queued = queue_depth(&emulator.sqs, &queues.orders_url).await?;
    let winners = u64::from(stock);
    if queued < winners {
        // Invariant 4: a send without a definite answer keeps its 202 and
        // its reservation; reconcile relays it. Not a bench failure.
        bench.notes.push(format!(
            "  {label}: the queue holds {queued} of the {winners} winners' messages; the other {} sends got no definite answer from the emulator (timeouts), so their 202 stands and the reservation waits for reconcile to relay it",
            winners - queued
        ));
    } else {
        bench.notes.push(format!(
            "  {label}: the queue holds {queued} messages for {winners} winners"
        ));
    }
    check_run(&stats, stock, label, &mut bench.failures);
    check_redis(&mut bench.conn, &sale, label, &mut bench.failures).await?;
    Ok(Some((stats.row(label), stats.wall)))
}

/// The handler row with the queue step skipped, and what the rows after
/// the sell-out reuse: its sold-out sale and its winners.
pub(crate) struct HandlerRun {
    pub(crate) row: Row,
    pub(crate) wall: Duration,
    pub(crate) sale: Sale,
    /// Every request of a winning buyer (first try and retries) was a 202
    /// for its order: what page traffic after the sell-out must get again.
    won_answers: usize,
    won_orders: HashSet<String>,
}

/// The handler in-process with a queue that drops messages, every decision
/// in Redis.
pub(crate) async fn handler_row(
    bench: &mut Bench,
    emulator: &Emulator,
    work: &Workload<'_>,
) -> Result<HandlerRun, BoxError> {
    let null_service = PurchaseService::new(
        // The same limits as the SQS row: the limiter runs, it does not limit.
        RedisStock::connect_lazy(&bench.redis_url, REDIS_TIMEOUT)?.with_rate_limits(UNLIMITED),
        NullQueue,
        CachedCatalog::new(
            DynamoCatalog::new(emulator.db.clone(), &emulator.sales_table),
            SALE_CACHE_TTL,
        ),
    )
    // Every decision in Redis, keyed or not: the row compared with the
    // seed script (which has no flag); the page-traffic rows below show
    // what the flag adds.
    .with_sold_out_flag(Duration::ZERO);
    let sale = test_sale(&format!("{}-null", bench.tag), bench.args.stock, 1)?;
    let label = "handler, queue step skipped";
    let stats = run_variant(label, null_service, &sale, work, &mut bench.notes).await?;
    check_run(&stats, bench.args.stock, label, &mut bench.failures);
    check_redis(&mut bench.conn, &sale, label, &mut bench.failures).await?;
    bench.checked.push((
        sale.clone(),
        stats.order_ids.clone(),
        bench.redis_url.clone(),
    ));
    Ok(HandlerRun {
        row: stats.row(label),
        wall: stats.wall,
        won_answers: stats.statuses.get(&202).copied().unwrap_or(0),
        won_orders: stats.order_ids.iter().cloned().collect(),
        sale,
    })
}

/// After sell-out: a new crowd (no Idempotency-Key, never seen) on the
/// handler row's sold-out sale, without and with the sold-out flag.
pub(crate) async fn sold_out_rows(
    bench: &mut Bench,
    emulator: &Emulator,
    work: &Workload<'_>,
    handler: &HandlerRun,
) -> Result<Vec<Row>, BoxError> {
    let crowd: Vec<Planned> = (0..u32::try_from(bench.args.requests)?)
        .map(|user| Planned { user, retry: false })
        .collect();
    let late = Workload {
        plan: &crowd,
        keyed: false,
        first_user: 10_000_000,
        ..*work
    };
    let mut rows = Vec::new();
    for (label, flag) in [
        ("after sell-out, Redis every call", Duration::ZERO),
        (
            "after sell-out, sold-out flag",
            seckill_shared::app::purchase::SOLD_OUT_FLAG,
        ),
    ] {
        let service =
            sold_out_service(&bench.redis_url, &emulator.db, &emulator.sales_table, flag)?;
        let stats = run_variant(label, service, &handler.sale, &late, &mut bench.notes).await?;
        let not_410 = stats.latencies_us.len() - stats.statuses.get(&410).copied().unwrap_or(0);
        if not_410 > 0 {
            bench.failures.push(format!(
                "{label}: {not_410} answers were not 410 on a sold-out sale"
            ));
        }
        rows.push(stats.row(label));
    }
    Ok(rows)
}

/// Page traffic after sell-out: the buyer page sends an Idempotency-Key
/// with every click and its retries. The handler row's crowd again, keys
/// and retries included, on its sold-out sale: every request of a winner
/// is its order replayed (202), every other one SOLD_OUT; with the flag,
/// only a key whose reservation may exist reaches Redis.
pub(crate) async fn page_traffic_rows(
    bench: &mut Bench,
    emulator: &Emulator,
    work: &Workload<'_>,
    handler: &HandlerRun,
) -> Result<Vec<Row>, BoxError> {
    let mut rows = Vec::new();
    for (label, flag) in [
        ("page traffic after sell-out, Redis", Duration::ZERO),
        (
            "page traffic after sell-out, flag",
            seckill_shared::app::purchase::SOLD_OUT_FLAG,
        ),
    ] {
        let service =
            sold_out_service(&bench.redis_url, &emulator.db, &emulator.sales_table, flag)?;
        let stats = run_variant(label, service, &handler.sale, work, &mut bench.notes).await?;
        let replays = stats.statuses.get(&202).copied().unwrap_or(0);
        let refused = stats.statuses.get(&410).copied().unwrap_or(0);
        let won_answers = handler.won_answers;
        if replays != won_answers || replays + refused != stats.latencies_us.len() {
            bench.failures.push(format!(
                "{label}: statuses {:?}, expected {won_answers} replays and the rest 410",
                stats.statuses
            ));
        }
        if stats
            .order_ids
            .iter()
            .any(|id| !handler.won_orders.contains(id))
        {
            bench
                .failures
                .push(format!("{label}: a 202 for an order the sale never sold"));
        }
        rows.push(stats.row(label));
    }
    Ok(rows)
}

/// Over HTTP through the local stack's gateway (JWT check, API Gateway
/// event, the same handler), from a Rust load generator on keep-alive
/// connections, queue step skipped.
pub(crate) async fn http_row(bench: &mut Bench) -> Result<Row, BoxError> {
    let args = &bench.args;
    let mut http = HttpSettings::new(bench.redis_url.clone());
    http.buyers = args.requests;
    http.retries = args.requests / 10;
    http.stock = args.stock;
    http.connections = args.concurrency;
    http.name = format!("{}-http", bench.tag);
    // As the handler row: every decision in Redis, so the two rows differ
    // by the HTTP path alone.
    http.sold_out_flag = Duration::ZERO;
    let http_run = http_decisions(&http).await?;
    bench
        .failures
        .extend(http_run.failures.iter().map(|f| format!("HTTP: {f}")));
    bench.notes.push(format!(
        "  HTTP via local stack: {} requests over {} keep-alive connections in {:.2} s (tokens and requests prepared in {:.2} s, not timed): {} distinct orders, statuses {:?}",
        http_run.requests(),
        http_run.connections,
        http_run.report.wall.as_secs_f64(),
        http_run.prepared_in.as_secs_f64(),
        http_run.order_ids.len(),
        http_run.report.statuses,
    ));
    Ok(Row {
        label: "HTTP via local stack, queue skipped".into(),
        requests: http_run.requests(),
        per_sec: http_run.decisions_per_sec,
        p50: http_run.p50_us.map(f64::from),
        p99: http_run.p99_us.map(f64::from),
        p999: http_run.p999_us.map(f64::from),
    })
}

/// 1 shard and 8 shards on the 3-master cluster (when `make bench` started
/// one): three alternating rounds (1, 8, 1, 8, 1, 8), each on a fresh sale;
/// the table shows each side's median run. Two cores carry the three
/// masters and the client, so one run of each moves by a few per cent.
pub(crate) async fn cluster_rows(
    bench: &mut Bench,
    emulator: &Emulator,
    work: &Workload<'_>,
) -> Result<Vec<Row>, BoxError> {
    let (Ok(cluster_url), Ok(ports)) = (
        std::env::var("REDIS_CLUSTER_URL"),
        std::env::var("REDIS_CLUSTER_PORTS"),
    ) else {
        bench.notes.push("  cluster rows skipped: REDIS_CLUSTER_URL / REDIS_CLUSTER_PORTS not set (make bench starts a cluster)".into());
        return Ok(Vec::new());
    };
    let ports: Vec<u16> = ports
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    let mut runs: BTreeMap<u32, Vec<Row>> = BTreeMap::new();
    // Per shard count: every round's script calls per master.
    let mut calls_by_shards: BTreeMap<u32, Vec<Vec<(u16, u64)>>> = BTreeMap::new();
    for round in 0..CLUSTER_ROUNDS {
        for shards in [1u32, 8] {
            let (row, calls) =
                cluster_run(bench, emulator, work, &cluster_url, &ports, round, shards).await?;
            calls_by_shards.entry(shards).or_default().push(calls);
            runs.entry(shards).or_default().push(row);
        }
    }
    let mut rows = Vec::new();
    for (shards, rows_of) in runs {
        let calls = calls_by_shards.remove(&shards).unwrap_or_default();
        rows.push(cluster_median(bench, rows_of, &calls));
    }
    Ok(rows)
}

/// One round of one side of the cluster rows: its row and each master's
/// script calls.
async fn cluster_run(
    bench: &mut Bench,
    emulator: &Emulator,
    work: &Workload<'_>,
    cluster_url: &str,
    ports: &[u16],
    round: usize,
    shards: u32,
) -> Result<(Row, Vec<(u16, u64)>), BoxError> {
    let stock = bench.args.stock;
    let sale = cluster_sale(&format!("{}-r{round}", bench.tag), stock, shards, ports).await?;
    for port in ports {
        let mut node = node_conn(*port).await?;
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut node)
            .await?;
    }
    let service = PurchaseService::new(
        RedisStock::connect_lazy(cluster_url, REDIS_TIMEOUT)?.with_rate_limits(UNLIMITED),
        NullQueue,
        CachedCatalog::new(
            DynamoCatalog::new(emulator.db.clone(), &emulator.sales_table),
            SALE_CACHE_TTL,
        ),
    );
    let label: &'static str = if shards == 1 {
        "cluster, 1 shard"
    } else {
        "cluster, 8 shards"
    };
    let stats: Stats = run_variant(label, service, &sale, work, &mut bench.notes).await?;
    check_run(&stats, stock, label, &mut bench.failures);
    let mut calls = Vec::new();
    for port in ports {
        calls.push((*port, evalsha_calls(*port).await?));
    }
    let row = stats.row(label);
    bench
        .checked
        .push((sale, stats.order_ids, cluster_url.to_owned()));
    Ok((row, calls))
}

/// The median of one side's rounds, with a note of every round's figure
/// and its script calls per master.
fn cluster_median(bench: &mut Bench, mut rows_of: Vec<Row>, calls: &[Vec<(u16, u64)>]) -> Row {
    let all: Vec<String> = rows_of
        .iter()
        .map(|r| format!("{:.0}", r.per_sec))
        .collect();
    rows_of.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
    let median = rows_of.swap_remove(rows_of.len() / 2);
    // The spread is a property of one sale (its shards' slots), so it is
    // taken per round, never summed over different sales.
    let spreads: Vec<String> = calls
        .iter()
        .map(|calls| {
            let busiest = calls.iter().map(|c| c.1).max().unwrap_or(0);
            let least = calls.iter().map(|c| c.1).min().unwrap_or(0);
            let per_master: Vec<String> = calls.iter().map(|(p, n)| format!(":{p} {n}")).collect();
            if least == 0 {
                format!("{} (one master holds the sale)", per_master.join(" "))
            } else {
                format!(
                    "{} = {:.2}",
                    per_master.join(" "),
                    busiest as f64 / least as f64
                )
            }
        })
        .collect();
    bench.notes.push(format!(
        "  {}: decisions/s of the {CLUSTER_ROUNDS} rounds {} (the table shows the median); script calls per master and busiest / least, per round: {}",
        median.label,
        all.join(", "),
        spreads.join("; ")
    ));
    median
}

/// Every sale the handler rows sold, through the invariant checker (Redis,
/// queue, DynamoDB).
pub(crate) async fn check_invariants(
    bench: &mut Bench,
    emulator: &Emulator,
) -> Result<(), BoxError> {
    let tag = &bench.tag;
    let check_queue = emulator::ensure_queues(
        &emulator.sqs,
        &format!("{tag}-check"),
        &format!("{tag}-check-dlq"),
        emulator::VISIBILITY_TIMEOUT_SECS,
    )
    .await?;
    let mut violations = 0;
    for (sale, order_ids, url) in &bench.checked {
        let checker = seckill_shared::app::invariants::InvariantChecker::new(
            RedisStock::connect_lazy(url, REDIS_TIMEOUT)?,
            emulator.catalog.clone(),
            seckill_shared::adapters::dynamo::orders::DynamoOrders::new(
                emulator.db.clone(),
                emulator.orders_table.clone(),
                emulator.sales_table.clone(),
            ),
            seckill_shared::adapters::sqs::SqsInspector::new(
                emulator.sqs.clone(),
                check_queue.orders_url.clone(),
                None,
            ),
        );
        let accepted: Vec<OrderId> = order_ids
            .iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .filter_map(|id| OrderId::parse(id).ok())
            .collect();
        let found = checker
            .check_sale(&sale.sale_id, &accepted)
            .await?
            .unwrap_or_default();
        for v in &found {
            bench
                .failures
                .push(format!("{}: {} {}", sale.sale_id, v.code, v.detail));
        }
        violations += found.len();
    }
    println!(
        "invariant checker: {} sales checked (Redis, queue, DynamoDB), {violations} violations",
        bench.checked.len()
    );
    Ok(())
}

/// Purchase p99 while reconcile reads a sale of a million buyers.
pub(crate) async fn reconcile_row(bench: &Bench) -> Result<(), BoxError> {
    println!(
        "\n{}",
        seckill_infra::bench_reconcile::run(&bench.redis_url, &bench.tag).await?
    );
    Ok(())
}

/// The jobs on a sale of `--ledger-orders` orders: each one's peak memory
/// and time, a failure when one is over its function's.
pub(crate) async fn ledger_row(bench: &mut Bench) -> Result<(), BoxError> {
    // The emulator itself: the planting is set-up, not what the strict
    // layer measures.
    let endpoint = std::env::var("SECKILL_EMULATOR_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .map_err(|_| "AWS_ENDPOINT_URL is not set (run through `make bench`)")?;
    let run = seckill_infra::bench_ledger::run(
        bench.args.ledger_orders,
        &bench.tag,
        &bench.redis_url,
        &endpoint,
    )
    .await?;
    println!("\n{run}");
    bench.failures.extend(run.over_limits());
    for step in &run.steps {
        if step.job.starts_with("reconcile") && !step.peak.note.starts_with("0 violations") {
            bench
                .failures
                .push(format!("ledger: reconcile found {}", step.peak.note));
        }
        if step.job.starts_with("prewarm") && !step.peak.note.starts_with("Loaded") {
            bench.failures.push(format!(
                "ledger: prewarm did not rebuild: {}",
                step.peak.note
            ));
        }
    }
    Ok(())
}

/// Cold start of the real `purchase` binary (release profile), through the
/// loopback Lambda Runtime API, on the same Redis and emulator.
pub(crate) fn cold_start(bench: &mut Bench) -> Result<(), BoxError> {
    match std::env::var("PURCHASE_BINARY") {
        Ok(binary) => {
            println!();
            let sibling = std::env::current_exe()?.with_file_name("seckill-coldstart");
            let status = std::process::Command::new(sibling)
                .args(["--binary", &binary, "--runs", "20"])
                .status()?;
            if !status.success() {
                bench.failures.push(format!(
                    "cold start: seckill-coldstart exited with {status}"
                ));
            }
        }
        Err(_) => println!("cold start: skipped, PURCHASE_BINARY not set (make bench sets it)"),
    }
    Ok(())
}

/// The order-writer drain, after the purchase rows so it does not share
/// the emulator with them: the template's batch of 10, then one order per
/// call; then one sale drained at the template's concurrency, through the
/// strict layer and on the emulator itself.
pub(crate) async fn drain_rows(bench: &mut Bench, emulator: &Emulator) -> Result<(), BoxError> {
    if bench.args.skip_drain {
        println!();
        println!("order-writer drain: skipped (--skip-drain)");
        return Ok(());
    }
    let env = DrainEnv {
        tag: &bench.tag,
        redis_url: &bench.redis_url,
        sqs: &emulator.sqs,
        db: &emulator.db,
        region: std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
    };
    let batched = drain(&env, &DRAIN_BATCHED, &mut bench.failures).await?;
    let single = drain(&env, &DRAIN_SINGLE, &mut bench.failures).await?;
    print_drain(&[batched, single]);
    // The strict layer's upstream is the emulator itself: `make bench`
    // points AWS_ENDPOINT_URL at a layer of its own and names the emulator
    // in SECKILL_EMULATOR_URL; without a layer both are the emulator.
    let emulator_url = std::env::var("SECKILL_EMULATOR_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .map_err(|_| "neither SECKILL_EMULATOR_URL nor AWS_ENDPOINT_URL is set")?;
    let writers = WritersEnv {
        tag: &bench.tag,
        redis_url: &bench.redis_url,
        region: env.region.clone(),
        emulator_url,
        orders: bench.args.drain_orders,
    };
    writers_rows(&writers, &mut bench.failures).await?;
    Ok(())
}
