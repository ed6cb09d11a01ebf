//! Routes by the event's `routeKey` (what API Gateway matched), parses the
//! path and the caller, and turns outcomes into the contract's responses.

use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use seckill_shared::app::order_queries::OrderQueries;
use seckill_shared::app::order_queries::{JoinAnswer, JoinRequest, Question};
use seckill_shared::app::payments::PaymentError;
use seckill_shared::clock;
use seckill_shared::domain::{OrderId, SaleId};
use seckill_shared::error::ApiError;
use seckill_shared::http;
use seckill_shared::http::bodies::{
    Challenge, Health, MyOrders, OrderView, PaymentAnswerBody, SalePass, SaleView, TicketView,
    WaitlistBody,
};
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::ports::{
    OrderStore, PaymentStore, SaleCatalog, StockAdmin, StockStore, WaitlistStore,
};
use std::convert::Infallible;

/// The routes this function serves, as `template.yaml` declares them.
pub const ROUTES: [&str; 10] = [
    "GET /health",
    "GET /sales/{saleId}",
    "GET /sales/{saleId}/orders",
    "POST /sales/{saleId}/waitlist",
    "DELETE /sales/{saleId}/waitlist",
    "GET /sales/{saleId}/challenge",
    "POST /sales/{saleId}/challenge",
    "GET /orders/{orderId}",
    "POST /orders/{orderId}/pay",
    "POST /payments/callback",
];

pub async fn handle<O, S, C>(
    queries: &OrderQueries<O, S, C>,
    req: Request,
) -> Result<Response<Body>, Infallible>
where
    O: OrderStore + PaymentStore + WaitlistStore,
    S: StockStore + StockAdmin,
    C: SaleCatalog,
{
    let response = match route(queries, &req).await {
        Ok(response) => response,
        Err(err) => http::error(&err),
    };
    // Ids from the path, only when they are valid ids.
    let sale_id = SaleId::parse(&http::path_param(&req, "saleId")).ok();
    let order_id = OrderId::parse(&http::path_param(&req, "orderId")).ok();
    queries.metrics().invocation_done(&Invocation {
        request_id: http::request_id(&req),
        sale_id: sale_id.as_ref().map(SaleId::as_str),
        order_id: order_id.as_ref().map(OrderId::as_str),
    });
    Ok(response)
}

