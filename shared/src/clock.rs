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
}
