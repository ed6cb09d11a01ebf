//! The operator's and the jobs' side of the stock store in memory
//! ([`crate::ports::StockAdmin`]): loading, rebuilding, returning units, locks and
//! snapshots, as the Lua scripts do them.

use super::*;

impl StockLoading for MemoryStock {
    /// One shard per sale: nothing survives apart from the sale itself.
    type Survivors = ();

    /// The sale and the decided orders staged so far, by order id.
    type Rebuild = (Sale, std::collections::BTreeMap<String, DecidedOrder>);

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
            // As load_sale.lua: a load closes a group (LOADING) or leaves
            // its status; it never opens one.
            if sale.paused && !s.paused {
                s.paused = true;
                s.loading = true;
            }
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

    async fn refresh_sale(&self, sale: &Sale, version: i64) -> Result<bool, StoreError> {
        {
            let mut sales = self.lock()?;
            let Some(s) = sales.get_mut(&sale.sale_id) else {
                return Ok(false);
            };
            // As load_sale.lua: a refresh from an earlier read writes nothing.
            if s.def_version.is_some_and(|held| version < held) {
                return Ok(true);
            }
            s.def_version = Some(version);
        }
        self.load_sale(sale, version).await.map(|_| true)
    }

    async fn survivors(&self, _sale: &Sale) -> Result<Option<()>, StoreError> {
        Ok(None)
    }

    async fn begin_rebuild(
        &self,
        sale: &Sale,
        _version: i64,
        _survivors: Option<()>,
    ) -> Result<Self::Rebuild, StoreError> {
        if sale.shards > 1 {
            return Err(StoreError::Protocol(
                "the memory store keeps one shard per sale".into(),
            ));
        }
        Ok((sale.clone(), std::collections::BTreeMap::new()))
    }

    async fn stage_rebuild(
        &self,
        rebuild: &mut Self::Rebuild,
        page: &LedgerPage,
    ) -> Result<(), StoreError> {
        for d in &page.decided {
            rebuild
                .1
                .entry(d.order_id.clone())
                .or_insert_with(|| d.clone());
        }
        Ok(())
    }

    async fn commit_rebuild(
        &self,
        (sale, staged): Self::Rebuild,
        at: LedgerPosition,
    ) -> Result<Option<u64>, StoreError> {
        let mut sales = self.lock()?;
        if sales.contains_key(&sale.sale_id) {
            return Ok(None);
        }
        let mut s = MemorySale::new(sale.clone(), at.available, sale.paused);
        s.ledger_seq = Some(at.return_seq);
        for d in staged.values().filter(|d| d.state == "WRITTEN") {
            *s.buyers.entry(d.user_id.clone()).or_default() +=
                i64::try_from(d.quantity).unwrap_or(i64::MAX);
        }
        for d in staged.values() {
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
        let buyers = u64::try_from(s.buyers.len()).unwrap_or(u64::MAX);
        sales.insert(sale.sale_id.clone(), s);
        Ok(Some(buyers))
    }

    async fn return_units(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &str,
        quantity: u32,
        return_seq: Option<u64>,
        to_stock: u32,
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
            stock: s.give_back(i64::from(to_stock.min(quantity))),
        })
    }
}

impl StockRepair for MemoryStock {
    async fn set_status(&self, sale: &Sale) -> Result<u32, StoreError> {
        let mut sales = self.lock()?;
        Ok(match sales.get_mut(&sale.sale_id) {
            Some(s) => {
                s.paused = sale.paused;
                s.loading = false;
                1
            }
            None => 0,
        })
    }

    async fn open_loaded(&self, sale: &Sale) -> Result<u32, StoreError> {
        let mut sales = self.lock()?;
        Ok(match sales.get_mut(&sale.sale_id) {
            Some(s) if s.paused && s.loading => {
                s.paused = false;
                s.loading = false;
                1
            }
            _ => 0,
        })
    }

    async fn clock_ms(&self) -> Result<i64, StoreError> {
        drop(self.lock()?);
        Ok(clock::now_ms())
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
        let now = tokio::time::Instant::now();
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
}

impl StockReading for MemoryStock {
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
            buyers: s.buyers.clone().into_iter().collect(),
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
    ) -> Result<std::collections::HashMap<String, Holding>, StoreError> {
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
}

impl LiveFigures for MemoryStock {
    async fn outcomes(&self, sale_id: &SaleId) -> Result<BTreeMap<String, u64>, StoreError> {
        let sales = self.lock()?;
        Ok(sales
            .get(sale_id)
            .map(|s| s.outcomes.clone())
            .unwrap_or_default())
    }
}

impl WriteErrorLog for MemoryStock {}
