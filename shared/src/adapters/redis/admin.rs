//! Operator and repair commands: the outcome tally, compare-and-set
//! repairs of a buyer or the stock, pause and resume, and locks.

use super::RedisStock;
use super::keys::SaleKeys;
use super::replies::parse_i64;
use super::scripts::{
    ReceiveArgs, SetBuyerArgs, SetStatusArgs, SetStockArgs, UnlockArgs, status_of,
};
use crate::domain::shard_layout::ShardLayout;
use crate::domain::stock_state::PendingTransfer;
use crate::domain::{Sale, SaleId};
use crate::ports::{StockRepair, StoreError};
use std::time::Duration;

impl RedisStock {
    /// `set_status.lua` with `status` (LIVE, PAUSED or OPEN) on every key
    /// group of the sale. Returns how many took it.
    pub async fn apply_status(&self, sale: &Sale, status: &str) -> Result<u32, StoreError> {
        let mut groups = vec![SaleKeys::new(&sale.sale_id)];
        if sale.shards > 1 {
            groups.extend((0..sale.shards).map(|k| SaleKeys::shard(&sale.sale_id, k)));
        }
        let mut applied = 0;
        for keys in &groups {
            let took: i64 = self.run(&SetStatusArgs { keys, status }).await?;
            applied += u32::from(took == 1);
        }
        Ok(applied)
    }
}

impl StockRepair for RedisStock {
    /// The sale's purchase answers by outcome (`sale:{S}:outcomes`), as the
    /// execution environments flushed them; empty when none were.
    async fn clock_ms(&self) -> Result<i64, StoreError> {
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("TIME").query_async(&mut conn).await
        };
        let (secs, micros): (i64, i64) = self.bounded(call).await?;
        Ok(secs.saturating_mul(1000) + micros / 1000)
    }

    /// An operator's pause or resume on every key group of the sale that
    /// Redis holds (the directory and each shard: a purchase reads the
    /// status of the group it buys on). Returns how many groups took it.
    async fn set_status(&self, sale: &Sale) -> Result<u32, StoreError> {
        self.apply_status(sale, status_of(sale)).await
    }

    async fn open_loaded(&self, sale: &Sale) -> Result<u32, StoreError> {
        self.apply_status(sale, "OPEN").await
    }

    /// Sets a buyer's count to `units` if it is still `read` (compare and
    /// set: a purchase or release made since the read is never erased).
    /// Returns the count now.
    async fn set_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &str,
        read: i64,
        units: i64,
    ) -> Result<i64, StoreError> {
        let layout = self
            .layout(sale_id)
            .await?
            .unwrap_or_else(|| ShardLayout::uniform(1));
        let keys = SaleKeys::of(sale_id, layout.shards(), layout.home(user_id));
        self.run(&SetBuyerArgs {
            keys: &keys,
            user_id,
            units,
            read,
        })
        .await
    }

    /// Sets the stock of a sale of one shard to `units` if it is still
    /// `read` (compare and set). Returns the stock now; `None` when the sale
    /// has no keys.
    async fn set_stock(
        &self,
        sale_id: &SaleId,
        read: i64,
        units: i64,
        ledger_seq: u64,
    ) -> Result<Option<i64>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let reply: String = self
            .run(&SetStockArgs {
                keys: &keys,
                read,
                units,
                ledger_seq,
            })
            .await?;
        if reply == "MISSING" {
            return Ok(None);
        }
        parse_i64(&reply).map(Some)
    }

    /// A lock with an owner token and an expiry (`SET NX PX`), on the sale's
    /// hash tag. Returns false when someone else holds it.
    async fn try_lock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let key = format!("sale:{{{sale_id}}}:lock:{name}");
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("SET")
                .arg(&key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query_async(&mut conn)
                .await
        };
        let reply: Option<String> = self.bounded(call).await?;
        Ok(reply.is_some())
    }

    /// The first noticed moment of a sale's loss (`SET NX`, then read
    /// back), in the lock namespace so [`RedisStock::unlock`] clears it.
    async fn note_loss(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<i64, StoreError> {
        let key = format!("sale:{{{sale_id}}}:lock:loss");
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::pipe()
                .cmd("SET")
                .arg(&key)
                .arg(now_ms)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .ignore()
                .cmd("GET")
                .arg(&key)
                .query_async::<(Option<String>,)>(&mut conn)
                .await
        };
        let (noted,) = self.bounded(call).await?;
        Ok(noted.and_then(|v| v.parse().ok()).unwrap_or(now_ms))
    }

    /// Releases a lock taken with `token`; someone else's is left alone.
    async fn unlock(&self, sale_id: &SaleId, name: &str, token: &str) -> Result<(), StoreError> {
        let key = format!("sale:{{{sale_id}}}:lock:{name}");
        let _: i64 = self.run(&UnlockArgs { lock: &key, token }).await?;
        Ok(())
    }

    /// Credits a transfer the home shard never received (reconcile's repair
    /// after a borrow died between its two steps). Idempotent.
    async fn complete_transfer(
        &self,
        sale_id: &SaleId,
        transfer: &PendingTransfer,
    ) -> Result<bool, StoreError> {
        let keys = SaleKeys::shard(sale_id, transfer.to);
        let units = transfer.units.to_string();
        let reply: Vec<String> = self
            .run(&ReceiveArgs {
                home: &keys,
                transfer_id: &transfer.id,
                units: &units,
            })
            .await?;
        Ok(reply.first().map(String::as_str) == Some("RECEIVED"))
    }
}
