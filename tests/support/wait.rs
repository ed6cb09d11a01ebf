//! Waiting on what other processes and tasks do: [`eventually`] polls a
//! condition; [`until_reached`] and [`StallWatch`] wait for a count that
//! grows, telling a stuck run from a slow machine.

use std::time::Duration;

/// Polls `check` until it returns true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    // The poll's cadence: the loop ends as soon as `check` holds, or at the
    // deadline.
    let mut every = tokio::time::interval(Duration::from_millis(20));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
    }
}

/// Polls `progress` (a count that only grows, such as orders written)
/// until it reaches `target`. Slow is not wrong: the wait goes on as long
/// as the count moves, and ends in an error only when it has not moved for
/// `stall` (stuck: a wrong answer) or after `cap` in all (a machine too
/// slow for the test); the error says which, with the count reached.
pub async fn until_reached<F, Fut>(
    target: u64,
    stall: Duration,
    cap: Duration,
    mut progress: F,
) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let started = tokio::time::Instant::now();
    let (mut last, mut moved_at) = (0, started);
    let mut every = tokio::time::interval(Duration::from_millis(200));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let now_at = progress().await;
        let now = tokio::time::Instant::now();
        if now_at >= target {
            return Ok(());
        }
        if now_at > last {
            (last, moved_at) = (now_at, now);
        }
        if now - moved_at >= stall {
            return Err(format!(
                "stuck, not slow: {now_at} of {target} after {:?}, none more in the last {stall:?}",
                now - started
            ));
        }
        if now - started >= cap {
            return Err(format!(
                "too slow a machine, not stuck: {now_at} of {target} after {cap:?}, still moving"
            ));
        }
    }
}

/// [`until_reached`] for a wait many pollers share, each polling its own
/// part (one ticket each, say): whoever sees the whole move calls
/// [`StallWatch::observe`] with the count, and each poller asks
/// [`StallWatch::verdict`] whether to go on. Slow is not wrong: a poller
/// gives up only when the shared count has not moved for `stall`, or after
/// `cap` in all.
pub struct StallWatch {
    started: std::time::Instant,
    stall: Duration,
    cap: Duration,
    /// The highest count seen, and when it last grew.
    seen: std::sync::Mutex<(u64, std::time::Instant)>,
    /// When a poller last took the turn to read the shared count.
    read_at: std::sync::Mutex<std::time::Instant>,
}

impl StallWatch {
    pub fn new(stall: Duration, cap: Duration) -> Self {
        let now = std::time::Instant::now();
        Self {
            started: now,
            stall,
            cap,
            seen: std::sync::Mutex::new((0, now)),
            read_at: std::sync::Mutex::new(now),
        }
    }

    /// Records the shared count; a higher one restarts the stall clock.
    pub fn observe(&self, count: u64) {
        let mut seen = self.seen.lock().unwrap();
        if count > seen.0 {
            *seen = (count, std::time::Instant::now());
        }
    }

    /// Whether the caller takes the turn to read the shared count: true for
    /// one caller every `every`, so many pollers read it as seldom as one.
    pub fn turn_to_read(&self, every: Duration) -> bool {
        let mut read_at = self.read_at.lock().unwrap();
        if read_at.elapsed() < every {
            return false;
        }
        *read_at = std::time::Instant::now();
        true
    }

    /// `Err` saying stuck or too slow, with the count reached; `Ok` to go on.
    pub fn verdict(&self) -> Result<(), String> {
        let (count, moved_at) = *self.seen.lock().unwrap();
        if moved_at.elapsed() >= self.stall {
            return Err(format!(
                "stuck, not slow: {count} after {:?}, none more in the last {:?}",
                self.started.elapsed(),
                self.stall
            ));
        }
        if self.started.elapsed() >= self.cap {
            return Err(format!(
                "too slow a machine, not stuck: {count} after {:?}, still moving",
                self.cap
            ));
        }
        Ok(())
    }
}
