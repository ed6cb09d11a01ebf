//! The orders DLQ on SQS as operators handle it ([`DeadLetters`]): a look
//! at its messages that leaves them there, the redrive that moves chosen
//! ones back to the orders queue, and the discard of copies of moved ones.
//!
//! - Reading a message hides it for a while (its visibility timeout) and
//!   counts a receive; every message read is made visible again at the
//!   end, so the DLQ is as it was (receive counts aside).
//! - A read holds what it took invisible until it is done: a message let
//!   go at once would be received again by the same pass.
//! - A move is a send to the orders queue, then a delete from the DLQ: a
//!   failure between the two leaves the order on both, which the writer's
//!   idempotence by order id makes harmless; the other order of steps
//!   could lose it.
//! - A discard deletes chosen messages without sending them: copies of
//!   messages a redrive sent back, which SQS may still deliver (it
//!   delivers at least once).

use super::sqs::{depth, describe};
use crate::ports::{DeadLetter, DeadLetters, QueueError, Redriven};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use std::collections::HashSet;

/// Receives per pass at most (of up to 10 messages each): a pass ends even
/// on a DLQ that keeps filling.
const MAX_RECEIVES: usize = 60;
/// How long a look holds what it read: long enough to page through the
/// view's messages; each is made visible again before the look returns.
const PEEK_HOLD_SECS: i32 = 10;
/// How long a redrive holds what it read: it also sends and deletes.
const REDRIVE_HOLD_SECS: i32 = 30;

#[derive(Clone)]
pub struct SqsDeadLetters {
    client: Client,
    queue_url: String,
    dlq_url: String,
}

/// One message received, and its handle while it is held.
struct Held {
    letter: DeadLetter,
    receipt: Option<String>,
}

impl SqsDeadLetters {
    pub fn new(client: Client, queue_url: impl Into<String>, dlq_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            dlq_url: dlq_url.into(),
        }
    }

    /// Up to ten messages, held for `hold_secs`. Each receive waits up to
    /// a second: a short poll of a small queue may answer empty while
    /// messages are there.
    async fn receive(&self, hold_secs: i32) -> Result<Vec<Held>, QueueError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.dlq_url)
            .max_number_of_messages(10)
            .visibility_timeout(hold_secs)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| QueueError(describe(&e)))?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                let receive_count = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                Some(Held {
                    letter: DeadLetter {
                        message_id: m.message_id?,
                        body: m.body.unwrap_or_default(),
                        receive_count,
                    },
                    receipt: m.receipt_handle,
                })
            })
            .collect())
    }

    /// Makes held messages visible again. Best effort: one that stays
    /// hidden comes back by itself when its hold ends.
    async fn release(&self, held: &[Held]) {
        for receipt in held.iter().filter_map(|h| h.receipt.as_deref()) {
            if let Err(err) = self
                .client
                .change_message_visibility()
                .queue_url(&self.dlq_url)
                .receipt_handle(receipt)
                .visibility_timeout(0)
                .send()
                .await
            {
                tracing::warn!(err = %describe(&err), "a DLQ message stays hidden until its timeout");
            }
        }
    }

    /// Sends one message back to the orders queue, then deletes it from the
    /// DLQ (see the module's note on the order).
    async fn move_back(&self, held: &Held) -> Result<(), QueueError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(&held.letter.body)
            .send()
            .await
            .map_err(|e| QueueError(describe(&e)))?;
        if let Some(receipt) = &held.receipt
            && let Err(err) = self
                .client
                .delete_message()
                .queue_url(&self.dlq_url)
                .receipt_handle(receipt)
                .send()
                .await
        {
            // Sent already: it will be written (or found a duplicate) either
            // way; the copy left here comes back into view.
            tracing::warn!(message_id = %held.letter.message_id, err = %describe(&err),
                "redriven, but still on the DLQ: it will be delivered twice, harmlessly");
        }
        Ok(())
    }
}

