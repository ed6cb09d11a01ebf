//! In-memory adapters of the ports, for unit tests of domain logic. They
//! follow the same rules as the Lua scripts, without the atomicity of Redis
//! (a mutex stands in for it). [`MemoryQueue`] is both the order queue and
//! its inspection (every message sent stays on it; it has no DLQ).
//! `OrderStore` has none yet: its rules are tested on DynamoDB.

use crate::clock;
use crate::domain::{OrderId, OrderMessage, Sale, SaleId, SalePhase};
use crate::ports::{
    CatalogError, OrderQueue, QueueDepth, QueueError, QueueInspector, ReleaseOutcome, Reservation,
    ReservationRecord, ReserveOutcome, ReserveRequest, Resolution, SaleCatalog, SendError,
    StockStore, StockView, StoreError,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// An order id made the way `purchase.lua` makes a keyed one: `prefix` and
/// 31 hex digits of a hash of `sale|user|last`. The user id may hold any
/// character, so it is never put into the id itself (it could leave the
/// id alphabet); the hash input names one (sale, user, last) because
/// neither the sale id nor `last` (a key or a number) can hold `|`.
fn derived_order_id(
    prefix: char,
    sale: &SaleId,
    user: &crate::domain::UserId,
    last: &str,
) -> Result<OrderId, crate::domain::InvalidValue> {
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        format!("{sale}|{user}|{last}").as_bytes(),
    );
    let mut id: String = std::iter::once(prefix.to_string())
        .chain(digest.as_ref().iter().map(|b| format!("{b:02x}")))
        .collect();
    id.truncate(32);
    OrderId::parse(&id)
}

#[derive(Debug, Clone)]
struct MemorySale {
    sale: Sale,
    stock: u32,
    paused: bool,
    seq: u64,
    buyers: HashMap<String, u32>,
    resv: HashMap<OrderId, (String, Reservation)>,
    resolved: HashMap<OrderId, Resolution>,
    /// The purchase answers flushed to the store, by outcome.
    outcomes: std::collections::BTreeMap<String, u64>,
}

/// Stock store in memory. `unavailable` makes every call fail like a Redis outage.
#[derive(Clone, Default)]
pub struct MemoryStock {
    sales: Arc<Mutex<HashMap<SaleId, MemorySale>>>,
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

