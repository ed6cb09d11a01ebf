//! The waitlist in the `orders` table ([`WaitlistStore`]).
//!
//! Entry item, one per (sale, buyer): `orderId` = `wait#<saleId>#<userId>`
//! (unambiguous as the buyer record's key is), `waitSale` and `waitKey`
//! (the `byWaitlist` index: a sale's line in order), `entryUserId`,
//! `state` (`WAITING`, `OFFERED`, `LEFT`), `joinedAt`, and once resolved
//! `resolvedAt` and, when offered, `offer` (the order id). An entry is
//! put once (`attribute_not_exists`) and leaves `WAITING` once (every
//! change is conditional on `state = WAITING`): it resolves at most once.
//!
//! A unit reaches the line in one transaction with where it came from
//! (`handover`): an expired order ([`WaitlistStore::expire_to_line`]) or
//! a reservation reconcile gave up ([`WaitlistStore::abandon_to_line`]).
//! A unit is either offered or back on sale, never both, and a source is
//! handed over once: its own condition fails a second time.

mod handover;
pub use handover::MAX_OFFERS;

use super::orders::{DynamoOrders, query_items, transient};
use crate::clock;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::waitlist::EntryStatus;
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{
    Candidate, ExpireOutcome, GiveUp, Handover, Joined, LineStats, OfferTerms, OrderStore,
    OrderStoreError, WaitlistEntry, WaitlistStore,
};
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use handover::{Source, Try};
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

/// The index of a sale's line: `waitSale`, then `waitKey`.
pub const BY_WAITLIST: &str = "byWaitlist";

/// Tries of one handover: a head passed over, another expiry at the
/// sale's position, or a conflict on the sale item, each takes one.
const HANDOVER_ATTEMPTS: u32 = 8;

/// The key of a buyer's entry in the `orders` table.
pub fn entry_key(sale_id: &SaleId, user_id: &UserId) -> String {
    format!("wait#{sale_id}#{user_id}")
}

/// Whether an item of the `orders` table is a waitlist entry.
pub fn is_entry_item(item: &Item) -> bool {
    matches!(item.get("orderId"), Some(AttributeValue::S(k)) if k.starts_with("wait#"))
}

fn entry_from_item(item: &Item) -> Result<WaitlistEntry, OrderStoreError> {
    let bad = |what: &str| OrderStoreError::Malformed(format!("waitlist entry: {what}"));
    let s = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.as_str()),
        _ => Err(bad(name)),
    };
    let status = match s("state")? {
        "WAITING" => EntryStatus::Waiting,
        "OFFERED" => EntryStatus::Offered(OrderId::parse(s("offer")?).map_err(|_| bad("offer"))?),
        "LEFT" => EntryStatus::Left,
        "ENDED" => EntryStatus::Ended,
        _ => return Err(bad("state")),
    };
    Ok(WaitlistEntry {
        sale_id: SaleId::parse(s("waitSale")?).map_err(|_| bad("waitSale"))?,
        user_id: UserId::parse(s("entryUserId")?).map_err(|_| bad("entryUserId"))?,
        line_key: s("waitKey")?.to_owned(),
        status,
        joined_at_ms: clock::parse_rfc3339_ms(s("joinedAt")?).ok_or_else(|| bad("joinedAt"))?,
    })
}

impl DynamoOrders {
    async fn entry_item(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(entry_key(sale_id, user_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(transient)?;
        out.item.as_ref().map(entry_from_item).transpose()
    }

    /// The sale item's position (`returnSeq`) and `available`, read
    /// consistently; `None` without the sale.
    async fn position(&self, sale_id: &SaleId) -> Result<Option<(u64, i64)>, OrderStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale_id.to_string()))
            .projection_expression("saleId, returnSeq, available")
            .consistent_read(true)
            .send()
            .await
            .map_err(transient)?;
        Ok(out.item.map(|item| {
            let n = |k: &str| match item.get(k) {
                Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
                _ => 0,
            };
            (u64::try_from(n("returnSeq")).unwrap_or(0), n("available"))
        }))
    }
}

