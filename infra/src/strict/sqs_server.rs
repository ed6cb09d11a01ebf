//! SQS itself, in memory, in the strict layer: the queues the functions,
//! the local stack and the tests use, answered over SQS's JSON protocol.
//!
//! The emulator's SQS answers about 150 `SendMessage` a second, and far
//! fewer while the machine is busy: a purchase's send outlived its
//! `SQS_TIMEOUT_MS` under a few hundred buyers, so buyers saw `QUEUED` until
//! reconcile relayed them, and batches failed for the emulator's pace. On
//! AWS a send takes milliseconds. Served here, a call costs microseconds
//! whatever else the emulator is doing, and SQS is still as AWS documents
//! it where it matters to the code: at-least-once delivery (the layer's
//! duplicates, [`super::sqs`]), counts that lag (the layer's snapshots),
//! visibility timeouts, long polling, receive counts, the redrive to a
//! dead-letter queue after `maxReceiveCount` receives, batch entries that
//! fail one by one, and the 256 KiB message limit.
//!
//! Operations: `CreateQueue`, `GetQueueUrl`, `ListQueues`, `DeleteQueue`,
//! `PurgeQueue`, `GetQueueAttributes`, `SetQueueAttributes`, `SendMessage`,
//! `SendMessageBatch`, `ReceiveMessage`, `DeleteMessage`,
//! `DeleteMessageBatch`, `ChangeMessageVisibility`,
//! `ChangeMessageVisibilityBatch`. Another is answered `400
//! UnsupportedOperation`. Nothing is kept across restarts of the layer.

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
// The runtime's clock (std's, but for tests on a paused clock).
use tokio::sync::Notify;
use tokio::time::Instant;
pub use wire::Fault;
use wire::{attributes_of, batch_entries, delivery, md5_hex, name_of, number, string};

mod wire;

/// SQS's largest message (and batch), in bytes.
pub const MAX_MESSAGE_BYTES: usize = 262_144;
/// The longest long poll SQS allows.
const MAX_WAIT: Duration = Duration::from_secs(20);
/// The account the queue URLs and ARNs name (the emulator's).
const ACCOUNT: &str = "123456789012";
/// Receipt handles of this server start with this.
const HANDLE_PREFIX: &str = "rh-";

struct Message {
    id: String,
    body: String,
    md5: String,
    sender: String,
    sent_ms: i64,
    first_receive_ms: Option<i64>,
    receive_count: u32,
    visible_at: Instant,
    /// The receipt handle of its latest receive, while in flight.
    handle: Option<String>,
    /// Every receipt handle it was received with.
    handles: Vec<String>,
}

struct Queue {
    name: String,
    url: String,
    arn: String,
    created_s: i64,
    /// As set (`CreateQueue`, `SetQueueAttributes`), by name.
    attributes: BTreeMap<String, String>,
    messages: VecDeque<Message>,
    arrived: Arc<Notify>,
}

impl Queue {
    fn visibility(&self) -> Duration {
        Duration::from_secs(
            self.attributes
                .get("VisibilityTimeout")
                .and_then(|v| v.parse().ok())
                .unwrap_or(30),
        )
    }

    /// `(dead-letter queue's name, maxReceiveCount)`, if set.
    fn redrive(&self) -> Option<(String, u32)> {
        let policy: Value = serde_json::from_str(self.attributes.get("RedrivePolicy")?).ok()?;
        let arn = policy["deadLetterTargetArn"].as_str()?;
        let max = match &policy["maxReceiveCount"] {
            Value::Number(n) => u32::try_from(n.as_u64()?).ok()?,
            Value::String(s) => s.parse().ok()?,
            _ => return None,
        };
        Some((arn.rsplit(':').next()?.to_owned(), max))
    }

    fn counts(&self, now: Instant) -> (usize, usize, usize) {
        let (mut visible, mut in_flight, mut delayed) = (0, 0, 0);
        for m in &self.messages {
            match (&m.handle, m.visible_at <= now) {
                (_, true) => visible += 1,
                (Some(_), false) => in_flight += 1,
                (None, false) => delayed += 1,
            }
        }
        (visible, in_flight, delayed)
    }
}

#[derive(Default)]
struct State {
    queues: HashMap<String, Queue>,
    seq: u64,
}

/// What one look at a queue for a receive found.
enum Taken {
    Messages(Vec<Value>),
    /// None visible: what signals a send, and when the next in-flight or
    /// delayed one becomes visible.
    None {
        arrived: Arc<Notify>,
        next: Option<Instant>,
    },
}

