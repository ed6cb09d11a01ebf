//! The buyer's waitlist routes: join (`POST /sales/{saleId}/waitlist`),
//! leave (`DELETE`), and the entry as `GET /sales/{saleId}/orders` shows it.
//!
//! Joining asks what purchasing asks: the stock store's admission (pause,
//! window, lottery draw, gate pass, the buyer's limit, the rate limiter,
//! and that nothing is on sale), then the ledger's entry, put once per
//! buyer and sale. A buyer joining again keeps their entry, whatever became
//! of it: a script re-joining gains no place, and a buyer who left does not
//! come back at the end of the line either (an entry resolves once).
//!
//! The place (`position`, `ahead`) counts the entries still waiting ahead
//! on the ledger's index; the odds ([`crate::domain::waitlist::Odds`]) go by
//! the sale's returns so far.

use super::*;
use crate::domain::waitlist::{EntryStatus, LineKey, Odds};
use crate::ports::{Joined, WaitlistAdmission, WaitlistEntry, WaitlistJoin};

/// A buyer's entry as the routes answer it (the edge writes it,
/// `http::bodies::WaitlistBody`).
#[derive(Debug, Clone, PartialEq)]
pub struct WaitlistAnswer {
    pub sale_id: SaleId,
    /// `WAITING`, `OFFERED`, `LEFT`, `ENDED` (still waiting at the end).
    pub status: &'static str,
    /// Entries waiting ahead; only while `WAITING`.
    pub ahead: Option<u64>,
    /// The offered order; only when `OFFERED` (and its row readable).
    pub offer: Option<Order>,
    /// Only while `WAITING`, once the sale has had a unit back.
    pub odds: Option<Odds>,
    pub joined_at_ms: i64,
}

/// A join, as the route is told: a new entry (`201`) or the one the buyer
/// had (`200`).
#[derive(Debug, Clone, PartialEq)]
pub enum JoinAnswer {
    New(WaitlistAnswer),
    Existing(WaitlistAnswer),
}

/// A join the stock store's admission refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("waitlist join refused: {0:?}")]
pub struct JoinRefused(pub WaitlistAdmission);

impl From<JoinRefused> for ApiError {
    fn from(JoinRefused(why): JoinRefused) -> Self {
        match why {
            WaitlistAdmission::SaleMissing | WaitlistAdmission::Paused => {
                ApiError::paused("the sale is paused or being restored; retry shortly")
            }
            WaitlistAdmission::NotStarted { start_ms } => {
                let wait = (start_ms - clock::now_ms()).max(0);
                ApiError::SaleNotStarted {
                    retry_after_secs: Some(u64::try_from(wait / 1000 + 1).unwrap_or(1)),
                }
            }
            WaitlistAdmission::Ended => ApiError::SaleEnded,
            WaitlistAdmission::Drawing => ApiError::Drawing,
            WaitlistAdmission::Available { remaining } => ApiError::NotSoldOut { remaining },
            WaitlistAdmission::GateRequired => ApiError::GateRequired,
            WaitlistAdmission::LimitExceeded { order_ids } => ApiError::LimitExceeded { order_ids },
            WaitlistAdmission::RateLimited { retry_after_ms } => ApiError::RateLimited {
                retry_after_secs: retry_after_ms.div_ceil(1000).max(1),
            },
            // Never a refusal.
            WaitlistAdmission::Admitted { .. } => ApiError::Internal,
        }
    }
}

/// A join's request, parsed at the edge.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub sale_id: SaleId,
    pub user_id: UserId,
    /// The `X-Sale-Token` header, for gated sales.
    pub sale_token: Option<String>,
    pub source_ip: Option<String>,
}

