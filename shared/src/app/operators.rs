//! An operator's commands on one sale, and what they read back of it
//! (`admin-api` translates them):
//!
//! - [`record`]: the sale with its counters, as the admin routes answer it.
//! - [`define`]: a sale created, or its definition changed under the
//!   domain's edit rule (`PUT /admin/sales/{saleId}`); the caller then
//!   prewarms it so Redis follows at once.
//! - [`set_paused`]: a pause or a resume, the table first (every job loads
//!   from it, so the command survives whatever happens to Redis), then
//!   every key group Redis holds, so the next purchase obeys it.
//! - [`keep_audit`], [`audit`], [`last_report`]: the sale's history, the
//!   trail of every admin action and the last reconcile report.
//!
//! Written against the ports ([`SaleEditor`], [`AuditTrail`],
//! [`StockAdmin`]): the catalog is reached through these and nothing else.

use crate::app::jobs::{JobError, Jobs};
use crate::domain::ledger::SaleCounters;
use crate::domain::{Sale, SaleId, SalePhase};
use crate::ports::{
    AuditPage, AuditRange, AuditTrail, OrderLedger, QueueInspector, SaleEditor, StockAdmin, Upsert,
};

/// A sale with its counters, read consistently; `None` when there is none.
pub async fn record<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale_id: &SaleId,
) -> Result<Option<(Sale, SaleCounters)>, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor,
    O: OrderLedger,
{
    Ok(jobs.catalog().get_record(sale_id).await?)
}

/// Creates `sale`, or changes its definition as the edit rule allows: what
/// was done, and the sale as it was before (for the audit trail).
pub async fn define<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale: &Sale,
    now_ms: i64,
) -> Result<(Upsert, Option<Sale>), JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor,
    O: OrderLedger,
{
    Ok(jobs.catalog().upsert_sale(sale, now_ms).await?)
}

/// What a pause or a resume did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PauseOutcome {
    /// Kept in the table, then applied to `redis_groups` key groups (0:
    /// Redis does not hold the sale; its next load reads the table).
    Done {
        before: Box<Sale>,
        redis_groups: u32,
    },
    NotFound,
    /// An ended sale is neither paused nor resumed.
    Ended,
}

/// Pauses (`pause`) or resumes a sale: the `sales` table first, then Redis.
pub async fn set_paused<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale_id: &SaleId,
    pause: bool,
    now_ms: i64,
) -> Result<PauseOutcome, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor,
    O: OrderLedger,
{
    let Some((sale, _)) = jobs.catalog().get_record(sale_id).await? else {
        return Ok(PauseOutcome::NotFound);
    };
    if sale.phase_at(now_ms) == SalePhase::Ended {
        return Ok(PauseOutcome::Ended);
    }
    let Some(before) = jobs.catalog().set_paused(sale_id, pause).await? else {
        return Ok(PauseOutcome::NotFound);
    };
    let after = Sale {
        paused: pause,
        ..before.clone()
    };
    let redis_groups = jobs.apply_status(&after).await?;
    Ok(PauseOutcome::Done {
        before: Box::new(before),
        redis_groups,
    })
}

/// Keeps one entry of the sale's audit trail.
pub async fn keep_audit<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale_id: &SaleId,
    entry: &serde_json::Value,
) -> Result<(), JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor + AuditTrail,
    O: OrderLedger,
{
    Ok(jobs.catalog().append_audit(sale_id, entry).await?)
}

/// A page of the sale's audit trail; `None` when there is no such sale.
pub async fn audit<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale_id: &SaleId,
    range: AuditRange,
) -> Result<Option<AuditPage>, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor + AuditTrail,
    O: OrderLedger,
{
    Ok(jobs.catalog().audit(sale_id, range).await?)
}

/// The sale's last reconcile report (JSON), if any.
pub async fn last_report<Q, S, C, O>(
    jobs: &Jobs<Q, S, C, O>,
    sale_id: &SaleId,
) -> Result<Option<String>, JobError>
where
    Q: QueueInspector,
    S: StockAdmin,
    C: SaleEditor + AuditTrail,
    O: OrderLedger,
{
    Ok(jobs.catalog().last_report(sale_id).await?)
}
