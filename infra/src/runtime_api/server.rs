//! The Runtime API's routes: the long-polled `/next`, the function's
//! `/response` and `/error` for an invocation, `/init/error`, and the
//! answers in the API's own shape.

use super::{ERROR_TYPE, INIT_ERROR, INVOCATION, InitError, MAX_PAYLOAD, NEXT, Outcome, Shared};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;

pub(super) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(&shared, req).await) }
            });
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%err, "runtime API connection ended with an error");
            }
        });
    }
}

type Response = hyper::Response<Full<Bytes>>;

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut response = hyper::Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The Runtime API's error shape.
fn api_error(status: StatusCode, error_type: &str, message: &str) -> Response {
    let body = serde_json::json!({ "errorMessage": message, "errorType": error_type });
    reply(status, body.to_string())
}

fn accepted() -> Response {
    reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
}

async fn route(shared: &Shared, req: hyper::Request<Incoming>) -> Response {
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, NEXT) => next(shared).await,
        (&Method::POST, INIT_ERROR) => {
            let error_type = header(&req, ERROR_TYPE).unwrap_or_default();
            match read_body(req).await {
                Ok(body) => {
                    let _ = shared.init_errors.send(InitError {
                        error_type,
                        body,
                        at: Instant::now(),
                    });
                    accepted()
                }
                Err(response) => response,
            }
        }
        (&Method::POST, p) if p.starts_with(INVOCATION) => {
            let rest = &p[INVOCATION.len()..];
            let (id, error) = match rest.rsplit_once('/') {
                Some((id, "response")) => (id.to_owned(), false),
                Some((id, "error")) => (id.to_owned(), true),
                _ => return api_error(StatusCode::NOT_FOUND, "NotFound", "no such route"),
            };
            // lambda_runtime sends the type only on errors; "" if a runtime omits it.
            let error_type = error.then(|| header(&req, ERROR_TYPE).unwrap_or_default());
            let body = match read_body(req).await {
                Ok(body) => body,
                Err(response) => return response,
            };
            let answered_at = Instant::now();
            let Some(pending) = shared.pending().remove(&id) else {
                return api_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidRequestID",
                    "unknown or already answered request id",
                );
            };
            let _ = pending.tx.send(Outcome {
                request_id: id,
                error_type,
                body,
                delivered_at: pending.delivered_at,
                answered_at,
            });
            accepted()
        }
        _ => api_error(StatusCode::NOT_FOUND, "NotFound", "no such route"),
    }
}

/// Long-poll: waits for a queued event, or for the server to stop.
async fn next(shared: &Shared) -> Response {
    let arrived = Instant::now();
    let _ = shared.first_poll.set(arrived);
    let mut shutdown = shared.shutdown.clone();
    let mut queue = tokio::select! {
        queue = shared.queue.lock() => queue,
        _ = shutdown.wait_for(|stop| *stop) => return stopping(),
    };
    let event = tokio::select! {
        event = queue.recv() => event,
        _ = shutdown.wait_for(|stop| *stop) => None,
    };
    drop(queue);
    let Some(event) = event else {
        return stopping();
    };
    let now = Instant::now();
    if let Some(pending) = shared.pending().get_mut(&event.request_id) {
        pending.delivered_at = Some(now);
    }
    let deadline_ms = epoch_nanos() / 1_000_000 + shared.timeout.as_millis();
    let mut response = reply(StatusCode::OK, event.payload);
    let headers = response.headers_mut();
    let values = [
        ("lambda-runtime-aws-request-id", event.request_id.clone()),
        ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            shared.function_arn.clone(),
        ),
        ("lambda-runtime-trace-id", trace_id()),
    ];
    for (name, value) in values {
        // Every value is ASCII we built; a failure would be a bug here, and
        // the runtime would then report the missing header itself.
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

fn stopping() -> Response {
    api_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "ServiceStopping",
        "runtime API is shutting down",
    )
}

fn header(req: &hyper::Request<Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn read_body(req: hyper::Request<Incoming>) -> Result<Bytes, Response> {
    match Limited::new(req.into_body(), MAX_PAYLOAD).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(err) => Err(api_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            &err.to_string(),
        )),
    }
}

pub(super) fn epoch_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// An X-Ray header of the shape Lambda sends (not sampled: nothing collects it).
fn trace_id() -> String {
    let nanos = epoch_nanos();
    format!(
        "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
        nanos / 1_000_000_000,
        nanos & 0xffff_ffff_ffff_ffff_ffff_ffff,
        nanos & 0xffff_ffff_ffff_ffff
    )
}
