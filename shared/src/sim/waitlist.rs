//! The waitlist's actors: a buyer told `SOLD_OUT` who joins the line, a
//! buyer who leaves it, and a buyer who looks at their orders and entry
//! (`GET /sales/{saleId}/orders`), finds a unit offered, and pays for it
//! or lets it lapse (decided once per offer, as a person would).

use super::world::World;
use crate::app::order_queries::{JoinAnswer, JoinRefused, JoinRequest, QueryError};
use crate::domain::UserId;
use crate::domain::orders::OrderStatus;
use crate::ports::WaitlistAdmission;
use std::sync::Arc;

/// How often, per thousand, a buyer told `SOLD_OUT` joins the line.
const JOINS_AFTER_SOLD_OUT: u64 = 500;

/// How often, per thousand, a buyer offered a unit wants it (the others
/// let it lapse, and it goes on down the line).
const TAKES_AN_OFFER: u64 = 600;

impl World {
    /// A buyer told `SOLD_OUT` may join the line next.
    pub(super) fn after_sold_out(self: &Arc<Self>, user: String) {
        if self.sched.chance(JOINS_AFTER_SOLD_OUT) {
            self.join_line(user);
        }
    }

    /// A step of the line: mostly a buyer in it looks at their entry, some
    /// leave, some join (again, or without having been told sold out).
    pub(crate) fn waitlist(self: &Arc<Self>) {
        let joined: Vec<String> = self.log().joined.iter().cloned().collect();
        let user = if !joined.is_empty() && !self.sched.chance(200) {
            let at = usize::try_from(self.sched.draw(joined.len() as u64)).unwrap_or(0);
            joined[at].clone()
        } else {
            format!("buyer-{}", self.sched.draw(u64::from(self.settings.buyers)))
        };
        match self.sched.draw(10) {
            0..=5 => self.look(user),
            6..=7 => self.leave_line(user),
            _ => self.join_line(user),
        }
    }

    fn join_line(self: &Arc<Self>, user: String) {
        self.start("orders-api join", move |w, actor| {
            Box::pin(async move {
                let Ok(user_id) = UserId::parse(&user) else {
                    return;
                };
                let request = JoinRequest {
                    sale_id: w.sale.sale_id.clone(),
                    user_id,
                    sale_token: None,
                    source_ip: None,
                };
                let answer = w.queries.join_waitlist(&request).await;
                if actor.died() {
                    return;
                }
                let told = match answer {
                    Ok(JoinAnswer::New(_)) => "201".to_owned(),
                    Ok(JoinAnswer::Existing(entry)) => format!("200 {}", entry.status),
                    Err(QueryError::JoinRefused(JoinRefused(why))) => {
                        format!("refused {}", admission(&why))
                    }
                    Err(err) => super::actors::query_refusal(&err),
                };
                w.trace(&format!("{user} joins the waitlist"));
                if told.starts_with('2') {
                    w.log().joined.insert(user);
                }
                w.answer(format!("waitlist join: {told}"));
            })
        });
    }

    fn leave_line(self: &Arc<Self>, user: String) {
        self.start("orders-api leave", move |w, actor| {
            Box::pin(async move {
                let Ok(user_id) = UserId::parse(&user) else {
                    return;
                };
                let answer = w.queries.leave_waitlist(&w.sale.sale_id, &user_id).await;
                if actor.died() {
                    return;
                }
                let told = match answer {
                    Ok(entry) => entry.status.to_owned(),
                    Err(err) => super::actors::query_refusal(&err),
                };
                w.trace(&format!("{user} leaves the waitlist"));
                w.answer(format!("waitlist leave: {told}"));
            })
        });
    }

    /// The buyer's page: their orders and their entry; an offer found
    /// pending is paid if the buyer wants it.
    fn look(self: &Arc<Self>, user: String) {
        self.start("orders-api orders", move |w, actor| {
            Box::pin(async move {
                let Ok(user_id) = UserId::parse(&user) else {
                    return;
                };
                let sale_id = &w.sale.sale_id;
                let orders = w.queries.my_orders(sale_id, &user_id).await;
                let entry = match &orders {
                    Ok(orders) => w.queries.my_waitlist(sale_id, &user_id, None, orders).await,
                    Err(_) => Ok(None),
                };
                if actor.died() {
                    return;
                }
                let offer = match (orders, entry) {
                    (Ok(_), Ok(entry)) => entry.and_then(|e| e.offer),
                    (Err(err), _) | (_, Err(err)) => {
                        w.answer(format!("orders: {}", super::actors::query_refusal(&err)));
                        return;
                    }
                };
                let Some(offer) = offer else {
                    w.answer("orders: read");
                    return;
                };
                w.trace(&format!("{user} sees offer {}", offer.order_id));
                w.answer(format!("waitlist: offer seen {}", offer.status.as_str()));
                if offer.status != OrderStatus::PendingPayment || !w.wants(&offer.order_id) {
                    return;
                }
                let paid = w.queries.pay(&offer.order_id, &user_id).await;
                if actor.died() {
                    return;
                }
                match paid {
                    Ok(order) => {
                        w.answer("pay offer: 200 PAID");
                        if order.status == OrderStatus::Paid {
                            w.log().paid.insert(offer.order_id);
                        }
                    }
                    Err(err) => {
                        w.answer(format!("pay offer: {}", super::actors::query_refusal(&err)))
                    }
                }
            })
        });
    }

    /// Whether the buyer wants the unit offered them: drawn the first time
    /// they see the offer, the same every time after.
    fn wants(&self, offer: &crate::domain::OrderId) -> bool {
        if let Some(decided) = self.log().offers.get(offer).copied() {
            return decided;
        }
        let wants = self.sched.chance(TAKES_AN_OFFER);
        self.log().offers.insert(offer.clone(), wants);
        wants
    }
}

/// An admission's refusal, as its answer names it.
fn admission(why: &WaitlistAdmission) -> &'static str {
    match why {
        WaitlistAdmission::Admitted { .. } => "ADMITTED",
        WaitlistAdmission::SaleMissing => "SALE_MISSING",
        WaitlistAdmission::Paused => "SALE_PAUSED",
        WaitlistAdmission::NotStarted { .. } => "NOT_STARTED",
        WaitlistAdmission::Ended => "SALE_ENDED",
        WaitlistAdmission::Drawing => "DRAWING",
        WaitlistAdmission::Available { .. } => "NOT_SOLD_OUT",
        WaitlistAdmission::GateRequired => "GATE_REQUIRED",
        WaitlistAdmission::LimitExceeded { .. } => "LIMIT_EXCEEDED",
        WaitlistAdmission::RateLimited { .. } => "RATE_LIMITED",
    }
}
