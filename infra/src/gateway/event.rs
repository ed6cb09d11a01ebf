//! The payload format 2.0 event API Gateway would send for a request:
//! typed ([`event_v2`], the fast path) and as JSON ([`event_json`], for
//! requests with a query string), the same event either way.

use super::Route;
use super::routes::percent_decode;
use base64::Engine;
use hyper::body::Bytes;
use lambda_http::aws_lambda_events::apigw::{
    ApiGatewayRequestAuthorizer, ApiGatewayRequestAuthorizerJwtDescription,
    ApiGatewayV2httpRequest, ApiGatewayV2httpRequestContext,
    ApiGatewayV2httpRequestContextHttpDescription,
};
use seckill_shared::clock;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::match_route;
    use serde::Deserialize;

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
}
