//! `seckill-coldstart`: the cold start of the real `purchase` Lambda binary.
//!
//! Each run spawns the binary against a loopback Lambda Runtime API
//! (`seckill_infra::runtime_api`) with one purchase already queued, as
//! Lambda does for the event that caused the cold start, and times process
//! start → first `/next` (init) and → the first `/response` (the first
//! buyer's answer). It also reads the process's peak RSS (`VmHWM`) right
//! after the answer, and the binary's size on disk.
//!
//! The purchase is real: its own queue and tables on the emulator
//! (`AWS_ENDPOINT_URL`) and a live sale in DynamoDB and in Redis
//! (`REDIS_URL`), one unit per run, a new buyer per run, so every run takes
//! the accepting path (rate limiter + purchase script + SendMessage, `202`).
//! Its secrets are wired as on AWS: the environment carries only
//! `REDIS_AUTH_SECRET_ARN` and `GATE_SECRET_ARN`, secrets on the emulator,
//! and the init fetches both (the Redis token is the password of an ACL user
//! this run adds to `REDIS_URL`'s server and removes at the end), so init
//! includes the two `GetSecretValue` calls.
//!
//! Usage: `seckill-coldstart --binary PATH [--runs N]` (N defaults to 10).
//! Build the binary first with `cargo build --release -p purchase`: the
//! release profile is the one Lambda runs (fat LTO, stripped, panic=abort).

use clap::Parser;
use clap::builder::RangedU64ValueParser;
use seckill_infra::emulator;
use seckill_infra::local::DEFAULT_GATE_SECRET;
use seckill_infra::runtime_api::{self, ColdStart, Spread};
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::clock;
use seckill_shared::config::SecretArns;
use seckill_shared::config::{Config, RateLimits};
use seckill_shared::ports::StockLoading;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The targets of the cold-start budget.
const TARGET_ANSWER: Duration = Duration::from_millis(20);
const TARGET_SIZE_MIB: f64 = 8.0;
const TARGET_PEAK_MIB: f64 = 32.0;
const MIB: f64 = 1024.0 * 1024.0;

/// The cold start of the release `purchase` binary against a loopback
/// Lambda Runtime API, with its secrets fetched from the emulator. Needs
/// `REDIS_URL` and `AWS_ENDPOINT_URL`.
#[derive(Parser)]
#[command(name = "seckill-coldstart")]
struct Args {
    /// The release `purchase` binary (`cargo build --release -p purchase`).
    #[arg(long, value_name = "PATH")]
    binary: PathBuf,
    /// Cold starts to measure, each a fresh process.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    runs: usize,
}

#[tokio::main]
async fn main() -> Result<ExitCode, BoxError> {
    let args = Args::parse();
    let redis_url = std::env::var("REDIS_URL").map_err(|_| "REDIS_URL is not set")?;
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        return Err("AWS_ENDPOINT_URL is not set (the emulator the function talks to)".into());
    }
    // Unique names, so a run never meets another run's sale, queue or tables.
    let tag = format!("coldstart{}-{}", std::process::id(), clock::now_ms());

    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(10)).await;
    let (sqs, db) = (aws::sqs(&sdk), aws::dynamodb(&sdk));
    let queues = emulator::ensure_queues(
        &sqs,
        &format!("{tag}-q"),
        &format!("{tag}-dlq"),
        emulator::VISIBILITY_TIMEOUT_SECS,
    )
    .await?;
    let (sales_table, orders_table) = (format!("{tag}-sales"), format!("{tag}-orders"));
    emulator::ensure_tables(&db, &sales_table, &orders_table).await?;

    // One unit per run and one per buyer: each run is a first purchase that
    // is accepted, the path whose latency matters.
    let stock = u32::try_from(args.runs)?;
    let sale = test_sale(&format!("{tag}-sale"), stock, 1)?;
    DynamoCatalog::new(db.clone(), &sales_table)
        .create_sale(&sale)
        .await?;
    RedisStock::connect_lazy(&redis_url, Duration::from_secs(2))?
        .load_sale(&sale, clock::now_ms())
        .await?;

    // The secrets as on AWS: names in the environment, values on the emulator.
    let secrets = aws::secrets(&sdk);
    let gate =
        emulator::ensure_secret(&secrets, &format!("{tag}-gate"), DEFAULT_GATE_SECRET).await?;
    // With the API's edge in front (ApiEdge=on), a third fetched at once.
    let edge = emulator::ensure_secret(
        &secrets,
        &format!("{tag}-edge"),
        &format!("{tag}-edge-secret-0123456789abcdef0123456789"),
    )
    .await?;
    let redis_auth = RedisUser::add(&redis_url, &tag, &secrets).await?;

    // The function's settings as `template.yaml` gives them.
    let config = Config {
        redis_url: redis_auth.function_url.clone(),
        orders_queue_url: Some(queues.orders_url.clone()),
        orders_dlq_url: None,
        sales_table,
        orders_table,
        redis_timeout: Duration::from_millis(250),
        sqs_timeout: Duration::from_millis(1_500),
        sale_cache_ttl: Duration::from_secs(5),
        prewarm_lead: Duration::from_secs(600),
        queue_count_lag: Duration::ZERO,
        rate_limits: RateLimits::default(),
        // Fetched by the function itself at cold start.
        gate_secret: None,
        payment_secret: None,
        edge_secret: None,
        secrets: SecretArns {
            redis_auth: Some(redis_auth.secret_arn.clone()),
            gate: Some(gate),
            payment: None,
            edge: Some(edge),
        },
        metrics_namespace: seckill_shared::observe::metrics::DEFAULT_NAMESPACE.into(),
        max_receive_count: None,
        stand_in_payments: seckill_shared::config::StandInPayments::Unpriced,
    };
    let env = runtime_api::function_env(&config);
    let sale_id = sale.sale_id.to_string();
    let events = (0..args.runs)
        .map(|i| runtime_api::purchase_event(&sale_id, &format!("cold-{i}"), &format!("{tag}-{i}")))
        .collect::<Result<Vec<_>, _>>()?;

    let measured = runtime_api::measure_cold_start(&args.binary, &env, &events).await;
    redis_auth.remove().await?;
    print_table(&measured?);
    Ok(ExitCode::SUCCESS)
}

