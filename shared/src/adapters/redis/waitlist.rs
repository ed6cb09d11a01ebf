//! [`WaitlistStock`] on Redis: admission to a sale's waitlist
//! (`waitlist_admit.lua`, the purchase's checks but for the stock, on the
//! buyer's home shard) and the buyer of an offered order counted once
//! (`hold_offer.lua`, on the shard the order's id names).

use super::RedisStock;
use super::keys::SaleKeys;
use super::replies::{parse_i64, parse_layout, parse_order_id, parse_u32, protocol};
use super::scripts::{HoldOfferArgs, WaitlistAdmitArgs};
use crate::domain::stock_state::Returned;
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{OfferClaim, StoreError, WaitlistAdmission, WaitlistJoin, WaitlistStock};

impl RedisStock {
    async fn admit_on(
        &self,
        keys: &SaleKeys,
        req: &WaitlistJoin<'_>,
    ) -> Result<Result<WaitlistAdmission, crate::domain::shard_layout::ShardLayout>, StoreError>
    {
        let issued = req.gate_issued_ms.map(|ms| ms.to_string());
        let reply: Vec<String> = self
            .run(&WaitlistAdmitArgs {
                keys,
                user_id: req.user_id.as_str(),
                gate_nonce: req.gate_nonce.unwrap_or(""),
                gate_issued_ms: issued.as_deref().unwrap_or(""),
                source_ip: req.source_ip.unwrap_or(""),
                limits: &self.limit_args,
            })
            .await?;
        let parts: Vec<&str> = reply.iter().map(String::as_str).collect();
        Ok(Ok(match parts.as_slice() {
            ["OK", now] => WaitlistAdmission::Admitted {
                now_ms: parse_i64(now)?,
            },
            ["SHARDED", n, homes] => return Ok(Err(parse_layout(n, homes)?)),
            ["MISSING"] => WaitlistAdmission::SaleMissing,
            ["PAUSED"] => WaitlistAdmission::Paused,
            ["NOT_STARTED", start] => WaitlistAdmission::NotStarted {
                start_ms: parse_i64(start)?,
            },
            ["ENDED"] => WaitlistAdmission::Ended,
            ["DRAWING"] => WaitlistAdmission::Drawing,
            ["AVAILABLE", stock] => WaitlistAdmission::Available {
                remaining: parse_u32(stock)?,
            },
            ["GATE"] => WaitlistAdmission::GateRequired,
            ["LIMIT", listed] => WaitlistAdmission::LimitExceeded {
                order_ids: listed
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(parse_order_id)
                    .collect::<Result<_, _>>()?,
            },
            ["RATE_LIMITED", wait] => WaitlistAdmission::RateLimited {
                retry_after_ms: u64::try_from(parse_i64(wait)?).unwrap_or(1_000),
            },
            _ => return Err(protocol(&reply)),
        }))
    }

    /// One step of `hold_offer.lua` (`mode`) for the offer `order_id` of
    /// one unit, on the shard its id names: its reply.
    async fn offer_step(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
        return_seq: Option<u64>,
        mode: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.run(&HoldOfferArgs {
            keys: &SaleKeys::of_order(sale_id, order_id),
            order_id: order_id.as_str(),
            user_id: user_id.as_str(),
            quantity: 1,
            at_ms,
            return_seq,
            mode,
        })
        .await
    }
}

impl WaitlistStock for RedisStock {
    async fn admit_waitlist(&self, req: WaitlistJoin<'_>) -> Result<WaitlistAdmission, StoreError> {
        let known = self.known(req.sale_id);
        let home = known.layout.home(req.user_id.as_str());
        match self.admit_on(&known.groups[home as usize], &req).await? {
            Ok(admission) => Ok(admission),
            // A sharded sale's directory: the buyer's home shard decides,
            // where their count and their rate buckets are.
            Err(layout) => {
                let known = self.remember(req.sale_id, layout);
                let home = known.layout.home(req.user_id.as_str());
                self.admit_on(&known.groups[home as usize], &req)
                    .await?
                    .map_err(|_| {
                        StoreError::Protocol("a shard's keys answered as a directory".into())
                    })
            }
        }
    }

    async fn offer_suffix(&self, sale_id: &SaleId, user_id: &UserId) -> Result<String, StoreError> {
        Ok(match self.layout(sale_id).await? {
            Some(layout) if layout.shards() > 1 => {
                format!("-s{}", layout.home(user_id.as_str()))
            }
            _ => String::new(),
        })
    }

    async fn claim_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
    ) -> Result<OfferClaim, StoreError> {
        let reply = self
            .offer_step(sale_id, order_id, user_id, at_ms, None, "CLAIM")
            .await?;
        match reply.first().map(String::as_str) {
            Some("CLAIMED" | "SAME") => Ok(OfferClaim::Claimed),
            Some("LIMIT") => Ok(OfferClaim::AtLimit),
            Some("MISSING") => Ok(OfferClaim::SaleMissing),
            _ => Err(protocol(&reply)),
        }
    }

    async fn unclaim_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
    ) -> Result<(), StoreError> {
        let reply = self
            .offer_step(sale_id, order_id, user_id, 0, None, "UNCLAIM")
            .await?;
        match reply.first().map(String::as_str) {
            Some("UNCLAIMED" | "SAME" | "MISSING") => Ok(()),
            _ => Err(protocol(&reply)),
        }
    }

    async fn hold_offer(
        &self,
        sale_id: &SaleId,
        order_id: &OrderId,
        user_id: &UserId,
        at_ms: i64,
        return_seq: u64,
    ) -> Result<Returned, StoreError> {
        let reply = self
            .offer_step(sale_id, order_id, user_id, at_ms, Some(return_seq), "HOLD")
            .await?;
        match reply.first().map(String::as_str) {
            Some("HELD") => Ok(Returned::Returned { stock: 0 }),
            Some("SAME") => Ok(Returned::Already),
            Some("MISSING") => Ok(Returned::SaleMissing),
            _ => Err(protocol(&reply)),
        }
    }
}
