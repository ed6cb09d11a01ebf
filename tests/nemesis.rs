//! The nemesis (`make nemesis`): a seeded schedule of real faults against
//! the whole local stack under a mixed workload, then a quiet period and
//! the invariant checker.
//!
//! The stack is `seckill-local up`'s (the gateway with every function, the
//! order-writer's event source, the scheduled jobs) on servers of the run's
//! own: moto, the strict layer, two `redis-server`s and the proxies between
//! them (`faults`). The workload (`workload`) is buyers, their payments and
//! an operator over HTTP; the schedule (`plan`) breaks one thing at a time.
//! After the run's length the faults stop, then the workload; the quiet
//! period drains the queue and the DLQ, lets prewarm rebuild what Redis
//! lost, releases the unpaid, and runs reconcile until it repairs nothing.
//! The verdict is the checker's on every sale, and the promises the buyers
//! and the operator were given, held against the ledger.
//!
//! `NEMESIS_SEED` replays a schedule (the same faults at the same times,
//! the same choices by each actor), `NEMESIS_SECONDS` sets the run's length
//! (600 by default). The test runs itself in a child process whose
//! `AWS_ENDPOINT_URL` is the proxy the faults cut.
//!
//! # Layout
//!
//! - `rng`: the seeded generator.
//! - `plan`: the faults and the schedule drawn from the seed.
//! - `faults`: the servers, what each fault does to them, the runner.
//! - `workload`: buyers, payments, operator; the figures and the promises.

mod faults;
mod plan;
mod rng;
mod workload;

use seckill_infra::event_source::{EventSource, EventSourceSettings, queue_arn};
use seckill_infra::local::{Job, Scheduled};
use seckill_shared::adapters::aws;
use seckill_shared::clock;
use seckill_shared::domain::orders::Order;
use seckill_shared::domain::{OrderId, SaleId};
use seckill_shared::ports::StockReading;
use seckill_tests::*;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use workload::{Api, BackInTime, Workload, join, nap};

const TEST: &str =
    "nemesis::a_seeded_schedule_of_faults_under_a_mixed_workload_breaks_no_invariant";
/// Set in the child process that runs the nemesis.
const CHILD: &str = "SECKILL_NEMESIS_CHILD";
/// The queue's visibility timeout: a killed batch comes back this soon.
const VISIBILITY_SECS: u32 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "ten minutes by default: make nemesis"]
async fn a_seeded_schedule_of_faults_under_a_mixed_workload_breaks_no_invariant() {
    if std::env::var_os(CHILD).is_some() {
        return nemesis().await;
    }
    let seed = match std::env::var("NEMESIS_SEED").ok().filter(|s| !s.is_empty()) {
        Some(seed) => seed.parse().expect("NEMESIS_SEED is a whole number"),
        None => u64::try_from(clock::now_ms()).unwrap_or(1) % 1_000_000_000,
    };
    let seconds = seconds();
    // The AWS clients of every function are built from the environment, so
    // the run gets an environment of its own: its endpoint is a proxy the
    // faults cut, on a port picked here and bound by the child.
    let lag = seckill_infra::strict::StrictSettings::from_env()
        .unwrap()
        .sqs
        .count_lag;
    let env = [
        (CHILD, "1".to_owned()),
        ("NEMESIS_SEED", seed.to_string()),
        ("NEMESIS_SECONDS", seconds.to_string()),
        (
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", free_port_to_keep()),
        ),
        // The rebuild trusts a zero queue count only once it is older than
        // the strict layer's lag (as `make run` exports it).
        (
            "QUEUE_COUNT_LAG_SECONDS",
            lag.as_secs_f64().ceil().to_string(),
        ),
    ];
    let passed = run_alone_streaming(TEST, &env).await;
    assert!(
        passed,
        "the nemesis failed with seed {seed}: replay it with `make nemesis SEED={seed} SECONDS={seconds}`"
    );
}

fn seconds() -> u64 {
    std::env::var("NEMESIS_SECONDS")
        .ok()
        .filter(|s| !s.is_empty())
        .map_or(600, |s| {
            s.parse().expect("NEMESIS_SECONDS is a whole number")
        })
}

