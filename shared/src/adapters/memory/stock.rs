//! The stock store in memory: one key group per sale (meta, stock, buyers,
//! reservations, outcome tally) and the locks, following the Lua scripts'
//! rules (see the module map of [`super`]). `unavailable` makes every call
//! fail like a Redis outage.

use super::derived_order_id;
use crate::clock;
use crate::domain::ledger::{HeldUnits, LedgerRead};
use crate::domain::stock_state::{
    Holding, LoadOutcome, PendingTransfer, RedisSnapshot, Returned, StoredReservation,
};
use crate::domain::{OrderId, Sale, SaleId, SalePhase};
use crate::ports::{
    ReleaseOutcome, Reservation, ReservationRecord, ReserveOutcome, ReserveRequest, Resolution,
    StockAdmin, StockStore, StockView, StoreError,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod state;
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
    seq: u64,
    /// The ledger position (`returnSeq`) a rebuild loaded the sale at.
    ledger_seq: Option<u64>,
    /// The ledger position a stock reset set the stock at (`stockSeq`).
    stock_seq: Option<u64>,
    buyers: HashMap<String, i64>,
    resv: HashMap<OrderId, Held>,
    /// What each resolved reservation was resolved as, for the tests.
    resolved: HashMap<OrderId, Resolution>,
    /// The purchase answers flushed to the store, by outcome.
    outcomes: BTreeMap<String, u64>,
}

