//! Lambda entry point: wire once, serve many.

use lambda_http::{Error, run, service_fn};
use seckill_shared::config;
use seckill_shared::observe::{metrics, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    // One EMF line per invocation on stdout: CloudWatch Logs makes metrics of it.
    metrics::install(metrics::Emitter::stdout(metrics::Flush::EachInvocation));
    let config = orders_api::config(&config::process_env)?;
    let queries = orders_api::wire(&config).await?;
    let queries = &queries;
    run(service_fn(move |req| {
        orders_api::handler::handle(queries, req)
    }))
    .await
}