async fn nemesis() {
    let seed: u64 = std::env::var("NEMESIS_SEED").unwrap().parse().unwrap();
    let run = Duration::from_secs(seconds());
    let replay = format!(
        "seed {seed} (replay: make nemesis SEED={seed} SECONDS={})",
        run.as_secs()
    );
    let plan = plan::plan(seed, run);
    println!(
        "nemesis seed={seed} seconds={}: {} faults planned, then a quiet period and the checker",
        run.as_secs(),
        plan.len()
    );
    for step in &plan {
        println!(
            "  planned at {:>6.1} s: {} for {:.1} s",
            step.at.as_secs_f64(),
            step.fault.name(),
            step.hold.as_secs_f64()
        );
    }
    let front_port = std::env::var("AWS_ENDPOINT_URL")
        .unwrap()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap();
    let mut servers = faults::Servers::start(front_port).await;
    let mut stack = LocalStack::start_on_redis(&servers.redis.url(), VISIBILITY_SECS, None).await;

    // The order-writer's event source as the template has it, its handler
    // wrapped with the writer's faults.
    if let Some(source) = stack.source.take() {
        source.stop().await;
    }
    let sqs = aws::sqs(&aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await);
    let writer_faults = Arc::new(faults::WriterFaults::default());
    let arn = queue_arn(&sqs, &stack.queues.orders_url).await.unwrap();
    let source = EventSource::spawn(
        sqs.clone(),
        EventSourceSettings::template(&stack.queues.orders_url, &arn, "us-east-1"),
        faults::writer_with_faults(
            stack.writer.clone(),
            writer_faults.clone(),
            sqs.clone(),
            stack.queues.orders_url.clone(),
        ),
    );

    let (stop, stopped) = watch::channel(false);
    let workload = Workload::new(Api::new(stack.addr), seed, run);
    let started = Instant::now();
    let started_ms = clock::now_ms();
    let mut actors = workload.start(&stopped);
    let reconciled = Arc::new(Mutex::new(None));
    let jobs = tokio::spawn(schedules(
        stack.scheduled.clone(),
        stopped.clone(),
        reconciled.clone(),
    ));
    let happened = faults::run_schedule(
        &mut servers,
        &writer_faults,
        &plan,
        started,
        run,
        &reconciled,
    )
    .await;
    // The run lasts `run`, even if the schedule ended before it. The actors
    // end only when stopped: one that ends before then has failed, and its
    // panic is the test's at once rather than at the end of the run.
    let end = tokio::time::Instant::from_std(started + run);
    if let Ok(Some(early)) = tokio::time::timeout_at(end, actors.join_next()).await {
        early.unwrap();
        panic!("{replay}: an actor of the workload ended before the run did");
    }
    stop.send(true).unwrap();
    while let Some(done) = actors.join_next().await {
        done.unwrap();
    }
    workload.stop_followers().await;
    let jobs = jobs.await.unwrap();
    println!(
        "nemesis [{:>6.1} s] faults and workload stopped; the quiet period",
        started.elapsed().as_secs_f64()
    );

    let quiet = quiet_period(&stack, &servers, &workload, &replay).await;
    let counts = source.stop().await;

    // The verdict: the checker on every sale, the promises on the ledger.
    let checker = stack.checker().await;
    let accepted = workload.accepted();
    let mut sales = workload.sale_ids();
    sales.push(stack.demo_sale.clone());
    let mut found: Vec<(String, String)> = Vec::new();
    let mut rows: HashMap<String, Order> = HashMap::new();
    for sale in &sales {
        let sale_id = SaleId::parse(sale).unwrap();
        let ids: Vec<OrderId> = accepted
            .get(sale)
            .into_iter()
            .flatten()
            .map(|o| OrderId::parse(o).unwrap())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        let violations = loop {
            match checker.check_sale(&sale_id, &ids).await {
                Ok(v) => break v.unwrap_or_default(),
                Err(err) => assert!(Instant::now() < deadline, "{replay}: the checker: {err}"),
            }
        };
        found.extend(
            violations
                .into_iter()
                .map(|v| (v.code.to_owned(), format!("{sale}: {}", v.detail))),
        );
        if let Some(state) = checker.observe(&sale_id).await.unwrap() {
            rows.extend(state.rows);
        }
    }
    let back = BackInTime {
        lost: happened
            .iter()
            .filter(|h| {
                !h.skipped && h.fault.goes_back_in_time() && !h.detail.starts_with("skipped")
            })
            .map(|h| {
                let from = started_ms + i64::try_from(h.at.as_millis()).unwrap_or(i64::MAX);
                let took = i64::try_from(h.took.as_millis()).unwrap_or(i64::MAX);
                (from, from.saturating_add(took))
            })
            .collect(),
        prewarms: jobs.prewarm_runs.clone(),
    };
    let (promises, excused) = workload.promises(&rows, &back);

    // The figures.
    let mut by_fault: BTreeMap<&str, u32> = BTreeMap::new();
    for h in happened.iter().filter(|h| !h.skipped) {
        *by_fault.entry(h.fault.name()).or_default() += 1;
    }
    let mut by_status: BTreeMap<String, u32> = BTreeMap::new();
    for o in rows.values() {
        let status = format!("{:?}", o.status);
        let key = match o.reject_reason {
            Some(reason) => format!("{status} {}", reason.as_str()),
            None => status,
        };
        *by_status.entry(key).or_default() += 1;
    }
    let accepted_count: usize = accepted.values().map(Vec::len).sum();
    let tally = &servers.strict.tally;
    println!("nemesis figures, {replay}:");
    println!("schedule as it happened:");
    for h in &happened {
        println!(
            "  {:>6.1} s  {:<30} {:>5.1} s  {}",
            h.at.as_secs_f64(),
            h.fault.name(),
            h.took.as_secs_f64(),
            h.detail
        );
    }
    println!(
        "faults: {} of {} planned; {}",
        by_fault.values().sum::<u32>(),
        plan.len(),
        join(&by_fault)
    );
    for line in workload.figures() {
        println!("{line}");
    }
    println!(
        "orders: {accepted_count} accepted (202), {} rows written; {}",
        rows.len(),
        join(&by_status)
    );
    println!(
        "writer: {} killed mid-batch ({} records written before), {} records sent again; event source: {counts}",
        writer_faults.killed.load(Ordering::SeqCst),
        writer_faults.written_before_death.load(Ordering::SeqCst),
        writer_faults.resent.load(Ordering::SeqCst),
    );
    println!(
        "strict layer: {} transaction conflicts, {} throttles, {} duplicate deliveries",
        tally.conflicts.load(Ordering::SeqCst),
        tally.throttles.load(Ordering::SeqCst),
        tally.duplicates.load(Ordering::SeqCst),
    );
    println!("jobs during the run: {}", jobs.summary());
    println!(
        "purchases past a pause or an end that Redis lost when it went back in time, before the next prewarm wrote it back (docs/design.md \"Failure semantics\"): {excused}"
    );
    println!("quiet period: {}", quiet.summary());
    let violations: Vec<(String, &str)> = found
        .iter()
        .map(|(code, detail)| (format!("checker {code}"), detail.as_str()))
        .chain(
            promises
                .iter()
                .map(|(code, detail)| (format!("promise {code}"), detail.as_str())),
        )
        .collect();
    let mut codes: BTreeMap<&str, u32> = BTreeMap::new();
    for (code, _) in &violations {
        *codes.entry(code.as_str()).or_default() += 1;
    }
    println!(
        "violations: {} ({} sales checked): {}",
        violations.len(),
        sales.len(),
        join(&codes)
    );
    for (code, detail) in &violations {
        println!("  {code}: {detail}");
    }
    assert!(
        violations.is_empty(),
        "{replay}: {} violations: {}",
        violations.len(),
        join(&codes)
    );
}

