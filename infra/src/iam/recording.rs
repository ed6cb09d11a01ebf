//! moto's recording (JSON objects with `headers`, `body`, `body_encoded`)
//! read into the calls each function made, and each call into the
//! permissions AWS checks for it.

use super::{Call, IamError, Names, Permission, Resource, Service};
use base64::Engine;
use serde_json::Value;

/// The user-agent mark of a function's SDK clients (`seckill_shared::adapters::aws`).
const APP_PREFIX: &str = "app/seckill-";

/// The calls read from a recording, and how many records could not be read.
#[derive(Debug, Default)]
pub struct Recorded {
    pub calls: Vec<Call>,
    /// Records that were not JSON: moto's recorder writes a record and its
    /// newline in separate writes from concurrent threads, so under load two
    /// records can share a line (read apart here) or, for bodies larger than
    /// its write buffer, interleave (lost; counted so a run can say so).
    pub unreadable: usize,
}

/// Reads moto's recording (JSON objects with `headers`, `body`,
/// `body_encoded`, one a line) into the calls the functions made. Calls
/// without a function's mark (tools, tests) and unknown services are skipped.
pub fn calls(recording: &str, names: Names<'_>) -> Recorded {
    let mut out = Recorded::default();
    let mut at = 0;
    while at < recording.len() {
        // Records are read as a stream, so two on one line are two records;
        // an unreadable one is skipped to the end of its line.
        let mut stream = serde_json::Deserializer::from_str(&recording[at..]).into_iter::<Value>();
        match stream.next() {
            None => break,
            Some(Ok(entry)) => {
                at += stream.byte_offset();
                match call_of(&entry, names) {
                    Ok(Some(call)) => out.calls.push(call),
                    Ok(None) => {}
                    Err(_) => out.unreadable += 1,
                }
            }
            Some(Err(_)) => {
                out.unreadable += 1;
                at = recording[at..]
                    .find('\n')
                    .map_or(recording.len(), |n| at + n + 1);
            }
        }
    }
    out
}

/// One record as a function's call: `None` for a tool's or an unknown
/// service's, `Err` for a body that is not what the service takes.
fn call_of(entry: &Value, names: Names<'_>) -> Result<Option<Call>, IamError> {
    let bad = |why: String| IamError::Recording { why };
    let headers = &entry["headers"];
    let header = |name: &str| {
        headers.as_object().and_then(|h| {
            h.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.as_str())
        })
    };
    let agent = [header("x-amz-user-agent"), header("user-agent")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let Some(function) = agent
        .split_whitespace()
        .find_map(|part| part.strip_prefix(APP_PREFIX))
    else {
        return Ok(None);
    };
    let Some((service, operation)) = header("x-amz-target").and_then(|t| t.split_once('.')) else {
        return Ok(None);
    };
    let raw = entry["body"].as_str().unwrap_or("");
    let body = if entry["body_encoded"].as_bool() == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(raw)
            .map_err(|e| bad(format!("body: {e}")))?
    } else {
        raw.as_bytes().to_vec()
    };
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).map_err(|e| bad(format!("body: {e}")))?
    };
    let needs = match service {
        s if s.starts_with("DynamoDB_") => dynamodb_needs(operation, &body, names),
        "AmazonSQS" => sqs_needs(operation, &body, names),
        "secretsmanager" => secrets_needs(operation, &body, names),
        _ => return Ok(None),
    };
    Ok(Some(Call {
        function: function.to_owned(),
        operation: operation.to_owned(),
        needs,
    }))
}

fn named(service: Service, raw: &str, names: Names<'_>) -> Resource {
    match names(service, raw) {
        Some(id) => Resource::logical(&id),
        None => Resource::Other(raw.to_owned()),
    }
}

