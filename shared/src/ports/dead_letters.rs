//! The orders DLQ as the console handles it: its messages, read and
//! moved back ([`DeadLetters`]), and what is kept beside it in the stock
//! store ([`WriteErrorLog`]): why the writer failed each order, and which
//! messages a redrive sent back. Re-exported by [`crate::ports`].

use super::*;

/// What the console's DLQ view keeps beside the queue: the order-writer's
/// last failure per order, shown beside a dead letter, and the messages a
/// redrive sent back.
pub trait WriteErrorLog: Send + Sync {
    /// The last failure the order-writer kept for each of these orders of
    /// one sale ([`StockStore::record_write_error`]), in the same order;
    /// `None` where none was kept. A store that keeps none has none.
    fn write_errors(
        &self,
        _sale_id: &SaleId,
        order_ids: &[&OrderId],
    ) -> impl Future<Output = Result<Vec<Option<WriteFailure>>, StoreError>> + Send {
        std::future::ready(Ok(vec![None; order_ids.len()]))
    }

    /// Keeps that these DLQ messages, of this sale's orders, were sent back
    /// to the orders queue: SQS delivers at least once, so a copy of one
    /// may still come out of the DLQ, and the view knows it for a copy by
    /// its id ([`Self::redriven`]).
    fn keep_redriven(
        &self,
        _sale_id: &SaleId,
        _message_ids: &[&str],
        _at_ms: i64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(Ok(()))
    }

    /// For each of these DLQ message ids of one sale's orders, whether a
    /// redrive sent it back already ([`Self::keep_redriven`]), in the same
    /// order. A store that keeps none knows of none.
    fn redriven(
        &self,
        _sale_id: &SaleId,
        message_ids: &[&str],
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send {
        std::future::ready(Ok(vec![false; message_ids.len()]))
    }
}

/// A message on the orders DLQ, read without taking it off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub message_id: String,
    pub body: String,
    /// SQS's `ApproximateReceiveCount`: the writer's receives, plus one for
    /// each read of the DLQ (this one included).
    pub receive_count: u32,
}

/// What a redrive moved back to the orders queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redriven {
    /// The messages sent to the orders queue and deleted from the DLQ.
    pub moved: Vec<DeadLetter>,
    /// Ids asked for that the DLQ did not hold (already moved, or never
    /// there).
    pub missing: Vec<String>,
    /// Why it stopped early, when a send failed after some were moved.
    pub stopped: Option<String>,
}

/// The orders queue's DLQ as operators handle it: look at what is in it,
/// and move messages back to the orders queue once the cause is fixed.
/// Moving is a send then a delete: a message sent but not deleted is
/// delivered twice, which the writer's idempotence makes harmless.
pub trait DeadLetters: Send + Sync {
    /// Up to `max` messages, each left on the DLQ (visible again at once).
    fn peek(&self, max: usize) -> impl Future<Output = Result<Vec<DeadLetter>, QueueError>> + Send;

    /// Moves the messages with these ids (`None`: every message, up to
    /// `max`) back to the orders queue.
    fn redrive(
        &self,
        message_ids: Option<&[String]>,
        max: usize,
    ) -> impl Future<Output = Result<Redriven, QueueError>> + Send;

    /// Deletes the messages with these ids from the DLQ, sending them
    /// nowhere: copies of messages a redrive sent back already. The ids
    /// deleted (one not found is not there to delete).
    fn discard(
        &self,
        message_ids: &[String],
    ) -> impl Future<Output = Result<Vec<String>, QueueError>> + Send;
}
