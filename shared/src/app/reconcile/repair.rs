//! Reconcile's repairs: those of a slice's buyers and reservations, then
//! those of the whole sale (see the module documentation of
//! [`super`]).

use super::{ReconcileReport, Reconciler, Repair, Violation};
use crate::app::invariants::{SaleState, SaleTotals, Whole};
use crate::app::release;
use crate::clock;
use crate::domain::orders::{NewOrder, OrderStatus, RejectReason};
use crate::domain::stock_state::{
    Holding, RedisSnapshot, Returned, SnapshotHead, StoredReservation,
};
use crate::domain::{OrderId, OrderMessage, Quantity, Sale, UserId};
use crate::ports::{
    CatalogAdmin, GiveUp, OfferTerms, OrderLedger, OrderQueue, QueueInspector, RejectWrite,
    Resolution, StockAdmin,
};
use std::time::Duration;

impl<Q, I, S, C, O> Reconciler<Q, I, S, C, O>
where
    Q: OrderQueue,
    I: QueueInspector,
    S: StockAdmin,
    C: CatalogAdmin,
    O: OrderLedger,
{
    /// Only the provably safe repairs of the buyers of `state` (the whole
    /// sale's, or a slice's); see the module documentation.
    pub(super) async fn repair_buyers(
        &self,
        state: &SaleState,
        snap: &RedisSnapshot,
        now_ms: i64,
        report: &mut ReconcileReport,
    ) {
        let sale = &state.sale;
        let sale_id = &sale.sale_id;
        let stock = self.checker.stock();
        let grace = millis(self.settings.grace);
        let max_age = millis(self.settings.max_age);
        for (order_id, resv) in &snap.reservations {
            let at_ms = resv.at_ms.parse::<i64>().unwrap_or(now_ms);
            match (resv.state.as_str(), state.rows.get(order_id)) {
                ("QUEUED", None) => {
                    let age = now_ms - at_ms;
                    if age > max_age {
                        self.give_up(sale, order_id, resv, now_ms, report).await;
                    } else if age > grace {
                        self.relay(sale, order_id, resv, report).await;
                    }
                }
                ("QUEUED", Some(order)) => {
                    // Expired rows are the release's (below).
                    let Some(resolution) = Resolution::of_order(order) else {
                        continue;
                    };
                    if let Ok(id) = OrderId::parse(order_id)
                        && stock
                            .resolve(sale_id, &id, resolution)
                            .await
                            .unwrap_or(false)
                    {
                        report.repairs.push(Repair {
                            kind: "MARKED",
                            order_id: Some(order_id.clone()),
                            detail: format!("reservation marked {}", resolution.as_str()),
                        });
                    }
                }
                _ => {}
            }
        }
        // Expired in DynamoDB, units never given back to Redis.
        for order in state
            .rows
            .values()
            .filter(|o| o.status == OrderStatus::Expired)
        {
            let resv_state = snap
                .reservations
                .get(order.order_id.as_str())
                .map(|r| r.state.as_str());
            if resv_state != Some("EXPIRED") {
                match stock
                    .return_units(
                        sale_id,
                        &order.order_id,
                        order.user_id.as_str(),
                        order.quantity.get(),
                        order.return_seq,
                        // Units offered to the waitlist are other buyers'
                        // orders now.
                        order.quantity.get().saturating_sub(order.offered),
                    )
                    .await
                {
                    Ok(Returned::Returned { .. }) => report.repairs.push(Repair {
                        kind: "UNITS_RETURNED",
                        order_id: Some(order.order_id.to_string()),
                        detail: "expired order's units given back to Redis".into(),
                    }),
                    Ok(_) => {}
                    Err(err) => report.violations.push(Violation {
                        code: "REPAIR_FAILED",
                        detail: format!("{}: {err}", order.order_id),
                    }),
                }
            }
        }
        // Buyer counts above what the buyer provably holds are lowered (a
        // count below is an OVERSELL_RISK the checker reported). Lowering
        // one wrongly would let that buyer past the limit, so only on a
        // settled read (no order written or released while rows and Redis
        // were read), only for a buyer whose count was read in one step
        // with their reservations (`holdings`: every buyer whose count the
        // rows and queued reservations do not explain), compare-and-set on
        // that count, and a holding is whichever proof is larger: the rows,
        // or Redis's own live reservations (a row the index does not show
        // yet still has its reservation).
        //
        // Counts below what the ledger proves (a failover lost the
        // purchases that made them) are raised to it: the ledger refuses
        // such a buyer anyway, and Redis should say so at once.
        if !state.settled {
            return;
        }
        let held_by_user = state.held_by_user();
        let mut verified: Vec<(&String, &Holding)> = snap.holdings.iter().collect();
        verified.sort_by(|a, b| a.0.cmp(b.0));
        for (user, holding) in verified {
            let count = holding.count.unwrap_or(0);
            let held = held_by_user.get(user).copied().unwrap_or(0);
            let (mut queued, mut reserved) = (0i64, 0i64);
            for (order_id, r) in &holding.reservations {
                let units = i64::try_from(r.quantity).unwrap_or(i64::MAX);
                if matches!(r.state.as_str(), "QUEUED" | "WRITTEN") {
                    reserved += units;
                }
                // As above: one past the maximum age was given up.
                let young = now_ms - r.at_ms.parse::<i64>().unwrap_or(now_ms) <= max_age;
                // A claim of a waitlist offer (`OFFERING`) is the ledger's
                // transaction in progress: proof while young, as a queued
                // purchase is.
                if matches!(r.state.as_str(), "QUEUED" | "OFFERING")
                    && young
                    && !state.rows.contains_key(order_id)
                {
                    queued += units;
                }
            }
            let proven = held + queued;
            let provable = proven.max(reserved);
            if count > provable
                && let Ok(now) = stock.set_buyer(sale_id, user, count, provable).await
                && now < count
            {
                report.repairs.push(Repair {
                    kind: "BUYER_CLEARED",
                    order_id: None,
                    detail: format!("{user}: {count} -> {now}"),
                });
            } else if count < proven
                && let Ok(now) = stock.set_buyer(sale_id, user, count, proven).await
                && now > count
            {
                report.repairs.push(Repair {
                    kind: "BUYER_RAISED",
                    order_id: None,
                    detail: format!("{user}: {count} -> {now}"),
                });
            }
        }
    }

    /// The repairs of the whole sale, after its buyers': a borrow between
    /// shards that died between its steps, and the stock reset.
    pub(super) async fn repair_whole(
        &self,
        whole: &Whole,
        totals: &SaleTotals,
        now_ms: i64,
        report: &mut ReconcileReport,
    ) {
        let Some(snap) = &whole.redis else { return };
        let sale_id = &whole.sale.sale_id;
        let grace = millis(self.settings.grace);
        for transfer in &snap.pending_transfers {
            if now_ms - transfer.at_ms <= grace {
                continue;
            }
            match self
                .checker
                .stock()
                .complete_transfer(sale_id, transfer)
                .await
            {
                Ok(true) => report.repairs.push(Repair {
                    kind: "TRANSFER_COMPLETED",
                    order_id: None,
                    detail: format!(
                        "{} units lent by shard {} credited to shard {}",
                        transfer.units, transfer.from, transfer.to
                    ),
                }),
                Ok(false) => {}
                Err(err) => report.violations.push(Violation {
                    code: "REPAIR_FAILED",
                    detail: format!("transfer {}: {err}", transfer.id),
                }),
            }
        }
        self.reset_stock(whole, snap, totals, report).await;
    }

    /// Redis's stock is derived from the ledger: `available`, less what
    /// Redis holds reserved without a row. `available` was read
    /// consistently at ledger position `returnSeq`, and the reset records
    /// that position: a later return of an expiry at or before it gives
    /// back no stock (only the buyer's count), so the units of expiries
    /// Redis was not given back yet are in the figure once, whatever the
    /// eventually consistent index says of them. With nothing in flight (the queue and
    /// the DLQ empty, no transfer between shards half done), a settled
    /// read and a stock read as at one instant with the reservations (not
    /// `moving`), a stock that differs (a failover lost deductions, or units
    /// were left stuck) is set to that figure, compare-and-set on the value
    /// read. A sharded sale's stock is split across shards: it is reported,
    /// never reset here.
    async fn reset_stock(
        &self,
        whole: &Whole,
        snap: &SnapshotHead,
        totals: &SaleTotals,
        report: &mut ReconcileReport,
    ) {
        // Expiries this run just gave back (the index shows them owed) move
        // the stock it read: the next run compares again.
        if !whole.settled
            || snap.moving
            || !whole.queue_quiet()
            || whole.dlq_visible > 0
            || snap.shards > 1
            || !snap.pending_transfers.is_empty()
            || totals.owed > 0
        {
            return;
        }
        let queued = totals.queued;
        let target = whole.counters.available - queued;
        if target == snap.stock || target < 0 {
            return;
        }
        match self
            .checker
            .stock()
            .set_stock(
                &whole.sale.sale_id,
                snap.stock,
                target,
                whole.counters.return_seq,
            )
            .await
        {
            Ok(Some(now)) if now == target => {
                tracing::warn!(sale_id = %whole.sale.sale_id, from = snap.stock, to = target, "Redis stock reset to the ledger's figure");
                report.repairs.push(Repair {
                    kind: "STOCK_RESET",
                    order_id: None,
                    detail: format!(
                        "Redis stock {} -> {target} (available {} at returnSeq {} - queued {queued})",
                        snap.stock, whole.counters.available, whole.counters.return_seq,
                    ),
                });
            }
            Ok(_) => {}
            Err(err) => report.violations.push(Violation {
                code: "REPAIR_FAILED",
                detail: format!("stock reset: {err}"),
            }),
        }
    }

    async fn relay(
        &self,
        sale: &Sale,
        order_id: &str,
        resv: &StoredReservation,
        report: &mut ReconcileReport,
    ) {
        let Some(message) = message_of(sale, order_id, resv) else {
            report.violations.push(Violation {
                code: "BAD_RESERVATION",
                detail: order_id.into(),
            });
            return;
        };
        match self.queue.send(&message).await {
            Ok(()) => report.repairs.push(Repair {
                kind: "RELAYED",
                order_id: Some(order_id.into()),
                detail: "reservation without an order relayed to the queue".into(),
            }),
            Err(err) => report.violations.push(Violation {
                code: "REPAIR_FAILED",
                detail: format!("relay of {order_id}: {err}"),
            }),
        }
    }

    /// A reservation past the maximum age, never an order: recorded
    /// `REJECTED` (`ABANDONED`) in the ledger, its units offered to the
    /// head of the sale's waitlist in that same transaction while buyers
    /// wait (invariant 10), the rest back to Redis's stock.
    async fn give_up(
        &self,
        sale: &Sale,
        order_id: &str,
        resv: &StoredReservation,
        now_ms: i64,
        report: &mut ReconcileReport,
    ) {
        let Some(message) = message_of(sale, order_id, resv) else {
            return;
        };
        let at_ms = resv.at_ms.parse::<i64>().unwrap_or(0);
        let order = NewOrder::new(message, at_ms, clock::now_ms(), sale.payment_window_seconds);
        // The row first: once it exists as REJECTED, a late redelivery of the
        // message is a duplicate and cannot take the units back. If a row
        // got there first (the writer wrote the order after this run read
        // the table), that row decides, never this run's plan.
        let given = match self.abandon_to_line(sale, &order, now_ms).await {
            Ok(GiveUp::Offered { rejected, offers }) => Ok((
                Resolution::of_order(&rejected),
                offers,
                rejected.return_seq.unwrap_or(0),
            )),
            Ok(GiveUp::Exists(row)) => Ok((Resolution::of_order(&row), Vec::new(), 0)),
            Ok(GiveUp::Nobody) => self
                .checker
                .orders()
                .write_rejected(&order, RejectReason::Abandoned)
                .await
                .map(|written| match written {
                    RejectWrite::Recorded => (Some(Resolution::Abandoned), Vec::new(), 0),
                    RejectWrite::Exists(row) => (Resolution::of_order(&row), Vec::new(), 0),
                }),
            Err(err) => Err(err),
        };
        let (resolution, offers, seq) = match given {
            Ok((Some(resolution), offers, seq)) => (resolution, offers, seq),
            Ok((None, ..)) => return,
            Err(err) => {
                report.violations.push(Violation {
                    code: "REPAIR_FAILED",
                    detail: format!("give up {order_id}: {err}"),
                });
                return;
            }
        };
        let id = order.message.order_id.clone();
        let stock = self.checker.stock();
        let resolved = stock.resolve(&sale.sale_id, &id, resolution).await;
        release::hold_offers(stock, &id, &offers, seq).await;
        match resolved {
            Ok(_) if !offers.is_empty() => {
                tracing::warn!(%order_id, offered = offers.len(), "reservation older than the maximum age recorded as failed; its units offered to the waitlist");
                report.repairs.push(Repair {
                    kind: "OFFERED_TO_LINE",
                    order_id: Some(order_id.into()),
                    detail: format!(
                        "never became an order within the maximum age; {} of its units offered to the waitlist ({}), the rest released",
                        offers.len(),
                        offers
                            .iter()
                            .map(|o| o.order_id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            Ok(_) if matches!(resolution, Resolution::Abandoned) => {
                tracing::warn!(%order_id, "reservation older than the maximum age released and recorded as failed");
                report.repairs.push(Repair {
                    kind: "RELEASED_FAILED",
                    order_id: Some(order_id.into()),
                    detail: "never became an order within the maximum age; stock released".into(),
                });
            }
            Ok(_) => report.repairs.push(Repair {
                kind: "MARKED",
                order_id: Some(order_id.into()),
                detail: format!(
                    "written meanwhile: reservation marked {}",
                    resolution.as_str()
                ),
            }),
            Err(err) => report.violations.push(Violation {
                code: "REPAIR_FAILED",
                detail: format!("release {order_id}: {err}"),
            }),
        }
    }

    /// The ledger's half of a give-up while buyers wait on the sale's line
    /// and it has not ended; [`GiveUp::Nobody`] otherwise.
    async fn abandon_to_line(
        &self,
        sale: &Sale,
        order: &NewOrder,
        now_ms: i64,
    ) -> Result<GiveUp, crate::ports::OrderStoreError> {
        if now_ms >= sale.end_ms {
            return Ok(GiveUp::Nobody);
        }
        let orders = self.checker.orders();
        let heads = orders.heads(&sale.sale_id, release::HEADS_READ).await?;
        if heads.is_empty() {
            return Ok(GiveUp::Nobody);
        }
        let stock = self.checker.stock();
        let candidates = release::candidates(stock, sale, &heads).await?;
        let units = order.message.quantity.get() as usize;
        let claimed =
            release::claim(stock, candidates, units + release::CLAIM_SPARE, now_ms).await?;
        let terms = OfferTerms::of(sale);
        let given = orders
            .abandon_to_line(order, &claimed, &terms, now_ms)
            .await;
        match &given {
            Ok(GiveUp::Offered { offers, .. }) => {
                release::unclaim_rest(stock, &claimed, offers).await;
            }
            Ok(_) => release::unclaim_rest(stock, &claimed, &[]).await,
            // The outcome is unknown: the claims stand (a claim whose offer
            // was not written is lowered past the maximum age).
            Err(_) => {}
        }
        given
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn message_of(sale: &Sale, order_id: &str, resv: &StoredReservation) -> Option<OrderMessage> {
    Some(OrderMessage {
        v: OrderMessage::VERSION,
        order_id: OrderId::parse(order_id).ok()?,
        sale_id: sale.sale_id.clone(),
        user_id: UserId::parse(&resv.user_id).ok()?,
        quantity: Quantity::new(resv.quantity).ok()?,
        // The order id names the shard that holds the reservation.
        shard: crate::domain::shard_layout::shard_of_order(order_id).unwrap_or(0),
        reserved_at: clock::rfc3339_ms(resv.at_ms.parse().ok()?),
    })
}
