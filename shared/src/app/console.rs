//! The operator console's use cases, beyond one sale's set-up (`admin-api`
//! translates them):
//!
//! - [`sales_newest_first`]: every sale with its counters, newest start
//!   first (`GET /admin/sales`).
//! - [`end_now`]: a sale's end moved to now through the same path as a
//!   `PUT` with an earlier end: the table first (every job loads from it),
//!   then Redis at once, so the next purchase is `410 SALE_ENDED`
//!   (`POST /admin/sales/{saleId}/end`).
//! - [`dead_letters`]: the DLQ's messages, each with its order and what
//!   the order-writer last failed with (`GET /admin/dlq`); [`redrive`]
//!   moves them back to the orders queue (`POST /admin/dlq/redrive`).
//!
//! - [`sell_out`]: when a sale first sold out, and how long that took from
//!   its start (`GET /admin/sales/{saleId}` and `/live`).
//! - [`draw_progress`]: a lottery sale's tickets and draw progress
//!   (`GET /admin/sales/{saleId}`'s `draw`).
//!
//! The order lookups are [`crate::app::order_queries::OrderQueries`]'
//! (`any_order`, `my_orders` for a given buyer): the same answer the buyer
//! gets.

use crate::app::jobs::{JobError, Jobs, PrewarmOutcome};
use crate::app::order_writer;
use crate::domain::ledger::SaleCounters;
use crate::domain::{OrderId, OrderMessage, Sale, SaleId, SalePhase};
use crate::ports::{
    DeadLetter, DeadLetters, DrawProgress, DrawStore, OrderLedger, QueueInspector, Redriven,
    SaleEditor, StockAdmin, Upsert, WriteErrorLog, WriteFailure,
};
use std::collections::BTreeMap;

/// How many DLQ messages the view shows at most (the DLQ's depth, in
/// `/live`, says how many there are).
pub const DLQ_VIEW_LIMIT: usize = 100;
/// How many messages one redrive moves at most; the operator asks again
/// for the rest.
pub const REDRIVE_LIMIT: usize = 500;

/// Every sale with its counters, newest start first (then by id, so the
/// order is stable). The `sales` table holds one small item per sale, so
/// this is a scan of a few pages.
pub async fn sales_newest_first<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
) -> Result<Vec<(Sale, SaleCounters)>, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor,
    O: OrderLedger,
{
    let mut sales = jobs.catalog().list_records().await?;
    sales.sort_by(|(a, _), (b, _)| {
        b.start_ms
            .cmp(&a.start_ms)
            .then_with(|| a.sale_id.cmp(&b.sale_id))
    });
    Ok(sales)
}

/// What ending a sale now did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndNow {
    /// Ended: the sale as it was before, and what the refresh of Redis did.
    Ended {
        before: Box<Sale>,
        prewarm: PrewarmOutcome,
    },
    NotFound,
    AlreadyEnded,
    /// Someone changed the sale meanwhile; nothing was written.
    Conflict,
}

/// Ends a sale at `now_ms`. A sale that has not started ends before it
/// ever opens: its start moves to the same instant (a sale's window cannot
/// close before it opens).
pub async fn end_now<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale_id: &SaleId,
    now_ms: i64,
) -> Result<EndNow, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor,
    O: OrderLedger,
{
    let Some((sale, _)) = jobs.catalog().get_record(sale_id).await? else {
        return Ok(EndNow::NotFound);
    };
    if sale.phase_at(now_ms) == SalePhase::Ended {
        return Ok(EndNow::AlreadyEnded);
    }
    let ended = ended_at(jobs.stock(), sale.clone(), now_ms).await?;
    match jobs.catalog().upsert_sale(&ended, now_ms).await?.0 {
        Upsert::Updated => {}
        // Ended meanwhile, by another operator or its own clock.
        Upsert::Ended => return Ok(EndNow::AlreadyEnded),
        // Deleted and made again meanwhile, or refused by the edit rule
        // (which an end alone never is): not the sale that was read.
        Upsert::Created | Upsert::Conflict | Upsert::StartedStockChange | Upsert::Loaded(_) => {
            return Ok(EndNow::Conflict);
        }
    }
    // Redis at once, as after a PUT: the next purchase is refused.
    let prewarm = jobs.prewarm_sale(sale_id, now_ms).await?;
    Ok(EndNow::Ended {
        before: Box::new(sale),
        prewarm,
    })
}

