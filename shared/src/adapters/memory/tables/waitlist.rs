//! The waitlist in the memory `orders` table ([`WaitlistStore`]), with the
//! conditions of `adapters::dynamo::waitlist`: an entry is put once per
//! (sale, buyer) and leaves `WAITING` once; a handover of an expired
//! order's or a given-up reservation's units to the line is one step
//! under the tables' lock, as the DynamoDB transaction is one
//! (`handover.rs`). The index reads (`heads`, `ahead`) do not lag here.

use super::{MemoryOrders, Tables, tables};
use crate::domain::orders::{NewOrder, Order, OrderStatus};
use crate::domain::waitlist::EntryStatus;
use crate::domain::{SaleId, UserId};
use crate::ports::{
    Candidate, ExpireOutcome, GiveUp, Handover, Joined, LineStats, OfferTerms, OrderStoreError,
    WaitlistEntry, WaitlistStore,
};

/// An entry's key in the tables: (sale, buyer).
pub(super) type EntryKey = (SaleId, String);

pub(super) fn key(sale_id: &SaleId, user_id: &UserId) -> EntryKey {
    (sale_id.clone(), user_id.to_string())
}

impl Tables {
    /// The sale's waiting entries, head first (the `byWaitlist` index's
    /// order: the line key).
    fn waiting(&self, sale_id: &SaleId) -> Vec<&WaitlistEntry> {
        let mut line: Vec<&WaitlistEntry> = self
            .entries
            .values()
            .filter(|e| &e.sale_id == sale_id && e.status == EntryStatus::Waiting)
            .collect();
        line.sort_by(|a, b| a.line_key.cmp(&b.line_key));
        line
    }
}

impl WaitlistStore for MemoryOrders {
    async fn join(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        line_key: &str,
        now_ms: i64,
    ) -> Result<Joined, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        if let Some(found) = t.entries.get(&key(sale_id, user_id)) {
            // As the DynamoDB adapter: the same key at the same time is this
            // very join sent again (a lost answer), so it is new.
            return Ok(
                if found.line_key == line_key && found.joined_at_ms == now_ms {
                    Joined::New(found.clone())
                } else {
                    Joined::Existing(found.clone())
                },
            );
        }
        let entry = WaitlistEntry {
            sale_id: sale_id.clone(),
            user_id: user_id.clone(),
            line_key: line_key.to_owned(),
            status: EntryStatus::Waiting,
            joined_at_ms: now_ms,
        };
        t.entries.insert(key(sale_id, user_id), entry.clone());
        Ok(Joined::New(entry))
    }

    async fn leave(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        _now_ms: i64,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        let mut t = tables(&self.tables)?;
        let Some(entry) = t.entries.get_mut(&key(sale_id, user_id)) else {
            return Ok(None);
        };
        if entry.status == EntryStatus::Waiting {
            entry.status = EntryStatus::Left;
        }
        Ok(Some(entry.clone()))
    }

    async fn entry(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        Ok(tables(&self.tables)?
            .entries
            .get(&key(sale_id, user_id))
            .cloned())
    }

    async fn ahead(&self, entry: &WaitlistEntry) -> Result<u64, OrderStoreError> {
        let t = tables(&self.tables)?;
        let n = t
            .waiting(&entry.sale_id)
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
        let t = tables(&self.tables)?;
        Ok(t.waiting(sale_id).into_iter().take(n).cloned().collect())
    }

    async fn returns(&self, sale_id: &SaleId) -> Result<u64, OrderStoreError> {
        let t = tables(&self.tables)?;
        Ok(t.sales.get(sale_id).map_or(0, |i| i.counters.return_seq))
    }

    async fn expire_to_line(
        &self,
        order: &Order,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<Handover, OrderStoreError> {
        // The order as read, first: the real adapter answers from it
        // before its transaction.
        let due = order.expires_at_ms.is_some_and(|at| at <= now_ms);
        if order.status != OrderStatus::PendingPayment || !due {
            return Ok(Handover::Not(ExpireOutcome::NotExpirable));
        }
        let mut t = tables(&self.tables)?;
        Ok(
            match t.expire_to_line(&order.order_id, heads, terms, now_ms)? {
                Some((expired, offers, to_stock)) => Handover::Done {
                    expired,
                    offers,
                    to_stock,
                },
                None => Handover::Not(ExpireOutcome::NotExpirable),
            },
        )
    }

    async fn abandon_to_line(
        &self,
        order: &NewOrder,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<GiveUp, OrderStoreError> {
        tables(&self.tables)?.abandon_to_line(order, heads, terms, now_ms)
    }

    async fn stats(&self, sale_id: &SaleId) -> Result<LineStats, OrderStoreError> {
        let t = tables(&self.tables)?;
        let mut stats = LineStats {
            returned: t.sales.get(sale_id).map_or(0, |i| i.counters.return_seq),
            ..LineStats::default()
        };
        for entry in t.entries.values().filter(|e| &e.sale_id == sale_id) {
            match &entry.status {
                EntryStatus::Waiting => stats.waiting += 1,
                EntryStatus::Offered(order_id) => {
                    stats.offered += 1;
                    match t.orders.get(order_id).map(|o| o.status) {
                        Some(OrderStatus::Paid) => stats.taken += 1,
                        Some(OrderStatus::Expired) => stats.expired += 1,
                        _ => {}
                    }
                }
                EntryStatus::Left => stats.left += 1,
                EntryStatus::Ended => {}
            }
        }
        Ok(stats)
    }
}

impl MemoryOrders {
    /// Every waitlist entry of a sale as the table holds it now, in line
    /// order (past any fault: for the checks after a run).
    pub fn entries_of(&self, sale_id: &SaleId) -> Vec<WaitlistEntry> {
        let Ok(t) = tables(&self.tables) else {
            return Vec::new();
        };
        let mut all: Vec<WaitlistEntry> = t
            .entries
            .values()
            .filter(|e| &e.sale_id == sale_id)
            .cloned()
            .collect();
        all.sort_by(|a, b| a.line_key.cmp(&b.line_key));
        all
    }
}

#[cfg(test)]
mod tests;
