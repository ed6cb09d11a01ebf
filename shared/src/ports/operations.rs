//! The operations path's ports (jobs, reconcile, the invariant check, the
//! live view and the console): queue inspection ([`QueueInspector`]), stock
//! administration ([`StockAdmin`]), the catalog's counters and reports
//! ([`CatalogAdmin`]) and the order ledger's reads ([`OrderLedger`]); the
//! DLQ's are in `dead_letters.rs`, the waitlist's stock in `waitlist.rs`.
//! Re-exported by [`crate::ports`], so every use names them
//! `crate::ports::X`.

use super::*;

// ------------------------------------------------------- queue inspection

/// How many messages a queue holds, by its own approximate counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
}

impl QueueDepth {
    pub fn total(self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

/// The queue could not be read; the error and its causes on one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct QueueError(pub String);

/// What the operations path reads of the orders queue and its DLQ, without
/// taking a message off either: whether orders are still on their way
/// (prewarm's rebuild waits for them, reconcile compares stock only when
/// none are), and which orders they carry.
pub trait QueueInspector: Send + Sync {
    /// The orders queue's depth.
    fn depth(&self) -> impl Future<Output = Result<QueueDepth, QueueError>> + Send;

    /// The DLQ's depth; `None` when no DLQ is configured.
    fn dlq_depth(&self) -> impl Future<Output = Result<Option<QueueDepth>, QueueError>> + Send;

    /// Order ids of the messages on the queue and the DLQ. Every message
    /// stays where it is (reading one may count towards its redrive limit).
    fn order_ids(
        &self,
    ) -> impl Future<Output = Result<std::collections::HashSet<String>, QueueError>> + Send;
}

// ------------------------------------------------------ stock administration

/// What the operations path does to the stock store beyond a purchase's
/// calls: load a sale, rebuild a lost one from the ledger, give an expired
/// order's units back, the compare-and-set repairs, an operator's pause,
/// locks, and the reads reconcile and the live view make. One capability a
/// trait, each implemented by an adapter in the file that does it; this is
/// their sum, which every store that has them all has.
pub trait StockAdmin:
    StockStore + StockLoading + StockRepair + StockReading + LiveFigures + WriteErrorLog + WaitlistStock
{
}

impl<T> StockAdmin for T where
    T: StockStore
        + StockLoading
        + StockRepair
        + StockReading
        + LiveFigures
        + WriteErrorLog
        + WaitlistStock
{
}

/// Loading a sale into the stock store: the first load, the refresh that
/// follows an edit, the rebuild of a lost sale from the ledger, and the
/// units an expired order gives back.
pub trait StockLoading: Send + Sync {
    /// What a rebuild of a sharded sale reads of the shards that kept their
    /// keys, before the ledger is read (opaque: only the same store uses it).
    type Survivors: Send + Sync;

    /// A rebuild staged page by page ([`Self::begin_rebuild`]; opaque).
    type Rebuild: Send;

    /// Loads a sale (meta and stock) unless it is loaded; never overwrites
    /// live stock, only refreshes its window, limit, status and expiry.
    fn load_sale(
        &self,
        sale: &Sale,
        version: i64,
    ) -> impl Future<Output = Result<LoadOutcome, StoreError>> + Send;

    /// Refreshes a sale the store holds, as [`Self::load_sale`] does a
    /// loaded one; false, writing nothing, when it holds none (lost since it
    /// was seen: a sale that was selling is rebuilt from the ledger, never
    /// made anew with its whole stock). `version` is the sale item's
    /// version the sale was read with: a refresh from an earlier version
    /// than one already refreshed from writes nothing (a slow prewarm
    /// never puts back what an operator's end or edit changed).
    fn refresh_sale(
        &self,
        sale: &Sale,
        version: i64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// What the surviving shards of a sharded sale hold, read before the
    /// ledger for a rebuild; `None` for a sale of one shard.
    fn survivors(
        &self,
        sale: &Sale,
    ) -> impl Future<Output = Result<Option<Self::Survivors>, StoreError>> + Send;

    /// Starts a rebuild of a lost sale from the ledger: what follows is
    /// staged in the store under this rebuild's own name and goes live
    /// only at [`Self::commit_rebuild`], so a rebuild that dies half way
    /// sells nothing, and two never mix. `survivors` is what
    /// [`Self::survivors`] read before the ledger was read (required for a
    /// sharded sale).
    fn begin_rebuild(
        &self,
        sale: &Sale,
        version: i64,
        survivors: Option<Self::Survivors>,
    ) -> impl Future<Output = Result<Self::Rebuild, StoreError>> + Send;

    /// Stages one page of the ledger's orders; a page staged twice (a
    /// lost answer) counts once.
    fn stage_rebuild(
        &self,
        rebuild: &mut Self::Rebuild,
        page: &LedgerPage,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Loads the staged sale with the stock the ledger had `at`, unless the
    /// sale is there (then the staged keys are dropped). The buyers it
    /// loaded if this call loaded it, `None` if it was there.
    fn commit_rebuild(
        &self,
        rebuild: Self::Rebuild,
        at: LedgerPosition,
    ) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// Gives an expired order's units back, once: `return_seq` is the
    /// ledger position of the expiry; a sale loaded from the ledger at or
    /// after it has the units already. The buyer's count goes down by
    /// `quantity`; the stock goes up by `to_stock` of them (the rest were
    /// offered to the waitlist: they are other buyers' orders now).
    fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
        to_stock: u32,
    ) -> impl Future<Output = Result<Returned, StoreError>> + Send;
}

/// An operator's status on the store, the store's clock, the
/// compare-and-set repairs reconcile makes, and the locks the jobs take.
pub trait StockRepair: Send + Sync {
    /// An operator's pause or resume on every key group the store holds.
    /// Returns how many took it (0: the sale is not loaded).
    fn set_status(&self, sale: &Sale) -> impl Future<Output = Result<u32, StoreError>> + Send;

    /// Opens every key group of the sale that a load closed (`LOADING`: a
    /// load or rebuild given a paused sale, see `load_sale.lua`) and nothing
    /// else: a group an operator paused since stays paused. Prewarm calls it
    /// once a read of the table made after its own write says the sale is
    /// live. Returns how many groups it opened.
    fn open_loaded(&self, sale: &Sale) -> impl Future<Output = Result<u32, StoreError>> + Send;

    /// The store's own clock (epoch ms): Redis's `TIME`, which every
    /// purchase decision reads. An operator's "end now" is stamped no later
    /// than it, so a function whose clock runs ahead cannot end a sale in
    /// the future.
    fn clock_ms(&self) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// Sets a buyer's count to `units` if it is still `read` (compare and
    /// set). Returns the count now.
    fn set_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &str,
        read: i64,
        units: i64,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// Sets the stock of a sale of one shard to `units` (never above the
    /// total) if it is still `read`, `units` being the ledger's figure at
    /// position `ledger_seq` (its `returnSeq`): a later return of an expiry
    /// at or before it gives back no stock, only the buyer's count.
    /// Returns the stock now; `None` when the sale has no keys.
    fn set_stock(
        &self,
        sale_id: &SaleId,
        read: i64,
        units: i64,
        ledger_seq: u64,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send;

    /// Credits a transfer between shards that its receiver never got.
    /// Idempotent; true when this call credited it.
    fn complete_transfer(
        &self,
        sale_id: &SaleId,
        transfer: &PendingTransfer,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// A lock with an owner token and an expiry. False when someone else
    /// holds it.
    fn try_lock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
        ttl: std::time::Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The moment a lost sale's loss was first noticed: `now_ms` if this
    /// call is the first (kept for `ttl`), else the earlier one. Cleared
    /// by [`StockRepair::unlock`] of lock `loss` with that moment as token.
    fn note_loss(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        ttl: std::time::Duration,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// Releases a lock taken with `token`; someone else's is left alone.
    fn unlock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// What the store holds for a sale, as reconcile and the invariant check
/// read it.
pub trait StockReading: Send + Sync {
    /// Everything the store holds for a sale, or `None` when it has no keys.
    fn snapshot(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<RedisSnapshot>, StoreError>> + Send;

    /// The same read as [`Self::snapshot`], its buyers and reservations
    /// handed to `sink` as they are read instead of kept: the reader holds
    /// what the sink keeps, not the sale. `None` when it has no keys.
    fn stream_snapshot(
        &self,
        sale_id: &SaleId,
        sink: &mut dyn SnapshotSink,
    ) -> impl Future<Output = Result<Option<SnapshotHead>, StoreError>> + Send {
        async move {
            let Some(snap) = self.snapshot(sale_id).await? else {
                return Ok(None);
            };
            let head = snap.head();
            for (user, count) in snap.buyers {
                sink.buyer(0, user, count);
            }
            for (id, r) in snap.reservations {
                sink.reservation(0, id, r);
            }
            Ok(Some(head))
        }
    }

    /// Each of `users`' count and reservations, each read at one instant.
    fn holdings(
        &self,
        sale_id: &SaleId,
        users: &[String],
    ) -> impl Future<Output = Result<HashMap<String, Holding>, StoreError>> + Send;
}

/// The figures the live view and the console read beside the ledger: the
/// purchase answers by outcome and over time, when the sale sold out, and
/// the shared count of its orders. A store that keeps none answers empty.
pub trait LiveFigures: Send + Sync {
    /// The sale's purchase answers by outcome, as flushed so far.
    fn outcomes(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<std::collections::BTreeMap<String, u64>, StoreError>> + Send;

    /// When the sale first sold out (ms); `None` before (or never recorded).
    fn sold_out_at(
        &self,
        _sale: &Sale,
    ) -> impl Future<Output = Result<Option<i64>, StoreError>> + Send {
        std::future::ready(Ok(None))
    }

    /// The answers per 10-second bucket since the start, oldest first.
    fn funnel(
        &self,
        _sale_id: &SaleId,
    ) -> impl Future<Output = Result<Vec<FunnelBucket>, StoreError>> + Send {
        std::future::ready(Ok(Vec::new()))
    }

    /// The sale's orders by status as the live view last counted them, for
    /// every console to share ([`crate::app::live`]); `None` when none is
    /// kept (a store that keeps none counts on every poll).
    fn order_counts(
        &self,
        _sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<OrderCounts>, StoreError>> + Send {
        std::future::ready(Ok(None))
    }

    /// Claims the sale's next count of its orders for `hold`: true for one
    /// caller in each `hold`, whatever the number of consoles polling.
    fn claim_order_count(
        &self,
        _sale_id: &SaleId,
        _hold: std::time::Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        std::future::ready(Ok(true))
    }

    /// Keeps a count of the sale's orders for [`Self::order_counts`].
    fn store_order_counts(
        &self,
        _sale_id: &SaleId,
        _counts: &OrderCounts,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(Ok(()))
    }
}

/// A sale's orders by status, counted on the orders index at `at_ms`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderCounts {
    pub at_ms: i64,
    pub counts: std::collections::BTreeMap<String, u64>,
}

/// One bucket of a sale's funnel: its start (ms) and its answers by outcome.
pub type FunnelBucket = (i64, std::collections::BTreeMap<String, u64>);

// ------------------------------------------------------ catalog administration

/// What the operations path reads and writes of the `sales` table beyond
/// the purchase path's lookups: the counters, the mark that a sale was
/// loaded into the stock store, and the last reconcile report.
pub trait CatalogAdmin: SaleCatalog {
    /// A sale with its counters, read consistently.
    fn get_record(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<(Sale, SaleCounters)>, CatalogError>> + Send;

    /// Marks the sale loaded (the first time only), before its keys exist;
    /// says whether it had been before.
    fn mark_loaded(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> impl Future<Output = Result<bool, CatalogError>> + Send;

    /// Keeps the last reconcile report (JSON) with the sale.
    fn store_report(
        &self,
        sale_id: &SaleId,
        json: &str,
    ) -> impl Future<Output = Result<(), CatalogError>> + Send;

    /// A sale and its last reconcile report, in one read.
    fn sale_with_report(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<(Sale, Option<String>)>, CatalogError>> + Send;
}

/// What [`SaleEditor::upsert_sale`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upsert {
    Created,
    Updated,
    /// The sale has ended: nothing of it changes any more.
    Ended,
    /// The sale has started: its stock, shards and start can no longer
    /// change.
    StartedStockChange,
    /// The sale is loaded into the stock store and the edit cannot follow
    /// it there exactly; why, for the operator.
    Loaded(&'static str),
    /// Someone else changed it meanwhile; retry.
    Conflict,
}

/// The operator's edits of the `sales` table that the console's use cases
/// make: every sale with its counters, and a sale created or changed under
/// the domain's edit rule ([`crate::domain::sale_spec`]).
pub trait SaleEditor: CatalogAdmin {
    /// Every sale with its counters.
    fn list_records(
        &self,
    ) -> impl Future<Output = Result<Vec<(Sale, SaleCounters)>, CatalogError>> + Send;

    /// Creates a sale, or changes its definition as the edit rule allows;
    /// what it did, and the sale as it was before (for the audit trail).
    fn upsert_sale(
        &self,
        sale: &Sale,
        now_ms: i64,
    ) -> impl Future<Output = Result<(Upsert, Option<Sale>), CatalogError>> + Send;

    /// An operator's pause (`true`) or resume, kept on the sale item; the
    /// sale as it was before, `None` when there is no such sale.
    fn set_paused(
        &self,
        sale_id: &SaleId,
        paused: bool,
    ) -> impl Future<Output = Result<Option<Sale>, CatalogError>> + Send;
}

// ------------------------------------------------------------- audit trail

/// The most entries one read of the trail answers.
pub const AUDIT_PAGE_MAX: u32 = 100;
/// Which entries of the trail a read wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditRange {
    /// Up to `limit` entries after entry `after` (0: from the first).
    After { after: u64, limit: u32 },
    /// The newest `n` entries.
    Last(u32),
}

/// One page of the trail, oldest first; each entry carries its `seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditPage {
    pub entries: Vec<serde_json::Value>,
    /// Entries numbered so far.
    pub total: u64,
    /// The `after` of the next page; `None` when this page reaches the end.
    pub next: Option<u64>,
}

/// What an operator reads back of a sale's history: the audit trail of
/// every admin action on it, and the last reconcile report.
pub trait AuditTrail: Send + Sync {
    /// Appends one entry (a JSON object) to the sale's trail.
    fn append_audit(
        &self,
        sale_id: &SaleId,
        entry: &serde_json::Value,
    ) -> impl Future<Output = Result<(), CatalogError>> + Send;

    /// A page of the sale's trail; `None` when there is no such sale.
    fn audit(
        &self,
        sale_id: &SaleId,
        range: AuditRange,
    ) -> impl Future<Output = Result<Option<AuditPage>, CatalogError>> + Send;

    /// The last reconcile report (JSON), if any.
    fn last_report(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<String>, CatalogError>> + Send;
}

// ------------------------------------------------------------ order ledger

/// What the operations path reads of the `orders` table beyond
/// [`OrderStore`]: a sale's orders, the ones due for expiry, buyers'
/// records and counts by status.
pub trait OrderLedger: OrderStore + WaitlistStore {
    /// Every order of a sale, whatever its status, oldest first (an index:
    /// it may lag the table by a moment).
    fn all_orders_of_sale(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Vec<Order>, OrderStoreError>> + Send;

    /// Every order of a sale, whatever its status, in pages sent to
    /// `pages` as they are read (in no particular order): a reader that
    /// takes them one at a time holds a few pages, not the sale. Returns
    /// once every page is sent; fails if `pages` is closed before.
    fn send_orders_of_sale(
        &self,
        sale_id: &SaleId,
        pages: tokio::sync::mpsc::Sender<Vec<Order>>,
    ) -> impl Future<Output = Result<(), OrderStoreError>> + Send;

    /// How many orders of a sale are in one status.
    fn count_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> impl Future<Output = Result<u64, OrderStoreError>> + Send;

    /// Up to `limit` orders of a sale still `PENDING_PAYMENT` whose payment
    /// window closed at or before `now_ms`, earliest first.
    fn due_unpaid(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<OrderId>, OrderStoreError>> + Send;

    /// Units each of `users` holds by their buyer record (0 without one).
    fn held_by_all(
        &self,
        sale_id: &SaleId,
        users: &[&UserId],
    ) -> impl Future<Output = Result<HashMap<String, u64>, OrderStoreError>> + Send;
}
