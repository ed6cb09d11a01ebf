//! `seckill-bench` (`make bench`): purchase decisions per second and their
//! latency, next to the ceiling Redis itself sets for the same decision;
//! then how many DynamoDB writes the order-writer spends per order; then
//! who wins the units at the opening second, with and without a lottery
//! window.
//!
//! Every row of the two tables it prints is measured in the same run, on the
//! same Redis (the one `REDIS_URL` names) and emulator (`AWS_ENDPOINT_URL`;
//! `infra/stack.sh bench` starts a fresh one of each on free ports).
//!
//! First table:
//!
//! - **ceiling**: `redis-benchmark` running EVALSHA of the real purchase
//!   script (`shared/lua/purchase.lua`) against a loaded sale, with 50
//!   connections, then again pipelined (`-P 16`). No Rust code is in that
//!   path: it is what the script and Redis can do on this machine.
//! - **handler**: `purchase::handler::handle` called in-process with
//!   real-shaped API Gateway v2 events (built from `events/purchase.json`
//!   before the clock starts), 100,000 distinct buyers plus 10% retries with
//!   the same `Idempotency-Key`, from many concurrent tasks; once with the
//!   real SQS adapter on the emulator, once with a queue that drops messages.
//!
//! Every run sells one sale of `--stock` units at one per buyer, so after
//! the first winners every call takes the sold-out path, in every row alike.
//! - **after sell-out**: a new crowd of `--requests` buyers (no
//!   `Idempotency-Key`) on the sold-out sale of the row above, once with
//!   the sold-out flag off (every call is a Redis round trip) and once with
//!   it on (answered from memory after the first refusal).
//! - **page traffic after sell-out**: the handler row's crowd again, every
//!   request with its `Idempotency-Key` and the retries, on its sold-out
//!   sale (the winners' requests are replays, the rest `SOLD_OUT`); once
//!   with every call a Redis round trip, once with the flag, which answers
//!   a keyed request from memory unless its key may hold a reservation
//!   (`seckill_shared::domain::keyed_filter`).
//! - **cluster, 1 shard / 8 shards**: the handler row again on the 3-master
//!   Redis Cluster `make bench` starts (`REDIS_CLUSTER_URL`,
//!   `REDIS_CLUSTER_PORTS`), the 8-shard sale's id chosen so its shards
//!   spread 3/3/2 over the masters; three alternating rounds, each side's
//!   median run shown; the notes give every round's figure and each
//!   master's script calls (`INFO commandstats` after `CONFIG RESETSTAT`).
//!
//! - **ledger** (`--only-ledger` alone): prewarm's rebuild of the whole
//!   sale and of one of its 8 shards, reconcile's read and one
//!   release-unpaid run on a sale of `--ledger-orders` orders
//!   planted in the emulator, each in a process of its own: peak memory
//!   and time next to its function's `MemorySize` and `Timeout`
//!   (`seckill_infra::bench_ledger`).
//! - **reconcile**: purchase p99 on a sale of 1,000,000 buyers and 10,000
//!   reservations while reconcile's Redis read loops over it, against the
//!   p99 without it (`seckill_infra::bench_reconcile`).
//!
//! Every sale the handler rows sold is checked at the end by the invariant
//! checker (Redis, queue, DynamoDB), and the count of violations printed.
//! Every handler row records the functions' CloudWatch metrics as `make run`
//! does (aggregated; the EMF lines are discarded).
//!
//! Second table, the order-writer drain: 1,000 valid order messages sent
//! straight to a fresh queue (the purchase step is measured above; skipping
//! it isolates the writer) for a fresh sale of 1,000 units in fresh tables,
//! drained by the local SQS event source calling the real handler
//! (`seckill_infra::local::writer_handler`) until the sale item's `sold`
//! reaches 1,000 and the queue is empty. Rows: the template's batch of 10,
//! and the reference of one order per call on its own sale and tables. The
//! figures that carry over to DynamoDB are the write requests and sale-item
//! updates per order (`DynamoOrders::counters`); orders/s is the emulator's.
//!
//! Third table, fairness at the opening second: 2,000 scripted
//! buyers firing within 5 ms of the start and 20,000 people arriving over
//! the first 3 s, for 1,000 units, through the real purchase path
//! in-process on the same Redis (`seckill_infra::fairness`); first come
//! first served, with a 3 s lottery window, and with a 1 s one. Per run:
//! units won by people and by scripts, people's share of the units against
//! their share of the ticket holders (the target with the window: within 5
//! points), the peak purchase calls per second Redis executed, and the
//! time to the sell-out. `make fairness` runs this table alone.
//!
//! The run fails (exit 1) unless each sale sold exactly its stock, every
//! drained order is in its orders table, and every fairness run kept the
//! invariants.
//!
//! Next to it, the same writer at the template's concurrency on one sale
//! (`writers.rs`): `--drain-orders` messages (10,000) of one sale drained by
//! five pollers, once through the strict layer (started in-process in front
//! of `SECKILL_EMULATOR_URL`, default knobs) and once on the emulator
//! itself: orders/s, p99 from `reservedAt` to written, transaction
//! conflicts retried, DLQ messages and `REJECTED` orders (both must be 0),
//! and the sale item's size after a long admin history (it must not grow).
//!
//! Options: `--requests N` (100000), `--stock N` (1000), `--concurrency N`
//! (256), `--drain-orders N` (10000), `--skip-sqs`, `--skip-drain`,
//! `--skip-fairness`, `--only-drain`, `--only-fairness`, `--only-ceiling`,
//! `--only-reconcile`, `--only-ledger` (with `--ledger-orders N`,
//! 1000000).
//!
//! # Layout
//!
//! - here: the settings, what every row shares ([`Bench`], [`Emulator`],
//!   [`Crowd`]) and `main`, one call per row in the order they run.
//! - `rows.rs`: the rows, one function each, and what closes the run
//!   (invariant check, reconcile, cold start, drain, exit code).
//! - `table.rs`: the first table and the lines under it.
//! - `ceiling.rs`: redis-benchmark on a script, and the check in Redis.
//! - `handler.rs`: the handler driven in-process, and what a run produced.
//! - `cluster.rs`: the cluster rows' sales and per-master script calls.
//! - `drain.rs`: the order-writer drain and its table.
//! - `writers.rs`: the drain at the template's concurrency, strict layer
//!   and emulator side by side.
//! - `fairness.rs`: the fairness table (the runs themselves are
//!   `seckill_infra::fairness`).

