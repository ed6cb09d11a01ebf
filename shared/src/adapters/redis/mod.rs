//! The stock store on Redis: every decision is one Lua script, run by
//! EVALSHA with a fallback to loading the script on `NOSCRIPT` (so a
//! `SCRIPT FLUSH` or a restarted server costs one extra round trip, once).
//!
//! Keys (one hash tag per sale, so a script touches one slot):
//! `sale:{S}:meta`, `sale:{S}:stock`, `sale:{S}:buyers`, `sale:{S}:resv` as the
//! design fixes them, plus `sale:{S}:userorders` (userId -> the caller's order
//! ids) so a `409 LIMIT_EXCEEDED` can name them without a scan.
//!
//! User ids are the identity provider's `sub` as issued and may hold any
//! character but a control one (`{`, `}`, `,`, `:`, `|`, Unicode): they are
//! never part of a key name (a brace there would change the key's hash tag
//! and so its cluster slot), only hash fields, script arguments and JSON
//! strings, all binary-safe. Keys are built from sale ids and shard
//! numbers alone.
//!
//! Shards: a sale with `shards = N > 1` keeps a directory under `{S}` (meta
//! only) and N full key groups under `{S:0}` .. `{S:N-1}`, each with its share
//! of the stock and its own buyers, reservations and rate buckets. A buyer
//! always buys on their home shard ([`home_shard`], a stable hash of the user
//! id), so the per-user limit is exact. When the home shard runs out it
//! borrows: `lend.lua` on another shard moves units out and records the
//! transfer, `receive.lua` credits the home shard once; reconcile completes a
//! transfer whose second step never ran. Order ids end in `-s<k>` so every
//! later step (write, release, expiry) finds its shard from the id alone.
//!
//! Reconcile reads a sale in bounded steps ([`RedisStock::snapshot`]:
//! `HSCAN` chunks between two `snapshot_head.lua` reads), so a script that
//! changes a key group's stock or reservations must bump its meta `epoch`
//! (every one does but `purchase.lua`, which always lowers the stock); a
//! new one that does not would let a read that it ran through pass as one
//! instant.

pub use crate::domain::shard_layout::ShardLayout;
use crate::domain::{IdempotencyKey, OrderId, Quantity, Sale, SaleId, UserId};
use crate::ports::{
    ReleaseOutcome, Reservation, ReserveOutcome, ReserveRequest, StockStore, StoreError,
};
use crate::ports::{ReservationRecord, Resolution, StockView};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Script};
use serde::Deserialize;
use std::sync::LazyLock;
use std::time::Duration;

/// The purchase script as it runs: the rate limiter's and the keyed
/// filter's functions, then the decision. One EVALSHA, one round trip.
pub const PURCHASE_SOURCE: &str = concat!(
    include_str!("../../../lua/ratelimit.lua"),
    include_str!("../../../lua/keyed.lua"),
    include_str!("../../../lua/purchase.lua")
);
static PURCHASE: LazyLock<Script> = LazyLock::new(|| Script::new(PURCHASE_SOURCE));
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/release.lua")
    ))
});
static RESOLVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/resolve.lua")
    ))
});
static PEEK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/peek.lua")));
static REBUILD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/keyed.lua"),
        include_str!("../../../lua/rebuild.lua")
    ))
});
static KEYED_FILTER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/keyed_filter.lua")));
static RETURN_UNITS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/holdings.lua"),
        include_str!("../../../lua/return_units.lua")
    ))
});
static SNAPSHOT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/snapshot.lua")));
static SNAPSHOT_HEAD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/snapshot_head.lua")));
static HOLDING: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/holding.lua")));
static SET_BUYER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/set_buyer.lua")));
static BUYER_ORDERS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/buyer_orders.lua")));
static SET_STATUS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/set_status.lua")));
static SET_STOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/set_stock.lua")));
static UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/unlock.lua")));
static LOAD_SALE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/load_sale.lua")));
static LEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/lend.lua")));
static RECEIVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/receive.lua")));
static OUTCOMES: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/outcomes.lua")));

/// A purchase's request id for `purchase.lua` (ARGV[12]): 31 hex digits,
/// a random 64-bit prefix drawn once per execution environment and a
/// 60-bit counter. Order ids without an Idempotency-Key are made of it, so
/// they never repeat: not after a rebuild, not after a failover that rolled
/// Redis back (a sequence kept in Redis would), and not between
/// environments.
fn request_id() -> String {
    // std's `RandomState` is keyed from the operating system's random
    // source once per thread: random enough that environments never share
    // a prefix, and cheap on a cold start (aws-lc's generator took ~30 ms to
    // seed on the first purchase, `make bench`'s cold-start row).
    static PREFIX: LazyLock<u64> = LazyLock::new(|| {
        use std::hash::BuildHasher;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()))
    });
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed) & ((1 << 60) - 1);
    format!("{:016x}{n:015x}", *PREFIX)
}

/// The `status` field of a sale's meta: an operator's pause is kept by
/// every load, refresh and rebuild.
fn status_of(sale: &Sale) -> &'static str {
    if sale.paused { "PAUSED" } else { "LIVE" }
}

/// Keys outlive the sale's end by this much, so late reconciliation and
/// order-status reads still find reservations.
pub const KEY_TTL_AFTER_END_MS: i64 = 60 * 60 * 1000;

/// The Redis key names of one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleKeys {
    pub meta: String,
    pub stock: String,
    pub buyers: String,
    pub resv: String,
    pub user_orders: String,
    /// Nonces of gate passes already used (gated sales only).
    pub gate_used: String,
    /// The rate limiter's token buckets.
    pub rate_limit: String,
    /// The filter of reservations made under an Idempotency-Key
    /// (`keyed.lua`).
    pub keyed: String,
    /// Transfers this shard lent to others (sharded sales).
    pub lent: String,
    /// Transfers this shard received (sharded sales).
    pub received: String,
    /// Purchase answers by outcome, for the operator dashboard. Used on
    /// the sale's own tag only (a sharded sale's directory), never per shard.
    pub outcomes: String,
    /// What the purchase script appends to the order ids it makes here.
    pub id_suffix: String,
}

impl SaleKeys {
    /// The keys of a sale of one shard, and the directory of a sharded one.
    pub fn new(sale_id: &SaleId) -> Self {
        Self::tagged(sale_id.as_str(), String::new())
    }

    /// The key group of shard `k` of a sale with more than one shard.
    pub fn shard(sale_id: &SaleId, k: u32) -> Self {
        Self::tagged(&format!("{sale_id}:{k}"), format!("-s{k}"))
    }

    /// Shard `k`'s keys of a sale of `shards`: the plain keys when it has one.
    pub fn of(sale_id: &SaleId, shards: u32, k: u32) -> Self {
        if shards <= 1 {
            Self::new(sale_id)
        } else {
            Self::shard(sale_id, k)
        }
    }

    /// The keys holding an order's reservation, from its id.
    pub fn of_order(sale_id: &SaleId, order_id: &OrderId) -> Self {
        match shard_of_order(order_id.as_str()) {
            Some(k) => Self::shard(sale_id, k),
            None => Self::new(sale_id),
        }
    }

    fn tagged(tag: &str, id_suffix: String) -> Self {
        let key = |suffix: &str| format!("sale:{{{tag}}}:{suffix}");
        Self {
            meta: key("meta"),
            stock: key("stock"),
            buyers: key("buyers"),
            resv: key("resv"),
            user_orders: key("userorders"),
            gate_used: key("gateused"),
            rate_limit: key("ratelimit"),
            keyed: key("keyed"),
            lent: key("lent"),
            received: key("received"),
            outcomes: key("outcomes"),
            id_suffix,
        }
    }

    /// The keys of the purchase script (and of a refresh, which moves
    /// every key's expiry).
    fn with_gate(&self) -> [&str; 7] {
        [
            &self.meta,
            &self.stock,
            &self.buyers,
            &self.resv,
            &self.user_orders,
            &self.gate_used,
            &self.keyed,
        ]
    }

    fn all(&self) -> [&str; 5] {
        [
            &self.meta,
            &self.stock,
            &self.buyers,
            &self.resv,
            &self.user_orders,
        ]
    }
}

/// A buyer's home shard under the uniform hash (FNV-1a of the user id,
/// modulo the shard count): every sale on one Redis node. On a cluster the
/// sale's directory may carry a home table instead ([`ShardLayout`]).
pub fn home_shard(user_id: &str, shards: u32) -> u32 {
    ShardLayout::uniform(shards).home(user_id)
}

