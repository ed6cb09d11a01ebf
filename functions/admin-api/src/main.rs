//! Lambda entry point: wire once, serve many.

use lambda_http::{Error, run, service_fn};
use seckill_shared::{config, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let config = admin_api::config(&config::process_env)?;
    let admin = admin_api::wire(&config).await?;
    let admin = &admin;
    run(service_fn(move |req| {
        admin_api::handler::handle(admin, req)
    }))
    .await
}
