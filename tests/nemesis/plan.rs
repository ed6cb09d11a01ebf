//! The schedule of faults: drawn from the seed before the run starts, so
//! `make nemesis SEED=<n>` replays it (the workload's timing differs from
//! run to run; what breaks, when and for how long does not).

use super::rng::Rng;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The primary `redis-server` SIGKILLed, restarted empty after a while.
    RedisKilled,
    /// `CLIENT PAUSE`: every client of the primary waits.
    RedisPaused,
    /// `FLUSHALL` on the primary: every key gone, connections kept.
    RedisFlushed,
    /// `SCRIPT FLUSH`: the scripts gone, the keys kept.
    ScriptFlushed,
    /// The replica's link cut, writes go on for a while, then the replica
    /// is promoted and the primary killed: those writes are lost.
    RedisFailover,
    /// The primary saved, writes go on for a while, then it is killed and
    /// restarted from that snapshot: Redis back in time.
    RedisFromSnapshot,
    /// The emulator (DynamoDB behind the strict layer) SIGSTOPped.
    EmulatorStopped,
    /// Every AWS call swallowed: sent, never answered.
    AwsPartitioned,
    /// Every AWS connection refused (in-flight ones cut).
    AwsRefused,
    /// The order-writer dies mid-batch: part of its records written, none
    /// deleted.
    WriterKilled,
    /// Every record the writer handles is sent to the queue again.
    DuplicateDeliveries,
}

impl Fault {
    pub const ALL: [Fault; 11] = [
        Fault::RedisKilled,
        Fault::RedisPaused,
        Fault::RedisFlushed,
        Fault::ScriptFlushed,
        Fault::RedisFailover,
        Fault::RedisFromSnapshot,
        Fault::EmulatorStopped,
        Fault::AwsPartitioned,
        Fault::AwsRefused,
        Fault::WriterKilled,
        Fault::DuplicateDeliveries,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::RedisKilled => "redis-killed",
            Fault::RedisPaused => "redis-paused",
            Fault::RedisFlushed => "redis-flushed",
            Fault::ScriptFlushed => "script-flushed",
            Fault::RedisFailover => "redis-failover-lagging-replica",
            Fault::RedisFromSnapshot => "redis-restarted-from-snapshot",
            Fault::EmulatorStopped => "emulator-stopped",
            Fault::AwsPartitioned => "aws-partitioned",
            Fault::AwsRefused => "aws-refused",
            Fault::WriterKilled => "writer-killed-mid-batch",
            Fault::DuplicateDeliveries => "duplicate-deliveries",
        }
    }

    /// Redis loses reservations (all of them, or the last writes).
    pub fn loses_redis(self) -> bool {
        matches!(
            self,
            Fault::RedisKilled
                | Fault::RedisFlushed
                | Fault::RedisFailover
                | Fault::RedisFromSnapshot
        )
    }

    /// Redis loses its last writes and keeps the rest: an operator's
    /// command among those writes is undone until prewarm writes the
    /// table's definition back.
    pub fn goes_back_in_time(self) -> bool {
        matches!(self, Fault::RedisFailover | Fault::RedisFromSnapshot)
    }

    /// A purchase's send may end unknown: its message may never exist, and
    /// only its reservation says so until reconcile relays it.
    pub fn leaves_ambiguous_sends(self) -> bool {
        matches!(self, Fault::AwsPartitioned | Fault::AwsRefused)
    }

    /// How likely the schedule draws it.
    fn weight(self) -> u32 {
        match self {
            Fault::RedisKilled | Fault::RedisFailover | Fault::EmulatorStopped => 3,
            Fault::WriterKilled | Fault::DuplicateDeliveries | Fault::RedisPaused => 3,
            Fault::RedisFlushed | Fault::AwsPartitioned | Fault::AwsRefused => 2,
            Fault::RedisFromSnapshot => 2,
            Fault::ScriptFlushed => 1,
        }
    }

    /// How long it lasts, in milliseconds (a flush is instant).
    fn hold_ms(self) -> (u64, u64) {
        match self {
            Fault::RedisKilled => (1_000, 6_000),
            Fault::RedisPaused => (500, 4_000),
            Fault::RedisFlushed | Fault::ScriptFlushed => (0, 0),
            // The lag: the purchases the promoted replica will not have.
            Fault::RedisFailover => (2_000, 8_000),
            // The snapshot's age: the writes the restarted node will not have.
            Fault::RedisFromSnapshot => (2_000, 15_000),
            Fault::EmulatorStopped => (2_000, 10_000),
            Fault::AwsPartitioned | Fault::AwsRefused => (1_000, 5_000),
            // How long the writer keeps dying (at most `param` batches).
            Fault::WriterKilled => (3_000, 15_000),
            Fault::DuplicateDeliveries => (5_000, 20_000),
        }
    }
}

