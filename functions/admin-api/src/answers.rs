//! What the admin routes answer about a sale (its record: definition,
//! status and counters), the audit entry every admin action leaves, and the
//! one error a store that cannot be reached maps to. Both the sale routes
//! (`handler.rs`) and the console's (`console.rs`) answer with these.

use seckill_shared::app::operators;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::error::ApiError;
use seckill_shared::http::bodies::admin::{AuditEntry, SaleRecord};

pub(crate) async fn sale_record(
    jobs: &seckill_shared::wire::LiveJobs,
    sale_id: &SaleId,
) -> Result<SaleRecord, ApiError> {
    let (sale, counters) = operators::record(jobs, sale_id)
        .await
        .map_err(unavailable)?
        .ok_or(ApiError::SaleNotFound)?;
    Ok(SaleRecord::of(&sale, &counters, clock::now_ms()))
}

/// `value` as an audit entry keeps it.
pub(crate) fn kept(value: &impl serde::Serialize) -> Option<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|err| tracing::warn!(%err, "an audit entry's part does not serialise"))
        .ok()
}

/// Every admin action: who (the token's `sub`), what, when, before and
/// after. A structured log line (target `audit`), and an entry kept with the
/// sale (`GET /admin/sales/{saleId}/audit`). Keeping it is best effort: the
/// action is done, and the log line holds it either way.
pub(crate) async fn audit(
    jobs: &seckill_shared::wire::LiveJobs,
    actor: &seckill_shared::domain::UserId,
    sale_id: &SaleId,
    action: &str,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
    now: i64,
) {
    let entry = kept(&AuditEntry {
        at: clock::rfc3339_ms(now),
        actor: actor.as_str(),
        action,
        before,
        after,
    })
    .unwrap_or_default();
    // The actor is a `sub` as issued (spaces, `=` and quotes included): a
    // plain string field, so the text format quotes and escapes it and
    // JSON writes it as a string, and it cannot pass for another field.
    tracing::info!(target: "audit", %sale_id, actor = actor.as_str(), action, entry = %entry, "admin action");
    if let Err(err) = operators::keep_audit(jobs, sale_id, &entry).await {
        tracing::warn!(%sale_id, %err, "could not keep the audit entry with the sale");
    }
}

pub(crate) fn unavailable(err: impl std::fmt::Display) -> ApiError {
    tracing::error!(%err, "admin operation failed");
    ApiError::paused("temporarily unavailable; retry shortly")
}
