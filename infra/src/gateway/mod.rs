//! The local API Gateway: an HTTP API on loopback that does what AWS wires
//! in front of the functions. It matches routes, checks the JWT like the JWT
//! authorizer, builds a real-shaped payload-2.0 event (path parameters,
//! string claims, base64 for binary bodies) and hands it to the same handler
//! code Lambda runs. It also serves the local stack's own routes
//! ([`LOCAL_ROUTES`]: the pages and the local sign-in, see
//! [`crate::pages`]), which no function serves and `template.yaml` lacks,
//! and the API's OpenAPI description ([`OPENAPI_ROUTE`]).
//!
//! # Layout
//!
//! - [`routes`]: the route tables ([`ROUTES`], [`LOCAL_ROUTES`]) and the
//!   matching of a request to a route and its path parameters.
//! - [`event`]: the payload 2.0 event of a request, typed and as JSON.
//! - here: the [`Gateway`] and its server: body limit, API Gateway's account
//!   throttle, authorizer, dispatch under each function's Lambda limits
//!   ([`crate::lambda_limits`]), answered as API Gateway answers them.

mod event;
mod routes;

pub use event::{event_json, event_v2};
pub use routes::{
    LOCAL_ROUTES, LocalOnlyRoute, ROUTES, Route, Target, match_local_only, match_route,
};

use crate::lambda_limits::{ApiThrottle, Function, LambdaLimits, LimitSettings};
use crate::pages::{self, PageSettings};
use crate::token::{TokenSettings, Verifier, bearer};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use lambda_http::Body;
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_http::request::LambdaRequest;
use routes::match_route_at;
use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;
use seckill_shared::adapters::redis::RedisStock;
use seckill_shared::adapters::sqs::SqsQueue;
use seckill_shared::app::catalog_cache::CachedCatalog;
use seckill_shared::app::purchase::PurchaseService;
use seckill_shared::error::ApiError;
use seckill_shared::ports::{DrawStore, OrderQueue, SaleCatalog, StockStore};
use serde::Deserialize;
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
    /// Each function's `Timeout` and concurrency, as Lambda enforces them.
    limits: LambdaLimits,
    /// API Gateway's account throttle (`None`: off).
    api_throttle: Option<ApiThrottle>,
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

    /// The same gateway invoking its functions under `limits`.
    pub fn with_limits(self, limits: LambdaLimits) -> Self {
        Self { limits, ..self }
    }

    /// The same gateway behind this account throttle (`None`: none).
    pub fn with_api_throttle(self, api_throttle: Option<ApiThrottle>) -> Self {
        Self {
            api_throttle,
            ..self
        }
    }

    /// The limits its functions are invoked under.
    pub fn limits(&self) -> &LambdaLimits {
        &self.limits
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
            // The defaults of the local stack; `local::prepare` reads the
            // environment's.
            limits: LambdaLimits::default(),
            api_throttle: ApiThrottle::new(&LimitSettings::default()),
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
            limits: self.limits,
            api_throttle: self.api_throttle,
        }
    }
}
/// Serves until `shutdown` resolves.
pub async fn serve<S, Q, C>(
    listener: TcpListener,
    gateway: Arc<Gateway<S, Q, C>>,
    shutdown: impl std::future::Future<Output = ()>,
) where
    S: StockStore + DrawStore + 'static,
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

/// The API's OpenAPI 3.1 description ([`crate::openapi::document`]),
/// served by the gateway itself and public, like `GET /health`.
pub const OPENAPI_ROUTE: (&str, &str) = ("GET", "/openapi.json");

/// [`OPENAPI_ROUTE`]'s answer, written once.
fn openapi_response() -> HyperResponse {
    static DOCUMENT: std::sync::LazyLock<Bytes> =
        std::sync::LazyLock::new(|| Bytes::from(crate::openapi::document_json()));
    let mut response = hyper::Response::new(Full::new(DOCUMENT.clone()));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

async fn handle<S, Q, C>(
    gateway: &Gateway<S, Q, C>,
    peer: SocketAddr,
    req: hyper::Request<Incoming>,
) -> HyperResponse
where
    S: StockStore + DrawStore,
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
        if (parts.method.as_str(), path.as_str()) == OPENAPI_ROUTE {
            return openapi_response();
        }
        return match match_local_only(parts.method.as_str(), &path) {
            Some((local, params)) => to_hyper(pages::serve(
                local.serves,
                &params,
                &body,
                &gateway.tokens,
                &gateway.pages,
            )),
            None if !gateway.take_api_token() => too_many_requests(),
            None => to_hyper(seckill_shared::http::error(&ApiError::RouteNotFound)),
        };
    };
    // The account throttle comes before the authorizer and the function, as
    // in API Gateway: a throttled request reaches neither. The local-only
    // routes above are not API Gateway's (the pages are files on AWS).
    if !gateway.take_api_token() {
        return too_many_requests();
    }
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
    let function = match route.target {
        Target::Purchase => Function::Purchase,
        Target::OrdersApi => Function::OrdersApi,
        Target::AdminApi => Function::AdminApi,
    };
    let invocation = gateway.limits.function(function).invoke(async {
        match route.target {
            Target::Purchase => purchase::handler::handle(&gateway.purchase, request).await,
            Target::OrdersApi => orders_api::handler::handle(&gateway.orders, request).await,
            Target::AdminApi => admin_api::handler::handle(&gateway.admin, request).await,
        }
    });
    match invocation.await {
        Ok(Ok(response)) => to_hyper(response),
        Ok(Err(never)) => match never {},
        Err(err) => {
            tracing::warn!(%err, route = %route.path, "invocation failed; API Gateway answers 500");
            lambda_failed()
        }
    }
}

impl<S, Q, C> Gateway<S, Q, C> {
    /// True when the account throttle lets one more request through.
    fn take_api_token(&self) -> bool {
        self.api_throttle.as_ref().is_none_or(ApiThrottle::try_take)
    }
}

/// API Gateway's own JSON answer: `{"message": ...}`, no `code`.
fn gateway_answer(status: u16, message: &str) -> HyperResponse {
    let body = serde_json::json!({ "message": message }).to_string();
    let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// What an HTTP API answers past the account throttle ("Throttling requests
/// to your HTTP API": `429 Too Many Requests`).
fn too_many_requests() -> HyperResponse {
    gateway_answer(429, "Too Many Requests")
}

/// What an HTTP API answers for a Lambda invocation that failed: a function
/// that timed out (a function error) or that Lambda throttled (an
/// invocation error). API Gateway treats both as internal errors ("Handling
/// Lambda errors with an API Gateway API"); an HTTP API's body is
/// `{"message":"Internal Server Error"}` ("Troubleshooting issues with HTTP
/// API Lambda integrations").
fn lambda_failed() -> HyperResponse {
    gateway_answer(500, "Internal Server Error")
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
