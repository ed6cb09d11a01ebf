//! Loading a sale, rebuilding a lost one from the ledger (every shard, or
//! only the lost ones), and giving expired units back.

use super::RedisStock;
use super::keys::{KEY_TTL_AFTER_END_MS, SaleKeys, shard_of_order};
use super::replies::PendingTransfer;
use super::replies::{
    LoadOutcome, SnapshotPart, parse_i64, parse_load_reply, parse_rebuild_reply, protocol,
};
use super::scripts::{LoadPart, LoadSaleArgs, RebuildArgs, RebuildPart, ReturnUnitsArgs, SaleMeta};
use crate::domain::shard_layout::ShardLayout;
use crate::domain::{OrderId, Sale, SaleId};
use crate::ports::StoreError;

/// The shards of a sharded sale as they were before a rebuild read the
/// ledger: `None` for a lost shard. Read first, so that whatever the
/// survivors sell meanwhile is counted twice (once in what they held, once
/// in the lower `available` read after), never not at all: a lost shard
/// rebuilt from it can only get fewer units than the ledger has, never more.
pub struct Survivors {
    parts: Vec<Option<SnapshotPart>>,
    lent: Vec<PendingTransfer>,
}

pub use crate::domain::ledger::{DecidedOrder, HeldUnits, LedgerRead};
pub use crate::domain::stock_state::Returned;

impl RedisStock {
    /// Loads a sale (meta and stock) unless it is loaded; never overwrites
    /// live stock. The keys expire [`KEY_TTL_AFTER_END_MS`] after the end.
    pub async fn load_sale(&self, sale: &Sale, version: i64) -> Result<LoadOutcome, StoreError> {
        self.load(sale, version, None)
            .await?
            .ok_or_else(|| StoreError::Protocol("load_sale.lua answered MISSING".into()))
    }

    /// Refreshes a loaded sale as [`Self::load_sale`] does, unless a later
    /// version of the sale item reached it; false, writing nothing, when its
    /// keys are gone (see `StockAdmin::refresh_sale`).
    pub async fn refresh_sale(&self, sale: &Sale, version: i64) -> Result<bool, StoreError> {
        Ok(self.load(sale, version, Some(version)).await?.is_some())
    }

