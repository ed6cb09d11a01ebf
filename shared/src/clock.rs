//! Wall-clock helpers. The purchase decision itself uses the Redis clock
//! (`TIME` inside the script) so every function instance agrees on it; this
//! clock is for everything outside the script.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub fn now_ms() -> i64 {
    let now = OffsetDateTime::now_utc();
    i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-30T03:06:02.123Z`.
pub fn rfc3339_ms(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    let Ok(at) = OffsetDateTime::from_unix_timestamp_nanos(nanos) else {
        return String::from("invalid-time");
    };
    let at = at.replace_nanosecond((ms.rem_euclid(1000) as u32) * 1_000_000);
    let at = at.unwrap_or(OffsetDateTime::UNIX_EPOCH);
    at.format(&Rfc3339)
        .unwrap_or_else(|_| String::from("invalid-time"))
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
    }
}
