//! Payments on DynamoDB. A payment's effect is one conditional write of its
//! order, which also keeps the payment's id on the row (`paymentId`, or in
//! `refundPaymentIds`): the row is the payment's idempotency record, so a
//! payment is applied once however often the provider (or a buyer's click)
//! sends it, and concurrent payments and the expiry have one winner (each
//! write is conditional on the order's state, as the expiry is). Then the
//! payment's own record is written, once, for the refunds view and the
//! audit (a crash between the two: the provider's retry finds its id on
//! the row and writes the record).
//!
//! Payment item: `orderId` = `payment#<paymentId>` (a payment id holds no
//! `#`, an order id none either: no order's key), `paymentId`,
//! `paymentOrderId`, `paymentSaleId`, `paymentUserId`, `amount` (the map
//! of `catalog::money_to_attr`, absent for an order without a price),
//! `outcome` (`PAID` or `REFUND_NEEDED`), `at`. It has no `saleId`,
//! `userId` or `pendingBucket`, so it is in neither `byBuyer` nor the
//! pending index, and no bucket of a sale. A payment that needs a refund
//! also carries `saleBucket` = `<saleId>#refunds` and `status` =
//! `REFUND_NEEDED`: one partition of `bySaleBucketStatus` that no order
//! uses (order buckets are numbers), which is how the refunds view lists
//! a sale's refunds without a scan.
//!
//! Effects, in [`PaymentStore::settle`]: the payable order (`PENDING_PAYMENT`,
//! `expiresAt` after now) becomes `PAID` with `paymentId` and `paidAt`; an
//! order that cannot be paid keeps its status and gets `refund` = `NEEDED`
//! and the payment id added to `refundPaymentIds` (a string set).

use crate::adapters::dynamo::catalog::{money_from_attr, money_to_attr};
use crate::adapters::dynamo::order_index::order_from_item;
use crate::adapters::dynamo::orders::{DynamoOrders, query_items, transient};
use crate::clock;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::{OrderId, PaymentId, SaleId, UserId};
use crate::ports::{
    OrderStore, OrderStoreError, PayOutcome, Payment, PaymentOutcome, PaymentRecord, PaymentStore,
    Settlement,
};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

/// Tries of one settlement whose conditional write lost to another on the
/// order (a concurrent payment or expiry): each loss is another's effect,
/// so a few tries always settle.
const SETTLE_ATTEMPTS: u32 = 8;

/// The key of a payment's record in the `orders` table.
pub fn payment_key(payment_id: &PaymentId) -> String {
    format!("payment#{payment_id}")
}

/// The `bySaleBucketStatus` partition of a sale's refunds.
pub fn refunds_bucket(sale_id: &SaleId) -> String {
    format!("{sale_id}#refunds")
}

fn payment_item(order: &Order, payment: &Payment, outcome: PaymentOutcome) -> Item {
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let mut item: Item = HashMap::from([
        ("orderId".into(), s(&payment_key(&payment.payment_id))),
        ("paymentId".into(), s(payment.payment_id.as_str())),
        ("paymentOrderId".into(), s(order.order_id.as_str())),
        ("paymentSaleId".into(), s(order.sale_id.as_str())),
        ("paymentUserId".into(), s(order.user_id.as_str())),
        ("outcome".into(), s(outcome.as_str())),
        ("at".into(), s(&clock::rfc3339_ms(payment.at_ms))),
    ]);
    if let Some(paid) = &payment.paid {
        item.insert("amount".into(), money_to_attr(paid));
    }
    if outcome == PaymentOutcome::RefundNeeded {
        item.insert("saleBucket".into(), s(&refunds_bucket(&order.sale_id)));
        item.insert("status".into(), s(outcome.as_str()));
    }
    item
}

