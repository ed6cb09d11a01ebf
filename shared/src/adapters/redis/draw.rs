//! [`DrawStore`] on Redis: the draw's state from meta (`windowEndMs`,
//! `drawSeed`, `drawPos`, `drawDone`), the tickets hash, and the two
//! scripts (`draw_order.lua`, `draw_chunk.lua`).

use super::RedisStock;
use super::keys::SaleKeys;
use super::replies::StoredTicket;
use super::scripts::{DrawChunkArgs, DrawOrderArgs};
use crate::domain::{OrderId, Quantity, SaleId, UserId};
use crate::ports::{
    ChunkStep, DrawProgress, DrawState, DrawStore, OrderStep, StockRepair, StoreError,
    TicketStatus, TicketView, Won,
};

fn protocol(reply: &[String]) -> StoreError {
    StoreError::Protocol(format!("unexpected draw reply {reply:?}"))
}

fn number<T: std::str::FromStr>(raw: &str) -> Result<T, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a number: {raw:?}")))
}

impl DrawStore for RedisStock {
    async fn draw_state(&self, sale_id: &SaleId) -> Result<Option<DrawState>, StoreError> {
        let key = SaleKeys::new(sale_id).meta;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HMGET")
                .arg(&key)
                .arg(&["windowEndMs", "drawSeed", "drawPos", "drawDone"])
                .query_async(&mut conn)
                .await
        };
        let fields: Vec<Option<String>> = self.bounded(call).await?;
        let [Some(end), Some(seed), pos, done] = fields.as_slice() else {
            return Ok(None);
        };
        Ok(Some(DrawState {
            window_end_ms: number(end)?,
            seed_hex: seed.clone(),
            pos: pos.as_deref().map(number).transpose()?,
            done: done.as_deref() == Some("1"),
        }))
    }

    async fn ticket(
        &self,
        sale_id: &SaleId,
        user_id: &UserId,
    ) -> Result<Option<TicketView>, StoreError> {
        let key = SaleKeys::new(sale_id).tickets;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HGET")
                .arg(&key)
                .arg(user_id.as_str())
                .query_async(&mut conn)
                .await
        };
        let raw: Option<String> = self.bounded(call).await?;
        let Some(raw) = raw else {
            return Ok(None);
        };
        let t: StoredTicket =
            serde_json::from_str(&raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
        let status = match (t.r.as_deref(), t.o.as_deref()) {
            (None, _) => TicketStatus::Held,
            (Some("WON"), Some(order)) => TicketStatus::Won(
                OrderId::parse(order).map_err(|e| StoreError::Protocol(e.to_string()))?,
            ),
            (Some("LOST"), _) => TicketStatus::Lost,
            _ => return Err(StoreError::Protocol(format!("unexpected ticket {raw:?}"))),
        };
        Ok(Some(TicketView {
            quantity: Quantity::new(t.q).map_err(|e| StoreError::Protocol(e.to_string()))?,
            status,
        }))
    }

    async fn draw_progress(&self, sale_id: &SaleId) -> Result<Option<DrawProgress>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::pipe()
                .cmd("HMGET")
                .arg(&keys.meta)
                .arg(&["windowEndMs", "drawPos", "drawDone"])
                .cmd("HLEN")
                .arg(&keys.tickets)
                .cmd("LLEN")
                .arg(&keys.draw_order)
                .query_async(&mut conn)
                .await
        };
        let (meta, tickets, listed): (Vec<Option<String>>, u64, u64) = self.bounded(call).await?;
        let [Some(_), pos, done] = meta.as_slice() else {
            return Ok(None);
        };
        let done = done.as_deref() == Some("1");
        // The order list is recorded together with drawPos (an empty draw
        // records no list, only drawPos = 0 and drawDone).
        let total = pos.as_ref().map(|_| listed);
        Ok(Some(DrawProgress {
            tickets,
            decided: pos.as_deref().map(number).transpose()?.unwrap_or(0),
            total,
            done,
        }))
    }

    async fn ticket_holders(&self, sale_id: &SaleId) -> Result<Vec<String>, StoreError> {
        let key = SaleKeys::new(sale_id).tickets;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HKEYS").arg(&key).query_async(&mut conn).await
        };
        self.bounded(call).await
    }

    async fn claim(
        &self,
        sale_id: &SaleId,
        token: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        self.try_lock(sale_id, "draw", token, ttl).await
    }

    async fn unclaim(&self, sale_id: &SaleId, token: &str) -> Result<(), StoreError> {
        self.unlock(sale_id, "draw", token).await
    }

    async fn record_order(
        &self,
        sale_id: &SaleId,
        order: &[String],
    ) -> Result<OrderStep, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let reply: Vec<String> = self.run(&DrawOrderArgs { keys: &keys, order }).await?;
        let strs: Vec<&str> = reply.iter().map(String::as_str).collect();
        match strs.as_slice() {
            ["ORDERED", n] => Ok(OrderStep::Ordered(number(n)?)),
            ["OPEN", _] => Ok(OrderStep::Open),
            ["STALE", _] => Ok(OrderStep::Stale),
            ["NONE"] => Ok(OrderStep::NotLottery),
            _ => Err(protocol(&reply)),
        }
    }

    async fn decide_chunk(
        &self,
        sale_id: &SaleId,
        pos: u64,
        size: u64,
    ) -> Result<ChunkStep, StoreError> {
        let keys = SaleKeys::new(sale_id);
        let reply: Vec<String> = self
            .run(&DrawChunkArgs {
                keys: &keys,
                pos,
                size,
                sale_id: sale_id.as_str(),
            })
            .await?;
        let strs: Vec<&str> = reply.iter().map(String::as_str).collect();
        match strs.as_slice() {
            ["DECIDED", pos, total, rest @ ..] if rest.len() % 4 == 0 => {
                let won = rest
                    .chunks_exact(4)
                    .map(|w| {
                        Ok(Won {
                            order_id: OrderId::parse(w[0])
                                .map_err(|e| StoreError::Protocol(e.to_string()))?,
                            user_id: UserId::parse(w[1])
                                .map_err(|e| StoreError::Protocol(e.to_string()))?,
                            quantity: Quantity::new(number(w[2])?)
                                .map_err(|e| StoreError::Protocol(e.to_string()))?,
                            at_ms: number(w[3])?,
                        })
                    })
                    .collect::<Result<_, StoreError>>()?;
                Ok(ChunkStep::Decided {
                    pos: number(pos)?,
                    total: number(total)?,
                    won,
                })
            }
            ["MOVED", pos] => Ok(ChunkStep::Moved(number(pos)?)),
            ["DONE", _] => Ok(ChunkStep::Done),
            ["NO_ORDER"] => Ok(ChunkStep::NoOrder),
            ["PAUSED"] => Ok(ChunkStep::Paused),
            ["ENDED"] => Ok(ChunkStep::Ended),
            _ => Err(protocol(&reply)),
        }
    }
}