fn dynamodb_needs(operation: &str, body: &Value, names: Names<'_>) -> Vec<Permission> {
    let table = |raw: &Value| named(Service::DynamoDb, raw.as_str().unwrap_or("?"), names);
    let need = |action: &str, resource: Resource| Permission {
        action: format!("dynamodb:{action}"),
        resource,
    };
    match operation {
        // One permission per item, on that item's table: what IAM checks
        // for a transaction (there is no TransactWriteItems action).
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, inner) = item.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    _ => return None,
                };
                Some(need(action, table(&inner["TableName"])))
            })
            .collect(),
        "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| need("GetItem", table(&item["Get"]["TableName"])))
            .collect(),
        "BatchGetItem" | "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, _)| need(operation, table(&Value::String(name.clone()))))
            .collect(),
        _ => {
            let mut resource = table(&body["TableName"]);
            if let (Some(index), Resource::Logical { index: slot, .. }) =
                (body["IndexName"].as_str(), &mut resource)
            {
                *slot = Some(index.to_owned());
            }
            vec![need(operation, resource)]
        }
    }
}

fn sqs_needs(operation: &str, body: &Value, names: Names<'_>) -> Vec<Permission> {
    let action = match operation {
        "SendMessageBatch" => "SendMessage",
        "DeleteMessageBatch" => "DeleteMessage",
        "ChangeMessageVisibilityBatch" => "ChangeMessageVisibility",
        other => other,
    };
    let queue = body["QueueUrl"]
        .as_str()
        .and_then(|url| url.rsplit('/').next())
        .or_else(|| body["QueueName"].as_str())
        .unwrap_or("?");
    vec![Permission {
        action: format!("sqs:{action}"),
        resource: named(Service::Sqs, queue, names),
    }]
}

fn secrets_needs(operation: &str, body: &Value, names: Names<'_>) -> Vec<Permission> {
    vec![Permission {
        action: format!("secretsmanager:{operation}"),
        resource: named(
            Service::SecretsManager,
            body["SecretId"].as_str().unwrap_or("?"),
            names,
        ),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iam::stack_names;
    use serde_json::json;

    fn line(app: &str, target: &str, body: Value) -> String {
        let encoded = base64::engine::general_purpose::STANDARD.encode(body.to_string());
        json!({
            "headers": {"x-amz-user-agent": format!("aws-sdk-rust/1.3 ua/2.1 app/{app}"), "X-Amz-Target": target},
            "method": "POST", "url": "http://127.0.0.1:4566/", "body": encoded, "body_encoded": true,
        })
        .to_string()
    }

    #[test]
    fn a_transaction_needs_each_items_action_on_its_table() {
        let names = stack_names("t");
        let recording = [
            line(
                "seckill-order-writer",
                "DynamoDB_20120810.TransactWriteItems",
                json!({"TransactItems": [
                    {"Put": {"TableName": "t-orders"}},
                    {"Update": {"TableName": "t-sales"}},
                    {"ConditionCheck": {"TableName": "t-orders"}},
                ]}),
            ),
            line(
                "seckill-purchase",
                "AmazonSQS.SendMessageBatch",
                json!({"QueueUrl": "http://127.0.0.1:4566/000000000000/t"}),
            ),
            line(
                "seckill-orders-api",
                "DynamoDB_20120810.Query",
                json!({"TableName": "t-orders", "IndexName": "byBuyer"}),
            ),
            line(
                "seckill.tool",
                "DynamoDB_20120810.Scan",
                json!({"TableName": "t-sales"}),
            ),
        ]
        .join("\n");
        // Two records on one line, as concurrent writes leave them.
        let recording = recording.replacen('\n', "", 1);
        let read = calls(&recording, &names);
        assert_eq!(read.unreadable, 0);
        let calls = read.calls;
        assert_eq!(calls.len(), 3, "the tool's call is not a function's");
        let actions: Vec<String> = calls[0].needs.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            actions,
            [
                "dynamodb:PutItem on OrdersTable",
                "dynamodb:UpdateItem on SalesTable",
                "dynamodb:ConditionCheckItem on OrdersTable"
            ]
        );
        assert_eq!(
            calls[1].needs[0].to_string(),
            "sqs:SendMessage on OrdersQueue"
        );
        assert_eq!(
            calls[2].needs[0].to_string(),
            "dynamodb:Query on OrdersTable/index/byBuyer"
        );
    }
}
