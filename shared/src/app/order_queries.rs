//! What the orders API answers: a sale's public view, an order's status for
//! polling, and payment (the buyer's stand-in and the provider's callback,
//! both settled by [`crate::app::payments`]'s rules).
//!
//! An order is `QUEUED` while its reservation exists and its row does not.
//! The order id alone does not name its sale, so a missing row is looked up
//! in the reservations of the sales that can still have queued orders (live,
//! or ended within the key TTL), a short list cached per environment.
//!
//! By route family: the sale's view here (`GET /sales/{saleId}`); `orders`
//! (an order, a buyer's orders and ticket); `gate` (the question, its
//! answer, the proof of work); `payment` (the stand-in pay and the
//! provider's callback); `waitlist` (join, leave, the buyer's entry).

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
    StockStore, StockView, StoreError, WaitlistStore,
};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

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
    #[error(transparent)]
    JoinRefused(#[from] waitlist::JoinRefused),
    #[error("not on the waitlist")]
    NotInWaitlist,
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
            Self::JoinRefused(refused) => refused.into(),
            Self::NotInWaitlist => ApiError::NotInWaitlist,
            Self::Orders(_) | Self::Stock(_) | Self::Catalog(_) | Self::GateUnavailable => {
                tracing::warn!(err = %self, "a store failed: answered 503");
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

impl<O: OrderStore + PaymentStore + WaitlistStore, S: StockStore + StockAdmin, C: SaleCatalog>
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

    /// `GET /sales/{saleId}`. `remaining` is Redis's count (it may lag the
    /// orders by the queue's delay); `gate` says whether the sale asks its
    /// question before a purchase.
    pub async fn sale_view(&self, sale_id: &SaleId) -> Result<PublicSale, QueryError> {
        let sale = self
            .catalog
            .get_sale(sale_id)
            .await?
            .ok_or(QueryError::NotFound)?;
        // Redis down must not hide the sale's page: show what the table knows.
        let live = self.stock.view(sale_id, None).await.ok().flatten();
        let (remaining, status) = public_status(&sale, clock::now_ms(), live.as_ref());
        Ok(PublicSale {
            sale,
            remaining: remaining.max(0),
            status,
        })
    }
}

/// What `GET /sales/{saleId}` shows: the sale as the catalog has it, with
/// what is left and its status from [`public_status`] (the edge writes the
/// body, `http::bodies::SaleView`).
#[derive(Debug, Clone)]
pub struct PublicSale {
    pub sale: Sale,
    /// Never below zero.
    pub remaining: i64,
    pub status: &'static str,
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

/// A buyer's lottery ticket as `GET /sales/{saleId}/orders` shows it (the
/// edge writes it, `http::bodies::TicketView`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketAnswer {
    /// `TICKET`, `WON`, `LOST`, `ENDED`.
    pub status: &'static str,
    pub quantity: Quantity,
    /// The order a won ticket made.
    pub order_id: Option<OrderId>,
    /// When the window closes and the draw decides (epoch ms).
    pub draw_at_ms: i64,
}

mod gate;
pub use gate::Question;
mod orders;
mod payment;
mod waitlist;
pub use waitlist::{JoinAnswer, JoinRefused, JoinRequest, WaitlistAnswer};

#[cfg(test)]
mod tests;
