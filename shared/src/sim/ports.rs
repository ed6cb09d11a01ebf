//! The memory stores behind the scheduler's gates: every call waits for its
//! turn, and may fail or take its function down before or after its effect
//! ([`Step`]). Redis's calls run on Redis's own clock (no skew), as its
//! scripts read `TIME`. The order table is in [`orders`].

use super::clock::SKEW_MS;
use super::sched::{Sched, Step};
use crate::adapters::memory::{MemoryCatalog, MemoryStock};
use crate::domain::ledger::{LedgerPage, LedgerPosition, SaleCounters};
use crate::domain::stock_state::{Holding, LoadOutcome, PendingTransfer, RedisSnapshot, Returned};
use crate::domain::{IdempotencyKey, OrderId, Sale, SaleId, UserId};
use crate::ports::{
    CatalogAdmin, CatalogError, LiveFigures, ReleaseOutcome, ReservationRecord, ReserveOutcome,
    ReserveRequest, Resolution, SaleCatalog, StockLoading, StockReading, StockRepair, StockStore,
    StockView, StoreError, WriteErrorLog, WriteFailure,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Runs `$call` as the gate says; `$err` is the error its caller is told.
macro_rules! gated {
    ($sched:expr, $effect:expr, $writes:expr, $err:expr, $call:expr) => {{
        let step = $sched.gate($effect, $writes).await;
        if step == Step::Go {
            $call.await
        } else {
            if step.applies() {
                let _ = $call.await;
            }
            Err($err)
        }
    }};
}

fn redis_down(effect: &str) -> StoreError {
    StoreError::Unavailable(format!("simulated: {effect} did not answer"))
}

fn catalog_down(effect: &str) -> CatalogError {
    CatalogError::Unavailable(format!("simulated: {effect} did not answer"))
}

// Declared after `gated!`, which it uses.
mod orders;
mod waitlist;

pub(crate) use orders::SimOrders;
pub(crate) use waitlist::EntryHistory;

#[derive(Clone)]
pub(crate) struct SimStock {
    pub(crate) inner: MemoryStock,
    pub(crate) sched: Arc<Sched>,
    /// Every reservation made, with when Redis made it (its own clock).
    pub(crate) reserved: Arc<std::sync::Mutex<Vec<(i64, OrderId)>>>,
    /// Print the waitlist's calls (`make simulate SEED=n TRACE=1`).
    pub(crate) tracing: bool,
}

/// A Redis call: on Redis's clock.
macro_rules! redis {
    ($self:ident, $effect:literal, $writes:expr, $call:expr) => {
        gated!(
            $self.sched,
            $effect,
            $writes,
            redis_down($effect),
            SKEW_MS.scope(0, $call)
        )
    };
}

impl StockStore for SimStock {
    async fn reserve(&self, request: ReserveRequest<'_>) -> Result<ReserveOutcome, StoreError> {
        let outcome = redis!(self, "redis.reserve", true, self.inner.reserve(request));
        if let Ok(ReserveOutcome::Reserved(r)) = &outcome
            && let Ok(mut made) = self.reserved.lock()
        {
            made.push((r.reserved_at_ms, r.order_id.clone()));
        }
        outcome
    }

    async fn release(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
    ) -> Result<ReleaseOutcome, StoreError> {
        redis!(
            self,
            "redis.release",
            true,
            self.inner.release(sale_id, order_id)
        )
    }

    async fn resolve(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        resolution: Resolution,
    ) -> Result<bool, StoreError> {
        redis!(
            self,
            "redis.resolve",
            true,
            self.inner.resolve(sale_id, order_id, resolution)
        )
    }

    async fn view(
        &self,
        sale_id: &SaleId,
        order_id: Option<&OrderId>,
    ) -> Result<Option<StockView>, StoreError> {
        redis!(
            self,
            "redis.view",
            false,
            self.inner.view(sale_id, order_id)
        )
    }

    async fn add_outcomes(
        &self,
        sale_id: &SaleId,
        counts: &[(&'static str, u64)],
    ) -> Result<bool, StoreError> {
        redis!(
            self,
            "redis.add_outcomes",
            true,
            self.inner.add_outcomes(sale_id, counts)
        )
    }

    async fn buyer_reservations(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Vec<(OrderId, ReservationRecord)>, StoreError> {
        redis!(
            self,
            "redis.buyer_reservations",
            false,
            self.inner.buyer_reservations(sale_id, user_id)
        )
    }

    async fn keyed_may_exist(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        key: &IdempotencyKey,
        since: tokio::time::Instant,
    ) -> Result<bool, StoreError> {
        redis!(
            self,
            "redis.keyed_may_exist",
            false,
            self.inner.keyed_may_exist(sale_id, user_id, key, since)
        )
    }

    async fn record_write_error(
        &self,
        sale_id: &SaleId,
        failure: &WriteFailure,
    ) -> Result<(), StoreError> {
        redis!(
            self,
            "redis.record_write_error",
            true,
            self.inner.record_write_error(sale_id, failure)
        )
    }
}

impl StockLoading for SimStock {
    type Survivors = ();

    type Rebuild = <crate::adapters::memory::MemoryStock as StockLoading>::Rebuild;

    async fn load_sale(&self, sale: &Sale, version: i64) -> Result<LoadOutcome, StoreError> {
        redis!(
            self,
            "redis.load_sale",
            true,
            self.inner.load_sale(sale, version)
        )
    }

    async fn refresh_sale(&self, sale: &Sale, version: i64) -> Result<bool, StoreError> {
        redis!(
            self,
            "redis.refresh_sale",
            true,
            self.inner.refresh_sale(sale, version)
        )
    }

    async fn survivors(&self, sale: &Sale) -> Result<Option<()>, StoreError> {
        redis!(self, "redis.survivors", false, self.inner.survivors(sale))
    }

    async fn begin_rebuild(
        &self,
        sale: &Sale,
        version: i64,
        survivors: Option<()>,
    ) -> Result<Self::Rebuild, StoreError> {
        redis!(
            self,
            "redis.begin_rebuild",
            false,
            self.inner.begin_rebuild(sale, version, survivors)
        )
    }

    async fn stage_rebuild(
        &self,
        rebuild: &mut Self::Rebuild,
        page: &LedgerPage,
    ) -> Result<(), StoreError> {
        redis!(
            self,
            "redis.stage_rebuild",
            true,
            self.inner.stage_rebuild(rebuild, page)
        )
    }

    async fn commit_rebuild(
        &self,
        rebuild: Self::Rebuild,
        at: LedgerPosition,
    ) -> Result<Option<u64>, StoreError> {
        redis!(
            self,
            "redis.rebuild_sale",
            true,
            self.inner.commit_rebuild(rebuild, at)
        )
    }

    async fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
        to_stock: u32,
    ) -> Result<Returned, StoreError> {
        redis!(
            self,
            "redis.return_units",
            true,
            self.inner
                .return_units(sale_id, order_id, user_id, quantity, return_seq, to_stock)
        )
    }
}

impl StockRepair for SimStock {
    async fn set_status(&self, sale: &Sale) -> Result<u32, StoreError> {
        redis!(self, "redis.set_status", true, self.inner.set_status(sale))
    }

    async fn open_loaded(&self, sale: &Sale) -> Result<u32, StoreError> {
        redis!(
            self,
            "redis.open_loaded",
            true,
            self.inner.open_loaded(sale)
        )
    }

    async fn clock_ms(&self) -> Result<i64, StoreError> {
        redis!(self, "redis.clock_ms", false, self.inner.clock_ms())
    }

    async fn set_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &str,
        read: i64,
        units: i64,
    ) -> Result<i64, StoreError> {
        redis!(
            self,
            "redis.set_buyer",
            true,
            self.inner.set_buyer(sale_id, user_id, read, units)
        )
    }

    async fn set_stock(
        &self,
        sale_id: &SaleId,
        read: i64,
        units: i64,
        ledger_seq: u64,
    ) -> Result<Option<i64>, StoreError> {
        redis!(
            self,
            "redis.set_stock",
            true,
            self.inner.set_stock(sale_id, read, units, ledger_seq)
        )
    }

    async fn complete_transfer(
        &self,
        sale_id: &SaleId,
        transfer: &PendingTransfer,
    ) -> Result<bool, StoreError> {
        redis!(
            self,
            "redis.complete_transfer",
            true,
            self.inner.complete_transfer(sale_id, transfer)
        )
    }

    async fn try_lock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        redis!(
            self,
            "redis.try_lock",
            true,
            self.inner.try_lock(sale_id, name, token, ttl)
        )
    }

    async fn note_loss(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<i64, StoreError> {
        redis!(
            self,
            "redis.note_loss",
            true,
            self.inner.note_loss(sale_id, now_ms, ttl)
        )
    }

    async fn unlock(&self, sale_id: &SaleId, name: &str, token: &str) -> Result<(), StoreError> {
        redis!(
            self,
            "redis.unlock",
            true,
            self.inner.unlock(sale_id, name, token)
        )
    }
}

impl StockReading for SimStock {
    async fn snapshot(&self, sale_id: &SaleId) -> Result<Option<RedisSnapshot>, StoreError> {
        redis!(self, "redis.snapshot", false, self.inner.snapshot(sale_id))
    }

    async fn holdings(
        &self,
        sale_id: &SaleId,
        users: &[String],
    ) -> Result<HashMap<String, Holding>, StoreError> {
        redis!(
            self,
            "redis.holdings",
            false,
            self.inner.holdings(sale_id, users)
        )
    }
}

impl LiveFigures for SimStock {
    async fn outcomes(&self, sale_id: &SaleId) -> Result<BTreeMap<String, u64>, StoreError> {
        redis!(self, "redis.outcomes", false, self.inner.outcomes(sale_id))
    }
}

impl WriteErrorLog for SimStock {}

#[derive(Clone)]
pub(crate) struct SimCatalog {
    pub(crate) inner: MemoryCatalog,
    pub(crate) sched: Arc<Sched>,
}

impl SimCatalog {
    /// An operator's write of the sale's definition (the admin API's
    /// conditional update of the sale item).
    pub(crate) async fn put_sale(&self, sale: Sale) -> Result<(), CatalogError> {
        let step = self.sched.gate("dynamo.put_sale", true).await;
        if step.applies() {
            self.inner.insert(sale);
        }
        if step == Step::Go {
            Ok(())
        } else {
            Err(catalog_down("dynamo.put_sale"))
        }
    }
}

impl SaleCatalog for SimCatalog {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        gated!(
            self.sched,
            "dynamo.get_sale",
            false,
            catalog_down("dynamo.get_sale"),
            self.inner.get_sale(sale_id)
        )
    }

    async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
        gated!(
            self.sched,
            "dynamo.list_sales",
            false,
            catalog_down("dynamo.list_sales"),
            self.inner.list_sales()
        )
    }
}

impl CatalogAdmin for SimCatalog {
    async fn get_record(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(Sale, SaleCounters)>, CatalogError> {
        gated!(
            self.sched,
            "dynamo.get_record",
            false,
            catalog_down("dynamo.get_record"),
            self.inner.get_record(sale_id)
        )
    }

    async fn mark_loaded(&self, sale_id: &SaleId, now_ms: i64) -> Result<bool, CatalogError> {
        gated!(
            self.sched,
            "dynamo.mark_loaded",
            true,
            catalog_down("dynamo.mark_loaded"),
            self.inner.mark_loaded(sale_id, now_ms)
        )
    }

    async fn store_report(&self, sale_id: &SaleId, json: &str) -> Result<(), CatalogError> {
        gated!(
            self.sched,
            "dynamo.store_report",
            true,
            catalog_down("dynamo.store_report"),
            self.inner.store_report(sale_id, json)
        )
    }

    async fn sale_with_report(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<(Sale, Option<String>)>, CatalogError> {
        gated!(
            self.sched,
            "dynamo.sale_with_report",
            false,
            catalog_down("dynamo.sale_with_report"),
            self.inner.sale_with_report(sale_id)
        )
    }
}