/// The queues, shared by every connection of the layer.
pub struct SqsServer {
    /// The host and port queue URLs name.
    host: String,
    state: Mutex<State>,
    random: std::collections::hash_map::RandomState,
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(i64::MAX)
}

impl SqsServer {
    /// Queue URLs name `host` (`127.0.0.1:4566`): the layer's own address.
    pub fn new(host: impl Into<String>) -> Self {
        Self {
            host: host.into(),
            state: Mutex::new(State::default()),
            random: std::collections::hash_map::RandomState::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fresh_id(&self, state: &mut State) -> String {
        use std::hash::BuildHasher;
        state.seq += 1;
        let a = self.random.hash_one(state.seq);
        let b = self.random.hash_one((state.seq, a));
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    /// Visible, in flight and delayed messages of the queue at `url`: the
    /// exact counts (what the layer's snapshots lag behind).
    pub fn exact_counts(&self, url: &str) -> Option<(usize, usize, usize)> {
        let state = self.state();
        state
            .queues
            .get(name_of(url))
            .map(|q| q.counts(Instant::now()))
    }

    /// One call of `operation` with its JSON `body`; `sender` is the
    /// caller's access key (the `SenderId` of what it sends).
    pub async fn call(&self, operation: &str, body: &Value, sender: &str) -> Result<Value, Fault> {
        match operation {
            "ReceiveMessage" => self.receive(body).await,
            other => self.call_now(other, body, sender),
        }
    }

    fn call_now(&self, operation: &str, body: &Value, sender: &str) -> Result<Value, Fault> {
        match operation {
            "CreateQueue" => self.create_queue(body),
            "GetQueueUrl" => {
                let name = string(body, "QueueName")?;
                let state = self.state();
                let queue = state
                    .queues
                    .get(name)
                    .ok_or_else(|| Fault::no_queue(name))?;
                Ok(json!({"QueueUrl": queue.url}))
            }
            "ListQueues" => {
                let prefix = body["QueueNamePrefix"].as_str().unwrap_or("");
                let state = self.state();
                let mut urls: Vec<&str> = state
                    .queues
                    .values()
                    .filter(|q| q.name.starts_with(prefix))
                    .map(|q| q.url.as_str())
                    .collect();
                urls.sort_unstable();
                Ok(json!({"QueueUrls": urls}))
            }
            "DeleteQueue" => {
                let url = string(body, "QueueUrl")?;
                let mut state = self.state();
                state
                    .queues
                    .remove(name_of(url))
                    .ok_or_else(|| Fault::no_queue(url))?;
                Ok(json!({}))
            }
            "PurgeQueue" => {
                let url = string(body, "QueueUrl")?;
                let mut state = self.state();
                let queue = state
                    .queues
                    .get_mut(name_of(url))
                    .ok_or_else(|| Fault::no_queue(url))?;
                queue.messages.clear();
                Ok(json!({}))
            }
            "GetQueueAttributes" => self.attributes(body),
            "SetQueueAttributes" => {
                let url = string(body, "QueueUrl")?;
                let set = attributes_of(body)?;
                let mut state = self.state();
                let queue = state
                    .queues
                    .get_mut(name_of(url))
                    .ok_or_else(|| Fault::no_queue(url))?;
                queue.attributes.extend(set);
                Ok(json!({}))
            }
            "SendMessage" => {
                let url = string(body, "QueueUrl")?.to_owned();
                let text = string(body, "MessageBody")?;
                let delay = number(body, "DelaySeconds", 0..=900)?.unwrap_or(0);
                let (id, md5) = self.send(&url, text, delay, sender)?;
                Ok(json!({"MessageId": id, "MD5OfMessageBody": md5}))
            }
            "SendMessageBatch" => self.send_batch(body, sender),
            "DeleteMessage" => {
                let url = string(body, "QueueUrl")?;
                let handle = string(body, "ReceiptHandle")?;
                self.delete(url, handle)?;
                Ok(json!({}))
            }
            "ChangeMessageVisibility" => {
                let url = string(body, "QueueUrl")?;
                let handle = string(body, "ReceiptHandle")?;
                let secs = number(body, "VisibilityTimeout", 0..=43_200)?
                    .ok_or_else(|| Fault::missing("VisibilityTimeout"))?;
                self.change_visibility(url, handle, secs)?;
                Ok(json!({}))
            }
            "DeleteMessageBatch" | "ChangeMessageVisibilityBatch" => {
                let url = string(body, "QueueUrl")?.to_owned();
                let entries = batch_entries(body)?;
                let (mut ok, mut failed) = (Vec::new(), Vec::new());
                for entry in entries {
                    let id = entry["Id"].as_str().unwrap_or_default();
                    let done = string(entry, "ReceiptHandle").and_then(|handle| {
                        if operation == "DeleteMessageBatch" {
                            self.delete(&url, handle)
                        } else {
                            let secs = number(entry, "VisibilityTimeout", 0..=43_200)?
                                .ok_or_else(|| Fault::missing("VisibilityTimeout"))?;
                            self.change_visibility(&url, handle, secs)
                        }
                    });
                    match done {
                        Ok(()) => ok.push(json!({"Id": id})),
                        Err(f) if f.kind == "QueueDoesNotExist" => return Err(f),
                        Err(f) => failed.push(json!({
                            "Id": id, "SenderFault": true, "Code": f.query_code, "Message": f.message,
                        })),
                    }
                }
                Ok(json!({"Successful": ok, "Failed": failed}))
            }
            _ => Err(Fault::new(
                "UnsupportedOperation",
                "AWS.SimpleQueueService.UnsupportedOperation",
                format!("{operation} is not served by the local stack's SQS"),
            )),
        }
    }

    fn create_queue(&self, body: &Value) -> Result<Value, Fault> {
        let name = string(body, "QueueName")?;
        let valid = !name.is_empty()
            && name.len() <= 80
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(Fault::invalid(format!(
                "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length: {name}"
            )));
        }
        let attributes = attributes_of(body)?;
        let mut state = self.state();
        if let Some(queue) = state.queues.get(name) {
            // Created again with the same attributes: the same queue.
            let differs = attributes
                .iter()
                .any(|(k, v)| queue.attributes.get(k).is_some_and(|had| had != v));
            if differs {
                return Err(Fault::new(
                    "QueueNameExists",
                    "QueueAlreadyExists",
                    format!(
                        "A queue already exists with the same name and a different value for attribute(s): {name}"
                    ),
                ));
            }
            return Ok(json!({"QueueUrl": queue.url}));
        }
        let queue = Queue {
            name: name.to_owned(),
            url: format!("http://{}/{ACCOUNT}/{name}", self.host),
            arn: format!("arn:aws:sqs:us-east-1:{ACCOUNT}:{name}"),
            created_s: now_ms() / 1000,
            attributes,
            messages: VecDeque::new(),
            arrived: Arc::new(Notify::new()),
        };
        let url = queue.url.clone();
        state.queues.insert(name.to_owned(), queue);
        Ok(json!({"QueueUrl": url}))
    }

    fn attributes(&self, body: &Value) -> Result<Value, Fault> {
        let url = string(body, "QueueUrl")?;
        let state = self.state();
        let queue = state
            .queues
            .get(name_of(url))
            .ok_or_else(|| Fault::no_queue(url))?;
        let (visible, in_flight, delayed) = queue.counts(Instant::now());
        let mut all: BTreeMap<String, String> = BTreeMap::from([
            ("QueueArn".into(), queue.arn.clone()),
            ("ApproximateNumberOfMessages".into(), visible.to_string()),
            (
                "ApproximateNumberOfMessagesNotVisible".into(),
                in_flight.to_string(),
            ),
            (
                "ApproximateNumberOfMessagesDelayed".into(),
                delayed.to_string(),
            ),
            ("CreatedTimestamp".into(), queue.created_s.to_string()),
            ("LastModifiedTimestamp".into(), queue.created_s.to_string()),
            (
                "VisibilityTimeout".into(),
                queue.visibility().as_secs().to_string(),
            ),
            ("MaximumMessageSize".into(), MAX_MESSAGE_BYTES.to_string()),
            ("MessageRetentionPeriod".into(), "345600".into()),
            ("DelaySeconds".into(), "0".into()),
            ("ReceiveMessageWaitTimeSeconds".into(), "0".into()),
        ]);
        all.extend(queue.attributes.clone());
        let names: Vec<&str> = body["AttributeNames"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let chosen: BTreeMap<String, String> = if names.contains(&"All") {
            all
        } else {
            all.into_iter()
                .filter(|(k, _)| names.contains(&k.as_str()))
                .collect()
        };
        Ok(json!({"Attributes": chosen}))
    }

    /// Puts one message on the queue; its id and body's MD5.
    fn send(
        &self,
        url: &str,
        text: &str,
        delay_s: u64,
        sender: &str,
    ) -> Result<(String, String), Fault> {
        if text.len() > MAX_MESSAGE_BYTES {
            return Err(Fault::invalid(format!(
                "One or more parameters are invalid. Reason: Message must be shorter than {MAX_MESSAGE_BYTES} bytes."
            )));
        }
        if text.is_empty() {
            return Err(Fault::missing("MessageBody"));
        }
        let mut state = self.state();
        let id = self.fresh_id(&mut state);
        let queue = state
            .queues
            .get_mut(name_of(url))
            .ok_or_else(|| Fault::no_queue(url))?;
        let md5 = md5_hex(text);
        queue.messages.push_back(Message {
            id: id.clone(),
            body: text.to_owned(),
            md5: md5.clone(),
            sender: sender.to_owned(),
            sent_ms: now_ms(),
            first_receive_ms: None,
            receive_count: 0,
            visible_at: Instant::now() + Duration::from_secs(delay_s),
            handle: None,
            handles: Vec::new(),
        });
        queue.arrived.notify_waiters();
        Ok((id, md5))
    }

    fn send_batch(&self, body: &Value, sender: &str) -> Result<Value, Fault> {
        let url = string(body, "QueueUrl")?.to_owned();
        let entries = batch_entries(body)?;
        let total: usize = entries
            .iter()
            .map(|e| e["MessageBody"].as_str().map_or(0, str::len))
            .sum();
        if total > MAX_MESSAGE_BYTES {
            return Err(Fault::new(
                "BatchRequestTooLong",
                "AWS.SimpleQueueService.BatchRequestTooLong",
                format!("Batch requests cannot be longer than {MAX_MESSAGE_BYTES} bytes."),
            ));
        }
        if !self.state().queues.contains_key(name_of(&url)) {
            return Err(Fault::no_queue(&url));
        }
        let (mut ok, mut failed) = (Vec::new(), Vec::new());
        for entry in entries {
            let id = entry["Id"].as_str().unwrap_or_default();
            let sent = string(entry, "MessageBody").and_then(|text| {
                let delay = number(entry, "DelaySeconds", 0..=900)?.unwrap_or(0);
                self.send(&url, text, delay, sender)
            });
            match sent {
                Ok((message_id, md5)) => ok.push(json!({
                    "Id": id, "MessageId": message_id, "MD5OfMessageBody": md5,
                })),
                Err(f) => failed.push(json!({
                    "Id": id, "SenderFault": true, "Code": f.query_code, "Message": f.message,
                })),
            }
        }
        Ok(json!({"Successful": ok, "Failed": failed}))
    }

    /// Takes up to `max` visible messages of the queue now, moving to its
    /// dead-letter queue each one received `maxReceiveCount` times already.
    fn take(
        &self,
        name: &str,
        max: usize,
        visibility: Option<Duration>,
        wanted: &[String],
    ) -> Result<Taken, Fault> {
        let mut state = self.state();
        let now = Instant::now();
        let (redrive, visibility) = {
            let queue = state
                .queues
                .get(name)
                .ok_or_else(|| Fault::no_queue(name))?;
            (
                queue.redrive(),
                visibility.unwrap_or_else(|| queue.visibility()),
            )
        };
        // Those past their receives go to the dead-letter queue first.
        if let Some((dlq, max_receives)) = &redrive
            && state.queues.contains_key(dlq.as_str())
        {
            let mut moved = Vec::new();
            if let Some(queue) = state.queues.get_mut(name) {
                let mut kept = VecDeque::with_capacity(queue.messages.len());
                while let Some(m) = queue.messages.pop_front() {
                    if m.visible_at <= now && m.receive_count >= *max_receives {
                        moved.push(m);
                    } else {
                        kept.push_back(m);
                    }
                }
                queue.messages = kept;
            }
            if let Some(target) = state.queues.get_mut(dlq.as_str())
                && !moved.is_empty()
            {
                for mut m in moved {
                    m.handle = None;
                    m.handles.clear();
                    m.visible_at = now;
                    target.messages.push_back(m);
                }
                target.arrived.notify_waiters();
            }
        }
        let mut handles = Vec::new();
        for _ in 0..max {
            handles.push(format!("{HANDLE_PREFIX}{}", self.fresh_id(&mut state)));
        }
        let queue = state
            .queues
            .get_mut(name)
            .ok_or_else(|| Fault::no_queue(name))?;
        let mut out = Vec::new();
        for m in queue.messages.iter_mut().filter(|m| m.visible_at <= now) {
            let Some(handle) = handles.pop() else { break };
            m.receive_count += 1;
            m.first_receive_ms.get_or_insert_with(now_ms);
            m.visible_at = now + visibility;
            m.handle = Some(handle.clone());
            m.handles.push(handle.clone());
            out.push(delivery(m, &handle, wanted));
        }
        if out.is_empty() {
            let next = queue.messages.iter().map(|m| m.visible_at).min();
            return Ok(Taken::None {
                arrived: queue.arrived.clone(),
                next,
            });
        }
        Ok(Taken::Messages(out))
    }

    async fn receive(&self, body: &Value) -> Result<Value, Fault> {
        let url = string(body, "QueueUrl")?.to_owned();
        let max =
            usize::try_from(number(body, "MaxNumberOfMessages", 1..=10)?.unwrap_or(1)).unwrap_or(1);
        let wait = Duration::from_secs(number(body, "WaitTimeSeconds", 0..=20)?.unwrap_or(0))
            .min(MAX_WAIT);
        let visibility = number(body, "VisibilityTimeout", 0..=43_200)?.map(Duration::from_secs);
        let mut wanted: Vec<String> = Vec::new();
        for list in ["AttributeNames", "MessageSystemAttributeNames"] {
            if let Some(names) = body[list].as_array() {
                wanted.extend(names.iter().filter_map(Value::as_str).map(str::to_owned));
            }
        }
        let deadline = Instant::now() + wait;
        loop {
            let (arrived, next) = match self.take(name_of(&url), max, visibility, &wanted)? {
                Taken::Messages(messages) => return Ok(json!({"Messages": messages})),
                Taken::None { arrived, next } => (arrived, next),
            };
            let now = Instant::now();
            if now >= deadline {
                return Ok(json!({}));
            }
            // Until a send, the next message's visibility, or the deadline.
            let until = next
                .filter(|at| *at > now)
                .map_or(deadline, |at| at.min(deadline));
            let notified = arrived.notified();
            tokio::pin!(notified);
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    fn delete(&self, url: &str, handle: &str) -> Result<(), Fault> {
        let mut state = self.state();
        let queue = state
            .queues
            .get_mut(name_of(url))
            .ok_or_else(|| Fault::no_queue(url))?;
        // Any receive's handle deletes the message: SQS says a handle of
        // an earlier receive "might not" (in practice it does, and so does
        // the emulator), and a handler slower than its visibility timeout
        // deletes with the handle it was given.
        if let Some(at) = queue
            .messages
            .iter()
            .position(|m| m.handles.iter().any(|h| h == handle))
        {
            queue.messages.remove(at);
            return Ok(());
        }
        // A handle of a message deleted already: success, nothing to do.
        if handle.starts_with(HANDLE_PREFIX) {
            return Ok(());
        }
        Err(Fault::new(
            "ReceiptHandleIsInvalid",
            "ReceiptHandleIsInvalid",
            format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
        ))
    }

    fn change_visibility(&self, url: &str, handle: &str, secs: u64) -> Result<(), Fault> {
        let mut state = self.state();
        let queue = state
            .queues
            .get_mut(name_of(url))
            .ok_or_else(|| Fault::no_queue(url))?;
        let now = Instant::now();
        let arrived = queue.arrived.clone();
        let Some(message) = queue
            .messages
            .iter_mut()
            .find(|m| m.handles.iter().any(|h| h == handle))
        else {
            return Err(if handle.starts_with(HANDLE_PREFIX) {
                Fault::new(
                    "MessageNotInflight",
                    "AWS.SimpleQueueService.MessageNotInflight",
                    "The message referred to isn't in flight.",
                )
            } else {
                Fault::new(
                    "ReceiptHandleIsInvalid",
                    "ReceiptHandleIsInvalid",
                    format!("The input receipt handle \"{handle}\" is not a valid receipt handle."),
                )
            });
        };
        if message.visible_at <= now {
            return Err(Fault::new(
                "MessageNotInflight",
                "AWS.SimpleQueueService.MessageNotInflight",
                "The message referred to isn't in flight.",
            ));
        }
        message.visible_at = now + Duration::from_secs(secs);
        if secs == 0 {
            arrived.notify_waiters();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