/// What the scheduled jobs did during the run.
#[derive(Debug, Default)]
struct JobFigures {
    runs: BTreeMap<&'static str, u32>,
    errors: BTreeMap<&'static str, u32>,
    /// The last error of each job, for the figures.
    last_error: BTreeMap<&'static str, String>,
    prewarm: BTreeMap<String, u32>,
    /// The prewarm runs that succeeded: start and end (epoch ms).
    prewarm_runs: Vec<(i64, i64)>,
    expired: u64,
    reconcile_found: BTreeMap<String, u32>,
    repairs: BTreeMap<String, u32>,
}

impl JobFigures {
    fn record(&mut self, job: &'static str, report: &serde_json::Value) -> bool {
        *self.runs.entry(job).or_default() += 1;
        if let Some(error) = report.get("error") {
            *self.errors.entry(job).or_default() += 1;
            // The start of it: enough to tell a timeout from a refusal.
            let error: String = error.to_string().chars().take(120).collect();
            self.last_error.insert(job, error);
            return false;
        }
        match job {
            "prewarm" => {
                for sale in report["sales"].as_array().into_iter().flatten() {
                    let outcome = sale["outcome"].as_str().unwrap_or("?").to_owned();
                    *self.prewarm.entry(outcome).or_default() += 1;
                }
            }
            "release-unpaid" => self.expired += report["expired"].as_u64().unwrap_or(0),
            _ => {
                for sale in report.as_array().into_iter().flatten() {
                    for v in sale["violations"].as_array().into_iter().flatten() {
                        let code = v["code"].as_str().unwrap_or("?").to_owned();
                        *self.reconcile_found.entry(code).or_default() += 1;
                    }
                    for r in sale["repairs"].as_array().into_iter().flatten() {
                        let kind = r["kind"].as_str().unwrap_or("?").to_owned();
                        *self.repairs.entry(kind).or_default() += 1;
                    }
                }
            }
        }
        true
    }

