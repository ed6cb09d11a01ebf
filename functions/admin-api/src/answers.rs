//! What the admin routes answer about a sale (its definition, status and
//! counters), the audit entry every admin action leaves, and the one error
//! a store that cannot be reached maps to. Both the sale routes
//! (`handler.rs`) and the console's (`console.rs`) answer with these.

use seckill_shared::app::operators;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::error::ApiError;

pub(crate) async fn sale_body(
    jobs: &seckill_shared::wire::LiveJobs,
    sale_id: &SaleId,
) -> Result<serde_json::Value, ApiError> {
    let (sale, counters) = operators::record(jobs, sale_id)
        .await
        .map_err(unavailable)?
        .ok_or(ApiError::SaleNotFound)?;
    Ok(record_body(&sale, &counters, clock::now_ms()))
}

/// A sale as the admin routes answer it: its definition, `saleId`,
/// `status` at `now` and the table's counters.
pub(crate) fn record_body(
    sale: &seckill_shared::domain::Sale,
    counters: &seckill_shared::domain::ledger::SaleCounters,
    now: i64,
) -> serde_json::Value {
    let mut body = definition(sale);
    body["saleId"] = serde_json::json!(sale.sale_id);
    body["status"] = serde_json::json!(status_of(sale, now));
    body["available"] = serde_json::json!(counters.available);
    body["sold"] = serde_json::json!(counters.sold);
    // The draw's seed is a secret until the window closes (whoever knew it
    // could pick user ids that draw first); before, its SHA-256 commits to
    // it, so anyone can check afterwards that the draw used the seed fixed
    // in advance.
    if let (Some(admission), Some(closes)) = (&sale.admission, sale.window_end_ms()) {
        body["drawSeedHash"] = serde_json::json!(admission.seed.commitment());
        if now >= closes {
            body["drawSeed"] = serde_json::json!(admission.seed.to_hex());
        }
    }
    body
}

/// The operator's view of where a sale stands.
fn status_of(sale: &seckill_shared::domain::Sale, now: i64) -> &'static str {
    use seckill_shared::domain::SalePhase;
    match sale.phase_at(now) {
        SalePhase::Ended => "ENDED",
        _ if sale.paused => "PAUSED",
        SalePhase::NotStarted => "NOT_STARTED",
        SalePhase::Live => "LIVE",
    }
}

/// A sale's definition as the audit trail keeps it.
pub(crate) fn definition(sale: &seckill_shared::domain::Sale) -> serde_json::Value {
    serde_json::json!({
        "name": sale.name,
        "totalStock": sale.total_stock,
        "startAt": clock::rfc3339_ms(sale.start_ms),
        "endAt": clock::rfc3339_ms(sale.end_ms),
        "perUserLimit": sale.per_user_limit,
        "paymentWindowSeconds": sale.payment_window_seconds,
        "shards": sale.shards,
        "gate": sale.gate,
        "powBits": sale.pow_bits,
        "paused": sale.paused,
        "price": seckill_shared::domain::money::Money::body_of(sale.price.as_ref()),
        "admission": sale.admission.as_ref().map(|a| serde_json::json!({"window": a.window_secs})),
    })
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
    let entry = serde_json::json!({
        "at": clock::rfc3339_ms(now),
        "actor": actor,
        "action": action,
        "before": before,
        "after": after,
    });
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
