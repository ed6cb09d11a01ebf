//! Script replies parsed into the store's types; anything unexpected is
//! [`StoreError::Protocol`].

use crate::domain::shard_layout::ShardLayout;
use crate::domain::{OrderId, Quantity};
use crate::ports::{Reservation, ReserveOutcome, StockView, StoreError};

pub use crate::domain::stock_state::StoredReservation;

/// A lottery ticket as `purchase.lua` records it: the quantity asked for
/// and when (ms); once drawn, `draw_chunk.lua` adds the result (`r`:
/// `WON` or `LOST`) and a won ticket's order id (`o`).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct StoredTicket {
    pub q: u64,
    pub at: String,
    #[serde(default)]
    pub r: Option<String>,
    #[serde(default)]
    pub o: Option<String>,
}

/// What a rebuild of lost shards keeps of a shard that kept its keys
/// (`survivor.lua`): nothing that grows with its buyers or its written
/// orders.
pub(super) struct SurvivorPart {
    pub(super) stock: i64,
    /// The orders whose units this shard has had back (`EXPIRED`).
    pub(super) expired: OrderDigests,
    /// Reservations still `QUEUED` here: order id, units.
    pub(super) queued: Vec<(String, i64)>,
    /// The transfers this shard received.
    pub(super) received: std::collections::HashSet<String>,
}

/// A set of order ids, each kept as the first 16 bytes of its SHA-256,
/// sorted: a survivor's expired orders can be most of a big sale's, and 16
/// bytes an order keep a million in 16 MB. Two ids of one sale share a
/// digest with a chance of about n^2 / 2^129 (1e-27 for a million): never
/// in practice.
pub(super) struct OrderDigests(Vec<[u8; 16]>);

impl OrderDigests {
    fn digest(id: &[u8]) -> [u8; 16] {
        let full = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, id);
        let mut cut = [0u8; 16];
        cut.copy_from_slice(&full.as_ref()[..16]);
        cut
    }

    fn of(mut digests: Vec<[u8; 16]>) -> Self {
        digests.sort_unstable();
        digests.dedup();
        Self(digests)
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.0.binary_search(&Self::digest(id.as_bytes())).is_ok()
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

pub(super) fn parse_reserve_reply(
    reply: &[String],
    requested: Quantity,
    shard: u32,
) -> Result<ReserveOutcome, StoreError> {
    let strs: Vec<&str> = reply.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["OK", order_id, at_ms, _left] => Ok(ReserveOutcome::Reserved(Reservation {
            order_id: parse_order_id(order_id)?,
            quantity: requested,
            reserved_at_ms: parse_i64(at_ms)?,
            shard,
        })),
        ["REPLAY", order_id, stored, rest @ ..] if matches!(rest, [] | ["SEND"]) => {
            let stored: StoredReservation =
                serde_json::from_str(stored).map_err(|e| StoreError::Protocol(e.to_string()))?;
            let ended = match stored.state.as_str() {
                "EXPIRED" => Some(crate::domain::orders::OrderStatus::Expired),
                "REJECTED" => Some(crate::domain::orders::OrderStatus::Rejected),
                _ => None,
            };
            if let Some(status) = ended {
                return Ok(ReserveOutcome::ReplayedEnded {
                    order_id: parse_order_id(order_id)?,
                    status,
                });
            }
            Ok(ReserveOutcome::Replayed {
                reservation: Reservation {
                    order_id: parse_order_id(order_id)?,
                    quantity: Quantity::new(stored.quantity)
                        .map_err(|e| StoreError::Protocol(e.to_string()))?,
                    reserved_at_ms: parse_i64(&stored.at_ms)?,
                    shard,
                },
                resend: rest == ["SEND"],
            })
        }
        ["MISSING"] => Ok(ReserveOutcome::SaleMissing),
        ["PAUSED"] => Ok(ReserveOutcome::Paused),
        ["NOT_STARTED", start_ms] => Ok(ReserveOutcome::NotStarted {
            start_ms: parse_i64(start_ms)?,
        }),
        ["ENDED"] => Ok(ReserveOutcome::Ended),
        ["GATE"] => Ok(ReserveOutcome::GateRequired),
        ["RATE_LIMITED", wait] => Ok(ReserveOutcome::RateLimited {
            retry_after_ms: u64::try_from(parse_i64(wait)?).unwrap_or(1_000),
        }),
        ["LIMIT", listed] => Ok(ReserveOutcome::LimitExceeded {
            order_ids: listed
                .split(',')
                .filter(|s| !s.is_empty())
                .map(parse_order_id)
                .collect::<Result<_, _>>()?,
        }),
        ["DRAWING"] => Ok(ReserveOutcome::Drawing),
        ["TICKET", ticket, draw_at] => {
            let t: StoredTicket =
                serde_json::from_str(ticket).map_err(|e| StoreError::Protocol(e.to_string()))?;
            Ok(ReserveOutcome::Ticket {
                quantity: Quantity::new(t.q).map_err(|e| StoreError::Protocol(e.to_string()))?,
                at_ms: parse_i64(&t.at)?,
                draw_at_ms: parse_i64(draw_at)?,
            })
        }
        ["SOLD_OUT", left] => Ok(ReserveOutcome::SoldOut {
            // A negative stock would be a bug elsewhere; report it as none left.
            remaining: parse_i64(left).map(|n| u32::try_from(n).unwrap_or(0))?,
        }),
        _ => Err(protocol(reply)),
    }
}