mod ceiling;
mod cluster;
mod drain;
mod fairness;
mod handler;
mod rows;
mod table;
mod writers;

use clap::builder::RangedU64ValueParser;
use clap::{Parser, value_parser};
use handler::Workload;
use seckill_infra::emulator;
use seckill_infra::loadgen::{Planned, plan};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::clock;
use seckill_shared::domain::Sale;
use seckill_shared::observe::metrics;
use std::process::ExitCode;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The purchase script exactly as the handler runs it (limiter included).
const PURCHASE_LUA: &str = seckill_shared::adapters::redis::PURCHASE_SOURCE;
/// The seed article's minimal deduction: the honest ceiling ([`ceiling::seed_ceiling`]).
const SEED_LUA: &str = include_str!("../../../lua/seed_deduct.lua");
const PURCHASE_EVENT: &str = include_str!("../../../../events/purchase.json");

/// redis-benchmark settings: fixed, so the ceiling is comparable across runs
/// whatever `--requests` says.
const CEILING_CLIENTS: u32 = 50;
const CEILING_REQUESTS: u32 = 200_000;
const CEILING_PIPELINE: u32 = 16;

/// Generous bounds: the bench measures throughput, and a 503 from a tight
/// timeout under a saturated 2-core box would only blur the figures.
const REDIS_TIMEOUT: Duration = Duration::from_secs(2);
const SQS_TIMEOUT: Duration = Duration::from_secs(20);
const SALE_CACHE_TTL: Duration = Duration::from_secs(5);

