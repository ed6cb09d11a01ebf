//! `make bench`'s reconcile row: purchase latency while reconcile reads a
//! big sale, against the same without it (target: p99 at most 1.2x).
//!
//! A sale of [`BUYERS`] buyers and [`RESERVATIONS`] reservations is planted
//! in Redis with pipelined `HSET`s (not purchases: a million purchases would
//! take the whole bench). Purchases of new buyers on that same sale are
//! driven through the store's purchase script ([`StockStore::reserve`]) by
//! [`CONCURRENCY`] tasks for [`RUN`], while reconcile's Redis read
//! ([`RedisStock::snapshot`], what every reconcile and invariant check
//! runs, up to four times a run) runs on a thread and runtime of its own,
//! as the reconcile function would on its own Lambda, in slices: [`SLICE`]
//! of a read (cancelled there, the next slice starts a read again), then
//! [`SLICE`] of none. A read is a steady stream of paced `HSCAN` chunks
//! (about ten seconds of them for a million buyers), so a slice sends what
//! any stretch of a whole read sends. Each purchase counts on the side of
//! the moment it started (a read running, or none), so both sides share the
//! same seconds of the machine: on a small machine shared with other work,
//! two quiet phases one after the other differ, and whole reads
//! alternating with pauses as long differ far more between runs. A whole
//! read is then timed on its own.
//!
//! The reader thread runs at the lowest CPU priority (`renice 19`): on AWS
//! reconcile has a machine of its own and only its Redis commands reach the
//! sale; here it shares two cores with redis-server and the purchase
//! driver, and at equal priority its wakeups preempt them (measured:
//! p99 ratio 1.12-1.48 at equal priority, 1.09-1.15 reniced, the same
//! commands). The row prints the `HSCAN` chunks Redis served per second of
//! reading, so a starved reader would show.

use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::{RedisStock, SaleKeys};
use seckill_shared::clock;
use seckill_shared::domain::{InvalidValue, Quantity, Sale, UserId};
use seckill_shared::ports::{ReserveOutcome, ReserveRequest, StockStore, StoreError};
use seckill_shared::ports::{StockLoading, StockReading};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Buyers of the planted sale.
pub const BUYERS: u32 = 1_000_000;
/// Reservations of the planted sale (its first buyers', one each).
pub const RESERVATIONS: u32 = 10_000;
/// Purchases in flight at any moment.
pub const CONCURRENCY: usize = 32;
/// How long purchases are driven (both sides together).
pub const RUN: Duration = Duration::from_secs(30);
/// The bound on p99 with reconcile over p99 without.
pub const TARGET: f64 = 1.2;

/// Units of the sale: enough that no purchase of the row sells it out.
const TOTAL: u32 = 50_000_000;
/// Generous, as the other rows: a timeout would only blur the figures.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);
/// One slice of a read, and the pause after it.
pub const SLICE: Duration = Duration::from_secs(1);
/// Buyers one pipelined round trip plants.
const PLANT_BATCH: u32 = 20_000;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("invalid value: {0}")]
    Invalid(#[from] InvalidValue),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("a purchase task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{0}")]
    Run(String),
}

/// Purchases of one side of the row.
#[derive(Debug, Clone)]
pub struct Side {
    pub purchases: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// What the reconcile reader did.
#[derive(Debug, Clone)]
pub struct Reads {
    /// Slices of a read during the run.
    pub slices: usize,
    /// `HSCAN` chunks Redis served per second of the slices.
    pub chunks_per_sec: f64,
    /// Whether the reader thread got the lowest CPU priority.
    pub reniced: bool,
    /// One whole read after the run, purchases stopped.
    pub whole_secs: f64,
    pub buyers_seen: usize,
    /// A process that makes that whole read, and nothing else.
    pub whole: crate::peak::Peak,
    /// A process that reads the sale as reconcile reads a sale this big:
    /// streamed into [`SLICES`] slices of its buyers on local disk, each
    /// slice then loaded in turn.
    pub sliced: crate::peak::Peak,
}

/// The slices reconcile cuts a sale of [`BUYERS`] orders into.
pub const SLICES: u32 = BUYERS.div_ceil(seckill_shared::app::invariants::SLICE_ORDERS as u32);

#[derive(Debug, Clone)]
pub struct ReconcileRow {
    pub without: Side,
    pub with: Side,
    pub reads: Reads,
}

impl ReconcileRow {
    /// p99 with reconcile over p99 without.
    pub fn ratio(&self) -> f64 {
        self.with.p99_us / self.without.p99_us.max(1.0)
    }

