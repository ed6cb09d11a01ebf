//! The simulation's clock: epoch milliseconds read off tokio's paused
//! clock, so time moves only when the scheduler moves it (or every task
//! waits on a timer), plus the skew of the function asking.

use std::cell::Cell;

thread_local! {
    /// The paused clock's instant the run started at, and the epoch ms it
    /// stands for. One run per thread.
    static BASE: Cell<Option<(tokio::time::Instant, i64)>> = const { Cell::new(None) };
}

tokio::task_local! {
    /// How far the running function's clock is off (ms, either way).
    pub(crate) static SKEW_MS: i64;
}

/// The virtual time, when a simulation runs on this thread.
pub(crate) fn now_ms() -> Option<i64> {
    let (at, epoch) = BASE.with(Cell::get)?;
    let elapsed = tokio::time::Instant::now().saturating_duration_since(at);
    let elapsed = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
    let skew = SKEW_MS.try_with(|s| *s).unwrap_or(0);
    Some(epoch + elapsed + skew)
}

/// Puts the virtual clock on this thread until dropped. Call inside the
/// run's paused runtime.
pub(crate) fn install(epoch_ms: i64) -> Installed {
    BASE.with(|b| b.set(Some((tokio::time::Instant::now(), epoch_ms))));
    Installed
}

pub(crate) struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        BASE.with(|b| b.set(None));
    }
}
