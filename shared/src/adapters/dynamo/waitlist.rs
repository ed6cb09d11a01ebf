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
//! The handover ([`WaitlistStore::expire_to_line`]) is one transaction: the
//! expired order (conditional on `PENDING_PAYMENT` and due, as any expiry,
//! and recording `offeredUnits`), the sale item (the return's position,
//! `returnSeq`, and only the units beyond the line back to `available`),
//! the expired order's buyer record, and per unit offered the head's
//! record (`held + 1 <= limit`), the new order (`attribute_not_exists`,
//! `offerOf`) and the entry (`WAITING` → `OFFERED`). A unit is either
//! offered or back on sale, never both, and an expired order is handed
//! over once: its own condition fails a second time.

use super::orders::{DynamoOrders, cancellation, query_items, transient};
use crate::adapters::dynamo::order_index::order_item;
use crate::clock;
use crate::domain::orders::{NewOrder, Order, OrderStatus};
use crate::domain::waitlist::EntryStatus;
use crate::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};
use crate::ports::{
    Candidate, ExpireOutcome, Handover, Joined, LineStats, OfferTerms, OrderStore, OrderStoreError,
    WaitlistEntry, WaitlistStore,
};
use aws_sdk_dynamodb::types::{AttributeValue, Put, Select, TransactWriteItem, Update};
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

    /// The entry of `candidate` becomes `OFFERED` with its order.
    fn offer_entry(&self, candidate: &Candidate, now: &str) -> Result<Update, OrderStoreError> {
        Update::builder()
            .table_name(&self.orders_table)
            .key(
                "orderId",
                AttributeValue::S(entry_key(
                    &candidate.entry.sale_id,
                    &candidate.entry.user_id,
                )),
            )
            .update_expression("SET #st = :offered, offer = :order, resolvedAt = :now")
            .condition_expression("#st = :waiting")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":offered", AttributeValue::S("OFFERED".into()))
            .expression_attribute_values(":waiting", AttributeValue::S("WAITING".into()))
            .expression_attribute_values(
                ":order",
                AttributeValue::S(candidate.offer_id.to_string()),
            )
            .expression_attribute_values(":now", AttributeValue::S(now.to_owned()))
            .build()
            .map_err(transient)
    }

    /// One try of the handover at the sale's position `seq` to `heads`.
    /// `Ok(Err(i))`: head `i` could not take its unit (pass it over);
    /// `Ok(Ok(None))`: the position moved or a conflict, try again.
    async fn handover_at(
        &self,
        order: &Order,
        heads: &[&Candidate],
        terms: &OfferTerms,
        now_ms: i64,
        seq: u64,
    ) -> Result<Result<Option<Handover>, usize>, OrderStoreError> {
        let now = clock::rfc3339_ms(now_ms);
        let units = order.quantity.get();
        let offered = u32::try_from(heads.len()).unwrap_or(units).min(units);
        let heads = &heads[..offered as usize];
        let to_stock = units - offered;
        let mark = Update::builder()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order.order_id.to_string()))
            .update_expression(
                "SET #s = :expired, expiredAt = :now, returnSeq = :position, offeredUnits = :offered REMOVE pendingSaleId, pendingBucket",
            )
            .condition_expression("#s = :pending AND expiresAt <= :now")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":expired", AttributeValue::S("EXPIRED".into()))
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .expression_attribute_values(":now", AttributeValue::S(now.clone()))
            .expression_attribute_values(":position", AttributeValue::N((seq + 1).to_string()))
            .expression_attribute_values(":offered", AttributeValue::N(offered.to_string()))
            .build()
            .map_err(transient)?;
        let sale = self.return_at(&order.sale_id, seq, u64::from(to_stock))?;
        let mut items = vec![
            TransactWriteItem::builder().update(mark).build(),
            TransactWriteItem::builder().update(sale).build(),
            self.take_from_buyer(&order.sale_id, &order.user_id, u64::from(units))?,
        ];
        let mut offers = Vec::with_capacity(heads.len());
        for head in heads {
            let new = NewOrder::new(
                OrderMessage {
                    v: OrderMessage::VERSION,
                    order_id: head.offer_id.clone(),
                    sale_id: order.sale_id.clone(),
                    user_id: head.entry.user_id.clone(),
                    quantity: Quantity::ONE,
                    shard: crate::domain::shard_layout::shard_of_order(head.offer_id.as_str())
                        .unwrap_or(0),
                    reserved_at: now.clone(),
                },
                now_ms,
                now_ms,
                terms.payment_window_secs,
            )
            .priced(terms.price);
            let Some(buyer) =
                self.add_to_buyer(&order.sale_id, &head.entry.user_id, 1, terms.per_user_limit)?
            else {
                return Ok(Err(offers.len()));
            };
            let mut item = order_item(&new, OrderStatus::PendingPayment, None);
            item.insert(
                "offerOf".into(),
                AttributeValue::S(order.order_id.to_string()),
            );
            let put = Put::builder()
                .table_name(&self.orders_table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(orderId)")
                .build()
                .map_err(transient)?;
            items.push(buyer);
            items.push(TransactWriteItem::builder().put(put).build());
            items.push(
                TransactWriteItem::builder()
                    .update(self.offer_entry(head, &now)?)
                    .build(),
            );
            offers.push(Order {
                order_id: head.offer_id.clone(),
                sale_id: order.sale_id.clone(),
                user_id: head.entry.user_id.clone(),
                quantity: Quantity::ONE,
                status: OrderStatus::PendingPayment,
                created_at_ms: new.created_at_ms,
                expires_at_ms: Some(new.expires_at_ms),
                reject_reason: None,
                return_seq: None,
                amount: new.amount,
                paid_at_ms: None,
                payment_id: None,
                refunds: Vec::new(),
                offer_of: Some(order.order_id.clone()),
                offered: 0,
            });
        }
        let count = items.len();
        self.count(1, count);
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let reasons = match result {
            Ok(_) => {
                return Ok(Ok(Some(Handover::Done {
                    expired: Order {
                        status: OrderStatus::Expired,
                        return_seq: Some(seq + 1),
                        offered,
                        ..order.clone()
                    },
                    offers,
                    to_stock,
                })));
            }
            Err(err) => cancellation(err)?,
        };
        let failed = |i: usize| {
            reasons
                .get(i)
                .is_some_and(|c| c == "ConditionalCheckFailed")
        };
        if failed(0) {
            return Ok(Ok(Some(Handover::Not(ExpireOutcome::NotExpirable))));
        }
        if failed(1) {
            if self.return_seq(&order.sale_id).await?.is_none() {
                return Err(OrderStoreError::SaleMissing(order.sale_id.clone()));
            }
            return Ok(Ok(None));
        }
        // Per head: its record, its order, its entry.
        for (i, _) in heads.iter().enumerate() {
            if (0..3).any(|k| failed(3 + 3 * i + k)) {
                return Ok(Err(i));
            }
        }
        if reasons.iter().any(|c| c == "TransactionConflict") {
            return Ok(Ok(None));
        }
        Err(OrderStoreError::Transient(format!(
            "handover cancelled: {reasons:?}"
        )))
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
        // A buyer's own unit is not offered back to them, and a transaction
        // touches their record once.
        let mut left: Vec<&Candidate> = heads
            .iter()
            .filter(|c| c.entry.user_id != order.user_id)
            .collect();
        for attempt in 0..HANDOVER_ATTEMPTS {
            if attempt > 0 {
                super::contention::jittered_wait(attempt).await;
            }
            let Some(seq) = self.return_seq(&order.sale_id).await? else {
                return Err(OrderStoreError::SaleMissing(order.sale_id.clone()));
            };
            match self.handover_at(order, &left, terms, now_ms, seq).await? {
                Ok(Some(done)) => return Ok(done),
                Ok(None) => {}
                Err(passed) => {
                    tracing::info!(sale_id = %order.sale_id, user_id = %left[passed].entry.user_id, "waitlist head passed over: left, offered already, or at their limit");
                    left.remove(passed);
                }
            }
        }
        Err(OrderStoreError::Transient(format!(
            "{}: {HANDOVER_ATTEMPTS} tries of its handover to the waitlist raced",
            order.order_id
        )))
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