/// The shard an order id names: ids made on shard k end in `-s<k>` after the
/// script's 32 characters; ids of one-shard sales carry no suffix.
pub fn shard_of_order(order_id: &str) -> Option<u32> {
    let (head, tail) = order_id.split_at_checked(32)?;
    if !(head.starts_with('n') || head.starts_with('k')) {
        return None;
    }
    tail.strip_prefix("-s")?.parse().ok()
}

/// A reservation as the purchase script stores it (the value in `resv`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredReservation {
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: String,
    pub state: String,
}

/// What `load_sale` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    Loaded,
    /// Already there: stock untouched, window and expiry refreshed.
    Refreshed {
        stock: u32,
    },
}

pub use crate::config::RateLimits;

#[derive(Clone)]
pub struct RedisStock {
    conn: Conn,
    timeout: Duration,
    /// The limits as script arguments, formatted once, not per purchase.
    limit_args: std::sync::Arc<[String; 4]>,
    limiter_failures: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Key names per sale and shard, built once per environment instead of
    /// seven `format!`s per purchase.
    keys: std::sync::Arc<std::sync::RwLock<KeyCache>>,
    /// Sale id -> until when borrowing is not tried again: every other
    /// shard was found empty (the same bound as the sold-out flag).
    dry: std::sync::Arc<std::sync::RwLock<std::collections::HashMap<String, std::time::Instant>>>,
    /// Key group's `keyed` key -> its filter and when it was read (before
    /// the read was sent).
    keyed: std::sync::Arc<std::sync::RwLock<KeyedCache>>,
    /// Held while a filter is read: concurrent keyed requests after a
    /// sell-out wait for one read instead of each making their own.
    keyed_read: std::sync::Arc<tokio::sync::Mutex<()>>,
}

type KeyedCache = std::collections::HashMap<
    String,
    (
        std::time::Instant,
        std::sync::Arc<crate::domain::keyed_filter::KeyedFilter>,
    ),
>;

type KeyCache = std::collections::HashMap<String, Known>;

/// What an environment knows of a sale's layout: its key groups and whose
/// home is where. Cheap to clone (two `Arc`s).
#[derive(Clone)]
struct Known {
    groups: std::sync::Arc<[SaleKeys]>,
    layout: ShardLayout,
}

/// After a borrow found every other shard empty, this environment does not
/// try again for this long (the bound a unit back on another shard may wait
/// for a buyer whose home shard is empty; the sold-out flag's bound too).
pub const DRY_SHARDS: Duration = Duration::from_millis(500);

/// Borrow rounds one purchase may take before it gives up with a 503.
const MAX_BORROW_ROUNDS: u32 = 32;

/// Past this many sales the key cache starts over (it only saves formatting).
const KEY_CACHE_SALES: usize = 4_096;

