//! Routes by the event's `routeKey`. The scope is checked here as well as
//! by API Gateway: a route configured without its scope, or the local stack,
//! must not let a buyer create sales.

use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::dynamo::Upsert;
use seckill_shared::error::ApiError;
use seckill_shared::http;
use seckill_shared::jobs::PrewarmOutcome;
use seckill_shared::metrics::Invocation;
use seckill_shared::sale_spec;
use std::convert::Infallible;

/// The routes this function serves, as `template.yaml` declares them.
pub const ROUTES: [&str; 5] = [
    "PUT /admin/sales/{saleId}",
    "POST /admin/sales/{saleId}/prewarm",
    "POST /admin/sales/{saleId}/reconcile",
    "GET /admin/sales/{saleId}/report",
    "GET /admin/sales/{saleId}/live",
];

pub async fn handle(admin: &crate::Admin, req: Request) -> Result<Response<Body>, Infallible> {
    let response = match route(admin, &req).await {
        Ok(response) => response,
        Err(err) => http::error(&err),
    };
    let sale_id = SaleId::parse(&http::path_param(&req, "saleId")).ok();
    admin.metrics.invocation_done(&Invocation {
        request_id: http::request_id(&req),
        sale_id: sale_id.as_ref().map(SaleId::as_str),
        order_id: None,
    });
    Ok(response)
}

async fn route(admin: &crate::Admin, req: &Request) -> Result<Response<Body>, ApiError> {
    let jobs = &admin.jobs;
    let caller = http::caller(req)?;
    if !caller.is_admin() {
        return Err(ApiError::Forbidden);
    }
    let route_key = match req.request_context() {
        RequestContext::ApiGatewayV2(ctx) => ctx.route_key.unwrap_or_default(),
        _ => String::new(),
    };
    let sale_id = SaleId::parse(req.path_parameters().first("saleId").unwrap_or_default())
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let now = clock::now_ms();
    match route_key.as_str() {
        "PUT /admin/sales/{saleId}" => {
            let sale = sale_spec::parse_sale(&sale_id, http::body_bytes(req)?)
                .map_err(ApiError::InvalidRequest)?;
            let status = match jobs
                .catalog()
                .upsert_sale(&sale, now)
                .await
                .map_err(unavailable)?
            {
                Upsert::Created => 201,
                Upsert::Updated => 200,
                Upsert::StartedStockChange => return Err(ApiError::SaleStarted),
                Upsert::Conflict => return Err(ApiError::Conflict),
            };
            // Load or refresh Redis at once when the sale is due, so a
            // changed end or limit applies without waiting for the schedule.
            let prewarm = jobs
                .prewarm_sale(&sale_id, now)
                .await
                .map_err(unavailable)?;
            tracing::info!(%sale_id, status, actor = %caller.user_id, ?prewarm, "sale saved");
            let mut body = sale_body(jobs, &sale_id).await?;
            body["prewarm"] = prewarm.body();
            Ok(http::json(status, &body))
        }
        "POST /admin/sales/{saleId}/prewarm" => {
            match jobs
                .prewarm_sale(&sale_id, now)
                .await
                .map_err(unavailable)?
            {
                PrewarmOutcome::NotFound => Err(ApiError::SaleNotFound),
                outcome => {
                    tracing::info!(%sale_id, actor = %caller.user_id, ?outcome, "prewarm on demand");
                    Ok(http::json(200, &outcome.body()))
                }
            }
        }
        "POST /admin/sales/{saleId}/reconcile" => {
            let report = admin
                .reconciler
                .reconcile_sale(&sale_id, now)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            tracing::info!(%sale_id, actor = %caller.user_id, violations = report.violations.len(), "reconcile on demand");
            Ok(http::json(
                200,
                &serde_json::to_value(&report).unwrap_or_default(),
            ))
        }
        "GET /admin/sales/{saleId}/report" => {
            let raw = jobs
                .catalog()
                .last_report(&sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            let report: serde_json::Value =
                serde_json::from_str(&raw).map_err(|_| ApiError::Internal)?;
            Ok(http::json(200, &report))
        }
        // The operator dashboard's poll: read only (seckill_shared::live).
        "GET /admin/sales/{saleId}/live" => {
            let body = seckill_shared::live::live(admin.reconciler.checker(), &sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            Ok(http::json(200, &body))
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

async fn sale_body(
    jobs: &seckill_shared::jobs::Jobs,
    sale_id: &SaleId,
) -> Result<serde_json::Value, ApiError> {
    let (sale, counters) = jobs
        .catalog()
        .get_record(sale_id)
        .await
        .map_err(unavailable)?
        .ok_or(ApiError::SaleNotFound)?;
    Ok(serde_json::json!({
        "saleId": sale.sale_id,
        "name": sale.name,
        "totalStock": sale.total_stock,
        "startAt": clock::rfc3339_ms(sale.start_ms),
        "endAt": clock::rfc3339_ms(sale.end_ms),
        "perUserLimit": sale.per_user_limit,
        "paymentWindowSeconds": sale.payment_window_seconds,
        "shards": sale.shards,
        "gate": sale.gate,
        "available": counters.available,
        "sold": counters.sold,
    }))
}

fn unavailable(err: impl std::fmt::Display) -> ApiError {
    tracing::error!(%err, "admin operation failed");
    ApiError::paused("temporarily unavailable; retry shortly")
}
