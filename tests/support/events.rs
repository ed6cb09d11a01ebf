//! What the handlers are sent and what they answer: real-shaped purchase
//! and SQS events, order message bodies, the order-writer invoked as
//! Lambda would, a decoded [`Reply`], and [`Captured`] output.

use lambda_http::{Body, Request};
use seckill_shared::clock;
use std::collections::HashMap;
use std::sync::Arc;

const PURCHASE_EVENT: &str = include_str!("../../events/purchase.json");

/// The purchase event of `events/purchase.json`, with this sale, caller
/// (`None` removes the authorizer) and body; `headers` are added or replaced.
pub fn purchase_event(
    sale: &str,
    user: Option<&str>,
    body: &str,
    headers: &[(&str, &str)],
) -> Request {
    let mut event: serde_json::Value = serde_json::from_str(PURCHASE_EVENT).unwrap();
    event["pathParameters"]["saleId"] = sale.into();
    event["rawPath"] = format!("/sales/{sale}/purchase").into();
    event["requestContext"]["http"]["path"] = format!("/sales/{sale}/purchase").into();
    match user {
        Some(user) => event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into(),
        None => {
            event["requestContext"]
                .as_object_mut()
                .unwrap()
                .remove("authorizer");
        }
    }
    let obj = event["headers"].as_object_mut().unwrap();
    obj.remove("idempotency-key");
    obj.remove("content-length");
    for (name, value) in headers {
        obj.insert(name.to_ascii_lowercase(), (*value).into());
    }
    event["body"] = body.into();
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// The purchase event as sent from `ip`.
pub fn purchase_event_from(sale: &str, user: &str, ip: &str) -> Request {
    let mut event: serde_json::Value = serde_json::from_str(PURCHASE_EVENT).unwrap();
    event["pathParameters"]["saleId"] = sale.into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into();
    event["requestContext"]["http"]["sourceIp"] = ip.into();
    event["headers"]["x-forwarded-for"] = ip.into();
    let headers = event["headers"].as_object_mut().unwrap();
    headers.remove("idempotency-key");
    headers.remove("content-length");
    event["body"] = serde_json::Value::Null;
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

/// A response, decoded.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: serde_json::Value,
    pub headers: HashMap<String, String>,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

impl From<lambda_http::Response<Body>> for Reply {
    fn from(response: lambda_http::Response<Body>) -> Self {
        let (parts, body) = response.into_parts();
        let text = match body {
            Body::Text(t) => t,
            Body::Binary(b) => String::from_utf8(b).unwrap(),
            _ => String::new(),
        };
        Reply {
            status: parts.status.as_u16(),
            body: serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
        }
    }
}

/// An order message body for `sale`, reserved at `reserved_at_ms`.
pub fn order_body(
    order: &str,
    sale: &str,
    user: &str,
    quantity: u32,
    reserved_at_ms: i64,
) -> String {
    serde_json::json!({
        "v": 1, "orderId": order, "saleId": sale, "userId": user, "quantity": quantity,
        "shard": 0, "reservedAt": clock::rfc3339_ms(reserved_at_ms),
    })
    .to_string()
}

/// A real-shaped SQS event of (messageId, body) records.
pub fn sqs_event(records: &[(&str, &str)]) -> aws_lambda_events::event::sqs::SqsEvent {
    let records: Vec<serde_json::Value> = records
        .iter()
        .map(|(id, body)| {
            serde_json::json!({
                "messageId": id, "receiptHandle": format!("rh-{id}"), "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1764471962000",
                               "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": "1764471962001"},
                "messageAttributes": {}, "md5OfBody": "0", "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:seckill-orders", "awsRegion": "us-east-1",
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).unwrap()
}

/// Runs the order-writer handler on an event, as Lambda would.
pub async fn invoke_writer(
    writer: &order_writer::LiveWriter,
    event: aws_lambda_events::event::sqs::SqsEvent,
) -> Result<Vec<String>, String> {
    let event = lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default());
    order_writer::handler::handle(writer, event)
        .await
        .map(|r| {
            r.batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect()
        })
        .map_err(|e| e.to_string())
}

/// Whatever a writer under test wrote (log lines, EMF lines), kept in memory.
#[derive(Clone, Default)]
pub struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
