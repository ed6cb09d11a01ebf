//! The local API Gateway: an HTTP API on loopback that does what AWS wires
//! in front of the functions. It matches routes, checks the JWT like the JWT
//! authorizer, builds a real-shaped payload-2.0 event (path parameters,
//! string claims, base64 for binary bodies) and hands it to the same handler
//! code Lambda runs. It also serves the local stack's own routes
//! ([`LOCAL_ROUTES`]: the pages and the local sign-in, see
//! [`crate::pages`]), which no function serves and `template.yaml` lacks.

use crate::pages::{self, Page, PageSettings};
use crate::token::{TokenSettings, Verifier, bearer};
use base64::Engine;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use lambda_http::Body;
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext,
    ApiGatewayV2httpRequestContextHttpDescription,
};
use lambda_http::request::LambdaRequest;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::SqsQueue;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::clock;
use seckill_shared::error::ApiError;
use seckill_shared::ports::{OrderQueue, SaleCatalog, StockStore};
use serde::Deserialize;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::net::TcpListener;

/// API Gateway refuses payloads above 10 MB; locally 1 MiB is plenty and
/// keeps a flood from buffering much. Functions apply their own, lower, cap.
const MAX_GATEWAY_BODY: usize = 1024 * 1024;

/// What the gateway routes to. The purchase service's adapters are type
/// parameters, defaulting to the live ones (`purchase::LivePurchase`), so a
/// benchmark can serve the same route over a queue that drops messages and
/// measure the decision without the emulator's slow SendMessage.
pub struct Gateway<S = RedisStock, Q = SqsQueue, C = CachedCatalog<DynamoCatalog>> {
    /// Private, so the verifier built from them cannot go stale.
    tokens: TokenSettings,
    /// `tokens`' checking half, built once (see [`Gateway::new`]).
    verifier: Verifier,
    pub purchase: PurchaseService<S, Q, C>,
    pub orders: orders_api::LiveQueries,
    pub admin: Arc<admin_api::Admin>,
    /// What `GET /config.js` tells the pages.
    pages: PageSettings,
    /// Requests matched per route of [`ROUTES`] (same index): API Gateway's
    /// per-route `Count` metric (the template turns detailed metrics on).
    /// The browser test reads it to prove a double click sent one purchase.
    served: Box<[AtomicU64]>,
}

impl<S, Q, C> Gateway<S, Q, C> {
    /// The local token settings (to mint tokens the gateway accepts).
    pub fn tokens(&self) -> &TokenSettings {
        &self.tokens
    }

    /// Requests this gateway has routed to `method path` (a path of
    /// [`ROUTES`], e.g. `/sales/{saleId}/purchase`), whatever their answer;
    /// 0 for a route it does not have.
    pub fn served(&self, method: &str, path: &str) -> u64 {
        ROUTES
            .iter()
            .position(|r| r.method == method && r.path == path)
            .and_then(|i| self.served.get(i))
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// The same gateway with these settings behind `GET /config.js`.
    pub fn with_pages(self, pages: PageSettings) -> Self {
        Self { pages, ..self }
    }

    pub fn new(
        tokens: TokenSettings,
        purchase: PurchaseService<S, Q, C>,
        orders: orders_api::LiveQueries,
        admin: Arc<admin_api::Admin>,
    ) -> Self {
        Self {
            verifier: Verifier::new(&tokens),
            tokens,
            purchase,
            orders,
            admin,
            pages: PageSettings::default(),
            served: ROUTES.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The same gateway with another purchase service behind its purchase
    /// route; every other route is unchanged.
    pub fn with_purchase<S2, Q2, C2>(
        self,
        purchase: PurchaseService<S2, Q2, C2>,
    ) -> Gateway<S2, Q2, C2> {
        Gateway {
            tokens: self.tokens,
            verifier: self.verifier,
            purchase,
            orders: self.orders,
            admin: self.admin,
            pages: self.pages,
            served: self.served,
        }
    }
}

/// The function a route invokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Purchase,
    OrdersApi,
    AdminApi,
}

impl Target {
    /// The binary of the function (`functions/<name>`).
    pub fn function(self) -> &'static str {
        match self {
            Target::Purchase => "purchase",
            Target::OrdersApi => "orders-api",
            Target::AdminApi => "admin-api",
        }
    }
}

/// One route of the HTTP API, as `template.yaml` declares it.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub target: Target,
    /// False only for the public routes of the design.
    pub authorized: bool,
}