    fn summary(&self) -> String {
        format!(
            "runs {}; failed runs {} (last errors: {}); prewarm outcomes {}; expired by release-unpaid {}; reconcile found {} and repaired {}",
            join(&self.runs),
            join(&self.errors),
            join(&self.last_error),
            join(&self.prewarm),
            self.expired,
            join(&self.reconcile_found),
            join(&self.repairs)
        )
    }
}

/// The template's schedules, closer together (a run is minutes, not
/// hours): prewarm and the unpaid release every 20 s, reconcile every
/// 30 s, each on its own as separate functions run, through its real
/// handler under its Lambda limits. `reconciled`: when the last reconcile
/// run that succeeded started.
async fn schedules(
    scheduled: Arc<Scheduled>,
    stop: watch::Receiver<bool>,
    reconciled: Arc<Mutex<Option<Instant>>>,
) -> JobFigures {
    let figures = Mutex::new(JobFigures::default());
    let every = |job: Job, name: &'static str, period: Duration| {
        let (scheduled, mut stop, reconciled, figures) = (
            scheduled.clone(),
            stop.clone(),
            reconciled.clone(),
            &figures,
        );
        async move {
            while nap(&mut stop, period).await {
                let at = Instant::now();
                let at_ms = clock::now_ms();
                let report = scheduled.invoke(job).await;
                let mut figures = figures.lock().unwrap();
                let ok = figures.record(name, &report);
                if ok && job == Job::Prewarm {
                    figures.prewarm_runs.push((at_ms, clock::now_ms()));
                }
                drop(figures);
                if ok && job == Job::Reconcile {
                    *reconciled.lock().unwrap() = Some(at);
                }
            }
        }
    };
    tokio::join!(
        every(Job::Prewarm, "prewarm", Duration::from_secs(20)),
        every(
            Job::ReleaseUnpaid,
            "release-unpaid",
            Duration::from_secs(20)
        ),
        every(Job::Reconcile, "reconcile", Duration::from_secs(30)),
    );
    figures.into_inner().unwrap()
}

/// What the quiet period did.
#[derive(Debug, Default)]
struct Quiet {
    took: Duration,
    redriven: u64,
    prewarm_runs: u32,
    reconcile_runs: u32,
    repairs: BTreeMap<String, u32>,
    expired: u64,
}

impl Quiet {
    fn summary(&self) -> String {
        format!(
            "{:.1} s; DLQ messages redriven {}; prewarm runs {}; expired {}; reconcile runs {} (a minute on), repairs {}",
            self.took.as_secs_f64(),
            self.redriven,
            self.prewarm_runs,
            self.expired,
            self.reconcile_runs,
            join(&self.repairs)
        )
    }
}

/// Checks `check` until it gives `Ok`, and fails with `replay` and the
/// last `Err` (what is still missing) once `within` has passed. After a
/// failed check, before the next, `between` is given that `Err`, then
/// `pace` passes: a check or its `between` is a real call into the stack
/// (a prewarm run, a redrive), so the pace is the caller's, not
/// [`eventually`]'s 20 ms.
async fn poll_until<T, E: std::fmt::Display>(
    replay: &str,
    within: Duration,
    pace: Duration,
    mut check: impl AsyncFnMut() -> Result<T, E>,
    mut between: impl AsyncFnMut(&E),
) -> T {
    let deadline = Instant::now() + within;
    // A check every `pace` at most, each after the last one's `between`.
    let mut every = tokio::time::interval(pace);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let missing = match check().await {
            Ok(done) => return done,
            Err(missing) => missing,
        };
        assert!(Instant::now() < deadline, "{replay}: {missing}");
        between(&missing).await;
    }
}

