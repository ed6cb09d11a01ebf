//! Releasing one unpaid order past its payment window: the ledger first
//! (one transaction, conditional on the order being `PENDING_PAYMENT` and
//! due, that gives its units back to the sale item at the next ledger
//! position), then its units and its buyer's count back in Redis
//! (`return_units`, once per order whatever runs it again).
//!
//! A sale with buyers waiting on its waitlist does not get the units back:
//! the same transaction hands each unit to the next buyer in line as a new
//! order ([`crate::ports::WaitlistStore::expire_to_line`]), and Redis then
//! counts that order for its buyer (`hold_offer`) instead of raising the
//! stock. A unit comes back once, so it is offered once or put back once,
//! never both (invariant 10). Units beyond the line, and every unit after
//! the sale's end, go back to the stock as before.
//!
//! Whoever gets there first releases it: the release job, or the orders API
//! the moment it would answer `EXPIRED` (a read, a payment), so that
//! `EXPIRED` always means the unit is back on sale (or offered) and the
//! buyer may buy again. The conditions make every other attempt a no-op.
//!
//! The job releases many at once ([`release_many`]): with nobody waiting,
//! the ledger expires them in batches, one write of the sale item each,
//! then Redis takes each order's units back, those calls sent together;
//! with a line, one handover after another (each takes the line's head).

use crate::domain::orders::{Order, OrderStatus};
use crate::domain::stock_state::Returned;
use crate::domain::waitlist::offer_order_id;
use crate::domain::{OrderId, Sale};
use crate::ports::{
    Candidate, ExpireOutcome, Handover, OfferClaim, OfferTerms, OrderStore, OrderStoreError,
    StockAdmin, StoreError, WaitlistEntry, WaitlistStore,
};

/// What one release did.
#[derive(Debug)]
pub enum Released {
    /// The ledger expired it now; `returned` is how Redis took its units
    /// back (a failure there is repaired by reconcile, which finds the
    /// `EXPIRED` row without its marker). `offers`: the orders its units
    /// became for buyers on the waitlist (`order.offered` of them).
    Now {
        order: Order,
        returned: Result<Returned, StoreError>,
        offers: Vec<Order>,
    },
    /// Paid, expired by someone else, not due, or absent: nothing changed.
    Not(ExpireOutcome),
}

/// How many heads of the line one read brings: enough for a chunk of
/// single-unit orders without a read each.
pub(crate) const HEADS_READ: usize = 32;

/// Expires `order_id` if it is due at `now_ms`, then gives its units back
/// to Redis, or to the sale's waitlist when `sale` (its terms) is given
/// and buyers wait.
pub async fn release<O: OrderStore + WaitlistStore, S: StockAdmin>(
    orders: &O,
    stock: &S,
    sale: Option<&Sale>,
    order_id: &OrderId,
    now_ms: i64,
) -> Result<Released, OrderStoreError> {
    match Line::waiting(orders, sale, now_ms).await? {
        Some(mut line) => line.hand_over(orders, stock, order_id, now_ms).await,
        // One order's expiry reads it alone: the orders API, which releases
        // single orders, is granted no batch read.
        None => Ok(give_back(stock, orders.expire(order_id, now_ms).await?).await),
    }
}

/// [`release`] of many orders of one sale (the job's chunk): without a
/// line, the ledger's batches first ([`OrderStore::expire_many`]), then the
/// units of each order it expired back to Redis, those calls together;
/// with one, each order handed over in turn. Each order's outcome, in the
/// order given; `Err` only when the ledger could read none of them.
pub async fn release_many<O: OrderStore + WaitlistStore, S: StockAdmin>(
    orders: &O,
    stock: &S,
    sale: Option<&Sale>,
    order_ids: &[OrderId],
    now_ms: i64,
) -> Result<Vec<Result<Released, OrderStoreError>>, OrderStoreError> {
    if let Some(mut line) = Line::waiting(orders, sale, now_ms).await? {
        let mut out = Vec::with_capacity(order_ids.len());
        for order_id in order_ids {
            out.push(line.hand_over(orders, stock, order_id, now_ms).await);
        }
        return Ok(out);
    }
    let outcomes = orders.expire_many(order_ids, now_ms).await?;
    Ok(crate::app::draw::join_all(
        outcomes
            .into_iter()
            .map(|outcome| async move { Ok(give_back(stock, outcome?).await) }),
    )
    .await)
}

