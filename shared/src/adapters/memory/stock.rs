//! The stock store in memory: one key group per sale (meta, stock, buyers,
//! reservations, outcome tally) and the locks, following the Lua scripts'
//! rules (see the module map of [`super`]). `unavailable` makes every call
//! fail like a Redis outage.

use super::derived_order_id;
use crate::clock;
use crate::domain::ledger::{DecidedOrder, LedgerPage, LedgerPosition};
use crate::domain::stock_state::{
    Holding, LoadOutcome, PendingTransfer, RedisSnapshot, Returned, StoredReservation,
};
use crate::domain::{OrderId, Sale, SaleId, SalePhase};
use crate::ports::{
    LiveFigures, ReleaseOutcome, Reservation, ReservationRecord, ReserveOutcome, ReserveRequest,
    Resolution, StockLoading, StockReading, StockRepair, StockStore, StockView, StoreError,
    WriteErrorLog,
};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

mod admin;
mod state;
mod waitlist;
use state::State;

#[derive(Debug, Clone)]
struct Held {
    user: String,
    reservation: Reservation,
    state: State,
    /// A keyed retry was answered with it while `Queued` (purchase.lua's
    /// `replayed`): release.lua no longer gives it back.
    replayed: bool,
}

#[derive(Debug, Clone)]
struct MemorySale {
    sale: Sale,
    stock: i64,
    paused: bool,
    /// Closed by a load, not by an operator (`LOADING`): only
    /// [`crate::ports::StockRepair::open_loaded`] opens it.
    loading: bool,
    /// The sale item's version the last refresh was read at.
    def_version: Option<i64>,
    seq: u64,
    /// The ledger position (`returnSeq`) a rebuild loaded the sale at.
    ledger_seq: Option<u64>,
    /// The ledger position a stock reset set the stock at (`stockSeq`).
    stock_seq: Option<u64>,
    buyers: BTreeMap<String, i64>,
    resv: BTreeMap<OrderId, Held>,
    /// What each resolved reservation was resolved as, for the tests.
    resolved: BTreeMap<OrderId, Resolution>,
    /// The purchase answers flushed to the store, by outcome.
    outcomes: BTreeMap<String, u64>,
}

impl MemorySale {
    fn new(sale: Sale, stock: i64, paused: bool) -> Self {
        Self {
            sale,
            stock,
            paused,
            loading: paused,
            def_version: None,
            seq: 0,
            ledger_seq: None,
            stock_seq: None,
            buyers: BTreeMap::new(),
            resv: BTreeMap::new(),
            resolved: BTreeMap::new(),
            outcomes: BTreeMap::new(),
        }
    }

    fn total(&self) -> i64 {
        i64::from(self.sale.total_stock)
    }

    /// `drop_holding` of `holdings.lua`: the count goes down, and away at 0.
    fn drop_holding(&mut self, user: &str, units: i64) {
        let left = self.buyers.get(user).copied().unwrap_or(0) - units;
        if left <= 0 {
            self.buyers.remove(user);
        } else {
            self.buyers.insert(user.to_owned(), left);
        }
    }

    fn give_back(&mut self, units: i64) -> i64 {
        self.stock = (self.stock + units).min(self.total());
        self.stock
    }
}

fn units(r: &Reservation) -> i64 {
    i64::from(r.quantity.get())
}

fn stored(held: &Held) -> StoredReservation {
    StoredReservation {
        user_id: held.user.clone(),
        quantity: u64::from(held.reservation.quantity.get()),
        at_ms: held.reservation.reserved_at_ms.to_string(),
        state: held.state.as_str().into(),
    }
}

/// (sale, lock name) -> owner token and until when.
type Locks = BTreeMap<(SaleId, String), (String, tokio::time::Instant)>;

/// The stock store's keys at one moment ([`MemoryStock::checkpoint`]).
#[derive(Clone, Default)]
pub struct StockCheckpoint(BTreeMap<SaleId, MemorySale>);

/// Stock store in memory. `unavailable` makes every call fail like a Redis outage.
#[derive(Clone, Default)]
pub struct MemoryStock {
    sales: Arc<Mutex<BTreeMap<SaleId, MemorySale>>>,
    locks: Arc<Mutex<Locks>>,
    /// Noticed losses: sale -> (noticed at, kept until), in the caller's ms.
    losses: Arc<Mutex<BTreeMap<SaleId, (i64, i64)>>>,
    /// Numbers the unkeyed order ids across the whole store, so a sale
    /// loaded again after a loss never makes an id it made before (Redis's
    /// script takes a random request id for them).
    next_id: Arc<std::sync::atomic::AtomicU64>,
    pub unavailable: Arc<std::sync::atomic::AtomicBool>,
}

