//! How much memory the jobs' reads of a sale take: `make bench`'s memory
//! figures. Each read runs in a process of its own (this binary run again,
//! [`in_child`]), and the figure is that process's peak resident memory
//! (`VmHWM`), what Lambda reports as a function's "Max Memory Used": a read
//! measured in the bench's own process would reuse what earlier work freed,
//! and show a floor, not the read.

use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::SqsInspector;
use seckill_shared::app::invariants::InvariantChecker;
use seckill_shared::app::invariants::spill::SaleSlices;
use seckill_shared::domain::SaleId;
use seckill_shared::ports::{OrderLedger, SaleCatalog};
use seckill_shared::ports::{StockLoading, StockReading};
use std::time::Duration;

/// The variable that makes a run of the binary the child of [`in_child`]:
/// the read it names, then its memory on standard output.
pub const READ_VAR: &str = "SECKILL_BENCH_READ";

/// What the child's last line starts with.
const MARK: &str = "peak-rss";
/// What a line the child says about its read's outcome starts with.
const NOTE: &str = "read-note";

/// The time a release-unpaid run has: the function's `Timeout` (60 s in
/// `template.yaml`) less the 5 s it keeps to finish its last chunk.
const RELEASE_RUN: Duration = Duration::from_secs(55);

/// One read of a sale, made in a process of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Every order of the sale in memory (`all_orders_of_sale`).
    Orders,
    /// The invariant checker's whole read in one slice (`observe`).
    Observe,
    /// Reconcile's read: in slices of `SECKILL_BENCH_SLICE_ORDERS` orders,
    /// each judged in turn (`read`, `judge`).
    Sliced,
    /// A rebuild staging the whole ledger a page at a time (the sale is
    /// loaded, so its commit drops what was staged).
    Rebuild,
    /// Redis's state of the sale read whole (`RedisStock::snapshot`).
    RedisWhole,
    /// Redis's state of the sale streamed into `SECKILL_BENCH_SLICES`
    /// slices, each loaded in turn.
    RedisSliced,
    /// Prewarm of a live sale Redis lost: its rebuild from the ledger
    /// (`Jobs::prewarm_sale`, the queue and the DLQ empty).
    Prewarm,
    /// One release-unpaid run (`Jobs::release_unpaid`) with the
    /// function's time: its timeout less the margin it keeps.
    Release,
    /// The ledger's pages as the rebuild and reconcile read them
    /// (`send_orders_of_sale`), each dropped when it arrives: how much of
    /// their time is the emulator's index.
    Pages,
}

impl Read {
    fn name(self) -> &'static str {
        match self {
            Read::Orders => "orders",
            Read::Observe => "observe",
            Read::Sliced => "sliced",
            Read::Rebuild => "rebuild",
            Read::RedisWhole => "redis-whole",
            Read::RedisSliced => "redis-sliced",
            Read::Prewarm => "prewarm",
            Read::Release => "release",
            Read::Pages => "pages",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        [
            Read::Orders,
            Read::Observe,
            Read::Sliced,
            Read::Rebuild,
            Read::RedisWhole,
            Read::RedisSliced,
            Read::Prewarm,
            Read::Release,
            Read::Pages,
        ]
        .into_iter()
        .find(|r| r.name() == raw)
    }
}

/// Where the child finds the sale: passed as its environment.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub sale_id: String,
    pub redis_url: String,
    /// The DynamoDB and SQS endpoint (empty: Redis reads only).
    pub endpoint: String,
    pub sales_table: String,
    pub orders_table: String,
    pub queue_url: String,
    pub dlq_url: String,
    /// Orders a slice holds ([`Read::Sliced`]).
    pub slice_orders: u64,
    /// Slices of [`Read::RedisSliced`].
    pub slices: u32,
}

/// The memory of a process that made one read.
#[derive(Debug, Clone, Default)]
pub struct Peak {
    /// Resident memory once its clients were built, before the read.
    pub before: u64,
    /// Its peak resident memory.
    pub peak: u64,
    /// The read's outcome, as the child said it (empty when it said none).
    pub note: String,
    /// The child's whole life, start to exit.
    pub wall: Duration,
    /// The CPU time it used (user and system), all its threads: what a
    /// Lambda function's share of a vCPU must give it.
    pub cpu: Duration,
}

impl Peak {
    /// What the read added over the process before it.
    pub fn added(&self) -> u64 {
        self.peak.saturating_sub(self.before)
    }
}

