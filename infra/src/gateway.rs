//! The local API Gateway: an HTTP API on loopback that does what AWS wires
//! in front of the functions. It matches routes, checks the JWT like the JWT
//! authorizer, builds a real-shaped payload-2.0 event (path parameters,
//! string claims, base64 for binary bodies) and hands it to the same handler
//! code Lambda runs.

use crate::token::{TokenSettings, bearer};
use base64::Engine;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use lambda_http::Body;
use seckill_shared::clock;
use seckill_shared::error::ApiError;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::net::TcpListener;

/// API Gateway refuses payloads above 10 MB; locally 1 MiB is plenty and
/// keeps a flood from buffering much. Functions apply their own, lower, cap.
const MAX_GATEWAY_BODY: usize = 1024 * 1024;

/// What the gateway routes to.
pub struct Gateway {
    pub tokens: TokenSettings,
    pub purchase: purchase::LivePurchase,
    pub orders: orders_api::LiveQueries,
    pub admin: Arc<admin_api::Admin>,
}

/// The function a route invokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Purchase,
    OrdersApi,
    AdminApi,
}

/// One route of the HTTP API, as `template.yaml` declares it.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub target: Target,
    /// False only for the public routes of the design.
    pub authorized: bool,
}

/// Every route the local stack serves. Kept in step with `template.yaml`.
pub const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        path: "/health",
        target: Target::OrdersApi,
        authorized: false,
    },
    Route {
        method: "POST",
        path: "/sales/{saleId}/purchase",
        target: Target::Purchase,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/sales/{saleId}",
        target: Target::OrdersApi,
        authorized: false,
    },
    Route {
        method: "GET",
        path: "/sales/{saleId}/challenge",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/sales/{saleId}/challenge",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/orders/{orderId}",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/orders/{orderId}/pay",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "PUT",
        path: "/admin/sales/{saleId}",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/prewarm",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/reconcile",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/report",
        target: Target::AdminApi,
        authorized: true,
    },
];

/// Finds the route for a request and its path parameters (percent-decoded).
pub fn match_route(method: &str, path: &str) -> Option<(&'static Route, HashMap<String, String>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    ROUTES.iter().find_map(|route| {
        if route.method != method {
            return None;
        }
        let pattern: Vec<&str> = route.path.trim_start_matches('/').split('/').collect();
        if pattern.len() != segments.len() {
            return None;
        }
        let mut params = HashMap::new();
        for (want, got) in pattern.iter().zip(&segments) {
            if let Some(name) = want.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
                if got.is_empty() {
                    return None;
                }
                params.insert(name.to_owned(), percent_decode(got));
            } else if want != got {
                return None;
            }
        }
        Some((route, params))
    })
}

fn percent_decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                let gateway = gateway.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let gateway = gateway.clone();
                        async move { Ok::<_, Infallible>(handle(&gateway, peer, req).await) }
                    });
                    if let Err(err) = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(%err, "connection ended with an error");
                    }
                });
            }
        }
    }
}

type HyperResponse = hyper::Response<Full<Bytes>>;

async fn handle(
    gateway: &Gateway,
    peer: SocketAddr,
    req: hyper::Request<Incoming>,
) -> HyperResponse {
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_GATEWAY_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return plain_error(413, "PAYLOAD_TOO_LARGE", "request body too large");
        }
    };
    let path = parts.uri.path().to_owned();
    let Some((route, params)) = match_route(parts.method.as_str(), &path) else {
        return to_hyper(seckill_shared::http::error(&ApiError::RouteNotFound));
    };
    let claims = if route.authorized {
        let header = parts
            .headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match bearer(header).and_then(|t| gateway.tokens.verify(t)) {
            Ok(claims) => Some(claims),
            Err(err) => {
                tracing::debug!(%err, "token refused");
                return to_hyper(seckill_shared::http::error(&ApiError::Unauthenticated));
            }
        }
    } else {
        None
    };
    let event = event_json(&parts, &body, peer, route, &params, claims.as_ref());
    let request = match lambda_http::request::from_str(&event.to_string()) {
        Ok(request) => request,
        Err(err) => {
            tracing::error!(%err, "could not build the Lambda event");
            return to_hyper(seckill_shared::http::error(&ApiError::Internal));
        }
    };
    let response = match route.target {
        Target::Purchase => purchase::handler::handle(&gateway.purchase, request).await,
        Target::OrdersApi => orders_api::handler::handle(&gateway.orders, request).await,
        Target::AdminApi => admin_api::handler::handle(&gateway.admin, request).await,
    };
    let response = match response {
        Ok(response) => response,
        Err(never) => match never {},
    };
    to_hyper(response)
}

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(0);