impl<O: OrderStore + PaymentStore + WaitlistStore, S: StockStore + StockAdmin, C: SaleCatalog>
    OrderQueries<O, S, C>
{
    /// `POST /sales/{saleId}/waitlist`.
    pub async fn join_waitlist(&self, req: &JoinRequest) -> Result<JoinAnswer, QueryError> {
        let Some(sale) = self.catalog.get_sale(&req.sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        // Someone who joined before is answered their entry, whatever the
        // sale's state now (no pass used, no bucket paid).
        if let Some(entry) = self.orders.entry(&req.sale_id, &req.user_id).await? {
            return Ok(JoinAnswer::Existing(self.entry_answer(&sale, entry).await?));
        }
        let pass = match (&self.gate, &req.sale_token) {
            (Some(gate), Some(token)) => gate
                .verify(&req.sale_id, &req.user_id, token, clock::now_ms())
                .map_err(|why| tracing::debug!(%why, "gate pass refused"))
                .ok(),
            _ => None,
        };
        let admission = self
            .stock
            .admit_waitlist(WaitlistJoin {
                sale_id: &req.sale_id,
                user_id: &req.user_id,
                gate_nonce: pass.as_ref().map(|p| p.nonce.as_str()),
                gate_issued_ms: pass.as_ref().map(|p| p.issued_at_ms),
                source_ip: req.source_ip.as_deref(),
            })
            .await?;
        let WaitlistAdmission::Admitted { now_ms } = admission else {
            return Err(QueryError::JoinRefused(JoinRefused(admission)));
        };
        let key = match &sale.admission {
            Some(lottery) => LineKey::drawn(&lottery.seed, req.user_id.as_str()),
            None => LineKey::Joined(u64::try_from(now_ms).unwrap_or(0), req.user_id.to_string()),
        };
        let joined = self
            .orders
            .join(&req.sale_id, &req.user_id, &key.sort_key(), now_ms)
            .await?;
        Ok(match joined {
            Joined::New(entry) => JoinAnswer::New(self.entry_answer(&sale, entry).await?),
            Joined::Existing(entry) => JoinAnswer::Existing(self.entry_answer(&sale, entry).await?),
        })
    }

    /// `DELETE /sales/{saleId}/waitlist`: the entry after, `NotFound`
    /// without one.
    pub async fn leave_waitlist(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<WaitlistAnswer, QueryError> {
        let Some(sale) = self.catalog.get_sale(sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        let Some(entry) = self.orders.leave(sale_id, caller, clock::now_ms()).await? else {
            return Err(QueryError::NotInWaitlist);
        };
        self.entry_answer(&sale, entry).await
    }

    /// The caller's entry, as `GET /sales/{saleId}/orders` shows it beside
    /// their lottery `ticket` and their `orders` (as that route read them).
    ///
    /// The polls of the buyers who hold something, a sale's whole crowd of
    /// winners at once, cost no read of the line: a ticket not drawn yet
    /// has no entry beside it (joins are refused until the draw is done),
    /// and a buyer whose orders fill their limit, none of them an offer,
    /// could not have joined (a join is refused at the limit) nor be
    /// offered a unit (an offer is refused past it).
    pub async fn my_waitlist(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
        ticket: Option<&super::TicketAnswer>,
        orders: &[Order],
    ) -> Result<Option<WaitlistAnswer>, QueryError> {
        if ticket.is_some_and(|t| t.status == "TICKET") {
            return Ok(None);
        }
        let Some(sale) = self.catalog.get_sale(sale_id).await? else {
            return Err(QueryError::NotFound);
        };
        let now = clock::now_ms();
        let live = orders.iter().filter(|o| {
            matches!(
                o.status_at(now),
                OrderStatus::Queued | OrderStatus::PendingPayment | OrderStatus::Paid
            )
        });
        let held: u64 = live.clone().map(|o| u64::from(o.quantity.get())).sum();
        if held >= u64::from(sale.per_user_limit) && live.clone().all(|o| o.offer_of.is_none()) {
            return Ok(None);
        }
        match self.orders.entry(sale_id, caller).await? {
            Some(entry) => Ok(Some(self.entry_answer(&sale, entry).await?)),
            None => Ok(None),
        }
    }

    async fn entry_answer(
        &self,
        sale: &Sale,
        entry: WaitlistEntry,
    ) -> Result<WaitlistAnswer, QueryError> {
        let now = clock::now_ms();
        let status = entry.status.at(sale.end_ms, now);
        let mut answer = WaitlistAnswer {
            sale_id: entry.sale_id.clone(),
            status: status.as_str(),
            ahead: None,
            offer: None,
            odds: None,
            joined_at_ms: entry.joined_at_ms,
        };
        match status {
            EntryStatus::Waiting => {
                let ahead = self.orders.ahead(&entry).await?;
                let returned = self.orders.returns(&sale.sale_id).await?;
                answer.ahead = Some(ahead);
                // Before the first return there is no pace to go by: no
                // estimate, rather than a confident zero.
                if returned > 0 {
                    answer.odds =
                        Odds::estimate(returned, now - sale.start_ms, sale.end_ms - now, ahead, 1);
                }
            }
            EntryStatus::Offered(order_id) => {
                if let Some(order) = self.orders.get(&order_id).await? {
                    answer.offer = Some(self.released_if_due(order).await);
                }
            }
            EntryStatus::Left | EntryStatus::Ended => {}
        }
        Ok(answer)
    }
}
