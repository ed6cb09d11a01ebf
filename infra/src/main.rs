//! `seckill-local`: run the stack on loopback, mint tokens, invoke a handler
//! with an event file.
//!
//! ```text
//! seckill-local up
//! seckill-local token --user u1 [--admin] [--ttl SECONDS]
//! seckill-local invoke purchase --event events/purchase.json
//! seckill-local invoke order-writer --event events/order-writer.json
//! seckill-local run prewarm|release-unpaid|reconcile
//! ```

use seckill_infra::local::{self, LocalSettings};
use seckill_infra::token::TokenSettings;
use seckill_shared::config::Config;
use seckill_shared::metrics;
use std::process::ExitCode;

const USAGE: &str = "usage:
  seckill-local up
  seckill-local token --user ID [--admin] [--ttl SECONDS]
  seckill-local invoke purchase|orders-api|order-writer|admin-api|prewarm|release-unpaid|reconcile --event FILE
  seckill-local run prewarm|release-unpaid|reconcile";

/// The allocator the functions run with (see `functions/purchase`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    seckill_shared::telemetry::init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The functions' EMF lines on stdout, with the logs: `up` serves many
    // invocations at once and writes them aggregated every second; `invoke`
    // and `run` are one invocation each, written as Lambda writes them.
    let flush = match args.first().map(String::as_str) {
        Some("up") => metrics::Flush::Periodic,
        _ => metrics::Flush::EachInvocation,
    };
    metrics::install(metrics::Emitter::stdout(flush));
    let result = match args.first().map(String::as_str) {
        Some("up") => local::up(LocalSettings::from_env())
            .await
            .map_err(|e| e.to_string()),
        Some("token") => token(&args[1..]),
        Some("invoke") => invoke(&args[1..]).await,
        Some("run") => run(&args[1..]).await,
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("seckill-local: {message}");
            ExitCode::from(2)
        }
    }
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn token(args: &[String]) -> Result<(), String> {
    let user = flag(args, "--user").ok_or(USAGE)?;
    seckill_shared::domain::UserId::parse(user).map_err(|e| e.to_string())?;
    let ttl = match flag(args, "--ttl") {
        Some(raw) => raw.parse().map_err(|_| "--ttl takes whole seconds")?,
        None => 3_600,
    };
    let admin = args.iter().any(|a| a == "--admin");
    let token = TokenSettings::from_env()
        .mint(user, admin, ttl)
        .map_err(|e| e.to_string())?;
    println!("{token}");
    Ok(())
}

/// Feeds one event file to a handler, with the configuration of the
/// environment, and prints the response: `sam local invoke` without Docker.
async fn invoke(args: &[String]) -> Result<(), String> {
    let function = args.first().map(String::as_str).ok_or(USAGE)?;
    let path = flag(args, "--event").ok_or(USAGE)?;
    let raw = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let config = Config::from_env().map_err(|e| e.to_string())?;
    let printed = match function {
        "purchase" => {
            let service = purchase::wire(&config).await.map_err(|e| e.to_string())?;
            let request = http_event(&raw, path)?;
            let Ok(response) = purchase::handler::handle(&service, request).await;
            http_result(response)
        }
        "orders-api" => {
            let queries = orders_api::wire(&config).await.map_err(|e| e.to_string())?;
            let request = http_event(&raw, path)?;
            let Ok(response) = orders_api::handler::handle(&queries, request).await;
            http_result(response)
        }
        "order-writer" => {
            let writer = order_writer::wire(&config)
                .await
                .map_err(|e| e.to_string())?;
            let event = serde_json::from_str(&raw).map_err(|e| format!("{path}: {e}"))?;
            let event = lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default());
            match order_writer::handler::handle(&writer, event).await {
                Ok(response) => serde_json::to_value(response).map_err(|e| e.to_string())?,
                Err(err) => {
                    serde_json::json!({"errorType": "Error", "errorMessage": err.to_string()})
                }
            }
        }
        "admin-api" => {
            let admin = admin_api::wire(&config).await.map_err(|e| e.to_string())?;
            let request = http_event(&raw, path)?;
            let Ok(response) = admin_api::handler::handle(&admin, request).await;
            http_result(response)
        }
        "prewarm" | "release-unpaid" => {
            let event: serde_json::Value =
                serde_json::from_str(&raw).map_err(|e| format!("{path}: {e}"))?;
            let event = lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default());
            let result = if function == "prewarm" {
                let jobs = prewarm::wire(&config).await.map_err(|e| e.to_string())?;
                prewarm::handler::handle(&jobs, event)
                    .await
                    .map_err(|e| e.to_string())
            } else {
                let jobs = release_unpaid::wire(&config)
                    .await
                    .map_err(|e| e.to_string())?;
                release_unpaid::handler::handle(&jobs, event)
                    .await
                    .map_err(|e| e.to_string())
            };
            result.unwrap_or_else(|e| serde_json::json!({"errorType": "Error", "errorMessage": e}))
        }
        "reconcile" => {
            let reconciler = reconcile::wire(&config).await.map_err(|e| e.to_string())?;
            let event: serde_json::Value =
                serde_json::from_str(&raw).map_err(|e| format!("{path}: {e}"))?;
            let event = lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default());
            ::reconcile::handler::handle(&reconciler, event)
                .await
                .unwrap_or_else(
                    |e| serde_json::json!({"errorType": "Error", "errorMessage": e.to_string()}),
                )
        }
        other => {
            return Err(format!(
                "unknown function {other:?}; known: purchase, orders-api, order-writer, admin-api, prewarm, release-unpaid, reconcile"
            ));
        }
    };
    println!("{printed}");
    Ok(())
}

fn http_event(raw: &str, path: &str) -> Result<lambda_http::Request, String> {
    lambda_http::request::from_str(raw).map_err(|e| format!("{path}: {e}"))
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

/// Runs one scheduled job now against the local services, through its
/// function's own wiring and handler.
async fn run(args: &[String]) -> Result<(), String> {
    let name = args.first().map(String::as_str).ok_or(USAGE)?;
    let job = local::Job::parse(name).ok_or_else(|| format!("unknown job {name:?}\n{USAGE}"))?;
    let config = Config::from_env().map_err(|e| e.to_string())?;
    let scheduled = local::Scheduled::wire(&config)
        .await
        .map_err(|e| e.to_string())?;
    println!("{}", scheduled.invoke(job).await);
    Ok(())
}