pub fn payment_from_item(item: &Item) -> Result<PaymentRecord, OrderStoreError> {
    let bad = |what: &str| OrderStoreError::Malformed(format!("payment {what} missing or invalid"));
    let s = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.as_str()),
        _ => Err(bad(name)),
    };
    Ok(PaymentRecord {
        payment_id: PaymentId::parse(s("paymentId")?).map_err(|_| bad("paymentId"))?,
        order_id: OrderId::parse(s("paymentOrderId")?).map_err(|_| bad("paymentOrderId"))?,
        sale_id: SaleId::parse(s("paymentSaleId")?).map_err(|_| bad("paymentSaleId"))?,
        user_id: UserId::parse(s("paymentUserId")?).map_err(|_| bad("paymentUserId"))?,
        amount: money_from_attr(item.get("amount"), "amount")
            .map_err(OrderStoreError::Malformed)?,
        outcome: PaymentOutcome::parse(s("outcome")?).ok_or_else(|| bad("outcome"))?,
        at_ms: clock::parse_rfc3339_ms(s("at")?).ok_or_else(|| bad("at"))?,
    })
}

/// Whether `order` can take a payment at `at_ms` (the condition of
/// [`DynamoOrders::mark_paid`], read ahead so most calls need no write
/// bound to fail).
fn payable(order: &Order, at_ms: i64) -> bool {
    order.status == OrderStatus::PendingPayment && order.expires_at_ms.is_some_and(|at| at > at_ms)
}

/// What the order row says this payment id did to it, if anything.
fn applied(order: &Order, payment_id: &PaymentId) -> Option<PaymentOutcome> {
    if order.payment_id.as_ref() == Some(payment_id) {
        Some(PaymentOutcome::Paid)
    } else if order.refunds.contains(payment_id) {
        Some(PaymentOutcome::RefundNeeded)
    } else {
        None
    }
}

