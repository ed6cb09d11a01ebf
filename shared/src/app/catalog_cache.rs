//! A per-environment cache in front of the sale catalog.
//!
//! It is consulted only when Redis has no keys for a sale, which is rare for
//! real sales and constant for junk ids. Both answers are kept for a short
//! TTL, so a flood of unknown ids costs one database read per id per TTL, and
//! the map is bounded so such a flood cannot grow memory without limit.
//! A reader that sees no junk ids (the order-writer) keeps only the sales
//! found ([`CachedCatalog::forgetting_missing`]): an order for a sale made
//! a moment later, or redriven from the DLQ once it exists, is written at
//! once.

use crate::domain::{Sale, SaleId};
use crate::ports::{CatalogError, SaleCatalog};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MAX_ENTRIES: usize = 10_000;

pub struct CachedCatalog<C> {
    inner: C,
    ttl: Duration,
    entries: Mutex<HashMap<SaleId, (Instant, Option<Sale>)>>,
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

    fn cached(&self, sale_id: &SaleId) -> Option<Option<Sale>> {
        let entries = self.entries.lock().ok()?;
        let (at, sale) = entries.get(sale_id)?;
        (at.elapsed() < self.ttl).then(|| sale.clone())
    }

    fn remember(&self, sale_id: &SaleId, sale: Option<Sale>) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= MAX_ENTRIES {
                let ttl = self.ttl;
                entries.retain(|_, (at, _)| at.elapsed() < ttl);
                if entries.len() >= MAX_ENTRIES {
                    entries.clear();
                }
            }
            entries.insert(sale_id.clone(), (Instant::now(), sale));
        }
    }
}

impl<C: SaleCatalog> SaleCatalog for CachedCatalog<C> {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        if let Some(hit) = self.cached(sale_id) {
            return Ok(hit);
        }
        // Errors are not cached: the next request asks again.
        let fresh = self.inner.get_sale(sale_id).await?;
        if fresh.is_some() || self.remember_missing {
            self.remember(sale_id, fresh.clone());
        }
        Ok(fresh)
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
}
