//! The pollers: each receives until its batch is full or the batching
//! window has passed, invokes the handler, settles, and polls again.

use super::batching::{invoke, to_record};
use super::deletion::{release, settle};
use super::{
    EventSourceSettings, EventSourceStats, RECEIVE_BACKOFF, RECEIVE_TIMEOUT_MARGIN, SQS_MAX_BATCH,
    bump,
};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_sqs::config::timeout::TimeoutConfig;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use seckill_shared::adapters::sqs::describe;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Waits until a stop is requested (or the controller is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // An error means the sender was dropped: nobody can ask any more, stop.
    let _ = stop.wait_for(|s| *s).await;
}

/// One poller: gather a batch, invoke, settle, repeat. Sequential by design,
/// so invocations of one poller never overlap and the total concurrency is
/// the number of pollers, as with `MaximumConcurrency`.
pub(super) async fn poll<H, Fut>(
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
        let outcome = invoke(&handler, &batch, &stats, settings.limit.as_ref()).await;
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

pub(super) async fn receive(
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
