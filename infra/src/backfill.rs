//! `seckill-local backfill-order-buckets --orders-table NAME`: gives the
//! orders written before the sale buckets existed their `saleBucket` (and,
//! while pending, `pendingBucket`), so the sharded indexes hold every order
//! ([`seckill_shared::adapters::dynamo::order_index::backfill_buckets`]). It talks to whatever
//! the AWS environment names: a real account with its credentials, or the
//! emulator when `AWS_ENDPOINT_URL` is set.

use seckill_shared::adapters::aws::{self, Caller};
use seckill_shared::adapters::dynamo::order_index;
use std::time::Duration;

pub const USAGE: &str = "seckill-local backfill-order-buckets --orders-table NAME";

/// Runs the backfill the arguments name (those after the command) and
/// returns its report as one JSON line.
pub async fn run(args: &[String]) -> Result<String, String> {
    match args {
        [flag, table] if flag == "--orders-table" => backfill(table).await,
        _ => Err(format!("usage: {USAGE}")),
    }
}

/// Backfills the orders table `table` and returns the report as one JSON
/// line.
pub async fn backfill(table: &str) -> Result<String, String> {
    if table.trim().is_empty() {
        return Err(format!("usage: {USAGE}"));
    }
    let sdk = aws::sdk_config(Caller::Tool, Duration::from_secs(20)).await;
    let report = order_index::backfill_buckets(&aws::dynamodb(&sdk), table)
        .await
        .map_err(|e| format!("{table}: {e}"))?;
    Ok(serde_json::json!({
        "ordersTable": table,
        "orders": report.orders,
        "updated": report.updated,
        "leftPendingIndex": report.left_pending_index,
        "skipped": report.skipped,
    })
    .to_string())
}
