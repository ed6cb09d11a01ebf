//! HTTP helpers shared by the `lambda_http` functions: the caller's identity
//! from the API Gateway JWT authorizer, the request body, and JSON responses.

pub mod bodies;

use crate::domain::UserId;
use crate::error::ApiError;
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};

/// Bodies above this are refused before parsing; no route needs more.
pub const MAX_BODY_BYTES: usize = 4 * 1024;

/// The admin scope of `docs/api.md` (claim `scope`, space separated).
pub const ADMIN_SCOPE: &str = "seckill/admin";

/// Who is calling, as API Gateway's JWT authorizer vouched for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: UserId,
    pub scopes: Vec<String>,
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.scopes.iter().any(|s| s == ADMIN_SCOPE)
    }
}

/// The claims API Gateway vouched for. Its JWT authorizer puts them in
/// `requestContext.authorizer.jwt`; a Lambda authorizer's context lands in
/// `requestContext.authorizer.lambda`, so one that hands on the same claims
/// as its context's `jwt` is read there too (`sam local start-api` runs such
/// a stand-in, `seckill-local jwt-authorizer`: its gateway runs no JWT
/// authorizer). API Gateway writes both; a request cannot.
enum Claims<'a> {
    Jwt(&'a lambda_http::aws_lambda_events::apigw::ApiGatewayRequestAuthorizerJwtDescription),
    Lambda(&'a serde_json::Value),
}

impl<'a> Claims<'a> {
    fn of(req: &'a Request) -> Option<Claims<'a>> {
        let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
            return None;
        };
        let authorizer = ctx.authorizer.as_ref()?;
        match &authorizer.jwt {
            Some(jwt) => Some(Claims::Jwt(jwt)),
            None => authorizer
                .fields
                .get("jwt")
                .filter(|jwt| jwt["claims"].is_object())
                .map(Claims::Lambda),
        }
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        match self {
            Claims::Jwt(jwt) => jwt.claims.get(name).map(String::as_str),
            Claims::Lambda(jwt) => jwt["claims"][name].as_str(),
        }
    }

    /// The authorizer's own scope list (beside the `scope` claim).
    fn scopes(&self) -> Vec<String> {
        match self {
            Claims::Jwt(jwt) => jwt.scopes.clone().unwrap_or_default(),
            Claims::Lambda(jwt) => jwt["scopes"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Only the caller's id (the purchase needs no scopes): no allocation for
/// them on the hot path.
pub fn caller_id(req: &Request) -> Result<UserId, ApiError> {
    let sub = Claims::of(req)
        .and_then(|claims| claims.get("sub"))
        .ok_or(ApiError::Unauthenticated)?;
    user_id(sub)
}

/// The `sub` as a user id: any the identity provider may issue (see
/// [`UserId`]); one that cannot be is a `401` that says why.
fn user_id(sub: &str) -> Result<UserId, ApiError> {
    UserId::parse(sub).map_err(|e| ApiError::UnusableIdentity(e.0))
}

/// The caller from the authorizer's claims (see [`Claims`]). Never from the
/// body or the query string.
pub fn caller(req: &Request) -> Result<Caller, ApiError> {
    let claims = Claims::of(req).ok_or(ApiError::Unauthenticated)?;
    let sub = claims.get("sub").ok_or(ApiError::Unauthenticated)?;
    let user_id = user_id(sub)?;
    let mut scopes: Vec<String> = claims
        .get("scope")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    scopes.extend(claims.scopes());
    Ok(Caller { user_id, scopes })
}

/// The header the API's CloudFront distribution adds to every request it
/// sends to the API, holding the edge secret (`EDGE_SECRET_ARN`): a request
/// that carries it came through the edge, and its viewer header can be
/// believed.
pub const EDGE_SECRET_HEADER: &str = "x-seckill-edge";

/// The header the distribution's viewer-request function sets to the
/// viewer's address (`event.viewer.ip`), replacing whatever the viewer sent.
pub const VIEWER_IP_HEADER: &str = "x-seckill-viewer-ip";

/// The caller's address: behind the API's CloudFront distribution (the
/// request carries `edge_secret` in [`EDGE_SECRET_HEADER`]) the viewer's,
/// from [`VIEWER_IP_HEADER`], since API Gateway then sees an edge server;
/// otherwise the address API Gateway saw (`requestContext.http.sourceIp`).
/// A viewer header without the secret is ignored: anyone may send one
/// straight to the API, whose own view of them is then the true one. Only
/// what looks like an IPv4 or IPv6 address is taken; anything else is
/// ignored rather than put into a Redis field.
pub fn source_ip(req: &Request, edge_secret: Option<&str>) -> Option<String> {
    let through_edge = edge_secret.is_some_and(|secret| {
        req.headers()
            .get(EDGE_SECRET_HEADER)
            .is_some_and(|sent| same_secret(sent.as_bytes(), secret.as_bytes()))
    });
    let ip = if through_edge {
        req.headers().get(VIEWER_IP_HEADER)?.to_str().ok()?
    } else {
        let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
            return None;
        };
        ctx.http.source_ip.as_deref()?
    };
    let plausible = (2..=45).contains(&ip.len())
        && ip
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b':');
    plausible.then(|| ip.to_owned())
}

/// Equal bytes, compared in a time that does not depend on where they
/// first differ (the edge secret is a credential).
fn same_secret(sent: &[u8], secret: &[u8]) -> bool {
    sent.len() == secret.len()
        && sent
            .iter()
            .zip(secret)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// The body as bytes, refusing oversized ones. API Gateway may base64-encode
/// a body; `lambda_http` has already decoded it into `Body::Binary`.
pub fn body_bytes(req: &Request) -> Result<&[u8], ApiError> {
    let bytes: &[u8] = match req.body() {
        Body::Empty => &[],
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        _ => &[],
    };
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::InvalidRequest(format!(
            "body is larger than {MAX_BODY_BYTES} bytes"
        )));
    }
    Ok(bytes)
}

/// A header's value as text, if present and printable.
pub fn header<'a>(req: &'a Request, name: &str) -> Result<Option<&'a str>, ApiError> {
    match req.headers().get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| ApiError::InvalidRequest(format!("header {name} is not text"))),
    }
}

