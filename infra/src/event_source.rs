//! The local stand-in for Lambda's SQS event source mapping: pollers that
//! receive from the queue, batch like the mapping does, invoke the same
//! handler code Lambda runs with a real-shaped `SqsEvent`, and delete what
//! the handler did not report as failed (`ReportBatchItemFailures`).
//!
//! What is deliberately left to the queue, as in AWS:
//! - Failed records are neither deleted nor touched: they reappear when the
//!   queue's visibility timeout runs out, exactly as Lambda leaves them.
//! - Dead-lettering: the emulator (moto) applies the queue's redrive policy
//!   itself (a message already received `maxReceiveCount` times moves to the
//!   DLQ on the next receive), just as SQS does in AWS. Moving messages here
//!   would double-count receives and diverge from what the function sees in
//!   production.

use aws_lambda_events::encodings::Base64Data;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::config::timeout::TimeoutConfig;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry, Message,
    MessageSystemAttributeName, QueueAttributeName,
};
use seckill_shared::adapters::sqs::describe;
use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// SQS caps a receive and a delete batch at ten messages.
const SQS_MAX_BATCH: usize = 10;
/// Lambda's upper bound for `BatchSize` on a standard queue.
const MAX_BATCH_SIZE: i32 = 10_000;
/// SQS caps a long poll at twenty seconds.
const SQS_MAX_WAIT_SECONDS: i32 = 20;
/// Pause after a failed receive, so an emulator that is down is not hammered;
/// short, so the pollers pick up again soon after it comes back.
const RECEIVE_BACKOFF: Duration = Duration::from_millis(200);
/// Headroom over the long poll for the receive's own timeout: the network
/// round trip and a slow emulator must not turn a normal long poll into an
/// error.
const RECEIVE_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

/// How the mapping polls and batches; the fields mirror `template.yaml`.
#[derive(Debug, Clone)]
pub struct EventSourceSettings {
    pub queue_url: String,
    /// Goes into every record's `eventSourceARN`.
    pub queue_arn: String,
    /// Goes into every record's `awsRegion`.
    pub region: String,
    /// `BatchSize`: records per invocation, clamped to 1..=10,000 as Lambda
    /// allows (above 10 it takes several receives, so give it a window).
    pub batch_size: i32,
    /// `MaximumBatchingWindowInSeconds`: how long to keep gathering after the
    /// first record of a batch arrived.
    pub batching_window: Duration,
    /// `ScalingConfig.MaximumConcurrency`: pollers, each invoking the
    /// handler sequentially (at least 1).
    pub maximum_concurrency: usize,
    /// Long-poll length, clamped to 1..=20. Lambda always long-polls; short
    /// here so a stop is noticed soon even by a receive that cannot be cut
    /// short on the emulator side.
    pub wait_time_seconds: i32,
}

impl EventSourceSettings {
    /// The settings of the order-writer's mapping in `template.yaml`
    /// (batch of 10, 1 s window, 5 concurrent), with a 1 s long poll.
    pub fn template(
        queue_url: impl Into<String>,
        queue_arn: impl Into<String>,
        region: impl Into<String>,
    ) -> Self {
        Self {
            queue_url: queue_url.into(),
            queue_arn: queue_arn.into(),
            region: region.into(),
            batch_size: 10,
            batching_window: Duration::from_secs(1),
            maximum_concurrency: 5,
            wait_time_seconds: 1,
        }
    }

    fn batch_size(&self) -> usize {
        // Clamped to a positive range first, so the cast is lossless.
        self.batch_size.clamp(1, MAX_BATCH_SIZE) as usize
    }

    fn wait_time_seconds(&self) -> i32 {
        // Never 0: a short poll on an empty queue would spin the poller.
        self.wait_time_seconds.clamp(1, SQS_MAX_WAIT_SECONDS)
    }
}

/// The ARN of a queue, for [`EventSourceSettings::queue_arn`].
pub async fn queue_arn(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<String, String> {
    sqs.get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| describe(&e))?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| format!("no ARN for {queue_url}"))
}

/// Live counters of a running event source; read them at any time.
#[derive(Debug, Default)]
pub struct EventSourceStats {
    /// Handler invocations (one per batch).
    pub invocations: AtomicU64,
    /// Records handed to the handler.
    pub records_delivered: AtomicU64,
    /// Records deleted from the queue after the handler.
    pub records_deleted: AtomicU64,
    /// Records the handler listed in `batchItemFailures` (left to reappear).
    pub records_failed: AtomicU64,
    /// Invocations that failed as a whole: `Err`, a panic, or a response
    /// Lambda would reject (unknown or empty item identifier).
    pub batch_errors: AtomicU64,
    /// Receives that failed (emulator down, timeout).
    pub receive_errors: AtomicU64,
    /// Deletes that failed; those records come back and are redelivered,
    /// which the idempotent handler absorbs.
    pub delete_errors: AtomicU64,
}

