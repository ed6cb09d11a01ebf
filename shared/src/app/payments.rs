//! The payment provider's callback (`POST /payments/callback`), written
//! against the ports: signature first (on the raw bytes, before anything
//! is parsed), then the body, the order, its amount, and the settlement
//! ([`PaymentStore::settle`]) that applies the payment once per payment id.
//! `POST /orders/{orderId}/pay`, the buyer's stand-in for the provider,
//! goes through the same settlement (`OrderStore::pay`, from
//! [`crate::app::order_queries`]); both count into the same metrics here.
//!
//! An order the payment can no longer pay (expired, even before the
//! release job flipped its row; paid by another payment; rejected) is never
//! sold twice: the payment is recorded `REFUND_NEEDED`, the order marked,
//! and `PaymentsNeedingRefund` counted, for the operator's refunds view
//! ([`refunds`], `GET /admin/sales/{saleId}/refunds`).

use crate::domain::orders::Order;
use crate::domain::payment::{Callback, PaymentKey, SignatureError, parse_callback};
use crate::domain::{OrderId, PaymentId};
use crate::observe::metrics::{Counter, Metrics};
use crate::ports::{
    OrderStore, OrderStoreError, Payment, PaymentOutcome, PaymentStore, Settlement,
};

#[derive(Debug, thiserror::Error)]
pub enum PaymentError {
    /// Missing, malformed, wrong or stale (replayed) signature: nothing
    /// was parsed.
    #[error("payment signature refused: {0}")]
    Signature(#[from] SignatureError),
    /// No key configured: every callback is refused, as unsigned.
    #[error("no payment key is configured")]
    NoKey,
    #[error("{0}")]
    Invalid(String),
    #[error("no such order")]
    OrderNotFound,
    /// The payment is not the order's amount: nothing recorded.
    #[error("{0}")]
    AmountMismatch(String),
    #[error(transparent)]
    Store(#[from] OrderStoreError),
}

impl PaymentError {
    /// The API error: the one mapping of this use case's errors to HTTP.
    pub fn into_api(self) -> crate::error::ApiError {
        use crate::error::ApiError;
        match self {
            Self::Signature(_) | Self::NoKey => ApiError::InvalidSignature,
            Self::Invalid(why) => ApiError::InvalidRequest(why),
            Self::OrderNotFound => ApiError::OrderNotFound,
            Self::AmountMismatch(why) => ApiError::AmountMismatch(why),
            // The provider retries: a store outage must not be final.
            Self::Store(_) => ApiError::paused("temporarily unavailable; retry shortly"),
        }
    }
}

/// What the callback answers: the payment, what it did, and the order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentAnswer {
    pub payment_id: PaymentId,
    pub order_id: OrderId,
    pub outcome: PaymentOutcome,
    pub order: Order,
}

/// `POST /payments/callback` with its `Payment-Signature` header and raw
/// body, at `now_ms`.
pub async fn callback<O: OrderStore + PaymentStore>(
    orders: &O,
    key: Option<&PaymentKey>,
    metrics: &Metrics,
    signature: Option<&str>,
    body: &[u8],
    now_ms: i64,
) -> Result<PaymentAnswer, PaymentError> {
    key.ok_or(PaymentError::NoKey)?
        .verify(signature, body, now_ms.div_euclid(1000))?;
    let Callback {
        payment_id,
        order_id,
        paid,
    } = parse_callback(body).map_err(PaymentError::Invalid)?;
    let order = orders
        .get(&order_id)
        .await?
        .ok_or(PaymentError::OrderNotFound)?;
    match order.amount {
        Some(amount) if amount == paid => {}
        Some(amount) => {
            return Err(PaymentError::AmountMismatch(format!(
                "order {order_id} costs {} {}, not {} {}",
                amount.amount, amount.currency, paid.amount, paid.currency
            )));
        }
        None => {
            return Err(PaymentError::AmountMismatch(format!(
                "order {order_id} has no price: nothing is paid for it through the provider"
            )));
        }
    }
    let payment = Payment {
        payment_id: payment_id.clone(),
        paid: Some(paid),
        at_ms: now_ms,
    };
    let (outcome, order) = match orders.settle(&order, &payment, true).await? {
        Settlement::Paid(order) => {
            paid_metrics(metrics, &order);
            tracing::info!(%payment_id, %order_id, sale_id = %order.sale_id, "order paid by the provider");
            (PaymentOutcome::Paid, order)
        }
        Settlement::RefundNeeded(order) => {
            metrics.count(Counter::PaymentsNeedingRefund, 1);
            tracing::warn!(
                %payment_id,
                %order_id,
                sale_id = %order.sale_id,
                status = order.status.as_str(),
                "payment for an order that cannot be paid: recorded as needing a refund"
            );
            (PaymentOutcome::RefundNeeded, order)
        }
        // The provider's retry: the same answer, counted once.
        Settlement::Replayed(outcome, order) => (outcome, order),
        Settlement::ForeignPayment(record) => {
            return Err(PaymentError::Invalid(format!(
                "paymentId {} was applied to another order ({})",
                record.payment_id, record.order_id
            )));
        }
        // Recording refunds, the store never answers this; were it to,
        // the payment is owed back all the same.
        Settlement::NotPayable(order) => (PaymentOutcome::RefundNeeded, order),
    };
    Ok(PaymentAnswer {
        payment_id,
        order_id,
        outcome,
        order,
    })
}

/// `OrdersPaid` and `PaidAmount` for an order a payment just made `PAID`.
pub fn paid_metrics(metrics: &Metrics, order: &Order) {
    metrics.count(Counter::OrdersPaid, 1);
    if let Some(amount) = &order.amount {
        metrics.paid_amount(
            order.order_id.as_str(),
            amount.currency.as_str(),
            amount.amount,
        );
    }
}

/// `GET /admin/sales/{saleId}/refunds`: the sale's payments owed back to
/// buyers, oldest first.
/// `GET /admin/sales/{saleId}/waitlist`: the sale's waitlist in figures,
/// read from the ledger's entries and the orders they were offered.
pub async fn waitlist<O: crate::ports::WaitlistStore>(
    orders: &O,
    sale_id: &crate::domain::SaleId,
) -> Result<crate::ports::LineStats, crate::ports::OrderStoreError> {
    orders.stats(sale_id).await
}

pub async fn refunds<P: PaymentStore>(
    payments: &P,
    sale_id: &crate::domain::SaleId,
) -> Result<Vec<crate::domain::payment::PaymentRecord>, OrderStoreError> {
    payments.refunds_of_sale(sale_id).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::{MemoryCatalog, MemoryOrders, test_sale};
    use crate::clock;
    use crate::domain::money::{Currency, Money};
    use crate::domain::orders::{NewOrder, OrderStatus};
    use crate::domain::{OrderMessage, Quantity, SaleId, UserId};
    use crate::ports::{PayOutcome, PaymentStore};

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn eur(amount: u64) -> Money {
        Money {
            amount,
            currency: Currency::parse("EUR").unwrap(),
        }
    }

    /// A sale at 5.00 EUR with one order of two units for `u1`, reserved at
    /// `reserved_at_ms` (a 60 s window).
    async fn shop(reserved_at_ms: i64) -> (MemoryOrders, SaleId) {
        let catalog = MemoryCatalog::default();
        let mut sale = test_sale("s1", 10, 5).unwrap();
        sale.price = Some(eur(500));
        sale.payment_window_seconds = 60;
        let sale_id = sale.sale_id.clone();
        catalog.insert(sale.clone());
        let orders = catalog.orders();
        let message = OrderMessage {
            v: 1,
            order_id: OrderId::parse("o1").unwrap(),
            sale_id: sale_id.clone(),
            user_id: UserId::parse("u1").unwrap(),
            quantity: Quantity::new(2).unwrap(),
            shard: 0,
            reserved_at: clock::rfc3339_ms(reserved_at_ms),
        };
        let order = NewOrder::new(message, reserved_at_ms, reserved_at_ms, 60).priced(sale.price);
        orders.write_single(&order, 5).await.unwrap();
        (orders, sale_id)
    }

    fn body(payment_id: &str, amount: u64) -> Vec<u8> {
        serde_json::json!({"paymentId": payment_id, "orderId": "o1", "amount": amount,
                           "currency": "EUR", "status": "SUCCEEDED"})
        .to_string()
        .into_bytes()
    }

    async fn call(
        orders: &MemoryOrders,
        body: &[u8],
        signature: Option<&str>,
    ) -> Result<PaymentAnswer, PaymentError> {
        let now = clock::now_ms();
        callback(
            orders,
            Some(&PaymentKey::new(KEY)),
            &Metrics::off(),
            signature,
            body,
            now,
        )
        .await
    }

    fn sign(body: &[u8]) -> String {
        PaymentKey::new(KEY).sign(clock::now_ms() / 1000, body)
    }

    #[tokio::test]
    async fn refusals_change_nothing() {
        let (orders, _) = shop(clock::now_ms()).await;
        let before = orders.get(&OrderId::parse("o1").unwrap()).await.unwrap();
        let good = body("p1", 1000);
        assert!(matches!(
            call(&orders, &good, None).await,
            Err(PaymentError::Signature(_))
        ));
        let other = PaymentKey::new(b"another key of thirty-two bytes!")
            .sign(clock::now_ms() / 1000, &good);
        assert!(matches!(
            call(&orders, &good, Some(&other)).await,
            Err(PaymentError::Signature(_))
        ));
        let cheap = body("p1", 500);
        assert!(matches!(
            call(&orders, &cheap, Some(&sign(&cheap))).await,
            Err(PaymentError::AmountMismatch(_))
        ));
        let none = callback(
            &orders,
            None,
            &Metrics::off(),
            Some(&sign(&good)),
            &good,
            clock::now_ms(),
        )
        .await;
        assert!(matches!(none, Err(PaymentError::NoKey)));
        assert_eq!(
            orders.get(&OrderId::parse("o1").unwrap()).await.unwrap(),
            before
        );
    }

    #[tokio::test]
    async fn a_payment_pays_once_and_another_is_owed_back() {
        let (orders, sale_id) = shop(clock::now_ms()).await;
        let first = body("p1", 1000);
        let paid = call(&orders, &first, Some(&sign(&first))).await.unwrap();
        assert_eq!(paid.outcome, PaymentOutcome::Paid);
        assert_eq!(paid.order.status, OrderStatus::Paid);
        let again = call(&orders, &first, Some(&sign(&first))).await.unwrap();
        assert_eq!(again, paid, "a retry is the same answer");
        let second = body("p2", 1000);
        let owed = call(&orders, &second, Some(&sign(&second))).await.unwrap();
        assert_eq!(owed.outcome, PaymentOutcome::RefundNeeded);
        assert_eq!(
            owed.order.payment_id.as_ref().map(PaymentId::as_str),
            Some("p1")
        );
        let refunds = orders.refunds_of_sale(&sale_id).await.unwrap();
        assert_eq!(refunds.len(), 1);
        assert_eq!(
            (refunds[0].payment_id.as_str(), refunds[0].amount),
            ("p2", Some(eur(1000)))
        );
        // The buyer's click after it: the same success, the provider's payment.
        let click = orders
            .pay(
                &OrderId::parse("o1").unwrap(),
                &UserId::parse("u1").unwrap(),
                clock::now_ms(),
            )
            .await
            .unwrap();
        assert!(
            matches!(click, PayOutcome::AlreadyPaid(ref o) if o.payment_id == paid.order.payment_id)
        );
    }

    #[tokio::test]
    async fn a_late_payment_is_owed_back_and_the_stand_in_refuses_it() {
        let (orders, sale_id) = shop(clock::now_ms() - 61_000).await;
        let id = OrderId::parse("o1").unwrap();
        let click = orders
            .pay(&id, &UserId::parse("u1").unwrap(), clock::now_ms())
            .await
            .unwrap();
        assert_eq!(click, PayOutcome::Expired);
        assert!(
            orders.refunds_of_sale(&sale_id).await.unwrap().is_empty(),
            "no money moved"
        );
        let late = body("p9", 1000);
        let owed = call(&orders, &late, Some(&sign(&late))).await.unwrap();
        assert_eq!(owed.outcome, PaymentOutcome::RefundNeeded);
        let row = orders.get(&id).await.unwrap().unwrap();
        assert_eq!(
            (row.status, row.refunds.len()),
            (OrderStatus::PendingPayment, 1)
        );
        assert_eq!(row.status_at(clock::now_ms()), OrderStatus::Expired);
    }
}
