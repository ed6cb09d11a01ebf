//! Reconcile's read of a sale in bounded, paced steps, and each buyer's
//! holding read at one instant.

use super::RedisStock;
use super::keys::SaleKeys;
use super::replies::{Holding, PendingTransfer};
use super::replies::{
    StoredReservation, SurvivorPart, parse_holding, parse_i64, parse_survivor, parse_transfer,
    protocol,
};
use super::scripts::{HoldingArgs, SnapshotHeadArgs, SurvivorArgs};
use crate::domain::SaleId;
use crate::domain::shard_layout::ShardLayout;
use crate::domain::stock_state::{SnapshotCollector, SnapshotHead, SnapshotSink};
use crate::ports::{StockReading, StoreError};
use std::time::Duration;

pub use crate::domain::stock_state::RedisSnapshot;

/// Entries one `HSCAN` asks for: the most a read of reconcile's touches in
/// one command, whatever the size of the sale. A purchase waits behind at
/// most one such command, so the chunk is the purchase latency reconcile
/// can add; `make bench`'s reconcile row measures it (a larger chunk
/// raised the purchase p99 past the row's bound).
pub const SCAN_CHUNK: usize = 200;

/// A scan starts at most one chunk every this long (at most 100,000
/// entries a second). Reading a
/// million buyers costs Redis about a second of work however it is cut:
/// spread over ten seconds or more it takes a tenth of Redis or less from
/// the purchases instead of all of it for a second, and the reader's own
/// parsing stays as thin.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(2);

/// Reads of a key group's stock and reservations made before they are
/// reported as moving ([`RedisSnapshot::moving`]).
pub(super) const READ_ATTEMPTS: u32 = 3;

/// Buyers [`RedisStock::holdings`] reads at once (one command each).
pub(super) const HOLDING_BATCH: usize = 64;

/// What `snapshot_head.lua` read: equal before and after a chunked read
/// means nothing changed the stock or the reservations in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Head {
    stock: i64,
    total: i64,
    version: String,
    epoch: String,
    /// The ledger position of the last stock reset (`stockSeq`).
    stock_seq: Option<u64>,
    /// Fields of `resv` (and for a shard of `lent`, `received`).
    lens: Vec<usize>,
}

/// What one key group's chunked read keeps (its buyers and reservations
/// went to the sink).
struct GroupRead {
    head: Head,
    lent: std::collections::HashMap<String, String>,
    received: std::collections::HashSet<String>,
    moving: bool,
}