    async fn load(
        &self,
        sale: &Sale,
        version: i64,
        refresh: Option<i64>,
    ) -> Result<Option<LoadOutcome>, StoreError> {
        let missing = |reply: &[String]| reply.first().is_some_and(|t| t == "MISSING");
        let stale = |reply: &[String]| reply.first().is_some_and(|t| t == "STALE");
        let meta = SaleMeta {
            sale,
            version,
            expire_at_ms: sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS),
        };
        if sale.shards <= 1 {
            // The outcome tally too, so a changed end moves its expiry.
            let reply: Vec<String> = self
                .run(&LoadSaleArgs {
                    keys: &SaleKeys::new(&sale.sale_id),
                    meta: &meta,
                    part: LoadPart::Whole,
                    refresh,
                })
                .await?;
            if missing(&reply) {
                return Ok(None);
            }
            if stale(&reply) {
                return Ok(Some(LoadOutcome::Refreshed { stock: 0 }));
            }
            return parse_load_reply(&reply).map(Some);
        }
        // The directory first: readers that find it look for the shards. Its
        // home table is written when it is created and never after; a load
        // that finds the directory there splits by the table it holds.
        let proposed = self.new_layout(&sale.sale_id, sale.shards).await.encode();
        let first: Vec<String> = self
            .run(&LoadSaleArgs {
                keys: &SaleKeys::new(&sale.sale_id),
                meta: &meta,
                part: LoadPart::Directory { homes: &proposed },
                refresh,
            })
            .await?;
        if missing(&first) {
            return Ok(None);
        }
        if stale(&first) {
            return Ok(Some(LoadOutcome::Refreshed { stock: 0 }));
        }
        let (outcome, homes) = match first.as_slice() {
            [tag, homes] if tag == "LOADED" => (LoadOutcome::Loaded, homes),
            [tag, _, homes] if tag == "REFRESHED" => (LoadOutcome::Refreshed { stock: 0 }, homes),
            other => return Err(protocol(other)),
        };
        let layout = ShardLayout::parse(sale.shards, homes)
            .map_err(|e| StoreError::Protocol(e.to_string()))?;
        let shares = layout.shares(i64::from(sale.total_stock));
        let mut stock = 0u32;
        for (k, share) in (0..sale.shards).zip(shares) {
            let reply: Vec<String> = self
                .run(&LoadSaleArgs {
                    keys: &SaleKeys::shard(&sale.sale_id, k),
                    meta: &meta,
                    part: LoadPart::Shard { stock: share },
                    refresh,
                })
                .await?;
            if missing(&reply) || stale(&reply) {
                // Lost since the directory was read (rebuilt from the
                // ledger by the next prewarm), or refreshed from a later
                // read of the sale.
                continue;
            }
            if let LoadOutcome::Refreshed { stock: s } = parse_load_reply(&reply)? {
                stock = stock.saturating_add(s);
            }
        }
        Ok(Some(match outcome {
            LoadOutcome::Loaded => LoadOutcome::Loaded,
            LoadOutcome::Refreshed { .. } => LoadOutcome::Refreshed { stock },
        }))
    }

    /// What the shards of a sharded sale that kept their keys hold, read
    /// *before* the ledger is read for a rebuild (see [`Survivors`]); `None`
    /// for a sale of one shard.
    pub async fn survivors(&self, sale: &Sale) -> Result<Option<Survivors>, StoreError> {
        if sale.shards <= 1 {
            return Ok(None);
        }
        let (parts, lent) = self.shard_parts(&sale.sale_id, sale.shards).await?;
        Ok(Some(Survivors { parts, lent }))
    }

    /// Loads a sale with its stock and buyers from DynamoDB unless it is
    /// there (`rebuild.lua`). Returns true if this call loaded it.
    ///
    /// `survivors` is what [`Self::survivors`] read before `ledger` was
    /// read (required for a sharded sale: without it nothing is loaded).
    pub async fn rebuild_sale(
        &self,
        sale: &Sale,
        version: i64,
        ledger: &LedgerRead,
        buyers: &[HeldUnits],
        survivors: Option<&Survivors>,
    ) -> Result<bool, StoreError> {
        let stock = ledger.available;
        let expire_at = sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS);
        let meta = SaleMeta {
            sale,
            version,
            expire_at_ms: expire_at,
        };
        let shards = sale.shards.max(1);
        let mut loaded = false;
        let mut layout = ShardLayout::uniform(1);
        if shards > 1 {
            // A directory a rebuild that died half way left behind keeps its
            // home table: the shards already loaded placed buyers by it.
            let proposed = self.new_layout(&sale.sale_id, shards).await.encode();
            let reply: Vec<String> = self
                .run(&RebuildArgs {
                    keys: &SaleKeys::new(&sale.sale_id),
                    meta: &meta,
                    part: RebuildPart::Directory { homes: &proposed },
                })
                .await?;
            loaded |= parse_rebuild_reply(&reply)?;
            let homes = reply.get(1).map_or("", String::as_str);
            layout = ShardLayout::parse(shards, homes)
                .map_err(|e| StoreError::Protocol(e.to_string()))?;
        }
        // Each shard is loaded only if absent, so a rebuild that died half
        // way is finished by the next one.
        let shares = if shards > 1 {
            let Some(survivors) = survivors else {
                return Err(StoreError::Protocol(
                    "a sharded sale is rebuilt only with what its shards held first".into(),
                ));
            };
            self.rebuild_shares(&sale.sale_id, &layout, ledger, buyers, survivors, expire_at)
                .await?
        } else {
            vec![stock]
        };
        for (k, share) in (0..shards).zip(shares) {
            let part = RebuildPart::Group {
                stock: share,
                ledger_seq: ledger.return_seq,
                buyers: buyers
                    .iter()
                    .filter(|b| layout.home(&b.user_id) == k)
                    .collect(),
                decided: ledger
                    .decided
                    .iter()
                    .filter(|m| shard_of_order(&m.order_id).unwrap_or(0) == k)
                    .collect(),
            };
            let reply: Vec<String> = self
                .run(&RebuildArgs {
                    keys: &SaleKeys::of(&sale.sale_id, shards, k),
                    meta: &meta,
                    part,
                })
                .await?;
            loaded |= parse_rebuild_reply(&reply)?;
        }
        Ok(loaded)
    }

    /// The stock each shard of a sharded sale is rebuilt with. With every
    /// shard gone, DynamoDB's `available` split by the home table. With only
    /// some gone (one node of a cluster restarted), the survivors keep
    /// selling what they hold, so the lost shards share only what DynamoDB
    /// has beyond what the survivors still offer: their stock, their
    /// reservations that have no row yet, and units they lent that were not
    /// received (reconcile completes those transfers). Never more: a unit
    /// counted twice would be sold twice. The caller waits for the queue to
    /// drain first, so nothing of the lost shards is still on its way.
    ///
    /// Units a survivor lent to a lost shard are the lost shard's: they are
    /// recorded received on it before it is rebuilt, so reconcile does not
    /// credit them a second time.
    pub(super) async fn rebuild_shares(
        &self,
        sale_id: &SaleId,
        layout: &ShardLayout,
        ledger: &LedgerRead,
        buyers: &[HeldUnits],
        survivors: &Survivors,
        expire_at: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let available = ledger.available;
        let Survivors { parts, lent } = survivors;
        if parts.len() != layout.shards() as usize {
            return Err(StoreError::Protocol("survivors of another layout".into()));
        }
        let lost: Vec<usize> = (0..parts.len()).filter(|k| parts[*k].is_none()).collect();
        if lost.len() == parts.len() {
            return Ok(layout.shares(available));
        }
        for t in lent.iter().filter(|t| lost.contains(&(t.to as usize))) {
            let received = SaleKeys::shard(sale_id, t.to).received;
            let call = async {
                let mut conn = self.conn.get().await?;
                redis::pipe()
                    .cmd("HSETNX")
                    .arg(&received)
                    .arg(&t.id)
                    .arg(t.units)
                    .ignore()
                    .cmd("PEXPIREAT")
                    .arg(&received)
                    .arg(expire_at)
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            };
            self.bounded(call).await?;
        }
        let with_rows: std::collections::HashSet<&str> = buyers
            .iter()
            .flat_map(|b| b.order_ids.iter().map(String::as_str))
            .collect();
        let mut received = std::collections::HashSet::new();
        let mut offered = 0i64;
        for (k, part) in parts.iter().enumerate() {
            let Some(part) = part else { continue };
            offered += part.stock;
            // Expired on a survivor and not given back to it yet: the
            // release (or reconcile) gives them to that shard, whose ledger
            // position is its own; they are not the lost shard's.
            offered += ledger
                .expired
                .iter()
                .filter(|(id, _)| shard_of_order(id).unwrap_or(0) as usize == k)
                .filter(|(id, _)| {
                    part.reservations
                        .get(id)
                        .is_none_or(|r| r.state != "EXPIRED")
                })
                .map(|(_, units)| units)
                .sum::<i64>();
            offered += part
                .reservations
                .iter()
                .filter(|(id, r)| r.state == "QUEUED" && !with_rows.contains(id.as_str()))
                .map(|(_, r)| i64::try_from(r.quantity).unwrap_or(i64::MAX))
                .sum::<i64>();
            received.extend(part.received.iter().cloned());
        }
        // Lent to a survivor and not received yet: still Redis's to sell
        // (reconcile completes the transfer).
        offered += lent
            .iter()
            .filter(|t| !lost.contains(&(t.to as usize)) && !received.contains(&t.id))
            .map(|t| t.units)
            .sum::<i64>();
        let units = (available - offered).max(0);
        let n = i64::try_from(lost.len()).unwrap_or(1);
        let mut shares = vec![0i64; parts.len()];
        for (i, k) in lost.iter().enumerate() {
            let i = i64::try_from(i).unwrap_or(0);
            shares[*k] = units / n + i64::from(i < units % n);
        }
        Ok(shares)
    }

    /// Gives an expired order's units back (`return_units.lua`), once:
    /// `return_seq` is the ledger position of the expiry (the sale item's
    /// `returnSeq` it set); a sale loaded from the ledger at or after that
    /// position has the units already.
    pub async fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
    ) -> Result<Returned, StoreError> {
        let keys = SaleKeys::of_order(sale_id, order_id);
        let reply: Vec<String> = self
            .run(&ReturnUnitsArgs {
                keys: &keys,
                order_id: order_id.as_str(),
                user_id,
                quantity,
                now_ms: crate::clock::now_ms(),
                return_seq,
            })
            .await?;
        match reply
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["RETURNED", stock] => Ok(Returned::Returned {
                stock: parse_i64(stock)?,
            }),
            ["SAME"] => Ok(Returned::Already),
            ["MISSING"] => Ok(Returned::SaleMissing),
            _ => Err(protocol(&reply)),
        }
    }
}
