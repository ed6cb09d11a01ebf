//! The waitlist's calls behind the scheduler's gates: the ledger's
//! ([`WaitlistStore`] on [`SimOrders`]) and Redis's ([`WaitlistStock`] on
//! [`SimStock`]). Every version of every entry is kept, as the order rows'
//! are, so the line's index reads (`heads`, `ahead`) may lag behind the
//! table and the checks can see that an entry resolved once.

use super::{SimOrders, SimStock, redis_down};
use crate::domain::orders::{NewOrder, Order};
use crate::domain::stock_state::Returned;
use crate::domain::waitlist::EntryStatus;
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{
    Candidate, GiveUp, Handover, Joined, LineStats, OfferClaim, OfferTerms, OrderStoreError,
    StoreError, WaitlistAdmission, WaitlistEntry, WaitlistJoin, WaitlistStock, WaitlistStore,
};
use crate::sim::clock::SKEW_MS;
use crate::sim::sched::Step;
use crate::sim::world::trace;

/// Every version of every entry, by buyer, with when it was written: what
/// the line's index serves, behind, and the record of its resolutions.
pub(crate) type EntryHistory = std::collections::BTreeMap<String, Vec<(i64, WaitlistEntry)>>;

fn dynamo_down(effect: &str) -> OrderStoreError {
    OrderStoreError::Transient(format!("simulated: {effect} did not answer"))
}

macro_rules! dynamo {
    ($self:ident, $effect:literal, $writes:expr, $call:expr) => {
        gated!($self.sched, $effect, $writes, dynamo_down($effect), $call)
    };
}

impl SimOrders {
    /// Keeps the entries of `users` as they are now.
    async fn record_entries<'a>(&self, sale_id: &SaleId, users: impl Iterator<Item = &'a UserId>) {
        let at = crate::sim::world::now();
        for user in users {
            let Ok(Some(entry)) = self.inner.entry(sale_id, user).await else {
                continue;
            };
            if let Ok(mut h) = self.entries.lock() {
                let versions = h.entry(user.to_string()).or_default();
                if versions.last().is_none_or(|(_, last)| *last != entry) {
                    versions.push((at, entry));
                }
            }
        }
    }

    /// The sale's waiting entries, head first, as the index held them
    /// `lag_ms` ago.
    fn line_behind(&self, sale_id: &SaleId, lag_ms: i64) -> Vec<WaitlistEntry> {
        let cutoff = crate::sim::world::now() - lag_ms;
        let Ok(h) = self.entries.lock() else {
            return Vec::new();
        };
        let mut line: Vec<WaitlistEntry> = h
            .values()
            .filter_map(|versions| {
                versions
                    .iter()
                    .rev()
                    .find(|(at, _)| *at <= cutoff)
                    .map(|(_, e)| e.clone())
            })
            .filter(|e| &e.sale_id == sale_id && e.status == EntryStatus::Waiting)
            .collect();
        line.sort_by(|a, b| a.line_key.cmp(&b.line_key));
        line
    }

    /// Every version each buyer's entry had, oldest first.
    pub(crate) fn entry_history(&self) -> EntryHistory {
        self.entries.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

impl WaitlistStore for SimOrders {
    async fn join(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        line_key: &str,
        now_ms: i64,
    ) -> Result<Joined, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.join_waitlist",
            true,
            self.inner.join(sale_id, user_id, line_key, now_ms)
        );
        self.record_entries(sale_id, std::iter::once(user_id)).await;
        out
    }

    async fn leave(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.leave_waitlist",
            true,
            self.inner.leave(sale_id, user_id, now_ms)
        );
        self.record_entries(sale_id, std::iter::once(user_id)).await;
        out
    }

    async fn entry(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        dynamo!(
            self,
            "dynamo.waitlist_entry",
            false,
            self.inner.entry(sale_id, user_id)
        )
    }

    async fn ahead(&self, entry: &WaitlistEntry) -> Result<u64, OrderStoreError> {
        let ahead = dynamo!(self, "dynamo.ahead", false, self.inner.ahead(entry))?;
        let lag = self.lag();
        if lag == 0 {
            return Ok(ahead);
        }
        let n = self
            .line_behind(&entry.sale_id, lag)
            .iter()
            .filter(|e| e.line_key < entry.line_key)
            .count();
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    async fn heads(
        &self,
        sale_id: &SaleId,
        n: usize,
    ) -> Result<Vec<WaitlistEntry>, OrderStoreError> {
        let heads = dynamo!(self, "dynamo.heads", false, self.inner.heads(sale_id, n))?;
        let lag = self.lag();
        if lag == 0 {
            return Ok(heads);
        }
        let mut behind = self.line_behind(sale_id, lag);
        behind.truncate(n);
        Ok(behind)
    }

    async fn returns(&self, sale_id: &SaleId) -> Result<u64, OrderStoreError> {
        dynamo!(self, "dynamo.returns", false, self.inner.returns(sale_id))
    }

    async fn expire_to_line(
        &self,
        order: &Order,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<Handover, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.expire_to_line",
            true,
            self.inner.expire_to_line(order, heads, terms, now_ms)
        );
        // Whatever the caller was told: the rows and entries it may have
        // written (an offer id that was not written keeps no version).
        let mut ids = vec![order.order_id.clone()];
        ids.extend(heads.iter().map(|c| c.offer_id.clone()));
        self.record(&ids).await;
        self.record_entries(&order.sale_id, heads.iter().map(|c| &c.entry.user_id))
            .await;
        if self.tracing {
            let heads: Vec<&str> = heads.iter().map(|c| c.entry.user_id.as_str()).collect();
            let what = match &out {
                Ok(Handover::Done {
                    offers, to_stock, ..
                }) => {
                    let to: Vec<String> = offers
                        .iter()
                        .map(|o| format!("{} {}", o.user_id, o.order_id))
                        .collect();
                    format!("offered to {to:?}, {to_stock} to the stock")
                }
                Ok(Handover::Not(why)) => format!("not handed over: {why:?}"),
                Err(err) => format!("failed: {err}"),
            };
            trace(
                true,
                &format!("handover of {} (heads {heads:?}): {what}", order.order_id),
            );
        }
        out
    }

    async fn abandon_to_line(
        &self,
        order: &NewOrder,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<GiveUp, OrderStoreError> {
        let out = dynamo!(
            self,
            "dynamo.abandon_to_line",
            true,
            self.inner.abandon_to_line(order, heads, terms, now_ms)
        );
        let mut ids = vec![order.message.order_id.clone()];
        ids.extend(heads.iter().map(|c| c.offer_id.clone()));
        self.record(&ids).await;
        self.record_entries(
            &order.message.sale_id,
            heads.iter().map(|c| &c.entry.user_id),
        )
        .await;
        if self.tracing {
            trace(
                true,
                &format!("give-up of {} to the line: {out:?}", order.message.order_id),
            );
        }
        out
    }

    async fn stats(&self, sale_id: &SaleId) -> Result<LineStats, OrderStoreError> {
        dynamo!(self, "dynamo.line_stats", false, self.inner.stats(sale_id))
    }
}