    pub fn meets_target(&self) -> bool {
        self.ratio() <= TARGET
    }
}

impl std::fmt::Display for ReconcileRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |us: f64| us / 1000.0;
        writeln!(
            f,
            "reconcile over a sale of {BUYERS} buyers and {RESERVATIONS} reservations, purchases of new buyers on it, {CONCURRENCY} at a time for {} s, each counted by whether a read was running when it started:",
            RUN.as_secs()
        )?;
        for (label, side) in [
            ("no read running", &self.without),
            ("a read running", &self.with),
        ] {
            writeln!(
                f,
                "  {label:<22} {:>7} purchases  p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
                side.purchases,
                ms(side.p50_us),
                ms(side.p99_us),
                ms(side.max_us)
            )?;
        }
        writeln!(
            f,
            "  p99 ratio {:.2}x (target <= {TARGET}x: {})",
            self.ratio(),
            if self.meets_target() {
                "met"
            } else {
                "NOT met"
            }
        )?;
        write!(
            f,
            "  reconcile's Redis read (RedisStock::snapshot): {} slices of {} ms alternating with as long without, {:.0} HSCAN chunks/s while reading, reader thread {}; a whole read of {} buyers takes {:.1} s on its own",
            self.reads.slices,
            SLICE.as_millis(),
            self.reads.chunks_per_sec,
            if self.reads.reniced {
                "at nice 19"
            } else {
                "at normal priority (renice failed)"
            },
            self.reads.buyers_seen,
            self.reads.whole_secs
        )?;
        let mib = |bytes: u64| bytes as f64 / (1_024.0 * 1_024.0);
        write!(
            f,
            "\n  its memory, each read in a process of its own (peak resident memory, and what the process held before the read): the whole read {:.1} MiB ({:.1} MiB before); read as reconcile reads a sale this big, into {SLICES} slices of its buyers on local disk, each loaded in turn, {:.1} MiB ({:.1} MiB before)",
            mib(self.reads.whole.peak),
            mib(self.reads.whole.before),
            mib(self.reads.sliced.peak),
            mib(self.reads.sliced.before),
        )
    }
}

/// Plants the sale, measures both sides, removes the sale.
pub async fn run(redis_url: &str, tag: &str) -> Result<ReconcileRow, BenchError> {
    let store = RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?
        .with_rate_limits(crate::loadgen::UNLIMITED);
    let sale = test_sale(&format!("{tag}-reconcile"), TOTAL, 1)?;
    store.load_sale(&sale, clock::now_ms()).await?;
    let keys = SaleKeys::new(&sale.sale_id);
    let mut conn = redis::Client::open(redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    plant(&mut conn, &keys).await?;
    let next = Arc::new(AtomicU64::new(0));

    // A second of warm-up (connections, script cache), then the run.
    drive(&store, &sale, &next, Duration::from_secs(1)).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (url, sale, stop) = (redis_url.to_owned(), sale.clone(), stop.clone());
        std::thread::spawn(move || read_loop(&url, &sale, &stop))
    };
    let scans_before = hscan_calls(&mut conn).await?;
    let timed = drive(&store, &sale, &next, RUN).await;
    stop.store(true, Ordering::SeqCst);
    let (windows, reniced) = reader
        .join()
        .map_err(|_| BenchError::Run("the reconcile reader panicked".into()))??;
    let scans = hscan_calls(&mut conn).await?.saturating_sub(scans_before);
    let reading: f64 = windows
        .iter()
        .map(|(from, to)| (*to - *from).as_secs_f64())
        .sum();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for (began, micros) in timed? {
        if windows
            .iter()
            .any(|(from, to)| (*from..*to).contains(&began))
        {
            with.push(micros);
        } else {
            without.push(micros);
        }
    }

    let began = Instant::now();
    let whole = store
        .snapshot(&sale.sale_id)
        .await?
        .ok_or_else(|| BenchError::Run("the planted sale is gone".into()))?;
    let (whole_secs, buyers_seen) = (began.elapsed().as_secs_f64(), whole.buyers.len());
    drop(whole);
    // Each read again in a process of its own, for its memory.
    let target = crate::peak::Target {
        sale_id: sale.sale_id.to_string(),
        redis_url: redis_url.to_owned(),
        slices: SLICES,
        ..crate::peak::Target::default()
    };
    let whole_peak = crate::peak::in_child(crate::peak::Read::RedisWhole, &target)
        .await
        .map_err(BenchError::Run)?;
    let sliced_peak = crate::peak::in_child(crate::peak::Read::RedisSliced, &target)
        .await
        .map_err(BenchError::Run)?;
    let reads = Reads {
        slices: windows.len(),
        chunks_per_sec: scans as f64 / reading.max(0.001),
        reniced,
        whole_secs,
        buyers_seen,
        whole: whole_peak,
        sliced: sliced_peak,
    };

    // UNLINK: the million-field hash is freed off Redis's main thread.
    let () = redis::cmd("UNLINK")
        .arg(&keys.meta)
        .arg(&keys.stock)
        .arg(&keys.buyers)
        .arg(&keys.resv)
        .arg(&keys.user_orders)
        .arg(&keys.rate_limit)
        .query_async(&mut conn)
        .await?;
    Ok(ReconcileRow {
        without: side(without),
        with: side(with),
        reads,
    })
}

