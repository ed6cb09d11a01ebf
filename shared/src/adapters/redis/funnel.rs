//! The funnel: each sale's purchase answers per 10-second bucket since its
//! start, `sale:{S}:funnel` (bucket start in ms -> `{"OUTCOME": n}` as
//! JSON), next to the tally and written by the same flush
//! (`outcomes.lua`), so the dashboard's history survives a reload. At most
//! [`FUNNEL_BUCKETS`] buckets (the latest); it expires with the sale's keys.

use super::RedisStock;
use crate::domain::SaleId;
use crate::ports::{FunnelBucket, StoreError};
use std::collections::BTreeMap;

/// One bucket's width.
pub const FUNNEL_BUCKET_MS: i64 = 10_000;
/// Buckets kept: the last hour of a sale.
pub const FUNNEL_BUCKETS: usize = 360;

/// The funnel's key: on the sale's own tag, a sharded sale's directory.
pub(super) fn key(sale_id: &SaleId) -> String {
    format!("sale:{{{sale_id}}}:funnel")
}

/// The start of the bucket holding `at_ms`.
pub(super) fn bucket_of(at_ms: i64) -> i64 {
    at_ms - at_ms.rem_euclid(FUNNEL_BUCKET_MS)
}

impl RedisStock {
    /// The sale's funnel, oldest bucket first; empty when none was kept.
    pub async fn funnel(&self, sale_id: &SaleId) -> Result<Vec<FunnelBucket>, StoreError> {
        let key = key(sale_id);
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HGETALL")
                .arg(&key)
                .query_async::<BTreeMap<String, String>>(&mut conn)
                .await
        };
        let all = self.bounded(call).await?;
        let mut buckets = all
            .into_iter()
            .map(|(at, counts)| {
                let at = at
                    .parse::<i64>()
                    .map_err(|_| StoreError::Protocol(format!("funnel bucket {at:?}")))?;
                let counts = serde_json::from_str::<BTreeMap<String, u64>>(&counts)
                    .map_err(|_| StoreError::Protocol(format!("funnel counts {counts:?}")))?;
                Ok((at, counts))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        buckets.sort_by_key(|(at, _)| *at);
        Ok(buckets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_start_on_the_ten_seconds() {
        assert_eq!(bucket_of(1_764_460_009_999), 1_764_460_000_000);
        assert_eq!(bucket_of(1_764_460_010_000), 1_764_460_010_000);
        assert_eq!(bucket_of(0), 0);
    }
}