impl MemoryStock {
    fn lock(&self) -> Result<MutexGuard<'_, BTreeMap<SaleId, MemorySale>>, StoreError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("memory store switched off".into()));
        }
        self.sales
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))
    }

    /// Loads a sale with its whole stock, live (a test's set-up).
    pub fn load(&self, sale: Sale) {
        if let Ok(mut sales) = self.sales.lock() {
            let stock = i64::from(sale.total_stock);
            sales.insert(sale.sale_id.clone(), MemorySale::new(sale, stock, false));
        }
    }

    /// What the store holds now, to be put back by [`Self::restore`]: a
    /// replica that has seen the writes up to here and none after.
    pub fn checkpoint(&self) -> StockCheckpoint {
        StockCheckpoint(self.sales.lock().map(|s| s.clone()).unwrap_or_default())
    }

    /// Puts back what a [`Self::checkpoint`] held, as a failover to a
    /// replica that missed every write since: the writes after it are lost.
    pub fn restore(&self, checkpoint: &StockCheckpoint) {
        if let Ok(mut sales) = self.sales.lock() {
            *sales = checkpoint.0.clone();
        }
    }

    /// Drops a sale's keys, as a Redis that lost them.
    pub fn forget(&self, sale_id: &SaleId) {
        if let Ok(mut sales) = self.sales.lock() {
            sales.remove(sale_id);
        }
    }

    pub fn pause(&self, sale_id: &SaleId) {
        if let Ok(mut sales) = self.sales.lock()
            && let Some(s) = sales.get_mut(sale_id)
        {
            s.paused = true;
        }
    }

    pub fn stock_of(&self, sale_id: &SaleId) -> Option<u32> {
        self.sales
            .lock()
            .ok()?
            .get(sale_id)
            .and_then(|s| u32::try_from(s.stock).ok())
    }

    pub fn resolution_of(&self, sale_id: &SaleId, order_id: &OrderId) -> Option<Resolution> {
        self.sales
            .lock()
            .ok()?
            .get(sale_id)?
            .resolved
            .get(order_id)
            .copied()
    }

    /// The answers flushed for the sale, by outcome.
    pub fn outcomes_of(&self, sale_id: &SaleId) -> BTreeMap<String, u64> {
        self.sales
            .lock()
            .ok()
            .and_then(|s| s.get(sale_id).map(|s| s.outcomes.clone()))
            .unwrap_or_default()
    }

    pub fn reservations_of(&self, sale_id: &SaleId) -> usize {
        self.sales
            .lock()
            .ok()
            .and_then(|s| s.get(sale_id).map(|s| s.resv.len()))
            .unwrap_or(0)
    }
}

impl StockStore for MemoryStock {
    /// Exact: the in-memory store knows every reservation.
    async fn keyed_may_exist(
        &self,
        sale_id: &SaleId,
        user_id: &crate::domain::UserId,
        key: &crate::domain::IdempotencyKey,
        _since: tokio::time::Instant,
    ) -> Result<bool, StoreError> {
        let id = derived_order_id('k', sale_id, user_id, key.as_str())
            .map_err(|e| StoreError::Protocol(e.0))?;
        let sales = self.lock()?;
        Ok(sales.get(sale_id).is_some_and(|s| s.resv.contains_key(&id)))
    }