/// Every route the local stack serves. Kept in step with `template.yaml`
/// (the consistency test compares the two, target and authorizer included).
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
        method: "GET",
        path: "/sales/{saleId}/orders",
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
        method: "POST",
        path: "/admin/sales/{saleId}/pause",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/resume",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/audit",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/report",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/live",
        target: Target::AdminApi,
        authorized: true,
    },
];

/// A route of the local stack only: the pages and the local sign-in. Not
/// in `template.yaml` (on AWS the pages are files in the pages bucket and
/// tokens come from Cognito), and public, as static files are.
pub struct LocalOnlyRoute {
    pub method: &'static str,
    pub path: &'static str,
    pub serves: Page,
}

/// The routes [`crate::pages`] answers. The consistency check requires each
/// to be listed in [`crate::consistency::LOCAL_ONLY_ROUTES`], and
/// `template.yaml` not to route it to a function.
pub const LOCAL_ROUTES: &[LocalOnlyRoute] = &[
    LocalOnlyRoute {
        method: "GET",
        path: "/",
        serves: Page::Buyer,
    },
    LocalOnlyRoute {
        method: "GET",
        path: "/ops",
        serves: Page::Dashboard,
    },
    LocalOnlyRoute {
        method: "GET",
        path: "/assets/{file}",
        serves: Page::Asset,
    },
    LocalOnlyRoute {
        method: "GET",
        path: "/config.js",
        serves: Page::Config,
    },
    LocalOnlyRoute {
        method: "POST",
        path: "/local/token",
        serves: Page::Token,
    },
];

/// Finds the route for a request and its path parameters (percent-decoded).
pub fn match_route(method: &str, path: &str) -> Option<(&'static Route, HashMap<String, String>)> {
    match_route_at(method, path).map(|(i, params)| (&ROUTES[i], params))
}

/// [`match_route`], with the route's index in [`ROUTES`].
fn match_route_at(method: &str, path: &str) -> Option<(usize, HashMap<String, String>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    ROUTES.iter().enumerate().find_map(|(i, route)| {
        if route.method != method {
            return None;
        }
        match_path(route.path, &segments).map(|params| (i, params))
    })
}

/// The local-only route for a request, and its path parameters.
pub fn match_local_only(
    method: &str,
    path: &str,
) -> Option<(&'static LocalOnlyRoute, HashMap<String, String>)> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    LOCAL_ROUTES.iter().find_map(|route| {
        if route.method != method {
            return None;
        }
        match_path(route.path, &segments).map(|params| (route, params))
    })
}