fn failed_condition<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(
    err: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> bool {
    err.as_service_error()
        .and_then(aws_sdk_dynamodb::error::ProvideErrorMetadata::code)
        == Some("ConditionalCheckFailedException")
}

/// A write refused because a transaction (the release job's expiry of
/// this very order) held the item at that moment: nothing was written.
fn conflicted<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(
    err: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> bool {
    err.as_service_error()
        .and_then(aws_sdk_dynamodb::error::ProvideErrorMetadata::code)
        == Some("TransactionConflictException")
}

/// The order as a conditional update left it (`ReturnValues: ALL_NEW`), or
/// `None` when its condition failed or a transaction held the order (the
/// caller reads it again and decides anew).
fn updated(
    result: Result<
        aws_sdk_dynamodb::operation::update_item::UpdateItemOutput,
        SdkError<
            aws_sdk_dynamodb::operation::update_item::UpdateItemError,
            aws_sdk_dynamodb::config::http::HttpResponse,
        >,
    >,
) -> Result<Option<Order>, OrderStoreError> {
    match result {
        Ok(out) => match out.attributes {
            Some(item) => Ok(Some(order_from_item(&item)?)),
            None => Err(OrderStoreError::Malformed("no attributes returned".into())),
        },
        Err(err) if failed_condition(&err) || conflicted(&err) => Ok(None),
        Err(err) => Err(transient(err)),
    }
}

impl DynamoOrders {
    /// The record of a payment id, if one was written.
    async fn find_payment(
        &self,
        payment_id: &PaymentId,
    ) -> Result<Option<PaymentRecord>, OrderStoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(payment_key(payment_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(transient)?;
        out.item.as_ref().map(payment_from_item).transpose()
    }

    /// The order as it stands now.
    async fn order_now(&self, order_id: &OrderId) -> Result<Order, OrderStoreError> {
        self.get(order_id)
            .await?
            .ok_or_else(|| OrderStoreError::Transient(format!("{order_id}: the order row is gone")))
    }

    /// `PENDING_PAYMENT` with its window open at the payment's time becomes
    /// `PAID` by this payment: one conditional write, the same kind the
    /// expiry's is conditional on, so the two have one winner. `None`: the
    /// condition failed (someone else got there first). With `owner`, also
    /// only if the order is that buyer's (the stand-in, which writes before
    /// it reads).
    async fn mark_paid(
        &self,
        order_id: &OrderId,
        owner: Option<&UserId>,
        payment: &Payment,
    ) -> Result<Option<Order>, OrderStoreError> {
        self.count(0, 1);
        let mut request = self.client.update_item();
        let mut condition = "#s = :pending AND expiresAt > :now".to_owned();
        if let Some(owner) = owner {
            condition.push_str(" AND userId = :user");
            request =
                request.expression_attribute_values(":user", AttributeValue::S(owner.to_string()));
        }
        let result = request
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order_id.to_string()))
            .update_expression(
                "SET #s = :paid, paidAt = :now, paymentId = :p REMOVE pendingSaleId, pendingBucket",
            )
            .condition_expression(condition)
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":paid", AttributeValue::S("PAID".into()))
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .expression_attribute_values(
                ":now",
                AttributeValue::S(clock::rfc3339_ms(payment.at_ms)),
            )
            .expression_attribute_values(":p", AttributeValue::S(payment.payment_id.to_string()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        updated(result)
    }

    /// Marks an order that cannot be paid as owed a refund for this payment
    /// (its status stays): on condition that it still cannot be paid (a
    /// payment is never owed back for an order it could have paid) and the
    /// payment is not on it yet (a concurrent delivery of the same payment
    /// is a replay, counted once). `None`: the condition failed.
    async fn mark_refund(
        &self,
        order: &Order,
        payment: &Payment,
    ) -> Result<Option<Order>, OrderStoreError> {
        self.count(0, 1);
        let result = self
            .client
            .update_item()
            .table_name(&self.orders_table)
            .key("orderId", AttributeValue::S(order.order_id.to_string()))
            .update_expression("SET refund = :needed ADD refundPaymentIds :ids")
            .condition_expression(
                "attribute_exists(orderId) AND NOT (#s = :pending AND expiresAt > :now) \
                 AND NOT contains(refundPaymentIds, :p) \
                 AND (attribute_not_exists(paymentId) OR paymentId <> :p)",
            )
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .expression_attribute_values(
                ":now",
                AttributeValue::S(clock::rfc3339_ms(payment.at_ms)),
            )
            .expression_attribute_values(":needed", AttributeValue::S("NEEDED".into()))
            .expression_attribute_values(":p", AttributeValue::S(payment.payment_id.to_string()))
            .expression_attribute_values(
                ":ids",
                AttributeValue::Ss(vec![payment.payment_id.to_string()]),
            )
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await;
        updated(result)
    }

    /// The payment's record, once: a record already there stays (a retry
    /// after a crash between the order's write and this one writes it now).
    async fn record(
        &self,
        order: &Order,
        payment: &Payment,
        outcome: PaymentOutcome,
    ) -> Result<(), OrderStoreError> {
        self.count(0, 1);
        let result = self
            .client
            .put_item()
            .table_name(&self.orders_table)
            .set_item(Some(payment_item(order, payment, outcome)))
            .condition_expression("attribute_not_exists(orderId)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) if failed_condition(&err) => Ok(()),
            Err(err) => Err(transient(err)),
        }
    }

    /// `POST /orders/{orderId}/pay`: the buyer's stand-in for the provider,
    /// the same settlement with the order's own payment id
    /// ([`PaymentId::stand_in`]) and nothing recorded as owed back (no money
    /// moved).
    pub(crate) async fn pay_stand_in(
        &self,
        order_id: &OrderId,
        user_id: &UserId,
        now_ms: i64,
    ) -> Result<PayOutcome, OrderStoreError> {
        let mut payment = Payment {
            payment_id: PaymentId::stand_in(order_id),
            paid: None,
            at_ms: now_ms,
        };
        // The write first, as the click's moment decides against the
        // deadline (and the expiry racing it); reads only when it did not
        // pay: to say why, or that this payment paid it before.
        if let Some(paid) = self.mark_paid(order_id, Some(user_id), &payment).await? {
            payment.paid = paid.amount;
            self.record(&paid, &payment, PaymentOutcome::Paid).await?;
            return Ok(PayOutcome::Paid(paid));
        }
        let Some(order) = self.get(order_id).await? else {
            return Ok(PayOutcome::NotFound);
        };
        if &order.user_id != user_id {
            return Ok(PayOutcome::NotFound);
        }
        payment.paid = order.amount;
        Ok(PayOutcome::of_stand_in(
            self.settle(&order, &payment, false).await?,
        ))
    }
}

impl PaymentStore for DynamoOrders {
    async fn settle(
        &self,
        order: &Order,
        payment: &Payment,
        record_refund: bool,
    ) -> Result<Settlement, OrderStoreError> {
        // A provider's payment id names one payment of one order (the
        // stand-in's names its order).
        if record_refund
            && let Some(record) = self.find_payment(&payment.payment_id).await?
            && record.order_id != order.order_id
        {
            return Ok(Settlement::ForeignPayment(record));
        }
        let mut current = order.clone();
        for attempt in 0..SETTLE_ATTEMPTS {
            if attempt > 0 {
                // The expiry's transaction may still hold the order: a
                // fully jittered wait spreads the payments racing it.
                use std::hash::BuildHasher;
                let ceiling_ms = (5u64 << attempt.min(5)).min(100);
                let draw = std::collections::hash_map::RandomState::new().hash_one(attempt);
                tokio::time::sleep(std::time::Duration::from_millis(draw % (ceiling_ms + 1))).await;
            }
            // The order row is the payment's idempotency record: the id
            // that paid it, and those owed back, are on it.
            if let Some(outcome) = applied(&current, &payment.payment_id) {
                self.record(&current, payment, outcome).await?;
                return Ok(Settlement::Replayed(outcome, current));
            }
            if payable(&current, payment.at_ms) {
                if let Some(paid) = self.mark_paid(&current.order_id, None, payment).await? {
                    self.record(&paid, payment, PaymentOutcome::Paid).await?;
                    return Ok(Settlement::Paid(paid));
                }
            } else if record_refund {
                if let Some(marked) = self.mark_refund(&current, payment).await? {
                    self.record(&marked, payment, PaymentOutcome::RefundNeeded)
                        .await?;
                    return Ok(Settlement::RefundNeeded(marked));
                }
            } else {
                return Ok(Settlement::NotPayable(current));
            }
            // Another payment or the expiry changed the order meanwhile:
            // decide again on the order as it is now.
            current = self.order_now(&order.order_id).await?;
        }
        Err(OrderStoreError::Transient(format!(
            "payment {}: order {} kept changing under it",
            payment.payment_id, order.order_id
        )))
    }

    async fn refunds_of_sale(
        &self,
        sale_id: &SaleId,
    ) -> Result<Vec<PaymentRecord>, OrderStoreError> {
        let items = query_items(
            self.client
                .query()
                .table_name(&self.orders_table)
                .index_name(crate::adapters::dynamo::order_index::BY_SALE_BUCKET_STATUS)
                .key_condition_expression("saleBucket = :bucket AND #s = :status")
                .expression_attribute_names("#s", "status")
                .expression_attribute_values(":bucket", AttributeValue::S(refunds_bucket(sale_id)))
                .expression_attribute_values(
                    ":status",
                    AttributeValue::S(PaymentOutcome::RefundNeeded.as_str().into()),
                ),
        )
        .await?;
        let mut out = items
            .iter()
            .map(payment_from_item)
            .collect::<Result<Vec<_>, _>>()?;
        out.sort_by(|a, b| (a.at_ms, a.payment_id.as_str()).cmp(&(b.at_ms, b.payment_id.as_str())));
        Ok(out)
    }
}