/// The functions' configuration for a bench sale: the emulator's tables and
/// queue, the bounds above, no rate limit, no gate, no secrets.
fn bench_config(
    redis_url: &str,
    orders_queue_url: &str,
    sales_table: &str,
    orders_table: &str,
    max_receive_count: Option<u32>,
) -> seckill_shared::config::Config {
    seckill_shared::config::Config {
        redis_url: redis_url.to_owned(),
        orders_queue_url: Some(orders_queue_url.to_owned()),
        orders_dlq_url: None,
        sales_table: sales_table.to_owned(),
        orders_table: orders_table.to_owned(),
        redis_timeout: REDIS_TIMEOUT,
        sqs_timeout: SQS_TIMEOUT,
        sale_cache_ttl: SALE_CACHE_TTL,
        prewarm_lead: Duration::from_secs(600),
        queue_count_lag: Duration::ZERO,
        rate_limits: seckill_infra::loadgen::UNLIMITED,
        gate_secret: None,
        payment_secret: None,
        edge_secret: None,
        secrets: Default::default(),
        metrics_namespace: metrics::DEFAULT_NAMESPACE.into(),
        max_receive_count,
        stand_in_payments: seckill_shared::config::StandInPayments::Any,
    }
}

/// Purchase decisions per second and their latency, next to the ceiling
/// Redis sets for the same decision; then the order-writer's DynamoDB
/// writes per order. Needs `REDIS_URL`, and `AWS_ENDPOINT_URL` unless both
/// `--skip-sqs` and `--skip-drain` are given (`make bench` sets both).
#[derive(Parser)]
#[command(name = "seckill-bench")]
struct Args {
    /// Distinct buyers of each handler row (plus a tenth as retries), and
    /// the new crowd of the rows after sell-out.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    requests: usize,
    /// Units of each row's sale, one per buyer.
    #[arg(long, value_name = "N", default_value_t = 1_000, value_parser = value_parser!(u32).range(1..))]
    stock: u32,
    /// Concurrent tasks (HTTP: keep-alive connections).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    concurrency: usize,
    /// Skip the handler row with SQS on the emulator.
    #[arg(long)]
    skip_sqs: bool,
    /// Skip the order-writer drain (both of its tables).
    #[arg(long, conflicts_with = "only_drain")]
    skip_drain: bool,
    /// Orders of the one sale the template's five writers drain, through
    /// the strict layer and on the emulator itself.
    #[arg(long, value_name = "N", default_value_t = writers::DEFAULT_ORDERS, value_parser = value_parser!(u32).range(1..))]
    drain_orders: u32,
    /// Only the order-writer drain's tables: needs `REDIS_URL` and the
    /// emulator.
    #[arg(long, conflicts_with_all = ["only_ceiling", "only_fairness"])]
    only_drain: bool,
    /// Only the reconcile row (a million planted buyers: purchase latency
    /// while reconcile reads them, and the read's memory): needs nothing
    /// but `REDIS_URL`. With `--only-drain`, the drain's tables follow.
    #[arg(long, conflicts_with_all = ["only_ceiling", "only_fairness"])]
    only_reconcile: bool,
    /// Only the ledger row: prewarm, reconcile and release-unpaid on a
    /// sale of `--ledger-orders` orders planted in the emulator, each
    /// job's peak memory and time (`seckill_infra::bench_ledger`).
    #[arg(long, conflicts_with_all = ["only_ceiling", "only_fairness", "only_reconcile", "only_drain"])]
    only_ledger: bool,
    /// Orders of the ledger row's sale.
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = value_parser!(u32).range(1..))]
    ledger_orders: u32,
    /// Only the ceiling rows (redis-benchmark on the seed's script and on
    /// the purchase script): what a change to the script costs, in seconds
    /// and with nothing but `REDIS_URL` and `redis-benchmark`.
    #[arg(long, conflicts_with = "only_fairness")]
    only_ceiling: bool,
    /// Skip the fairness table.
    #[arg(long)]
    skip_fairness: bool,
    /// Only the fairness table (`make fairness`): needs nothing but
    /// `REDIS_URL`.
    #[arg(long, conflicts_with = "skip_fairness")]
    only_fairness: bool,
}