impl MemorySale {
    fn new(sale: Sale, stock: i64, paused: bool) -> Self {
        Self {
            sale,
            stock,
            paused,
            seq: 0,
            ledger_seq: None,
            stock_seq: None,
            buyers: HashMap::new(),
            resv: HashMap::new(),
            resolved: HashMap::new(),
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
type Locks = HashMap<(SaleId, String), (String, Instant)>;

/// Stock store in memory. `unavailable` makes every call fail like a Redis outage.
#[derive(Clone, Default)]
pub struct MemoryStock {
    sales: Arc<Mutex<HashMap<SaleId, MemorySale>>>,
    locks: Arc<Mutex<Locks>>,
    /// Noticed losses: sale -> (noticed at, kept until), in the caller's ms.
    losses: Arc<Mutex<HashMap<SaleId, (i64, i64)>>>,
    pub unavailable: Arc<std::sync::atomic::AtomicBool>,
}

impl MemoryStock {
    fn lock(&self) -> Result<MutexGuard<'_, HashMap<SaleId, MemorySale>>, StoreError> {
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
        _since: std::time::Instant,
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
            held.replayed |= held.state == State::Queued;
            let ended = match held.state {
                State::Expired => Some(crate::domain::orders::OrderStatus::Expired),
                State::Rejected => Some(crate::domain::orders::OrderStatus::Rejected),
                State::Queued | State::Written => None,
            };
            return Ok(match ended {
                Some(status) => ReserveOutcome::ReplayedEnded {
                    order_id: held.reservation.order_id.clone(),
                    status,
                },
                None => ReserveOutcome::Replayed(held.reservation.clone()),
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
            None => derived_order_id('n', req.sale_id, req.user_id, &s.seq.to_string()),
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
            Some(held) if held.state != State::Queued || held.replayed => {
                return Ok(ReleaseOutcome::NotReleasable);
            }
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
        if matches!(resolution, Resolution::Rejected | Resolution::Abandoned) {
            s.drop_holding(&held.user, q);
        }
        if resolution == Resolution::Abandoned {
            s.give_back(q);
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

impl StockAdmin for MemoryStock {
    /// One shard per sale: nothing survives apart from the sale itself.
    type Survivors = ();

    async fn load_sale(&self, sale: &Sale, _version: i64) -> Result<LoadOutcome, StoreError> {
        let mut sales = self.lock()?;
        if let Some(s) = sales.get_mut(&sale.sale_id) {
            // As load_sale.lua: the stock is never overwritten; an edited
            // total moves it by the difference.
            let was = s.total();
            let now = i64::from(sale.total_stock);
            if was != now {
                s.stock = (s.stock + now - was).max(0);
            }
            s.sale = sale.clone();
            s.paused = sale.paused;
            return Ok(LoadOutcome::Refreshed {
                stock: u32::try_from(s.stock.max(0)).unwrap_or(0),
            });
        }
        let stock = i64::from(sale.total_stock);
        sales.insert(
            sale.sale_id.clone(),
            MemorySale::new(sale.clone(), stock, sale.paused),
        );
        Ok(LoadOutcome::Loaded)
    }

    async fn survivors(&self, _sale: &Sale) -> Result<Option<()>, StoreError> {
        Ok(None)
    }

    async fn rebuild_sale(
        &self,
        sale: &Sale,
        _version: i64,
        ledger: &LedgerRead,
        buyers: &[HeldUnits],
        _survivors: Option<&()>,
    ) -> Result<bool, StoreError> {
        if sale.shards > 1 {
            return Err(StoreError::Protocol(
                "the memory store keeps one shard per sale".into(),
            ));
        }
        let mut sales = self.lock()?;
        if sales.contains_key(&sale.sale_id) {
            return Ok(false);
        }
        let mut s = MemorySale::new(sale.clone(), ledger.available, sale.paused);
        s.ledger_seq = Some(ledger.return_seq);
        for b in buyers {
            s.buyers.insert(
                b.user_id.clone(),
                i64::try_from(b.units).unwrap_or(i64::MAX),
            );
        }
        for d in &ledger.decided {
            let order_id = OrderId::parse(&d.order_id).map_err(|e| StoreError::Protocol(e.0))?;
            let quantity =
                crate::domain::Quantity::new(d.quantity).map_err(|e| StoreError::Protocol(e.0))?;
            let reservation = Reservation {
                order_id: order_id.clone(),
                quantity,
                reserved_at_ms: d.at_ms,
                shard: 0,
            };
            let state = State::parse(d.state)?;
            let user = d.user_id.clone();
            s.resv.insert(
                order_id,
                Held {
                    user,
                    reservation,
                    state,
                    replayed: false,
                },
            );
        }
        sales.insert(sale.sale_id.clone(), s);
        Ok(true)
    }

    async fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
    ) -> Result<Returned, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(Returned::SaleMissing);
        };
        match s.resv.get_mut(order_id) {
            Some(held) if held.state == State::Expired => return Ok(Returned::Already),
            Some(held) => held.state = State::Expired,
            None => {
                // The marker, so a second return finds it.
                let reservation = Reservation {
                    order_id: order_id.clone(),
                    quantity: crate::domain::Quantity::new(u64::from(quantity))
                        .map_err(|e| StoreError::Protocol(e.0))?,
                    reserved_at_ms: clock::now_ms(),
                    shard: 0,
                };
                s.resv.insert(
                    order_id.clone(),
                    Held {
                        user: user_id.to_owned(),
                        reservation,
                        state: State::Expired,
                        replayed: false,
                    },
                );
            }
        }
        if let (Some(seq), Some(ledger)) = (return_seq, s.ledger_seq)
            && seq <= ledger
        {
            // Loaded from the ledger after this expiry: already in the stock.
            return Ok(Returned::Already);
        }
        let q = i64::from(quantity);
        s.drop_holding(user_id, q);
        if let (Some(seq), Some(reset)) = (return_seq, s.stock_seq)
            && seq <= reset
        {
            // A stock reset at a later ledger position has it in the stock.
            return Ok(Returned::Already);
        }
        Ok(Returned::Returned {
            stock: s.give_back(q),
        })
    }

    async fn set_status(&self, sale: &Sale) -> Result<u32, StoreError> {
        let mut sales = self.lock()?;
        Ok(match sales.get_mut(&sale.sale_id) {
            Some(s) => {
                s.paused = sale.paused;
                1
            }
            None => 0,
        })
    }

    async fn set_buyer(
        &self,
        sale_id: &SaleId,
        user_id: &str,
        read: i64,
        units: i64,
    ) -> Result<i64, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(0);
        };
        let now = s.buyers.get(user_id).copied().unwrap_or(0);
        if now != read || now == units {
            return Ok(now);
        }
        if units <= 0 {
            s.buyers.remove(user_id);
        } else {
            s.buyers.insert(user_id.to_owned(), units);
        }
        Ok(units)
    }

    async fn set_stock(
        &self,
        sale_id: &SaleId,
        read: i64,
        units: i64,
        ledger_seq: u64,
    ) -> Result<Option<i64>, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(None);
        };
        let want = units.min(s.total());
        if s.stock != read || want < 0 {
            return Ok(Some(s.stock));
        }
        s.stock = want;
        s.stock_seq = Some(s.stock_seq.map_or(ledger_seq, |had| had.max(ledger_seq)));
        Ok(Some(want))
    }