impl RedisStock {
    /// Builds a lazily connecting, auto-reconnecting multiplexed connection:
    /// one per execution environment, shared by all requests. Lazy so a
    /// function starts (and answers 503) even while Redis is down.
    ///
    /// `url` is `redis://[[user]:password@]host:port` or, for TLS (ElastiCache
    /// in-transit encryption), `rediss://...`; see [`client`]. With
    /// `?cluster=true` it names one node (or ElastiCache's configuration
    /// endpoint) of a Redis Cluster, and the store routes every script to the
    /// master of its keys' slot (cluster-async: one multiplexed connection
    /// per master, made on first use).
    pub fn connect_lazy(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let conn = match cluster_seed(url) {
            Some(seeds) => {
                let nodes = seeds
                    .iter()
                    .map(|node| client(node).map(|c| c.get_connection_info().clone()))
                    .collect::<Result<Vec<_>, _>>()?;
                let cluster = redis::cluster::ClusterClientBuilder::new(nodes)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(1)
                    .build()
                    .map_err(|err| {
                        StoreError::Unavailable(format!("REDIS_URL names no usable cluster: {err}"))
                    })?;
                Conn::Cluster(std::sync::Arc::new(LazyCluster {
                    client: cluster,
                    conn: tokio::sync::OnceCell::new(),
                }))
            }
            None => {
                let client = client(url)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(100));
                Conn::Single(
                    ConnectionManager::new_lazy_with_config(client, config).map_err(unavailable)?,
                )
            }
        };
        Ok(Self {
            conn,
            timeout,
            limit_args: limit_args(RateLimits::default()),
            limiter_failures: std::sync::Arc::default(),
            keys: std::sync::Arc::default(),
            dry: std::sync::Arc::default(),
            keyed: std::sync::Arc::default(),
            keyed_read: std::sync::Arc::default(),
        })
    }

    /// The same store with other rate-limit defaults.
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.limit_args = limit_args(limits);
        self
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, StoreError> {
        // EVALSHA built as one command (one buffer) rather than through a
        // script invocation, which copies every key and argument into its
        // own allocation first: this is the hot path. On NOSCRIPT (a restart,
        // `SCRIPT FLUSH`) the script is loaded and the call made again, once.
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        // The connection has its own response timeout; this outer bound also
        // covers reconnect attempts, so a purchase never waits past it twice.
        let call = async {
            let mut conn = self.conn.get().await?;
            match cmd.query_async(&mut conn).await {
                Err(err)
                    if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    script.load_async(&mut conn).await?;
                    cmd.query_async(&mut conn).await
                }
                reply => reply,
            }
        };
        match tokio::time::timeout(self.timeout * 2, call).await {
            Ok(reply) => reply.map_err(unavailable),
            Err(_) => Err(StoreError::Unavailable("timed out".into())),
        }
    }

    /// Loads a sale (meta and stock) unless it is loaded; never overwrites
    /// live stock. The keys expire [`KEY_TTL_AFTER_END_MS`] after the end.
    pub async fn load_sale(&self, sale: &Sale, version: i64) -> Result<LoadOutcome, StoreError> {
        let expire_at = sale.end_ms.saturating_add(KEY_TTL_AFTER_END_MS);
        let args = [
            sale.total_stock.to_string(),
            sale.start_ms.to_string(),
            sale.end_ms.to_string(),
            sale.per_user_limit.to_string(),
            sale.shards.to_string(),
            String::from(status_of(sale)),
            version.to_string(),
            expire_at.to_string(),
            String::from(if sale.gate { "1" } else { "0" }),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if sale.shards <= 1 {
            // The outcome tally too, so a changed end moves its expiry.
            let keys = SaleKeys::new(&sale.sale_id);
            let mut names = keys.with_gate().to_vec();
            names.push(&keys.outcomes);
            let reply: Vec<String> = self.run(&LOAD_SALE, &names, &args).await?;
            return parse_load_reply(&reply);
        }
        // The directory first: readers that find it look for the shards. Its
        // home table is written when it is created and never after; a load
        // that finds the directory there splits by the table it holds.
        let proposed = self.new_layout(&sale.sale_id, sale.shards).await.encode();
        let directory = SaleKeys::new(&sale.sale_id);
        let mut head = args.clone();
        head.extend(["0", "1", proposed.as_str()]);
        let first: Vec<String> = self
            .run(&LOAD_SALE, &[&directory.meta, &directory.outcomes], &head)
            .await?;
        let (outcome, homes) = match first.as_slice() {
            [tag, homes] if tag == "LOADED" => (LoadOutcome::Loaded, homes),
            [tag, _, homes] if tag == "REFRESHED" => (LoadOutcome::Refreshed { stock: 0 }, homes),
            other => return Err(protocol(other)),
        };
        let layout = ShardLayout::parse(sale.shards, homes)
            .map_err(|e| StoreError::Protocol(e.to_string()))?;
        let shares: Vec<String> = layout
            .shares(i64::from(sale.total_stock))
            .iter()
            .map(i64::to_string)
            .collect();
        let mut stock = 0u32;
        for (k, share) in (0..sale.shards).zip(&shares) {
            let mut group_args = args.clone();
            group_args.extend([share.as_str(), "0"]);
            let keys = SaleKeys::shard(&sale.sale_id, k);
            let reply: Vec<String> = self.run(&LOAD_SALE, &keys.with_gate(), &group_args).await?;
            if let LoadOutcome::Refreshed { stock: s } = parse_load_reply(&reply)? {
                stock = stock.saturating_add(s);
            }
        }
        Ok(match outcome {
            LoadOutcome::Loaded => LoadOutcome::Loaded,
            LoadOutcome::Refreshed { .. } => LoadOutcome::Refreshed { stock },
        })
    }

    /// The key groups of a sale of this layout, cached for the next purchase.
    fn remember(&self, sale_id: &SaleId, layout: ShardLayout) -> Known {
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
    fn known(&self, sale_id: &SaleId) -> Known {
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
    async fn new_layout(&self, sale_id: &SaleId, shards: u32) -> ShardLayout {
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
    async fn slot_owners(&self, sale_id: &SaleId, shards: u32) -> Result<Vec<String>, StoreError> {
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

    /// Whether this purchase may look at the other shards: yes unless they
    /// were found empty within [`DRY_SHARDS`]; when that lapses, the first
    /// purchase to notice claims the look (pushing the mark forward).
    fn may_borrow(&self, sale_id: &SaleId, now: std::time::Instant) -> bool {
        let marked = self
            .dry
            .read()
            .ok()
            .and_then(|dry| dry.get(sale_id.as_str()).copied());
        match marked {
            None => true,
            Some(until) if now < until => false,
            Some(_) => match self.dry.write() {
                Ok(mut dry) => match dry.get_mut(sale_id.as_str()) {
                    Some(until) if *until <= now => {
                        *until = now + DRY_SHARDS;
                        true
                    }
                    Some(_) => false,
                    None => true,
                },
                Err(_) => true,
            },
        }
    }

    /// Moves units from other shards to `home` until it has `need` more or
    /// every other shard is empty. Returns how many arrived.
    async fn borrow(&self, groups: &[SaleKeys], home: usize, need: u64) -> Result<u64, StoreError> {
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = groups.len();
        let home_keys = &groups[home];
        let (home_arg, now) = (home.to_string(), crate::clock::now_ms().to_string());
        let mut got = 0u64;
        for step in 1..n {
            let donor = &groups[(home + step) % n];
            let id = format!(
                "t{now}-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            let want = (need - got).to_string();
            let lent: Vec<String> = self
                .run(
                    &LEND,
                    &[&donor.meta, &donor.stock, &donor.lent],
                    &[&id, &want, &home_arg, &now],
                )
                .await?;
            let units = match lent.as_slice() {
                [tag, units] if tag == "LENT" => units.clone(),
                [tag] if tag == "SHORT" || tag == "MISSING" => continue,
                other => return Err(protocol(other)),
            };
            // If this call dies here the units are in `lent` and not in
            // `received`: reconcile finishes the transfer.
            let received: Vec<String> = self
                .run(
                    &RECEIVE,
                    &[&home_keys.meta, &home_keys.stock, &home_keys.received],
                    &[&id, &units],
                )
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
            .run(
                &RECEIVE,
                &[&keys.meta, &keys.stock, &keys.received],
                &[&transfer.id, &units],
            )
            .await?;
        Ok(reply.first().map(String::as_str) == Some("RECEIVED"))
    }

    async fn reserve_on(
        &self,
        keys: &SaleKeys,
        req: &ReserveRequest<'_>,
        quantity: &str,
        request: &str,
        shard: u32,
    ) -> Result<Decided, StoreError> {
        let idem = req.idempotency_key.map_or("", |k| k.as_str());
        let args = [
            req.sale_id.as_str(),
            req.user_id.as_str(),
            quantity,
            idem,
            req.gate_nonce.unwrap_or(""),
            req.source_ip.unwrap_or(""),
            &self.limit_args[0],
            &self.limit_args[1],
            &self.limit_args[2],
            &self.limit_args[3],
            &keys.id_suffix,
            request,
        ];
        let [meta, stock, buyers, resv, uorders, gate, keyed] = keys.with_gate();
        let keys = [
            meta,
            stock,
            buyers,
            resv,
            uorders,
            gate,
            &keys.rate_limit,
            keyed,
        ];
        let reply: Vec<String> = self.run(&PURCHASE, &keys, &args).await?;
        let reply = match reply.split_first() {
            Some((flag, rest)) if flag == "LF" => {
                let n = self
                    .limiter_failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                tracing::warn!(sale_id = %req.sale_id, failures = n, "rate limiter failed open (its key is broken); purchase decided without it");
                rest
            }
            _ => reply.as_slice(),
        };
        if let [tag, n, homes] = reply
            && tag == "SHARDED"
        {
            return Ok(Decided::Sharded(parse_layout(n, homes)?));
        }
        parse_reserve_reply(reply, req.quantity, shard).map(Decided::Outcome)
    }
}

/// What one run of the purchase script said.
enum Decided {
    Outcome(ReserveOutcome),
    /// Those were the directory keys of a sale of this layout.
    Sharded(ShardLayout),
}

/// What `peek.lua` saw on one key group.
enum Peeked {
    View(StockView),
    /// The directory of a sale of this layout.
    Sharded(ShardLayout),
}

impl Peeked {
    fn into_view(self) -> Option<StockView> {
        match self {
            Peeked::View(view) => Some(view),
            Peeked::Sharded(_) => None,
        }
    }
}

impl RedisStock {
    async fn peek(&self, keys: &SaleKeys, order: &str) -> Result<Option<Peeked>, StoreError> {
        let reply: Vec<String> = self
            .run(&PEEK, &[&keys.meta, &keys.stock, &keys.resv], &[order])
            .await?;
        match reply
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["MISSING"] => Ok(None),
            ["SHARDED", n, homes] => Ok(Some(Peeked::Sharded(parse_layout(n, homes)?))),
            ["OK", stock, status, resv] => Ok(Some(Peeked::View(StockView {
                remaining: parse_i64(stock)?,
                paused: *status == "PAUSED",
                reservation: if resv.is_empty() {
                    None
                } else {
                    let stored: StoredReservation = serde_json::from_str(resv)
                        .map_err(|e| StoreError::Protocol(e.to_string()))?;
                    Some(ReservationRecord {
                        user_id: stored.user_id,
                        quantity: stored.quantity,
                        at_ms: parse_i64(&stored.at_ms)?,
                        state: stored.state,
                    })
                },
            }))),
            _ => Err(protocol(&reply)),
        }
    }
}

/// The shards of a sharded sale as they were before a rebuild read the
/// ledger: `None` for a lost shard. Read first, so that whatever the
/// survivors sell meanwhile is counted twice (once in what they held, once
/// in the lower `available` read after), never not at all: a lost shard
/// rebuilt from it can only get fewer units than the ledger has, never more.
pub struct Survivors {
    parts: Vec<Option<SnapshotPart>>,
    lent: Vec<PendingTransfer>,
}

/// One key group's stock, buyers, reservations and the transfers it received.
struct SnapshotPart {
    stock: i64,
    total: i64,
    buyers: std::collections::HashMap<String, i64>,
    reservations: std::collections::HashMap<String, StoredReservation>,
    received: std::collections::HashSet<String>,
}

/// Parses one group's snapshot; its `lent` entries go to `lent`.
fn parse_snapshot(
    reply: redis::Value,
    shard: u32,
    lent: &mut Vec<PendingTransfer>,
) -> Result<Option<SnapshotPart>, StoreError> {
    let redis::Value::Array(parts) = reply else {
        return Err(StoreError::Protocol("snapshot is not a list".into()));
    };
    let text = |v: &redis::Value| -> Result<String, StoreError> {
        redis::from_redis_value::<String>(v.clone())
            .map_err(|e| StoreError::Protocol(e.to_string()))
    };
    let flat = |v: &redis::Value| -> Result<Vec<String>, StoreError> {
        redis::from_redis_value::<Vec<String>>(v.clone())
            .map_err(|e| StoreError::Protocol(e.to_string()))
    };
    let (stock, total, buyers, resv, transfers) = match parts.as_slice() {
        [tag] if text(tag)? == "MISSING" => return Ok(None),
        [_, stock, total, buyers, resv] => (stock, total, buyers, resv, None),
        [_, stock, total, buyers, resv, lent, received] => {
            (stock, total, buyers, resv, Some((lent, received)))
        }
        _ => return Err(StoreError::Protocol("unexpected snapshot".into())),
    };
    let mut part = SnapshotPart {
        stock: parse_i64(&text(stock)?)?,
        total: parse_i64(&text(total)?)?,
        buyers: std::collections::HashMap::new(),
        reservations: std::collections::HashMap::new(),
        received: std::collections::HashSet::new(),
    };
    for pair in flat(buyers)?.chunks(2) {
        if let [user, units] = pair {
            part.buyers.insert(user.clone(), parse_i64(units)?);
        }
    }
    for pair in flat(resv)?.chunks(2) {
        if let [id, raw] = pair {
            let stored: StoredReservation =
                serde_json::from_str(raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
            part.reservations.insert(id.clone(), stored);
        }
    }
    if let Some((lent_flat, received_flat)) = transfers {
        for pair in flat(lent_flat)?.chunks(2) {
            if let [id, value] = pair {
                lent.push(parse_transfer(id, value, shard)?);
            }
        }
        part.received = flat(received_flat)?
            .chunks(2)
            .filter_map(|pair| pair.first().cloned())
            .collect();
    }
    Ok(Some(part))
}

/// A `lent` entry of shard `from`: `to:units:atMs`.
fn parse_transfer(id: &str, value: &str, from: u32) -> Result<PendingTransfer, StoreError> {
    let mut fields = value.split(':');
    let (Some(to), Some(units), Some(at)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(StoreError::Protocol(format!("transfer {id}: {value}")));
    };
    Ok(PendingTransfer {
        id: id.to_owned(),
        from,
        to: parse_u32(to)?,
        units: parse_i64(units)?,
        at_ms: parse_i64(at)?,
    })
}

/// A `holding.lua` reply: the count, then order id and reservation pairs.
fn parse_holding(reply: &[String]) -> Result<Holding, StoreError> {
    let Some((count, pairs)) = reply.split_first() else {
        return Err(protocol(reply));
    };
    let mut holding = Holding {
        count: if count.is_empty() {
            None
        } else {
            Some(parse_i64(count)?)
        },
        reservations: std::collections::HashMap::new(),
    };
    for pair in pairs.chunks(2) {
        if let [id, raw] = pair
            && !raw.is_empty()
        {
            let stored: StoredReservation =
                serde_json::from_str(raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
            holding.reservations.insert(id.clone(), stored);
        }
    }
    Ok(holding)
}

/// The master serving `slot` in a `CLUSTER SLOTS` reply: entries
/// `[start, end, [host, port, id, ..], replicas..]`.
fn master_of_slot(map: &redis::Value, slot: i64) -> Option<String> {
    let redis::Value::Array(ranges) = map else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let redis::Value::Array(parts) = range else {
            return None;
        };
        let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end))) =
            (parts.first(), parts.get(1))
        else {
            return None;
        };
        if !(*start..=*end).contains(&slot) {
            return None;
        }
        let Some(redis::Value::Array(node)) = parts.get(2) else {
            return None;
        };
        let host = match node.first()? {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let redis::Value::Int(port) = node.get(1)? else {
            return None;
        };
        Some(format!("{host}:{port}"))
    })
}

/// A directory's shard count and home table.
fn parse_layout(shards: &str, homes: &str) -> Result<ShardLayout, StoreError> {
    ShardLayout::parse(parse_u32(shards)?, homes).map_err(|e| StoreError::Protocol(e.to_string()))
}

fn parse_rebuild_reply(reply: &[String]) -> Result<bool, StoreError> {
    match reply.first().map(String::as_str) {
        Some("LOADED") => Ok(true),
        Some("EXISTS") => Ok(false),
        _ => Err(protocol(reply)),
    }
}

fn parse_load_reply(reply: &[String]) -> Result<LoadOutcome, StoreError> {
    match reply {
        [tag] if tag == "LOADED" => Ok(LoadOutcome::Loaded),
        [tag, stock] if tag == "REFRESHED" => Ok(LoadOutcome::Refreshed {
            stock: parse_u32(stock)?,
        }),
        other => Err(protocol(other)),
    }
}

/// A borrow whose units left one shard and have not arrived at the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTransfer {
    pub id: String,
    pub from: u32,
    pub to: u32,
    pub units: i64,
    pub at_ms: i64,
}

/// The seed nodes of a `?cluster=true` URL, one URL each, or `None` for a
/// single node. `scheme://[user:password@]host:port,host:port[/db][?query][#fragment]`
/// names several seeds (any one answering is enough); each gets the scheme,
/// credentials, database, query (without the flag) and fragment of the URL,
/// so a `#insecure` or a bad host is refused for each. A password's `@` `,`
/// `?` `#` are percent-encoded, so they split nothing here.
fn cluster_seed(url: &str) -> Option<Vec<String>> {
    let (rest, fragment) = match url.split_once('#') {
        Some((rest, fragment)) => (rest, format!("#{fragment}")),
        None => (url, String::new()),
    };
    let (base, query) = rest.split_once('?')?;
    let mut cluster = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let is_flag = *pair == "cluster=true";
            cluster |= is_flag;
            !is_flag && !pair.is_empty()
        })
        .collect();
    if !cluster {
        return None;
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    // Without a scheme the URL is not one: left whole for `client` to refuse.
    let Some((scheme, authority_path)) = base.split_once("://") else {
        return Some(vec![format!("{base}{query}{fragment}")]);
    };
    // The last `@` ends the credentials, as URL parsers read it.
    let (userinfo, hosts_path) = match authority_path.rsplit_once('@') {
        Some((userinfo, hosts_path)) => (format!("{userinfo}@"), hosts_path),
        None => (String::new(), authority_path),
    };
    let (hosts, path) = hosts_path.split_at(hosts_path.find('/').unwrap_or(hosts_path.len()));
    Some(
        hosts
            .split(',')
            .map(|host| format!("{scheme}://{userinfo}{host}{path}{query}{fragment}"))
            .collect(),
    )
}

/// A quantity as a script argument; the usual ones without an allocation.
fn quantity_arg(quantity: u32) -> std::borrow::Cow<'static, str> {
    const SMALL: [&str; 11] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"];
    match SMALL.get(quantity as usize) {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => std::borrow::Cow::Owned(quantity.to_string()),
    }
}

