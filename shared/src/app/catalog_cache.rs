//! A per-environment cache in front of the sale catalog.
//!
//! It is consulted for every `GET /sales/{saleId}` (the page every buyer
//! polls) and whenever Redis has no keys for a sale, which is rare for real
//! sales and constant for junk ids. Both answers are kept for a short TTL,
//! so a flood of unknown ids costs one database read per id per TTL, and
//! the map is bounded so such a flood cannot grow memory without limit.
//! A reader that sees no junk ids (the order-writer) keeps only the sales
//! found ([`CachedCatalog::forgetting_missing`]): an order for a sale made
//! a moment later, or redriven from the DLQ once it exists, is written at
//! once.
//!
//! Under load the cache must not multiply the database's trouble:
//! - one read per sale at a time: the requests that find an entry expired
//!   while its read is out wait for that read instead of each sending
//!   their own (hundreds of polls at the TTL's edge were hundreds of reads
//!   at once, each slower for the others);
//! - a read that fails is not sent again for [`RETRY_AFTER`], and meanwhile
//!   the last answer read is served, for up to [`MAX_STALE`] after it was
//!   read: a slow or throttled table makes the view older, not an error
//!   (before, every request while it failed asked again and answered 503,
//!   which kept it failing as long as pages polled).

use crate::domain::{Sale, SaleId};
use crate::ports::{CatalogError, SaleCatalog};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
// The runtime's clock: the same as std's, except in tests on a paused clock.
use tokio::time::Instant;

const MAX_ENTRIES: usize = 10_000;
/// After a failed read of a sale, how long the next one waits.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How old an answer may be served while reads of it fail.
pub const MAX_STALE: Duration = Duration::from_secs(300);

/// What the cache knows of one sale.
struct Entry {
    /// The last answer read, and when.
    read: Option<(Instant, Option<Sale>)>,
    /// When the last read failed, if it did after `read`.
    failed: Option<Instant>,
    /// Held while a read of this sale is out.
    reading: Arc<tokio::sync::Mutex<()>>,
}

impl Entry {
    fn empty() -> Self {
        Self {
            read: None,
            failed: None,
            reading: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

/// What the entry allows without a read.
enum Known {
    Fresh(Option<Sale>),
    /// A read failed a moment ago: the last answer, if not too old.
    Failing(Option<Option<Sale>>),
    Expired,
}

impl Known {
    /// The answer without a read, if there is one.
    fn answer(self) -> Option<Result<Option<Sale>, CatalogError>> {
        match self {
            Self::Fresh(sale) | Self::Failing(Some(sale)) => Some(Ok(sale)),
            Self::Failing(None) => Some(Err(CatalogError::Unavailable(
                "the sales table failed a moment ago; retry shortly".into(),
            ))),
            Self::Expired => None,
        }
    }
}

pub struct CachedCatalog<C> {
    inner: C,
    ttl: Duration,
    entries: Mutex<HashMap<SaleId, Entry>>,
    /// Whether "no such sale" is kept too.
    remember_missing: bool,
}

impl<C: SaleCatalog> CachedCatalog<C> {
    pub fn new(inner: C, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            entries: Mutex::new(HashMap::new()),
            remember_missing: true,
        }
    }

    /// The same cache keeping only the sales it found: every lookup of a
    /// missing sale asks the catalog again.
    pub fn forgetting_missing(mut self) -> Self {
        self.remember_missing = false;
        self
    }

    /// What is known of `sale_id` now, and the lock of its reads.
    fn known(&self, sale_id: &SaleId) -> (Known, Option<Arc<tokio::sync::Mutex<()>>>) {
        let Ok(mut entries) = self.entries.lock() else {
            return (Known::Expired, None);
        };
        if !entries.contains_key(sale_id) && entries.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            entries.retain(|_, e| e.read.as_ref().is_some_and(|(at, _)| at.elapsed() < ttl));
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        let entry = entries.entry(sale_id.clone()).or_insert_with(Entry::empty);
        let known = match (&entry.read, entry.failed) {
            (Some((at, sale)), _) if at.elapsed() < self.ttl => Known::Fresh(sale.clone()),
            (read, Some(failed)) if failed.elapsed() < RETRY_AFTER => Known::Failing(
                read.as_ref()
                    .filter(|(at, _)| at.elapsed() < MAX_STALE)
                    .map(|(_, sale)| sale.clone()),
            ),
            _ => Known::Expired,
        };
        (known, Some(entry.reading.clone()))
    }

    fn remember(&self, sale_id: &SaleId, outcome: Result<&Option<Sale>, ()>) {
        if let Ok(mut entries) = self.entries.lock() {
            let entry = entries.entry(sale_id.clone()).or_insert_with(Entry::empty);
            match outcome {
                Ok(sale) if sale.is_some() || self.remember_missing => {
                    entry.read = Some((Instant::now(), sale.clone()));
                    entry.failed = None;
                }
                Ok(_) => entry.failed = None,
                Err(()) => entry.failed = Some(Instant::now()),
            }
        }
    }

    /// The last answer read of `sale_id` if it is not older than
    /// [`MAX_STALE`].
    fn stale(&self, sale_id: &SaleId) -> Option<Option<Sale>> {
        let entries = self.entries.lock().ok()?;
        let (at, sale) = entries.get(sale_id)?.read.as_ref()?;
        (at.elapsed() < MAX_STALE).then(|| sale.clone())
    }
}

impl<C: SaleCatalog> SaleCatalog for CachedCatalog<C> {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        let (known, reading) = self.known(sale_id);
        if let Some(answer) = known.answer() {
            return answer;
        }
        // One read at a time per sale: who waited for it takes its answer.
        let _reading = match &reading {
            Some(lock) => Some(lock.lock().await),
            None => None,
        };
        if let Some(answer) = self.known(sale_id).0.answer() {
            return answer;
        }
        match self.inner.get_sale(sale_id).await {
            Ok(fresh) => {
                self.remember(sale_id, Ok(&fresh));
                Ok(fresh)
            }
            Err(err) => {
                self.remember(sale_id, Err(()));
                match self.stale(sale_id) {
                    Some(sale) => {
                        tracing::warn!(%sale_id, %err, "sales table read failed; serving the last answer read");
                        Ok(sale)
                    }
                    None => Err(err),
                }
            }
        }
    }

    async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
        self.inner.list_sales().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::MemoryCatalog;

    #[tokio::test]
    async fn unknown_ids_are_read_once_per_ttl() {
        let inner = MemoryCatalog::default();
        let cache = CachedCatalog::new(inner.clone(), Duration::from_secs(60));
        let id = SaleId::parse("nope").unwrap();
        for _ in 0..100 {
            assert_eq!(cache.get_sale(&id).await.unwrap(), None);
        }
        assert_eq!(inner.reads(), 1);
    }

    #[tokio::test]
    async fn forgetting_missing_keeps_only_the_sales_found() {
        let inner = MemoryCatalog::default();
        let cache = CachedCatalog::new(inner.clone(), Duration::from_secs(60)).forgetting_missing();
        let id = SaleId::parse("nope").unwrap();
        cache.get_sale(&id).await.unwrap();
        cache.get_sale(&id).await.unwrap();
        assert_eq!(inner.reads(), 2);
    }

    #[tokio::test]
    async fn expired_entries_are_read_again() {
        let inner = MemoryCatalog::default();
        let cache = CachedCatalog::new(inner.clone(), Duration::ZERO);
        let id = SaleId::parse("nope").unwrap();
        cache.get_sale(&id).await.unwrap();
        cache.get_sale(&id).await.unwrap();
        assert_eq!(inner.reads(), 2);
    }

    /// A catalog whose every read takes `delay` and may fail, counting reads.
    #[derive(Clone, Default)]
    struct Slow {
        inner: MemoryCatalog,
        delay: Duration,
        fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
        reads: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl SaleCatalog for Slow {
        async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
            use std::sync::atomic::Ordering;
            self.reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            if self.fail.load(Ordering::SeqCst) {
                return Err(CatalogError::Unavailable("timed out".into()));
            }
            self.inner.get_sale(sale_id).await
        }

        async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
            self.inner.list_sales().await
        }
    }

