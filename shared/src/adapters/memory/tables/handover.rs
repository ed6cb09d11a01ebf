//! The handover in memory: the one step, under the tables' lock, that
//! hands a source's units to the head of a sale's line, with the
//! conditions of the DynamoDB transaction (`adapters::dynamo::waitlist`):
//!
//! - the source's own condition: an expired order still `PENDING_PAYMENT`
//!   and due (an absent row fails it, as a conditional update of a missing
//!   item does); a given-up reservation with no row of its id yet;
//! - per unit offered, the head's entry still `WAITING`, no row under its
//!   offer's id, and its record's `held + 1 <= limit`; a head that fails
//!   one is passed over (it keeps its place), as the real adapter drops it
//!   and tries again, up to the same number of tries;
//! - the sale item numbers the return (`returnSeq`): an expiry gives back
//!   only the units beyond the line (`sold >= them`), a give-up takes the
//!   offered units out of `available` (`available >= them`), where they
//!   stayed since the order was never written.

use super::waitlist::key;
use super::{Tables, row};
use crate::clock;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::waitlist::EntryStatus;
use crate::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};
use crate::ports::{Candidate, GiveUp, OfferTerms, OrderStoreError};

/// As many heads as the DynamoDB adapter passes over before it gives up
/// (its `HANDOVER_ATTEMPTS`: each try drops one head, the last must pass),
/// so a line of unfit heads fails here where it fails there.
const PASSES: usize = 7;

impl Tables {
    /// Whether `head` can take one unit now.
    fn can_take(&self, head: &Candidate, limit: u32) -> bool {
        let entry = &head.entry;
        let waiting = self
            .entries
            .get(&key(&entry.sale_id, &entry.user_id))
            .is_some_and(|e| e.status == EntryStatus::Waiting);
        let held = self
            .held
            .get(&(entry.sale_id.clone(), entry.user_id.to_string()))
            .copied()
            .unwrap_or(0);
        waiting && !self.orders.contains_key(&head.offer_id) && held < u64::from(limit)
    }