/// One connection to a single node, or to a cluster.
#[derive(Clone)]
enum Conn {
    /// Reconnects by itself; lazy, so a function starts while Redis is down.
    Single(ConnectionManager),
    Cluster(std::sync::Arc<LazyCluster>),
}

/// The cluster connection is made on first use (the crate connects eagerly),
/// and again after a failed attempt.
struct LazyCluster {
    client: redis::cluster::ClusterClient,
    conn: tokio::sync::OnceCell<redis::cluster_async::ClusterConnection>,
}

/// A connection ready for a command, whichever kind.
enum Ready {
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Conn {
    async fn get(&self) -> Result<Ready, RedisError> {
        match self {
            Conn::Single(conn) => Ok(Ready::Single(conn.clone())),
            Conn::Cluster(lazy) => lazy
                .conn
                .get_or_try_init(|| lazy.client.get_async_connection())
                .await
                .map(|conn| Ready::Cluster(conn.clone())),
        }
    }
}

impl redis::aio::ConnectionLike for Ready {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Ready::Single(conn) => conn.req_packed_command(cmd),
            Ready::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Ready::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Ready::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Ready::Single(conn) => conn.get_db(),
            Ready::Cluster(conn) => conn.get_db(),
        }
    }
}

/// The client for `REDIS_URL`, refused at cold start rather than at the first
/// purchase when it cannot be right.
///
/// `rediss://` verifies the server's certificate chain and name with rustls
/// against the system's roots (rustls-native-certs: the OS store, or only
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` when set). ElastiCache certificates chain
/// to Amazon's public roots, so no CA setting is needed in AWS. `#insecure`
/// (no verification) is refused: it would let anyone on the path read the
/// AUTH password. The errors never carry the URL, which may hold that password.
fn client(url: &str) -> Result<redis::Client, StoreError> {
    let client = redis::Client::open(url).map_err(|err| {
        // redis-rs describes what is wrong ("Redis URL did not parse",
        // "Missing hostname"), never the URL itself.
        StoreError::Unavailable(format!("REDIS_URL is not a usable Redis URL: {err}"))
    })?;
    if let redis::ConnectionAddr::TcpTls { insecure: true, .. } =
        client.get_connection_info().addr()
    {
        return Err(StoreError::Unavailable(
            "REDIS_URL asks for TLS without certificate verification (#insecure); refused".into(),
        ));
    }
    Ok(client)
}

/// A buyer as the source of truth knows them, for a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldUnits {
    pub user_id: String,
    pub units: u64,
    pub order_ids: Vec<String>,
}

/// What a rebuild reads from the ledger: the sale item's `available` and
/// `returnSeq` (one consistent read), and every decided order as the
/// reservation Redis keeps for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerRead {
    pub available: i64,
    pub return_seq: u64,
    pub decided: Vec<DecidedOrder>,
    /// Every `EXPIRED` order (id, units), whatever its position: a shard
    /// that survived a partial loss may still be owed their return.
    pub expired: Vec<(String, i64)>,
}

/// An order the ledger has decided, as a reservation in `resv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecidedOrder {
    pub order_id: String,
    pub user_id: String,
    pub quantity: u64,
    pub at_ms: i64,
    /// `WRITTEN`, `EXPIRED` or `REJECTED`.
    pub state: &'static str,
}

