//! Purchase answers per sale and outcome, for the operator dashboard
//! (`GET /admin/sales/{saleId}/live`, see [`crate::app::live`]).
//!
//! The purchase script is left alone: its one round trip is the hot path
//! `make bench` holds against the Redis ceiling. Instead each execution
//! environment counts its answers in memory, by sale and by the code the
//! `Purchases` metric uses (`ACCEPTED`, `REPLAYED`, the error code), and adds
//! them to the sale's hash `sale:{S}:outcomes` (`outcomes.lua`: one small
//! script per sale, which writes nothing for a sale Redis does not hold and
//! expires the hash with the sale's keys; the same call adds them to their
//! 10-second bucket of `sale:{S}:funnel`, the dashboard's history) at most
//! once per [`FLUSH_EVERY`]:
//!
//! - in Lambda, at the end of an invocation once a second has passed since
//!   the last flush ([`OutcomeTally::flush_if_due`]): a frozen environment
//!   runs no timer, so an idle environment's last partial second goes out
//!   with its next invocation (or never, if Lambda retires it first);
//! - in the local stack, from a task every second ([`spawn_flusher`]), which
//!   also turns the end-of-invocation flush off.
//!
//! A flush that fails is logged and its counts are kept for the next one;
//! it never fails a purchase. At most one invocation a second waits for its
//! round trip, bounded by [`FLUSH_TIMEOUT`]; with Redis out of reach the next
//! try waits [`FLUSH_BACKOFF`], so an outage (whose purchases already
//! answer 503 at once) costs one buyer in that many seconds 100 ms more. A
//! flush that timed out after the script ran may count those answers twice:
//! a dashboard figure, never stock.
//!
//! Recording is a read lock and one relaxed `fetch_add`, held together so a
//! flush (which takes the write lock once a second) never misses an addition.