/// A Redis call: on Redis's clock.
macro_rules! redis {
    ($self:ident, $effect:literal, $writes:expr, $call:expr) => {
        gated!(
            $self.sched,
            $effect,
            $writes,
            redis_down($effect),
            SKEW_MS.scope(0, $call)
        )
    };
}

impl WaitlistStock for SimStock {
    async fn admit_waitlist(&self, req: WaitlistJoin<'_>) -> Result<WaitlistAdmission, StoreError> {
        redis!(
            self,
            "redis.admit_waitlist",
            true,
            self.inner.admit_waitlist(req)
        )
    }

    async fn offer_suffix(&self, sale_id: &SaleId, user_id: &UserId) -> Result<String, StoreError> {
        redis!(
            self,
            "redis.offer_suffix",
            false,
            self.inner.offer_suffix(sale_id, user_id)
        )
    }

    async fn claim_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
    ) -> Result<OfferClaim, StoreError> {
        let out = redis!(
            self,
            "redis.claim_offer",
            true,
            self.inner.claim_offer(sale_id, order_id, user_id, at_ms)
        );
        trace(
            self.tracing,
            &format!("redis claims offer {order_id} for {user_id}: {out:?}"),
        );
        out
    }

    async fn unclaim_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
    ) -> Result<(), StoreError> {
        redis!(
            self,
            "redis.unclaim_offer",
            true,
            self.inner.unclaim_offer(sale_id, order_id, user_id)
        )
    }

    async fn hold_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
        return_seq: u64,
    ) -> Result<Returned, StoreError> {
        let out = redis!(
            self,
            "redis.hold_offer",
            true,
            self.inner
                .hold_offer(sale_id, order_id, user_id, at_ms, return_seq)
        );
        trace(
            self.tracing,
            &format!("redis holds offer {order_id} for {user_id}: {out:?}"),
        );
        out
    }
}