/// The process's resident memory now and its peak, in bytes
/// (`/proc/self/status`), or `None` off Linux.
pub fn resident() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1_024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The CPU time this process has used, user and system
/// (`/proc/self/stat`, in the kernel's clock ticks of 1/100 s), or `None`
/// off Linux.
pub fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's closing parenthesis: state is the
    // first, utime the 12th and stime the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |n: usize| fields.get(n)?.parse::<u64>().ok();
    Some(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// Runs `read` of `target` in a new process of this binary (whose `main`
/// calls [`child`] first) and returns its memory.
pub async fn in_child(read: Read, target: &Target) -> Result<Peak, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let out = tokio::process::Command::new(exe)
        .env(READ_VAR, read.name())
        .env("SECKILL_BENCH_SALE", &target.sale_id)
        .env("REDIS_URL", &target.redis_url)
        .env("SECKILL_BENCH_ENDPOINT", &target.endpoint)
        .env("SECKILL_BENCH_SALES_TABLE", &target.sales_table)
        .env("SECKILL_BENCH_ORDERS_TABLE", &target.orders_table)
        .env("SECKILL_BENCH_QUEUE_URL", &target.queue_url)
        .env("SECKILL_BENCH_DLQ_URL", &target.dlq_url)
        .env(
            "SECKILL_BENCH_SLICE_ORDERS",
            target.slice_orders.to_string(),
        )
        .env("SECKILL_BENCH_SLICES", target.slices.to_string())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("{}: {e}", read.name()))?;
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let note = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(NOTE))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("; ");
    let line = stdout.lines().rev().find(|l| l.starts_with(MARK));
    match (out.status.success(), line) {
        (true, Some(line)) => {
            let numbers: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|n| n.parse().ok())
                .collect();
            match numbers.as_slice() {
                [before, peak, cpu_ms] => Ok(Peak {
                    before: *before,
                    peak: *peak,
                    note,
                    wall,
                    cpu: Duration::from_millis(*cpu_ms),
                }),
                _ => Err(format!("{}: {line}", read.name())),
            }
        }
        _ => Err(format!(
            "{} exited with {}: {}",
            read.name(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// In a process started by [`in_child`]: its read, then its memory on
/// standard output. `None` in any other process.
pub async fn child() -> Option<Result<(), String>> {
    let read = std::env::var(READ_VAR).ok()?;
    Some(run_child(&read).await)
}

fn var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

async fn run_child(raw: &str) -> Result<(), String> {
    let read = Read::parse(raw).ok_or_else(|| format!("no read {raw}"))?;
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let sale_id = SaleId::parse(&var("SECKILL_BENCH_SALE")?).map_err(|e| err(&e))?;
    let stock = RedisStock::connect_lazy(&var("REDIS_URL")?, Duration::from_secs(5))
        .map_err(|e| err(&e))?;
    let endpoint = var("SECKILL_BENCH_ENDPOINT")?;
    let (db, sqs) = if endpoint.is_empty() {
        (None, None)
    } else {
        let sdk = aws::loader(aws::Caller::Tool, Duration::from_secs(20))
            .endpoint_url(&endpoint)
            .load()
            .await;
        (Some(aws::dynamodb(&sdk)), Some(aws::sqs(&sdk)))
    };
    let number = |name: &str| -> Result<u64, String> {
        var(name)?
            .parse()
            .map_err(|_| format!("{name} is not a number"))
    };
    let (sales_table, orders_table) = (
        var("SECKILL_BENCH_SALES_TABLE")?,
        var("SECKILL_BENCH_ORDERS_TABLE")?,
    );
    let checker = |db: &aws_sdk_dynamodb::Client, sqs: &aws_sdk_sqs::Client| {
        Ok::<_, String>(InvariantChecker::new(
            stock.clone(),
            DynamoCatalog::new(db.clone(), &sales_table),
            DynamoOrders::new(db.clone(), &orders_table, &sales_table),
            SqsInspector::new(
                sqs.clone(),
                var("SECKILL_BENCH_QUEUE_URL")?,
                Some(var("SECKILL_BENCH_DLQ_URL")?),
            ),
        ))
    };
    let aws = || match (&db, &sqs) {
        (Some(db), Some(sqs)) => Ok((db, sqs)),
        _ => Err(format!(
            "{raw} reads DynamoDB: SECKILL_BENCH_ENDPOINT is empty"
        )),
    };
    // The jobs as prewarm and release-unpaid wire them, on the sale's
    // queues.
    let jobs = |db: &aws_sdk_dynamodb::Client, sqs: &aws_sdk_sqs::Client| {
        Ok::<_, String>(
            seckill_shared::app::jobs::Jobs::new(
                stock.clone(),
                DynamoCatalog::new(db.clone(), &sales_table),
                DynamoOrders::new(db.clone(), &orders_table, &sales_table),
                Some(SqsInspector::new(
                    sqs.clone(),
                    var("SECKILL_BENCH_QUEUE_URL")?,
                    Some(var("SECKILL_BENCH_DLQ_URL")?),
                )),
                Duration::from_secs(600),
            )
            .with_settle(Duration::ZERO),
        )
    };
    let (before, _) = resident().ok_or("no /proc/self/status")?;
    match read {
        Read::Orders => {
            let (db, _) = aws()?;
            DynamoOrders::new(db.clone(), &orders_table, &sales_table)
                .all_orders_of_sale(&sale_id)
                .await
                .map_err(|e| err(&e))?;
        }
        Read::Observe => {
            let (db, sqs) = aws()?;
            checker(db, sqs)?
                .observe(&sale_id)
                .await
                .map_err(|e| err(&e))?;
        }
        Read::Sliced => {
            let (db, sqs) = aws()?;
            let checker =
                checker(db, sqs)?.with_slice_orders(number("SECKILL_BENCH_SLICE_ORDERS")?);
            let mut read = checker
                .read(&sale_id)
                .await
                .map_err(|e| err(&e))?
                .ok_or("the sale is gone")?;
            let judged = checker
                .judge(&mut read, true, &[])
                .await
                .map_err(|e| err(&e))?;
            let mut codes: Vec<&str> = judged.violations.iter().map(|v| v.code).collect();
            codes.dedup();
            println!(
                "{NOTE} {} violations {codes:?}, {} slices",
                judged.violations.len(),
                read.slices()
            );
        }
        Read::Rebuild => {
            let (db, _) = aws()?;
            let catalog = DynamoCatalog::new(db.clone(), &sales_table);
            let sale = catalog
                .get_sale(&sale_id)
                .await
                .map_err(|e| err(&e))?
                .ok_or("the sale is gone")?;
            let jobs = seckill_shared::app::jobs::Jobs::<SqsInspector, _, _, _>::new(
                stock.clone(),
                catalog,
                DynamoOrders::new(db.clone(), &orders_table, &sales_table),
                None,
                Duration::ZERO,
            );
            let survivors = stock.survivors(&sale).await.map_err(|e| err(&e))?;
            let mut rebuild = stock
                .begin_rebuild(&sale, seckill_shared::clock::now_ms(), survivors)
                .await
                .map_err(|e| err(&e))?;
            let at = jobs
                .stage_ledger(&sale_id, &mut rebuild)
                .await
                .map_err(|e| err(&e))?;
            stock
                .commit_rebuild(rebuild, at)
                .await
                .map_err(|e| err(&e))?;
        }
        Read::Prewarm => {
            let (db, sqs) = aws()?;
            let outcome = jobs(db, sqs)?
                .prewarm_sale(&sale_id, seckill_shared::clock::now_ms())
                .await
                .map_err(|e| err(&e))?;
            println!("{NOTE} {outcome:?}");
        }
        Read::Pages => {
            let (db, _) = aws()?;
            let orders = DynamoOrders::new(db.clone(), &orders_table, &sales_table);
            let (pages, mut read) = tokio::sync::mpsc::channel(4);
            let counted = async move {
                let (mut pages, mut rows) = (0u64, 0usize);
                while let Some(page) = read.recv().await {
                    pages += 1;
                    rows += Vec::len(&page);
                }
                (pages, rows)
            };
            let (sent, (pages, rows)) =
                tokio::join!(orders.send_orders_of_sale(&sale_id, pages), counted);
            sent.map_err(|e| err(&e))?;
            println!("{NOTE} {rows} orders in {pages} pages");
        }
        Read::Release => {
            let (db, sqs) = aws()?;
            let report = jobs(db, sqs)?
                .release_unpaid(
                    seckill_shared::clock::now_ms(),
                    std::time::Instant::now() + RELEASE_RUN,
                )
                .await
                .map_err(|e| err(&e))?;
            println!(
                "{NOTE} {} expired, {} errors, stopped at the deadline: {}",
                report.expired,
                report.errors.len(),
                report.stopped_early
            );
        }
        Read::RedisWhole => {
            stock
                .snapshot(&sale_id)
                .await
                .map_err(|e| err(&e))?
                .ok_or("the sale is gone")?;
        }
        Read::RedisSliced => {
            let slices = u32::try_from(number("SECKILL_BENCH_SLICES")?).map_err(|e| err(&e))?;
            let mut kept = SaleSlices::new(&sale_id, slices).map_err(|e| err(&e))?;
            stock
                .stream_snapshot(&sale_id, &mut kept)
                .await
                .map_err(|e| err(&e))?
                .ok_or("the sale is gone")?;
            kept.finish().map_err(|e| err(&e))?;
            for k in 0..slices {
                kept.load(k).map_err(|e| err(&e))?;
            }
        }
    }
    let (_, peak) = resident().ok_or("no /proc/self/status")?;
    let cpu_ms = cpu_time().map_or(0, |cpu| u64::try_from(cpu.as_millis()).unwrap_or(u64::MAX));
    println!("{MARK} {before} {peak} {cpu_ms}");
    Ok(())
}
