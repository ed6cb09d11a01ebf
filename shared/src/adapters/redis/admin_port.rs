//! [`StockAdmin`] on Redis: each method hands over to the `RedisStock`
//! method of the same name (in `rebuild.rs`, `shards.rs`, `snapshot.rs`,
//! `admin.rs`, `sell_out.rs`, `funnel.rs`), so the operations path can be written against the port.

use super::{RedisRebuild, RedisStock, Survivors};
use crate::domain::ledger::{LedgerPage, LedgerPosition};
use crate::domain::stock_state::{
    Holding, LoadOutcome, PendingTransfer, RedisSnapshot, Returned, SnapshotHead, SnapshotSink,
};
use crate::domain::{OrderId, Sale, SaleId};
use crate::ports::{StockAdmin, StoreError, WriteFailure};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

impl StockAdmin for RedisStock {
    type Survivors = Survivors;
    type Rebuild = RedisRebuild;

    fn write_errors(
        &self,
        sale_id: &SaleId,
        order_ids: &[&OrderId],
    ) -> impl Future<Output = Result<Vec<Option<WriteFailure>>, StoreError>> + Send {
        RedisStock::write_errors(self, sale_id, order_ids)
    }

    fn load_sale(
        &self,
        sale: &Sale,
        version: i64,
    ) -> impl Future<Output = Result<LoadOutcome, StoreError>> + Send {
        RedisStock::load_sale(self, sale, version)
    }

    fn refresh_sale(
        &self,
        sale: &Sale,
        version: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        RedisStock::refresh_sale(self, sale, version)
    }

    fn survivors(
        &self,
        sale: &Sale,
    ) -> impl Future<Output = Result<Option<Survivors>, StoreError>> + Send {
        RedisStock::survivors(self, sale)
    }

    fn begin_rebuild(
        &self,
        sale: &Sale,
        version: i64,
        survivors: Option<Survivors>,
    ) -> impl Future<Output = Result<RedisRebuild, StoreError>> + Send {
        RedisStock::begin_rebuild(self, sale, version, survivors)
    }

    fn stage_rebuild(
        &self,
        rebuild: &mut RedisRebuild,
        page: &LedgerPage,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        RedisStock::stage_rebuild(self, rebuild, page)
    }

    fn commit_rebuild(
        &self,
        rebuild: RedisRebuild,
        at: LedgerPosition,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send {
        RedisStock::commit_rebuild(self, rebuild, at)
    }

    fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
    ) -> impl Future<Output = Result<Returned, StoreError>> + Send {
        RedisStock::return_units(self, sale_id, order_id, user_id, quantity, return_seq)
    }

    fn set_status(&self, sale: &Sale) -> impl Future<Output = Result<u32, StoreError>> + Send {
        RedisStock::set_status(self, sale)
    }

    fn open_loaded(&self, sale: &Sale) -> impl Future<Output = Result<u32, StoreError>> + Send {
        RedisStock::apply_status(self, sale, "OPEN")
    }

    fn clock_ms(&self) -> impl Future<Output = Result<i64, StoreError>> + Send {
        RedisStock::clock_ms(self)
    }

    fn set_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &str,
        read: i64,
        units: i64,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send {
        RedisStock::set_buyer(self, sale_id, user_id, read, units)
    }

    fn set_stock(
        &self,
        sale_id: &SaleId,
        read: i64,
        units: i64,
        ledger_seq: u64,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send {
        RedisStock::set_stock(self, sale_id, read, units, ledger_seq)
    }

    fn complete_transfer(
        &self,
        sale_id: &SaleId,
        transfer: &PendingTransfer,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        RedisStock::complete_transfer(self, sale_id, transfer)
    }

    fn try_lock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        RedisStock::try_lock(self, sale_id, name, token, ttl)
    }

    fn unlock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        RedisStock::unlock(self, sale_id, name, token)
    }

    fn note_loss(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        ttl: Duration,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send {
        RedisStock::note_loss(self, sale_id, now_ms, ttl)
    }

    fn snapshot(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<RedisSnapshot>, StoreError>> + Send {
        RedisStock::snapshot(self, sale_id)
    }

    fn stream_snapshot(
        &self,
        sale_id: &SaleId,
        sink: &mut dyn SnapshotSink,
    ) -> impl Future<Output = Result<Option<SnapshotHead>, StoreError>> + Send {
        RedisStock::stream_snapshot(self, sale_id, sink)
    }

    fn holdings(
        &self,
        sale_id: &SaleId,
        users: &[String],
    ) -> impl Future<Output = Result<HashMap<String, Holding>, StoreError>> + Send {
        RedisStock::holdings(self, sale_id, users)
    }

    fn outcomes(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<BTreeMap<String, u64>, StoreError>> + Send {
        RedisStock::outcomes(self, sale_id)
    }

    fn sold_out_at(
        &self,
        sale: &Sale,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send {
        RedisStock::sold_out_at(self, sale)
    }

    fn funnel(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Vec<crate::ports::FunnelBucket>, StoreError>> + Send {
        RedisStock::funnel(self, sale_id)
    }

    fn order_counts(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<crate::ports::OrderCounts>, StoreError>> + Send {
        RedisStock::order_counts(self, sale_id)
    }

    fn claim_order_count(
        &self,
        sale_id: &SaleId,
        hold: std::time::Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        RedisStock::claim_order_count(self, sale_id, hold)
    }

    fn store_order_counts(
        &self,
        sale_id: &SaleId,
        counts: &crate::ports::OrderCounts,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        RedisStock::store_order_counts(self, sale_id, counts)
    }
}