impl EventSourceStats {
    /// A consistent-enough copy for printing and assertions.
    pub fn snapshot(&self) -> EventSourceCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        EventSourceCounts {
            invocations: get(&self.invocations),
            records_delivered: get(&self.records_delivered),
            records_deleted: get(&self.records_deleted),
            records_failed: get(&self.records_failed),
            batch_errors: get(&self.batch_errors),
            receive_errors: get(&self.receive_errors),
            delete_errors: get(&self.delete_errors),
        }
    }
}

fn bump(counter: &AtomicU64, by: usize) {
    counter.fetch_add(by as u64, Ordering::Relaxed);
}

/// A copy of [`EventSourceStats`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventSourceCounts {
    pub invocations: u64,
    pub records_delivered: u64,
    pub records_deleted: u64,
    pub records_failed: u64,
    pub batch_errors: u64,
    pub receive_errors: u64,
    pub delete_errors: u64,
}

impl fmt::Display for EventSourceCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invocations={} delivered={} deleted={} failed={} batch_errors={} receive_errors={} delete_errors={}",
            self.invocations,
            self.records_delivered,
            self.records_deleted,
            self.records_failed,
            self.batch_errors,
            self.receive_errors,
            self.delete_errors
        )
    }
}

/// Runs the mapping until `shutdown` resolves, then stops the pollers and
/// returns once they are done.
///
/// A stop cuts a receive short and hands back (visibility 0) records
/// gathered but not yet delivered, so the next run sees them at once. An
/// invocation in progress is let finish and settled: cutting it off would
/// only turn finished work into redeliveries. A receive cut mid-flight may
/// still have taken messages on the server side; like after a crashed
/// poller they reappear after the visibility timeout (at-least-once).
pub async fn run<H, Fut>(
    sqs: aws_sdk_sqs::Client,
    settings: EventSourceSettings,
    handler: H,
    stats: Arc<EventSourceStats>,
    shutdown: impl Future<Output = ()>,
) where
    H: Fn(SqsEvent) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let settings = Arc::new(settings);
    let mut pollers = JoinSet::new();
    for _ in 0..settings.maximum_concurrency.max(1) {
        pollers.spawn(poll(
            sqs.clone(),
            Arc::clone(&settings),
            handler.clone(),
            Arc::clone(&stats),
            stop_rx.clone(),
        ));
    }
    shutdown.await;
    // Ignored: an error only means every poller is gone already.
    let _ = stop_tx.send(true);
    while let Some(done) = pollers.join_next().await {
        if let Err(err) = done {
            tracing::warn!(error = %err, "event source poller ended abnormally");
        }
    }
}

/// A mapping running in the background; dropping it stops it too.
pub struct EventSource {
    stats: Arc<EventSourceStats>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl EventSource {
    /// Starts [`run`] on the current runtime.
    pub fn spawn<H, Fut>(
        sqs: aws_sdk_sqs::Client,
        settings: EventSourceSettings,
        handler: H,
    ) -> Self
    where
        H: Fn(SqsEvent) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
    {
        let stats = Arc::new(EventSourceStats::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run(sqs, settings, handler, Arc::clone(&stats), async {
            // Resolves on `stop()` and also when the sender is dropped, so a
            // forgotten handle cannot leave pollers running.
            let _ = stopped.await;
        }));
        Self {
            stats,
            stop: Some(stop),
            task,
        }
    }

    pub fn stats(&self) -> &Arc<EventSourceStats> {
        &self.stats
    }

    /// Stops the pollers and waits for them (see [`run`] for what a stop
    /// does to work in flight). Returns the final counts.
    pub async fn stop(mut self) -> EventSourceCounts {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(err) = (&mut self.task).await {
            tracing::warn!(error = %err, "event source ended abnormally");
        }
        self.stats.snapshot()
    }
}

/// Waits until a stop is requested (or the controller is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped: nobody can ask any more, stop.
    let _ = stop.wait_for(|s| *s).await;
}

/// One poller: gather a batch, invoke, settle, repeat. Sequential by design,
/// so invocations of one poller never overlap and the total concurrency is
/// the number of pollers, as with `MaximumConcurrency`.
async fn poll<H, Fut>(
    sqs: aws_sdk_sqs::Client,
    settings: Arc<EventSourceSettings>,
    handler: H,
    stats: Arc<EventSourceStats>,
    mut stop: watch::Receiver<bool>,
) where
    H: Fn(SqsEvent) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
{
    loop {
        let Some(batch) = gather(&sqs, &settings, &stats, &mut stop).await else {
            return;
        };
        let outcome = invoke(&handler, &batch, &stats).await;
        settle(&sqs, &settings, &stats, &batch, outcome).await;
        if *stop.borrow() {
            return;
        }
    }
}