/// Every buyer counted once; the first [`RESERVATIONS`] hold one `QUEUED`
/// reservation each (in `userorders` too, as a purchase leaves them).
async fn plant(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &SaleKeys,
) -> Result<(), BenchError> {
    let at = clock::now_ms().to_string();
    let mut first = 0;
    while first < BUYERS {
        let last = (first + PLANT_BATCH).min(BUYERS);
        let mut pipe = redis::pipe();
        let mut chunk = first;
        while chunk < last {
            let end = (chunk + 1_000).min(last);
            let mut buyers = redis::cmd("HSET");
            buyers.arg(&keys.buyers);
            let mut resv = redis::cmd("HSET");
            resv.arg(&keys.resv);
            let mut listed = redis::cmd("HSET");
            listed.arg(&keys.user_orders);
            for n in chunk..end {
                let user = format!("b{n}");
                buyers.arg(&user).arg(1);
                if n < RESERVATIONS {
                    let order = format!("n{n:031x}");
                    let json = serde_json::json!({
                        "userId": user, "quantity": 1, "atMs": at, "state": "QUEUED",
                    });
                    resv.arg(&order).arg(json.to_string());
                    listed.arg(&user).arg(&order);
                }
            }
            pipe.add_command(buyers).ignore();
            if chunk < RESERVATIONS {
                pipe.add_command(resv).ignore();
                pipe.add_command(listed).ignore();
            }
            chunk = end;
        }
        let () = pipe.query_async(conn).await?;
        first = last;
    }
    let () = redis::cmd("SET")
        .arg(&keys.stock)
        .arg(TOTAL - RESERVATIONS)
        .query_async(conn)
        .await?;
    Ok(())
}

/// [`CONCURRENCY`] tasks buying one unit each for new buyers for `phase`:
/// when each purchase started, and how long it took (µs).
async fn drive(
    store: &RedisStock,
    sale: &Sale,
    next: &Arc<AtomicU64>,
    phase: Duration,
) -> Result<Vec<(Instant, u128)>, BenchError> {
    let until = Instant::now() + phase;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (store, sale, next) = (store.clone(), sale.clone(), next.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < until {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let user = UserId::parse(&format!("p{n}"))?;
                let began = Instant::now();
                let outcome = store
                    .reserve(ReserveRequest {
                        sale_id: &sale.sale_id,
                        user_id: &user,
                        quantity: Quantity::ONE,
                        idempotency_key: None,
                        gate_nonce: None,
                        gate_issued_ms: None,
                        source_ip: None,
                    })
                    .await?;
                latencies.push((began, began.elapsed().as_micros()));
                if !matches!(outcome, ReserveOutcome::Reserved(_)) {
                    return Err(BenchError::Run(format!("a purchase got {outcome:?}")));
                }
            }
            Ok::<_, BenchError>(latencies)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}

/// The percentiles of one side's latencies (µs).
fn side(mut all: Vec<u128>) -> Side {
    all.sort_unstable();
    let at = |p: f64| -> f64 {
        let rank = ((p * all.len() as f64).ceil() as usize).clamp(1, all.len().max(1));
        all.get(rank - 1).map_or(0.0, |us| *us as f64)
    };
    Side {
        purchases: all.len(),
        p50_us: at(0.50),
        p99_us: at(0.99),
        max_us: all.last().map_or(0.0, |us| *us as f64),
    }
}

/// When each slice of a read ran.
type Windows = Vec<(Instant, Instant)>;

/// Slices of reconcile's Redis read of the sale until `stop`, on a thread
/// at the lowest CPU priority; and whether it got that priority.
fn read_loop(
    redis_url: &str,
    sale: &Sale,
    stop: &AtomicBool,
) -> Result<(Windows, bool), BenchError> {
    let reniced = lowest_priority();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = RedisStock::connect_lazy(redis_url, REDIS_TIMEOUT)?;
        let mut windows = Vec::new();
        tokio::time::sleep(SLICE).await;
        while !stop.load(Ordering::SeqCst) {
            let began = Instant::now();
            // A read that ends within the slice is simply a whole one.
            if let Ok(read) = tokio::time::timeout(SLICE, store.snapshot(&sale.sale_id)).await {
                read?;
            }
            windows.push((began, Instant::now()));
            tokio::time::sleep(SLICE).await;
        }
        Ok((windows, reniced))
    })
}

/// `renice 19` of the calling thread (Linux: a thread id is a pid to it).
fn lowest_priority() -> bool {
    let Ok(link) = std::fs::read_link("/proc/thread-self") else {
        return false;
    };
    let Some(tid) = link.file_name().map(|t| t.to_string_lossy().into_owned()) else {
        return false;
    };
    std::process::Command::new("renice")
        .args(["-n", "19", "-p", &tid])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// `HSCAN` calls Redis has served (`INFO commandstats`).
async fn hscan_calls(conn: &mut redis::aio::MultiplexedConnection) -> Result<u64, BenchError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(info
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_hscan:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}
