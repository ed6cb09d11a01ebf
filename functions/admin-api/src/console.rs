//! The operator console's routes (`seckill_shared::app::console` and the
//! order queries do the work; this translates):
//!
//! - `GET /admin/sales`: every sale, newest start first.
//! - `GET /admin/sales/{saleId}`: one sale as `PUT` answers it, with its
//!   sell-out time.
//! - `POST /admin/sales/{saleId}/end`: end now (audited as `end`).
//! - `GET /admin/orders/{orderId}`, `GET /admin/sales/{saleId}/orders?buyer=`:
//!   any buyer's orders, as that buyer sees them.
//! - `GET /admin/dlq`, `POST /admin/dlq/redrive` (audited as `redrive` on
//!   each sale whose orders moved).
//!
//! [`route`] answers `None` for every other route key, which the sale
//! routes of [`crate::handler`] then serve.

use crate::answers::{audit, kept, sale_record, unavailable};
use lambda_http::{Body, Request, Response};
use seckill_shared::app::console::{self, EndNow};
use seckill_shared::clock;
use seckill_shared::domain::{OrderId, SaleId, UserId};
use seckill_shared::error::ApiError;
use seckill_shared::http::bodies::OrderView;
use seckill_shared::http::bodies::admin::{
    DlqMessage, DlqView, DrawBody, OrderList, PrewarmBody, Redrive, SaleChanged,
    SaleDefinitionView, SaleDetail, SaleList, SaleRecord, SellOutBody,
};
use seckill_shared::http::{self, Caller};

/// Serves a console route; `None` when `route_key` is not one.
pub async fn route(
    admin: &crate::Admin,
    req: &Request,
    route_key: &str,
    caller: &Caller,
) -> Result<Option<Response<Body>>, ApiError> {
    let jobs = &admin.jobs;
    let now = clock::now_ms();
    let response = match route_key {
        "GET /admin/sales" => {
            let sales = console::sales_newest_first(jobs)
                .await
                .map_err(unavailable)?
                .iter()
                .map(|(sale, counters)| SaleRecord::of(sale, counters, now))
                .collect();
            http::body(200, &SaleList { sales })
        }
        "GET /admin/sales/{saleId}" => {
            let sale_id = sale_id(req)?;
            let (sale, counters) = seckill_shared::app::operators::record(jobs, &sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            let sold_out = console::sell_out(admin.queries.stock(), &sale).await;
            let draw = console::draw_progress(admin.queries.stock(), &sale).await;
            http::body(
                200,
                &SaleDetail {
                    record: SaleRecord::of(&sale, &counters, now),
                    sell_out: SellOutBody::of(&sale, sold_out),
                    draw: draw.map(|progress| DrawBody::of(progress.as_ref())),
                },
            )
        }
        "POST /admin/sales/{saleId}/end" => {
            let sale_id = sale_id(req)?;
            // Nothing to read, but an oversized body is still refused.
            http::body_bytes(req)?;
            let (before, prewarm) = match console::end_now(jobs, &sale_id, now)
                .await
                .map_err(unavailable)?
            {
                EndNow::Ended { before, prewarm } => (before, prewarm),
                EndNow::NotFound => return Err(ApiError::SaleNotFound),
                EndNow::AlreadyEnded => return Err(ApiError::SaleEnded),
                EndNow::Conflict => return Err(ApiError::Conflict),
            };
            let record = sale_record(jobs, &sale_id).await?;
            audit(
                jobs,
                &caller.user_id,
                &sale_id,
                "end",
                kept(&SaleDefinitionView::of(&before)),
                kept(&record),
                now,
            )
            .await;
            http::body(
                200,
                &SaleChanged {
                    record,
                    prewarm: Some(PrewarmBody::of(&prewarm)),
                    redis_groups: None,
                },
            )
        }
        "GET /admin/orders/{orderId}" => {
            let order_id = OrderId::parse(&http::path_param(req, "orderId"))
                .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
            let order = admin
                .queries
                .any_order(&order_id)
                .await
                .map_err(|e| e.into_api(false))?;
            http::body(200, &OrderView::of(&order, clock::now_ms()))
        }
        "GET /admin/sales/{saleId}/orders" => {
            let sale_id = sale_id(req)?;
            let buyer = buyer(req)?;
            let orders = admin
                .queries
                .my_orders(&sale_id, &buyer)
                .await
                .map_err(|e| e.into_api(true))?;
            let orders = orders.iter().map(|o| OrderView::of(o, now)).collect();
            http::body(200, &OrderList { orders })
        }
        "GET /admin/dlq" => {
            let messages = match &admin.dlq {
                Some(dlq) => console::dead_letters(dlq, admin.queries.stock())
                    .await
                    .map_err(unavailable)?
                    .iter()
                    .map(DlqMessage::of)
                    .collect(),
                None => Vec::new(),
            };
            http::body(
                200,
                &DlqView {
                    messages,
                    limit: console::DLQ_VIEW_LIMIT,
                },
            )
        }
        "POST /admin/dlq/redrive" => {
            let ids =
                console::parse_redrive(http::body_bytes(req)?).map_err(ApiError::InvalidRequest)?;
            let Some(dlq) = &admin.dlq else {
                return Err(ApiError::InvalidRequest(
                    "no DLQ is configured (ORDERS_DLQ_URL)".into(),
                ));
            };
            let done = console::redrive(dlq, admin.queries.stock(), ids.as_deref(), now)
                .await
                .map_err(unavailable)?;
            audit_redrive(admin, &caller.user_id, &done.moved, now).await;
            let moved: Vec<&str> = done.moved.iter().map(|m| m.message_id.as_str()).collect();
            http::body(
                200,
                &Redrive {
                    redriven: moved.len(),
                    message_ids: moved,
                    missing: &done.missing,
                },
            )
        }
        _ => return Ok(None),
    };
    Ok(Some(response))
}

fn sale_id(req: &Request) -> Result<SaleId, ApiError> {
    SaleId::parse(&http::path_param(req, "saleId"))
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))
}

