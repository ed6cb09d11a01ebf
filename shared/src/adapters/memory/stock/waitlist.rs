//! The stock store's part of the waitlist in memory ([`WaitlistStock`]),
//! as `waitlist_admit.lua` and `hold_offer.lua` do it: admission is the
//! purchase's checks but for the stock (a join is for a sale with none
//! left), and an offered order is counted for its buyer once, behind the
//! same ledger-position guard as a return. One shard per sale: an offer's
//! id carries no shard suffix.

use super::*;
use crate::domain::UserId;
use crate::ports::{OfferClaim, WaitlistAdmission, WaitlistJoin, WaitlistStock};

impl WaitlistStock for MemoryStock {
    async fn admit_waitlist(&self, req: WaitlistJoin<'_>) -> Result<WaitlistAdmission, StoreError> {
        let sales = self.lock()?;
        let Some(s) = sales.get(req.sale_id) else {
            return Ok(WaitlistAdmission::SaleMissing);
        };
        // The script's order: the end, the pause (a load's too), the
        // start, the lottery's draw, the stock, the gate, the limit.
        let now = clock::now_ms();
        if now >= s.sale.end_ms {
            return Ok(WaitlistAdmission::Ended);
        }
        if s.paused {
            return Ok(WaitlistAdmission::Paused);
        }
        if now < s.sale.start_ms {
            return Ok(WaitlistAdmission::NotStarted {
                start_ms: s.sale.start_ms,
            });
        }
        // This store draws no lottery: a lottery sale's draw is never done
        // here, so its line never opens.
        if s.sale.admission.is_some() {
            return Ok(WaitlistAdmission::Drawing);
        }
        if s.stock >= 1 {
            return Ok(WaitlistAdmission::Available {
                remaining: u32::try_from(s.stock).unwrap_or(u32::MAX),
            });
        }
        // As `reserve` here: a gated sale wants a verified pass (the
        // nonces themselves are not kept).
        if s.sale.gate && req.gate_nonce.is_none() {
            return Ok(WaitlistAdmission::GateRequired);
        }
        let user = req.user_id.as_str();
        let held = s.buyers.get(user).copied().unwrap_or(0);
        if held + 1 > i64::from(s.sale.per_user_limit) {
            let mut order_ids: Vec<OrderId> = s
                .resv
                .iter()
                .filter(|(_, h)| h.user == user && h.state.live())
                .map(|(id, _)| id.clone())
                .collect();
            order_ids.sort();
            return Ok(WaitlistAdmission::LimitExceeded { order_ids });
        }
        Ok(WaitlistAdmission::Admitted { now_ms: now })
    }

    async fn offer_suffix(
        &self,
        _sale_id: &SaleId,
        _user_id: &UserId,
    ) -> Result<String, StoreError> {
        // A read of the sale's layout, as Redis's is: it fails as the store does.
        drop(self.lock()?);
        Ok(String::new())
    }

    async fn claim_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
    ) -> Result<OfferClaim, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(OfferClaim::SaleMissing);
        };
        if let Some(held) = s.resv.get_mut(order_id) {
            // Another run's claim of the same offer: counted once, given
            // back when the last of them gives it up.
            if let State::Offering(claims) = held.state {
                held.state = State::Offering(claims + 1);
            }
            return Ok(OfferClaim::Claimed);
        }
        let user = user_id.as_str();
        if s.buyers.get(user).copied().unwrap_or(0) + 1 > i64::from(s.sale.per_user_limit) {
            return Ok(OfferClaim::AtLimit);
        }
        *s.buyers.entry(user.to_owned()).or_default() += 1;
        s.resv.insert(
            order_id.clone(),
            Held {
                user: user.to_owned(),
                reservation: Reservation {
                    order_id: order_id.clone(),
                    quantity: crate::domain::Quantity::ONE,
                    reserved_at_ms: at_ms,
                    shard: 0,
                },
                state: State::Offering(1),
                replayed: false,
            },
        );
        Ok(OfferClaim::Claimed)
    }

    async fn unclaim_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
    ) -> Result<(), StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(());
        };
        match s.resv.get_mut(order_id).map(|h| &mut h.state) {
            Some(State::Offering(claims)) if *claims > 1 => *claims -= 1,
            Some(State::Offering(_)) => {
                s.resv.remove(order_id);
                s.drop_holding(user_id.as_str(), 1);
            }
            _ => {}
        }
        Ok(())
    }

    async fn hold_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
        return_seq: u64,
    ) -> Result<Returned, StoreError> {
        let mut sales = self.lock()?;
        let Some(s) = sales.get_mut(sale_id) else {
            return Ok(Returned::SaleMissing);
        };
        // Once per order: its reservation (WRITTEN) is the marker; a claim
        // (OFFERING) counted the buyer already.
        if let Some(held) = s.resv.get_mut(order_id) {
            if !matches!(held.state, State::Offering(_)) {
                return Ok(Returned::Already);
            }
            held.state = State::Written;
            return Ok(Returned::Returned { stock: 0 });
        }
        let reservation = Reservation {
            order_id: order_id.clone(),
            quantity: crate::domain::Quantity::ONE,
            reserved_at_ms: at_ms,
            shard: 0,
        };
        s.resv.insert(
            order_id.clone(),
            Held {
                user: user_id.to_string(),
                reservation,
                state: State::Written,
                replayed: false,
            },
        );
        // A sale loaded from the ledger at or after the handover counted
        // the order with its buyers already.
        let counted = s.ledger_seq.is_some_and(|ledger| return_seq <= ledger);
        if !counted {
            *s.buyers.entry(user_id.to_string()).or_default() += 1;
        }
        Ok(Returned::Returned { stock: 0 })
    }
}