/// One fault of the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// From the start of the run.
    pub at: Duration,
    pub fault: Fault,
    pub hold: Duration,
    /// `WriterKilled`: batches to kill; otherwise unused.
    pub batches: u32,
    /// `WriterKilled`: the share of each killed batch written before the
    /// death, per mille.
    pub written_per_mille: u32,
}

/// How long after an ambiguous send Redis may not lose its reservation:
/// reconcile relays a reservation with no order after its 60 s grace, on
/// its next run (every 30 s here). Redis losing the reservation before
/// that, while the message never reached the queue, is the one window the
/// design names as not closed (docs/design.md "Failure semantics": an
/// ambiguous send lost *and* Redis losing the reservation within the
/// grace); the schedule stays out of it, so what the checker finds is not
/// that documented loss.
pub const AMBIGUOUS_SEND_SETTLES: Duration = Duration::from_secs(110);

/// The schedule for `run`: faults one at a time, 5 to 25 s apart, the
/// first after 10 to 20 s of calm, none starting in the last 15 s.
pub fn plan(seed: u64, run: Duration) -> Vec<Step> {
    let mut rng = Rng::stream(seed, 0);
    let weights: Vec<(Fault, u32)> = Fault::ALL.iter().map(|f| (*f, f.weight())).collect();
    let mut steps = Vec::new();
    let mut at = rng.millis(10_000, 20_000);
    let mut redis_loss_from = Duration::ZERO;
    let last_start = run.saturating_sub(Duration::from_secs(15));
    while at < last_start {
        let mut fault = rng.weighted(&weights);
        // Drawn again (a few times) while Redis may not lose anything yet.
        for _ in 0..8 {
            if !fault.loses_redis() || at >= redis_loss_from {
                break;
            }
            fault = rng.weighted(&weights);
        }
        if fault.loses_redis() && at < redis_loss_from {
            fault = Fault::RedisPaused;
        }
        let (lo, hi) = fault.hold_ms();
        let hold = rng.millis(lo, hi);
        let (batches, written_per_mille) = if fault == Fault::WriterKilled {
            (
                u32::try_from(rng.range(1, 3)).unwrap_or(1),
                u32::try_from(rng.range(0, 900)).unwrap_or(0),
            )
        } else {
            (0, 0)
        };
        steps.push(Step {
            at,
            fault,
            hold,
            batches,
            written_per_mille,
        });
        if fault.leaves_ambiguous_sends() {
            redis_loss_from = at + hold + AMBIGUOUS_SEND_SETTLES;
        }
        at += hold + rng.millis(5_000, 25_000);
    }
    steps
}

#[test]
fn a_seed_replays_its_schedule_and_keeps_out_of_the_documented_window() {
    let run = Duration::from_secs(600);
    assert_eq!(plan(42, run), plan(42, run));
    assert_ne!(plan(42, run), plan(43, run));
    for seed in 0..200 {
        let steps = plan(seed, run);
        assert!(!steps.is_empty());
        let mut ambiguous_until: Option<Duration> = None;
        for (i, step) in steps.iter().enumerate() {
            assert!(step.at + Duration::from_secs(15) <= run, "seed {seed}");
            if i > 0 {
                let before = &steps[i - 1];
                assert!(
                    before.at + before.hold < step.at,
                    "seed {seed}: one at a time"
                );
            }
            if step.fault.loses_redis() {
                assert!(
                    ambiguous_until.is_none_or(|until| step.at >= until),
                    "seed {seed}: {step:?} inside an ambiguous send's settling"
                );
            }
            if step.fault.leaves_ambiguous_sends() {
                ambiguous_until = Some(step.at + step.hold + AMBIGUOUS_SEND_SETTLES);
            }
        }
    }
}
