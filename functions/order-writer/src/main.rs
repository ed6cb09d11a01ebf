//! Lambda entry point: wire once, serve many.

use lambda_runtime::{Error, run, service_fn};
use seckill_shared::config;
use seckill_shared::observe::{metrics, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    // One EMF line per invocation on stdout: CloudWatch Logs makes metrics of it.
    metrics::install(metrics::Emitter::stdout(metrics::Flush::EachInvocation));
    let config = order_writer::config(&config::process_env)?;
    let writer = order_writer::wire(&config).await?;
    let writer = &writer;
    run(service_fn(move |event| {
        order_writer::handler::handle(writer, event)
    }))
    .await
}