/// Parses one group's snapshot; its `lent` entries go to `lent`.
/// A `survivor.lua` reply for shard `shard`; the transfers it lent are
/// added to `lent`. The reply is taken by value: its lists are read once.
pub(super) fn parse_survivor(
    reply: redis::Value,
    shard: u32,
    lent: &mut Vec<PendingTransfer>,
) -> Result<Option<SurvivorPart>, StoreError> {
    let redis::Value::Array(mut parts) = reply else {
        return Err(StoreError::Protocol("survivor reply is not a list".into()));
    };
    let text = |v: redis::Value| -> Result<String, StoreError> {
        redis::from_redis_value::<String>(v).map_err(|e| StoreError::Protocol(e.to_string()))
    };
    let flat = |v: redis::Value| -> Result<Vec<String>, StoreError> {
        redis::from_redis_value::<Vec<String>>(v).map_err(|e| StoreError::Protocol(e.to_string()))
    };
    if parts.len() == 1 {
        return match text(parts.swap_remove(0))?.as_str() {
            "MISSING" => Ok(None),
            tag => Err(StoreError::Protocol(format!(
                "unexpected survivor reply {tag}"
            ))),
        };
    }
    // The total is the sale's, known to the rebuild from the catalog.
    let Ok([_, stock, _total, expired, queued, lent_flat, received_flat]) =
        <[redis::Value; 7]>::try_from(parts)
    else {
        return Err(StoreError::Protocol("unexpected survivor reply".into()));
    };
    let redis::Value::Array(expired) = expired else {
        return Err(StoreError::Protocol(
            "survivor's expired ids are not a list".into(),
        ));
    };
    let expired = expired
        .into_iter()
        .map(|id| match id {
            redis::Value::BulkString(bytes) => Ok(OrderDigests::digest(&bytes)),
            other => Ok(OrderDigests::digest(text(other)?.as_bytes())),
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    let mut part = SurvivorPart {
        stock: parse_i64(&text(stock)?)?,
        expired: OrderDigests::of(expired),
        queued: Vec::new(),
        received: std::collections::HashSet::new(),
    };
    for pair in flat(queued)?.chunks(2) {
        if let [id, units] = pair {
            part.queued.push((id.clone(), parse_i64(units)?));
        }
    }
    for pair in flat(lent_flat)?.chunks(2) {
        if let [id, value] = pair {
            lent.push(parse_transfer(id, value, shard)?);
        }
    }
    part.received = flat(received_flat)?
        .chunks(2)
        .filter_map(|pair| pair.first().cloned())
        .collect();
    Ok(Some(part))
}

/// A `lent` entry of shard `from`: `to:units:atMs`.
pub(super) fn parse_transfer(
    id: &str,
    value: &str,
    from: u32,
) -> Result<PendingTransfer, StoreError> {
    let mut fields = value.split(':');
    let (Some(to), Some(units), Some(at)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(StoreError::Protocol(format!("transfer {id}: {value}")));
    };
    Ok(PendingTransfer {
        id: id.to_owned(),
        from,
        to: parse_u32(to)?,
        units: parse_i64(units)?,
        at_ms: parse_i64(at)?,
    })
}

/// A `holding.lua` reply: the count, then order id and reservation pairs.
pub(super) fn parse_holding(reply: &[String]) -> Result<Holding, StoreError> {
    let Some((count, pairs)) = reply.split_first() else {
        return Err(protocol(reply));
    };
    let mut holding = Holding {
        count: if count.is_empty() {
            None
        } else {
            Some(parse_i64(count)?)
        },
        reservations: std::collections::BTreeMap::new(),
    };
    for pair in pairs.chunks(2) {
        if let [id, raw] = pair
            && !raw.is_empty()
        {
            let stored: StoredReservation =
                serde_json::from_str(raw).map_err(|e| StoreError::Protocol(e.to_string()))?;
            holding.reservations.insert(id.clone(), stored);
        }
    }
    Ok(holding)
}

/// The master serving `slot` in a `CLUSTER SLOTS` reply: entries
/// `[start, end, [host, port, id, ..], replicas..]`.
pub(super) fn master_of_slot(map: &redis::Value, slot: i64) -> Option<String> {
    let redis::Value::Array(ranges) = map else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let redis::Value::Array(parts) = range else {
            return None;
        };
        let (Some(redis::Value::Int(start)), Some(redis::Value::Int(end))) =
            (parts.first(), parts.get(1))
        else {
            return None;
        };
        if !(*start..=*end).contains(&slot) {
            return None;
        }
        let Some(redis::Value::Array(node)) = parts.get(2) else {
            return None;
        };
        let host = match node.first()? {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let redis::Value::Int(port) = node.get(1)? else {
            return None;
        };
        Some(format!("{host}:{port}"))
    })
}

/// A directory's shard count and home table.
pub(super) fn parse_layout(shards: &str, homes: &str) -> Result<ShardLayout, StoreError> {
    ShardLayout::parse(parse_u32(shards)?, homes).map_err(|e| StoreError::Protocol(e.to_string()))
}

pub(super) fn parse_rebuild_reply(reply: &[String]) -> Result<bool, StoreError> {
    match reply.first().map(String::as_str) {
        Some("LOADED") => Ok(true),
        Some("EXISTS") => Ok(false),
        _ => Err(protocol(reply)),
    }
}

pub(super) fn parse_load_reply(reply: &[String]) -> Result<LoadOutcome, StoreError> {
    match reply {
        [tag] if tag == "LOADED" => Ok(LoadOutcome::Loaded),
        [tag, stock] if tag == "REFRESHED" => Ok(LoadOutcome::Refreshed {
            stock: parse_u32(stock)?,
        }),
        other => Err(protocol(other)),
    }
}

pub(super) fn protocol(reply: &[impl std::fmt::Debug]) -> StoreError {
    StoreError::Protocol(format!("{reply:?}"))
}

pub(super) fn parse_i64(raw: &str) -> Result<i64, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a number: {raw:?}")))
}

pub(super) fn parse_u32(raw: &str) -> Result<u32, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a count: {raw:?}")))
}

pub(super) fn parse_u64(raw: &str) -> Result<u64, StoreError> {
    raw.parse()
        .map_err(|_| StoreError::Protocol(format!("not a count: {raw:?}")))
}

pub(super) fn parse_order_id(raw: &str) -> Result<OrderId, StoreError> {
    OrderId::parse(raw).map_err(|e| StoreError::Protocol(e.to_string()))
}

pub use crate::domain::stock_state::{Holding, LoadOutcome, PendingTransfer};

/// What `peek.lua` saw on one key group.
pub(super) enum Peeked {
    View(StockView),
    /// The directory of a sale of this layout.
    Sharded(ShardLayout),
}

impl Peeked {
    pub(super) fn into_view(self) -> Option<StockView> {
        match self {
            Peeked::View(view) => Some(view),
            Peeked::Sharded(_) => None,
        }
    }
}
