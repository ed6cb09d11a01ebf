//! Sharded sales: which layout a sale has, the key groups this environment
//! knows, and borrowing units from other shards (`lend.lua`, `receive.lua`).

use super::connection::{Conn, unavailable};
use super::keys::SaleKeys;
use super::replies::{Peeked, PendingTransfer};
use super::replies::{master_of_slot, parse_i64, protocol};
use super::scripts::{LendArgs, ReceiveArgs};
use super::{KEY_CACHE_SALES, Known, RedisStock};
use crate::domain::SaleId;
use crate::domain::borrowing::donors;
use crate::domain::shard_layout::ShardLayout;
use crate::ports::StoreError;
use redis::RedisError;

impl RedisStock {
    /// The key groups of a sale of this layout, cached for the next purchase.
    pub(super) fn remember(&self, sale_id: &SaleId, layout: ShardLayout) -> Known {
        let n = layout.shards();
        let known = Known {
            groups: (0..n).map(|k| SaleKeys::of(sale_id, n, k)).collect(),
            layout,
        };
        if let Ok(mut cache) = self.keys.write() {
            if cache.len() >= KEY_CACHE_SALES {
                cache.clear();
            }
            cache.insert(sale_id.to_string(), known.clone());
        }
        known
    }

    /// The key groups this environment knows for the sale (one group until
    /// Redis says the sale is sharded).
    pub(super) fn known(&self, sale_id: &SaleId) -> Known {
        if let Ok(cache) = self.keys.read()
            && let Some(found) = cache.get(sale_id.as_str())
        {
            return found.clone();
        }
        self.remember(sale_id, ShardLayout::uniform(1))
    }

    /// How many shards Redis holds the sale in, from its directory keys;
    /// `None` when the sale is not there.
    pub async fn shard_count(&self, sale_id: &SaleId) -> Result<Option<u32>, StoreError> {
        Ok(self.layout(sale_id).await?.map(|l| l.shards()))
    }

    /// The sale's shards and homes as its directory says; `None` when the
    /// sale is not in Redis.
    pub async fn layout(&self, sale_id: &SaleId) -> Result<Option<ShardLayout>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        Ok(match self.peek(&keys, "").await? {
            None => None,
            Some(Peeked::View(_)) => Some(ShardLayout::uniform(1)),
            Some(Peeked::Sharded(layout)) => Some(layout),
        })
    }

    /// The home table a new sharded sale gets: on a cluster, one that gives
    /// every master the same share of buyers (from where the shards' slots
    /// sit now); on one node, none (the uniform hash). Balancing is worth a
    /// few commands at load time but never a failed load: if the cluster
    /// will not say where the slots are, the uniform hash it is.
    pub(super) async fn new_layout(&self, sale_id: &SaleId, shards: u32) -> ShardLayout {
        if shards <= 1 || matches!(self.conn, Conn::Single(_)) {
            return ShardLayout::uniform(shards);
        }
        match self.slot_owners(sale_id, shards).await {
            Ok(owners) => ShardLayout::balanced(&owners),
            Err(err) => {
                tracing::warn!(sale_id = %sale_id, error = %err, "cluster topology unknown; homes by the uniform hash");
                ShardLayout::uniform(shards)
            }
        }
    }

    /// The master (`host:port`) serving each shard's slot, from `CLUSTER
    /// KEYSLOT` and `CLUSTER SLOTS`.
    pub(super) async fn slot_owners(
        &self,
        sale_id: &SaleId,
        shards: u32,
    ) -> Result<Vec<String>, StoreError> {
        let call = async {
            let mut conn = self.conn.get().await?;
            let map: redis::Value = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut conn)
                .await?;
            let mut owners = Vec::with_capacity(shards as usize);
            for k in 0..shards {
                let slot: i64 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(&SaleKeys::shard(sale_id, k).meta)
                    .query_async(&mut conn)
                    .await?;
                owners.push(master_of_slot(&map, slot));
            }
            Ok::<_, RedisError>(owners)
        };
        let owners = match tokio::time::timeout(self.timeout * 4, call).await {
            Ok(reply) => reply.map_err(unavailable)?,
            Err(_) => return Err(StoreError::Unavailable("timed out".into())),
        };
        owners
            .into_iter()
            .map(|o| o.ok_or_else(|| StoreError::Protocol("a slot no master serves".into())))
            .collect()
    }

    /// Moves units from other shards to `home` until it has `need` more or
    /// every other shard is empty. Returns how many arrived.
    pub(super) async fn borrow(
        &self,
        groups: &[SaleKeys],
        home: usize,
        need: u64,
    ) -> Result<u64, StoreError> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = groups.len();
        let home_keys = &groups[home];
        let now = crate::clock::now_ms();
        let mut got = 0u64;
        for donor in donors(home, n) {
            let donor = &groups[donor];
            let id = format!(
                "t{now}-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            let lent: Vec<String> = self
                .run(&LendArgs {
                    donor,
                    transfer_id: &id,
                    need: need - got,
                    home,
                    now_ms: now,
                })
                .await?;
            let units = match lent.as_slice() {
                [tag, units] if tag == "LENT" => units.clone(),
                [tag] if tag == "SHORT" || tag == "MISSING" => continue,
                other => return Err(protocol(other)),
            };
            // If this call dies here the units are in `lent` and not in
            // `received`: reconcile finishes the transfer.
            let received: Vec<String> = self
                .run(&ReceiveArgs {
                    home: home_keys,
                    transfer_id: &id,
                    units: &units,
                })
                .await?;
            if received.first().map(String::as_str) == Some("RECEIVED") {
                got += u64::try_from(parse_i64(&units)?).unwrap_or(0);
            }
            if got >= need {
                break;
            }
        }
        Ok(got)
    }

    /// Credits a transfer the home shard never received (reconcile's repair
    /// after a borrow died between its two steps). Idempotent.
    pub async fn complete_transfer(
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