impl WaitlistStore for DynamoOrders {
    async fn join(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        line_key: &str,
        now_ms: i64,
    ) -> Result<Joined, OrderStoreError> {
        let entry = WaitlistEntry {
            sale_id: sale_id.clone(),
            user_id: user_id.clone(),
            line_key: line_key.to_owned(),
            status: EntryStatus::Waiting,
            joined_at_ms: now_ms,
        };
        let item: Item = HashMap::from([
            (
                "orderId".into(),
                AttributeValue::S(entry_key(sale_id, user_id)),
            ),
            ("waitSale".into(), AttributeValue::S(sale_id.to_string())),
            ("waitKey".into(), AttributeValue::S(line_key.to_owned())),
            ("entryUserId".into(), AttributeValue::S(user_id.to_string())),
            ("state".into(), AttributeValue::S("WAITING".into())),
            (
                "joinedAt".into(),
                AttributeValue::S(clock::rfc3339_ms(now_ms)),
            ),
        ]);
        self.count(0, 1);
        let put = self
            .client
            .put_item()
            .table_name(&self.orders_table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(orderId)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(Joined::New(entry)),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                // The entry there may be this very put's: a try whose
                // answer was lost (a timeout) and that the SDK sent again.
                // Same key, same time: ours, and new.
                let found = self.entry_item(sale_id, user_id).await?.ok_or_else(|| {
                    OrderStoreError::Transient(
                        "the entry's condition failed, yet it is not there".into(),
                    )
                })?;
                Ok(
                    if found.line_key == entry.line_key && found.joined_at_ms == now_ms {
                        Joined::New(found)
                    } else {
                        Joined::Existing(found)
                    },
                )
            }
            Err(err) => Err(transient(err)),
        }
    }

    async fn leave(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        self.count(0, 1);
        let update = self
            .client
            .update_item()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(entry_key(sale_id, user_id)))
            .update_expression("SET #st = :left, resolvedAt = :now")
            .condition_expression("#st = :waiting")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":left", AttributeValue::S("LEFT".into()))
            .expression_attribute_values(":waiting", AttributeValue::S("WAITING".into()))
            .expression_attribute_values(":now", AttributeValue::S(clock::rfc3339_ms(now_ms)))
            .send()
            .await;
        match update {
            Ok(_) => {}
            // No entry, or one no longer waiting: read what there is.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
            Err(err) => return Err(transient(err)),
        }
        self.entry_item(sale_id, user_id).await
    }

    async fn entry(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Option<WaitlistEntry>, OrderStoreError> {
        self.entry_item(sale_id, user_id).await
    }

    async fn ahead(&self, entry: &WaitlistEntry) -> Result<u64, OrderStoreError> {
        let pages = self
            .client
            .query()
            .table_name(&self.orders_table)
            .index_name(BY_WAITLIST)
            .key_condition_expression("waitSale = :sale AND waitKey < :key")
            .filter_expression("#st = :waiting")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":sale", AttributeValue::S(entry.sale_id.to_string()))
            .expression_attribute_values(":key", AttributeValue::S(entry.line_key.clone()))
            .expression_attribute_values(":waiting", AttributeValue::S("WAITING".into()))
            .select(Select::Count)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(transient)?;
        Ok(pages
            .iter()
            .map(|p| u64::try_from(p.count).unwrap_or(0))
            .sum())
    }

    async fn heads(
        &self,
        sale_id: &SaleId,
        n: usize,
    ) -> Result<Vec<WaitlistEntry>, OrderStoreError> {
        let mut heads = Vec::new();
        let mut start: Option<Item> = None;
        // Page by page until `n` waiting entries: resolved ones ahead of
        // them are read and passed.
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.orders_table)
                .index_name(BY_WAITLIST)
                .key_condition_expression("waitSale = :sale")
                .filter_expression("#st = :waiting")
                .expression_attribute_names("#st", "state")
                .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string()))
                .expression_attribute_values(":waiting", AttributeValue::S("WAITING".into()))
                .limit(i32::try_from(n.max(25)).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(transient)?;
            for item in out.items() {
                heads.push(entry_from_item(item)?);
            }
            match out.last_evaluated_key {
                Some(key) if heads.len() < n => start = Some(key),
                _ => break,
            }
        }
        heads.truncate(n);
        Ok(heads)
    }

    async fn returns(&self, sale_id: &SaleId) -> Result<u64, OrderStoreError> {
        Ok(self.return_seq(sale_id).await?.unwrap_or(0))
    }

    async fn expire_to_line(
        &self,
        order: &Order,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<Handover, OrderStoreError> {
        let due = order.expires_at_ms.is_some_and(|at| at <= now_ms);
        if order.status != OrderStatus::PendingPayment || !due {
            return Ok(Handover::Not(ExpireOutcome::NotExpirable));
        }
        let source = Source::Expired(order);
        let mut left = others(source, heads);
        for attempt in 0..HANDOVER_ATTEMPTS {
            if attempt > 0 {
                super::contention::jittered_wait(attempt).await;
            }
            let Some(seq) = self.return_seq(&order.sale_id).await? else {
                return Err(OrderStoreError::SaleMissing(order.sale_id.clone()));
            };
            match self
                .handover_at(source, &left, terms, now_ms, seq, u32::MAX)
                .await?
            {
                Try::Moved {
                    offers,
                    offered,
                    to_stock,
                    seq,
                } => {
                    return Ok(Handover::Done {
                        expired: Order {
                            status: OrderStatus::Expired,
                            return_seq: Some(seq),
                            offered,
                            ..order.clone()
                        },
                        offers,
                        to_stock,
                    });
                }
                Try::SourceGone => return Ok(Handover::Not(ExpireOutcome::NotExpirable)),
                Try::Again => {}
                Try::PassOver(i) => pass_over(source, &mut left, i),
            }
        }
        Err(raced(source))
    }

    async fn abandon_to_line(
        &self,
        order: &NewOrder,
        heads: &[Candidate],
        terms: &OfferTerms,
        now_ms: i64,
    ) -> Result<GiveUp, OrderStoreError> {
        let source = Source::Abandoned(order);
        let sale_id = source.sale_id();
        let mut left = others(source, heads);
        for attempt in 0..HANDOVER_ATTEMPTS {
            if left.is_empty() {
                return Ok(GiveUp::Nobody);
            }
            if attempt > 0 {
                super::contention::jittered_wait(attempt).await;
            }
            let Some((seq, available)) = self.position(sale_id).await? else {
                return Err(OrderStoreError::SaleMissing(sale_id.clone()));
            };
            // The units stayed in `available`; one short of them (Redis
            // sold a unit the ledger did not have) offers what is there.
            let cap = u32::try_from(available.max(0)).unwrap_or(u32::MAX);
            if cap == 0 {
                return Ok(GiveUp::Nobody);
            }
            match self
                .handover_at(source, &left, terms, now_ms, seq, cap)
                .await?
            {
                Try::Moved {
                    offers,
                    offered,
                    seq,
                    ..
                } => {
                    let mut rejected = order.rejected(RejectReason::Abandoned);
                    rejected.offered = offered;
                    rejected.return_seq = Some(seq);
                    return Ok(GiveUp::Offered { rejected, offers });
                }
                Try::SourceGone => {
                    let row = self.get(source.order_id()).await?.ok_or_else(|| {
                        OrderStoreError::Transient(format!(
                            "{}: the condition failed on a row that is not there",
                            source.order_id()
                        ))
                    })?;
                    return Ok(GiveUp::Exists(row));
                }
                Try::Again => {}
                Try::PassOver(i) => pass_over(source, &mut left, i),
            }
        }
        Err(raced(source))
    }

    async fn stats(&self, sale_id: &SaleId) -> Result<LineStats, OrderStoreError> {
        let items = query_items(
            self.client
                .query()
                .table_name(&self.orders_table)
                .index_name(BY_WAITLIST)
                .key_condition_expression("waitSale = :sale")
                .expression_attribute_values(":sale", AttributeValue::S(sale_id.to_string())),
        )
        .await?;
        let mut stats = LineStats {
            returned: self.returns(sale_id).await?,
            ..LineStats::default()
        };
        let mut offers = Vec::new();
        for item in &items {
            match entry_from_item(item)?.status {
                EntryStatus::Waiting => stats.waiting += 1,
                EntryStatus::Offered(order_id) => {
                    stats.offered += 1;
                    offers.push(order_id);
                }
                EntryStatus::Left => stats.left += 1,
                EntryStatus::Ended => {}
            }
        }
        for order_id in offers {
            match self.get(&order_id).await?.map(|o| o.status) {
                Some(OrderStatus::Paid) => stats.taken += 1,
                Some(OrderStatus::Expired) => stats.expired += 1,
                _ => {}
            }
        }
        Ok(stats)
    }
}

