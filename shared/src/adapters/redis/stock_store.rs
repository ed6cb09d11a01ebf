//! The [`StockStore`] port on Redis: the purchase (with borrowing on a
//! sharded sale), releases, resolutions, views and the keyed filter.

use super::keys::{SaleKeys, shard_of_order};
use super::replies::{
    Peeked, StoredReservation, parse_i64, parse_layout, parse_order_id, parse_reserve_reply,
    parse_u32, protocol,
};
use super::scripts::{
    BuyerOrdersArgs, KeyedFilterArgs, OutcomesArgs, PeekArgs, PurchaseArgs, ReleaseArgs,
    ResolveArgs, quantity_arg, request_id,
};
use super::{KEY_CACHE_SALES, RedisStock};
use crate::domain::borrowing::{MAX_BORROW_ROUNDS, units_to_borrow};
use crate::domain::shard_layout::ShardLayout;
use crate::domain::{IdempotencyKey, OrderId, SaleId, UserId};
use crate::ports::{
    ReleaseOutcome, ReservationRecord, ReserveOutcome, ReserveRequest, Resolution, StockStore,
    StockView, StoreError,
};

/// What one run of the purchase script said.
pub(super) enum Decided {
    Outcome(ReserveOutcome),
    /// Those were the directory keys of a sale of this layout.
    Sharded(ShardLayout),
}

impl RedisStock {
    pub(super) async fn reserve_on(
        &self,
        keys: &SaleKeys,
        req: &ReserveRequest<'_>,
        quantity: &str,
        request: &str,
        shard: u32,
    ) -> Result<Decided, StoreError> {
        // Only a gated purchase carries a pass: the others allocate nothing.
        let issued = req.gate_issued_ms.map(|ms| ms.to_string());
        let call = PurchaseArgs {
            keys,
            sale_id: req.sale_id.as_str(),
            user_id: req.user_id.as_str(),
            quantity,
            idempotency_key: req.idempotency_key.map_or("", |k| k.as_str()),
            gate_nonce: req.gate_nonce.unwrap_or(""),
            source_ip: req.source_ip.unwrap_or(""),
            limits: &self.limit_args,
            request_id: request,
            gate_issued_ms: issued.as_deref().unwrap_or(""),
        };
        let reply: Vec<String> = self.run(&call).await?;
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

    pub(super) async fn peek(
        &self,
        keys: &SaleKeys,
        order: &str,
    ) -> Result<Option<Peeked>, StoreError> {
        let reply: Vec<String> = self
            .run(&PeekArgs {
                keys,
                order_id: order,
            })
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
                paused: *status != "LIVE",
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
            if !self.dry.may_borrow(req.sale_id, now) {
                break;
            }
            let need = units_to_borrow(req.quantity.get(), remaining);
            let got = self.borrow(&known.groups, home as usize, need).await?;
            self.dry.record(req.sale_id, now, got);
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
            .run(&BuyerOrdersArgs {
                keys: &keys,
                user_id: user_id.as_str(),
            })
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
            .run(&ReleaseArgs {
                keys: &keys,
                order_id: order_id.as_str(),
            })
            .await?;
        match reply.first().map(String::as_str) {
            Some("RELEASED") => Ok(ReleaseOutcome::Released {
                stock: parse_u32(reply.get(1).map_or("", String::as_str))?,
            }),
            Some("NOT_FOUND") => Ok(ReleaseOutcome::NotFound),
            Some("NOT_RELEASABLE") if reply.get(1).map(String::as_str) == Some("REPLAYED") => {
                Ok(ReleaseOutcome::HeldByRetry)
            }
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
            .run(&ResolveArgs {
                keys: &keys,
                order_id: order_id.as_str(),
                mode: resolution.as_str(),
                offered: resolution.offered(),
            })
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
        let funnel = super::funnel::key(sale_id);
        let added: i64 = self
            .run(&OutcomesArgs {
                keys: &keys,
                funnel: &funnel,
                bucket_ms: super::funnel::bucket_of(crate::clock::now_ms()),
                keep: super::funnel::FUNNEL_BUCKETS,
                counts,
            })
            .await?;
        Ok(added == 1)
    }

    fn limiter_failures(&self) -> u64 {
        self.limiter_failures
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn record_write_error(
        &self,
        sale_id: &SaleId,
        failure: &crate::ports::WriteFailure,
    ) -> Result<(), StoreError> {
        self.keep_write_error(sale_id, failure).await
    }

    async fn keyed_may_exist(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        key: &IdempotencyKey,
        since: tokio::time::Instant,
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
        let read_at = tokio::time::Instant::now();
        let reply: Vec<Vec<u8>> = self.run(&KeyedFilterArgs { keys }).await?;
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