/// Receives until the batch is full or the batching window (counted from the
/// first record) has passed. `None` when a stop was requested first.
async fn gather(
    sqs: &aws_sdk_sqs::Client,
    settings: &EventSourceSettings,
    stats: &EventSourceStats,
    stop: &mut watch::Receiver<bool>,
) -> Option<Vec<SqsMessage>> {
    let batch_size = settings.batch_size();
    let max_wait = settings.wait_time_seconds();
    let mut batch: Vec<SqsMessage> = Vec::with_capacity(batch_size);
    let mut window_ends: Option<Instant> = None;
    let mut failures = 0_u64;
    loop {
        if *stop.borrow() {
            release(sqs, settings, &batch).await;
            return None;
        }
        // Inside a window, poll no longer than what is left of it (rounded
        // up to SQS's whole seconds), so a quiet queue does not hold a
        // partial batch for a full long poll.
        let wait = match window_ends {
            None => max_wait,
            Some(end) => {
                let left = end.saturating_duration_since(Instant::now());
                (left.as_secs_f64().ceil() as i32).clamp(1, max_wait)
            }
        };
        let want = (batch_size - batch.len()).min(SQS_MAX_BATCH);
        let received = tokio::select! {
            biased;
            () = stopped(stop) => {
                release(sqs, settings, &batch).await;
                return None;
            }
            received = receive(sqs, settings, want, wait) => received,
        };
        match received {
            Ok(messages) => {
                if failures > 0 {
                    tracing::info!(queue = %settings.queue_url, failures, "SQS receive recovered");
                    failures = 0;
                }
                if !messages.is_empty() && window_ends.is_none() {
                    window_ends = Some(Instant::now() + settings.batching_window);
                }
                batch.extend(
                    messages
                        .iter()
                        .map(|m| to_record(m, &settings.queue_arn, &settings.region)),
                );
            }
            Err(err) => {
                bump(&stats.receive_errors, 1);
                // One warning per outage and poller, not five a second.
                if failures == 0 {
                    tracing::warn!(queue = %settings.queue_url, error = %err, "SQS receive failed; retrying");
                } else {
                    tracing::debug!(queue = %settings.queue_url, error = %err, "SQS receive failed again");
                }
                failures += 1;
                tokio::select! {
                    biased;
                    () = stopped(stop) => {
                        release(sqs, settings, &batch).await;
                        return None;
                    }
                    () = tokio::time::sleep(RECEIVE_BACKOFF) => {}
                }
            }
        }
        let window_passed = window_ends.is_some_and(|end| Instant::now() >= end);
        if batch.len() >= batch_size || (!batch.is_empty() && window_passed) {
            return Some(batch);
        }
    }
}

async fn receive(
    sqs: &aws_sdk_sqs::Client,
    settings: &EventSourceSettings,
    max: usize,
    wait_seconds: i32,
) -> Result<Vec<Message>, String> {
    // The caller's client may carry the purchase path's short timeouts; a
    // long poll needs longer, or every quiet poll would end as an error (and
    // a receive cut by the client may still take messages on the server).
    let long = Duration::from_secs(u64::from(wait_seconds.unsigned_abs())) + RECEIVE_TIMEOUT_MARGIN;
    let mut timeouts = TimeoutConfig::builder()
        .operation_timeout(long)
        .operation_attempt_timeout(long);
    if let Some(connect) = sqs
        .config()
        .timeout_config()
        .and_then(|t| t.connect_timeout())
    {
        timeouts = timeouts.connect_timeout(connect);
    }
    let output = sqs
        .receive_message()
        .queue_url(&settings.queue_url)
        // `max` is at most 10, so the cast is lossless.
        .max_number_of_messages(max as i32)
        .wait_time_seconds(wait_seconds)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .customize()
        .config_override(aws_sdk_sqs::config::Builder::default().timeout_config(timeouts.build()))
        .send()
        .await
        .map_err(|e| describe(&e))?;
    Ok(output.messages.unwrap_or_default())
}

