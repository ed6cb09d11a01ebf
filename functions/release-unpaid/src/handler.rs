//! A schedule tick in, the release report out.

use lambda_runtime::{Diagnostic, LambdaEvent};
use seckill_shared::app::jobs::JobError;
use seckill_shared::clock;
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::wire::LiveJobs;
use std::time::{Duration, Instant};

/// Time kept back from the Lambda deadline to finish the order in hand.
const MARGIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ReleaseError(#[from] JobError);

/// The one place a job error becomes what Lambda records.
impl From<ReleaseError> for Diagnostic {
    fn from(err: ReleaseError) -> Self {
        Diagnostic {
            error_type: "ReleaseFailed".into(),
            error_message: err.to_string(),
        }
    }
}

pub async fn handle(
    jobs: &LiveJobs,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, ReleaseError> {
    let deadline = deadline_of(&event.context);
    let report = jobs.release_unpaid(clock::now_ms(), deadline).await;
    jobs.metrics()
        .invocation_done(&Invocation::request(&event.context.request_id));
    let report = report?;
    tracing::info!(?report, "unpaid release done");
    Ok(serde_json::to_value(&report).unwrap_or_default())
}

/// The invocation's deadline less a margin; a local run (no deadline) gets
/// a minute.
fn deadline_of(context: &lambda_runtime::Context) -> Instant {
    clock::deadline_of(context.deadline, MARGIN, Duration::from_secs(60))
}
