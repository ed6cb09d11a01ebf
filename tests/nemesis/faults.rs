//! The servers the nemesis breaks, what each fault does to them, and the
//! runner that plays the schedule. Every server is the run's own, on free
//! loopback ports (the processes and proxies of `chaos`): the emulator
//! (moto, its transactions undone item by item as `make run` starts it),
//! the strict layer in front of it (SQS itself, DynamoDB's limits), a
//! proxy in front of that (`AWS_ENDPOINT_URL`: what a partition cuts), and
//! two `redis-server`s, a primary and a replica, behind a proxy that a
//! failover moves.

use super::plan::{Fault, Step};
use crate::chaos::{OwnMoto, OwnRedis, Proxy, field, replication};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use seckill_tests::eventually;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Reconcile's grace: a `QUEUED` reservation younger than this is not
/// relayed yet (`ReconcileSettings::default`).
const RELAY_GRACE: Duration = Duration::from_secs(60);

/// The two `redis-server`s. The application reaches the primary through
/// `endpoint` (its "primary endpoint", which a failover points at the
/// promoted replica); the replica follows the primary through `link`
/// (which a failover's lag cuts).
pub struct RedisPair {
    primary: OwnRedis,
    replica: OwnRedis,
    link: Proxy,
    endpoint: Proxy,
}

