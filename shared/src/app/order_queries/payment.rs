//! Payment: the buyer's stand-in for the provider (`POST /orders/{orderId}/pay`)
//! and the provider's signed callback (`POST /payments/callback`), both
//! settled by [`crate::app::payments`]'s rules.

use super::*;

impl<O: OrderStore + PaymentStore + WaitlistStore, S: StockStore + StockAdmin, C: SaleCatalog>
    OrderQueries<O, S, C>
{
    /// The same service, its pay route paying the orders `stand_in` says.
    pub fn with_stand_in(mut self, stand_in: crate::config::StandInPayments) -> Self {
        self.stand_in = stand_in;
        self
    }

    /// The same service with the payment provider's signing key
    /// (`PAYMENT_SECRET_ARN`); without it every callback is refused.
    pub fn with_payment_key(mut self, key: crate::domain::payment::PaymentKey) -> Self {
        self.payment_key = Some(key);
        self
    }

    /// `POST /payments/callback`: see [`crate::app::payments`].
    pub async fn payment_callback(
        &self,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<crate::app::payments::PaymentAnswer, crate::app::payments::PaymentError> {
        crate::app::payments::callback(
            &self.orders,
            self.payment_key.as_ref(),
            &self.metrics,
            signature,
            body,
            clock::now_ms(),
        )
        .await
    }

    /// `POST /orders/{orderId}/pay`: the buyer's stand-in for the payment
    /// provider, the same settlement as the callback with the order's own
    /// payment id (`local-<orderId>`); paying twice is the same success. An
    /// order past its window is `ORDER_EXPIRED` at once, and nothing is
    /// recorded (no money moved).
    pub async fn pay(&self, order_id: &OrderId, caller: &UserId) -> Result<Order, QueryError> {
        // The stand-in takes no money: an order with an amount is paid
        // through the provider (an order's amount is written with it and
        // never changes, so reading it first decides for good).
        if self.stand_in == crate::config::StandInPayments::Unpriced
            && let Some(order) = self.orders.get(order_id).await?
            && &order.user_id == caller
            && order.amount.is_some()
        {
            return Err(QueryError::NotPayable(
                "this order has a price: it is paid through the payment provider",
            ));
        }
        match self.orders.pay(order_id, caller, clock::now_ms()).await? {
            PayOutcome::Paid(order) => {
                crate::app::payments::paid_metrics(&self.metrics, &order);
                Ok(order)
            }
            // A second click is the same payment, counted once.
            PayOutcome::AlreadyPaid(order) => Ok(order),
            PayOutcome::Expired => {
                // Said `EXPIRED`: released now, as a read would.
                if let Some(row) = self.orders.get(order_id).await? {
                    self.released_if_due(row).await;
                }
                Err(QueryError::Expired)
            }
            PayOutcome::NotPayable(OrderStatus::Rejected) => Err(QueryError::NotPayable(
                "this order was rejected: no stock was left for it",
            )),
            PayOutcome::NotPayable(_) => Err(QueryError::NotPayable("this order cannot be paid")),
            PayOutcome::NotFound => match self.queued(order_id, Some(caller)).await? {
                Some(_) => Err(QueryError::NotPayable(
                    "this order is still being created; pay once it is PENDING_PAYMENT",
                )),
                None => Err(QueryError::NotFound),
            },
        }
    }
}
