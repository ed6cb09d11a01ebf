//! The seeded scheduler. Every call a function makes to a store waits at a
//! gate until the scheduler lets it through, one at a time, so which
//! function moves next (and whether its call fails, or the function dies
//! before or after it) is a draw of the run's random number generator and
//! nothing else. Tasks run on one thread on tokio's paused clock: between
//! two grants exactly one task runs, up to its next gate or its end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, oneshot};

/// SplitMix64: small, fast, and the same sequence on every machine.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// True `per_mille` times in a thousand.
    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// What becomes of one call to a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// It goes through.
    Go,
    /// It fails before it reaches the store (refused, throttled, lost).
    FailBefore,
    /// It reaches the store and takes effect, and the caller is told it
    /// failed (a timeout after the request went out).
    FailAfter,
    /// The function dies before the call: nothing of it happens.
    KillBefore,
    /// The function dies right after the call took effect.
    KillAfter,
    /// The function died earlier: no call of it reaches a store.
    Dead,
}

impl Step {
    /// Whether the call's effect happens.
    pub(crate) fn applies(self) -> bool {
        matches!(self, Self::Go | Self::FailAfter | Self::KillAfter)
    }
}

/// One invocation of a function.
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    pub(crate) id: u64,
    pub(crate) name: &'static str,
    pub(crate) dead: Arc<AtomicBool>,
}

impl Actor {
    pub(crate) fn died(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }
}

tokio::task_local! {
    static ACTOR: Actor;
}

/// How often each fault is drawn at a gate, per thousand calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rates {
    pub(crate) fail_before: u64,
    pub(crate) fail_after: u64,
    pub(crate) kill_before: u64,
    pub(crate) kill_after: u64,
}

impl Rates {
    pub(crate) const NONE: Self = Self {
        fail_before: 0,
        fail_after: 0,
        kill_before: 0,
        kill_after: 0,
    };
}

struct Waiter {
    actor: u64,
    go: oneshot::Sender<()>,
}

struct Inner {
    rng: Rng,
    rates: Rates,
    waiting: Vec<Waiter>,
    live: usize,
    next_actor: u64,
    faults: BTreeMap<String, u64>,
    calm: bool,
}

pub(crate) struct Sched {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl Sched {
    pub(crate) fn new(rng: Rng, rates: Rates) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                rng,
                rates,
                waiting: Vec::new(),
                live: 0,
                next_actor: 0,
                faults: BTreeMap::new(),
                calm: false,
            }),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // One thread runs the simulation: a poisoned lock means a panic
        // already failed the run, and its state is still the best report.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A draw of the run's generator (the driver's and the gates' share one
    /// sequence; only one of them draws at a time).
    pub(crate) fn draw(&self, n: u64) -> u64 {
        self.lock().rng.below(n)
    }

    pub(crate) fn chance(&self, per_mille: u64) -> bool {
        self.lock().rng.chance(per_mille)
    }

    /// No more faults from here on: the quiet period.
    pub(crate) fn calm(&self) {
        let mut inner = self.lock();
        inner.rates = Rates::NONE;
        inner.calm = true;
    }

    pub(crate) fn is_calm(&self) -> bool {
        self.lock().calm
    }

    /// Counts one fault of `kind`.
    pub(crate) fn count(&self, kind: impl Into<String>) {
        *self.lock().faults.entry(kind.into()).or_default() += 1;
    }

    pub(crate) fn faults(&self) -> BTreeMap<String, u64> {
        self.lock().faults.clone()
    }

    /// Waits for the scheduler's grant, then draws what becomes of a call
    /// to `effect` (`writes`: whether it changes a store). A call made
    /// outside any function (the harness's own reads) just goes.
    pub(crate) async fn gate(&self, effect: &'static str, writes: bool) -> Step {
        let Ok(actor) = ACTOR.try_with(Clone::clone) else {
            return Step::Go;
        };
        if actor.died() {
            return Step::Dead;
        }
        let (go, granted) = oneshot::channel();
        self.lock().waiting.push(Waiter {
            actor: actor.id,
            go,
        });
        self.changed.notify_one();
        // The scheduler drops no waiter unanswered while the run goes on.
        let _ = granted.await;
        let mut inner = self.lock();
        let r = inner.rates;
        let draw = inner.rng.below(1000);
        let mut edge = r.kill_before;
        let step = if draw < edge {
            Step::KillBefore
        } else if draw < {
            edge += r.fail_before;
            edge
        } {
            Step::FailBefore
        } else if writes
            && draw < {
                edge += r.kill_after;
                edge
            }
        {
            Step::KillAfter
        } else if writes
            && draw < {
                edge += r.fail_after;
                edge
            }
        {
            Step::FailAfter
        } else {
            Step::Go
        };
        if step != Step::Go {
            let kind = match step {
                Step::KillBefore => "killed before",
                Step::KillAfter => "killed after",
                Step::FailBefore => "failed before",
                _ => "timed out after",
            };
            *inner
                .faults
                .entry(format!("{} {kind} {effect}", actor.name))
                .or_default() += 1;
        }
        if matches!(step, Step::KillBefore | Step::KillAfter) {
            actor.dead.store(true, Ordering::SeqCst);
        }
        step
    }

    /// Starts one invocation of `name`, its clock `skew_ms` off.
    pub(crate) fn spawn<F>(self: &Arc<Self>, name: &'static str, skew_ms: i64, run: F) -> Actor
    where
        F: FnOnce(Actor) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    {
        let actor = {
            let mut inner = self.lock();
            inner.live += 1;
            inner.next_actor += 1;
            Actor {
                id: inner.next_actor,
                name,
                dead: Arc::new(AtomicBool::new(false)),
            }
        };
        let body = run(actor.clone());
        let me = Arc::clone(self);
        let scoped = ACTOR.scope(
            actor.clone(),
            super::clock::SKEW_MS.scope(skew_ms, async move {
                body.await;
                me.lock().live -= 1;
                me.changed.notify_one();
            }),
        );
        tokio::spawn(scoped);
        actor
    }

    /// Waits until every running invocation waits at a gate (or none runs).
    pub(crate) async fn settle(&self) {
        loop {
            {
                let inner = self.lock();
                if inner.waiting.len() >= inner.live {
                    return;
                }
            }
            self.changed.notified().await;
        }
    }

    /// How many invocations wait at a gate, and how many run.
    pub(crate) fn load(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.waiting.len(), inner.live)
    }

    /// Lets one waiting call through (a draw picks which), then waits until
    /// its function reaches its next gate or ends. False when none waits.
    pub(crate) async fn grant_one(&self) -> bool {
        let waiter = {
            let mut inner = self.lock();
            if inner.waiting.is_empty() {
                return false;
            }
            let n = inner.waiting.len() as u64;
            let at = usize::try_from(inner.rng.below(n)).unwrap_or(0);
            inner.waiting.remove(at)
        };
        let _ = waiter.actor;
        let _ = waiter.go.send(());
        tokio::task::yield_now().await;
        self.settle().await;
        true
    }

    /// Lets every call through until no invocation runs.
    pub(crate) async fn drain(&self) {
        self.settle().await;
        while self.grant_one().await {}
    }
}