    /// The heads that take a unit each, in line order, at most `units` of
    /// them: the source's own buyer is never offered their unit back, an
    /// unfit head is passed over. Too many passed over is a failure of the
    /// whole handover, as it is on DynamoDB.
    pub(super) fn choose<'a>(
        &self,
        source: (&OrderId, &UserId),
        heads: &'a [Candidate],
        units: u32,
        limit: u32,
    ) -> Result<Vec<&'a Candidate>, OrderStoreError> {
        let mut chosen = Vec::new();
        let mut passed = 0;
        for head in heads.iter().filter(|c| &c.entry.user_id != source.1) {
            if chosen.len() >= units as usize {
                break;
            }
            if self.can_take(head, limit) {
                chosen.push(head);
                continue;
            }
            passed += 1;
            if passed > PASSES {
                return Err(OrderStoreError::Transient(format!(
                    "{}: tries of its handover to the waitlist raced",
                    source.0
                )));
            }
        }
        Ok(chosen)
    }

    /// The writes of the handover once every condition held: per chosen
    /// head, its record, its order (one unit, naming `source`) and its
    /// entry. The offers made, in line order.
    pub(super) fn offer(
        &mut self,
        source: &OrderId,
        sale_id: &SaleId,
        chosen: &[&Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Vec<Order> {
        let mut offers = Vec::with_capacity(chosen.len());
        for head in chosen {
            let offer = offer_row(source, sale_id, head, terms, now_ms);
            *self
                .held
                .entry((sale_id.clone(), offer.user_id.to_string()))
                .or_default() += 1;
            if let Some(entry) = self.entries.get_mut(&key(sale_id, &head.entry.user_id)) {
                entry.status = EntryStatus::Offered(offer.order_id.clone());
            }
            self.orders.insert(offer.order_id.clone(), offer.clone());
            offers.push(offer);
        }
        offers
    }

    /// An expired order's handover: `None` when its own condition fails;
    /// else the order as it is now `EXPIRED`, the offers, and the units
    /// given back to `available`.
    pub(super) fn expire_to_line(
        &mut self,
        order_id: &OrderId,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<Option<(Order, Vec<Order>, u32)>, OrderStoreError> {
        let Some(current) = self.orders.get(order_id).cloned() else {
            return Ok(None);
        };
        let due = current.expires_at_ms.is_some_and(|at| at <= now_ms);
        if current.status != OrderStatus::PendingPayment || !due {
            return Ok(None);
        }
        let units = current.quantity.get();
        let chosen = self.choose(
            (order_id, &current.user_id),
            heads,
            units,
            terms.per_user_limit,
        )?;
        let offered = u32::try_from(chosen.len()).unwrap_or(units).min(units);
        let to_stock = units - offered;
        let buyer = (current.sale_id.clone(), current.user_id.to_string());
        if self
            .held
            .get(&buyer)
            .is_some_and(|held| *held < u64::from(units))
        {
            return Err(OrderStoreError::Transient(format!(
                "{order_id}: handover cancelled: the buyer's record holds less"
            )));
        }
        let Some(item) = self.sales.get_mut(&current.sale_id) else {
            return Err(OrderStoreError::SaleMissing(current.sale_id));
        };
        if item.counters.sold < i64::from(to_stock) {
            return Err(OrderStoreError::Transient(format!(
                "{order_id}: handover cancelled: the sale item sold less"
            )));
        }
        item.counters.available += i64::from(to_stock);
        item.counters.sold -= i64::from(to_stock);
        item.counters.return_seq += 1;
        let seq = item.counters.return_seq;
        let left = self
            .held
            .get(&buyer)
            .map_or(0, |held| held - u64::from(units));
        self.held.insert(buyer, left);
        let expired = Order {
            status: OrderStatus::Expired,
            return_seq: Some(seq),
            offered,
            ..current
        };
        self.orders.insert(order_id.clone(), expired.clone());
        let offers = self.offer(order_id, &expired.sale_id, &chosen, terms, now_ms);
        Ok(Some((expired, offers, to_stock)))
    }

    /// A given-up reservation's handover: the row of its id when one
    /// exists; nobody when no one can take a unit (nothing written); else
    /// the row recorded `REJECTED` (`ABANDONED`) and the offers.
    pub(super) fn abandon_to_line(
        &mut self,
        order: &NewOrder,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<GiveUp, OrderStoreError> {
        let m = &order.message;
        // The real adapter's order of answers: nobody else in the line,
        // then no unit left to offer, then the row's own condition.
        if heads.iter().all(|c| c.entry.user_id == m.user_id) {
            return Ok(GiveUp::Nobody);
        }
        let Some(item) = self.sales.get(&m.sale_id) else {
            return Err(OrderStoreError::SaleMissing(m.sale_id.clone()));
        };
        // One short of the units (Redis sold one the ledger did not have)
        // offers what is there.
        let cap = u32::try_from(item.counters.available.max(0)).unwrap_or(u32::MAX);
        let units = m.quantity.get().min(cap);
        if units == 0 {
            return Ok(GiveUp::Nobody);
        }
        if let Some(existing) = self.orders.get(&m.order_id) {
            return Ok(GiveUp::Exists(existing.clone()));
        }
        let chosen = self.choose(
            (&m.order_id, &m.user_id),
            heads,
            units,
            terms.per_user_limit,
        )?;
        if chosen.is_empty() {
            return Ok(GiveUp::Nobody);
        }
        let offered = u32::try_from(chosen.len()).unwrap_or(units);
        let Some(item) = self.sales.get_mut(&m.sale_id) else {
            return Err(OrderStoreError::SaleMissing(m.sale_id.clone()));
        };
        item.counters.available -= i64::from(offered);
        item.counters.sold += i64::from(offered);
        item.counters.return_seq += 1;
        let rejected = Order {
            offered,
            return_seq: Some(item.counters.return_seq),
            ..order.rejected(RejectReason::Abandoned)
        };
        self.orders.insert(m.order_id.clone(), rejected.clone());
        let offers = self.offer(&m.order_id, &m.sale_id, &chosen, terms, now_ms);
        Ok(GiveUp::Offered { rejected, offers })
    }
}

/// The order a head is offered: one unit, at the sale's terms, its payment
/// window from now, naming the order it comes from.
fn offer_row(
    source: &OrderId,
    sale_id: &SaleId,
    head: &Candidate,
    terms: &OfferTerms,
    now_ms: i64,
) -> Order {
    let new = NewOrder::new(
        OrderMessage {
            v: OrderMessage::VERSION,
            order_id: head.offer_id.clone(),
            sale_id: sale_id.clone(),
            user_id: head.entry.user_id.clone(),
            quantity: Quantity::ONE,
            shard: crate::domain::shard_layout::shard_of_order(head.offer_id.as_str()).unwrap_or(0),
            reserved_at: clock::rfc3339_ms(now_ms),
        },
        now_ms,
        now_ms,
        terms.payment_window_secs,
    )
    .priced(terms.price);
    Order {
        offer_of: Some(source.clone()),
        ..row(&new, OrderStatus::PendingPayment, None)
    }
}