/// The allocator the `purchase` function runs with, so the in-process rows
/// measure what Lambda runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// One worker thread: redis-server needs a core of its own on a 2-core
// machine, and a second worker only makes the two fight over it (both the
// HTTP and the flag rows were slower with two workers).
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<ExitCode, BoxError> {
    // A run of this binary that measures one read of a sale for the
    // memory figures (`seckill_infra::peak`).
    if let Some(done) = seckill_infra::peak::child().await {
        return match done {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(err) => {
                eprintln!("{err}");
                Ok(ExitCode::FAILURE)
            }
        };
    }
    let args = Args::parse();
    let _flusher = record_metrics();
    let mut bench = Bench::start(args).await?;
    if bench.args.only_fairness {
        fairness::fairness_table(&mut bench).await?;
        return Ok(bench.finish());
    }
    if bench.args.only_ledger {
        rows::ledger_row(&mut bench).await?;
        return Ok(bench.finish());
    }
    if bench.args.only_reconcile {
        rows::reconcile_row(&bench).await?;
        if !bench.args.only_drain {
            return Ok(bench.finish());
        }
    }
    if bench.args.only_drain {
        let emulator = Emulator::setup(&bench).await?;
        rows::drain_rows(&mut bench, &emulator).await?;
        return Ok(bench.finish());
    }
    let ceilings = rows::ceiling_rows(&mut bench).await?;
    if bench.args.only_ceiling {
        table::print_rows(&ceilings);
        return Ok(bench.finish());
    }
    let emulator = Emulator::setup(&bench).await?;
    let crowd = Crowd::new(bench.args.requests)?;
    let work = crowd.workload(&emulator.catalog, bench.args.concurrency);
    let with_sqs = rows::handler_sqs_row(&mut bench, &emulator, &work).await?;
    let handler = rows::handler_row(&mut bench, &emulator, &work).await?;
    let mut after_sell_out = rows::sold_out_rows(&mut bench, &emulator, &work, &handler).await?;
    after_sell_out.extend(rows::page_traffic_rows(&mut bench, &emulator, &work, &handler).await?);
    let http = rows::http_row(&mut bench).await?;
    let cluster = rows::cluster_rows(&mut bench, &emulator, &work).await?;
    table::print(
        &bench,
        &crowd,
        table::Table {
            ceilings,
            with_sqs,
            handler: handler.row,
            handler_wall: handler.wall,
            http,
            after_sell_out,
            cluster,
        },
    );
    rows::check_invariants(&mut bench, &emulator).await?;
    rows::reconcile_row(&bench).await?;
    rows::cold_start(&mut bench)?;
    rows::drain_rows(&mut bench, &emulator).await?;
    if bench.args.skip_fairness {
        println!();
        println!("fairness at the opening second: skipped (--skip-fairness)");
    } else {
        fairness::fairness_table(&mut bench).await?;
    }
    Ok(bench.finish())
}

/// The functions record their metrics as under `make run` (aggregated,
/// written every second and every 100 Lua latencies), so every row pays
/// what the metrics cost; the lines themselves are discarded to keep the
/// tables readable. (Lambda writes one line per invocation instead: see
/// `shared/src/observe/metrics.rs` for that cost.) Keep the flusher for the run.
fn record_metrics() -> tokio::task::JoinHandle<()> {
    metrics::install(metrics::Emitter::new(
        metrics::Sink::new(std::io::sink()),
        metrics::Flush::Periodic,
    ));
    metrics::spawn_flusher(Duration::from_secs(1))
}

/// What every row shares: the settings, the Redis they all run on, and
/// what they report.
struct Bench {
    args: Args,
    /// Unique per run, so a bench never meets another run's sale or queue.
    tag: String,
    redis_url: String,
    host: String,
    port: u16,
    conn: redis::aio::MultiplexedConnection,
    /// The purchase script's SHA on that Redis.
    sha: String,
    loader: RedisStock,
    /// The lines under the first table, in the order the rows ran.
    notes: Vec<String>,
    failures: Vec<String>,
    /// Each sale a handler row sold, its accepted order ids and the Redis
    /// it lives on: the invariant checker's input.
    checked: Vec<(Sale, Vec<String>, String)>,
}