impl DeadLetters for SqsDeadLetters {
    async fn peek(&self, max: usize) -> Result<Vec<DeadLetter>, QueueError> {
        let dlq = depth(&self.client, &self.dlq_url)
            .await
            .map_err(QueueError)?;
        // What the DLQ says it holds: an empty one costs this one call.
        let want = usize::try_from(dlq.visible + dlq.delayed)
            .unwrap_or(usize::MAX)
            .min(max);
        let mut held: Vec<Held> = Vec::new();
        let mut seen = HashSet::new();
        let mut failure = None;
        for _ in 0..MAX_RECEIVES {
            if held.len() >= want {
                break;
            }
            match self.receive(PEEK_HOLD_SECS).await {
                Ok(batch) if batch.is_empty() => break,
                Ok(batch) => held.extend(
                    batch
                        .into_iter()
                        .filter(|h| seen.insert(h.letter.message_id.clone())),
                ),
                Err(err) => {
                    failure = Some(err);
                    break;
                }
            }
        }
        self.release(&held).await;
        if let Some(err) = failure {
            return Err(err);
        }
        Ok(held.into_iter().take(max).map(|h| h.letter).collect())
    }

    async fn redrive(
        &self,
        message_ids: Option<&[String]>,
        max: usize,
    ) -> Result<Redriven, QueueError> {
        self.take(message_ids, max, Step::MoveBack).await
    }

    async fn discard(&self, message_ids: &[String]) -> Result<Vec<String>, QueueError> {
        let done = self
            .take(Some(message_ids), message_ids.len(), Step::Delete)
            .await?;
        Ok(done.moved.into_iter().map(|m| m.message_id).collect())
    }
}

/// What [`SqsDeadLetters::take`] does to each message it chose.
#[derive(Clone, Copy)]
enum Step {
    /// Sent to the orders queue, then deleted from the DLQ.
    MoveBack,
    /// Deleted from the DLQ only.
    Delete,
}

impl SqsDeadLetters {
    /// Deletes a held message from the DLQ.
    async fn delete(&self, held: &Held) -> Result<(), QueueError> {
        let Some(receipt) = &held.receipt else {
            return Err(QueueError(format!(
                "message {} came without a receipt handle",
                held.letter.message_id
            )));
        };
        self.client
            .delete_message()
            .queue_url(&self.dlq_url)
            .receipt_handle(receipt)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| QueueError(describe(&e)))
    }

    /// Receives the messages with these ids (`None`: every message, up to
    /// `max`) and does `step` to each; the rest are made visible again.
    async fn take(
        &self,
        message_ids: Option<&[String]>,
        max: usize,
        step: Step,
    ) -> Result<Redriven, QueueError> {
        let mut wanted: Option<HashSet<&str>> =
            message_ids.map(|ids| ids.iter().map(String::as_str).collect());
        let mut done = Redriven::default();
        let mut others: Vec<Held> = Vec::new();
        let mut seen = HashSet::new();
        'receiving: for _ in 0..MAX_RECEIVES {
            if done.moved.len() >= max || wanted.as_ref().is_some_and(HashSet::is_empty) {
                break;
            }
            let batch = match self.receive(REDRIVE_HOLD_SECS).await {
                Ok(batch) if batch.is_empty() => break,
                Ok(batch) => batch,
                Err(err) => {
                    done.stopped = Some(err.0);
                    break;
                }
            };
            let mut batch = batch.into_iter();
            while let Some(held) = batch.next() {
                let id = held.letter.message_id.clone();
                let chosen = match &mut wanted {
                    Some(wanted) => wanted.remove(id.as_str()),
                    None => done.moved.len() < max,
                };
                if !chosen || !seen.insert(id.clone()) {
                    others.push(held);
                    continue;
                }
                let stepped = match step {
                    Step::MoveBack => self.move_back(&held).await,
                    Step::Delete => self.delete(&held).await,
                };
                match stepped {
                    Ok(()) => done.moved.push(held.letter),
                    Err(err) => {
                        done.stopped = Some(err.0);
                        others.push(held);
                        others.extend(batch);
                        break 'receiving;
                    }
                }
            }
        }
        self.release(&others).await;
        if let Some(wanted) = wanted {
            done.missing = message_ids
                .unwrap_or_default()
                .iter()
                .filter(|id| wanted.contains(id.as_str()))
                .cloned()
                .collect();
        }
        match &done.stopped {
            Some(why) if done.moved.is_empty() => Err(QueueError(why.clone())),
            _ => Ok(done),
        }
    }
}