    async fn reserve(&self, req: ReserveRequest<'_>) -> Result<ReserveOutcome, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(req.sale_id) else {
            return Ok(ReserveOutcome::SaleMissing);
        };
        let keyed_id = req
            .idempotency_key
            .map(|k| derived_order_id('k', req.sale_id, req.user_id, k.as_str()));
        if let Some(Ok(id)) = &keyed_id
            && let Some(held) = s.resv.get_mut(id)
        {
            // As purchase.lua: a replay of an order not written yet sends
            // it again (no limiter here).
            let resend = held.state == State::Queued;
            held.replayed |= resend;
            let ended = match held.state {
                State::Expired => Some(crate::domain::orders::OrderStatus::Expired),
                State::Rejected => Some(crate::domain::orders::OrderStatus::Rejected),
                State::Queued | State::Written | State::Offering(_) => None,
            };
            return Ok(match ended {
                Some(status) => ReserveOutcome::ReplayedEnded {
                    order_id: held.reservation.order_id.clone(),
                    status,
                },
                None => ReserveOutcome::Replayed {
                    reservation: held.reservation.clone(),
                    resend,
                },
            });
        }
        if s.paused {
            // An end overrides a pause, as in purchase.lua.
            if s.sale.phase_at(clock::now_ms()) == SalePhase::Ended {
                return Ok(ReserveOutcome::Ended);
            }
            return Ok(ReserveOutcome::Paused);
        }
        // The order of purchase.lua: sold out before the clock, the gate
        // and the limit.
        let q = req.quantity.get();
        if s.stock < i64::from(q) {
            return Ok(ReserveOutcome::SoldOut {
                remaining: u32::try_from(s.stock.max(0)).unwrap_or(0),
            });
        }
        let now = clock::now_ms();
        match s.sale.phase_at(now) {
            SalePhase::NotStarted => {
                return Ok(ReserveOutcome::NotStarted {
                    start_ms: s.sale.start_ms,
                });
            }
            SalePhase::Ended => return Ok(ReserveOutcome::Ended),
            SalePhase::Live => {}
        }
        if s.sale.gate && req.gate_nonce.is_none() {
            return Ok(ReserveOutcome::GateRequired);
        }
        let user = req.user_id.to_string();
        let held = s.buyers.get(&user).copied().unwrap_or(0);
        if held + i64::from(q) > i64::from(s.sale.per_user_limit) {
            // The buyer's list: their live reservations.
            let mut order_ids: Vec<OrderId> = s
                .resv
                .iter()
                .filter(|(_, h)| h.user == user && h.state.live())
                .map(|(id, _)| id.clone())
                .collect();
            order_ids.sort();
            return Ok(ReserveOutcome::LimitExceeded { order_ids });
        }
        s.seq += 1;
        let order_id = match keyed_id {
            Some(id) => id,
            None => {
                let n = self.next_id.fetch_add(1, Ordering::SeqCst);
                derived_order_id('n', req.sale_id, req.user_id, &n.to_string())
            }
        }
        .map_err(|e| StoreError::Protocol(e.0))?;
        s.stock -= i64::from(q);
        *s.buyers.entry(user.clone()).or_default() += i64::from(q);
        let reservation = Reservation {
            order_id: order_id.clone(),
            quantity: req.quantity,
            reserved_at_ms: now,
            shard: 0,
        };
        s.resv.insert(
            order_id,
            Held {
                user,
                reservation: reservation.clone(),
                state: State::Queued,
                replayed: false,
            },
        );
        Ok(ReserveOutcome::Reserved(reservation))
    }

    async fn release(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
    ) -> Result<ReleaseOutcome, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(ReleaseOutcome::SaleMissing);
        };
        match s.resv.get(order_id) {
            None => return Ok(ReleaseOutcome::NotFound),
            Some(held) if held.state != State::Queued => {
                return Ok(ReleaseOutcome::NotReleasable);
            }
            Some(held) if held.replayed => return Ok(ReleaseOutcome::HeldByRetry),
            Some(_) => {}
        }
        let Some(held) = s.resv.remove(order_id) else {
            return Ok(ReleaseOutcome::NotFound);
        };
        let q = units(&held.reservation);
        s.drop_holding(&held.user, q);
        let stock = s.give_back(q);
        Ok(ReleaseOutcome::Released {
            stock: u32::try_from(stock.max(0)).unwrap_or(0),
        })
    }

    async fn resolve(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        resolution: Resolution,
    ) -> Result<bool, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(false);
        };
        let Some(held) = s.resv.get(order_id).cloned() else {
            return Ok(false);
        };
        // As resolve.lua: only a QUEUED reservation moves on.
        if held.state != State::Queued {
            return Ok(true);
        }
        let q = units(&held.reservation);
        if matches!(
            resolution,
            Resolution::Rejected | Resolution::Abandoned | Resolution::AbandonedToLine { .. }
        ) {
            s.drop_holding(&held.user, q);
        }
        if matches!(
            resolution,
            Resolution::Abandoned | Resolution::AbandonedToLine { .. }
        ) {
            // Units the give-up offered to the line stay out.
            s.give_back(q.saturating_sub(i64::from(resolution.offered())));
        }
        let state = match resolution {
            Resolution::Written => State::Written,
            _ => State::Rejected,
        };
        if let Some(h) = s.resv.get_mut(order_id) {
            h.state = state;
        }
        s.resolved.insert(order_id.clone(), resolution);
        Ok(true)
    }

    async fn view(
        &self,
        sale_id: &SaleId,
        order_id: Option<&OrderId>,
    ) -> Result<Option<StockView>, StoreError> {
        let sales = self.lock()?;
        let Some(s) = sales.get(sale_id) else {
            return Ok(None);
        };
        let reservation = order_id
            .and_then(|id| s.resv.get(id))
            .map(|h| ReservationRecord {
                user_id: h.user.clone(),
                quantity: u64::from(h.reservation.quantity.get()),
                at_ms: h.reservation.reserved_at_ms,
                state: h.state.as_str().into(),
            });
        Ok(Some(StockView {
            remaining: s.stock,
            paused: s.paused,
            reservation,
        }))
    }

    async fn add_outcomes(
        &self,
        sale_id: &SaleId,
        counts: &[(&'static str, u64)],
    ) -> Result<bool, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(false);
        };
        for (outcome, n) in counts {
            *s.outcomes.entry((*outcome).to_owned()).or_default() += n;
        }
        Ok(true)
    }
}
