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
//! borrows ([`crate::domain::borrowing`] decides whether, from whom and how
//! much): `lend.lua` on another shard moves units out and records the
//! transfer, `receive.lua` credits the home shard once; reconcile completes a
//! transfer whose second step never ran. Order ids end in `-s<k>` so every
//! later step (write, release, expiry) finds its shard from the id alone.
//!
//! Reconcile reads a sale in bounded steps ([`crate::ports::StockReading::snapshot`]:
//! `HSCAN` chunks between two `snapshot_head.lua` reads), so a script that
//! changes a key group's stock or reservations must bump its meta `epoch`
//! (every one does but `purchase.lua`, which always lowers the stock); a
//! new one that does not would let a read that it ran through pass as one
//! instant.
//!
//! # Layout
//!
//! - `connection.rs`: the node or cluster connection, `REDIS_URL`, EVALSHA.
//! - `keys.rs`: key names per sale and shard; the shard of a buyer or order.
//! - `scripts.rs`, `scripts/`: the Lua scripts, one typed arguments struct
//!   per script, and the arguments prepared once.
//! - `replies.rs`: script replies parsed into typed values.
//!
//! Each file below implements the ports it is about itself (the parts of
//! [`StockAdmin`] are one trait a capability):
//!
//! - `stock_store.rs`: [`StockStore`] (purchase, release, views).
//! - `shards.rs`: layouts, and moving borrowed units between shards.
//! - `rebuild.rs`: [`StockLoading`]: loading a sale, rebuilding a lost one,
//!   returning units.
//! - `snapshot.rs`: [`StockReading`]: reconcile's paced read, per-buyer
//!   holdings, and what a lost shard's rebuild reads of the survivors
//!   (`survivor.lua`).
//! - `admin.rs`: [`StockRepair`]: compare-and-set repairs (a transfer
//!   between shards among them), pause, the store's clock, locks.
//! - `live.rs`: [`LiveFigures`]: the tally, the funnel, when a sale first
//!   sold out, the live view's shared count of the orders.
//! - `funnel.rs`: the funnel's buckets (the dashboard's history).
//! - `write_errors.rs`: [`WriteErrorLog`]: why the order-writer last failed
//!   each order (the DLQ view's `lastError`).
//! - `draw.rs`: a lottery window's tickets and draw ([`DrawStore`]).
//! - `waitlist.rs`: [`crate::ports::WaitlistStock`]: admission to a sale's
//!   waitlist, and the buyer of an offered order counted once.
//!
//! [`StockStore`]: crate::ports::StockStore
//! [`StockAdmin`]: crate::ports::StockAdmin
//! [`StockLoading`]: crate::ports::StockLoading
//! [`StockReading`]: crate::ports::StockReading
//! [`StockRepair`]: crate::ports::StockRepair
//! [`LiveFigures`]: crate::ports::LiveFigures
//! [`WriteErrorLog`]: crate::ports::WriteErrorLog
//! [`DrawStore`]: crate::ports::DrawStore

mod admin;
mod connection;
mod draw;
mod funnel;
mod keys;
mod live;
mod rebuild;
mod replies;
mod scripts;
mod shards;
mod snapshot;
mod stock_store;
mod waitlist;
mod write_errors;

pub use crate::config::RateLimits;
pub use crate::domain::shard_layout::ShardLayout;
pub use funnel::{FUNNEL_BUCKET_MS, FUNNEL_BUCKETS};
pub use keys::{KEY_TTL_AFTER_END_MS, SaleKeys, home_shard, shard_of_order};
pub use rebuild::{
    DecidedOrder, LedgerPage, LedgerPosition, RedisRebuild, Returned, STAGE_CHUNK, Survivors,
};
pub use replies::{Holding, LoadOutcome, PendingTransfer, StoredReservation};
pub use scripts::PURCHASE_SOURCE;
pub use snapshot::{RedisSnapshot, SCAN_CHUNK, SCAN_INTERVAL};
pub use write_errors::WRITE_ERRORS_TTL;

use connection::Conn;
use std::time::Duration;

/// The stock store on Redis: one per execution environment, cheap to clone
/// (every field is shared), with the caches that spare the purchase work.
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
    dry: std::sync::Arc<crate::domain::borrowing::DryShards>,
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
        tokio::time::Instant,
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

/// Past this many sales the key cache starts over (it only saves formatting).
const KEY_CACHE_SALES: usize = 4_096;
