//! The event Lambda builds from received messages, and one invocation of
//! the handler with it.

use super::{EventSourceStats, bump};
use crate::lambda_limits::{FunctionLimit, InvokeError};
use aws_lambda_events::encodings::Base64Data;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::Message;
use std::future::Future;

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
/// Invokes the handler once for the batch, under `limit`. It runs as its
/// own task so a panicking handler fails its batch, as a crashed invocation
/// does in Lambda, instead of taking the poller down; a timed-out one is
/// aborted (its task would otherwise run on). A throttled invocation never
/// starts the handler; like a timed-out one it fails the whole batch.
pub(super) async fn invoke<H, Fut>(
    handler: &H,
    batch: &[SqsMessage],
    stats: &EventSourceStats,
    limit: Option<&FunctionLimit>,
) -> Result<SqsBatchResponse, String>
where
    H: Fn(SqsEvent) -> Fut,
    Fut: Future<Output = Result<SqsBatchResponse, String>> + Send + 'static,
{
    let mut event = SqsEvent::default();
    event.records = batch.to_vec();
    let run = |event: SqsEvent| {
        bump(&stats.invocations, 1);
        bump(&stats.records_delivered, batch.len());
        let task = tokio::spawn(handler(event));
        let abort = task.abort_handle();
        // Aborts the task when the future is dropped at the timeout.
        let guard = AbortOnDrop(abort);
        async move {
            let joined = task.await;
            drop(guard);
            match joined {
                Ok(outcome) => outcome,
                Err(err) => Err(format!("handler task failed: {err}")),
            }
        }
    };
    let Some(limit) = limit else {
        return run(event).await;
    };
    // The slot is taken before the handler starts: a throttled batch never
    // reaches it.
    match limit.invoke(async { run(event).await }).await {
        Ok(outcome) => outcome,
        Err(err) => {
            match err {
                InvokeError::TimedOut { .. } => bump(&stats.timed_out, 1),
                InvokeError::Throttled { .. } | InvokeError::ScalingThrottled { .. } => {
                    bump(&stats.throttled, 1)
                }
            }
            Err(err.to_string())
        }
    }
}

/// Aborts a spawned invocation unless it finished first.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
