//! Lambda entry point: wire once, serve many.

use lambda_runtime::{Error, run, service_fn};
use seckill_shared::{config, jobs, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let config = release_unpaid::config(&config::process_env)?;
    let jobs = jobs::wire(&config).await?;
    let jobs = &jobs;
    run(service_fn(move |event| {
        release_unpaid::handler::handle(jobs, event)
    }))
    .await
}
