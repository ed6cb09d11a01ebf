//! `SqsEvent` in, `SqsBatchResponse` out. Every record is handed over on its
//! own; the shared writer decides per record. Failures are reported by
//! message id so SQS retries only those (and moves them to the DLQ after
//! `maxReceiveCount`); a batch in which every record failed is an error.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use lambda_runtime::{Diagnostic, LambdaEvent};
use seckill_shared::app::order_writer::{OrderWriter, QueueRecord};
use seckill_shared::observe::metrics::Invocation;
use seckill_shared::ports::{OrderStore, SaleCatalog, StockStore};

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("all {0} records of the batch failed")]
    AllFailed(usize),
    #[error("a record has no messageId, so failures cannot be reported per record")]
    MissingMessageId,
}

/// The one place a writer error becomes what Lambda records.
impl From<WriterError> for Diagnostic {
    fn from(err: WriterError) -> Self {
        let error_type = match err {
            WriterError::AllFailed(_) => "AllRecordsFailed",
            WriterError::MissingMessageId => "MissingMessageId",
        };
        Diagnostic {
            error_type: error_type.into(),
            error_message: err.to_string(),
        }
    }
}

pub async fn handle<O, S, C>(
    writer: &OrderWriter<O, S, C>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, WriterError>
where
    O: OrderStore,
    S: StockStore,
    C: SaleCatalog,
{
    let invocation = Invocation::request(&event.context.request_id);
    let records = event
        .payload
        .records
        .into_iter()
        .map(|r| {
            // Lambda always sets it; a record without one is a first delivery.
            let receive_count = r
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            Ok(QueueRecord {
                message_id: r.message_id.ok_or(WriterError::MissingMessageId)?,
                body: r.body.unwrap_or_default(),
                receive_count,
            })
        })
        .collect::<Result<Vec<_>, WriterError>>()?;
    let report = writer.write_batch(&records).await;
    writer.metrics().invocation_done(&invocation);
    tracing::info!(
        records = records.len(),
        written = report.written,
        duplicates = report.duplicates,
        rejected = report.rejected,
        poison = report.poison,
        transient = report.transient,
        "batch done"
    );
    if !records.is_empty() && report.failed.len() >= records.len() {
        return Err(WriterError::AllFailed(records.len()));
    }
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = report
        .failed
        .into_iter()
        .map(|id| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            failure
        })
        .collect();
    Ok(response)
}