/// Builds the record Lambda would put in the event for one received message.
pub fn to_record(message: &Message, queue_arn: &str, region: &str) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = message.message_id.clone();
    record.receipt_handle = message.receipt_handle.clone();
    record.body = message.body.clone();
    record.md5_of_body = message.md5_of_body.clone();
    record.md5_of_message_attributes = message.md5_of_message_attributes.clone();
    record.attributes = message
        .attributes
        .iter()
        .flatten()
        .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
        .collect();
    record.message_attributes = message
        .message_attributes
        .iter()
        .flatten()
        .map(|(name, value)| {
            let mut attribute = SqsMessageAttribute::default();
            attribute.data_type = Some(value.data_type.clone());
            attribute.string_value = value.string_value.clone();
            attribute.binary_value = value.binary_value.as_ref().map(|blob| {
                // `Base64Data` is non-exhaustive: fill a default through its
                // `DerefMut` to the bytes.
                let mut data = Base64Data::default();
                data.extend_from_slice(blob.as_ref());
                data
            });
            // Lambda's records carry the list fields, always empty (SQS
            // reserves them); nothing to copy.
            (name.clone(), attribute)
        })
        .collect();
    record.event_source = Some("aws:sqs".to_owned());
    record.event_source_arn = Some(queue_arn.to_owned());
    record.aws_region = Some(region.to_owned());
    record
}

/// What the handler's answer means for the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Delete these receipt handles; `failed` records stay for a retry.
    Delete {
        receipt_handles: Vec<String>,
        failed: usize,
    },
    /// The whole batch failed: delete nothing, everything comes back.
    Retry { reason: String },
}

/// Decides what to delete after an invocation, with Lambda's rules for
/// `ReportBatchItemFailures`: every record not listed as failed is deleted;
/// an empty identifier or one that is not a message of this batch makes
/// Lambda reject the response and retry the whole batch, and so does `Err`.
pub fn settlement(batch: &[SqsMessage], outcome: Result<SqsBatchResponse, String>) -> Settlement {
    let response = match outcome {
        Ok(response) => response,
        Err(reason) => return Settlement::Retry { reason },
    };
    let ids: HashSet<&str> = batch
        .iter()
        .filter_map(|r| r.message_id.as_deref())
        .collect();
    let mut failed_ids = HashSet::new();
    for failure in &response.batch_item_failures {
        let id = failure.item_identifier.as_str();
        if id.is_empty() || !ids.contains(id) {
            return Settlement::Retry {
                reason: format!("invalid batchItemFailures itemIdentifier {id:?}"),
            };
        }
        failed_ids.insert(id);
    }
    let (failed, succeeded): (Vec<&SqsMessage>, Vec<&SqsMessage>) = batch.iter().partition(|r| {
        r.message_id
            .as_deref()
            .is_some_and(|id| failed_ids.contains(id))
    });
    Settlement::Delete {
        receipt_handles: succeeded
            .iter()
            .filter_map(|r| r.receipt_handle.clone())
            .collect(),
        failed: failed.len(),
    }
}

/// Invokes the handler once for the batch. It runs as its own task so a
/// panicking handler fails its batch, as a crashed invocation does in
/// Lambda, instead of taking the poller down.
async fn invoke<H, Fut>(
    handler: &H,
    batch: &[SqsMessage],
    stats: &EventSourceStats,
) -> Result<SqsBatchResponse, String>
where
    H: Fn(SqsEvent) -> Fut,
    Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
{
    let mut event = SqsEvent::default();
    event.records = batch.to_vec();
    bump(&stats.invocations, 1);
    bump(&stats.records_delivered, batch.len());
    match tokio::spawn(handler(event)).await {
        Ok(outcome) => outcome,
        Err(err) => Err(format!("handler task failed: {err}")),
    }
}

async fn settle(
    sqs: &aws_sdk_sqs::Client,
    settings: &EventSourceSettings,
    stats: &EventSourceStats,
    batch: &[SqsMessage],
    outcome: Result<SqsBatchResponse, String>,
) {
    match settlement(batch, outcome) {
        Settlement::Retry { reason } => {
            bump(&stats.batch_errors, 1);
            tracing::warn!(queue = %settings.queue_url, records = batch.len(), %reason,
                "invocation failed; the whole batch returns after the visibility timeout");
        }
        Settlement::Delete {
            receipt_handles,
            failed,
        } => {
            bump(&stats.records_failed, failed);
            let deleted = delete(sqs, settings, &receipt_handles).await;
            bump(&stats.records_deleted, deleted);
            bump(&stats.delete_errors, receipt_handles.len() - deleted);
        }
    }
}