/// The gate pass in `X-Sale-Token` (a purchase's, a waitlist join's), if
/// sent; a longer one than any pass is refused before it is verified.
pub fn sale_token(req: &Request) -> Result<Option<String>, ApiError> {
    header(req, "x-sale-token")?
        .map(|t| {
            if t.len() <= 1024 {
                Ok(t.to_owned())
            } else {
                Err(ApiError::InvalidRequest("X-Sale-Token is too long".into()))
            }
        })
        .transpose()
}

/// API Gateway's id of the request (`requestContext.requestId`, also its
/// `apigw-requestid` response header), for logs and metrics properties;
/// anything that does not look like one is left out.
pub fn request_id(req: &Request) -> Option<&str> {
    let Some(RequestContext::ApiGatewayV2(ctx)) = req.request_context_ref() else {
        return None;
    };
    ctx.request_id.as_deref().filter(|id| {
        (1..=128).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_=+/.".contains(&b))
    })
}

/// A path parameter, or an empty string (which every id parser refuses).
pub fn path_param(req: &Request, name: &str) -> String {
    req.path_parameters_ref()
        .and_then(|params| params.first(name))
        .map(str::to_owned)
        .unwrap_or_default()
}

/// A JSON response with the given status, from one of [`bodies`]' types.
/// The body goes through a JSON tree, so its keys come out in the same
/// (sorted) order as [`json`]'s.
pub fn body<T: serde::Serialize>(status: u16, body: &T) -> Response<Body> {
    match serde_json::to_value(body) {
        Ok(value) => json(status, &value),
        Err(err) => {
            tracing::error!(%err, "a response body does not serialise");
            error(&ApiError::Internal)
        }
    }
}

/// A JSON response with the given status.
pub fn json(status: u16, body: &serde_json::Value) -> Response<Body> {
    text(status, body.to_string())
}

/// How long a cache (a CDN, the page) may serve the public sale view: the
/// contract lets `remaining` lag by a second, and one second of caching
/// turns any number of page polls per edge into one request a second.
pub const SALE_VIEW_MAX_AGE_SECS: u32 = 1;

/// A `200` JSON response any cache may keep for `max_age_secs`.
pub fn cacheable_json(max_age_secs: u32, body: &serde_json::Value) -> Response<Body> {
    let mut response = json(200, body);
    if let Ok(value) =
        lambda_http::http::HeaderValue::from_str(&format!("public, max-age={max_age_secs}"))
    {
        response
            .headers_mut()
            .insert(lambda_http::http::header::CACHE_CONTROL, value);
    }
    response
}