/// A Redis ACL user whose password is in a Secrets Manager secret, as the
/// ElastiCache AUTH token is: the measured init fetches it and
/// authenticates with it.
struct RedisUser {
    admin_url: String,
    name: String,
    /// `REDIS_URL` for the function: the user, no password.
    function_url: String,
    secret_arn: String,
}

impl RedisUser {
    async fn add(
        admin_url: &str,
        tag: &str,
        secrets: &aws::SecretsClient,
    ) -> Result<Self, BoxError> {
        let Some((scheme, rest)) = admin_url.split_once("://") else {
            return Err("REDIS_URL has no scheme://".into());
        };
        if rest
            .split(['/', '?'])
            .next()
            .is_some_and(|a| a.contains('@'))
        {
            return Err(
                "REDIS_URL must name no user or password here: the run adds its own".into(),
            );
        }
        let name = format!("{tag}-fn");
        // Not secret: a loopback server's throw-away user, removed at the end.
        let token = format!("{tag}-token-{}", clock::now_ms());
        let mut conn = redis::Client::open(admin_url)?
            .get_multiplexed_async_connection()
            .await?;
        let () = redis::cmd("ACL")
            .arg(
                &[
                    "SETUSER",
                    &name,
                    "on",
                    &format!(">{token}"),
                    "~*",
                    "&*",
                    "+@all",
                ][..],
            )
            .query_async(&mut conn)
            .await?;
        let secret_arn = emulator::ensure_secret(
            secrets,
            &format!("{tag}-redis"),
            &serde_json::json!({ "token": token }).to_string(),
        )
        .await?;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            function_url: format!("{scheme}://{name}@{rest}"),
            name,
            secret_arn,
        })
    }

    async fn remove(&self) -> Result<(), BoxError> {
        let mut conn = redis::Client::open(self.admin_url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        let _: i64 = redis::cmd("ACL")
            .arg(&["DELUSER", self.name.as_str()][..])
            .query_async(&mut conn)
            .await?;
        Ok(())
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "ok" } else { "OVER" }
}

fn print_table(m: &ColdStart) {
    println!(
        "seckill-coldstart: {} ({} runs, nproc={})",
        m.binary.display(),
        m.runs.len(),
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    println!(
        "init includes both secret fetches (GetSecretValue on the emulator: Redis AUTH token, gate key)"
    );
    println!("{:<34} {:>9} {:>9} {:>10}  ", "", "min", "median", "target");
    let row = |label: &str, spread: Option<Spread>, target: Option<Duration>| match spread {
        Some(s) => {
            let (goal, ok) = match target {
                Some(t) => (format!("<= {} ms", t.as_millis()), verdict(s.median <= t)),
                None => ("-".into(), ""),
            };
            println!(
                "{label:<34} {:>6} ms {:>6} ms {goal:>10}  {ok}",
                ms(s.min),
                ms(s.median)
            );
        }
        None => println!("{label:<34} {:>9} {:>9}", "n/a", "n/a"),
    };
    row("init (spawn -> first /next)", m.init(), None);
    row(
        "first invocation (/next -> answer)",
        m.first_invocation(),
        None,
    );
    row(
        "init -> first answer (spawn ->)",
        m.to_first_answer(),
        Some(TARGET_ANSWER),
    );
    let size = m.binary_bytes as f64 / MIB;
    println!(
        "{:<34} {:>9} {:>6.2} MiB {:>10}  {}",
        "binary size (release, stripped)",
        "",
        size,
        format!("<= {TARGET_SIZE_MIB} MiB"),
        verdict(size <= TARGET_SIZE_MIB)
    );
    match m.peak_rss_bytes() {
        Some(peak) => {
            let peak = peak as f64 / MIB;
            println!(
                "{:<34} {:>9} {:>6.2} MiB {:>10}  {}",
                "peak memory (VmHWM, max of runs)",
                "",
                peak,
                format!("<= {TARGET_PEAK_MIB} MiB"),
                verdict(peak <= TARGET_PEAK_MIB)
            );
        }
        None => println!("{:<34} n/a", "peak memory (VmHWM)"),
    }
    let statuses: Vec<String> = m
        .statuses()
        .iter()
        .map(|(status, n)| match status {
            Some(s) => format!("{s} x{n}"),
            None => format!("(no statusCode) x{n}"),
        })
        .collect();
    println!("answers: {}", statuses.join(", "));
}