    fn slow_with_a_sale() -> (Slow, SaleId) {
        let inner = MemoryCatalog::default();
        let sale = crate::adapters::memory::test_sale("polled", 10, 1).unwrap();
        let id = sale.sale_id.clone();
        inner.insert(sale);
        let slow = Slow {
            inner,
            delay: Duration::from_millis(500),
            ..Slow::default()
        };
        (slow, id)
    }

    /// Before: 256 polls of an expired entry sent 256 reads at once.
    #[tokio::test(start_paused = true)]
    async fn polls_of_an_expired_entry_send_one_read() {
        use std::sync::atomic::Ordering;
        let (slow, id) = slow_with_a_sale();
        let cache = std::sync::Arc::new(CachedCatalog::new(slow.clone(), Duration::from_secs(5)));
        let polls: Vec<_> = (0..256)
            .map(|_| {
                let (cache, id) = (cache.clone(), id.clone());
                tokio::spawn(async move { cache.get_sale(&id).await })
            })
            .collect();
        for poll in polls {
            assert!(poll.await.unwrap().unwrap().is_some());
        }
        assert_eq!(slow.reads.load(Ordering::SeqCst), 1);
    }

    /// Before: while the table failed, every poll asked again and answered
    /// an error (503), which kept the table failing as long as pages polled.
    #[tokio::test(start_paused = true)]
    async fn a_failing_table_serves_the_last_answer_and_is_asked_once_a_second() {
        use std::sync::atomic::Ordering;
        let (slow, id) = slow_with_a_sale();
        let cache = std::sync::Arc::new(CachedCatalog::new(slow.clone(), Duration::from_secs(5)));
        assert!(cache.get_sale(&id).await.unwrap().is_some());
        slow.fail.store(true, Ordering::SeqCst);
        tokio::time::advance(Duration::from_secs(6)).await;
        let reads_before = slow.reads.load(Ordering::SeqCst);
        // Ten seconds of 50 polls a second, the table failing throughout.
        for _ in 0..500 {
            let answer = cache.get_sale(&id).await;
            assert!(
                answer.is_ok_and(|sale| sale.is_some()),
                "the last answer, not an error"
            );
            tokio::time::advance(Duration::from_millis(20)).await;
        }
        let reads = slow.reads.load(Ordering::SeqCst) - reads_before;
        assert!(reads <= 10, "{reads} reads in 10 s of a failing table");
        // Back: fresh again. Too old: the error.
        slow.fail.store(false, Ordering::SeqCst);
        tokio::time::advance(RETRY_AFTER).await;
        assert!(cache.get_sale(&id).await.unwrap().is_some());
        slow.fail.store(true, Ordering::SeqCst);
        tokio::time::advance(MAX_STALE + Duration::from_secs(1)).await;
        assert!(cache.get_sale(&id).await.is_err());
    }
}