/// The sale ended now: at the earlier of the caller's clock and the stock
/// store's, which decides purchases (a caller whose clock runs ahead would
/// otherwise end the sale seconds in the future). A sale that has not
/// started ends before it ever opens: its start moves to the same instant.
pub async fn ended_at<S: crate::ports::StockAdmin>(
    stock: &S,
    sale: Sale,
    now_ms: i64,
) -> Result<Sale, JobError> {
    let at = now_ms.min(stock.clock_ms().await?);
    Ok(Sale {
        start_ms: sale.start_ms.min(at),
        end_ms: at,
        ..sale
    })
}

/// When the sale first sold out, as the stock store recorded it ([`crate::ports::LiveFigures::sold_out_at`]);
/// `None` before, and when Redis cannot be read (logged: the rest of a
/// view goes on without it).
pub async fn sell_out(stock: &impl StockAdmin, sale: &Sale) -> Option<i64> {
    stock
        .sold_out_at(sale)
        .await
        .map_err(
            |err| tracing::warn!(sale_id = %sale.sale_id, %err, "cannot read the sell-out time"),
        )
        .ok()
        .flatten()
}

/// A lottery sale's draw as Redis holds it: `None` for a sale without a
/// lottery window; `Some(None)` when Redis cannot say or does not hold the
/// sale yet (logged: the view goes on without it).
pub async fn draw_progress(stock: &impl DrawStore, sale: &Sale) -> Option<Option<DrawProgress>> {
    sale.admission.as_ref()?;
    let progress = stock.draw_progress(&sale.sale_id).await.map_err(
        |err| tracing::warn!(sale_id = %sale.sale_id, %err, "cannot read the draw's progress"),
    );
    Some(progress.ok().flatten())
}

/// One message of the DLQ as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DlqEntry {
    pub letter: DeadLetter,
    /// The order it carries, or why its body is not an order message (the
    /// reason the writer refused it).
    pub order: Result<OrderMessage, String>,
    /// What the order-writer last failed with for that order.
    pub last_failure: Option<WriteFailure>,
}

/// The DLQ's messages (at most [`DLQ_VIEW_LIMIT`]), left where they are,
/// each with its order and the writer's last failure for it. A failure
/// that cannot be read (Redis out of reach) shows as unknown.
///
/// A message a redrive sent back already ([`WriteErrorLog::keep_redriven`])
/// that comes out of the DLQ again is a copy (SQS delivers at least once):
/// it is not listed, and is deleted, so that nobody sends it back twice or
/// takes the redrive for one that failed.
pub async fn dead_letters(
    dlq: &impl DeadLetters,
    stock: &impl StockAdmin,
) -> Result<Vec<DlqEntry>, JobError> {
    let letters = dlq
        .peek(DLQ_VIEW_LIMIT)
        .await
        .map_err(|e| JobError::Queue(e.0))?;
    let mut entries: Vec<DlqEntry> = letters
        .into_iter()
        .map(|letter| DlqEntry {
            order: order_writer::parse(&letter.body).map(|(message, _)| message),
            letter,
            last_failure: None,
        })
        .collect();
    // One read of each kind per sale, of the orders it has there.
    let mut copies: Vec<String> = Vec::new();
    for (sale_id, at) in by_sale(&entries) {
        let order_ids: Vec<&OrderId> = at.iter().map(|(_, order_id)| order_id).collect();
        match stock.write_errors(&sale_id, &order_ids).await {
            Ok(failures) => {
                for ((i, _), failure) in at.iter().zip(failures) {
                    entries[*i].last_failure = failure;
                }
            }
            Err(err) => {
                tracing::warn!(%sale_id, %err, "DLQ view: cannot read the writer's failures");
            }
        }
        let message_ids: Vec<&str> = at
            .iter()
            .map(|(i, _)| entries[*i].letter.message_id.as_str())
            .collect();
        match stock.redriven(&sale_id, &message_ids).await {
            Ok(sent_back) => copies.extend(
                message_ids
                    .iter()
                    .zip(sent_back)
                    .filter(|(_, sent_back)| *sent_back)
                    .map(|(id, _)| (*id).to_owned()),
            ),
            // Listed, then: a second redrive of a copy is harmless.
            Err(err) => {
                tracing::warn!(%sale_id, %err, "DLQ view: cannot read which messages were sent back");
            }
        }
    }
    if !copies.is_empty() {
        entries.retain(|e| !copies.contains(&e.letter.message_id));
        match dlq.discard(&copies).await {
            Ok(deleted) => {
                tracing::info!(?deleted, "DLQ view: copies of redriven messages deleted");
            }
            // Not listed all the same; the next look tries again.
            Err(err) => tracing::warn!(%err, "DLQ view: cannot delete copies of redriven messages"),
        }
    }
    Ok(entries)
}