impl RedisStock {
    /// One key group in chunks handed to `sink` as group `group` (see
    /// [`Self::snapshot`]); `None` when its keys are gone.
    async fn read_group(
        &self,
        keys: &SaleKeys,
        group: u32,
        sharded: bool,
        sink: &mut dyn SnapshotSink,
    ) -> Result<Option<GroupRead>, StoreError> {
        self.scan_hash(&keys.buyers, |user, units| {
            sink.buyer(group, user, parse_i64(&units)?);
            Ok(())
        })
        .await?;
        let mut attempt = 1;
        loop {
            let Some(before) = self.head(keys, sharded).await? else {
                return Ok(None);
            };
            if attempt > 1 {
                sink.restart_reservations(group);
            }
            // Entries handed, a repeat counted again: `HSCAN` returns every
            // entry present throughout at least once, so fewer than the
            // hash holds means one was not there throughout.
            let mut scanned = 0usize;
            self.scan_hash(&keys.resv, |id, raw| {
                let stored: StoredReservation =
                    serde_json::from_str(&raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
                sink.reservation(group, id, stored);
                scanned += 1;
                Ok(())
            })
            .await?;
            let mut lent = std::collections::HashMap::new();
            let mut received = std::collections::HashSet::new();
            if sharded {
                self.scan_hash(&keys.lent, |id, value| {
                    lent.insert(id, value);
                    Ok(())
                })
                .await?;
                self.scan_hash(&keys.received, |id, _| {
                    received.insert(id);
                    Ok(())
                })
                .await?;
            }
            let Some(after) = self.head(keys, sharded).await? else {
                return Ok(None);
            };
            let mut seen = vec![scanned];
            if sharded {
                seen.extend([lent.len(), received.len()]);
            }
            let complete = seen.len() == after.lens.len()
                && seen.iter().zip(&after.lens).all(|(seen, len)| seen >= len);
            let still = before == after && complete;
            if still || attempt == READ_ATTEMPTS {
                return Ok(Some(GroupRead {
                    head: after,
                    lent,
                    received,
                    moving: !still,
                }));
            }
            attempt += 1;
        }
    }

    /// A key group's stock, total, version, epoch and hash lengths
    /// (`snapshot_head.lua`, O(1)); `None` when its keys are gone.
    pub(super) async fn head(
        &self,
        keys: &SaleKeys,
        sharded: bool,
    ) -> Result<Option<Head>, StoreError> {
        let reply: Vec<String> = self.run(&SnapshotHeadArgs { keys, sharded }).await?;
        let fields: Vec<&str> = reply.iter().map(String::as_str).collect();
        match fields.as_slice() {
            ["MISSING"] => Ok(None),
            ["OK", stock, total, version, epoch, stock_seq, lens @ ..] => Ok(Some(Head {
                stock: parse_i64(stock)?,
                total: parse_i64(total)?,
                version: (*version).to_owned(),
                epoch: (*epoch).to_owned(),
                stock_seq: match *stock_seq {
                    "" => None,
                    n => Some(n.parse::<u64>().map_err(|_| protocol(&reply))?),
                },
                lens: lens
                    .iter()
                    .map(|n| n.parse::<usize>().map_err(|_| protocol(&reply)))
                    .collect::<Result<_, _>>()?,
            })),
            _ => Err(protocol(&reply)),
        }
    }

    /// Every field of a hash handed to `each`, [`SCAN_CHUNK`] entries a
    /// command, paced by [`SCAN_INTERVAL`]. `HSCAN` returns every entry present
    /// throughout at least once (an entry may come twice; `each` keeps the
    /// later one).
    pub(super) async fn scan_hash(
        &self,
        key: &str,
        mut each: impl FnMut(String, String) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut cursor = String::from("0");
        loop {
            let sent = tokio::time::Instant::now();
            let call = async {
                let mut conn = self.conn.get().await?;
                redis::cmd("HSCAN")
                    .arg(key)
                    .arg(&cursor)
                    .arg("COUNT")
                    .arg(SCAN_CHUNK)
                    .query_async::<(String, Vec<String>)>(&mut conn)
                    .await
            };
            let (next, flat) = self.bounded(call).await?;
            let mut flat = flat.into_iter();
            while let (Some(field), Some(value)) = (flat.next(), flat.next()) {
                each(field, value)?;
            }
            if next == "0" {
                return Ok(());
            }
            cursor = next;
            tokio::time::sleep_until(sent + SCAN_INTERVAL).await;
        }
    }

    /// What a rebuild of lost shards needs of each shard (`None`: that
    /// shard's keys are gone), read atomically per shard, and the transfers
    /// the shards lent (`survivor.lua`, one script per shard: it is the one
    /// read here whose Redis work grows with the sale, and it runs only
    /// after a shard was lost; its reply grows only with the expired and
    /// queued reservations).
    pub(super) async fn survivor_parts(
        &self,
        sale_id: &SaleId,
        shards: u32,
    ) -> Result<(Vec<Option<SurvivorPart>>, Vec<PendingTransfer>), StoreError> {
        let mut parts = Vec::new();
        let mut lent: Vec<PendingTransfer> = Vec::new();
        for k in 0..shards {
            let keys = SaleKeys::of(sale_id, shards, k);
            let reply: redis::Value = self.run(&SurvivorArgs { keys: &keys }).await?;
            parts.push(parse_survivor(reply, k, &mut lent)?);
        }
        Ok((parts, lent))
    }
}

impl StockReading for RedisStock {
    /// Everything Redis holds for a sale, or `None` when it has no keys,
    /// read in commands that each touch at most [`SCAN_CHUNK`] entries, so
    /// purchases run between them whatever the size of the sale (one
    /// script reading the whole sale stalled every purchase for as long
    /// as it ran).
    ///
    /// Per key group: the buyers in chunks (`HSCAN`); then the stock and
    /// the reservations (and a shard's transfers) between two reads of
    /// `snapshot_head.lua`. Every script that changes the stock or a
    /// reservation bumps the meta's `epoch`, except the purchase, which
    /// always lowers the stock (and adds a reservation): so when the stock,
    /// `epoch`, `version` and the hashes' lengths are the same before and
    /// after, and the scan saw as many distinct entries as the hashes
    /// hold, nothing changed in between, and the chunks are the group as
    /// at one instant, as one script would have read it. Otherwise the
    /// read is taken again, up to three times, then reported
    /// as [`RedisSnapshot::moving`]. The buyers need no such bracket: each
    /// count that reconcile judges or repairs is read again together with
    /// that buyer's reservations ([`Self::holdings`]). A sharded sale is
    /// read shard by shard, as before (with transfers recorded on both
    /// sides, a unit in flight is counted once).
    async fn snapshot(&self, sale_id: &SaleId) -> Result<Option<RedisSnapshot>, StoreError> {
        let mut collector = SnapshotCollector::default();
        Ok(self
            .stream_snapshot(sale_id, &mut collector)
            .await?
            .map(|head| collector.into_snapshot(head)))
    }