/// The path parameters if `segments` fit `pattern` (`/sales/{saleId}`): the
/// same number of segments, literals equal, parameters not empty.
fn match_path(pattern: &str, segments: &[&str]) -> Option<HashMap<String, String>> {
    let pattern: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    if pattern.len() != segments.len() {
        return None;
    }
    let mut params = HashMap::new();
    for (want, got) in pattern.iter().zip(segments) {
        if let Some(name) = want.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
            if got.is_empty() {
                return None;
            }
            params.insert(name.to_owned(), percent_decode(got));
        } else if want != got {
            return None;
        }
    }
    Some(params)
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
pub async fn serve<S, Q, C>(
    listener: TcpListener,
    gateway: Arc<Gateway<S, Q, C>>,
    shutdown: impl std::future::Future<Output = ()>,
) where
    S: StockStore + 'static,
    Q: OrderQueue + 'static,
    C: SaleCatalog + 'static,
{
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((stream, peer)) = accepted else { continue };
                // Answers are small and whole: send them at once, not after
                // Nagle's wait for the client's ACK.
                let _ = stream.set_nodelay(true);
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

async fn handle<S, Q, C>(
    gateway: &Gateway<S, Q, C>,
    peer: SocketAddr,
    req: hyper::Request<Incoming>,
) -> HyperResponse
where
    S: StockStore,
    Q: OrderQueue,
    C: SaleCatalog,
{
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_GATEWAY_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return plain_error(413, "PAYLOAD_TOO_LARGE", "request body too large");
        }
    };
    let path = parts.uri.path().to_owned();
    let Some((index, params)) = match_route_at(parts.method.as_str(), &path) else {
        // The API's routes first: the purchase path pays for no page lookup.
        return match match_local_only(parts.method.as_str(), &path) {
            Some((local, params)) => to_hyper(pages::serve(
                local.serves,
                &params,
                &body,
                &gateway.tokens,
                &gateway.pages,
            )),
            None => to_hyper(seckill_shared::http::error(&ApiError::RouteNotFound)),
        };
    };
    let route = &ROUTES[index];
    if let Some(count) = gateway.served.get(index) {
        count.fetch_add(1, Ordering::Relaxed);
    }
    let claims = if route.authorized {
        let header = parts
            .headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        match bearer(header).and_then(|t| gateway.verifier.verify(t)) {
            Ok(claims) => Some(claims),
            Err(err) => {
                tracing::debug!(%err, "token refused");
                return to_hyper(seckill_shared::http::error(&ApiError::Unauthenticated));
            }
        }
    } else {
        None
    };
    // The typed payload 2.0 event, built directly: a JSON tree serialised
    // and parsed back per request cost a third of the gateway's CPU under
    // load. Requests with a query string take the JSON path, so the query
    // map is always the one `lambda_http` parses (the test below proves the
    // two paths build the same event).
    let typed = match event_v2(&parts, &body, peer, route, &params, claims.as_ref()) {
        Some(v2) => Ok(v2),
        None => ApiGatewayV2httpRequest::deserialize(&event_json(
            &parts,
            &body,
            peer,
            route,
            &params,
            claims.as_ref(),
        )),
    };
    let request = match typed {
        Ok(v2) => lambda_http::Request::from(LambdaRequest::ApiGatewayV2(v2)),
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
    let (headers, cookies) = gather_headers(parts);
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
    let (body_text, is_base64) = match body_text(body) {
        (Some(text), is_base64) => (serde_json::Value::String(text), is_base64),
        (None, is_base64) => (serde_json::Value::Null, is_base64),
    };
    let route_key = format!("{} {}", route.method, route.path);
    let now = clock::now_ms();
    let seq = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    let authorizer =
        claims.map(|claims| serde_json::json!({"jwt": {"claims": claims, "scopes": null}}));
    let source_ip = source_ip(&headers, peer);
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

/// The request's headers as API Gateway passes them (repeated names joined
/// with commas, non-text values dropped) and its cookies apart.
fn gather_headers(parts: &hyper::http::request::Parts) -> (HashMap<String, String>, Vec<String>) {
    let mut headers: HashMap<String, String> = HashMap::with_capacity(parts.headers.len());
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
    (headers, cookies)
}

/// The body as the event carries it: none when empty, text when UTF-8,
/// else base64 (and the flag that says so).
fn body_text(body: &Bytes) -> (Option<String>, bool) {
    match std::str::from_utf8(body) {
        _ if body.is_empty() => (None, false),
        Ok(text) => (Some(text.to_owned()), false),
        Err(_) => (
            Some(base64::engine::general_purpose::STANDARD.encode(body)),
            true,
        ),
    }
}

/// The first `X-Forwarded-For` address, else the peer's.
fn source_ip(headers: &HashMap<String, String>, peer: SocketAddr) -> String {
    headers
        .get("x-forwarded-for")
        .and_then(|v| v.split(',').next())
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| peer.ip().to_string())
}