/// The entries that carry an order, by sale: their places in `entries`,
/// and their orders.
fn by_sale(entries: &[DlqEntry]) -> BTreeMap<SaleId, Vec<(usize, OrderId)>> {
    let mut by_sale: BTreeMap<SaleId, Vec<(usize, OrderId)>> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        if let Ok(message) = &entry.order {
            by_sale
                .entry(message.sale_id.clone())
                .or_default()
                .push((i, message.order_id.clone()));
        }
    }
    by_sale
}

/// What a redrive moved, by what it carried: the orders of each sale
/// (message id, order id), and the ids of messages that are not orders.
#[derive(Debug, Default)]
pub struct MovedOrders {
    pub by_sale: BTreeMap<SaleId, Vec<(String, OrderId)>>,
    pub not_orders: Vec<String>,
}

impl MovedOrders {
    pub fn of(moved: &[DeadLetter]) -> Self {
        let mut out = Self::default();
        for letter in moved {
            match order_writer::parse(&letter.body) {
                Ok((message, _)) => out
                    .by_sale
                    .entry(message.sale_id)
                    .or_default()
                    .push((letter.message_id.clone(), message.order_id)),
                Err(_) => out.not_orders.push(letter.message_id.clone()),
            }
        }
        out
    }
}

/// How many message ids one redrive may name.
pub const MAX_REDRIVE_IDS: usize = 100;

/// The body of `POST /admin/dlq/redrive`: `{"messageIds": [...]}` names the
/// messages, `{}` means every one. The error names what is wrong.
pub fn parse_redrive(body: &[u8]) -> Result<Option<Vec<String>>, String> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|_| "body is not valid JSON; {} redrives every message".to_owned())?;
    let obj = value
        .as_object()
        .ok_or_else(|| "body must be a JSON object".to_owned())?;
    if let Some(unknown) = obj.keys().find(|k| k.as_str() != "messageIds") {
        return Err(format!("unknown field {unknown:?}; allowed: messageIds"));
    }
    let Some(ids) = obj.get("messageIds") else {
        return Ok(None);
    };
    let shape = || {
        format!(
            "messageIds must be a list of 1 to {MAX_REDRIVE_IDS} message ids (letters, digits, - and _); {{}} redrives every message"
        )
    };
    let ids = ids.as_array().ok_or_else(shape)?;
    if ids.is_empty() || ids.len() > MAX_REDRIVE_IDS {
        return Err(shape());
    }
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let id = id
            .as_str()
            .filter(|id| {
                (1..=128).contains(&id.len())
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
            .ok_or_else(shape)?;
        if !out.iter().any(|seen: &String| seen == id) {
            out.push(id.to_owned());
        }
    }
    Ok(Some(out))
}