/// The heads that may be offered `source`'s units: a buyer's own unit is
/// not offered back to them, and a transaction touches their record once.
fn others<'a>(source: Source<'_>, heads: &'a [Candidate]) -> Vec<&'a Candidate> {
    heads
        .iter()
        .filter(|c| &c.entry.user_id != source.user_id())
        .collect()
}

fn pass_over(source: Source<'_>, left: &mut Vec<&Candidate>, i: usize) {
    tracing::info!(sale_id = %source.sale_id(), user_id = %left[i].entry.user_id, "waitlist head passed over: left, offered already, or at their limit");
    left.remove(i);
}

fn raced(source: Source<'_>) -> OrderStoreError {
    OrderStoreError::Transient(format!(
        "{}: {HANDOVER_ATTEMPTS} tries of its handover to the waitlist raced",
        source.order_id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::dynamo::orders::buyer_key;

    #[test]
    fn an_entry_key_is_apart_from_orders_and_buyer_records() {
        let sale = SaleId::parse("s1").unwrap();
        let user = UserId::parse("auth0|u#1").unwrap();
        let key = entry_key(&sale, &user);
        assert_eq!(key, "wait#s1#auth0|u#1");
        assert_ne!(key, buyer_key(&sale, &user));
        let item = Item::from([("orderId".into(), AttributeValue::S(key))]);
        assert!(is_entry_item(&item));
        assert!(!super::super::orders::is_order_item(&item));
    }
}
