//! What the orders API answers: a sale's public view, an order's status for
//! polling, and payment (the buyer's stand-in and the provider's callback,
//! both settled by [`crate::app::payments`]'s rules).
//!
//! An order is `QUEUED` while its reservation exists and its row does not.
//! The order id alone does not name its sale, so a missing row is looked up
//! in the reservations of the sales that can still have queued orders (live,
//! or ended within the key TTL), a short list cached per environment.

use crate::app::release::{Released, release};
use crate::clock;
use crate::domain::money::Money;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::stock_state::KEY_TTL_AFTER_END_MS;
use crate::domain::{OrderId, Quantity, Sale, SaleId, SalePhase, UserId};
use crate::error::ApiError;
use crate::observe::metrics::Metrics;
use crate::ports::{
    CatalogError, OrderStore, OrderStoreError, PayOutcome, PaymentStore, SaleCatalog, StockAdmin,
    StockStore, StockView, StoreError,
};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("not found")]
    NotFound,
    #[error("order expired")]
    Expired,
    #[error("order not payable: {0}")]
    NotPayable(&'static str),
    #[error(transparent)]
    Orders(#[from] OrderStoreError),
    #[error(transparent)]
    Stock(#[from] StoreError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("this sale has no gate")]
    NoGate,
    #[error("challenges are handed out from {opens_ms}")]
    GateNotOpen { opens_ms: i64 },
    #[error("the sale has ended")]
    SaleEnded,
    #[error("the gate refused the answer: {0}")]
    WrongAnswer(crate::domain::gate::GateError),
    #[error("the gate is not configured")]
    GateUnavailable,
    #[error("the gate refused the proof of work: {0}")]
    PowRefused(crate::domain::gate::GateError),
    #[error("{0}")]
    WrongKind(&'static str),
}

impl QueryError {
    /// The API error, given what was looked for (a sale or an order).
    pub fn into_api(self, looking_for_sale: bool) -> ApiError {
        match self {
            Self::NotFound if looking_for_sale => ApiError::SaleNotFound,
            Self::NotFound => ApiError::OrderNotFound,
            Self::Expired => ApiError::OrderExpired,
            Self::NotPayable(why) => ApiError::OrderNotPayable(why.into()),
            Self::NoGate => ApiError::InvalidRequest("this sale has no gate".into()),
            Self::GateNotOpen { opens_ms } => {
                let wait = (opens_ms - clock::now_ms()).max(0);
                ApiError::SaleNotStarted {
                    retry_after_secs: Some(u64::try_from(wait / 1000 + 1).unwrap_or(1)),
                }
            }
            Self::SaleEnded => ApiError::SaleEnded,
            Self::WrongAnswer(crate::domain::gate::GateError::Expired) => {
                ApiError::InvalidRequest("that question has expired; ask for a new one".into())
            }
            Self::WrongAnswer(crate::domain::gate::GateError::WrongAnswer) => {
                ApiError::InvalidRequest("wrong answer; ask for the question again".into())
            }
            Self::WrongAnswer(_) => {
                ApiError::InvalidRequest("challengeId is not one this sale's question gave".into())
            }
            Self::PowRefused(crate::domain::gate::GateError::Expired) => {
                ApiError::InvalidRequest("that challenge has expired; ask for a new one".into())
            }
            Self::PowRefused(crate::domain::gate::GateError::WrongAnswer) => {
                ApiError::InvalidRequest(
                    "nonce does not solve the challenge (too few leading zero bits)".into(),
                )
            }
            Self::PowRefused(_) => ApiError::InvalidRequest(format!(
                "challengeId must be the one GET gave and nonce 1 to {} characters",
                crate::domain::pow::MAX_NONCE_LEN
            )),
            Self::WrongKind(why) => ApiError::InvalidRequest(why.into()),
            Self::Orders(_) | Self::Stock(_) | Self::Catalog(_) | Self::GateUnavailable => {
                ApiError::paused("temporarily unavailable; retry shortly")
            }
        }
    }
}

/// How old the list of open sales must be before a lookup that found
/// nothing in it reads it again.
const LIST_REFRESH_AFTER: Duration = Duration::from_millis(500);

pub struct OrderQueries<O, S, C> {
    orders: O,
    stock: S,
    catalog: C,
    sale_list_ttl: Duration,
    open_sales: Mutex<Option<(Instant, Vec<SaleId>)>>,
    gate: Option<crate::domain::gate::Gate>,
    payment_key: Option<crate::domain::payment::PaymentKey>,
    metrics: Metrics,
    /// The lottery's tickets and a due draw's drive (`None`: no ticket is
    /// ever shown, as in services that never read one).
    lottery: Option<std::sync::Arc<dyn crate::app::draw::Lottery>>,
    /// Which orders the buyer's stand-in for the provider may mark paid.
    stand_in: crate::config::StandInPayments,
}

impl<O: OrderStore + PaymentStore, S: StockStore + StockAdmin, C: SaleCatalog>
    OrderQueries<O, S, C>
{
    pub fn new(orders: O, stock: S, catalog: C, sale_list_ttl: Duration) -> Self {
        Self {
            orders,
            stock,
            catalog,
            sale_list_ttl,
            open_sales: Mutex::new(None),
            gate: None,
            payment_key: None,
            metrics: Metrics::off(),
            lottery: None,
            stand_in: crate::config::StandInPayments::default(),
        }
    }

    /// The same service, its pay route paying the orders `stand_in` says.
    pub fn with_stand_in(mut self, stand_in: crate::config::StandInPayments) -> Self {
        self.stand_in = stand_in;
        self
    }

    /// The same service showing buyers their lottery tickets, and driving a
    /// due draw when a ticket holder asks (its winners are sent to the
    /// queue the [`crate::app::draw::Drawer`] holds).
    pub fn with_lottery(mut self, lottery: std::sync::Arc<dyn crate::app::draw::Lottery>) -> Self {
        self.lottery = Some(lottery);
        self
    }

    /// The lottery, for the operator's view of a draw.
    pub fn lottery(&self) -> Option<&dyn crate::app::draw::Lottery> {
        self.lottery.as_deref()
    }

    /// The caller's lottery ticket of the sale, as `GET /sales/{saleId}/orders`
    /// shows it (`None`: no window, or no ticket). A ticket still held once
    /// the window has closed first drives the draw (a bounded part, under
    /// its lock), so a buyer polling for their result gets it even when no
    /// purchase comes to run the draw.
    pub async fn my_ticket(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<Option<serde_json::Value>, QueryError> {
        use crate::ports::TicketStatus;
        let Some(lottery) = &self.lottery else {
            return Ok(None);
        };
        let Some(sale) = self.catalog.get_sale(sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        let Some(draw_at) = sale.window_end_ms() else {
            return Ok(None);
        };
        let mut ticket = lottery.ticket(sale_id, caller).await?;
        let held = |t: &Option<crate::ports::TicketView>| matches!(t, Some(v) if v.status == TicketStatus::Held);
        let now = clock::now_ms();
        // Nothing is decided after the end, as no purchase is: a ticket
        // still held then is told the sale ended, and never drives a draw.
        let ended = now >= sale.end_ms;
        if held(&ticket) && !ended && now >= draw_at && lottery.drive(sale_id).await {
            ticket = lottery.ticket(sale_id, caller).await?;
        }
        Ok(ticket.map(|t| {
            let (status, order_id) = match &t.status {
                TicketStatus::Held if ended => ("ENDED", None),
                TicketStatus::Held => ("TICKET", None),
                TicketStatus::Won(order_id) => ("WON", Some(order_id.to_string())),
                TicketStatus::Lost => ("LOST", None),
            };
            serde_json::json!({
                "status": status,
                "quantity": t.quantity,
                "orderId": order_id,
                "drawAt": clock::rfc3339_ms(draw_at),
            })
        }))
    }

    /// The same service counting into `metrics` (`OrdersPaid`, `PaidAmount`,
    /// `PaymentsNeedingRefund`).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The stock store it reads reservations from.
    pub fn stock(&self) -> &S {
        &self.stock
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

    /// The same service with the sale gate's key.
    pub fn with_gate(mut self, gate: crate::domain::gate::Gate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// A gated sale that is open for challenges, and the gate. The
    /// arithmetic question is handed out from shortly before the start; a
    /// proof of work only from the start, so the opening spike spreads over
    /// the time buyers take to solve it.
    async fn gated(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> Result<(&crate::domain::gate::Gate, Sale), QueryError> {
        let sale = self
            .catalog
            .get_sale(sale_id)
            .await?
            .ok_or(QueryError::NotFound)?;
        if !sale.gate {
            return Err(QueryError::NoGate);
        }
        let opens_ms = match sale.pow_bits {
            Some(_) => sale.start_ms,
            None => sale.start_ms - crate::domain::gate::OPENS_BEFORE_START_MS,
        };
        if now_ms < opens_ms {
            return Err(QueryError::GateNotOpen { opens_ms });
        }
        if now_ms >= sale.end_ms {
            return Err(QueryError::SaleEnded);
        }
        let gate = self.gate.as_ref().ok_or(QueryError::GateUnavailable)?;
        Ok((gate, sale))
    }

    /// `GET /sales/{saleId}/challenge`: the arithmetic question (`kind`
    /// `arithmetic`) or the proof of work (`kind` `pow`).
    pub async fn challenge(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<serde_json::Value, QueryError> {
        let now = clock::now_ms();
        let (gate, sale) = self.gated(sale_id, now).await?;
        if let Some(bits) = sale.pow_bits {
            let c = gate.pow_challenge(sale_id, caller, bits, now);
            return Ok(serde_json::json!({
                "kind": "pow",
                "challenge": c.challenge,
                "bits": c.bits,
                "challengeId": c.challenge_id,
                "expiresAt": clock::rfc3339_ms(c.expires_at_ms),
            }));
        }
        let c = gate.challenge(sale_id, caller, now);
        Ok(serde_json::json!({
            "kind": "arithmetic",
            "question": c.question,
            "challengeId": c.challenge_id,
            "expiresAt": clock::rfc3339_ms(c.expires_at_ms),
        }))
    }

    /// `POST /sales/{saleId}/challenge` with `{"answer": n}` and, when the
    /// client kept it, the question's `challengeId`.
    pub async fn answer(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
        answer: i64,
        challenge_id: Option<&str>,
    ) -> Result<serde_json::Value, QueryError> {
        let now = clock::now_ms();
        let (gate, sale) = self.gated(sale_id, now).await?;
        if sale.pow_bits.is_some() {
            return Err(QueryError::WrongKind(
                "this sale's gate is a proof of work: send {\"challengeId\", \"nonce\"}",
            ));
        }
        let nonce = nonce_from(now, caller);
        let pass = gate
            .answer(sale_id, caller, answer, challenge_id, now, nonce)
            .map_err(QueryError::WrongAnswer)?;
        Ok(pass_body(&pass))
    }

    /// `POST /sales/{saleId}/challenge` with `{"challengeId", "nonce"}`: a
    /// solved proof of work gives the same pass as a right answer. A nonce
    /// that does not solve it records nothing.
    pub async fn solve(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
        challenge_id: &str,
        nonce: &str,
    ) -> Result<serde_json::Value, QueryError> {
        let now = clock::now_ms();
        let (gate, sale) = self.gated(sale_id, now).await?;
        let Some(bits) = sale.pow_bits else {
            return Err(QueryError::WrongKind(
                "this sale's gate asks a question: send {\"answer\": n}",
            ));
        };
        let pass = gate
            .pow_answer(sale_id, caller, bits, challenge_id, nonce, now)
            .map_err(QueryError::PowRefused)?;
        Ok(pass_body(&pass))
    }

    /// `GET /sales/{saleId}/orders`: the caller's own orders of the sale,
    /// newest first: every row (through the buyer index, and by id for a
    /// reservation marked written that the index does not show yet), and
    /// `QUEUED` for a reservation whose row is not written yet. How a buyer
    /// who lost their `202` finds it.
    pub async fn my_orders(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<Vec<Order>, QueryError> {
        let Some(sale) = self.catalog.get_sale(sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        let mut orders = Vec::new();
        for order in self.orders.orders_of_buyer(sale_id, caller).await? {
            orders.push(self.released_if_due(order).await);
        }
        let reservations = self.stock.buyer_reservations(sale_id, caller).await?;
        for (order_id, resv) in reservations {
            if orders.iter().any(|o| o.order_id == order_id) {
                continue;
            }
            match resv.state.as_str() {
                "QUEUED" => orders.push(queued_order(
                    order_id,
                    sale_id.clone(),
                    caller,
                    &resv,
                    sale.price,
                )?),
                _ => {
                    if let Some(row) = self.orders.get(&order_id).await?
                        && &row.user_id == caller
                    {
                        orders.push(self.released_if_due(row).await);
                    }
                }
            }
        }
        orders.sort_by_key(|o| std::cmp::Reverse(o.created_at_ms));
        Ok(orders)
    }

    /// `GET /sales/{saleId}`. `remaining` is Redis's count (it may lag the
    /// orders by the queue's delay); `gate` says whether the sale asks its
    /// question before a purchase.
    pub async fn sale_view(&self, sale_id: &SaleId) -> Result<serde_json::Value, QueryError> {
        let sale = self
            .catalog
            .get_sale(sale_id)
            .await?
            .ok_or(QueryError::NotFound)?;
        // Redis down must not hide the sale's page: show what the table knows.
        let live = self.stock.view(sale_id, None).await.ok().flatten();
        let (remaining, status) = public_status(&sale, clock::now_ms(), live.as_ref());
        Ok(serde_json::json!({
            "saleId": sale.sale_id,
            "name": sale.name,
            "startAt": clock::rfc3339_ms(sale.start_ms),
            "endAt": clock::rfc3339_ms(sale.end_ms),
            "totalStock": sale.total_stock,
            "remaining": remaining.max(0),
            "perUserLimit": sale.per_user_limit,
            "status": status,
            "price": Money::body_of(sale.price.as_ref()),
            // Whether a purchase needs the gate's pass: the buyer page asks
            // for a question only then (no wasted request per buyer at the
            // busiest moment).
            "gate": sale.gate,
            // The gate's kind: `null` for the arithmetic question, else
            // the proof of work's leading zero bits.
            "powBits": sale.pow_bits,
            // A lottery window: the buyer page says "you are in the draw"
            // for a ticket, and when the draw starts. Never the seed.
            "admission": sale.admission.as_ref().map(|a| serde_json::json!({
                "window": a.window_secs,
                "windowEndAt": sale.window_end_ms().map(clock::rfc3339_ms),
            })),
        }))
    }

    /// `GET /orders/{orderId}`: only the owner sees it; anyone else gets the
    /// same 404 as for an order that does not exist.
    pub async fn order(&self, order_id: &OrderId, caller: &UserId) -> Result<Order, QueryError> {
        if let Some(order) = self.orders.get(order_id).await? {
            return if &order.user_id == caller {
                Ok(self.released_if_due(order).await)
            } else {
                Err(QueryError::NotFound)
            };
        }
        self.queued(order_id, Some(caller))
            .await?
            .ok_or(QueryError::NotFound)
    }

    /// `order` as the API answers it now. One whose payment window has
    /// closed is released first, as the release job would (the ledger's
    /// conditional expiry, then its units and its buyer's count back in
    /// Redis; exactly once, whoever gets there first): from the instant the
    /// API says `EXPIRED`, the unit is back on sale and its buyer may buy
    /// again. A release that cannot be made now (a fault) still answers
    /// `EXPIRED` (it can no longer be paid); the job releases it.
    async fn released_if_due(&self, order: Order) -> Order {
        let now = clock::now_ms();
        if order.status != OrderStatus::PendingPayment
            || order.status_at(now) != OrderStatus::Expired
        {
            return order;
        }
        match release(&self.orders, &self.stock, &order.order_id, now).await {
            Ok(Released::Now { order, .. }) => order,
            // Paid or released by someone else meanwhile: the row says which.
            Ok(Released::Not(_)) => match self.orders.get(&order.order_id).await {
                Ok(Some(row)) => row,
                _ => order,
            },
            Err(err) => {
                tracing::warn!(order_id = %order.order_id, %err, "could not release an order past its window now; the release job will");
                order
            }
        }
    }

    /// `GET /admin/orders/{orderId}`: any buyer's order, as its buyer sees
    /// it (`QUEUED` while only its reservation exists).
    pub async fn any_order(&self, order_id: &OrderId) -> Result<Order, QueryError> {
        if let Some(order) = self.orders.get(order_id).await? {
            return Ok(order);
        }
        self.queued(order_id, None)
            .await?
            .ok_or(QueryError::NotFound)
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

    /// The order as `QUEUED`, if a reservation for it exists (and, with a
    /// `caller`, is theirs).
    async fn queued(
        &self,
        order_id: &OrderId,
        caller: Option<&UserId>,
    ) -> Result<Option<Order>, QueryError> {
        if let Some(order) = self.queued_in(order_id, caller, false).await? {
            return Ok(Some(order));
        }
        // Not in the sales listed: a sale made since may hold it (a buyer
        // looks 2 s after their `202`). The list is read again, at most
        // every LIST_REFRESH_AFTER, so unknown ids cost at most two reads of
        // the (small) sales table a second.
        self.queued_in(order_id, caller, true).await
    }

    async fn queued_in(
        &self,
        order_id: &OrderId,
        caller: Option<&UserId>,
        refresh: bool,
    ) -> Result<Option<Order>, QueryError> {
        let Some(sale_ids) = self.open_sale_ids(refresh).await? else {
            return Ok(None);
        };
        for sale_id in sale_ids {
            let Some(view) = self.stock.view(&sale_id, Some(order_id)).await? else {
                continue;
            };
            let Some(resv) = view.reservation else {
                continue;
            };
            if caller.is_some_and(|c| resv.user_id != c.as_str()) || resv.state == "REJECTED" {
                return Ok(None);
            }
            let owner = match caller {
                Some(caller) => caller.clone(),
                None => UserId::parse(&resv.user_id).map_err(|e| StoreError::Protocol(e.0))?,
            };
            let price = self
                .catalog
                .get_sale(&sale_id)
                .await?
                .and_then(|sale| sale.price);
            return Ok(Some(queued_order(
                order_id.clone(),
                sale_id,
                &owner,
                &resv,
                price,
            )?));
        }
        Ok(None)
    }

    /// Sales whose Redis keys may still hold reservations.
    /// With `refresh`, only a list read again (`None` when the cached one
    /// is younger than [`LIST_REFRESH_AFTER`]: it was just read).
    async fn open_sale_ids(&self, refresh: bool) -> Result<Option<Vec<SaleId>>, QueryError> {
        if let Ok(cached) = self.open_sales.lock()
            && let Some((at, ids)) = cached.as_ref()
        {
            if refresh && at.elapsed() < LIST_REFRESH_AFTER {
                return Ok(None);
            }
            if !refresh && at.elapsed() < self.sale_list_ttl {
                return Ok(Some(ids.clone()));
            }
        }
        let now = clock::now_ms();
        let ids: Vec<SaleId> = self
            .catalog
            .list_sales()
            .await?
            .into_iter()
            .filter(|s: &Sale| s.end_ms + KEY_TTL_AFTER_END_MS > now)
            .map(|s| s.sale_id)
            .collect();
        if let Ok(mut cached) = self.open_sales.lock() {
            *cached = Some((Instant::now(), ids.clone()));
        }
        Ok(Some(ids))
    }
}

/// A sale's `remaining` and `status` as `GET /sales/{saleId}` shows them,
/// from the catalog's window and what Redis holds (`None`: not loaded, or
/// Redis out of reach). The operator dashboard shows the same status.
pub fn public_status(sale: &Sale, now_ms: i64, live: Option<&StockView>) -> (i64, &'static str) {
    match (sale.phase_at(now_ms), live) {
        (SalePhase::NotStarted, live) => (
            live.map_or(i64::from(sale.total_stock), |l| l.remaining),
            "UPCOMING",
        ),
        (SalePhase::Ended, live) => (live.map_or(0, |l| l.remaining), "ENDED"),
        (SalePhase::Live, live) if sale.paused => (live.map_or(0, |l| l.remaining), "PAUSED"),
        (SalePhase::Live, None) => (0, "PAUSED"),
        (SalePhase::Live, Some(l)) if l.paused => (l.remaining, "PAUSED"),
        (SalePhase::Live, Some(l)) if l.remaining <= 0 => (0, "SOLD_OUT"),
        (SalePhase::Live, Some(l)) => (l.remaining, "LIVE"),
    }
}

/// An order as `QUEUED`: accepted, its reservation in Redis, no row yet.
/// Its `amount` is the one the order-writer will record (the price is
/// frozen from the start).
fn queued_order(
    order_id: OrderId,
    sale_id: SaleId,
    caller: &UserId,
    resv: &crate::ports::ReservationRecord,
    price: Option<Money>,
) -> Result<Order, StoreError> {
    let quantity = Quantity::new(resv.quantity).map_err(|e| StoreError::Protocol(e.0))?;
    Ok(Order {
        order_id,
        sale_id,
        user_id: caller.clone(),
        quantity,
        status: OrderStatus::Queued,
        created_at_ms: resv.at_ms,
        expires_at_ms: None,
        reject_reason: None,
        return_seq: None,
        amount: price.and_then(|p| p.times(quantity)),
        paid_at_ms: None,
        payment_id: None,
        refunds: Vec::new(),
    })
}

/// A pass as `POST /sales/{saleId}/challenge` answers it.
fn pass_body(pass: &crate::domain::gate::Pass) -> serde_json::Value {
    serde_json::json!({
        "token": pass.token,
        "expiresAt": clock::rfc3339_ms(pass.expires_at_ms),
    })
}

/// A pass nonce: unique per issue (time, caller, a process counter).
fn nonce_from(now_ms: i64, caller: &UserId) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static ISSUED: AtomicU64 = AtomicU64::new(0);
    let n = ISSUED.fetch_add(1, Ordering::Relaxed);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in caller
        .as_str()
        .bytes()
        .chain(now_ms.to_le_bytes())
        .chain(n.to_le_bytes())
        .chain(u64::from(std::process::id()).to_le_bytes())
    {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests;
