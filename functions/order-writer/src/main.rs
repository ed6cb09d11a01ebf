//! Lambda entry point: wire once, serve many.

use lambda_runtime::{Error, run, service_fn};
use seckill_shared::{config::Config, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let config = Config::from_env()?;
    let writer = order_writer::wire(&config).await?;
    let writer = &writer;
    run(service_fn(move |event| {
        order_writer::handler::handle(writer, event)
    }))
    .await
}