    async fn complete_transfer(
        &self,
        _sale_id: &SaleId,
        _transfer: &PendingTransfer,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn try_lock(
        &self,
        sale_id: &SaleId,
        name: &str,
        token: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut locks = self
            .locks
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
        let key = (sale_id.clone(), name.to_owned());
        let now = Instant::now();
        if locks.get(&key).is_some_and(|(_, until)| *until > now) {
            return Ok(false);
        }
        locks.insert(key, (token.to_owned(), now + ttl));
        Ok(true)
    }

    /// Kept beside the locks, on the caller's clock (`now_ms`), so a test
    /// can move time without waiting.
    async fn note_loss(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        ttl: Duration,
    ) -> Result<i64, StoreError> {
        let mut losses = self
            .losses
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let noted = losses
            .get(sale_id)
            .filter(|(_, until)| *until > now_ms)
            .map(|(at, _)| *at);
        Ok(match noted {
            Some(at) => at,
            None => {
                losses.insert(sale_id.clone(), (now_ms, now_ms.saturating_add(ttl_ms)));
                now_ms
            }
        })
    }

    async fn unlock(&self, sale_id: &SaleId, name: &str, token: &str) -> Result<(), StoreError> {
        if name == "loss" {
            let mut losses = self
                .losses
                .lock()
                .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
            if losses
                .get(sale_id)
                .is_some_and(|(at, _)| at.to_string() == token)
            {
                losses.remove(sale_id);
            }
            return Ok(());
        }
        let mut locks = self
            .locks
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))?;
        let key = (sale_id.clone(), name.to_owned());
        if locks.get(&key).is_some_and(|(owner, _)| owner == token) {
            locks.remove(&key);
        }
        Ok(())
    }

    /// The whole sale at one instant: never `moving`.
    async fn snapshot(&self, sale_id: &SaleId) -> Result<Option<RedisSnapshot>, StoreError> {
        let sales = self.lock()?;
        let Some(s) = sales.get(sale_id) else {
            return Ok(None);
        };
        Ok(Some(RedisSnapshot {
            stock: s.stock,
            stock_seq: s.stock_seq,
            total: s.total(),
            buyers: s.buyers.clone(),
            reservations: s
                .resv
                .iter()
                .map(|(id, h)| (id.to_string(), stored(h)))
                .collect(),
            shards: 1,
            ..RedisSnapshot::default()
        }))
    }

    async fn holdings(
        &self,
        sale_id: &SaleId,
        users: &[String],
    ) -> Result<HashMap<String, Holding>, StoreError> {
        let sales = self.lock()?;
        let s = sales.get(sale_id);
        Ok(users
            .iter()
            .map(|user| {
                let holding = s.map_or_else(Holding::default, |s| Holding {
                    count: s.buyers.get(user).copied(),
                    reservations: s
                        .resv
                        .iter()
                        .filter(|(_, h)| &h.user == user && h.state.live())
                        .map(|(id, h)| (id.to_string(), stored(h)))
                        .collect(),
                });
                (user.clone(), holding)
            })
            .collect())
    }

    async fn outcomes(&self, sale_id: &SaleId) -> Result<BTreeMap<String, u64>, StoreError> {
        let sales = self.lock()?;
        Ok(sales
            .get(sale_id)
            .map(|s| s.outcomes.clone())
            .unwrap_or_default())
    }
}
