//! SQS as AWS documents it, in front of an emulator that is kinder.
//!
//! - **Counts that lag.** `ApproximateNumberOfMessages*` are eventually
//!   consistent: AWS says they may lag for about a minute after producers
//!   stop. A `GetQueueAttributes` that asks for them is answered from a
//!   snapshot of the queue taken at most [`SqsLimits::count_lag`] ago; only
//!   an older snapshot is refreshed from the emulator.
//! - **Duplicates.** A standard queue delivers at least once. Each message
//!   received is, at [`SqsLimits::duplicate_rate`], delivered a second time
//!   to a later `ReceiveMessage` of the same queue, with its own receipt
//!   handle (deleting or changing the copy's visibility is a success that
//!   touches nothing upstream).

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SqsLimits {
    pub count_lag: Duration,
    /// 0 to 1: the share of received messages delivered twice.
    pub duplicate_rate: f64,
    /// SQS served by the layer itself ([`super::sqs_server`]), not the
    /// emulator's (`STRICT_SQS_NATIVE`, on by default).
    pub native: bool,
}

impl Default for SqsLimits {
    fn default() -> Self {
        Self {
            count_lag: Duration::from_secs(DEFAULT_COUNT_LAG_SECS),
            duplicate_rate: DEFAULT_DUPLICATE_RATE,
            native: true,
        }
    }
}

/// "Tens of seconds": within the minute AWS documents, long enough that a
/// reader which trusts one zero is caught.
pub const DEFAULT_COUNT_LAG_SECS: u64 = 20;
/// One message in a hundred delivered twice.
pub const DEFAULT_DUPLICATE_RATE: f64 = 0.01;

/// Receipt handles of copies start with this.
const COPY_HANDLE: &str = "strict-copy-";

#[derive(Debug, Default)]
pub struct Queues {
    snapshots: Mutex<HashMap<String, (Instant, Value)>>,
    /// Copies waiting for the next receive, by queue URL.
    copies: Mutex<HashMap<String, Vec<Value>>>,
    seq: AtomicU64,
}

/// Whether an attribute request asks for a count.
pub fn asks_for_counts(body: &Value) -> bool {
    body["AttributeNames"].as_array().is_some_and(|names| {
        names.iter().any(|n| {
            n.as_str()
                .is_some_and(|n| n == "All" || n.starts_with("ApproximateNumberOfMessages"))
        })
    })
}

/// The cache key of an attribute request: its queue and names.
fn snapshot_key(body: &Value) -> String {
    format!("{}|{}", body["QueueUrl"], body["AttributeNames"])
}

impl Queues {
    /// The snapshot's answer to this request, if one younger than `lag` is kept.
    pub fn snapshot(&self, body: &Value, lag: Duration, now: Instant) -> Option<Value> {
        let snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
        snapshots
            .get(&snapshot_key(body))
            .filter(|(at, _)| now.saturating_duration_since(*at) < lag)
            .map(|(_, answer)| answer.clone())
    }

    pub fn keep_snapshot(&self, body: &Value, answer: Value, now: Instant) {
        let mut snapshots = self.snapshots.lock().unwrap_or_else(|p| p.into_inner());
        snapshots.insert(snapshot_key(body), (now, answer));
    }

    /// A `ReceiveMessage` answer with copies of earlier messages added (up
    /// to the request's maximum), and this answer's own messages kept for a
    /// later receive where `draw` (0 to 1, one per message) is under the rate.
    pub fn deliver(
        &self,
        request: &Value,
        mut answer: Value,
        rate: f64,
        mut draw: impl FnMut() -> f64,
    ) -> Value {
        let Some(url) = request["QueueUrl"].as_str() else {
            return answer;
        };
        let max = request["MaxNumberOfMessages"]
            .as_u64()
            .unwrap_or(1)
            .clamp(1, 10) as usize;
        let mut messages: Vec<Value> = answer["Messages"].as_array().cloned().unwrap_or_default();
        let fresh = messages.clone();
        {
            let mut copies = self.copies.lock().unwrap_or_else(|p| p.into_inner());
            let waiting = copies.entry(url.to_owned()).or_default();
            while messages.len() < max && !waiting.is_empty() {
                messages.push(waiting.remove(0));
            }
            for message in fresh {
                if draw() < rate {
                    let mut copy = message;
                    let n = self.seq.fetch_add(1, Ordering::Relaxed);
                    copy["ReceiptHandle"] = Value::String(format!("{COPY_HANDLE}{n}"));
                    waiting.push(copy);
                }
            }
        }
        if !messages.is_empty() {
            answer["Messages"] = Value::Array(messages);
        }
        answer
    }

