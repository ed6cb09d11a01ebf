//! Loading a sale, rebuilding a lost one from the ledger (every shard, or
//! only the lost ones), and giving expired units back.

use super::RedisStock;
use super::keys::{KEY_TTL_AFTER_END_MS, SaleKeys, StagedKeys, shard_of_order};
use super::replies::PendingTransfer;
use super::replies::{
    LoadOutcome, SurvivorPart, parse_i64, parse_load_reply, parse_rebuild_reply, parse_u64,
    protocol,
};
use super::scripts::{
    LoadPart, LoadSaleArgs, RebuildArgs, RebuildPart, RebuildStageArgs, ReturnUnitsArgs, SaleMeta,
};
use crate::domain::shard_layout::ShardLayout;
use crate::domain::{OrderId, Sale, SaleId};
use crate::ports::{StockLoading, StoreError};

/// The shards of a sharded sale as they were before a rebuild read the
/// ledger: `None` for a lost shard. Read first, so that whatever the
/// survivors sell meanwhile is counted twice (once in what they held, once
/// in the lower `available` read after), never not at all: a lost shard
/// rebuilt from it can only get fewer units than the ledger has, never more.
pub struct Survivors {
    parts: Vec<Option<SurvivorPart>>,
    lent: Vec<PendingTransfer>,
}

impl Survivors {
    /// Entries (expired orders' digests, queued reservations, transfers)
    /// held in memory through the rebuild: what a partly lost sale's
    /// rebuild costs in memory, besides the pages.
    pub fn held_entries(&self) -> usize {
        self.parts
            .iter()
            .flatten()
            .map(|p| p.expired.len() + p.queued.len() + p.received.len())
            .sum::<usize>()
            + self.lent.len()
    }
}

pub use crate::domain::ledger::{DecidedOrder, LedgerPage, LedgerPosition};
pub use crate::domain::stock_state::Returned;

/// Orders per `rebuild_stage.lua` call: the script's time, not the sale's
/// size, bounds how long a rebuild holds the Redis node.
pub const STAGE_CHUNK: usize = 250;

/// How long a staged rebuild's keys live without a commit: a rebuild that
/// dies half way leaves nothing behind for long (the next run stages
/// afresh under its own token).
const STAGED_TTL: std::time::Duration = std::time::Duration::from_secs(3_600);

/// A rebuild staged page by page (`StockAdmin::begin_rebuild`), with what
/// the pages told it that the lost shards' shares need.
pub struct RedisRebuild {
    sale: Sale,
    version: i64,
    /// Names the staged keys: two rebuilds never add into each other's.
    token: String,
    layout: ShardLayout,
    /// The home table the groups are staged by (a sharded sale's).
    homes: String,
    survivors: Option<Survivors>,
    /// Per shard: units of `EXPIRED` rows made there that a surviving
    /// shard has not been given back yet.
    owed: Vec<i64>,
    /// Survivors' `QUEUED` reservations no page has shown a written row of
    /// (id, units).
    queued_without_row: std::collections::HashMap<String, i64>,
}

impl RedisRebuild {
    fn meta(&self) -> SaleMeta<'_> {
        SaleMeta {
            sale: &self.sale,
            version: self.version,
            expire_at_ms: self.sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS),
        }
    }

    /// What a page tells the shares of a partial loss: expiries a survivor
    /// is owed, and its queued reservations whose rows are written.
    fn account(&mut self, page: &LedgerPage) {
        let Some(survivors) = &self.survivors else {
            return;
        };
        for (id, units) in &page.expired {
            let k = shard_of_order(id).unwrap_or(0) as usize;
            let Some(Some(part)) = survivors.parts.get(k) else {
                continue;
            };
            if !part.expired.contains(id)
                && let Some(owed) = self.owed.get_mut(k)
            {
                *owed += units;
            }
        }
        for held in page.held() {
            self.queued_without_row.remove(&held.order_id);
        }
    }
}

/// An order as one stage call sends it to one group: its reservation if
/// the group made it, its units if the group is its buyer's home.
#[derive(Clone, Copy)]
pub(super) struct StagedOrder<'a> {
    pub order: &'a DecidedOrder,
    pub reservation: bool,
    pub held: bool,
}