impl Bench {
    /// Connects to Redis, loads the purchase script and prints the header.
    async fn start(args: Args) -> Result<Self, BoxError> {
        let redis_url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set")?;
        let needs_emulator =
            !(args.skip_sqs && args.skip_drain || args.only_ceiling || args.only_fairness);
        if needs_emulator && std::env::var("AWS_ENDPOINT_URL").is_err() {
            return Err("AWS_ENDPOINT_URL is not set (run through `make bench`)".into());
        }
        let tag = format!("bench{}-{}", std::process::id(), clock::now_ms());

        let client = redis::Client::open(redis_url.as_str())?;
        let (host, port) = match client.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            other => {
                return Err(
                    format!("redis-benchmark needs a plain TCP Redis, not {other:?}").into(),
                );
            }
        };
        let mut conn = client.get_multiplexed_async_connection().await?;
        let redis_version = server_version(&mut conn).await?;
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(PURCHASE_LUA)
            .query_async(&mut conn)
            .await?;
        let loader = RedisStock::connect_lazy(&redis_url, REDIS_TIMEOUT)?;

        println!(
            "seckill-bench: nproc={}, {}, redis-server {redis_version} at {host}:{port}, same Redis for every row",
            std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model().unwrap_or_else(|| "cpu unknown".into()),
        );
        Ok(Self {
            args,
            tag,
            redis_url,
            host,
            port,
            conn,
            sha,
            loader,
            notes: Vec::new(),
            failures: Vec::new(),
            checked: Vec::new(),
        })
    }

    /// Prints the failures, if any; exit 1 when there are.
    fn finish(self) -> ExitCode {
        if self.failures.is_empty() {
            ExitCode::SUCCESS
        } else {
            for failure in &self.failures {
                println!("FAILED: {failure}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The emulator's clients and the sales table every handler row shares.
struct Emulator {
    sqs: aws_sdk_sqs::Client,
    db: aws_sdk_dynamodb::Client,
    sales_table: String,
    orders_table: String,
    catalog: DynamoCatalog,
}

impl Emulator {
    async fn setup(bench: &Bench) -> Result<Self, BoxError> {
        let sdk = aws::sdk_config(aws::Caller::Tool, SQS_TIMEOUT).await;
        let (sqs, db) = (aws::sqs(&sdk), aws::dynamodb(&sdk));
        let sales_table = format!("{}-sales", bench.tag);
        let orders_table = format!("{}-orders", bench.tag);
        emulator::ensure_tables(&db, &sales_table, &orders_table).await?;
        let catalog = DynamoCatalog::new(db.clone(), &sales_table);
        Ok(Self {
            sqs,
            db,
            sales_table,
            orders_table,
            catalog,
        })
    }
}

/// The handler rows' crowd: `--requests` buyers and a tenth of retries,
/// and the event every request is built from.
struct Crowd {
    template: serde_json::Value,
    plan: Vec<Planned>,
    /// The retries in the plan.
    retries: usize,
}

impl Crowd {
    fn new(requests: usize) -> Result<Self, BoxError> {
        let plan = plan(requests, requests / 10);
        let retries = plan.iter().filter(|p| p.retry).count();
        Ok(Self {
            template: serde_json::from_str(PURCHASE_EVENT)?,
            plan,
            retries,
        })
    }

    fn workload<'a>(&'a self, catalog: &'a DynamoCatalog, concurrency: usize) -> Workload<'a> {
        Workload {
            catalog,
            template: &self.template,
            plan: &self.plan,
            concurrency,
            keyed: true,
            first_user: 0,
        }
    }
}

async fn server_version(conn: &mut redis::aio::MultiplexedConnection) -> Result<String, BoxError> {
    let info: String = redis::cmd("INFO").arg("server").query_async(conn).await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_owned())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_owned())
}