async fn route<O, S, C>(
    queries: &OrderQueries<O, S, C>,
    req: &Request,
) -> Result<Response<Body>, ApiError>
where
    O: OrderStore + PaymentStore + WaitlistStore,
    S: StockStore + StockAdmin,
    C: SaleCatalog,
{
    let route_key = match req.request_context() {
        RequestContext::ApiGatewayV2(ctx) => ctx.route_key.unwrap_or_default(),
        _ => String::new(),
    };
    match route_key.as_str() {
        "GET /health" => Ok(http::body(200, &Health::OK)),
        "GET /sales/{saleId}" => {
            let sale_id = SaleId::parse(&http::path_param(req, "saleId"))
                .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
            let view = queries
                .sale_view(&sale_id)
                .await
                .map_err(|e| e.into_api(true))?;
            let body = SaleView::of(&view.sale, view.remaining, view.status);
            Ok(http::cacheable_json(
                http::SALE_VIEW_MAX_AGE_SECS,
                &serde_json::to_value(&body).map_err(|_| ApiError::Internal)?,
            ))
        }
        "GET /sales/{saleId}/orders" => {
            let caller = http::caller(req)?;
            let sale_id = sale_id(req)?;
            // The ticket first: a due draw it drives may have just made the
            // buyer's order, which the list then shows.
            let ticket = queries
                .my_ticket(&sale_id, &caller.user_id)
                .await
                .map_err(|e| e.into_api(true))?;
            let orders = queries
                .my_orders(&sale_id, &caller.user_id)
                .await
                .map_err(|e| e.into_api(true))?;
            let waitlist = queries
                .my_waitlist(&sale_id, &caller.user_id, ticket.as_ref(), &orders)
                .await
                .map_err(|e| e.into_api(true))?;
            let now = clock::now_ms();
            Ok(http::body(
                200,
                &MyOrders {
                    orders: orders.iter().map(|o| OrderView::of(o, now)).collect(),
                    ticket: ticket.as_ref().map(TicketView::of),
                    waitlist: waitlist.as_ref().map(|w| WaitlistBody::of(w, now)),
                },
            ))
        }
        "POST /sales/{saleId}/waitlist" => {
            let request = parse_join(req)?;
            let joined = queries
                .join_waitlist(&request)
                .await
                .map_err(|e| e.into_api(true))?;
            let now = clock::now_ms();
            Ok(match &joined {
                JoinAnswer::New(entry) => http::body(201, &WaitlistBody::of(entry, now)),
                JoinAnswer::Existing(entry) => http::body(200, &WaitlistBody::of(entry, now)),
            })
        }
        "DELETE /sales/{saleId}/waitlist" => {
            let caller = http::caller(req)?;
            let sale_id = sale_id(req)?;
            let entry = queries
                .leave_waitlist(&sale_id, &caller.user_id)
                .await
                .map_err(|e| e.into_api(true))?;
            Ok(http::body(200, &WaitlistBody::of(&entry, clock::now_ms())))
        }
        "GET /sales/{saleId}/challenge" => {
            let caller = http::caller(req)?;
            let sale_id = sale_id(req)?;
            let question = queries
                .challenge(&sale_id, &caller.user_id)
                .await
                .map_err(|e| e.into_api(true))?;
            Ok(http::body(
                200,
                &match &question {
                    Question::Arithmetic(c) => Challenge::arithmetic(c),
                    Question::Pow(c) => Challenge::pow(c),
                },
            ))
        }
        "POST /sales/{saleId}/challenge" => {
            let caller = http::caller(req)?;
            let sale_id = sale_id(req)?;
            let body: serde_json::Value =
                serde_json::from_slice(http::body_bytes(req)?).map_err(|_| {
                    ApiError::InvalidRequest(
                        "body must be {\"answer\": n} or {\"challengeId\", \"nonce\"}".into(),
                    )
                })?;
            // A proof of work's solution: both fields are strings, and the
            // challenge's id is required (it names the window solved).
            if let Some(nonce) = body.get("nonce") {
                let nonce = nonce
                    .as_str()
                    .ok_or_else(|| ApiError::InvalidRequest("nonce must be a string".into()))?;
                let challenge_id = body
                    .get("challengeId")
                    .and_then(serde_json::Value::as_str)
                    .ok_or_else(|| {
                        ApiError::InvalidRequest(
                            "challengeId must be the string GET gave with the challenge".into(),
                        )
                    })?;
                let pass = queries
                    .solve(&sale_id, &caller.user_id, challenge_id, nonce)
                    .await
                    .map_err(|e| e.into_api(true))?;
                return Ok(http::body(200, &SalePass::of(&pass)));
            }
            let answer = body
                .get("answer")
                .and_then(serde_json::Value::as_i64)
                .ok_or_else(|| ApiError::InvalidRequest("answer must be an integer".into()))?;
            // Optional: the id GET gave with the question binds the answer
            // to that question alone.
            let challenge_id = match body.get("challengeId") {
                None | Some(serde_json::Value::Null) => None,
                Some(serde_json::Value::String(id)) => Some(id.as_str()),
                Some(_) => {
                    return Err(ApiError::InvalidRequest(
                        "challengeId must be the string GET gave".into(),
                    ));
                }
            };
            let pass = queries
                .answer(&sale_id, &caller.user_id, answer, challenge_id)
                .await
                .map_err(|e| e.into_api(true))?;
            Ok(http::body(200, &SalePass::of(&pass)))
        }
        "GET /orders/{orderId}" => {
            let caller = http::caller(req)?;
            let order_id = order_id(req)?;
            let order = queries
                .order(&order_id, &caller.user_id)
                .await
                .map_err(|e| e.into_api(false))?;
            Ok(http::body(200, &OrderView::of(&order, clock::now_ms())))
        }
        "POST /orders/{orderId}/pay" => {
            let caller = http::caller(req)?;
            let order_id = order_id(req)?;
            // The body is ignored, but an oversized one is still refused.
            http::body_bytes(req)?;
            let order = queries
                .pay(&order_id, &caller.user_id)
                .await
                .map_err(|e| e.into_api(false))?;
            tracing::info!(
                request_id = http::request_id(req).unwrap_or_default(),
                %order_id,
                sale_id = %order.sale_id,
                "order paid"
            );
            Ok(http::body(200, &OrderView::of(&order, clock::now_ms())))
        }
        // The payment provider: no JWT; the signature over the raw body is
        // the authentication, checked before anything is parsed.
        "POST /payments/callback" => {
            let signature = http::header(req, seckill_shared::domain::payment::SIGNATURE_HEADER)
                .map_err(|_| ApiError::InvalidSignature)?;
            let answer = queries
                .payment_callback(signature, http::body_bytes(req)?)
                .await
                .map_err(|e| {
                    if let PaymentError::Signature(why) = &e {
                        tracing::warn!(
                            request_id = http::request_id(req).unwrap_or_default(),
                            %why,
                            "payment callback refused"
                        );
                    }
                    e.into_api()
                })?;
            Ok(http::body(
                200,
                &PaymentAnswerBody {
                    payment_id: answer.payment_id.as_str(),
                    order_id: answer.order_id.as_str(),
                    outcome: answer.outcome.as_str(),
                    order: OrderView::of(&answer.order, clock::now_ms()),
                },
            ))
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

/// A join of the waitlist: no body, or an empty JSON object (a join has
/// nothing to choose: one unit, the caller's own place).
fn parse_join(req: &Request) -> Result<JoinRequest, ApiError> {
    let user_id = http::caller_id(req)?;
    let sale_id = sale_id(req)?;
    let sale_token = http::sale_token(req)?;
    let body = http::body_bytes(req)?;
    if body.iter().any(|b| !b.is_ascii_whitespace()) {
        match serde_json::from_slice::<serde_json::Value>(body) {
            Ok(serde_json::Value::Object(fields)) if fields.is_empty() => {}
            _ => {
                return Err(ApiError::InvalidRequest(
                    "a join takes no body, or {}: it is one unit, at the caller's own place".into(),
                ));
            }
        }
    }
    Ok(JoinRequest {
        sale_id,
        user_id,
        sale_token,
        source_ip: http::source_ip(req, None),
    })
}

fn sale_id(req: &Request) -> Result<SaleId, ApiError> {
    SaleId::parse(&http::path_param(req, "saleId"))
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))
}

fn order_id(req: &Request) -> Result<OrderId, ApiError> {
    let raw = req
        .path_parameters()
        .first("orderId")
        .map(str::to_owned)
        .unwrap_or_default();
    OrderId::parse(&raw).map_err(|e| ApiError::InvalidRequest(e.to_string()))
}