/// A sale's waitlist as one release run sees it: the heads it read, used
/// up as units are offered.
struct Line<'a> {
    sale: &'a Sale,
    heads: Vec<WaitlistEntry>,
    terms: OfferTerms,
}

impl<'a> Line<'a> {
    /// The line of `sale` when buyers wait in it and the sale has not
    /// ended; `None` when its units go back to the stock.
    async fn waiting<O: WaitlistStore>(
        orders: &O,
        sale: Option<&'a Sale>,
        now_ms: i64,
    ) -> Result<Option<Line<'a>>, OrderStoreError> {
        let Some(sale) = sale.filter(|s| now_ms < s.end_ms) else {
            return Ok(None);
        };
        let heads = orders.heads(&sale.sale_id, HEADS_READ).await?;
        Ok((!heads.is_empty()).then_some(Line {
            sale,
            heads,
            terms: OfferTerms::of(sale),
        }))
    }

    async fn hand_over<O: OrderStore + WaitlistStore, S: StockAdmin>(
        &mut self,
        orders: &O,
        stock: &S,
        order_id: &OrderId,
        now_ms: i64,
    ) -> Result<Released, OrderStoreError> {
        let Some(order) = orders.get(order_id).await? else {
            return Ok(Released::Not(ExpireOutcome::NotFound));
        };
        let units = order.quantity.get() as usize;
        if self.heads.len() < units + 1 {
            // Read again: the ones used are offered now, others may have
            // joined since.
            self.heads = orders.heads(&self.sale.sale_id, HEADS_READ).await?;
        }
        let due = order.expires_at_ms.is_some_and(|at| at <= now_ms);
        if order.status != OrderStatus::PendingPayment || !due {
            return Ok(Released::Not(ExpireOutcome::NotExpirable));
        }
        let candidates = candidates(stock, self.sale, &self.heads).await?;
        let claimed = claim(stock, candidates, units + CLAIM_SPARE, now_ms).await?;
        let handover = orders
            .expire_to_line(&order, &claimed, &self.terms, now_ms)
            .await?;
        let (expired, offers, to_stock) = match handover {
            Handover::Done {
                expired,
                offers,
                to_stock,
            } => (expired, offers, to_stock),
            Handover::Not(outcome) => {
                unclaim_rest(stock, &claimed, &[]).await;
                return Ok(Released::Not(outcome));
            }
        };
        unclaim_rest(stock, &claimed, &offers).await;
        self.heads
            .retain(|h| !offers.iter().any(|o| o.user_id == h.user_id));
        Ok(offered(stock, expired, offers, to_stock).await)
    }
}

/// The entries of `heads` with the order each would be offered (its id
/// names the buyer's home shard).
pub(crate) async fn candidates<S: StockAdmin>(
    stock: &S,
    sale: &Sale,
    heads: &[WaitlistEntry],
) -> Result<Vec<Candidate>, OrderStoreError> {
    let mut candidates = Vec::with_capacity(heads.len());
    for entry in heads {
        let suffix = stock
            .offer_suffix(&sale.sale_id, &entry.user_id)
            .await
            .map_err(|e| OrderStoreError::Transient(e.to_string()))?;
        let offer_id = offer_order_id(sale.sale_id.as_str(), entry.user_id.as_str(), &suffix)
            .map_err(|e| OrderStoreError::Malformed(e.0))?;
        candidates.push(Candidate {
            entry: entry.clone(),
            offer_id,
        });
    }
    Ok(candidates)
}

/// Heads claimed beyond the units to offer, so that a head the ledger
/// passes over (it left, or its record is at the limit) leaves another
/// claimed behind it.
pub(crate) const CLAIM_SPARE: usize = 2;