    pub fn load(&self, sale: Sale) {
        if let Ok(mut sales) = self.sales.lock() {
            sales.insert(
                sale.sale_id.clone(),
                MemorySale {
                    stock: sale.total_stock,
                    sale,
                    paused: false,
                    seq: 0,
                    buyers: HashMap::new(),
                    resv: HashMap::new(),
                    resolved: HashMap::new(),
                    outcomes: std::collections::BTreeMap::new(),
                },
            );
        }
    }

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
        self.sales.lock().ok()?.get(sale_id).map(|s| s.stock)
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
    pub fn outcomes_of(&self, sale_id: &SaleId) -> std::collections::BTreeMap<String, u64> {
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
            && let Some((_, r)) = s.resv.get(id)
        {
            return Ok(ReserveOutcome::Replayed(r.clone()));
        }
        if s.paused {
            return Ok(ReserveOutcome::Paused);
        }
        // The order of purchase.lua: sold out before the clock, the gate
        // and the limit.
        let q = req.quantity.get();
        if s.stock < q {
            return Ok(ReserveOutcome::SoldOut { remaining: s.stock });
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
        if held + q > s.sale.per_user_limit {
            let mut order_ids: Vec<OrderId> = s
                .resv
                .iter()
                .filter(|(_, (u, _))| *u == user)
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
        s.stock -= q;
        *s.buyers.entry(user.clone()).or_default() += q;
        let resv = Reservation {
            order_id: order_id.clone(),
            quantity: req.quantity,
            reserved_at_ms: now,
            shard: 0,
        };
        s.resv.insert(order_id, (user, resv.clone()));
        Ok(ReserveOutcome::Reserved(resv))
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
        let Some((user, resv)) = s.resv.remove(order_id) else {
            return Ok(ReleaseOutcome::NotFound);
        };
        let q = resv.quantity.get();
        if let Some(held) = s.buyers.get_mut(&user) {
            *held = held.saturating_sub(q);
            if *held == 0 {
                s.buyers.remove(&user);
            }
        }
        s.stock = (s.stock + q).min(s.sale.total_stock);
        Ok(ReleaseOutcome::Released { stock: s.stock })
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
        let Some((user, resv)) = s.resv.get(order_id).cloned() else {
            return Ok(false);
        };
        // As resolve.lua: only a QUEUED reservation moves on.
        if s.resolved.contains_key(order_id) {
            return Ok(true);
        }
        let q = resv.quantity.get();
        if matches!(resolution, Resolution::Rejected | Resolution::Abandoned)
            && let Some(held) = s.buyers.get_mut(&user)
        {
            *held = held.saturating_sub(q);
        }
        if resolution == Resolution::Abandoned {
            s.stock = (s.stock + q).min(s.sale.total_stock);
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
        let reservation = order_id.and_then(|id| s.resv.get(id)).map(|(user, r)| {
            let state = match s.resolved.get(&r.order_id) {
                Some(Resolution::Written) => "WRITTEN",
                Some(_) => "REJECTED",
                None => "QUEUED",
            };
            ReservationRecord {
                user_id: user.clone(),
                quantity: u64::from(r.quantity.get()),
                at_ms: r.reserved_at_ms,
                state: state.into(),
            }
        });
        Ok(Some(StockView {
            remaining: i64::from(s.stock),
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

/// What a [`MemoryQueue`] does with the next sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    #[default]
    Accept,
    Reject,
    Ambiguous,
}

#[derive(Clone, Default)]
pub struct MemoryQueue {
    pub sent: Arc<Mutex<Vec<OrderMessage>>>,
    pub mode: Arc<Mutex<QueueMode>>,
}

impl MemoryQueue {
    pub fn set_mode(&self, mode: QueueMode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    pub fn messages(&self) -> Vec<OrderMessage> {
        self.sent.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

impl OrderQueue for MemoryQueue {
    async fn send(&self, message: &OrderMessage) -> Result<(), SendError> {
        let mode = self.mode.lock().map(|m| *m).unwrap_or_default();
        match mode {
            QueueMode::Accept => {
                if let Ok(mut sent) = self.sent.lock() {
                    sent.push(message.clone());
                }
                Ok(())
            }
            QueueMode::Reject => Err(SendError::Rejected("memory queue rejects".into())),
            QueueMode::Ambiguous => {
                // Like a timeout after the request went out: it did arrive.
                if let Ok(mut sent) = self.sent.lock() {
                    sent.push(message.clone());
                }
                Err(SendError::Ambiguous("memory queue timed out".into()))
            }
        }
    }
}

impl QueueInspector for MemoryQueue {
    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        Ok(QueueDepth {
            visible: self.messages().len() as u64,
            ..QueueDepth::default()
        })
    }

    async fn dlq_depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        Ok(None)
    }

    async fn order_ids(&self) -> Result<std::collections::HashSet<String>, QueueError> {
        Ok(self
            .messages()
            .iter()
            .map(|m| m.order_id.to_string())
            .collect())
    }
}

#[derive(Clone, Default)]
pub struct MemoryCatalog {
    sales: Arc<Mutex<HashMap<SaleId, Sale>>>,
    reads: Arc<AtomicUsize>,
}

impl MemoryCatalog {
    pub fn insert(&self, sale: Sale) {
        if let Ok(mut sales) = self.sales.lock() {
            sales.insert(sale.sale_id.clone(), sale);
        }
    }

    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl SaleCatalog for MemoryCatalog {
    async fn get_sale(&self, sale_id: &SaleId) -> Result<Option<Sale>, CatalogError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let sales = self
            .sales
            .lock()
            .map_err(|_| CatalogError::Unavailable("poisoned".into()))?;
        Ok(sales.get(sale_id).cloned())
    }

    async fn list_sales(&self) -> Result<Vec<Sale>, CatalogError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let sales = self
            .sales
            .lock()
            .map_err(|_| CatalogError::Unavailable("poisoned".into()))?;
        Ok(sales.values().cloned().collect())
    }
}

/// A sale for tests: open from a minute ago for an hour.
pub fn test_sale(id: &str, stock: u32, limit: u32) -> Result<Sale, crate::domain::InvalidValue> {
    let now = clock::now_ms();
    Ok(Sale {
        sale_id: SaleId::parse(id)?,
        name: format!("test sale {id}"),
        total_stock: stock,
        start_ms: now - 60_000,
        end_ms: now + 3_600_000,
        per_user_limit: limit,
        payment_window_seconds: 900,
        shards: 1,
        gate: false,
        paused: false,
    })
}
