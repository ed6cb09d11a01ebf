//! How the order-writer waits before sending a contended write again.

use std::time::Duration;

/// How a write that contention cancelled is sent again. Every concurrent
/// writer's transaction updates the same sale item, so two in flight at
/// once cancel each other (`TransactionConflict`); sent again at once they
/// would meet again, and falling back to single writes only makes more
/// transactions on the same item. Full jitter (a wait drawn uniformly
/// between zero and the ceiling, which doubles from `base` up to `cap`)
/// spreads the retries of writers that collided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first retry's ceiling.
    pub base: Duration,
    /// No wait is longer.
    pub cap: Duration,
    /// Retries of one write (a group or a single) before it is given up.
    pub retries: u32,
    /// The most one batch waits in all: the function's timeout (10 s, see
    /// `template.yaml`) must still leave time for the writes themselves.
    pub budget: Duration,
    /// Draw each wait (true), or wait the whole ceiling (false: the worst
    /// case, deterministic, for tests).
    pub jitter: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(500),
            retries: 8,
            budget: Duration::from_secs(4),
            jitter: true,
        }
    }
}

impl Backoff {
    /// The ceiling of retry `attempt` (0 first): `base * 2^attempt`, at
    /// most `cap`.
    pub(super) fn ceiling(&self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.cap)
    }
}