    /// [`Self::snapshot`]'s read, its buyers and reservations handed to
    /// `sink` as each chunk arrives instead of kept: the reader holds one
    /// chunk and the shards' transfers, whatever the size of the sale.
    async fn stream_snapshot(
        &self,
        sale_id: &SaleId,
        sink: &mut dyn SnapshotSink,
    ) -> Result<Option<SnapshotHead>, StoreError> {
        let Some(shards) = self.shard_count(sale_id).await? else {
            return Ok(None);
        };
        let mut merged = SnapshotHead {
            shards,
            ..SnapshotHead::default()
        };
        let mut lent: Vec<PendingTransfer> = Vec::new();
        let mut received: Vec<std::collections::HashSet<String>> = Vec::new();
        for k in 0..shards {
            let keys = SaleKeys::of(sale_id, shards, k);
            let Some(group) = self.read_group(&keys, k, shards > 1, sink).await? else {
                // A shard without keys: the sale is not whole in Redis.
                return Ok(None);
            };
            merged.moving |= group.moving;
            merged.stock += group.head.stock;
            merged.stock_seq = merged.stock_seq.max(group.head.stock_seq);
            merged.total = group.head.total;
            for (id, value) in &group.lent {
                lent.push(parse_transfer(id, value, k)?);
            }
            received.push(group.received);
        }
        merged.pending_transfers = lent
            .into_iter()
            .filter(|t| {
                received
                    .get(t.to as usize)
                    .is_some_and(|got| !got.contains(&t.id))
            })
            .collect();
        merged.in_transit = merged.pending_transfers.iter().map(|t| t.units).sum();
        Ok(Some(merged))
    }

    /// Each of `users`' count and reservations, read in one step per buyer
    /// (`holding.lua`, bounded by the buyer's own orders) on their home
    /// shard; 64 at a time.
    async fn holdings(
        &self,
        sale_id: &SaleId,
        users: &[String],
    ) -> Result<std::collections::HashMap<String, Holding>, StoreError> {
        let layout = self
            .layout(sale_id)
            .await?
            .unwrap_or_else(|| ShardLayout::uniform(1));
        let mut out = std::collections::HashMap::new();
        for batch in users.chunks(HOLDING_BATCH) {
            let mut reads = tokio::task::JoinSet::new();
            for user in batch {
                let keys = SaleKeys::of(sale_id, layout.shards(), layout.home(user));
                let (store, user) = (self.clone(), user.clone());
                reads.spawn(async move {
                    let reply: Vec<String> = store
                        .run(&HoldingArgs {
                            keys: &keys,
                            user_id: &user,
                        })
                        .await?;
                    Ok::<_, StoreError>((user, parse_holding(&reply)?))
                });
            }
            while let Some(read) = reads.join_next().await {
                let (user, holding) =
                    read.map_err(|e| StoreError::Unavailable(format!("holding read: {e}")))??;
                out.insert(user, holding);
            }
        }
        Ok(out)
    }
}
