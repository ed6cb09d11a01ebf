//! The order queue in memory, with its inspection: every message sent
//! stays on it (nothing receives them). Its DLQ is filled only by a test
//! (`dead`), and a test can have the DLQ redriven into the queue right after
//! the next read of the queue's depth, as an operator's redrive may land
//! between two reads of a rebuild. A batch send applies the mode to each of
//! its messages, as SQS reports each entry of a batch on its own.

use crate::domain::OrderMessage;
use crate::ports::{OrderQueue, QueueDepth, QueueError, QueueInspector, SendError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a [`MemoryQueue`] does with the next sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    #[default]
    Accept,
    Reject,
    Ambiguous,
}

#[derive(Clone, Default)]
pub struct MemoryQueue {
    pub sent: Arc<Mutex<Vec<OrderMessage>>>,
    pub mode: Arc<Mutex<QueueMode>>,
    pub dead: Arc<Mutex<Vec<OrderMessage>>>,
    /// How many batch calls were made.
    pub batch_calls: Arc<AtomicU64>,
    redrive_after_next_depth: Arc<AtomicBool>,
}

impl MemoryQueue {
    pub fn set_mode(&self, mode: QueueMode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    pub fn messages(&self) -> Vec<OrderMessage> {
        self.sent.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Moves the DLQ's messages onto the queue just after the next read of
    /// the queue's depth has answered.
    pub fn redrive_after_next_depth(&self) {
        self.redrive_after_next_depth.store(true, Ordering::SeqCst);
    }

    fn redrive(&self) {
        let (Ok(mut dead), Ok(mut sent)) = (self.dead.lock(), self.sent.lock()) else {
            return;
        };
        sent.append(&mut dead);
    }
}

impl OrderQueue for MemoryQueue {
    async fn send(&self, message: &OrderMessage) -> Result<(), SendError> {
        let mode = self.mode.lock().map(|m| *m).unwrap_or_default();
        match mode {
            QueueMode::Accept => {
                if let Ok(mut sent) = self.sent.lock() {
                    sent.push(message.clone());
                }
                Ok(())
            }
            QueueMode::Reject => Err(SendError::Rejected("memory queue rejects".into())),
            QueueMode::Ambiguous => {
                // Like a timeout after the request went out: it did arrive.
                if let Ok(mut sent) = self.sent.lock() {
                    sent.push(message.clone());
                }
                Err(SendError::Ambiguous("memory queue timed out".into()))
            }
        }
    }

    async fn send_batch(&self, messages: &[OrderMessage]) -> Vec<Result<(), SendError>> {
        self.batch_calls.fetch_add(1, Ordering::SeqCst);
        let mut outcomes = Vec::with_capacity(messages.len());
        for message in messages {
            outcomes.push(self.send(message).await);
        }
        outcomes
    }
}

impl QueueInspector for MemoryQueue {
    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        let depth = QueueDepth {
            visible: self.messages().len() as u64,
            ..QueueDepth::default()
        };
        if self.redrive_after_next_depth.swap(false, Ordering::SeqCst) {
            self.redrive();
        }
        Ok(depth)
    }

    async fn dlq_depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        let dead = self.dead.lock().map(|d| d.len()).unwrap_or_default();
        Ok(Some(QueueDepth {
            visible: dead as u64,
            ..QueueDepth::default()
        }))
    }

    async fn order_ids(&self) -> Result<std::collections::HashSet<String>, QueueError> {
        Ok(self
            .messages()
            .iter()
            .map(|m| m.order_id.to_string())
            .collect())
    }
}