/// The `buyer` query parameter: a user id as issued (any `sub`), taken
/// from the raw query string and percent-decoded (`+` is a plus, as in a
/// path): nothing else in it is trusted to be safe.
fn buyer(req: &Request) -> Result<UserId, ApiError> {
    let missing = || {
        ApiError::InvalidRequest(
            "buyer is required: ?buyer=<the buyer's user id, percent-encoded>".into(),
        )
    };
    let raw = req
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("buyer="))
        .ok_or_else(missing)?;
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| ApiError::InvalidRequest("buyer is not UTF-8 once decoded".into()))?;
    UserId::parse(&decoded).map_err(|e| ApiError::InvalidRequest(format!("buyer: {e}")))
}

/// A redrive spans sales: one audit entry on each sale whose orders moved,
/// naming them (poison messages name no sale: the log line has them).
async fn audit_redrive(
    admin: &crate::Admin,
    actor: &UserId,
    moved: &[seckill_shared::ports::DeadLetter],
    now: i64,
) {
    let moved = console::MovedOrders::of(moved);
    for message_id in &moved.not_orders {
        tracing::info!(target: "audit", actor = actor.as_str(), %message_id,
            "admin action: redrive of a message that is not an order");
    }
    for (sale_id, moved) in moved.by_sale {
        let (messages, orders): (Vec<String>, Vec<OrderId>) = moved.into_iter().unzip();
        let after = RedrivenOrders {
            message_ids: messages,
            order_ids: orders,
        };
        audit(
            &admin.jobs,
            actor,
            &sale_id,
            "redrive",
            None,
            kept(&after),
            now,
        )
        .await;
    }
}

/// What a redrive's audit entry keeps on each sale: the messages moved and
/// the orders they carry.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RedrivenOrders {
    message_ids: Vec<String>,
    order_ids: Vec<OrderId>,
}
