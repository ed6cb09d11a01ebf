//! Event in, response out. Everything is parsed here, before any Redis key
//! is built: the caller from the JWT claims, the sale id from the path, the
//! `Idempotency-Key` header, the body. Bad input never reaches the domain.

use lambda_http::{Body, Request, Response};
use seckill_shared::app::purchase::{Admitted, PurchaseRequest, PurchaseService};
use seckill_shared::clock;
use seckill_shared::domain::{IdempotencyKey, OrderId, Outcome, Quantity, SaleId};
use seckill_shared::error::ApiError;
use seckill_shared::http;
use seckill_shared::http::bodies::{PurchaseAccepted, PurchaseTicket};
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::ports::{DrawStore, OrderQueue, SaleCatalog, StockStore};
use serde::Deserialize;
use std::convert::Infallible;
use tracing::Instrument;

/// The purchase body: `{"quantity": n}`, everything optional, nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PurchaseBody {
    quantity: Option<Quantity>,
}

/// Handles one `POST /sales/{saleId}/purchase`. Never fails: every outcome,
/// errors included, is a response of the contract. Each answer is counted
/// once, here, by the code the buyer gets (`Purchases` by `Outcome`), and
/// tallied per sale for the operator dashboard (flushed to Redis at most
/// once a second; the sold-out flag's answers included).
pub async fn handle<S, Q, C>(
    service: &PurchaseService<S, Q, C>,
    req: Request,
) -> Result<Response<Body>, Infallible>
where
    S: StockStore + DrawStore,
    Q: OrderQueue,
    C: SaleCatalog,
{
    let request_id = http::request_id(&req);
    // Every log line of this purchase, the domain's included, carries its ids.
    let span = tracing::info_span!(
        "purchase",
        request_id = request_id.unwrap_or_default(),
        sale_id = tracing::field::Empty,
        order_id = tracing::field::Empty,
    );
    let answer = answer(service, &req, request_id).instrument(span).await;
    let metrics = service.metrics();
    metrics.purchase(answer.outcome);
    if let Some(sale_id) = &answer.sale_id {
        service.outcomes().record(sale_id, answer.outcome);
    }
    metrics.invocation_done(&Invocation {
        request_id,
        sale_id: answer.sale_id.as_ref().map(SaleId::as_str),
        order_id: answer.order_id.as_ref().map(OrderId::as_str),
    });
    // Lambda freezes an environment between invocations, so the tally goes
    // out here, once a second at most (a no-op where a task flushes it).
    service.flush_outcomes_if_due().await;
    Ok(answer.response)
}

/// A response and what the metrics line says about it.
struct Answer {
    response: Response<Body>,
    outcome: &'static str,
    sale_id: Option<SaleId>,
    order_id: Option<OrderId>,
}

async fn answer<S, Q, C>(
    service: &PurchaseService<S, Q, C>,
    req: &Request,
    request_id: Option<&str>,
) -> Answer
where
    S: StockStore + DrawStore,
    Q: OrderQueue,
    C: SaleCatalog,
{
    let parsed = match parse(req, service.edge_secret()) {
        Ok(parsed) => parsed,
        Err(err) => {
            return Answer {
                response: http::error(&err),
                outcome: err.code(),
                sale_id: None,
                order_id: None,
            };
        }
    };
    let span = tracing::Span::current();
    span.record("sale_id", parsed.sale_id.as_str());
    match service.admit_or_draw(&parsed).await {
        Ok(Admitted::Ticket(ticket)) => {
            tracing::info!(
                request_id = request_id.unwrap_or_default(),
                sale_id = %parsed.sale_id,
                "lottery ticket"
            );
            Answer {
                response: http::body(
                    202,
                    &PurchaseTicket {
                        sale_id: ticket.sale_id.as_str(),
                        quantity: ticket.quantity.get(),
                        status: "TICKET",
                        draw_at: clock::rfc3339_ms(ticket.draw_at_ms),
                    },
                ),
                outcome: Outcome::Ticket.as_str(),
                sale_id: Some(parsed.sale_id),
                order_id: None,
            }
        }
        Ok(Admitted::Order(accepted)) => {
            span.record("order_id", accepted.order_id.as_str());
            let mut response = http::body(
                202,
                &PurchaseAccepted {
                    order_id: accepted.order_id.as_str(),
                    sale_id: accepted.sale_id.as_str(),
                    quantity: accepted.quantity.get(),
                    status: "QUEUED",
                },
            );
            let location = format!("/orders/{}", accepted.order_id);
            if let Ok(value) = lambda_http::http::HeaderValue::from_str(&location) {
                response
                    .headers_mut()
                    .insert(lambda_http::http::header::LOCATION, value);
            }
            tracing::info!(
                request_id = request_id.unwrap_or_default(),
                sale_id = %parsed.sale_id,
                order_id = %accepted.order_id,
                replayed = accepted.replayed,
                "purchase accepted"
            );
            Answer {
                response,
                outcome: if accepted.replayed {
                    Outcome::Replayed.as_str()
                } else {
                    Outcome::Accepted.as_str()
                },
                sale_id: Some(parsed.sale_id),
                order_id: Some(accepted.order_id),
            }
        }
        Err(err) => {
            tracing::debug!(
                request_id = request_id.unwrap_or_default(),
                sale_id = %parsed.sale_id,
                %err,
                "purchase refused"
            );
            let err = ApiError::from(err);
            Answer {
                response: http::error(&err),
                // A keyed retry of an order that ended is a replay: its
                // code is not a purchase outcome of its own.
                outcome: match err {
                    ApiError::OrderEnded { .. } => Outcome::Replayed.as_str(),
                    _ => err.code(),
                },
                sale_id: Some(parsed.sale_id),
                order_id: None,
            }
        }
    }
}