/// The same event as [`event_json`], built as the typed struct `lambda_http`
/// turns into a request. `None` when the request has a query string: the
/// query map is then left to `lambda_http`'s own parser (the JSON path).
pub fn event_v2(
    parts: &hyper::http::request::Parts,
    body: &Bytes,
    peer: SocketAddr,
    route: &Route,
    params: &HashMap<String, String>,
    claims: Option<&HashMap<String, String>>,
) -> Option<ApiGatewayV2httpRequest> {
    if parts.uri.query().is_some_and(|q| !q.is_empty()) {
        return None;
    }
    let (headers, cookies) = gather_headers(parts);
    let mut header_map = hyper::HeaderMap::with_capacity(headers.len());
    for (name, value) in &headers {
        let name = hyper::header::HeaderName::from_bytes(name.as_bytes()).ok()?;
        header_map.insert(name, hyper::header::HeaderValue::from_str(value).ok()?);
    }
    let (body, is_base64) = body_text(body);
    let route_key = format!("{} {}", route.method, route.path);
    let now = clock::now_ms();
    let seq = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);

    // The event types are `#[non_exhaustive]`: filled field by field.
    let mut http = ApiGatewayV2httpRequestContextHttpDescription::default();
    http.method = parts.method.clone();
    http.path = Some(parts.uri.path().to_owned());
    http.protocol = Some("HTTP/1.1".into());
    http.source_ip = Some(source_ip(&headers, peer));
    http.user_agent = Some(headers.get("user-agent").cloned().unwrap_or_default());
    let mut context = ApiGatewayV2httpRequestContext::default();
    context.route_key = Some(route_key.clone());
    context.account_id = Some("000000000000".into());
    context.apiid = Some("local".into());
    context.domain_name = Some(
        headers
            .get("host")
            .cloned()
            .unwrap_or_else(|| "127.0.0.1".into()),
    );
    context.domain_prefix = Some("local".into());
    context.request_id = Some(format!("local-{now:x}-{seq:x}"));
    context.stage = Some("$default".into());
    context.time = Some(clock::rfc3339_ms(now));
    context.time_epoch = now;
    context.http = http;
    context.authorizer = claims.map(|claims| {
        let mut jwt = ApiGatewayRequestAuthorizerJwtDescription::default();
        jwt.claims = claims.clone();
        let mut authorizer = ApiGatewayRequestAuthorizer::default();
        authorizer.jwt = Some(jwt);
        authorizer
    });
    let mut event = ApiGatewayV2httpRequest::default();
    event.version = Some("2.0".into());
    event.route_key = Some(route_key);
    event.raw_path = Some(parts.uri.path().to_owned());
    event.raw_query_string = Some(String::new());
    event.cookies = (!cookies.is_empty()).then_some(cookies);
    event.headers = header_map;
    event.path_parameters = params.clone();
    event.request_context = context;
    event.body = body;
    event.is_base64_encoded = is_base64;
    Some(event)
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
    fn typed_event_equals_the_json_event() {
        let request = hyper::Request::builder()
            .method("POST")
            .uri("/sales/s1/purchase")
            .header("host", "127.0.0.1:3000")
            .header("user-agent", "t")
            .header("x-forwarded-for", "10.0.0.1, 10.0.0.2")
            .header("idempotency-key", "k1")
            .header("x-dup", "a")
            .header("x-dup", "b")
            .header("cookie", "a=1; b=2")
            .body(())
            .unwrap();
        let (parts, ()) = request.into_parts();
        let (route, params) = match_route("POST", "/sales/s1/purchase").unwrap();
        let claims = HashMap::from([("sub".to_owned(), "u1".to_owned())]);
        let peer: SocketAddr = "127.0.0.1:5555".parse().unwrap();
        for body in [
            Bytes::from_static(b"{\"quantity\": 1}"),
            Bytes::new(),
            Bytes::from_static(&[0xff, 0]),
        ] {
            for claims in [Some(&claims), None] {
                let typed = event_v2(&parts, &body, peer, route, &params, claims).unwrap();
                let json = event_json(&parts, &body, peer, route, &params, claims);
                let mut parsed = ApiGatewayV2httpRequest::deserialize(&json).unwrap();
                // Only the per-request id and clock differ.
                parsed.request_context.request_id = typed.request_context.request_id.clone();
                parsed.request_context.time = typed.request_context.time.clone();
                parsed.request_context.time_epoch = typed.request_context.time_epoch;
                assert_eq!(typed, parsed);
            }
        }
        let with_query = hyper::Request::builder()
            .uri("/sales/s1?a=1")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        assert!(event_v2(&with_query, &Bytes::new(), peer, route, &params, None).is_none());
    }

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

    #[test]
    fn local_only_routes_match_and_never_shadow_an_api_route() {
        let page = |method, path| match_local_only(method, path).map(|(r, p)| (r.serves, p));
        assert_eq!(page("GET", "/").unwrap().0, Page::Buyer);
        assert_eq!(page("GET", "/ops").unwrap().0, Page::Dashboard);
        assert_eq!(page("GET", "/config.js").unwrap().0, Page::Config);
        assert_eq!(page("POST", "/local/token").unwrap().0, Page::Token);
        let (serves, params) = page("GET", "/assets/app.css").unwrap();
        assert_eq!((serves, params["file"].as_str()), (Page::Asset, "app.css"));
        // An asset is one segment: nothing below /assets/ is reachable by
        // adding segments, and `..` is only a name the asset list lacks.
        assert!(page("GET", "/assets/a/b.css").is_none());
        assert!(page("GET", "/assets/").is_none());
        assert!(page("POST", "/").is_none());
        assert!(page("GET", "/local/token").is_none());
        assert!(page("GET", "/ops/").is_none());
        for local in LOCAL_ROUTES {
            let concrete = local.path.replace("{file}", "x");
            assert!(
                match_route(local.method, &concrete).is_none(),
                "{} {} is also an API route",
                local.method,
                local.path
            );
            assert!(!local.path.starts_with("/admin") && !local.path.starts_with("/sales"));
        }
        for route in ROUTES {
            let concrete = route.path.replace(['{', '}'], "");
            assert!(match_local_only(route.method, &concrete).is_none());
        }
    }
}