impl DecidedOrder {
    fn reservation_json(&self) -> String {
        serde_json::json!({
            "userId": self.user_id,
            "quantity": self.quantity,
            "atMs": self.at_ms.to_string(),
            "state": self.state,
        })
        .to_string()
    }
}

/// A sale's Redis state, read in bounded steps ([`RedisStock::snapshot`]).
#[derive(Debug, Clone, Default)]
pub struct RedisSnapshot {
    /// Units left, over every shard.
    pub stock: i64,
    pub total: i64,
    pub buyers: std::collections::HashMap<String, i64>,
    pub reservations: std::collections::HashMap<String, StoredReservation>,
    /// Units lent by one shard and not yet received by another.
    pub in_transit: i64,
    pub pending_transfers: Vec<PendingTransfer>,
    /// 1 for a sale of one shard.
    pub shards: u32,
    /// The stock or the reservations of a key group changed during every
    /// attempt to read them: they are not as at one instant, so the stock
    /// is not compared with the ledger on this read (the next run does).
    pub moving: bool,
    /// Buyers read again one at a time ([`RedisStock::holdings`]): their
    /// count and reservations as at one instant. Where a buyer is here,
    /// the per-buyer checks and repairs go by this, not by `buyers` and
    /// `reservations` (read in chunks, at different moments).
    pub holdings: std::collections::HashMap<String, Holding>,
}

/// One buyer's count and reservations, read in one step (`holding.lua`).
#[derive(Debug, Clone, Default)]
pub struct Holding {
    /// `None` when Redis does not count them at all.
    pub count: Option<i64>,
    /// The reservations of the order ids on their list (every `QUEUED` or
    /// `WRITTEN` one of theirs is there), by order id.
    pub reservations: std::collections::HashMap<String, StoredReservation>,
}

/// Entries one `HSCAN` asks for: the most a read of reconcile's touches in
/// one command, whatever the size of the sale (a purchase waits behind at
/// most one such command: about 0.1-0.2 ms on the bench machine; with 500
/// a chunk, 0.3-0.5 ms, the purchase p99 of `make bench`'s reconcile row
/// rose by 1.27-1.42x, with 200 by 1.09-1.17x).
pub const SCAN_CHUNK: usize = 200;

/// A scan starts at most one chunk every this long (at most 100,000
/// entries a second; about 60,000 on the busy bench machine). Reading a
/// million buyers costs Redis about a second of work however it is cut:
/// spread over ten seconds or more it takes a tenth of Redis or less from
/// the purchases instead of all of it for a second, and the reader's own
/// parsing stays as thin.
pub const SCAN_INTERVAL: Duration = Duration::from_millis(2);

/// Reads of a key group's stock and reservations made before they are
/// reported as moving ([`RedisSnapshot::moving`]).
const READ_ATTEMPTS: u32 = 3;

/// Buyers [`RedisStock::holdings`] reads at once (one command each).
const HOLDING_BATCH: usize = 64;

/// What `snapshot_head.lua` read: equal before and after a chunked read
/// means nothing changed the stock or the reservations in between.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    stock: i64,
    total: i64,
    version: String,
    epoch: String,
    /// Fields of `resv` (and for a shard of `lent`, `received`).
    lens: Vec<usize>,
}

/// One key group read in chunks.
struct GroupRead {
    part: SnapshotPart,
    lent: std::collections::HashMap<String, String>,
    moving: bool,
}

/// What `return_units` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    Returned {
        stock: i64,
    },
    /// Returned before: nothing changed.
    Already,
    /// The sale has no keys; a rebuild reads the units from DynamoDB.
    SaleMissing,
}

