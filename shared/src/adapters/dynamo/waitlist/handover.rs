//! The one transaction that hands units to the head of a sale's line: the
//! units of an order past its payment window ([`Source::Expired`]), or of a
//! reservation reconcile gave up ([`Source::Abandoned`]).
//!
//! Either way the sale item moves to the next ledger position
//! (`returnSeq`), so that Redis counts each offer once however a rebuild
//! and the offer's Redis step interleave (`hold_offer.lua`), and per unit
//! offered the head's record (`held + 1 <= limit`), the new order
//! (`attribute_not_exists`, `offerOf`) and the entry (`WAITING` →
//! `OFFERED`) are written with it.
//!
//! - An expired order is marked `EXPIRED` (conditional on
//!   `PENDING_PAYMENT` and due, recording `offeredUnits`), its buyer's
//!   record loses its units, and only the units beyond the line go back to
//!   `available`: the offered ones move from one buyer to another.
//! - A given-up reservation is recorded `REJECTED` (`ABANDONED`,
//!   `offeredUnits`; `attribute_not_exists`, so a late delivery of its
//!   message is a duplicate), and the offered units are taken from
//!   `available`, where they stayed: the order was never written.

use super::super::orders::{DynamoOrders, cancellation, transient};
use super::entry_key;
use crate::adapters::dynamo::order_index::order_item;
use crate::clock;
use crate::domain::orders::{NewOrder, Order, OrderStatus, RejectReason};
use crate::domain::{OrderId, OrderMessage, Quantity, SaleId, UserId};
use crate::ports::{Candidate, OfferTerms, OrderStoreError};
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};

/// Offers one transaction makes: DynamoDB takes 100 actions a transaction,
/// a source takes up to three and each offer three (the head's record, the
/// order, the entry). Units beyond go back to the stock.
pub const MAX_OFFERS: u32 = 32;

/// Where the units handed to the line come from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source<'a> {
    /// An order past its payment window, as read.
    Expired(&'a Order),
    /// A reservation reconcile gave up: accepted, never written.
    Abandoned(&'a NewOrder),
}

impl Source<'_> {
    pub(super) fn order_id(&self) -> &OrderId {
        match self {
            Self::Expired(o) => &o.order_id,
            Self::Abandoned(n) => &n.message.order_id,
        }
    }

    pub(super) fn sale_id(&self) -> &SaleId {
        match self {
            Self::Expired(o) => &o.sale_id,
            Self::Abandoned(n) => &n.message.sale_id,
        }
    }

    pub(super) fn user_id(&self) -> &UserId {
        match self {
            Self::Expired(o) => &o.user_id,
            Self::Abandoned(n) => &n.message.user_id,
        }
    }

    fn units(&self) -> u32 {
        match self {
            Self::Expired(o) => o.quantity.get(),
            Self::Abandoned(n) => n.message.quantity.get(),
        }
    }
}

/// What one try of a handover did.
#[derive(Debug)]
pub(super) enum Try {
    /// Written: `offers` made, `offered` units of the source's to them,
    /// `to_stock` back to (or left in) `available`, at position `seq`.
    Moved {
        offers: Vec<Order>,
        offered: u32,
        to_stock: u32,
        seq: u64,
    },
    /// The source's own condition failed: not due, paid, expired already;
    /// or, given up, a row of its id exists.
    SourceGone,
    /// The sale item was no longer at the position (another return, a
    /// writer's transaction), or a conflict: try again.
    Again,
    /// Head `i` could not take its unit: left, offered already, or at the
    /// limit. Pass it over.
    PassOver(usize),
}

impl DynamoOrders {
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