/// A response with a JSON body already written.
fn text(status: u16, body: String) -> Response<Body> {
    let mut response = Response::new(Body::Text(body));
    *response.status_mut() = lambda_http::http::StatusCode::from_u16(status).unwrap_or_default();
    response.headers_mut().insert(
        lambda_http::http::header::CONTENT_TYPE,
        lambda_http::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The one place an [`ApiError`] becomes a response.
pub fn error(err: &ApiError) -> Response<Body> {
    let mut response = text(err.status(), bodies::ErrorBody::text(err));
    if let Some(secs) = err.retry_after_secs()
        && let Ok(value) = lambda_http::http::HeaderValue::from_str(&secs.to_string())
    {
        response
            .headers_mut()
            .insert(lambda_http::http::header::RETRY_AFTER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(authorizer: serde_json::Value) -> Request {
        let event = json!({
            "version": "2.0",
            "routeKey": "GET /orders/{orderId}",
            "rawPath": "/orders/o1",
            "rawQueryString": "",
            "headers": {},
            "requestContext": {
                "accountId": "1", "apiId": "a", "domainName": "d", "domainPrefix": "d",
                "http": {"method": "GET", "path": "/orders/o1", "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "t"},
                "requestId": "r", "routeKey": "GET /orders/{orderId}", "stage": "$default",
                "time": "03/Dec/2026:19:19:18 +0000", "timeEpoch": 1,
                "authorizer": authorizer,
            },
            "isBase64Encoded": false,
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    fn request_with_headers(headers: serde_json::Value) -> Request {
        let event = json!({
            "version": "2.0",
            "routeKey": "POST /sales/{saleId}/purchase",
            "rawPath": "/sales/s1/purchase",
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {
                "accountId": "1", "apiId": "a", "domainName": "d", "domainPrefix": "d",
                "http": {"method": "POST", "path": "/sales/s1/purchase", "protocol": "HTTP/1.1",
                         "sourceIp": "130.176.1.2", "userAgent": "t"},
                "requestId": "r", "routeKey": "POST /sales/{saleId}/purchase", "stage": "$default",
                "time": "03/Dec/2026:19:19:18 +0000", "timeEpoch": 1,
            },
            "isBase64Encoded": false,
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn behind_the_edge_the_viewer_is_the_caller() {
        let req = request_with_headers(
            json!({EDGE_SECRET_HEADER: SECRET, VIEWER_IP_HEADER: "203.0.113.7"}),
        );
        assert_eq!(
            source_ip(&req, Some(SECRET)).as_deref(),
            Some("203.0.113.7")
        );
        let v6 = request_with_headers(
            json!({EDGE_SECRET_HEADER: SECRET, VIEWER_IP_HEADER: "2001:db8::7"}),
        );
        assert_eq!(source_ip(&v6, Some(SECRET)).as_deref(), Some("2001:db8::7"));
    }

    #[test]
    fn a_viewer_header_without_the_edge_secret_is_ignored() {
        // Sent straight to the API: API Gateway's own view of the caller.
        for headers in [
            json!({VIEWER_IP_HEADER: "203.0.113.7"}),
            json!({EDGE_SECRET_HEADER: "guess", VIEWER_IP_HEADER: "203.0.113.7"}),
            json!({EDGE_SECRET_HEADER: &SECRET[1..], VIEWER_IP_HEADER: "203.0.113.7"}),
        ] {
            let req = request_with_headers(headers.clone());
            assert_eq!(
                source_ip(&req, Some(SECRET)).as_deref(),
                Some("130.176.1.2"),
                "{headers}"
            );
        }
        // No edge configured (the local stack, or ApiEdge=off): the header
        // means nothing, whatever it holds.
        let req = request_with_headers(
            json!({EDGE_SECRET_HEADER: SECRET, VIEWER_IP_HEADER: "203.0.113.7"}),
        );
        assert_eq!(source_ip(&req, None).as_deref(), Some("130.176.1.2"));
    }

    #[test]
    fn an_implausible_viewer_address_is_no_address() {
        let req = request_with_headers(
            json!({EDGE_SECRET_HEADER: SECRET, VIEWER_IP_HEADER: "a b; DROP"}),
        );
        assert_eq!(source_ip(&req, Some(SECRET)), None);
        let missing = request_with_headers(json!({EDGE_SECRET_HEADER: SECRET}));
        assert_eq!(source_ip(&missing, Some(SECRET)), None);
    }

    #[test]
    fn the_jwt_authorizers_claims_name_the_caller() {
        let req = request(
            json!({"jwt": {"claims": {"sub": "u1", "scope": "openid seckill/admin"}, "scopes": null}}),
        );
        let caller = caller(&req).unwrap();
        assert_eq!(caller.user_id.as_str(), "u1");
        assert!(caller.is_admin());
        assert_eq!(caller_id(&req).unwrap().as_str(), "u1");
    }

    #[test]
    fn a_lambda_authorizers_context_with_the_same_claims_names_the_caller() {
        let req = request(
            json!({"lambda": {"jwt": {"claims": {"sub": "u2", "scope": "openid"}, "scopes": ["seckill/admin"]}, "principalId": "u2"}}),
        );
        let caller = caller(&req).unwrap();
        assert_eq!(caller.user_id.as_str(), "u2");
        assert!(caller.is_admin(), "the authorizer's own scopes count");
        assert_eq!(caller_id(&req).unwrap().as_str(), "u2");
    }

    #[test]
    fn no_claims_or_a_context_without_them_is_unauthenticated() {
        for authorizer in [
            json!({}),
            json!({"lambda": {"principalId": "u3"}}),
            json!({"lambda": {"jwt": "u3"}}),
            json!({"lambda": {"jwt": {"claims": {"scope": "openid"}}}}),
        ] {
            let req = request(authorizer.clone());
            assert!(
                matches!(caller(&req), Err(ApiError::Unauthenticated)),
                "{authorizer}"
            );
            assert!(
                matches!(caller_id(&req), Err(ApiError::Unauthenticated)),
                "{authorizer}"
            );
        }
    }
}