/// Turns the event into a purchase request, or the 4xx that explains why not.
pub fn parse(req: &Request, edge_secret: Option<&str>) -> Result<PurchaseRequest, ApiError> {
    let user_id = http::caller_id(req)?;
    let sale_id = SaleId::parse(&http::path_param(req, "saleId"))
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let idempotency_key = http::header(req, "idempotency-key")?
        .map(IdempotencyKey::parse)
        .transpose()
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let sale_token = http::sale_token(req)?;
    let body = http::body_bytes(req)?;
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let quantity = if first.is_none() {
        Quantity::ONE
    } else if first != Some(&b'{') {
        // serde would read `[1]` as a struct; the contract is an object.
        return Err(ApiError::InvalidRequest(
            "body must be a JSON object".into(),
        ));
    } else {
        serde_json::from_slice::<PurchaseBody>(body)
            .map_err(|e| ApiError::InvalidRequest(body_error(&e)))?
            .quantity
            .unwrap_or(Quantity::ONE)
    };
    Ok(PurchaseRequest {
        sale_id,
        user_id,
        quantity,
        idempotency_key,
        source_ip: http::source_ip(req, edge_secret),
        sale_token,
    })
}

/// A short, safe description of what is wrong with the body.
fn body_error(err: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => "body is not valid JSON".into(),
        Category::Data => format!(
            "body must be {{\"quantity\": n}} with n an integer from 1 to {}: {}",
            Quantity::MAX,
            strip_position(&err.to_string())
        ),
    }
}

fn strip_position(text: &str) -> &str {
    text.split(" at line ").next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(path_sale: &str, body: &str, sub: Option<&str>) -> Request {
        let claims = match sub {
            Some(sub) => format!(
                r#""authorizer": {{"jwt": {{"claims": {{"sub": {}, "scope": "openid"}}, "scopes": null}}}},"#,
                serde_json::json!(sub)
            ),
            None => String::new(),
        };
        let raw = format!(
            r#"{{
              "version": "2.0", "routeKey": "POST /sales/{{saleId}}/purchase",
              "rawPath": "/sales/x/purchase", "rawQueryString": "",
              "headers": {{"content-type": "application/json"}},
              "requestContext": {{
                "accountId": "1", "apiId": "a", {claims}
                "domainName": "d", "domainPrefix": "d",
                "http": {{"method": "POST", "path": "/sales/x/purchase", "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "t"}},
                "requestId": "r", "routeKey": "POST /sales/{{saleId}}/purchase", "stage": "$default",
                "time": "30/Nov/2026:03:00:00 +0000", "timeEpoch": 1
              }},
              "pathParameters": {{"saleId": {sale}}},
              "body": {body}, "isBase64Encoded": false
            }}"#,
            sale = serde_json::json!(path_sale),
            body = serde_json::json!(body),
        );
        lambda_http::request::from_str(&raw).unwrap()
    }

    #[test]
    fn parses_a_good_request() {
        let p = parse(&event("s1", r#"{"quantity": 2}"#, Some("u1")), None).unwrap();
        assert_eq!((p.sale_id.as_str(), p.user_id.as_str()), ("s1", "u1"));
        assert_eq!(p.quantity.get(), 2);
        let p = parse(&event("s1", "", Some("u1")), None).unwrap();
        assert_eq!(p.quantity.get(), 1);
    }

    #[test]
    fn refuses_bad_input_with_400_or_401() {
        let cases = [
            ("s1", "{", Some("u1"), 400),
            ("s1", r#"{"quantity": 0}"#, Some("u1"), 400),
            ("s1", r#"{"quantity": 1.5}"#, Some("u1"), 400),
            ("s1", r#"{"quantity": "1"}"#, Some("u1"), 400),
            ("s1", r#"{"userId": "admin"}"#, Some("u1"), 400),
            ("s{1}", "", Some("u1"), 400),
            ("", "", Some("u1"), 400),
            ("s1", "", None, 401),
            // A sub no user id can be: empty, with a control character.
            ("s1", "", Some(""), 401),
            ("s1", "", Some("a\nb"), 401),
        ];
        for (sale, body, sub, status) in cases {
            let err = parse(&event(sale, body, sub), None).unwrap_err();
            assert_eq!(err.status(), status, "{sale:?} {body:?} {sub:?}");
        }
        // Any sub a provider issues is the user id, exactly.
        for sub in ["a|b", "auth0|5f7c1e2a9b3d4c0012345678", "{x},y:z", "用户"] {
            let p = parse(&event("s1", "", Some(sub)), None).unwrap();
            assert_eq!(p.user_id.as_str(), sub);
        }
    }
}
