//! `GET /admin/sales/{saleId}/live`'s answer: the operator dashboard's
//! poll, one sale's state from every store (`app::live` reads it).

use super::admin::SellOutBody;
use crate::app::live::LiveState;
use crate::clock;
use crate::domain::Outcome;
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// `stock` of the live view.
#[derive(Debug, Serialize, ToSchema)]
pub struct LiveStock {
    pub total: u32,
    /// Every shard summed; `null` when Redis does not hold the sale.
    pub remaining: Option<i64>,
    /// The status buyers see.
    pub status: &'static str,
}

/// `queue` of the live view: the orders queue and its DLQ (every sale's).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveQueue {
    /// Waiting to be received: visible plus delayed.
    pub visible: Option<u64>,
    pub in_flight: Option<u64>,
    pub dlq: Option<u64>,
}

/// Purchase answers in one 10-second bucket.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FunnelBucket {
    pub at_ms: i64,
    pub outcomes: BTreeMap<String, u64>,
}

/// `GET /admin/sales/{saleId}/live`: one sale's state from every store
/// (`docs/api.md` says where each part comes from and how late it may be).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LiveView {
    pub sale_id: String,
    pub at_ms: i64,
    pub stock: LiveStock,
    /// Orders by stored status, every status present.
    pub orders: Option<BTreeMap<&'static str, u64>>,
    pub orders_at: Option<String>,
    pub queue: LiveQueue,
    /// Cumulative purchase answers by outcome, every listed one present.
    pub outcomes: Option<BTreeMap<String, u64>>,
    pub outcome_codes: Vec<&'static str>,
    /// The last reconcile report, as `GET .../report` returns it.
    #[schema(value_type = Option<Object>)]
    pub last_report: Option<serde_json::Value>,
    #[serde(flatten)]
    pub sell_out: SellOutBody,
    pub funnel: Option<Vec<FunnelBucket>>,
    /// The stores that could not be read: `redis`, `orders`, `queue`.
    pub unavailable: Vec<&'static str>,
}

impl LiveView {
    /// The view of `state` at `now_ms`.
    pub fn of(state: &LiveState, now_ms: i64) -> Self {
        let view = state.stock.as_ref().and_then(Option::as_ref);
        let (_, status) = crate::app::order_queries::public_status(&state.sale, now_ms, view);
        let last_report = state.last_report.as_deref().and_then(|raw| {
            serde_json::from_str::<serde_json::Value>(raw)
                .map_err(|err| tracing::warn!(sale_id = %state.sale.sale_id, %err, "stored reconcile report is not JSON"))
                .ok()
        });
        Self {
            sale_id: state.sale.sale_id.as_str().to_owned(),
            at_ms: now_ms,
            stock: LiveStock {
                total: state.sale.total_stock,
                remaining: view.map(|s| s.remaining.max(0)),
                status,
            },
            orders: state.order_counts(),
            orders_at: state.orders.as_ref().map(|o| clock::rfc3339_ms(o.at_ms)),
            queue: LiveQueue {
                visible: state.queue.map(|q| q.visible + q.delayed),
                in_flight: state.queue.map(|q| q.in_flight),
                dlq: state.dlq.map(|q| q.visible + q.delayed),
            },
            outcomes: state.outcome_counts(),
            outcome_codes: Outcome::listed().map(Outcome::as_str).collect(),
            last_report,
            sell_out: SellOutBody::of(&state.sale, state.sold_out_at_ms.flatten()),
            funnel: state.funnel_counts().map(|buckets| {
                buckets
                    .into_iter()
                    .map(|(at_ms, outcomes)| FunnelBucket { at_ms, outcomes })
                    .collect()
            }),
            unavailable: state.unavailable(),
        }
    }
}
