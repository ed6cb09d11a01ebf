//! Lambda entry point: wire once, serve many.

use lambda_runtime::{Error, run, service_fn};
use seckill_shared::config;
use seckill_shared::observe::{metrics, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    // One EMF line per invocation on stdout: CloudWatch Logs makes metrics of it.
    metrics::install(metrics::Emitter::stdout(metrics::Flush::EachInvocation));
    let config = ::reconcile::config(&config::process_env)?;
    let reconciler = ::reconcile::wire(&config).await?;
    let reconciler = &reconciler;
    run(service_fn(move |event| {
        ::reconcile::handler::handle(reconciler, event)
    }))
    .await
}
