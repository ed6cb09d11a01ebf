//! Lambda entry point: wire once, serve many.

use lambda_http::{Error, run, service_fn};
use seckill_shared::config;
use seckill_shared::observe::{metrics, telemetry};

/// mimalloc: the purchase path allocates per request (the event, the
/// response), and glibc's malloc/free were a large share of its CPU in a
/// profile; `make bench`'s handler row, against the Redis ceiling, shows
/// what the allocator is worth.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    // One EMF line per invocation on stdout: CloudWatch Logs makes metrics of it.
    metrics::install(metrics::Emitter::stdout(metrics::Flush::EachInvocation));
    let config = purchase::config(&config::process_env)?;
    let service = purchase::wire(&config).await?;
    let service = &service;
    run(service_fn(move |req| {
        purchase::handler::handle(service, req)
    }))
    .await
}
