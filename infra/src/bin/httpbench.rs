//! `seckill-httpbench`: purchase decisions per second and their latency over
//! HTTP, through the local stack's API Gateway stand-in (JWT authorizer,
//! payload 2.0 events, the real purchase handler, Redis), next to the
//! target. The gateway and the load generator run in this process and
//! share the machine with Redis, as they would on a developer's box.
//!
//! The decision figure uses a queue that drops messages (the emulator's
//! SendMessage, about 150 a second, would otherwise be the figure);
//! `--queue sqs` or `--queue both` adds the queue-bound row with the real
//! SQS adapter on `AWS_ENDPOINT_URL`, labelled as such.
//!
//! Needs `REDIS_URL` and `AWS_ENDPOINT_URL`. Exit 1 unless every sale sold
//! exactly its stock to distinct buyers and every answer was 202 or 410.
//!
//! Options: `--buyers N` (100000), `--retries N` (a tenth of the buyers),
//! `--stock N` (1000), `--connections N` (256), `--queue skipped|sqs|both`
//! (skipped).

use clap::{Parser, ValueEnum};
use seckill_infra::loadgen::{self, HttpRun, HttpSettings, QueueStep};
use std::process::ExitCode;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The allocator the `purchase` function and `seckill-local` run with: with
/// glibc's, malloc and free were 18% of this process's CPU in a profile
/// (`perf record` of `--buyers 30000`), none of it the gateway's own work.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The target of the performance issue, on a 2-core machine with the load
/// generator on it.
const TARGET_PER_SEC: f64 = 30_000.0;
const TARGET_P99_MS: f64 = 10.0;

/// Purchase decisions per second and their latency over HTTP, through the
/// local stack's gateway. Needs `REDIS_URL` and `AWS_ENDPOINT_URL`.
#[derive(Parser)]
#[command(name = "seckill-httpbench")]
struct Args {
    /// Distinct buyers, one request each.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    buyers: usize,
    /// Retries with the same Idempotency-Key [default: a tenth of the buyers].
    #[arg(long, value_name = "N")]
    retries: Option<usize>,
    /// Units of the sale.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    stock: u32,
    /// Keep-alive connections (at least 1).
    #[arg(long, value_name = "N", default_value_t = 256)]
    connections: usize,
    /// The queue step: a queue that drops messages, SQS on the emulator, or
    /// one row of each.
    #[arg(long = "queue", value_enum, default_value_t = Queues::Skipped)]
    queues: Queues,
}

/// `--queue`: which rows to run.
#[derive(Clone, Copy, ValueEnum)]
enum Queues {
    Skipped,
    Sqs,
    Both,
}

impl Queues {
    fn steps(self) -> Vec<QueueStep> {
        match self {
            Queues::Skipped => vec![QueueStep::Skipped],
            Queues::Sqs => vec![QueueStep::Sqs],
            Queues::Both => vec![QueueStep::Skipped, QueueStep::Sqs],
        }
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args = Args::parse();
    let redis_url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set")?;
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        return Err("AWS_ENDPOINT_URL is not set (the local stack's queue and tables)".into());
    }
    println!(
        "seckill-httpbench: nproc={}, {}; gateway and load generator in this process, Redis at {redis_url}",
        std::thread::available_parallelism().map_or(0, usize::from),
        cpu_model().unwrap_or_else(|| "cpu unknown".into()),
    );
    let mut runs = Vec::new();
    for (n, queue) in args.queues.steps().iter().enumerate() {
        let mut settings = HttpSettings::new(redis_url.clone());
        settings.name = format!("{}-{n}", settings.name);
        settings.buyers = args.buyers;
        settings.retries = args.retries.unwrap_or(args.buyers / 10);
        settings.stock = args.stock;
        settings.connections = args.connections.max(1);
        settings.queue = *queue;
        runs.push(loadgen::http_decisions(&settings).await?);
    }
    print_table(&runs);
    let mut ok = true;
    for run in &runs {
        for failure in &run.failures {
            ok = false;
            println!("FAILED: {}: {failure}", run.queue.label());
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_table(runs: &[HttpRun]) {
    let ms = |us: Option<u32>| {
        us.map_or_else(|| "-".into(), |us| format!("{:.2}", f64::from(us) / 1000.0))
    };
    println!();
    println!(
        "{:<40} {:>9} {:>12} {:>8} {:>8} {:>9} {:>9}",
        "run", "requests", "decisions/s", "p50 ms", "p99 ms", "p99.9 ms", "accepted"
    );
    println!(
        "{:<40} {:>9} {:>12} {:>8} {:>8} {:>9} {:>9}",
        "target",
        "",
        format!(">= {TARGET_PER_SEC:.0}"),
        "",
        format!("<= {TARGET_P99_MS:.0}"),
        "",
        "",
    );
    for run in runs {
        println!(
            "{:<40} {:>9} {:>12.0} {:>8} {:>8} {:>9} {:>9}",
            run.queue.label(),
            run.requests(),
            run.decisions_per_sec,
            ms(run.p50_us),
            ms(run.p99_us),
            ms(run.p999_us),
            run.order_ids.len(),
        );
    }
    println!();
    for run in runs {
        let statuses: Vec<String> = run
            .report
            .statuses
            .iter()
            .map(|(s, n)| format!("{s} x{n}"))
            .collect();
        let met = run.queue == QueueStep::Skipped
            && run.decisions_per_sec >= TARGET_PER_SEC
            && run
                .p99_us
                .is_some_and(|us| f64::from(us) / 1000.0 <= TARGET_P99_MS);
        println!(
            "  {}: sale {}, {} buyers + {} retries (same Idempotency-Key), {} keep-alive connections, {:.2} s; statuses: {}; {} distinct orders{}",
            run.queue.label(),
            run.sale_id,
            run.buyers,
            run.retries,
            run.connections,
            run.report.wall.as_secs_f64(),
            statuses.join(", "),
            run.order_ids.len(),
            match run.queue {
                QueueStep::Skipped if met => "; target met",
                QueueStep::Skipped => "; target MISSED",
                QueueStep::Sqs => "; bound by the emulator's SendMessage, not a decision figure",
            }
        );
        println!(
            "    tokens minted and requests built in {:.2} s before the clock started; latency is per request, write to last byte read",
            run.prepared_in.as_secs_f64()
        );
    }
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_owned())
}