/// Every node can serve a full sync at once and load one without a file
/// when it is empty, whichever role a failover gives it; each in a
/// directory of its own (`OwnRedis`), so a restart loads nothing another
/// node left.
fn node_args(replica_of: Option<u16>) -> Vec<String> {
    let mut args: Vec<String> = [
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--repl-diskless-load",
        "on-empty-db",
        "--maxmemory-policy",
        "noeviction",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    if let Some(port) = replica_of {
        args.extend(["--replicaof".into(), "127.0.0.1".into(), port.to_string()]);
    }
    args
}

async fn node(replica_of: Option<u16>) -> OwnRedis {
    let args = node_args(replica_of);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    OwnRedis::start_with(&args).await
}

/// How many keys the server loaded from a snapshot file when it started.
async fn loaded_keys(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query_async(conn)
        .await
        .unwrap();
    field(&info, "rdb_last_load_keys_loaded")
        .and_then(|n| n.parse().ok())
        .expect("INFO persistence has rdb_last_load_keys_loaded (Redis 7)")
}

fn offset(info: &str) -> u64 {
    field(info, "master_repl_offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0)
}

impl RedisPair {
    pub async fn start() -> RedisPair {
        let primary = node(None).await;
        let link = Proxy::start(primary.port).await;
        let replica = node(Some(link.port)).await;
        let endpoint = Proxy::start(primary.port).await;
        RedisPair {
            primary,
            replica,
            link,
            endpoint,
        }
    }

    /// What the application is given as `REDIS_URL`.
    pub fn url(&self) -> String {
        self.endpoint.redis_url()
    }

    /// The replica's link is up and it has everything the primary had
    /// when asked (read before the replica's offset).
    async fn until_in_sync(&self, within: Duration) -> bool {
        let (to_primary, to_replica) = (self.primary.conn().await, self.replica.conn().await);
        eventually(within, || {
            let (mut p, mut r) = (to_primary.clone(), to_replica.clone());
            async move {
                let p = replication(&mut p).await;
                let r = replication(&mut r).await;
                field(&r, "master_link_status") == Some("up") && offset(&r) >= offset(&p)
            }
        })
        .await
    }

    async fn killed(&mut self, down: Duration) -> String {
        self.primary.kill();
        let port = self.primary.port;
        hold_while(down, "the primary down", || refuses(port)).await;
        self.primary.restart().await;
        // Read from the server, not assumed: a node that found a snapshot
        // file in its directory loaded it (it once did: a shared `/tmp`).
        let loaded = loaded_keys(&mut self.primary.conn().await).await;
        assert_eq!(loaded, 0, "the restarted primary loaded {loaded} keys");
        "SIGKILL, restarted empty (the replica resyncs to empty)".into()
    }

    /// Redis back in time: a snapshot saved, `age` of writes after it,
    /// then the primary killed and restarted from the snapshot (a node
    /// restored from its last RDB). The replica resyncs to it.
    async fn restarted_from_snapshot(&mut self, age: Duration) -> String {
        let _: () = redis::cmd("SAVE")
            .query_async(&mut self.primary.conn().await)
            .await
            .unwrap();
        let primary = self.primary.conn().await;
        hold_while(age, "the primary taking writes after the snapshot", || {
            let mut primary = primary.clone();
            async move {
                redis::cmd("PING")
                    .query_async::<String>(&mut primary)
                    .await
                    .is_ok()
            }
        })
        .await;
        self.primary.restart_from_snapshot().await;
        let loaded = loaded_keys(&mut self.primary.conn().await).await;
        format!("SAVE, writes go on, SIGKILL, restarted from the snapshot ({loaded} keys)")
    }

    async fn paused(&mut self, hold: Duration) -> String {
        let mut conn = self.primary.conn().await;
        // Opened before the pause: its PINGs are held with every client's
        // commands, and one is answered once Redis lets them go.
        let probe = self.primary.conn().await;
        let millis = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(millis)
            .query_async(&mut conn)
            .await
            .unwrap();
        // The fault lasts until Redis answers clients again (it ends the
        // pause itself after `hold`); a Redis that never does fails here.
        let answered = eventually(hold + Duration::from_secs(30), || {
            let mut probe = probe.clone();
            async move {
                redis::cmd("PING")
                    .query_async::<String>(&mut probe)
                    .await
                    .is_ok()
            }
        })
        .await;
        assert!(answered, "Redis did not answer after its pause of {hold:?}");
        "CLIENT PAUSE (every client waits)".into()
    }

    async fn flushed(&mut self, what: &str) -> String {
        let mut conn = self.primary.conn().await;
        let mut cmd = redis::cmd(what);
        if what == "SCRIPT" {
            cmd.arg("FLUSH");
        }
        let _: () = cmd.query_async(&mut conn).await.unwrap();
        format!("{what}{}", if what == "SCRIPT" { " FLUSH" } else { "" })
    }

    /// The replica stops receiving for `lag` while the purchases go on,
    /// then is promoted and made the primary; the primary is killed with
    /// what the replica never had. It comes back as the new replica.
    async fn failover(&mut self, lag: Duration) -> String {
        if !self.until_in_sync(Duration::from_secs(30)).await {
            return "skipped: the replica did not catch up within 30 s".into();
        }
        self.link.blackhole().await;
        let link = self.link.port;
        hold_while(lag, "the replica's link swallowed", || {
            swallows(link, b"PING\r\n", PROBE_ANSWER)
        })
        .await;
        let (mut to_primary, mut to_replica) =
            (self.primary.conn().await, self.replica.conn().await);
        let ahead = offset(&replication(&mut to_primary).await)
            .saturating_sub(offset(&replication(&mut to_replica).await));
        self.replica.promote().await;
        self.endpoint.switch_to(self.replica.port).await;
        self.primary.kill();
        self.link.down().await;
        let link = Proxy::start(self.replica.port).await;
        let fresh = node(Some(link.port)).await;
        let promoted = std::mem::replace(&mut self.replica, fresh);
        drop(std::mem::replace(&mut self.primary, promoted));
        self.link = link;
        format!("{ahead} bytes of the primary's writes never reached the promoted replica")
    }
}

/// What the order-writer's wrapper is told to do, and what it did.
#[derive(Debug, Default)]
pub struct WriterFaults {
    kill: AtomicU32,
    written_per_mille: AtomicU32,
    duplicate: AtomicBool,
    /// The bodies sent again so far: each once (a copy handled while
    /// duplicating is not copied again).
    copied: Mutex<std::collections::HashSet<String>>,
    pub killed: AtomicU64,
    pub written_before_death: AtomicU64,
    pub resent: AtomicU64,
    pub resend_failed: AtomicU64,
}

impl WriterFaults {
    fn take_kill(&self) -> bool {
        self.kill
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

type WriterFuture = Pin<Box<dyn Future<Output = Result<SqsBatchResponse, String>> + Send>>;

/// The order-writer as the event source invokes it, with the writer's
/// faults: a batch it is killed in has its first records written (the
/// `written_per_mille` share) and then no answer, so nothing is deleted
/// and the whole batch comes back; while duplicating, every record handled
/// is sent to the queue again (a producer's retry, a second message).
pub fn writer_with_faults(
    writer: Arc<order_writer::LiveWriter>,
    faults: Arc<WriterFaults>,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
) -> impl Fn(SqsEvent) -> WriterFuture + Clone + Send + Sync + 'static {
    let inner = seckill_infra::local::writer_handler(writer);
    move |event: SqsEvent| {
        let (inner, faults, sqs, url) = (
            inner.clone(),
            faults.clone(),
            sqs.clone(),
            queue_url.clone(),
        );
        Box::pin(async move {
            if faults.take_kill() {
                let share = faults.written_per_mille.load(Ordering::SeqCst) as usize;
                let mut written = event.clone();
                written.records.truncate(event.records.len() * share / 1000);
                let count = written.records.len() as u64;
                if count > 0 {
                    let _ = inner(written).await;
                }
                faults.killed.fetch_add(1, Ordering::SeqCst);
                faults
                    .written_before_death
                    .fetch_add(count, Ordering::SeqCst);
                return Err("the order-writer was killed mid-batch (nemesis)".into());
            }
            let again: Vec<String> = if faults.duplicate.load(Ordering::SeqCst) {
                let mut copied = faults.copied.lock().unwrap();
                event
                    .records
                    .iter()
                    .filter_map(|r| r.body.clone())
                    .filter(|body| copied.insert(body.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            let out = inner(event).await;
            for body in again {
                let sent = sqs
                    .send_message()
                    .queue_url(&url)
                    .message_body(body)
                    .send()
                    .await;
                let counter = if sent.is_ok() {
                    &faults.resent
                } else {
                    &faults.resend_failed
                };
                counter.fetch_add(1, Ordering::SeqCst);
            }
            out
        }) as WriterFuture
    }
}

/// Everything the faults act on.
pub struct Servers {
    pub redis: RedisPair,
    moto: OwnMoto,
    /// Between every AWS client and the strict layer.
    front: Proxy,
    pub strict: seckill_infra::strict::Strict,
}

impl Servers {
    /// `front_port`: the port `AWS_ENDPOINT_URL` names.
    pub async fn start(front_port: u16) -> Servers {
        let moto = OwnMoto::start_with(true).await;
        let settings = seckill_infra::strict::StrictSettings::from_env().unwrap();
        let strict = seckill_infra::strict::start("127.0.0.1:0", &moto.url(), settings)
            .await
            .unwrap();
        let front = Proxy::start_on(front_port, strict.addr.port()).await;
        let redis = RedisPair::start().await;
        Servers {
            redis,
            moto,
            front,
            strict,
        }
    }

    /// Does `step` (its whole length) and says what it did.
    async fn apply(&mut self, step: &Step, writer: &WriterFaults) -> String {
        match step.fault {
            Fault::RedisKilled => self.redis.killed(step.hold).await,
            Fault::RedisPaused => self.redis.paused(step.hold).await,
            Fault::RedisFlushed => self.redis.flushed("FLUSHALL").await,
            Fault::ScriptFlushed => self.redis.flushed("SCRIPT").await,
            Fault::RedisFailover => self.redis.failover(step.hold).await,
            Fault::RedisFromSnapshot => self.redis.restarted_from_snapshot(step.hold).await,
            Fault::EmulatorStopped => {
                self.moto.signal("-STOP");
                let pid = self.moto.child.id().expect("moto_server is running");
                // SIGSTOP lands at once; a process that is not stopped
                // within seconds was never frozen.
                assert!(
                    eventually(Duration::from_secs(5), || async move { stopped(pid) }).await,
                    "moto_server did not stop"
                );
                hold_while(
                    step.hold,
                    "the emulator frozen",
                    || async move { stopped(pid) },
                )
                .await;
                self.moto.signal("-CONT");
                "SIGSTOP then SIGCONT (DynamoDB frozen; SQS is the strict layer's)".into()
            }
            Fault::AwsPartitioned => {
                self.front.blackhole().await;
                let front = self.front.port;
                hold_while(step.hold, "every AWS request swallowed", || {
                    swallows(front, b"GET / HTTP/1.1\r\nhost: aws\r\n\r\n", PROBE_ANSWER)
                })
                .await;
                self.front.down().await;
                self.front.up().await;
                "every AWS request swallowed".into()
            }
            Fault::AwsRefused => {
                self.front.down().await;
                let front = self.front.port;
                hold_while(step.hold, "every AWS connection refused", || refuses(front)).await;
                self.front.up().await;
                "every AWS connection refused, open ones cut".into()
            }
            Fault::WriterKilled => {
                let before = writer.killed.load(Ordering::SeqCst);
                let written = writer.written_before_death.load(Ordering::SeqCst);
                writer
                    .written_per_mille
                    .store(step.written_per_mille, Ordering::SeqCst);
                writer.kill.store(step.batches, Ordering::SeqCst);
                let target = before + u64::from(step.batches);
                eventually(step.hold, || async {
                    writer.killed.load(Ordering::SeqCst) >= target
                })
                .await;
                writer.kill.store(0, Ordering::SeqCst);
                format!(
                    "{} of {} batches killed, {} records written before the deaths",
                    writer.killed.load(Ordering::SeqCst) - before,
                    step.batches,
                    writer.written_before_death.load(Ordering::SeqCst) - written
                )
            }
            Fault::DuplicateDeliveries => {
                let before = writer.resent.load(Ordering::SeqCst);
                writer.duplicate.store(true, Ordering::SeqCst);
                hold_while(step.hold, "every record sent again", || async {
                    writer.duplicate.load(Ordering::SeqCst)
                })
                .await;
                writer.duplicate.store(false, Ordering::SeqCst);
                format!(
                    "{} records sent again",
                    writer.resent.load(Ordering::SeqCst) - before
                )
            }
        }
    }
}

/// One fault as it happened.
#[derive(Debug, Clone)]
pub struct Happened {
    pub at: Duration,
    pub fault: Fault,
    pub took: Duration,
    pub detail: String,
    pub skipped: bool,
}

/// Plays `plan` from `started` on, one fault at a time, each at its time
/// (moved by how late the schedule runs); none starts after `until`. A
/// fault that loses Redis waits, after an ambiguous send, for a reconcile
/// run that started at least the relay grace after it (`reconciled`: when
/// the last successful run started), so the documented window stays shut.
pub async fn run_schedule(
    servers: &mut Servers,
    writer: &WriterFaults,
    plan: &[Step],
    started: Instant,
    until: Duration,
    reconciled: &Mutex<Option<Instant>>,
) -> Vec<Happened> {
    let mut happened = Vec::new();
    let mut ambiguous_until: Option<Instant> = None;
    // How far the schedule runs behind its plan: a fault that starts late
    // (the one before ran long, or it waited for reconcile) moves the rest
    // with it, so the plan's gaps between faults are kept.
    let mut late = Duration::ZERO;
    for step in plan {
        until_planned(started + step.at + late).await;
        if let (true, Some(ended)) = (step.fault.loses_redis(), ambiguous_until) {
            let needed = ended + RELAY_GRACE;
            // Within what is left of the run: the schedule never holds it.
            let left = until.saturating_sub(started.elapsed());
            let relayed = eventually(left.min(Duration::from_secs(240)), || async {
                reconciled.lock().unwrap().is_some_and(|at| at >= needed)
            })
            .await;
            if !relayed {
                late = Instant::now().saturating_duration_since(started + step.at);
                let at = started.elapsed();
                println!(
                    "nemesis [{:>6.1} s] {:<30} skipped: no reconcile run since the ambiguous sends' grace",
                    at.as_secs_f64(),
                    step.fault.name()
                );
                happened.push(Happened {
                    at,
                    fault: step.fault,
                    took: Duration::ZERO,
                    detail: "skipped".into(),
                    skipped: true,
                });
                continue;
            }
        }
        if started.elapsed() >= until {
            break;
        }
        late = Instant::now().saturating_duration_since(started + step.at);
        let at = started.elapsed();
        let t0 = Instant::now();
        let detail = servers.apply(step, writer).await;
        let took = t0.elapsed();
        late = late.max(Instant::now().saturating_duration_since(started + step.at + step.hold));
        if step.fault.leaves_ambiguous_sends() {
            ambiguous_until = Some(Instant::now());
        }
        println!(
            "nemesis [{:>6.1} s] {:<30} {:>5.1} s  {detail}",
            at.as_secs_f64(),
            step.fault.name(),
            took.as_secs_f64()
        );
        happened.push(Happened {
            at,
            fault: step.fault,
            took,
            skipped: detail.starts_with("skipped"),
            detail,
        });
    }
    happened
}

/// Waits for a fault's planned moment: the seed's schedule is a time
/// line (what `SEED=<n>` replays), not a condition to poll for.
async fn until_planned(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// Keeps a fault in place for its planned length (what a seed replays: the
/// primary down, the replica cut off, the emulator frozen for this long),
/// polling all along that it is in place. A fault that lifts early (a
/// process back, a proxy that answers) fails the run: its figures would
/// hold a shorter fault than the time line says.
async fn hold_while<F, Fut>(length: Duration, fault: &str, mut in_place: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let began = Instant::now();
    let lifted = eventually(length, || {
        let check = in_place();
        async move { !check.await }
    })
    .await;
    assert!(
        !lifted,
        "{fault}: lifted after {:?} of its {length:?}",
        began.elapsed()
    );
}

/// Nothing listens on `port` (a connection is refused).
async fn refuses(port: u16) -> bool {
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
}

/// How long a held partition is given to answer a probe: a server on
/// loopback answers long before, a partition never does (and the hold's
/// end is checked at most this late).
const PROBE_ANSWER: Duration = Duration::from_millis(200);

/// `port` takes a connection and `request` but answers nothing `within`.
async fn swallows(port: u16, request: &[u8], within: Duration) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    if stream.write_all(request).await.is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    tokio::time::timeout(within, stream.read(&mut byte))
        .await
        .is_err()
}

/// The process is stopped (SIGSTOP): its state in `/proc` is `T`.
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
        })
        .is_some_and(|state| state == "T" || state == "t")
}

/// The checks a hold polls tell a partition, a refusal and a working
/// server apart, on a real `redis-server` behind the nemesis's own proxy.
#[tokio::test]
async fn a_holds_checks_tell_a_partition_a_refusal_and_a_server_apart() {
    let redis = OwnRedis::start_with(&[]).await;
    let mut proxy = Proxy::start(redis.port).await;
    let ping = b"PING\r\n";
    // A server answers: generously timed, a slow machine is not a partition.
    assert!(!swallows(proxy.port, ping, Duration::from_secs(30)).await);
    assert!(!refuses(proxy.port).await);
    proxy.blackhole().await;
    assert!(swallows(proxy.port, ping, PROBE_ANSWER).await);
    assert!(!refuses(proxy.port).await);
    proxy.down().await;
    assert!(refuses(proxy.port).await);
    assert!(!swallows(proxy.port, ping, PROBE_ANSWER).await);
    proxy.up().await;
    assert!(!swallows(proxy.port, ping, Duration::from_secs(30)).await);
}
