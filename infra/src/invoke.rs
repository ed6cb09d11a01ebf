//! One event through one function, as Lambda would run it: the function
//! crate's own configuration loader (`config`), its wiring and its handler.
//! `seckill-local invoke` is this without Docker; the consistency test
//! feeds `events/` and the events `sam local generate-event` makes through
//! the same path.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Context, Diagnostic, LambdaEvent};
use seckill_shared::config::{Config, ConfigError, Lookup};

/// A function of `template.yaml`, named by its binary (the same names its
/// metrics carry).
pub use seckill_shared::observe::metrics::Function;

/// A function crate's configuration loader: reads what that function reads.
pub type Loader = fn(Lookup<'_>) -> Result<Config, ConfigError>;

/// The event type a handler takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// API Gateway HTTP API payload 2.0, parsed by `lambda_http`.
    Http,
    /// `aws_lambda_events` `SqsEvent`.
    Sqs,
    /// Any JSON: the scheduled handlers do not read their event.
    Json,
}

/// What running a function takes besides its name: its configuration
/// loader and its event type.
pub trait Handler {
    /// The loader the function's `main.rs` calls.
    fn loader(self) -> Loader;
    fn event_kind(self) -> EventKind;
    /// Parses `raw` into the handler's event type, as [`invoke`] does.
    fn parse_event(self, raw: &str) -> Result<(), InvokeError>;
}

impl Handler for Function {
    fn loader(self) -> Loader {
        match self {
            Function::Purchase => purchase::config,
            Function::OrderWriter => order_writer::config,
            Function::OrdersApi => orders_api::config,
            Function::AdminApi => admin_api::config,
            Function::Prewarm => prewarm::config,
            Function::ReleaseUnpaid => release_unpaid::config,
            Function::Reconcile => reconcile::config,
        }
    }

    fn event_kind(self) -> EventKind {
        match self {
            Function::Purchase | Function::OrdersApi | Function::AdminApi => EventKind::Http,
            Function::OrderWriter => EventKind::Sqs,
            Function::Prewarm | Function::ReleaseUnpaid | Function::Reconcile => EventKind::Json,
        }
    }

    fn parse_event(self, raw: &str) -> Result<(), InvokeError> {
        match self.event_kind() {
            EventKind::Http => http_event(raw).map(drop),
            EventKind::Sqs => lambda_event::<SqsEvent>(raw, "an SQS event").map(drop),
            EventKind::Json => lambda_event::<serde_json::Value>(raw, "a JSON document").map(drop),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("wiring failed: {0}")]
    Wire(String),
    #[error("the event is not {expected}: {why}")]
    Event { expected: &'static str, why: String },
}

/// Runs `raw` through `function` with the configuration `env` gives it and
/// returns what the handler answered: `{statusCode, body}` for HTTP, the
/// handler's JSON result, or `{errorType, errorMessage}` as Lambda records
/// a handler error.
pub async fn invoke(
    function: Function,
    raw: &str,
    env: Lookup<'_>,
) -> Result<serde_json::Value, InvokeError> {
    let config = function.loader()(env)?;
    Ok(match function {
        Function::Purchase => {
            let service = purchase::wire(&config).await.map_err(wire)?;
            let Ok(response) = purchase::handler::handle(&service, http_event(raw)?).await;
            http_result(response)
        }
        Function::OrdersApi => {
            let queries = orders_api::wire(&config).await.map_err(wire)?;
            let Ok(response) = orders_api::handler::handle(&queries, http_event(raw)?).await;
            http_result(response)
        }
        Function::AdminApi => {
            let admin = admin_api::wire(&config).await.map_err(wire)?;
            let Ok(response) = admin_api::handler::handle(&admin, http_event(raw)?).await;
            http_result(response)
        }
        Function::OrderWriter => {
            let writer = order_writer::wire(&config).await.map_err(wire)?;
            let event = lambda_event(raw, "an SQS event")?;
            handler_result(order_writer::handler::handle(&writer, event).await)
        }
        Function::Prewarm => {
            let jobs = prewarm::wire(&config).await.map_err(wire)?;
            let event = lambda_event(raw, "a JSON document")?;
            handler_result(prewarm::handler::handle(&jobs, event).await)
        }
        Function::ReleaseUnpaid => {
            let jobs = release_unpaid::wire(&config).await.map_err(wire)?;
            let event = lambda_event(raw, "a JSON document")?;
            handler_result(release_unpaid::handler::handle(&jobs, event).await)
        }
        Function::Reconcile => {
            let reconciler = reconcile::wire(&config).await.map_err(wire)?;
            let event = lambda_event(raw, "a JSON document")?;
            handler_result(reconcile::handler::handle(&reconciler, event).await)
        }
    })
}

fn wire(err: impl std::fmt::Display) -> InvokeError {
    InvokeError::Wire(err.to_string())
}

fn http_event(raw: &str) -> Result<lambda_http::Request, InvokeError> {
    lambda_http::request::from_str(raw).map_err(|e| InvokeError::Event {
        expected: "an API Gateway HTTP API event",
        why: e.to_string(),
    })
}

fn lambda_event<T: serde::de::DeserializeOwned>(
    raw: &str,
    expected: &'static str,
) -> Result<LambdaEvent<T>, InvokeError> {
    let payload = serde_json::from_str(raw).map_err(|e| InvokeError::Event {
        expected,
        why: e.to_string(),
    })?;
    Ok(LambdaEvent::new(payload, Context::default()))
}

fn http_result(response: lambda_http::Response<lambda_http::Body>) -> serde_json::Value {
    let (parts, body) = response.into_parts();
    let body = match body {
        lambda_http::Body::Text(t) => t,
        lambda_http::Body::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => String::new(),
    };
    serde_json::json!({"statusCode": parts.status.as_u16(), "body": body})
}

fn handler_result<T: serde::Serialize, E: Into<Diagnostic>>(
    result: Result<T, E>,
) -> serde_json::Value {
    match result {
        Ok(value) => serde_json::to_value(value).unwrap_or_default(),
        Err(err) => {
            let diagnostic: Diagnostic = err.into();
            serde_json::json!({
                "errorType": diagnostic.error_type,
                "errorMessage": diagnostic.error_message,
            })
        }
    }
}
