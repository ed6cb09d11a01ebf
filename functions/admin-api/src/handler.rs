//! Routes by the event's `routeKey`. The scope is checked here as well as
//! by API Gateway: a route configured without its scope, or the local stack,
//! must not let a buyer create sales.

use crate::answers::{audit, kept, sale_record, unavailable};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use seckill_shared::app::jobs::PrewarmOutcome;
use seckill_shared::app::operators::{self, PauseOutcome};
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::domain::sale_spec;
use seckill_shared::error::ApiError;
use seckill_shared::http;
use seckill_shared::http::bodies::ReconcileReportBody;
use seckill_shared::http::bodies::admin::{
    AuditPageBody, PrewarmBody, ReconcileSummary, Refunds, SaleChanged, SaleDefinitionView,
    WaitlistStats,
};
use seckill_shared::http::bodies::live::LiveView;
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::ports::{AUDIT_PAGE_MAX, AuditRange, Upsert};
use std::convert::Infallible;

/// The routes this function serves, as `template.yaml` declares them (the
/// last seven are [`crate::console`]'s).
pub const ROUTES: [&str; 17] = [
    "PUT /admin/sales/{saleId}",
    "POST /admin/sales/{saleId}/prewarm",
    "POST /admin/sales/{saleId}/reconcile",
    "POST /admin/sales/{saleId}/pause",
    "POST /admin/sales/{saleId}/resume",
    "GET /admin/sales/{saleId}/report",
    "GET /admin/sales/{saleId}/live",
    "GET /admin/sales/{saleId}/audit",
    "GET /admin/sales/{saleId}/refunds",
    "GET /admin/sales/{saleId}/waitlist",
    "GET /admin/sales",
    "GET /admin/sales/{saleId}",
    "POST /admin/sales/{saleId}/end",
    "GET /admin/orders/{orderId}",
    "GET /admin/sales/{saleId}/orders",
    "GET /admin/dlq",
    "POST /admin/dlq/redrive",
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
    if let Some(response) = crate::console::route(admin, req, &route_key, &caller).await? {
        return Ok(response);
    }
    let sale_id = SaleId::parse(req.path_parameters().first("saleId").unwrap_or_default())
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let now = clock::now_ms();
    match route_key.as_str() {
        "PUT /admin/sales/{saleId}" => {
            let sale = sale_spec::parse_sale(&sale_id, http::body_bytes(req)?)
                .map_err(ApiError::InvalidRequest)?;
            let (upsert, before) = operators::define(jobs, &sale, now)
                .await
                .map_err(unavailable)?;
            let status = match upsert {
                Upsert::Created => 201,
                Upsert::Updated => 200,
                Upsert::Ended => return Err(ApiError::SaleEnded),
                Upsert::StartedStockChange => return Err(ApiError::SaleStarted),
                Upsert::Loaded(why) => return Err(ApiError::SaleLoaded(why)),
                Upsert::Conflict => return Err(ApiError::Conflict),
            };
            // Load or refresh Redis at once, so a changed end (even one
            // already past), limit or stock applies from the next purchase.
            let prewarm = jobs
                .prewarm_sale(&sale_id, now)
                .await
                .map_err(unavailable)?;
            let record = sale_record(jobs, &sale_id).await?;
            let action = if status == 201 { "create" } else { "update" };
            audit(
                jobs,
                &caller.user_id,
                &sale_id,
                action,
                before
                    .as_ref()
                    .and_then(|b| kept(&SaleDefinitionView::of(b))),
                kept(&record),
                now,
            )
            .await;
            Ok(http::body(
                status,
                &SaleChanged {
                    record,
                    prewarm: Some(PrewarmBody::of(&prewarm)),
                    redis_groups: None,
                },
            ))
        }
        "POST /admin/sales/{saleId}/prewarm" => {
            match jobs
                .prewarm_sale(&sale_id, now)
                .await
                .map_err(unavailable)?
            {
                PrewarmOutcome::NotFound => Err(ApiError::SaleNotFound),
                outcome => {
                    let body = PrewarmBody::of(&outcome);
                    audit(
                        jobs,
                        &caller.user_id,
                        &sale_id,
                        "prewarm",
                        None,
                        kept(&body),
                        now,
                    )
                    .await;
                    Ok(http::body(200, &body))
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
            let summary = ReconcileSummary {
                violations: report.violations.len(),
                repairs: report.repairs.len(),
            };
            audit(
                jobs,
                &caller.user_id,
                &sale_id,
                "reconcile",
                None,
                kept(&summary),
                now,
            )
            .await;
            Ok(http::body(200, &report))
        }
        route @ ("POST /admin/sales/{saleId}/pause" | "POST /admin/sales/{saleId}/resume") => {
            let pause = route.ends_with("/pause");
            // The table first, then Redis at once (`operators::set_paused`).
            let (before, redis_groups) = match operators::set_paused(jobs, &sale_id, pause, now)
                .await
                .map_err(unavailable)?
            {
                PauseOutcome::Done {
                    before,
                    redis_groups,
                } => (before, redis_groups),
                PauseOutcome::NotFound => return Err(ApiError::SaleNotFound),
                PauseOutcome::Ended => return Err(ApiError::SaleEnded),
            };
            let body = SaleChanged {
                record: sale_record(jobs, &sale_id).await?,
                prewarm: None,
                redis_groups: Some(redis_groups),
            };
            let action = if pause { "pause" } else { "resume" };
            audit(
                jobs,
                &caller.user_id,
                &sale_id,
                action,
                kept(&SaleDefinitionView::of(&before)),
                kept(&body),
                now,
            )
            .await;
            Ok(http::body(200, &body))
        }
        "GET /admin/sales/{saleId}/audit" => {
            let range = audit_range(req.uri().query().unwrap_or_default())?;
            let page = operators::audit(jobs, &sale_id, range)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            Ok(http::body(
                200,
                &AuditPageBody {
                    entries: &page.entries,
                    total: page.total,
                    next: page.next,
                },
            ))
        }
        // Payments owed back to buyers (seckill_shared::app::payments).
        "GET /admin/sales/{saleId}/refunds" => {
            operators::record(jobs, &sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            let refunds = seckill_shared::app::payments::refunds(&admin.payments, &sale_id)
                .await
                .map_err(unavailable)?;
            Ok(http::body(200, &Refunds::of(&refunds)))
        }
        "GET /admin/sales/{saleId}/waitlist" => {
            operators::record(jobs, &sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            let stats = seckill_shared::app::payments::waitlist(&admin.payments, &sale_id)
                .await
                .map_err(unavailable)?;
            Ok(http::body(200, &WaitlistStats::of(&sale_id, &stats)))
        }
        "GET /admin/sales/{saleId}/report" => {
            let raw = operators::last_report(jobs, &sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            let report =
                ReconcileReportBody(serde_json::from_str(&raw).map_err(|_| ApiError::Internal)?);
            Ok(http::body(200, &report))
        }
        // The operator dashboard's poll: read only (seckill_shared::app::live).
        "GET /admin/sales/{saleId}/live" => {
            let state = seckill_shared::app::live::live(admin.reconciler.checker(), &sale_id)
                .await
                .map_err(unavailable)?
                .ok_or(ApiError::SaleNotFound)?;
            Ok(http::body(200, &LiveView::of(&state, clock::now_ms())))
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

/// `?after=N&limit=M` (a page after entry N, default from the first) or
/// `?last=M` (the newest M), M from 1 to [`AUDIT_PAGE_MAX`] (default the
/// most).
fn audit_range(query: &str) -> Result<AuditRange, ApiError> {
    let bad = |why: String| ApiError::InvalidRequest(why);
    let (mut after, mut limit, mut last) = (None, None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match name {
            "after" => &mut after,
            "limit" => &mut limit,
            "last" => &mut last,
            _ => continue,
        };
        *slot = Some(
            value
                .parse::<u64>()
                .map_err(|_| bad(format!("{name} must be a whole number, not {value:?}")))?,
        );
    }
    let page_size = |name: &str, n: u64| {
        u32::try_from(n)
            .ok()
            .filter(|n| (1..=AUDIT_PAGE_MAX).contains(n))
            .ok_or_else(|| bad(format!("{name} must be from 1 to {AUDIT_PAGE_MAX}")))
    };
    match (after, limit, last) {
        (None, None, Some(n)) => Ok(AuditRange::Last(page_size("last", n)?)),
        (_, _, Some(_)) => Err(bad("last cannot be combined with after or limit".into())),
        (after, limit, None) => Ok(AuditRange::After {
            after: after.unwrap_or(0),
            limit: page_size("limit", limit.unwrap_or(u64::from(AUDIT_PAGE_MAX)))?,
        }),
    }
}
