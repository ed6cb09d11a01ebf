//! A schedule tick in, the reports out (each is also stored on its sale item
//! for `GET /admin/sales/{saleId}/report`).

use lambda_runtime::{Diagnostic, LambdaEvent};
use seckill_shared::app::jobs::JobError;
use seckill_shared::clock;
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::wire::LiveReconciler;

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ReconcileError(#[from] JobError);

/// The one place a job error becomes what Lambda records.
impl From<ReconcileError> for Diagnostic {
    fn from(err: ReconcileError) -> Self {
        Diagnostic {
            error_type: "ReconcileFailed".into(),
            error_message: err.to_string(),
        }
    }
}

pub async fn handle(
    reconciler: &LiveReconciler,
    event: LambdaEvent<serde_json::Value>,
) -> Result<serde_json::Value, ReconcileError> {
    // A sale is not started with less than a margin left: its read, the
    // confirming read and the repairs need that much.
    let deadline = clock::deadline_of(
        event.context.deadline,
        std::time::Duration::from_secs(5),
        std::time::Duration::from_secs(115),
    );
    let reports = reconciler.reconcile_all(clock::now_ms(), deadline).await;
    reconciler
        .metrics()
        .invocation_done(&Invocation::request(&event.context.request_id));
    let reports = reports?;
    let violations: usize = reports.iter().map(|r| r.violations.len()).sum();
    if violations > 0 {
        tracing::error!(violations, "reconcile found invariant violations");
    }
    Ok(serde_json::to_value(&reports).unwrap_or_default())
}
