//! What SQS's JSON protocol carries, read and written: its errors, the
//! request's parameters checked as SQS checks them, and a received
//! message as `ReceiveMessage` answers it.

use super::Message;
use md5::{Digest, Md5};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// An error as SQS answers it: the status, the JSON `__type` (after
/// `com.amazonaws.sqs#`), and the query-compatible code SQS also sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    pub kind: &'static str,
    pub query_code: &'static str,
    pub message: String,
}

impl Fault {
    pub(super) fn new(
        kind: &'static str,
        query_code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status: 400,
            kind,
            query_code,
            message: message.into(),
        }
    }

    pub(super) fn no_queue(url: &str) -> Self {
        Self::new(
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            format!("The specified queue does not exist: {url}"),
        )
    }

    pub(super) fn invalid(message: impl Into<String>) -> Self {
        Self::new(
            "InvalidParameterValueException",
            "InvalidParameterValue",
            message,
        )
    }

    pub(super) fn missing(name: &str) -> Self {
        Self::new(
            "MissingRequiredParameterException",
            "MissingParameter",
            format!("The request must contain the parameter {name}."),
        )
    }

    /// The JSON body of the answer.
    pub fn body(&self) -> Value {
        json!({"__type": format!("com.amazonaws.sqs#{}", self.kind), "message": self.message})
    }
}

pub(super) fn md5_hex(text: &str) -> String {
    let digest = Md5::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The queue's name in a queue URL (its last path segment).
pub(super) fn name_of(url: &str) -> &str {
    url.trim_end_matches('/').rsplit('/').next().unwrap_or(url)
}

pub(super) fn string<'a>(body: &'a Value, name: &str) -> Result<&'a str, Fault> {
    body[name].as_str().ok_or_else(|| Fault::missing(name))
}

/// A whole number parameter, given as a number or a string, within bounds.
pub(super) fn number(
    body: &Value,
    name: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, Fault> {
    let value = match &body[name] {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    match value {
        Some(v) if range.contains(&v) => Ok(Some(v)),
        _ => Err(Fault::invalid(format!(
            "Value {} for parameter {name} is invalid. Reason: must be between {} and {}.",
            body[name],
            range.start(),
            range.end()
        ))),
    }
}

/// A received message as `ReceiveMessage` answers it, with the system
/// attributes asked for.
pub(super) fn delivery(m: &Message, handle: &str, wanted: &[String]) -> Value {
    let all = wanted.iter().any(|w| w == "All");
    let mut attributes = serde_json::Map::new();
    let values = [
        ("ApproximateReceiveCount", m.receive_count.to_string()),
        ("SentTimestamp", m.sent_ms.to_string()),
        (
            "ApproximateFirstReceiveTimestamp",
            m.first_receive_ms.unwrap_or(m.sent_ms).to_string(),
        ),
        ("SenderId", m.sender.clone()),
    ];
    for (name, value) in values {
        if all || wanted.iter().any(|w| w == name) {
            attributes.insert(name.into(), Value::String(value));
        }
    }
    let mut out = json!({
        "MessageId": m.id,
        "ReceiptHandle": handle,
        "MD5OfBody": m.md5,
        "Body": m.body,
    });
    if !attributes.is_empty() {
        out["Attributes"] = Value::Object(attributes);
    }
    out
}

/// The attributes a `CreateQueue` or `SetQueueAttributes` sets, checked
/// where the code depends on them.
pub(super) fn attributes_of(body: &Value) -> Result<BTreeMap<String, String>, Fault> {
    let mut out = BTreeMap::new();
    if let Some(map) = body["Attributes"].as_object() {
        for (name, value) in map {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            match name.as_str() {
                "VisibilityTimeout" if value.parse::<u64>().map_or(true, |v| v > 43_200) => {
                    return Err(Fault::invalid(format!(
                        "Invalid value for the parameter VisibilityTimeout: {value}"
                    )));
                }
                "RedrivePolicy" if serde_json::from_str::<Value>(&value).is_err() => {
                    return Err(Fault::invalid(
                        "Invalid value for the parameter RedrivePolicy.",
                    ));
                }
                _ => {}
            }
            out.insert(name.clone(), value);
        }
    }
    Ok(out)
}

/// The entries of a batch: 1 to 10, with distinct ids.
pub(super) fn batch_entries(body: &Value) -> Result<&Vec<Value>, Fault> {
    let entries = body["Entries"]
        .as_array()
        .filter(|e| !e.is_empty())
        .ok_or_else(|| {
            Fault::new(
                "EmptyBatchRequest",
                "AWS.SimpleQueueService.EmptyBatchRequest",
                "There should be at least one entry in the request.",
            )
        })?;
    if entries.len() > 10 {
        return Err(Fault::new(
            "TooManyEntriesInBatchRequest",
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            format!(
                "Maximum number of entries per request are 10. You have sent {}.",
                entries.len()
            ),
        ));
    }
    let mut ids: Vec<&str> = entries.iter().filter_map(|e| e["Id"].as_str()).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != n || n != entries.len() {
        return Err(Fault::new(
            "BatchEntryIdsNotDistinct",
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            "Two or more batch entries in the request have the same Id.",
        ));
    }
    Ok(entries)
}