    /// The source's items: its own record, the sale item at `seq`, and for
    /// an expired order its buyer's record.
    fn source_items(
        &self,
        source: Source<'_>,
        offered: u32,
        now: &str,
        seq: u64,
    ) -> Result<Vec<TransactWriteItem>, OrderStoreError> {
        let units = source.units();
        Ok(match source {
            Source::Expired(order) => {
                let mark = Update::builder()
                    .table_name(&self.orders_table)
                    .key("orderId", AttributeValue::S(order.order_id.to_string()))
                    .update_expression(
                        "SET #s = :expired, expiredAt = :now, returnSeq = :position, offeredUnits = :offered REMOVE pendingSaleId, pendingBucket",
                    )
                    .condition_expression("#s = :pending AND expiresAt <= :now")
                    .expression_attribute_names("#s", "status")
                    .expression_attribute_values(":expired", AttributeValue::S("EXPIRED".into()))
                    .expression_attribute_values(
                        ":pending",
                        AttributeValue::S("PENDING_PAYMENT".into()),
                    )
                    .expression_attribute_values(":now", AttributeValue::S(now.to_owned()))
                    .expression_attribute_values(
                        ":position",
                        AttributeValue::N((seq + 1).to_string()),
                    )
                    .expression_attribute_values(":offered", AttributeValue::N(offered.to_string()))
                    .build()
                    .map_err(transient)?;
                let sale = self.return_at(&order.sale_id, seq, i64::from(units - offered))?;
                vec![
                    TransactWriteItem::builder().update(mark).build(),
                    TransactWriteItem::builder().update(sale).build(),
                    self.take_from_buyer(&order.sale_id, &order.user_id, u64::from(units))?,
                ]
            }
            Source::Abandoned(new) => {
                let mut item =
                    order_item(new, OrderStatus::Rejected, Some(RejectReason::Abandoned));
                item.remove("expiresAt");
                item.insert("rejectedAt".into(), AttributeValue::S(now.to_owned()));
                item.insert(
                    "offeredUnits".into(),
                    AttributeValue::N(offered.to_string()),
                );
                item.insert("returnSeq".into(), AttributeValue::N((seq + 1).to_string()));
                let put = Put::builder()
                    .table_name(&self.orders_table)
                    .set_item(Some(item))
                    .condition_expression("attribute_not_exists(orderId)")
                    .build()
                    .map_err(transient)?;
                let sale = self.return_at(&new.message.sale_id, seq, -i64::from(offered))?;
                vec![
                    TransactWriteItem::builder().put(put).build(),
                    TransactWriteItem::builder().update(sale).build(),
                ]
            }
        })
    }

    /// One try of handing `source`'s units to `heads` at the sale's
    /// position `seq`, at most `cap` of them.
    pub(super) async fn handover_at(
        &self,
        source: Source<'_>,
        heads: &[&Candidate],
        terms: &OfferTerms,
        now_ms: i64,
        seq: u64,
        cap: u32,
    ) -> Result<Try, OrderStoreError> {
        let now = clock::rfc3339_ms(now_ms);
        let units = source.units();
        let offered = u32::try_from(heads.len())
            .unwrap_or(units)
            .min(units)
            .min(cap)
            .min(MAX_OFFERS);
        let heads = &heads[..offered as usize];
        let mut items = self.source_items(source, offered, &now, seq)?;
        let lead = items.len();
        let (sale_id, source_id) = (source.sale_id(), source.order_id());
        let mut offers = Vec::with_capacity(heads.len());
        for head in heads {
            let new = NewOrder::new(
                OrderMessage {
                    v: OrderMessage::VERSION,
                    order_id: head.offer_id.clone(),
                    sale_id: sale_id.clone(),
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
                self.add_to_buyer(sale_id, &head.entry.user_id, 1, terms.per_user_limit)?
            else {
                return Ok(Try::PassOver(offers.len()));
            };
            let mut item = order_item(&new, OrderStatus::PendingPayment, None);
            item.insert("offerOf".into(), AttributeValue::S(source_id.to_string()));
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
                sale_id: sale_id.clone(),
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
                offer_of: Some(source_id.clone()),
                offered: 0,
            });
        }
        self.count(1, items.len());
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let reasons = match result {
            Ok(_) => {
                return Ok(Try::Moved {
                    offers,
                    offered,
                    to_stock: units - offered,
                    seq: seq + 1,
                });
            }
            Err(err) => cancellation(err)?,
        };
        let failed = |i: usize| {
            reasons
                .get(i)
                .is_some_and(|c| c == "ConditionalCheckFailed")
        };
        if failed(0) {
            return Ok(Try::SourceGone);
        }
        if failed(1) {
            if self.return_seq(sale_id).await?.is_none() {
                return Err(OrderStoreError::SaleMissing(sale_id.clone()));
            }
            return Ok(Try::Again);
        }
        // Per head: its record, its order, its entry.
        for (i, _) in heads.iter().enumerate() {
            if (0..3).any(|k| failed(lead + 3 * i + k)) {
                return Ok(Try::PassOver(i));
            }
        }
        // An expired order's buyer record (item 2) never fails its
        // condition while the order holds its units.
        if reasons.iter().any(|c| c == "TransactionConflict") {
            return Ok(Try::Again);
        }
        Err(OrderStoreError::Transient(format!(
            "handover cancelled: {reasons:?}"
        )))
    }
}