/// A rebuild's own name: random, so a retried or concurrent rebuild never
/// stages into another's keys.
fn rebuild_token() -> String {
    let mut bytes = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        // No randomness: the clock still tells two runs apart.
        return format!("t{}", crate::clock::now_ms());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl RedisStock {
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
    async fn rebuild_shares(
        &self,
        rebuild: &RedisRebuild,
        survivors: &Survivors,
        available: i64,
        expire_at: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let sale_id = &rebuild.sale.sale_id;
        let Survivors { parts, lent } = survivors;
        let lost: Vec<usize> = (0..parts.len()).filter(|k| parts[*k].is_none()).collect();
        if lost.len() == parts.len() {
            return Ok(rebuild.layout.shares(available));
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
        let mut received = std::collections::HashSet::new();
        // Expired on a survivor and not given back to it yet: the release
        // (or reconcile) gives them to that shard, whose ledger position is
        // its own; they are not the lost shard's.
        let mut offered: i64 = rebuild.owed.iter().sum();
        // Queued on a survivor with no row: counted once, whichever shard.
        offered += rebuild.queued_without_row.values().sum::<i64>();
        for part in parts.iter().flatten() {
            offered += part.stock;
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
}

impl StockLoading for RedisStock {
    type Survivors = Survivors;
    type Rebuild = RedisRebuild;

    /// Loads a sale (meta and stock) unless it is loaded; never overwrites
    /// live stock. The keys expire [`KEY_TTL_AFTER_END_MS`] after the end.
    async fn load_sale(&self, sale: &Sale, version: i64) -> Result<LoadOutcome, StoreError> {
        self.load(sale, version, None)
            .await?
            .ok_or_else(|| StoreError::Protocol("load_sale.lua answered MISSING".into()))
    }

    /// Refreshes a loaded sale as [`Self::load_sale`] does, unless a later
    /// version of the sale item reached it; false, writing nothing, when its
    /// keys are gone (see `StockAdmin::refresh_sale`).
    async fn refresh_sale(&self, sale: &Sale, version: i64) -> Result<bool, StoreError> {
        Ok(self.load(sale, version, Some(version)).await?.is_some())
    }

    /// What the shards of a sharded sale that kept their keys hold, read
    /// *before* the ledger is read for a rebuild (see [`Survivors`]); `None`
    /// for a sale of one shard.
    async fn survivors(&self, sale: &Sale) -> Result<Option<Survivors>, StoreError> {
        if sale.shards <= 1 {
            return Ok(None);
        }
        let (parts, lent) = self.survivor_parts(&sale.sale_id, sale.shards).await?;
        Ok(Some(Survivors { parts, lent }))
    }

    /// Starts a rebuild of a lost sale from the ledger (see
    /// `StockAdmin::begin_rebuild`). A sharded sale's directory is loaded
    /// here, unless it is there: the groups are staged by its home table.
    async fn begin_rebuild(
        &self,
        sale: &Sale,
        version: i64,
        survivors: Option<Survivors>,
    ) -> Result<RedisRebuild, StoreError> {
        let shards = sale.shards.max(1);
        let mut rebuild = RedisRebuild {
            sale: sale.clone(),
            version,
            token: rebuild_token(),
            layout: ShardLayout::uniform(1),
            homes: String::new(),
            owed: vec![0; shards as usize],
            queued_without_row: std::collections::HashMap::new(),
            survivors: None,
        };
        if shards <= 1 {
            return Ok(rebuild);
        }
        let Some(survivors) = survivors else {
            return Err(StoreError::Protocol(
                "a sharded sale is rebuilt only with what its shards held first".into(),
            ));
        };
        if survivors.parts.len() != shards as usize {
            return Err(StoreError::Protocol("survivors of another layout".into()));
        }
        // A directory a rebuild that died half way left behind keeps its
        // home table: the shards already loaded placed buyers by it. The
        // directory itself is written at the commit, with the groups: one
        // written now would stand alone while the pages are staged, and an
        // operator's command in that time would reach it but no group.
        let directory = SaleKeys::new(&sale.sale_id).meta;
        let kept: Option<String> = self
            .bounded(async {
                let mut conn = self.conn.get().await?;
                redis::cmd("HGET")
                    .arg(&directory)
                    .arg("homes")
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        let homes = match kept {
            Some(homes) => homes,
            None => self.new_layout(&sale.sale_id, shards).await.encode(),
        };
        rebuild.layout =
            ShardLayout::parse(shards, &homes).map_err(|e| StoreError::Protocol(e.to_string()))?;
        rebuild.homes = homes;
        // A survivor's reservation still QUEUED is Redis's to sell until
        // its order is written; the pages strike off those that are.
        for part in survivors.parts.iter().flatten() {
            rebuild
                .queued_without_row
                .extend(part.queued.iter().cloned());
        }
        rebuild.survivors = Some(survivors);
        Ok(rebuild)
    }

    /// Stages one page of the ledger (`rebuild_stage.lua`): each order's
    /// reservation on the group that made it, each held unit on its
    /// buyer's home group, [`STAGE_CHUNK`] orders a call.
    async fn stage_rebuild(
        &self,
        rebuild: &mut RedisRebuild,
        page: &LedgerPage,
    ) -> Result<(), StoreError> {
        rebuild.account(page);
        let shards = rebuild.sale.shards.max(1);
        let shard = |id: &str| {
            if shards > 1 {
                shard_of_order(id).unwrap_or(0)
            } else {
                0
            }
        };
        let expire_ms = u64::try_from(STAGED_TTL.as_millis()).unwrap_or(u64::MAX);
        for k in 0..shards {
            let mut entries: Vec<StagedOrder<'_>> = Vec::new();
            for d in &page.decided {
                let holds = d.state == "WRITTEN";
                let here = shard(&d.order_id) == k;
                let home = holds && rebuild.layout.home(&d.user_id) == k;
                if here || home {
                    entries.push(StagedOrder {
                        order: d,
                        reservation: here,
                        held: home,
                    });
                }
            }
            let group = SaleKeys::of(&rebuild.sale.sale_id, shards, k);
            let staged = StagedKeys::of(&group, &rebuild.token);
            for chunk in entries.chunks(STAGE_CHUNK) {
                let _: i64 = self
                    .run(&RebuildStageArgs {
                        staged: &staged,
                        ttl_ms: expire_ms,
                        total: rebuild.sale.total_stock,
                        orders: chunk.to_vec(),
                    })
                    .await?;
            }
        }
        Ok(())
    }

    /// Loads each group of the staged sale unless it is there
    /// (`rebuild.lua`, which renames the staged keys into place): the
    /// stock of `at`, split by [`Self::rebuild_shares`] for a sharded
    /// sale. Each group is loaded only if absent, so a rebuild that died
    /// half way is finished by the next one. The buyers of the groups this
    /// call loaded, if it loaded any; `None` if all were there.
    async fn commit_rebuild(
        &self,
        rebuild: RedisRebuild,
        at: LedgerPosition,
    ) -> Result<Option<u64>, StoreError> {
        let shards = rebuild.sale.shards.max(1);
        let expire_at = rebuild.sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS);
        let shares = match &rebuild.survivors {
            Some(survivors) if shards > 1 => {
                self.rebuild_shares(&rebuild, survivors, at.available, expire_at)
                    .await?
            }
            _ => vec![at.available],
        };
        let meta = rebuild.meta();
        let mut loaded = false;
        let mut buyers = 0u64;
        if shards > 1 {
            let reply: Vec<String> = self
                .run(&RebuildArgs {
                    keys: &SaleKeys::new(&rebuild.sale.sale_id),
                    meta: &meta,
                    part: RebuildPart::Directory {
                        homes: &rebuild.homes,
                    },
                })
                .await?;
            loaded = parse_rebuild_reply(&reply)?;
            if reply.get(1).map_or("", String::as_str) != rebuild.homes {
                // Another rebuild's directory came first with another home
                // table: the buyers were staged by this one's. The next run
                // stages again by the directory's.
                return Err(StoreError::Protocol(
                    "the sale's home table changed while it was staged".into(),
                ));
            }
        }
        for (k, share) in (0..shards).zip(shares) {
            let group = SaleKeys::of(&rebuild.sale.sale_id, shards, k);
            let staged = StagedKeys::of(&group, &rebuild.token);
            let reply: Vec<String> = self
                .run(&RebuildArgs {
                    keys: &group,
                    meta: &meta,
                    part: RebuildPart::Group {
                        stock: share,
                        ledger_seq: at.return_seq,
                        staged: &staged,
                    },
                })
                .await?;
            if parse_rebuild_reply(&reply)? {
                loaded = true;
                buyers += reply.get(1).map_or(Ok(0), |n| parse_u64(n))?;
            }
        }
        Ok(loaded.then_some(buyers))
    }

    /// Gives an expired order's units back (`return_units.lua`), once:
    /// `return_seq` is the ledger position of the expiry (the sale item's
    /// `returnSeq` it set); a sale loaded from the ledger at or after that
    /// position has the units already.
    async fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
        to_stock: u32,
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
                to_stock,
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