/// What is left in the orders queue and the DLQ.
struct Undrained {
    queue: usize,
    dlq: usize,
}

impl std::fmt::Display for Undrained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the queue did not drain: {} messages, {} in the DLQ",
            self.queue, self.dlq
        )
    }
}

/// Polls until the orders queue and the DLQ are empty (the strict layer's
/// own counts, not the lagging ones), the operator redriving the DLQ.
async fn drain(stack: &LocalStack, servers: &faults::Servers, api: &Api, replay: &str) -> u64 {
    let counts = |url: &str| {
        let (visible, in_flight, delayed) = servers
            .strict
            .exact_queue_counts(url)
            .expect("the strict layer serves SQS");
        visible + in_flight + delayed
    };
    let mut redriven = 0;
    poll_until(
        replay,
        Duration::from_secs(300),
        Duration::from_millis(500),
        async || {
            let (queue, dlq) = (
                counts(&stack.queues.orders_url),
                counts(&stack.queues.dlq_url),
            );
            if queue == 0 && dlq == 0 {
                Ok(())
            } else {
                Err(Undrained { queue, dlq })
            }
        },
        async |left: &Undrained| {
            if left.dlq > 0 {
                let answer = api.admin("POST", "/admin/dlq/redrive", "{}").await;
                redriven += answer.body["redriven"].as_u64().unwrap_or(0);
            }
        },
    )
    .await;
    redriven
}

/// Everything at rest: queue and DLQ drained, every open sale back in
/// Redis, the unpaid released, reconcile repairing nothing.
async fn quiet_period(
    stack: &LocalStack,
    servers: &faults::Servers,
    workload: &Workload,
    replay: &str,
) -> Quiet {
    let t0 = Instant::now();
    let mut quiet = Quiet::default();
    let api = workload.api();
    quiet.redriven += drain(stack, servers, api, replay).await;

    // Prewarm rebuilds a sale Redis lost once the queue and the DLQ are
    // empty and the queue counts' lag has passed.
    let checker = stack.checker().await;
    let live: Vec<SaleId> = {
        let log = workload.log.lock().unwrap();
        let now = clock::now_ms();
        log.sales
            .iter()
            .filter(|s| s.start_ms <= now && s.open_at(now + 60_000))
            .map(|s| SaleId::parse(&s.id).unwrap())
            .collect()
    };
    poll_until(
        replay,
        Duration::from_secs(180),
        Duration::from_secs(2),
        async || {
            let report = stack.scheduled.invoke(Job::Prewarm).await;
            quiet.prewarm_runs += 1;
            let mut missing = Vec::new();
            for sale in &live {
                match checker.stock().snapshot(sale).await {
                    Ok(Some(_)) => {}
                    other => missing.push(format!("{sale}: {other:?}")),
                }
            }
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "prewarm did not bring back {missing:?}; its last report: {report}"
                ))
            }
        },
        async |_: &String| {},
    )
    .await;

    let released = stack.scheduled.invoke(Job::ReleaseUnpaid).await;
    quiet.expired += released["expired"].as_u64().unwrap_or(0);
    quiet.redriven += drain(stack, servers, api, replay).await;

    // Reconcile as the schedule would run it a minute on (a reservation
    // whose message never left is relayed; Redis is brought back to the
    // ledger), until a run repairs nothing.
    let mut sales = workload.sale_ids();
    sales.push(stack.demo_sale.clone());
    for round in 0.. {
        assert!(
            round < 8,
            "{replay}: reconcile still repairing after {round} rounds: {:?}",
            quiet.repairs
        );
        let mut repaired = 0;
        for sale in &sales {
            let sale_id = SaleId::parse(sale).unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            let report = loop {
                match stack
                    .admin
                    .reconciler
                    .reconcile_sale(&sale_id, clock::now_ms() + 61_000)
                    .await
                {
                    Ok(report) => break report,
                    Err(err) => assert!(Instant::now() < deadline, "{replay}: reconcile: {err}"),
                }
            };
            for r in report.iter().flat_map(|r| &r.repairs) {
                repaired += 1;
                *quiet.repairs.entry(r.kind.to_owned()).or_default() += 1;
            }
        }
        quiet.reconcile_runs += 1;
        quiet.redriven += drain(stack, servers, api, replay).await;
        if repaired == 0 {
            break;
        }
    }
    quiet.took = t0.elapsed();
    quiet
}
