//! Lambda entry point: wire once, serve many.

use lambda_http::{Error, run, service_fn};
use seckill_shared::{config::Config, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let config = Config::from_env()?;
    let service = purchase::wire(&config).await?;
    let service = &service;
    run(service_fn(move |req| {
        purchase::handler::handle(service, req)
    }))
    .await
}
