//! After an invocation: which records to delete and which to leave for a
//! retry (`ReportBatchItemFailures`), the deletes, and on a stop the release
//! (visibility 0) of records gathered but never delivered.

use super::{EventSourceSettings, EventSourceStats, SQS_MAX_BATCH, bump};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsMessage};
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
};
use seckill_shared::adapters::sqs::describe;
use std::collections::HashSet;

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

pub(super) async fn settle(
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
pub(super) async fn release(
    sqs: &aws_sdk_sqs::Client,
    settings: &EventSourceSettings,
    batch: &[SqsMessage],
) {
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