/// A payload format 2.0 event, shaped like the ones API Gateway sends.
pub fn event_json(
    parts: &hyper::http::request::Parts,
    body: &Bytes,
    peer: SocketAddr,
    route: &Route,
    params: &HashMap<String, String>,
    claims: Option<&HashMap<String, String>>,
) -> serde_json::Value {
    let mut headers: HashMap<String, String> = HashMap::new();
    let mut cookies = Vec::new();
    for (name, value) in &parts.headers {
        let Ok(value) = value.to_str() else { continue };
        if name == hyper::header::COOKIE {
            cookies.extend(value.split(';').map(|c| c.trim().to_owned()));
            continue;
        }
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push(',');
                v.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }
    let query = parts.uri.query().unwrap_or("");
    let mut query_params: HashMap<String, String> = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query_params
            .entry(percent_decode(k))
            .and_modify(|old| {
                old.push(',');
                old.push_str(&percent_decode(v));
            })
            .or_insert_with(|| percent_decode(v));
    }
    let (body_text, is_base64) = match std::str::from_utf8(body) {
        _ if body.is_empty() => (serde_json::Value::Null, false),
        Ok(text) => (serde_json::Value::String(text.to_owned()), false),
        Err(_) => (
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(body)),
            true,
        ),
    };
    let route_key = format!("{} {}", route.method, route.path);
    let now = clock::now_ms();
    let seq = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    let authorizer =
        claims.map(|claims| serde_json::json!({"jwt": {"claims": claims, "scopes": null}}));
    let source_ip = headers
        .get("x-forwarded-for")
        .and_then(|v| v.split(',').next())
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| peer.ip().to_string());
    let mut event = serde_json::json!({
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": parts.uri.path(),
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": headers.get("host").cloned().unwrap_or_else(|| "127.0.0.1".into()),
            "domainPrefix": "local",
            "http": {
                "method": parts.method.as_str(),
                "path": parts.uri.path(),
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": headers.get("user-agent").cloned().unwrap_or_default(),
            },
            "requestId": format!("local-{now:x}-{seq:x}"),
            "routeKey": route_key,
            "stage": "$default",
            "time": clock::rfc3339_ms(now),
            "timeEpoch": now,
        },
        "isBase64Encoded": is_base64,
    });
    if let Some(authorizer) = authorizer {
        event["requestContext"]["authorizer"] = authorizer;
    }
    if !cookies.is_empty() {
        event["cookies"] = serde_json::json!(cookies);
    }
    if !query_params.is_empty() {
        event["queryStringParameters"] = serde_json::json!(query_params);
    }
    if !params.is_empty() {
        event["pathParameters"] = serde_json::json!(params);
    }
    if !body_text.is_null() {
        event["body"] = body_text;
    }
    event
}

fn to_hyper(response: lambda_http::Response<Body>) -> HyperResponse {
    let (parts, body) = response.into_parts();
    let bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bin) => Bytes::from(bin),
        _ => Bytes::new(),
    };
    hyper::Response::from_parts(parts, Full::new(bytes))
}

fn plain_error(status: u16, code: &str, message: &str) -> HyperResponse {
    let body = serde_json::json!({"code": code, "message": message}).to_string();
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_with_decoded_parameters() {
        let (route, params) = match_route("POST", "/sales/a%20b/purchase").unwrap();
        assert_eq!(route.target, Target::Purchase);
        assert_eq!(params["saleId"], "a b");
        assert!(match_route("GET", "/sales/a/purchase").is_none());
        assert!(match_route("POST", "/sales//purchase").is_none());
        assert!(match_route("POST", "/sales/a/purchase/x").is_none());
        assert_eq!(
            match_route("GET", "/health").unwrap().0.target,
            Target::OrdersApi
        );
        let (route, params) = match_route("POST", "/orders/o1/pay").unwrap();
        assert_eq!(
            (route.path, params["orderId"].as_str()),
            ("/orders/{orderId}/pay", "o1")
        );
        assert!(match_route("GET", "/sales/s1").is_some_and(|(r, _)| !r.authorized));
    }
}
