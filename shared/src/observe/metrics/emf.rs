//! The EMF line format: one flush's counters, latencies and purchase
//! outcomes as JSON documents, one per line, written straight into a buffer.

use super::{Function, Invocation, LUA_LATENCY, Pending};
use std::io::Write;

/// The EMF documents of one flush, one per line: the first carries the
/// function-level metrics and the first outcome; each further outcome gets
/// its own line, because a line holds one value per dimension.
///
/// Written straight into the buffer rather than through a `serde_json::Value`
/// tree: a purchase line is ~0.5 KiB and this runs once per invocation.
/// Strings go through serde_json's escaping; numbers are integers or
/// finite floats, whose `Display` is valid JSON.
pub(super) fn render(
    out: &mut Vec<u8>,
    function: Function,
    namespace: &str,
    pending: &Pending,
    invocation: Option<&Invocation<'_>>,
    timestamp_ms: i64,
) {
    let has_base = !pending.counters.is_empty() || !pending.latencies.is_empty();
    let mut outcomes: Vec<Option<(&str, u64)>> = pending
        .purchases
        .iter()
        .map(|&(o, n)| Some((o, n)))
        .collect();
    if outcomes.is_empty() {
        outcomes.push(None);
    }
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let base = i == 0 && has_base;
        if !base && outcome.is_none() {
            continue;
        }
        out.extend_from_slice(b"{\"_aws\":{\"Timestamp\":");
        number(out, timestamp_ms);
        out.extend_from_slice(b",\"CloudWatchMetrics\":[");
        if base {
            out.extend_from_slice(b"{\"Namespace\":");
            string(out, namespace);
            out.extend_from_slice(b",\"Dimensions\":[[\"Function\"]],\"Metrics\":[");
            let mut first = true;
            let mut metric = |out: &mut Vec<u8>, name: &str, unit: &str| {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"Name\":");
                string(out, name);
                out.extend_from_slice(b",\"Unit\":");
                string(out, unit);
                out.push(b'}');
            };
            for (counter, _) in &pending.counters {
                metric(out, counter.name(), "Count");
            }
            if !pending.latencies.is_empty() {
                metric(out, LUA_LATENCY, "Milliseconds");
            }
            out.extend_from_slice(b"]}");
        }
        if outcome.is_some() {
            if base {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"Namespace\":");
            string(out, namespace);
            out.extend_from_slice(
                b",\"Dimensions\":[[\"Function\"],[\"Function\",\"Outcome\"]],\"Metrics\":[{\"Name\":\"Purchases\",\"Unit\":\"Count\"}]}",
            );
        }
        out.extend_from_slice(b"]},\"Function\":");
        string(out, function.name());
        if let Some((outcome, n)) = outcome {
            out.extend_from_slice(b",\"Outcome\":");
            string(out, outcome);
            out.extend_from_slice(b",\"Purchases\":");
            number(out, n);
        }
        if base {
            for (counter, n) in &pending.counters {
                out.push(b',');
                string(out, counter.name());
                out.push(b':');
                number(out, n);
            }
            if !pending.latencies.is_empty() {
                out.extend_from_slice(b",\"LuaLatency\":[");
                for (j, ms) in pending.latencies.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    number(out, ms);
                }
                out.push(b']');
            }
        }
        if let Some(ids) = invocation {
            for (key, value) in [
                ("requestId", ids.request_id),
                ("saleId", ids.sale_id),
                ("orderId", ids.order_id),
            ] {
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    out.push(b',');
                    string(out, key);
                    out.push(b':');
                    string(out, value);
                }
            }
        }
        out.extend_from_slice(b"}\n");
    }
}

/// A JSON string, escaped.
fn string(out: &mut Vec<u8>, s: &str) {
    // Writing a `str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// An integer, or a finite float (latencies come from a `Duration`).
fn number(out: &mut Vec<u8>, n: impl std::fmt::Display) {
    let _ = write!(out, "{n}");
}
