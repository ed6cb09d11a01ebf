//! Lambda entry point: wire once, serve many.

use lambda_runtime::{Error, run, service_fn};
use seckill_shared::{config, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init();
    let config = ::reconcile::config(&config::process_env)?;
    let reconciler = seckill_shared::reconcile::wire(&config).await?;
    let reconciler = &reconciler;
    run(service_fn(move |event| {
        ::reconcile::handler::handle(reconciler, event)
    }))
    .await
}
