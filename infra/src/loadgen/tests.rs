use super::*;

#[test]
fn heads_parse_only_when_complete() {
    let full = b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nx: y\r\n\r\n{}";
    assert!(parse_head(&full[..20]).unwrap().is_none());
    assert_eq!(parse_head(full).unwrap(), Some((202, full.len() - 2, 2)));
    assert!(parse_head(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
}

#[test]
fn plan_has_every_buyer_once_plus_retries_after_their_original() {
    let plan = plan(1_000, 100);
    assert_eq!(plan.len(), 1_100);
    let firsts: BTreeSet<u32> = plan.iter().filter(|p| !p.retry).map(|p| p.user).collect();
    assert_eq!(firsts.len(), 1_000);
    let mut seen = BTreeSet::new();
    for p in &plan {
        assert!(!p.retry || seen.contains(&p.user), "retry before original");
        seen.insert(p.user);
    }
}

#[test]
fn percentiles_are_nearest_rank() {
    let report = LoadReport {
        wall: Duration::ZERO,
        latencies_us: (1..=1000).collect(),
        statuses: BTreeMap::new(),
        accepted: Vec::new(),
    };
    assert_eq!(report.percentile_us(0.5), Some(500));
    assert_eq!(report.percentile_us(0.99), Some(990));
    assert_eq!(report.percentile_us(0.999), Some(999));
}
