//! `seckill-local`: run the stack on loopback, mint tokens, invoke a handler
//! with an event file.
//!
//! ```text
//! seckill-local up
//! seckill-local token --user u1 [--admin] [--ttl SECONDS]
//! seckill-local invoke purchase --event events/purchase.json
//! seckill-local invoke order-writer --event events/order-writer.json
//! seckill-local run prewarm|release-unpaid|reconcile
//! seckill-local backfill-order-buckets --orders-table NAME
//! ```

use seckill_infra::invoke::{self, Function};
use seckill_infra::local::{self, LocalSettings};
use seckill_infra::token::TokenSettings;
use seckill_shared::config;
use seckill_shared::observe::metrics;
use std::process::ExitCode;

const USAGE: &str = "usage:
  seckill-local up
  seckill-local token --user ID [--admin] [--ttl SECONDS]
  seckill-local invoke purchase|orders-api|order-writer|admin-api|prewarm|release-unpaid|reconcile --event FILE
  seckill-local run prewarm|release-unpaid|reconcile
  seckill-local backfill-order-buckets --orders-table NAME";

/// The allocator the functions run with (see `functions/purchase`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    seckill_shared::observe::telemetry::init();
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
        Some("backfill-order-buckets") => seckill_infra::backfill::run(&args[1..])
            .await
            .map(|report| println!("{report}")),
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

/// Feeds one event file to a handler, with the configuration that
/// function reads from the environment, and prints the response: `sam local
/// invoke` without Docker.
async fn invoke(args: &[String]) -> Result<(), String> {
    let name = args.first().map(String::as_str).ok_or(USAGE)?;
    let function = Function::parse(name).ok_or_else(|| {
        format!(
            "unknown function {name:?}; known: {}",
            Function::ALL.map(Function::name).join(", ")
        )
    })?;
    let path = flag(args, "--event").ok_or(USAGE)?;
    let raw = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    // The process's environment, with the local gate secret's ARN for a
    // function that reads it (unless GATE_SECRET_ARN names another).
    let gate =
        local::invoke_gate_secret(function, &config::process_env, &LocalSettings::from_env())
            .await
            .map_err(|e| format!("{name}: {e}"))?;
    let env = |var: &str| match var {
        "GATE_SECRET_ARN" => gate.clone(),
        _ => config::process_env(var),
    };
    let printed = invoke::invoke(function, &raw, &env)
        .await
        .map_err(|e| match e {
            invoke::InvokeError::Event { .. } => format!("{path}: {e}"),
            _ => format!("{name}: {e}"),
        })?;
    println!("{printed}");
    Ok(())
}

/// Runs one scheduled job now against the local services, through its
/// function's own wiring and handler.
async fn run(args: &[String]) -> Result<(), String> {
    let name = args.first().map(String::as_str).ok_or(USAGE)?;
    let job = local::Job::parse(name).ok_or_else(|| format!("unknown job {name:?}\n{USAGE}"))?;
    // Every job's settings: the three jobs run in this one process.
    let config = config::Config::from_lookup(&config::process_env).map_err(|e| e.to_string())?;
    let scheduled = local::Scheduled::wire(&config)
        .await
        .map_err(|e| e.to_string())?;
    println!("{}", scheduled.invoke(job).await);
    Ok(())
}
