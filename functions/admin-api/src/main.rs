//! Lambda entry point: wire once, serve many.

use lambda_http::{Error, run, service_fn};
use seckill_shared::config;
use seckill_shared::observe::{metrics, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    // One EMF line per invocation on stdout: CloudWatch Logs makes metrics of it.
    metrics::install(metrics::Emitter::stdout(metrics::Flush::EachInvocation));
    let config = admin_api::config(&config::process_env)?;
    let admin = admin_api::wire(&config).await?;
    let admin = &admin;
    run(service_fn(move |req| {
        admin_api::handler::handle(admin, req)
    }))
    .await
}