impl RedisStock {
    /// Loads a sale with its stock and buyers from DynamoDB unless it is
    /// there (`rebuild.lua`). Returns true if this call loaded it.
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
        let head = [
            sale.total_stock.to_string(),
            sale.start_ms.to_string(),
            sale.end_ms.to_string(),
            sale.per_user_limit.to_string(),
            sale.shards.to_string(),
            status_of(sale).to_owned(),
            version.to_string(),
            expire_at.to_string(),
        ];
        let gate = String::from(if sale.gate { "1" } else { "0" });
        let shards = sale.shards.max(1);
        let mut loaded = false;
        let mut layout = ShardLayout::uniform(1);
        if shards > 1 {
            // A directory a rebuild that died half way left behind keeps its
            // home table: the shards already loaded placed buyers by it.
            let proposed = self.new_layout(&sale.sale_id, shards).await.encode();
            let directory = SaleKeys::new(&sale.sale_id);
            let mut args: Vec<&str> = head.iter().map(String::as_str).collect();
            args.extend(["0", gate.as_str(), "1", proposed.as_str()]);
            let reply: Vec<String> = self
                .run(
                    &REBUILD,
                    &[
                        &directory.meta,
                        &directory.stock,
                        &directory.buyers,
                        &directory.user_orders,
                    ],
                    &args,
                )
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
            let keys = SaleKeys::of(&sale.sale_id, shards, k);
            let mut args: Vec<String> = head.to_vec();
            let here: Vec<&HeldUnits> = buyers
                .iter()
                .filter(|b| layout.home(&b.user_id) == k)
                .collect();
            args.extend([
                share.to_string(),
                gate.clone(),
                String::new(),
                ledger.return_seq.to_string(),
                here.len().to_string(),
            ]);
            for b in here {
                args.push(b.user_id.clone());
                args.push(b.units.to_string());
                args.push(b.order_ids.join(","));
            }
            for m in ledger
                .decided
                .iter()
                .filter(|m| shard_of_order(&m.order_id).unwrap_or(0) == k)
            {
                args.push(m.order_id.clone());
                args.push(m.reservation_json());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let reply: Vec<String> = self
                .run(
                    &REBUILD,
                    &[
                        &keys.meta,
                        &keys.stock,
                        &keys.buyers,
                        &keys.user_orders,
                        &keys.resv,
                        &keys.keyed,
                    ],
                    &args,
                )
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
    async fn rebuild_shares(
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
            tokio::time::timeout(self.timeout * 2, call)
                .await
                .map_err(|_| StoreError::Unavailable("timed out".into()))?
                .map_err(unavailable)?;
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
        let (quantity, now) = (quantity.to_string(), crate::clock::now_ms().to_string());
        let seq = return_seq.map(|s| s.to_string()).unwrap_or_default();
        let reply: Vec<String> = self
            .run(
                &RETURN_UNITS,
                &keys.all(),
                &[order_id.as_str(), user_id, &quantity, &now, &seq],
            )
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
    pub async fn snapshot(&self, sale_id: &SaleId) -> Result<Option<RedisSnapshot>, StoreError> {
        let Some(shards) = self.shard_count(sale_id).await? else {
            return Ok(None);
        };
        let mut merged = RedisSnapshot {
            shards,
            ..RedisSnapshot::default()
        };
        let mut lent: Vec<PendingTransfer> = Vec::new();
        let mut received: Vec<std::collections::HashSet<String>> = Vec::new();
        for k in 0..shards {
            let keys = SaleKeys::of(sale_id, shards, k);
            let Some(group) = self.read_group(&keys, shards > 1).await? else {
                // A shard without keys: the sale is not whole in Redis.
                return Ok(None);
            };
            let part = group.part;
            merged.moving |= group.moving;
            merged.stock += part.stock;
            merged.total = part.total;
            if merged.buyers.is_empty() {
                // The first group's maps are taken whole: copying a million
                // buyers into another map costs as much as reading them.
                merged.buyers = part.buyers;
            } else {
                for (user, units) in part.buyers {
                    *merged.buyers.entry(user).or_default() += units;
                }
            }
            if merged.reservations.is_empty() {
                merged.reservations = part.reservations;
            } else {
                merged.reservations.extend(part.reservations);
            }
            for (id, value) in &group.lent {
                lent.push(parse_transfer(id, value, k)?);
            }
            received.push(part.received);
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

    /// One key group in chunks (see [`Self::snapshot`]); `None` when its
    /// keys are gone.
    async fn read_group(
        &self,
        keys: &SaleKeys,
        sharded: bool,
    ) -> Result<Option<GroupRead>, StoreError> {
        // Sized once: growing a map of a million buyers copies it a few times.
        let mut buyers =
            std::collections::HashMap::with_capacity(self.hash_len(&keys.buyers).await?);
        self.scan_hash(&keys.buyers, |user, units| {
            buyers.insert(user, parse_i64(&units)?);
            Ok(())
        })
        .await?;
        let mut attempt = 1;
        loop {
            let Some(before) = self.head(keys, sharded).await? else {
                return Ok(None);
            };
            let mut reservations = std::collections::HashMap::new();
            self.scan_hash(&keys.resv, |id, raw| {
                let stored: StoredReservation =
                    serde_json::from_str(&raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
                reservations.insert(id, stored);
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
            let mut seen = vec![reservations.len()];
            if sharded {
                seen.extend([lent.len(), received.len()]);
            }
            let still = before == after && after.lens == seen;
            if still || attempt == READ_ATTEMPTS {
                return Ok(Some(GroupRead {
                    part: SnapshotPart {
                        stock: after.stock,
                        total: after.total,
                        buyers,
                        reservations,
                        received,
                    },
                    lent,
                    moving: !still,
                }));
            }
            attempt += 1;
        }
    }

    /// A key group's stock, total, version, epoch and hash lengths
    /// (`snapshot_head.lua`, O(1)); `None` when its keys are gone.
    async fn head(&self, keys: &SaleKeys, sharded: bool) -> Result<Option<Head>, StoreError> {
        let mut names = vec![keys.meta.as_str(), keys.stock.as_str(), keys.resv.as_str()];
        if sharded {
            names.extend([keys.lent.as_str(), keys.received.as_str()]);
        }
        let reply: Vec<String> = self.run(&SNAPSHOT_HEAD, &names, &[]).await?;
        let fields: Vec<&str> = reply.iter().map(String::as_str).collect();
        match fields.as_slice() {
            ["MISSING"] => Ok(None),
            ["OK", stock, total, version, epoch, lens @ ..] => Ok(Some(Head {
                stock: parse_i64(stock)?,
                total: parse_i64(total)?,
                version: (*version).to_owned(),
                epoch: (*epoch).to_owned(),
                lens: lens
                    .iter()
                    .map(|n| n.parse::<usize>().map_err(|_| protocol(&reply)))
                    .collect::<Result<_, _>>()?,
            })),
            _ => Err(protocol(&reply)),
        }
    }

    /// How many fields a hash holds (`HLEN`, O(1)).
    async fn hash_len(&self, key: &str) -> Result<usize, StoreError> {
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HLEN")
                .arg(key)
                .query_async::<usize>(&mut conn)
                .await
        };
        tokio::time::timeout(self.timeout * 2, call)
            .await
            .map_err(|_| StoreError::Unavailable("timed out".into()))?
            .map_err(unavailable)
    }

    /// Every field of a hash handed to `each`, [`SCAN_CHUNK`] entries a
    /// command, paced by [`SCAN_INTERVAL`]. `HSCAN` returns every entry present
    /// throughout at least once (an entry may come twice; `each` keeps the
    /// later one).
    async fn scan_hash(
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
            let (next, flat) = tokio::time::timeout(self.timeout * 2, call)
                .await
                .map_err(|_| StoreError::Unavailable("timed out".into()))?
                .map_err(unavailable)?;
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

    /// Each of `users`' count and reservations, read in one step per buyer
    /// (`holding.lua`, bounded by the buyer's own orders) on their home
    /// shard; 64 at a time.
    pub async fn holdings(
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
                        .run(
                            &HOLDING,
                            &[&keys.buyers, &keys.user_orders, &keys.resv],
                            &[&user],
                        )
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

    /// Each shard's state, read atomically per shard (`None`: that shard's
    /// keys are gone), and the transfers the shards lent: what a rebuild of
    /// lost shards reads of the survivors (`snapshot.lua`, one script per
    /// shard: it is the one read here whose work grows with the sale, and
    /// it runs only after a shard was lost).
    async fn shard_parts(
        &self,
        sale_id: &SaleId,
        shards: u32,
    ) -> Result<(Vec<Option<SnapshotPart>>, Vec<PendingTransfer>), StoreError> {
        let mut parts = Vec::new();
        let mut lent: Vec<PendingTransfer> = Vec::new();
        for k in 0..shards {
            let keys = SaleKeys::of(sale_id, shards, k);
            let mut names = vec![
                keys.meta.as_str(),
                keys.stock.as_str(),
                keys.buyers.as_str(),
                keys.resv.as_str(),
            ];
            if shards > 1 {
                names.extend([keys.lent.as_str(), keys.received.as_str()]);
            }
            let reply: redis::Value = self.run(&SNAPSHOT, &names, &[]).await?;
            parts.push(parse_snapshot(reply, k, &mut lent)?);
        }
        Ok((parts, lent))
    }

    /// The sale's purchase answers by outcome (`sale:{S}:outcomes`), as the
    /// execution environments flushed them; empty when none were.
    pub async fn outcomes(
        &self,
        sale_id: &SaleId,
    ) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
        let key = SaleKeys::new(sale_id).outcomes;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await
        };
        let all: std::collections::BTreeMap<String, String> =
            tokio::time::timeout(self.timeout * 2, call)
                .await
                .map_err(|_| StoreError::Unavailable("timed out".into()))?
                .map_err(unavailable)?;
        all.into_iter()
            .map(|(outcome, n)| {
                n.parse::<u64>()
                    .map(|n| (outcome, n))
                    .map_err(|_| StoreError::Protocol(format!("outcome count {n:?}")))
            })
            .collect()
    }

    /// Sets a buyer's count to `units` if it is still `read` (compare and
    /// set: a purchase or release made since the read is never erased).
    /// Returns the count now.
    pub async fn set_buyer(
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
        let (units, read) = (units.to_string(), read.to_string());
        self.run(
            &SET_BUYER,
            &[&keys.buyers, &keys.meta],
            &[user_id, &units, &read],
        )
        .await
    }

    /// An operator's pause or resume on every key group of the sale that
    /// Redis holds (the directory and each shard: a purchase reads the
    /// status of the group it buys on). Returns how many groups took it.
    pub async fn set_status(&self, sale: &Sale) -> Result<u32, StoreError> {
        let status = status_of(sale);
        let mut groups = vec![SaleKeys::new(&sale.sale_id)];
        if sale.shards > 1 {
            groups.extend((0..sale.shards).map(|k| SaleKeys::shard(&sale.sale_id, k)));
        }
        let mut applied = 0;
        for keys in &groups {
            let took: i64 = self.run(&SET_STATUS, &[&keys.meta], &[status]).await?;
            applied += u32::from(took == 1);
        }
        Ok(applied)
    }

    /// Sets the stock of a sale of one shard to `units` if it is still
    /// `read` (compare and set). Returns the stock now; `None` when the sale
    /// has no keys.
    pub async fn set_stock(
        &self,
        sale_id: &SaleId,
        read: i64,
        units: i64,
    ) -> Result<Option<i64>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let (read, units) = (read.to_string(), units.to_string());
        let reply: String = self
            .run(&SET_STOCK, &[&keys.meta, &keys.stock], &[&read, &units])
            .await?;
        if reply == "MISSING" {
            return Ok(None);
        }
        parse_i64(&reply).map(Some)
    }

    /// A lock with an owner token and an expiry (`SET NX PX`), on the sale's
    /// hash tag. Returns false when someone else holds it.
    pub async fn try_lock(
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
        let reply: Option<String> = tokio::time::timeout(self.timeout * 2, call)
            .await
            .map_err(|_| StoreError::Unavailable("timed out".into()))?
            .map_err(unavailable)?;
        Ok(reply.is_some())
    }

    /// Releases a lock taken with `token`; someone else's is left alone.
    pub async fn unlock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
    ) -> Result<(), StoreError> {
        let key = format!("sale:{{{sale_id}}}:lock:{name}");
        let _: i64 = self.run(&UNLOCK, &[&key], &[token]).await?;
        Ok(())
    }
}

impl StockStore for RedisStock {
    async fn reserve(&self, req: ReserveRequest<'_>) -> Result<ReserveOutcome, StoreError> {
        let quantity = quantity_arg(req.quantity.get());
        let request = request_id();
        let mut known = self.known(req.sale_id);
        let mut home = known.layout.home(req.user_id.as_str());
        let mut outcome = match self
            .reserve_on(
                &known.groups[home as usize],
                &req,
                &quantity,
                &request,
                home,
            )
            .await?
        {
            Decided::Outcome(ReserveOutcome::SaleMissing) if known.groups.len() > 1 => {
                // The home shard's keys are gone (lost, or the sale is gone):
                // fail closed like any missing sale, and learn the layout
                // from the directory again next time.
                if let Ok(mut cache) = self.keys.write() {
                    cache.remove(req.sale_id.as_str());
                }
                return Ok(ReserveOutcome::SaleMissing);
            }
            Decided::Sharded(layout) => {
                // First purchase of a sharded sale here: one extra round
                // trip, once per environment.
                known = self.remember(req.sale_id, layout);
                home = known.layout.home(req.user_id.as_str());
                self.reserve_on(
                    &known.groups[home as usize],
                    &req,
                    &quantity,
                    &request,
                    home,
                )
                .await?
            }
            decided => decided,
        };
        // The home shard is short: borrow, then decide again there (where
        // the buyer's count lives). SOLD_OUT only once every other shard was
        // found empty; units borrowed and then taken by a neighbour on the
        // home shard mean another round. Bounded: under that much contention
        // the buyer is told to retry (503), never a false SOLD_OUT.
        let mut rounds = 0;
        while known.groups.len() > 1 {
            let Decided::Outcome(ReserveOutcome::SoldOut { remaining }) = outcome else {
                break;
            };
            // Every other shard was empty a moment ago: after a sell-out a
            // refusal costs one round trip, not one per shard. When that
            // lapses, one purchase looks again while the others do not.
            let now = std::time::Instant::now();
            if !self.may_borrow(req.sale_id, now) {
                break;
            }
            let need = u64::from(req.quantity.get()).saturating_sub(u64::from(remaining));
            let got = self
                .borrow(&known.groups, home as usize, need.max(1))
                .await?;
            if let Ok(mut dry) = self.dry.write() {
                if got == 0 {
                    dry.insert(req.sale_id.to_string(), now + DRY_SHARDS);
                } else {
                    dry.remove(req.sale_id.as_str());
                }
            }
            // Decide again even when nothing came: a neighbour's borrow may
            // have brought units home meanwhile. Sold out only when the
            // other shards were empty *and* home still is.
            outcome = self
                .reserve_on(
                    &known.groups[home as usize],
                    &req,
                    &quantity,
                    &request,
                    home,
                )
                .await?;
            if got == 0 {
                break;
            }
            rounds += 1;
            if rounds > MAX_BORROW_ROUNDS {
                return Err(StoreError::Unavailable(
                    "stock is moving between shards; retry".into(),
                ));
            }
        }
        match outcome {
            Decided::Outcome(outcome) => Ok(outcome),
            Decided::Sharded(_) => Err(StoreError::Protocol(
                "a shard's keys answered as a directory".into(),
            )),
        }
    }

    async fn buyer_reservations(
        &self,
        sale_id: &SaleId,
        user_id: &crate::domain::UserId,
    ) -> Result<Vec<(OrderId, ReservationRecord)>, StoreError> {
        let Some(layout) = self.layout(sale_id).await? else {
            return Ok(Vec::new());
        };
        let keys = SaleKeys::of(sale_id, layout.shards(), layout.home(user_id.as_str()));
        let flat: Vec<String> = self
            .run(
                &BUYER_ORDERS,
                &[&keys.user_orders, &keys.resv],
                &[user_id.as_str()],
            )
            .await?;
        let mut out = Vec::new();
        for pair in flat.chunks(2) {
            let [id, raw] = pair else { continue };
            if raw.is_empty() {
                continue;
            }
            let stored: StoredReservation =
                serde_json::from_str(raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
            out.push((
                parse_order_id(id)?,
                ReservationRecord {
                    user_id: stored.user_id,
                    quantity: stored.quantity,
                    at_ms: parse_i64(&stored.at_ms)?,
                    state: stored.state,
                },
            ));
        }
        Ok(out)
    }

    async fn release(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
    ) -> Result<ReleaseOutcome, StoreError> {
        let keys = SaleKeys::of_order(sale_id, order_id);
        let reply: Vec<String> = self
            .run(&RELEASE, &keys.all(), &[order_id.as_str()])
            .await?;
        match reply.first().map(String::as_str) {
            Some("RELEASED") => Ok(ReleaseOutcome::Released {
                stock: parse_u32(reply.get(1).map_or("", String::as_str))?,
            }),
            Some("NOT_FOUND") => Ok(ReleaseOutcome::NotFound),
            Some("NOT_RELEASABLE") => Ok(ReleaseOutcome::NotReleasable),
            Some("MISSING") => Ok(ReleaseOutcome::SaleMissing),
            _ => Err(protocol(&reply)),
        }
    }

    async fn resolve(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        resolution: Resolution,
    ) -> Result<bool, StoreError> {
        let keys = SaleKeys::of_order(sale_id, order_id);
        let reply: Vec<String> = self
            .run(
                &RESOLVE,
                &keys.all(),
                &[order_id.as_str(), resolution.as_str()],
            )
            .await?;
        match reply.first().map(String::as_str) {
            Some("OK" | "SAME") => Ok(true),
            Some("NOT_FOUND") => Ok(false),
            _ => Err(protocol(&reply)),
        }
    }

    async fn view(
        &self,
        sale_id: &SaleId,
        order_id: Option<&OrderId>,
    ) -> Result<Option<StockView>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let order = order_id.map_or("", OrderId::as_str);
        let first = self.peek(&keys, order).await?;
        let Some(Peeked::Sharded(layout)) = first else {
            return Ok(first.and_then(Peeked::into_view));
        };
        let shards = layout.shards();
        // A sharded sale: the sum of its shards, the reservation from the
        // shard its id names.
        let order_shard = order_id.and_then(|id| shard_of_order(id.as_str()));
        let mut view = StockView {
            remaining: 0,
            paused: false,
            reservation: None,
        };
        for k in 0..shards {
            let keys = SaleKeys::shard(sale_id, k);
            let ask = if order_shard == Some(k) { order } else { "" };
            match self.peek(&keys, ask).await?.and_then(Peeked::into_view) {
                Some(part) => {
                    view.remaining += part.remaining;
                    view.paused |= part.paused;
                    if part.reservation.is_some() {
                        view.reservation = part.reservation;
                    }
                }
                // A shard without keys: the sale is not whole in Redis.
                None => return Ok(None),
            }
        }
        Ok(Some(view))
    }

    async fn add_outcomes(
        &self,
        sale_id: &SaleId,
        counts: &[(&'static str, u64)],
    ) -> Result<bool, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let numbers: Vec<String> = counts.iter().map(|(_, n)| n.to_string()).collect();
        let args: Vec<&str> = counts
            .iter()
            .zip(&numbers)
            .flat_map(|((outcome, _), n)| [*outcome, n.as_str()])
            .collect();
        let added: i64 = self
            .run(&OUTCOMES, &[&keys.meta, &keys.outcomes], &args)
            .await?;
        Ok(added == 1)
    }

    fn limiter_failures(&self) -> u64 {
        self.limiter_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn keyed_may_exist(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        key: &IdempotencyKey,
        since: std::time::Instant,
    ) -> Result<bool, StoreError> {
        let known = self.known(sale_id);
        let home = known.layout.home(user_id.as_str()) as usize;
        let Some(keys) = known.groups.get(home) else {
            return Ok(true);
        };
        let fresh = || {
            self.keyed
                .read()
                .ok()
                .and_then(|cache| cache.get(&keys.keyed).cloned())
                .and_then(|(read_at, filter)| (read_at >= since).then_some(filter))
        };
        if let Some(filter) = fresh() {
            return Ok(filter.may_hold(sale_id, user_id, key));
        }
        let _reading = self.keyed_read.lock().await;
        // Another request may have read it while this one waited.
        if let Some(filter) = fresh() {
            return Ok(filter.may_hold(sale_id, user_id, key));
        }
        let read_at = std::time::Instant::now();
        let reply: Vec<Vec<u8>> = self
            .run(&KEYED_FILTER, &[&keys.keyed, &keys.resv], &[])
            .await?;
        let filter = crate::domain::keyed_filter::KeyedFilter::parse(&reply)
            .ok_or_else(|| StoreError::Protocol("unexpected keyed filter reply".into()))?;
        let may = filter.may_hold(sale_id, user_id, key);
        if let Ok(mut cache) = self.keyed.write() {
            if cache.len() >= KEY_CACHE_SALES {
                cache.clear();
            }
            cache.insert(keys.keyed.clone(), (read_at, std::sync::Arc::new(filter)));
        }
        Ok(may)
    }
}

fn limit_args(l: RateLimits) -> std::sync::Arc<[String; 4]> {
    std::sync::Arc::new([
        l.user_per_sec.to_string(),
        l.user_burst.to_string(),
        l.ip_per_sec.to_string(),
        l.ip_burst.to_string(),
    ])
}

fn parse_reserve_reply(
    reply: &[String],
    requested: Quantity,
    shard: u32,
) -> Result<ReserveOutcome, StoreError> {
    let strs: Vec<&str> = reply.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["OK", order_id, at_ms, _left] => Ok(ReserveOutcome::Reserved(Reservation {
            order_id: parse_order_id(order_id)?,
            quantity: requested,
            reserved_at_ms: parse_i64(at_ms)?,
            shard,
        })),
        ["REPLAY", order_id, stored] => {
            let stored: StoredReservation =
                serde_json::from_str(stored).map_err(|e| StoreError::Protocol(e.to_string()))?;
            Ok(ReserveOutcome::Replayed(Reservation {
                order_id: parse_order_id(order_id)?,
                quantity: Quantity::new(stored.quantity)
                    .map_err(|e| StoreError::Protocol(e.to_string()))?,
                reserved_at_ms: parse_i64(&stored.at_ms)?,
                shard,
            }))
        }
        ["MISSING"] => Ok(ReserveOutcome::SaleMissing),
        ["PAUSED"] => Ok(ReserveOutcome::Paused),
        ["NOT_STARTED", start_ms] => Ok(ReserveOutcome::NotStarted {
            start_ms: parse_i64(start_ms)?,
        }),
        ["ENDED"] => Ok(ReserveOutcome::Ended),
        ["GATE"] => Ok(ReserveOutcome::GateRequired),
        ["RATE_LIMITED", wait] => Ok(ReserveOutcome::RateLimited {
            retry_after_ms: u64::try_from(parse_i64(wait)?).unwrap_or(1_000),
        }),
        ["LIMIT", listed] => Ok(ReserveOutcome::LimitExceeded {
            order_ids: listed
                .split(',')
                .filter(|s| !s.is_empty())
                .map(parse_order_id)
                .collect::<Result<_, _>>()?,
        }),
        ["SOLD_OUT", left] => Ok(ReserveOutcome::SoldOut {
            // A negative stock would be a bug elsewhere; report it as none left.
            remaining: parse_i64(left).map(|n| u32::try_from(n).unwrap_or(0))?,
        }),
        _ => Err(protocol(reply)),
    }
}

/// Redis out of reach (refused, dropped, timed out, TLS handshake refused,
/// credentials refused) is `Unavailable`; Redis answering with an error (a
/// wrong type, a script error) is `Protocol`. The difference decides whether
/// the rate limiter may fail open. A refused AUTH is "out of reach": no
/// command ran, and the fix is the deployment's, not the sale's. Its message
/// is redis-rs's ("Password authentication failed") or the server's
/// (`WRONGPASS ...`, `NOAUTH ...`), neither of which repeats the password.
fn unavailable(err: RedisError) -> StoreError {
    if err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.kind() == redis::ErrorKind::AuthenticationFailed
        // The cluster client found no connection to the slot's master: it
        // is down, or its certificate was refused. An outage, not a reply.
        || err.kind() == redis::ErrorKind::ClusterConnectionNotFound
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        StoreError::Unavailable(err.to_string())
    } else {
        StoreError::Protocol(err.to_string())
    }
}

fn protocol(reply: &[impl std::fmt::Debug]) -> StoreError {
    StoreError::Protocol(format!("{reply:?}"))
}

fn parse_i64(raw: &str) -> Result<i64, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a number: {raw:?}")))
}

fn parse_u32(raw: &str) -> Result<u32, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a count: {raw:?}")))
}

fn parse_order_id(raw: &str) -> Result<OrderId, StoreError> {
    OrderId::parse(raw).map_err(|e| StoreError::Protocol(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ConnectionAddr;

    #[test]
    fn auth_and_tls_urls_parse_with_their_credentials() {
        let tls = client("rediss://default:p%40ss%3Aw0rd@cache.example:6380").unwrap();
        let info = tls.get_connection_info();
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "cache.example"
        ));
        assert_eq!(info.redis_settings().username(), Some("default"));
        assert_eq!(info.redis_settings().password(), Some("p@ss:w0rd"));

        let plain = client("redis://:hunter2@127.0.0.1:6379").unwrap();
        let info = plain.get_connection_info();
        assert!(matches!(info.addr(), ConnectionAddr::Tcp(host, 6379) if host == "127.0.0.1"));
        assert_eq!(info.redis_settings().username(), None);
        assert_eq!(info.redis_settings().password(), Some("hunter2"));
    }

    #[test]
    fn refuses_unverified_tls_and_never_echoes_the_url() {
        for url in [
            "rediss://default:hunter2@cache.example:6379/#insecure",
            "https://default:hunter2@cache.example:6379",
            "rediss://default:hunter2@:6379",
            "rediss://default:hunter2@cache.example:6379/notadb",
        ] {
            let err = client(url).err().unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("REDIS_URL"), "{shown}");
        }
    }

    #[test]
    fn the_cluster_flag_is_read_and_removed_from_the_url() {
        assert_eq!(cluster_seed("redis://h:1"), None);
        assert_eq!(cluster_seed("redis://h:1?protocol=resp3"), None);
        assert_eq!(
            cluster_seed("rediss://:pw@h:1?cluster=true"),
            Some(vec!["rediss://:pw@h:1".to_owned()])
        );
        assert_eq!(
            cluster_seed("redis://h:1?protocol=resp3&cluster=true"),
            Some(vec!["redis://h:1?protocol=resp3".to_owned()])
        );
    }

    #[test]
    fn every_seed_node_gets_the_scheme_credentials_and_options_of_the_url() {
        assert_eq!(
            cluster_seed("rediss://default:p%40ss@a:1,b:2,[::1]:3?cluster=true"),
            Some(vec![
                "rediss://default:p%40ss@a:1".to_owned(),
                "rediss://default:p%40ss@b:2".to_owned(),
                "rediss://default:p%40ss@[::1]:3".to_owned(),
            ])
        );
        assert_eq!(
            cluster_seed("redis://a:1,b:2/0?protocol=resp3&cluster=true"),
            Some(vec![
                "redis://a:1/0?protocol=resp3".to_owned(),
                "redis://b:2/0?protocol=resp3".to_owned(),
            ])
        );
        // Each node parses, with the password decoded: an encoded `,` `?`
        // `@` `#` in it splits nothing.
        let seeds = cluster_seed("rediss://:a%2Cb%3Fc%40d%23e@a:1,b:2?cluster=true").unwrap();
        assert_eq!(seeds.len(), 2);
        for (seed, host) in seeds.iter().zip(["a", "b"]) {
            let info = client(seed).unwrap().get_connection_info().clone();
            assert!(
                matches!(info.addr(), ConnectionAddr::TcpTls { host: h, insecure: false, .. } if h == host),
                "{seed}"
            );
            assert_eq!(info.redis_settings().password(), Some("a,b?c@d#e"));
        }
    }

    #[test]
    fn a_seed_list_cannot_turn_verification_off_or_hide_a_bad_node() {
        // The fragment is every node's: `#insecure` is refused for each.
        let seeds = cluster_seed("rediss://:hunter2@a:1,b:2?cluster=true#insecure").unwrap();
        assert_eq!(seeds.len(), 2);
        for seed in &seeds {
            let err = client(seed).err().unwrap();
            assert!(!format!("{err} {err:?}").contains("hunter2"));
        }
        for url in [
            "rediss://:hunter2@a:1,b:2?cluster=true#insecure",
            "rediss://:hunter2@a:1,?cluster=true",
            "rediss://:hunter2@a:1,b:notaport?cluster=true",
        ] {
            let err = RedisStock::connect_lazy(url, Duration::from_millis(100))
                .err()
                .unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{url}: {err:?}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("REDIS_URL"), "{shown}");
        }
    }

    #[test]
    fn a_cluster_with_no_reachable_node_is_unavailable() {
        // What the cluster client says when no connection to a slot's
        // master could be made (down, or its certificate refused).
        let err = RedisError::from((
            redis::ErrorKind::ClusterConnectionNotFound,
            "No connections found",
        ));
        assert!(matches!(unavailable(err), StoreError::Unavailable(_)));
        let err = RedisError::from((redis::ErrorKind::UnexpectedReturnType, "odd"));
        assert!(matches!(unavailable(err), StoreError::Protocol(_)));
    }

    #[test]
    fn an_order_id_names_its_shard() {
        let id = format!("n{}", "a".repeat(31));
        assert_eq!(shard_of_order(&id), None);
        assert_eq!(shard_of_order(&format!("{id}-s7")), Some(7));
        assert_eq!(shard_of_order("ord-s1"), None, "only the script's ids");
        assert_eq!(shard_of_order(&format!("{id}-x7")), None);
    }
}