    /// Copies are delivered yet to come.
    pub fn copies_waiting(&self) -> usize {
        let copies = self.copies.lock().unwrap_or_else(|p| p.into_inner());
        copies.values().map(Vec::len).sum()
    }
}

/// Whether a receipt handle is a copy's (answered here, never upstream).
pub fn is_copy(handle: &str) -> bool {
    handle.starts_with(COPY_HANDLE)
}

/// A batch request (`DeleteMessageBatch`, `ChangeMessageVisibilityBatch`)
/// split: the request without the copies' entries (`None` when none are
/// left), and the ids of the entries that were copies.
pub fn split_batch(body: &Value) -> (Option<Value>, Vec<String>) {
    let entries = body["Entries"].as_array().cloned().unwrap_or_default();
    let (copies, real): (Vec<Value>, Vec<Value>) = entries
        .into_iter()
        .partition(|e| e["ReceiptHandle"].as_str().is_some_and(is_copy));
    let ids = copies
        .iter()
        .filter_map(|e| e["Id"].as_str().map(str::to_owned))
        .collect();
    if real.is_empty() {
        return (None, ids);
    }
    let mut rest = body.clone();
    rest["Entries"] = Value::Array(real);
    (Some(rest), ids)
}

/// The upstream batch answer (or none) with the copies' entries added as
/// successes.
pub fn merge_batch(upstream: Option<Value>, copy_ids: &[String]) -> Value {
    let mut answer =
        upstream.unwrap_or_else(|| serde_json::json!({"Successful": [], "Failed": []}));
    if !answer["Successful"].is_array() {
        answer["Successful"] = Value::Array(Vec::new());
    }
    if let Some(ok) = answer["Successful"].as_array_mut() {
        ok.extend(copy_ids.iter().map(|id| serde_json::json!({"Id": id})));
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_are_answered_from_a_snapshot_until_it_is_older_than_the_lag() {
        let queues = Queues::default();
        let request = json!({"QueueUrl": "q", "AttributeNames": ["ApproximateNumberOfMessages"]});
        assert!(asks_for_counts(&request));
        assert!(!asks_for_counts(
            &json!({"QueueUrl": "q", "AttributeNames": ["QueueArn"]})
        ));
        let start = Instant::now();
        let lag = Duration::from_secs(20);
        assert_eq!(queues.snapshot(&request, lag, start), None);
        queues.keep_snapshot(
            &request,
            json!({"Attributes": {"ApproximateNumberOfMessages": "0"}}),
            start,
        );
        let later = start + Duration::from_secs(19);
        assert_eq!(
            queues.snapshot(&request, lag, later).unwrap()["Attributes"]["ApproximateNumberOfMessages"],
            "0"
        );
        assert_eq!(queues.snapshot(&request, lag, start + lag), None);
    }

    #[test]
    fn a_received_message_is_delivered_again_at_the_rate() {
        let queues = Queues::default();
        let request = json!({"QueueUrl": "q", "MaxNumberOfMessages": 10});
        let answer = json!({"Messages": [
            {"MessageId": "m1", "ReceiptHandle": "h1", "Body": "a"},
            {"MessageId": "m2", "ReceiptHandle": "h2", "Body": "b"},
        ]});
        let mut draws = [0.0, 0.9].into_iter();
        let first = queues.deliver(&request, answer, 0.5, || draws.next().unwrap_or(1.0));
        assert_eq!(first["Messages"].as_array().unwrap().len(), 2);
        assert_eq!(queues.copies_waiting(), 1);
        let again = queues.deliver(&request, json!({}), 0.5, || 1.0);
        let messages = again["Messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0]["MessageId"], "m1");
        assert!(is_copy(messages[0]["ReceiptHandle"].as_str().unwrap()));
        assert_eq!(queues.copies_waiting(), 0);
    }

    #[test]
    fn a_batch_deletion_of_copies_succeeds_without_the_emulator() {
        let body = json!({"QueueUrl": "q", "Entries": [
            {"Id": "a", "ReceiptHandle": "strict-copy-1"},
            {"Id": "b", "ReceiptHandle": "real"},
        ]});
        let (rest, ids) = split_batch(&body);
        assert_eq!(ids, ["a"]);
        assert_eq!(rest.unwrap()["Entries"].as_array().unwrap().len(), 1);
        let merged = merge_batch(Some(json!({"Successful": [{"Id": "b"}]})), &ids);
        assert_eq!(merged["Successful"].as_array().unwrap().len(), 2);
        let only_copies =
            json!({"QueueUrl": "q", "Entries": [{"Id": "a", "ReceiptHandle": "strict-copy-1"}]});
        assert!(split_batch(&only_copies).0.is_none());
    }
}