/// The first `want` of `candidates` whose offer fits their limit as Redis
/// counts it (purchases still queued included), each claimed there before
/// the ledger offers it: a buyer is never offered past their limit, nor
/// able to buy past it while the offer is made. A Redis without the sale
/// claims nothing: its load counts the offers from the ledger. On a
/// failure nothing is offered this time (the claims made stand until
/// [`unclaim_rest`], or reconcile lowers them past the maximum age).
pub(crate) async fn claim<S: StockAdmin>(
    stock: &S,
    candidates: Vec<Candidate>,
    want: usize,
    now_ms: i64,
) -> Result<Vec<Candidate>, OrderStoreError> {
    let mut claimed = Vec::with_capacity(want.min(candidates.len()));
    for candidate in candidates {
        if claimed.len() >= want {
            break;
        }
        let claim = stock
            .claim_offer(
                &candidate.entry.sale_id,
                &candidate.offer_id,
                &candidate.entry.user_id,
                now_ms,
            )
            .await
            .map_err(|e| OrderStoreError::Transient(e.to_string()))?;
        match claim {
            OfferClaim::Claimed | OfferClaim::SaleMissing => claimed.push(candidate),
            OfferClaim::AtLimit => {
                tracing::info!(user_id = %candidate.entry.user_id, "waitlist head at their limit in Redis (an order still queued): not offered now");
            }
        }
    }
    Ok(claimed)
}

/// The claims of `claimed` the ledger did not turn into `offers`, taken
/// back. Best effort: a claim left behind only keeps its buyer from buying
/// past a limit they are not at, until reconcile lowers it.
pub(crate) async fn unclaim_rest<S: StockAdmin>(
    stock: &S,
    claimed: &[Candidate],
    offers: &[Order],
) {
    for candidate in claimed {
        if offers.iter().any(|o| o.order_id == candidate.offer_id) {
            continue;
        }
        if let Err(err) = stock
            .unclaim_offer(
                &candidate.entry.sale_id,
                &candidate.offer_id,
                &candidate.entry.user_id,
            )
            .await
        {
            tracing::warn!(user_id = %candidate.entry.user_id, %err, "a claim of a waitlist offer not made stays until reconcile lowers it");
        }
    }
}

/// Each of `offers` (the units of `source` handed to the line at ledger
/// position `seq`) counted for its buyer in Redis, once. A failure is
/// left to reconcile, which raises a count below what the ledger proves.
pub(crate) async fn hold_offers<S: StockAdmin>(
    stock: &S,
    source: &OrderId,
    offers: &[Order],
    seq: u64,
) {
    for offer in offers {
        if let Err(err) = stock
            .hold_offer(
                &offer.sale_id,
                &offer.order_id,
                &offer.user_id,
                offer.created_at_ms,
                seq,
            )
            .await
        {
            tracing::warn!(order_id = %offer.order_id, %err, "waitlist offer written in the ledger; its buyer's count in Redis waits for reconcile");
        }
        tracing::info!(order_id = %offer.order_id, offer_of = %source, "a returned unit offered to the waitlist");
    }
}

/// Redis's step of a release or a handover: the expired order's marker and
/// its buyer's count (its units to the stock, but for those offered), then
/// each offered order counted for its buyer. Each once, whoever runs it
/// again.
async fn offered<S: StockAdmin>(
    stock: &S,
    order: Order,
    offers: Vec<Order>,
    to_stock: u32,
) -> Released {
    let seq = order.return_seq.unwrap_or(0);
    let returned = stock
        .return_units(
            &order.sale_id,
            &order.order_id,
            order.user_id.as_str(),
            order.quantity.get(),
            order.return_seq,
            to_stock,
        )
        .await;
    if let Err(err) = &returned {
        tracing::warn!(order_id = %order.order_id, %err, "order expired in the ledger; Redis takes its units back when reconcile next runs");
    }
    hold_offers(stock, &order.order_id, &offers, seq).await;
    Released::Now {
        order,
        returned,
        offers,
    }
}

/// Redis's step of a release: the units of an order the ledger just
/// expired go back (once per order, whoever runs it again).
async fn give_back<S: StockAdmin>(stock: &S, outcome: ExpireOutcome) -> Released {
    let ExpireOutcome::Expired(order) = outcome else {
        return Released::Not(outcome);
    };
    let units = order.quantity.get();
    offered(stock, order, Vec::new(), units).await
}