/// Moves DLQ messages back to the orders queue: these ids, or every
/// message (`None`), at most [`REDRIVE_LIMIT`] in one call. Safe to repeat:
/// the writer is idempotent by order id. What it moved is kept by sale
/// ([`WriteErrorLog::keep_redriven`]) for the view to know copies of it.
pub async fn redrive(
    dlq: &impl DeadLetters,
    stock: &impl WriteErrorLog,
    message_ids: Option<&[String]>,
    now_ms: i64,
) -> Result<Redriven, JobError> {
    let done = dlq
        .redrive(message_ids, REDRIVE_LIMIT)
        .await
        .map_err(|e| JobError::Queue(e.0))?;
    if let Some(why) = &done.stopped {
        tracing::warn!(moved = done.moved.len(), %why, "redrive stopped early");
    }
    for (sale_id, moved) in MovedOrders::of(&done.moved).by_sale {
        let message_ids: Vec<&str> = moved.iter().map(|(id, _)| id.as_str()).collect();
        // Moved all the same: a copy that comes out of the DLQ is listed,
        // and a second redrive of it is harmless.
        if let Err(err) = stock.keep_redriven(&sale_id, &message_ids, now_ms).await {
            tracing::warn!(%sale_id, %err, "cannot keep which messages were sent back");
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::bodies::admin::{DlqMessage, SellOutBody};

    impl DlqEntry {
        /// The entry as `GET /admin/dlq` writes it.
        fn body(&self) -> serde_json::Value {
            serde_json::to_value(DlqMessage::of(self)).unwrap()
        }
    }

    fn sell_out_fields(sale: &Sale, at: Option<i64>) -> serde_json::Value {
        serde_json::to_value(SellOutBody::of(sale, at)).unwrap()
    }

    fn letter(body: &str) -> DeadLetter {
        DeadLetter {
            message_id: "m-1".into(),
            body: body.into(),
            receive_count: 6,
        }
    }

    #[test]
    fn a_dlq_entry_shows_its_order_and_last_error() {
        let body = serde_json::json!({
            "v": 1, "orderId": "o-1", "saleId": "s-1", "userId": "auth0|x", "quantity": 2,
            "shard": 0, "reservedAt": "2026-11-30T03:00:00.000Z"
        })
        .to_string();
        let entry = DlqEntry {
            order: order_writer::parse(&body).map(|(m, _)| m),
            letter: letter(&body),
            last_failure: Some(WriteFailure {
                order_id: OrderId::parse("o-1").unwrap(),
                message_id: "m-1".into(),
                error: "order store unavailable: throttled".into(),
                at_ms: 1,
            }),
        };
        assert_eq!(
            entry.body(),
            serde_json::json!({
                "messageId": "m-1", "orderId": "o-1", "saleId": "s-1", "userId": "auth0|x",
                "quantity": 2, "receiveCount": 6,
                "lastError": "order store unavailable: throttled",
            })
        );
        let unknown = DlqEntry {
            last_failure: None,
            ..entry
        };
        assert!(unknown.body()["lastError"].is_null());
    }

    #[test]
    fn the_time_to_sell_out_runs_from_the_start() {
        let sale = crate::adapters::memory::test_sale("s1", 10, 1).unwrap();
        let at = sale.start_ms + 3_250;
        assert_eq!(
            sell_out_fields(&sale, Some(at)),
            serde_json::json!({
                "soldOutAt": crate::clock::rfc3339_ms(at),
                "timeToSellOutMs": 3_250,
            })
        );
        assert_eq!(
            sell_out_fields(&sale, None),
            serde_json::json!({"soldOutAt": null, "timeToSellOutMs": null})
        );
    }

    #[test]
    fn a_redrive_names_messages_or_takes_every_one() {
        assert_eq!(parse_redrive(b"{}"), Ok(None));
        assert_eq!(
            parse_redrive(br#"{"messageIds": ["a-1", "b_2", "a-1"]}"#),
            Ok(Some(vec!["a-1".to_owned(), "b_2".to_owned()]))
        );
        for bad in [
            &b""[..],
            b"[]",
            b"null",
            br#"{"messageIds": []}"#,
            br#"{"messageIds": "a-1"}"#,
            br#"{"messageIds": [1]}"#,
            br#"{"messageIds": ["a b"]}"#,
            br#"{"messageIds": [""]}"#,
            br#"{"all": true}"#,
        ] {
            let err = parse_redrive(bad).unwrap_err();
            assert!(
                err.contains("messageIds") || err.contains("JSON"),
                "{}: {err}",
                String::from_utf8_lossy(bad)
            );
        }
        let many: Vec<String> = (0..=MAX_REDRIVE_IDS).map(|n| format!("m{n}")).collect();
        let body = serde_json::json!({ "messageIds": many }).to_string();
        assert!(parse_redrive(body.as_bytes()).is_err());
    }

    #[test]
    fn a_poison_message_says_why_it_is_not_an_order() {
        let entry = DlqEntry {
            order: order_writer::parse("not json").map(|(m, _)| m),
            letter: letter("not json"),
            last_failure: None,
        };
        let body = entry.body();
        assert!(body["orderId"].is_null() && body["saleId"].is_null());
        assert!(
            body["lastError"]
                .as_str()
                .unwrap()
                .starts_with("not an order message: "),
            "{body}"
        );
    }
}
