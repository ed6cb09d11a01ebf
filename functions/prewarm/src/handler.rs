//! A schedule tick in, what prewarm did per sale out. The event's content is
//! not used: every tick looks at every sale.

use lambda_runtime::{Diagnostic, LambdaEvent};
use seckill_shared::app::jobs::JobError;
use seckill_shared::clock;
use seckill_shared::http::bodies::admin::PrewarmRun;
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::wire::LiveJobs;

#[derive(Debug, thiserror::Error)]
pub enum PrewarmError {
    #[error(transparent)]
    Job(#[from] JobError),
    #[error("the result does not serialise: {0}")]
    Result(#[from] serde_json::Error),
}

/// The one place a job error becomes what Lambda records.
impl From<PrewarmError> for Diagnostic {
    fn from(err: PrewarmError) -> Self {
        Diagnostic {
            error_type: "PrewarmFailed".into(),
            error_message: err.to_string(),
        }
    }
}

pub async fn handle(
    jobs: &LiveJobs,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, PrewarmError> {
    let done = jobs.prewarm_all(clock::now_ms()).await;
    jobs.metrics()
        .invocation_done(&Invocation::request(&event.context.request_id));
    let done = done?;
    Ok(serde_json::to_value(PrewarmRun::of(&done))?)
}