use crate::domain::{Outcome, SaleId};
use crate::ports::{StockStore, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The most often an environment writes its answers to Redis.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Bound of one sale's flush. A healthy Redis answers in about a
/// millisecond; an invocation must not wait the store's whole timeout
/// after its answer is made.
pub const FLUSH_TIMEOUT: Duration = Duration::from_millis(100);

/// After Redis was out of reach, invocations try again this much later.
pub const FLUSH_BACKOFF: Duration = Duration::from_secs(5);

/// Sales one environment tallies between two flushes. Only sales the
/// catalog knows get here (`SALE_NOT_FOUND` is not tallied), so this is a
/// safety bound, not a limit a real sale meets.
const MAX_SALES: usize = 1_024;

/// One sale's answers since the last flush.
#[derive(Default)]
struct SaleCounts {
    /// By [`Outcome::index`].
    known: [AtomicU64; Outcome::ALL.len()],
    /// Codes outside [`Outcome`] (none today; counted all the same).
    other: Mutex<BTreeMap<&'static str, u64>>,
}

impl SaleCounts {
    fn add(&self, outcome: &'static str, n: u64) {
        match Outcome::from_code(outcome) {
            Some(known) => {
                self.known[known.index()].fetch_add(n, Ordering::Relaxed);
            }
            None => {
                if let Ok(mut other) = self.other.lock() {
                    *other.entry(outcome).or_default() += n;
                }
            }
        }
    }

    fn into_counts(self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(&'static str, u64)> = Outcome::ALL
            .iter()
            .zip(self.known)
            .map(|(outcome, n)| (outcome.as_str(), n.into_inner()))
            .filter(|(_, n)| *n > 0)
            .collect();
        if let Ok(other) = self.other.into_inner() {
            out.extend(other.into_iter().filter(|(_, n)| *n > 0));
        }
        out
    }
}

/// One execution environment's purchase answers not yet in Redis.
pub struct OutcomeTally {
    sales: RwLock<HashMap<SaleId, SaleCounts>>,
    started: Instant,
    /// Milliseconds after `started` from when an invocation flushes again.
    next_due_ms: AtomicU64,
    flushing: AtomicBool,
    /// A [`spawn_flusher`] task flushes: invocations do not.
    background: AtomicBool,
}

impl Default for OutcomeTally {
    fn default() -> Self {
        Self::new()
    }
}

impl OutcomeTally {
    /// An empty tally; its first flush is due [`FLUSH_EVERY`] from now (a
    /// cold start's first answer does not wait for a flush).
    pub fn new() -> Self {
        Self {
            sales: RwLock::default(),
            started: Instant::now(),
            next_due_ms: AtomicU64::new(millis(FLUSH_EVERY)),
            flushing: AtomicBool::new(false),
            background: AtomicBool::new(false),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// One answer to a purchase of `sale_id`, by its `Purchases` outcome.
    /// Outcomes that are not [tallied](Outcome::is_tallied) are dropped.
    pub fn record(&self, sale_id: &SaleId, outcome: &'static str) {
        if Outcome::from_code(outcome).is_some_and(|o| !o.is_tallied()) {
            return;
        }
        self.add(sale_id, outcome, 1, false);
    }

    /// Adds `n`; the read lock is held during the addition (see the module
    /// documentation). `restoring` counts taken back after a failed flush
    /// always find room.
    fn add(&self, sale_id: &SaleId, outcome: &'static str, n: u64, restoring: bool) {
        if let Ok(sales) = self.sales.read()
            && let Some(counts) = sales.get(sale_id)
        {
            counts.add(outcome, n);
            return;
        }
        let Ok(mut sales) = self.sales.write() else {
            return;
        };
        if !restoring && sales.len() >= MAX_SALES && !sales.contains_key(sale_id) {
            return;
        }
        sales.entry(sale_id.clone()).or_default().add(outcome, n);
    }

    /// Everything counted so far, leaving the tally empty.
    fn take(&self) -> Vec<(SaleId, Vec<(&'static str, u64)>)> {
        let drained = match self.sales.write() {
            Ok(mut sales) => std::mem::take(&mut *sales),
            Err(_) => return Vec::new(),
        };
        drained
            .into_iter()
            .map(|(sale, counts)| (sale, counts.into_counts()))
            .filter(|(_, counts)| !counts.is_empty())
            .collect()
    }

    /// Answers counted and not flushed yet, for one sale (tests, logs).
    pub fn pending(&self, sale_id: &SaleId) -> u64 {
        self.sales
            .read()
            .ok()
            .and_then(|sales| {
                sales.get(sale_id).map(|c| {
                    let known: u64 = c.known.iter().map(|n| n.load(Ordering::Relaxed)).sum();
                    let other: u64 = c.other.lock().map(|o| o.values().sum()).unwrap_or(0);
                    known + other
                })
            })
            .unwrap_or(0)
    }

    /// At the end of an invocation: flushes when [`FLUSH_EVERY`] has passed
    /// since the last flush ([`FLUSH_BACKOFF`] after Redis was out of
    /// reach), unless a background task does it.
    pub async fn flush_if_due<S: StockStore>(&self, stock: &S) {
        if self.background.load(Ordering::Relaxed)
            || self.now_ms() < self.next_due_ms.load(Ordering::Relaxed)
        {
            return;
        }
        self.flush(stock).await;
    }

    /// Adds what was counted to Redis, sale by sale. One flush at a time
    /// (another caller meanwhile returns at once); a failure keeps the
    /// counts for the next flush.
    pub async fn flush<S: StockStore>(&self, stock: &S) {
        let Some(_running) = Running::start(&self.flushing) else {
            return;
        };
        let started = self.now_ms();
        self.next_due_ms.store(
            started.saturating_add(millis(FLUSH_EVERY)),
            Ordering::Relaxed,
        );
        let mut unreachable = false;
        for (sale_id, counts) in self.take() {
            if unreachable {
                // Redis is out of reach: keep the rest without waiting on
                // each sale's timeout in turn.
                self.restore(&sale_id, &counts);
                continue;
            }
            let added = tokio::time::timeout(FLUSH_TIMEOUT, stock.add_outcomes(&sale_id, &counts))
                .await
                .unwrap_or_else(|_| Err(StoreError::Unavailable("timed out".into())));
            match added {
                Ok(true) => {}
                // No keys: an unloaded, ended or lost sale. Its tally starts
                // when it is loaded.
                Ok(false) => {
                    tracing::debug!(%sale_id, "sale not in Redis; its purchase answers are not tallied");
                }
                Err(err) => {
                    tracing::warn!(%sale_id, %err, "could not flush purchase outcomes; kept for the next flush");
                    self.restore(&sale_id, &counts);
                    unreachable = matches!(err, StoreError::Unavailable(_));
                }
            }
        }
        if unreachable {
            self.next_due_ms.store(
                started.saturating_add(millis(FLUSH_BACKOFF)),
                Ordering::Relaxed,
            );
        }
    }

    fn restore(&self, sale_id: &SaleId, counts: &[(&'static str, u64)]) {
        for (outcome, n) in counts {
            self.add(sale_id, outcome, *n, true);
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Marks a flush in progress; unmarks it however the flush ends (a
/// cancelled flush must not stop every later one).
struct Running<'a>(&'a AtomicBool);

impl<'a> Running<'a> {
    fn start(flag: &'a AtomicBool) -> Option<Self> {
        (!flag.swap(true, Ordering::AcqRel)).then_some(Self(flag))
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Flushes `tally` into `stock` every `every` until aborted (the local
/// stack); invocations then no longer flush themselves. The caller flushes
/// once more at shutdown.
pub fn spawn_flusher<S: StockStore + 'static>(
    tally: Arc<OutcomeTally>,
    stock: S,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tally.background.store(true, Ordering::Relaxed);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            tally.flush(&stock).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::{MemoryStock, test_sale};

    fn sale(id: &str) -> (MemoryStock, SaleId) {
        let stock = MemoryStock::default();
        let sale = test_sale(id, 10, 1).unwrap();
        let sale_id = sale.sale_id.clone();
        stock.load(sale);
        (stock, sale_id)
    }

    #[tokio::test]
    async fn a_flush_adds_the_counts_and_empties_the_tally() {
        let (stock, s1) = sale("s1");
        let tally = OutcomeTally::new();
        for outcome in ["ACCEPTED", "ACCEPTED", "SOLD_OUT", "SOME_NEW_CODE"] {
            tally.record(&s1, outcome);
        }
        assert_eq!(tally.pending(&s1), 4);
        tally.flush(&stock).await;
        assert_eq!(tally.pending(&s1), 0);
        tally.record(&s1, "SOLD_OUT");
        tally.flush(&stock).await;
        let flushed = stock.outcomes_of(&s1);
        assert_eq!(
            flushed.into_iter().collect::<Vec<_>>(),
            [
                ("ACCEPTED".to_owned(), 2),
                ("SOLD_OUT".to_owned(), 2),
                ("SOME_NEW_CODE".to_owned(), 1),
            ]
        );
    }

    /// The hash fields are [`Outcome::ALL`]'s codes, but for the outcomes
    /// not tallied.
    #[tokio::test]
    async fn the_tallied_codes_are_outcome_all_but_sale_not_found() {
        let (stock, s1) = sale("s1");
        let tally = OutcomeTally::new();
        for outcome in Outcome::ALL {
            tally.record(&s1, outcome.as_str());
        }
        tally.flush(&stock).await;
        let fields: Vec<String> = stock.outcomes_of(&s1).into_keys().collect();
        let mut want: Vec<String> = Outcome::ALL
            .into_iter()
            .filter(|o| o.is_tallied())
            .map(|o| o.as_str().to_owned())
            .collect();
        want.sort_unstable();
        assert_eq!(fields, want);
        assert!(!fields.iter().any(|f| f == "SALE_NOT_FOUND"));
    }

    #[tokio::test]
    async fn a_failed_flush_keeps_the_counts_for_the_next() {
        let (stock, s1) = sale("s1");
        let tally = OutcomeTally::new();
        tally.record(&s1, "ACCEPTED");
        stock.unavailable.store(true, Ordering::SeqCst);
        tally.flush(&stock).await;
        assert_eq!(tally.pending(&s1), 1, "kept");
        tally.record(&s1, "LIMIT_EXCEEDED");
        stock.unavailable.store(false, Ordering::SeqCst);
        tally.flush(&stock).await;
        assert_eq!(tally.pending(&s1), 0);
        assert_eq!(stock.outcomes_of(&s1)["ACCEPTED"], 1);
        assert_eq!(stock.outcomes_of(&s1)["LIMIT_EXCEEDED"], 1);
    }

    #[tokio::test]
    async fn unknown_sales_are_not_tallied_and_unloaded_ones_are_dropped() {
        let (stock, s1) = sale("s1");
        let ghost = SaleId::parse("ghost").unwrap();
        let tally = OutcomeTally::new();
        tally.record(&ghost, "SALE_NOT_FOUND");
        assert_eq!(tally.pending(&ghost), 0, "no memory for a junk id");
        // Answered for a sale Redis does not hold (paused, keys lost): the
        // store writes nothing and the tally does not keep it.
        tally.record(&ghost, "SALE_PAUSED");
        tally.record(&s1, "ACCEPTED");
        tally.flush(&stock).await;
        assert_eq!(tally.pending(&ghost), 0);
        assert!(stock.outcomes_of(&ghost).is_empty());
        assert_eq!(stock.outcomes_of(&s1)["ACCEPTED"], 1);
    }

    #[tokio::test]
    async fn an_invocation_flushes_at_most_once_a_second() {
        let (stock, s1) = sale("s1");
        let tally = OutcomeTally::new();
        tally.record(&s1, "ACCEPTED");
        // Within the first second of the environment: not due.
        tally.flush_if_due(&stock).await;
        assert_eq!(tally.pending(&s1), 1);
        // A second later (as if): due, once.
        tally.next_due_ms.store(0, Ordering::Relaxed);
        tally.flush_if_due(&stock).await;
        assert_eq!(tally.pending(&s1), 0);
        tally.record(&s1, "ACCEPTED");
        tally.flush_if_due(&stock).await;
        assert_eq!(tally.pending(&s1), 1, "the next one waits a second");
        assert_eq!(stock.outcomes_of(&s1)["ACCEPTED"], 1);
        let next = tally.next_due_ms.load(Ordering::Relaxed);
        assert!(next >= millis(FLUSH_EVERY) && next < millis(FLUSH_EVERY) + 1_000);
    }

    #[tokio::test]
    async fn an_unreachable_store_is_tried_again_after_the_backoff() {
        let (stock, s1) = sale("s1");
        let tally = OutcomeTally::new();
        tally.record(&s1, "ACCEPTED");
        stock.unavailable.store(true, Ordering::SeqCst);
        tally.next_due_ms.store(0, Ordering::Relaxed);
        tally.flush_if_due(&stock).await;
        assert_eq!(tally.pending(&s1), 1, "kept");
        let next = tally.next_due_ms.load(Ordering::Relaxed);
        assert!(next >= millis(FLUSH_BACKOFF), "{next}");
    }

    /// A store whose flush never answers.
    struct Stuck(MemoryStock);

    impl StockStore for Stuck {
        async fn reserve(
            &self,
            req: crate::ports::ReserveRequest<'_>,
        ) -> Result<crate::ports::ReserveOutcome, StoreError> {
            self.0.reserve(req).await
        }
        async fn release(
            &self,
            sale_id: &SaleId,
            order_id: &crate::domain::OrderId,
        ) -> Result<crate::ports::ReleaseOutcome, StoreError> {
            self.0.release(sale_id, order_id).await
        }
        async fn resolve(
            &self,
            sale_id: &SaleId,
            order_id: &crate::domain::OrderId,
            resolution: crate::ports::Resolution,
        ) -> Result<bool, StoreError> {
            self.0.resolve(sale_id, order_id, resolution).await
        }
        async fn view(
            &self,
            sale_id: &SaleId,
            order_id: Option<&crate::domain::OrderId>,
        ) -> Result<Option<crate::ports::StockView>, StoreError> {
            self.0.view(sale_id, order_id).await
        }
        async fn add_outcomes(
            &self,
            _sale_id: &SaleId,
            _counts: &[(&'static str, u64)],
        ) -> Result<bool, StoreError> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_flush_is_bounded_and_keeps_what_it_could_not_write() {
        let (stock, s1) = sale("s1");
        let stuck = Stuck(stock);
        let tally = OutcomeTally::new();
        tally.record(&s1, "SOLD_OUT");
        let before = Instant::now();
        tally.flush(&stuck).await;
        let took = before.elapsed();
        assert!(
            took >= FLUSH_TIMEOUT && took < FLUSH_TIMEOUT * 10,
            "{took:?}"
        );
        assert_eq!(tally.pending(&s1), 1);
    }
}