/// Deletes in batches of ten; returns how many were deleted.
async fn delete(
    sqs: &aws_sdk_sqs::Client,
    settings: &EventSourceSettings,
    receipt_handles: &[String],
) -> usize {
    let mut deleted = 0;
    for chunk in receipt_handles.chunks(SQS_MAX_BATCH) {
        let entries = chunk.iter().enumerate().filter_map(|(i, handle)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(handle)
                .build()
                .ok()
        });
        let result = sqs
            .delete_message_batch()
            .queue_url(&settings.queue_url)
            .set_entries(Some(entries.collect()))
            .send()
            .await;
        match result {
            Ok(output) => {
                for failure in &output.failed {
                    tracing::warn!(queue = %settings.queue_url, code = %failure.code,
                        message = ?failure.message, "SQS delete of a record failed; it will be redelivered");
                }
                deleted += output.successful.len();
            }
            Err(err) => {
                tracing::warn!(queue = %settings.queue_url, error = %describe(&err),
                    records = chunk.len(), "SQS delete failed; the records will be redelivered");
            }
        }
    }
    deleted
}

/// Makes records gathered but never delivered visible again at once, so a
/// stop does not hide them for a whole visibility timeout. Best effort: if
/// this fails they come back after the timeout anyway.
async fn release(sqs: &aws_sdk_sqs::Client, settings: &EventSourceSettings, batch: &[SqsMessage]) {
    let handles: Vec<&str> = batch
        .iter()
        .filter_map(|r| r.receipt_handle.as_deref())
        .collect();
    for chunk in handles.chunks(SQS_MAX_BATCH) {
        let entries = chunk.iter().enumerate().filter_map(|(i, handle)| {
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(*handle)
                .visibility_timeout(0)
                .build()
                .ok()
        });
        let result = sqs
            .change_message_visibility_batch()
            .queue_url(&settings.queue_url)
            .set_entries(Some(entries.collect()))
            .send()
            .await;
        if let Err(err) = result {
            tracing::warn!(queue = %settings.queue_url, error = %describe(&err),
                "could not release undelivered records on stop");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::primitives::Blob;
    use aws_sdk_sqs::types::MessageAttributeValue;
    use std::sync::Mutex;

    const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:seckill-orders";

    fn message(id: &str) -> Message {
        Message::builder()
            .message_id(id)
            .receipt_handle(format!("rh-{id}"))
            .body(format!("body-{id}"))
            .md5_of_body("md5")
            .attributes(MessageSystemAttributeName::ApproximateReceiveCount, "2")
            .attributes(MessageSystemAttributeName::SentTimestamp, "1796007600012")
            .attributes(MessageSystemAttributeName::SenderId, "AIDEXAMPLE")
            .attributes(
                MessageSystemAttributeName::ApproximateFirstReceiveTimestamp,
                "1796007600518",
            )
            .build()
    }

    fn batch(ids: &[&str]) -> Vec<SqsMessage> {
        ids.iter()
            .map(|id| to_record(&message(id), ARN, "us-east-1"))
            .collect()
    }

    fn failing(ids: &[&str]) -> Result<SqsBatchResponse, String> {
        let mut response = SqsBatchResponse::default();
        for id in ids {
            response.add_failure(*id);
        }
        Ok(response)
    }

    #[test]
    fn record_has_lambda_shape() {
        let mut msg = message("m1");
        msg.message_attributes = Some(
            [
                (
                    "trace".to_owned(),
                    MessageAttributeValue::builder()
                        .data_type("String")
                        .string_value("abc")
                        .build()
                        .unwrap(),
                ),
                (
                    "raw".to_owned(),
                    MessageAttributeValue::builder()
                        .data_type("Binary")
                        .binary_value(Blob::new(b"hi".to_vec()))
                        .build()
                        .unwrap(),
                ),
            ]
            .into(),
        );
        let json = serde_json::to_value(to_record(&msg, ARN, "us-east-1")).unwrap();
        assert_eq!(json["messageId"], "m1");
        assert_eq!(json["receiptHandle"], "rh-m1");
        assert_eq!(json["body"], "body-m1");
        assert_eq!(json["md5OfBody"], "md5");
        assert_eq!(json["eventSource"], "aws:sqs");
        assert_eq!(json["eventSourceARN"], ARN);
        assert_eq!(json["awsRegion"], "us-east-1");
        assert_eq!(json["attributes"]["ApproximateReceiveCount"], "2");
        assert_eq!(json["attributes"]["SentTimestamp"], "1796007600012");
        assert_eq!(json["attributes"]["SenderId"], "AIDEXAMPLE");
        assert_eq!(
            json["attributes"]["ApproximateFirstReceiveTimestamp"],
            "1796007600518"
        );
        assert_eq!(json["messageAttributes"]["trace"]["stringValue"], "abc");
        assert_eq!(json["messageAttributes"]["trace"]["dataType"], "String");
        assert_eq!(json["messageAttributes"]["raw"]["binaryValue"], "aGk=");
        assert_eq!(json["messageAttributes"]["raw"]["dataType"], "Binary");
    }

    #[test]
    fn record_parses_like_the_sample_event() {
        // The handler parses what Lambda sends; our record must survive the
        // same JSON round trip as the sample event in `events/`.
        let mut event = SqsEvent::default();
        event.records = batch(&["a", "b"]);
        let json = serde_json::to_string(&event).unwrap();
        let back: SqsEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, event);
        assert!(json.starts_with("{\"Records\":["));
    }

    #[test]
    fn message_without_attributes_gives_empty_maps() {
        let msg = Message::builder()
            .message_id("x")
            .receipt_handle("r")
            .build();
        let record = to_record(&msg, ARN, "eu-west-1");
        assert!(record.attributes.is_empty());
        assert!(record.message_attributes.is_empty());
        assert_eq!(record.body, None);
        assert_eq!(record.aws_region.as_deref(), Some("eu-west-1"));
    }

    #[test]
    fn no_failures_deletes_everything() {
        let b = batch(&["a", "b", "c"]);
        assert_eq!(
            settlement(&b, failing(&[])),
            Settlement::Delete {
                receipt_handles: vec!["rh-a".into(), "rh-b".into(), "rh-c".into()],
                failed: 0,
            }
        );
    }

    #[test]
    fn reported_failures_are_kept() {
        let b = batch(&["a", "b", "c"]);
        assert_eq!(
            settlement(&b, failing(&["b"])),
            Settlement::Delete {
                receipt_handles: vec!["rh-a".into(), "rh-c".into()],
                failed: 1,
            }
        );
        assert_eq!(
            settlement(&b, failing(&["a", "b", "c"])),
            Settlement::Delete {
                receipt_handles: vec![],
                failed: 3,
            }
        );
    }

    #[test]
    fn duplicate_failure_ids_count_once() {
        let b = batch(&["a", "b"]);
        assert_eq!(
            settlement(&b, failing(&["a", "a"])),
            Settlement::Delete {
                receipt_handles: vec!["rh-b".into()],
                failed: 1,
            }
        );
    }

    #[test]
    fn unknown_or_empty_identifier_fails_the_whole_batch() {
        let b = batch(&["a", "b"]);
        assert!(matches!(
            settlement(&b, failing(&["a", "zzz"])),
            Settlement::Retry { .. }
        ));
        assert!(matches!(
            settlement(&b, failing(&[""])),
            Settlement::Retry { .. }
        ));
    }

    #[test]
    fn handler_error_deletes_nothing() {
        let b = batch(&["a"]);
        assert_eq!(
            settlement(&b, Err("boom".into())),
            Settlement::Retry {
                reason: "boom".into()
            }
        );
    }

    #[test]
    fn settings_are_clamped_to_what_sqs_and_lambda_accept() {
        let mut s = EventSourceSettings::template("url", ARN, "us-east-1");
        assert_eq!((s.batch_size(), s.wait_time_seconds()), (10, 1));
        s.batch_size = 0;
        s.wait_time_seconds = 0;
        assert_eq!((s.batch_size(), s.wait_time_seconds()), (1, 1));
        s.batch_size = 50_000;
        s.wait_time_seconds = 60;
        assert_eq!((s.batch_size(), s.wait_time_seconds()), (10_000, 20));
    }

    #[tokio::test]
    async fn panicking_handler_fails_its_batch() {
        // The panic message this test prints is expected.
        let stats = EventSourceStats::default();
        let handler = |_event: SqsEvent| async move {
            if true {
                panic!("handler bug");
            }
            Ok(SqsBatchResponse::default())
        };
        let outcome = invoke(&handler, &batch(&["a"]), &stats).await;
        assert!(outcome.is_err());
        assert_eq!(stats.snapshot().invocations, 1);
        assert_eq!(stats.snapshot().records_delivered, 1);
    }

    /// A client for an endpoint where nothing listens.
    fn unreachable_client() -> aws_sdk_sqs::Client {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .endpoint_url("http://127.0.0.1:9")
            // One attempt per receive keeps the test short; the poller's own
            // backoff is what is under test.
            .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
            .build();
        aws_sdk_sqs::Client::from_conf(config)
    }

    #[tokio::test]
    async fn unreachable_queue_keeps_polling_and_stops_promptly() {
        let settings = EventSourceSettings::template("http://127.0.0.1:9/q", ARN, "us-east-1");
        let source = EventSource::spawn(unreachable_client(), settings, |_e: SqsEvent| async {
            Ok(SqsBatchResponse::default())
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        // Every one of the five pollers fails at least twice and carries on.
        while source.stats().snapshot().receive_errors < 10 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let started = Instant::now();
        let counts = source.stop().await;
        assert!(counts.receive_errors >= 10, "{counts}");
        assert_eq!(counts.invocations, 0);
        assert!(started.elapsed() < Duration::from_millis(500));
    }

    /// A fresh queue (and DLQ) on the emulator holding `count` messages.
    async fn queue_with_messages(
        prefix: &str,
        count: usize,
    ) -> (aws_sdk_sqs::Client, crate::emulator::Queues, String) {
        let sdk = seckill_shared::adapters::aws::sdk_config(
            seckill_shared::adapters::aws::Caller::Tool,
            Duration::from_secs(5),
        )
        .await;
        let sqs = seckill_shared::adapters::aws::sqs(&sdk);
        let suffix = seckill_shared::clock::now_ms();
        let queues = crate::emulator::ensure_queues(
            &sqs,
            &format!("{prefix}-{suffix}"),
            &format!("{prefix}-dlq-{suffix}"),
            crate::emulator::VISIBILITY_TIMEOUT_SECS,
        )
        .await
        .unwrap();
        let arn = queue_arn(&sqs, &queues.orders_url).await.unwrap();
        for i in 0..count {
            sqs.send_message()
                .queue_url(&queues.orders_url)
                .message_body(format!("msg-{i}"))
                .send()
                .await
                .unwrap();
        }
        (sqs, queues, arn)
    }

    /// Against the emulator `make test` starts (`AWS_ENDPOINT_URL`).
    #[tokio::test]
    async fn emulator_partial_batch_failure() {
        let (sqs, queues, arn) = queue_with_messages("esm-test", 25).await;

        let seen: Arc<Mutex<Vec<SqsMessage>>> = Arc::default();
        // In flight now / at most: never above the concurrency setting.
        let in_flight = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let handler = {
            let seen = Arc::clone(&seen);
            let in_flight = Arc::clone(&in_flight);
            move |event: SqsEvent| {
                let seen = Arc::clone(&seen);
                let in_flight = Arc::clone(&in_flight);
                async move {
                    let now = in_flight.0.fetch_add(1, Ordering::SeqCst) + 1;
                    in_flight.1.fetch_max(now, Ordering::SeqCst);
                    // Long enough for invocations of other pollers to overlap.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    in_flight.0.fetch_sub(1, Ordering::SeqCst);
                    let mut response = SqsBatchResponse::default();
                    for record in &event.records {
                        if record.body.as_deref() == Some("msg-7") {
                            response.add_failure(record.message_id.clone().unwrap_or_default());
                        }
                    }
                    seen.lock().unwrap().extend(event.records);
                    Ok(response)
                }
            }
        };
        let mut settings = EventSourceSettings::template(&queues.orders_url, &arn, "us-east-1");
        settings.maximum_concurrency = 3;
        let source = EventSource::spawn(sqs.clone(), settings, handler);
        let deadline = Instant::now() + Duration::from_secs(20);
        while source.stats().snapshot().records_deleted < 24 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let counts = source.stop().await;
        println!("{counts}");
        assert!(in_flight.1.load(Ordering::SeqCst) <= 3);

        // moto's server can hand one message to two concurrent receives (it
        // is not thread-safe there; SQS hides a received message). Then the
        // failed record may also arrive in a batch that deletes it. Judge the
        // settlement by what was delivered, and say when the emulator did it.
        let duplicates = counts.records_delivered.saturating_sub(25);
        if duplicates > 0 {
            println!("emulator delivered {duplicates} message(s) twice");
        }
        assert!(counts.records_failed >= 1);
        assert_eq!(
            counts.records_deleted + counts.records_failed,
            counts.records_delivered
        );
        assert!(counts.records_delivered >= 25);
        if duplicates == 0 {
            assert_eq!(counts.records_deleted, 24);
        }
        assert_eq!(counts.batch_errors, 0);
        assert!(counts.invocations >= 3, "batches of at most 10");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len() as u64, counts.records_delivered);
        let first = &seen[0];
        assert_eq!(first.event_source_arn.as_deref(), Some(arn.as_str()));
        assert_eq!(first.event_source.as_deref(), Some("aws:sqs"));
        assert_eq!(
            first
                .attributes
                .get("ApproximateReceiveCount")
                .map(String::as_str),
            Some("1")
        );
        assert!(first.attributes.contains_key("SentTimestamp"));
        assert!(first.attributes.contains_key("SenderId"));
        assert!(
            first
                .attributes
                .contains_key("ApproximateFirstReceiveTimestamp")
        );

        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&queues.orders_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default();
        let count = |name| {
            attrs
                .get(&name)
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        };
        assert_eq!(count(QueueAttributeName::ApproximateNumberOfMessages), 0);
        // The failed record waits out its visibility timeout, untouched.
        assert_eq!(
            count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            1
        );
        for url in [&queues.orders_url, &queues.dlq_url] {
            sqs.delete_queue().queue_url(url).send().await.unwrap();
        }
    }

    #[tokio::test]
    async fn emulator_long_poll_outlasts_a_short_client_timeout() {
        // The purchase path's clients time out within a second; a long poll
        // through such a client must still end as an empty receive.
        let sdk = seckill_shared::adapters::aws::sdk_config(
            seckill_shared::adapters::aws::Caller::Tool,
            Duration::from_millis(800),
        )
        .await;
        let sqs = seckill_shared::adapters::aws::sqs(&sdk);
        let name = format!("esm-poll-{}", seckill_shared::clock::now_ms());
        let url = sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .unwrap()
            .queue_url
            .unwrap();
        let settings = EventSourceSettings::template(&url, ARN, "us-east-1");
        let started = Instant::now();
        let got = receive(&sqs, &settings, 10, 2).await;
        assert_eq!(got.map(|m| m.len()), Ok(0));
        assert!(started.elapsed() >= Duration::from_secs(1));
        sqs.delete_queue().queue_url(&url).send().await.unwrap();
    }

    #[tokio::test]
    async fn emulator_whole_batch_error_deletes_nothing() {
        let (sqs, queues, arn) = queue_with_messages("esm-err", 5).await;
        let mut settings = EventSourceSettings::template(&queues.orders_url, &arn, "us-east-1");
        settings.maximum_concurrency = 1;
        settings.batching_window = Duration::ZERO;
        let source = EventSource::spawn(sqs.clone(), settings, |_e: SqsEvent| async {
            Err::<SqsBatchResponse, _>("downstream unavailable".to_owned())
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while source.stats().snapshot().records_delivered < 5 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let counts = source.stop().await;
        println!("{counts}");
        assert_eq!(counts.records_delivered, 5);
        assert_eq!(counts.records_deleted, 0);
        assert!(counts.batch_errors >= 1);
        for url in [&queues.orders_url, &queues.dlq_url] {
            sqs.delete_queue().queue_url(url).send().await.unwrap();
        }
    }

    #[tokio::test]
    async fn emulator_stop_mid_window_hands_records_back() {
        let sdk = seckill_shared::adapters::aws::sdk_config(
            seckill_shared::adapters::aws::Caller::Tool,
            Duration::from_secs(5),
        )
        .await;
        let sqs = seckill_shared::adapters::aws::sqs(&sdk);
        let suffix = seckill_shared::clock::now_ms();
        let queues = crate::emulator::ensure_queues(
            &sqs,
            &format!("esm-win-{suffix}"),
            &format!("esm-win-dlq-{suffix}"),
            crate::emulator::VISIBILITY_TIMEOUT_SECS,
        )
        .await
        .unwrap();
        sqs.send_message()
            .queue_url(&queues.orders_url)
            .message_body("lonely")
            .send()
            .await
            .unwrap();
        let mut settings = EventSourceSettings::template(&queues.orders_url, ARN, "us-east-1");
        settings.maximum_concurrency = 1;
        // A long window: the one record waits in a partial batch.
        settings.batching_window = Duration::from_secs(30);
        let source = EventSource::spawn(sqs.clone(), settings, |_e: SqsEvent| async {
            Ok(SqsBatchResponse::default())
        });
        let in_flight = || async {
            sqs.get_queue_attributes()
                .queue_url(&queues.orders_url)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                .send()
                .await
                .unwrap()
                .attributes
                .and_then(|a| {
                    a.get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                        .cloned()
                })
                .unwrap_or_default()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while in_flight().await != "1" && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // An absence over a span cannot be polled for: for 2.5 s (a few empty
        // receives; the window is 30 s) the record must stay undelivered.
        let watch_until = Instant::now() + Duration::from_millis(2_500);
        while Instant::now() < watch_until {
            assert_eq!(source.stats().snapshot().invocations, 0);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(source.stats().snapshot().invocations, 0);
        let counts = source.stop().await;
        assert_eq!(counts.invocations, 0);
        let back = sqs
            .receive_message()
            .queue_url(&queues.orders_url)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default();
        assert_eq!(back.len(), 1, "released at once, not after 60 s");
        for url in [&queues.orders_url, &queues.dlq_url] {
            sqs.delete_queue().queue_url(url).send().await.unwrap();
        }
    }
}
