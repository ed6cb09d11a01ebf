//! The funnel: each sale's purchase answers per 10-second bucket since its
//! start, `sale:{S}:funnel` (bucket start in ms -> `{"OUTCOME": n}` as
//! JSON), next to the tally and written by the same flush
//! (`outcomes.lua`), so the dashboard's history survives a reload. At most
//! [`FUNNEL_BUCKETS`] buckets (the latest); it expires with the sale's keys.

use crate::domain::SaleId;

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
