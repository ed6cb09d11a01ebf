//! Wall-clock helpers. The purchase decision itself uses the Redis clock
//! (`TIME` inside the script) so every function instance agrees on it; this
//! clock is for everything outside the script.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn now_ms() -> i64 {
    #[cfg(test)]
    if let Some(virtual_ms) = crate::sim::clock::now_ms() {
        return virtual_ms;
    }
    let now = OffsetDateTime::now_utc();
    i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// RFC 3339 in UTC with exactly three fraction digits, e.g.
/// `2026-11-30T03:06:02.123Z`. Fixed width on purpose: stored times are
/// compared as strings in DynamoDB conditions and index ranges, and
/// `...02Z` would sort after `...02.5Z`.
pub fn rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let Ok(at) = OffsetDateTime::from_unix_timestamp(secs) else {
        return String::from("invalid-time");
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        ms.rem_euclid(1000)
    )
}

/// Parses an RFC 3339 time (any offset) into Unix milliseconds.
pub fn parse_rfc3339_ms(raw: &str) -> Option<i64> {
    let at = OffsetDateTime::parse(raw, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A Lambda invocation's deadline (`deadline_ms`, epoch ms, as its context
/// gives it) as an `Instant`, less `margin`; a context without one (a
/// local run, 0) gets `local` from now.
pub fn deadline_of(
    deadline_ms: u64,
    margin: std::time::Duration,
    local: std::time::Duration,
) -> std::time::Instant {
    let now = std::time::Instant::now();
    if deadline_ms == 0 {
        return now + local;
    }
    let wall_now = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let left = std::time::Duration::from_millis(deadline_ms.saturating_sub(wall_now));
    now + left.saturating_sub(margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses() {
        let s = rfc3339_ms(1_764_471_962_123);
        assert_eq!(s, "2025-11-30T03:06:02.123Z");
        assert_eq!(parse_rfc3339_ms(&s), Some(1_764_471_962_123));
        assert_eq!(
            parse_rfc3339_ms("2025-11-30T11:06:02.123+08:00"),
            Some(1_764_471_962_123)
        );
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
        assert_eq!(rfc3339_ms(1_764_471_962_000), "2025-11-30T03:06:02.000Z");
        assert!(rfc3339_ms(1_764_471_962_000) < rfc3339_ms(1_764_471_962_500));
    }

    #[test]
    fn a_deadline_is_the_contexts_less_the_margin_and_local_runs_get_their_own() {
        use std::time::{Duration, Instant};
        let before = Instant::now();
        let local = deadline_of(0, Duration::from_secs(5), Duration::from_secs(60));
        assert!(local >= before + Duration::from_secs(60));
        let in_a_minute = u64::try_from(now_ms() + 60_000).unwrap();
        let lambda = deadline_of(in_a_minute, Duration::from_secs(5), Duration::ZERO);
        assert!(lambda <= Instant::now() + Duration::from_secs(55));
        assert!(lambda >= before + Duration::from_secs(50));
        // Past already: now, not before it.
        let past = deadline_of(1, Duration::from_secs(5), Duration::ZERO);
        assert!(past >= before);
    }
}
