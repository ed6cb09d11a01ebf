//! The orders queue as SQS keeps it: at-least-once and unordered. A
//! received message stays, invisible for the visibility timeout, until the
//! writer deletes it; a message received `max_receives` times and not
//! deleted moves to the DLQ on its next receive; the scheduler can deliver
//! a message twice (a second copy under the same id) and receives come in
//! any order.

use super::sched::{Sched, Step};
use crate::app::order_writer::QueueRecord;
use crate::domain::OrderMessage;
use crate::ports::{OrderQueue, QueueDepth, QueueError, QueueInspector, SendError};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Clone, Hash)]
pub(crate) struct Message {
    pub(crate) message_id: String,
    /// This copy's receipt (a duplicate is another copy of the same id).
    pub(crate) receipt: u64,
    pub(crate) body: String,
    pub(crate) order_id: String,
    pub(crate) receives: u32,
    pub(crate) visible_at_ms: i64,
}

#[derive(Default)]
struct Inner {
    messages: Vec<Message>,
    dlq: Vec<Message>,
    next: u64,
    /// Order ids a send of which ended unknown (the one window the design
    /// leaves open when Redis then loses the reservation).
    ambiguous: std::collections::BTreeSet<String>,
}

#[derive(Clone)]
pub(crate) struct SimQueue {
    inner: Arc<Mutex<Inner>>,
    sched: Arc<Sched>,
    max_receives: u32,
}

impl SimQueue {
    pub(crate) fn new(sched: Arc<Sched>, max_receives: u32) -> Self {
        Self {
            inner: Arc::default(),
            sched,
            max_receives,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, body: String, order_id: String) {
        let mut inner = self.lock();
        inner.next += 1;
        let n = inner.next;
        inner.messages.push(Message {
            message_id: format!("m{n}"),
            receipt: n,
            body,
            order_id,
            receives: 0,
            visible_at_ms: 0,
        });
    }

    /// Up to `max` visible messages, picked in any order, invisible until
    /// `now_ms + visibility_ms`; those past their receives go to the DLQ.
    pub(crate) fn receive(&self, now_ms: i64, max: usize, visibility_ms: i64) -> Vec<QueueRecord> {
        let mut out = Vec::new();
        while out.len() < max {
            let visible: Vec<usize> = {
                let inner = self.lock();
                (0..inner.messages.len())
                    .filter(|&i| inner.messages[i].visible_at_ms <= now_ms)
                    .collect()
            };
            if visible.is_empty() {
                break;
            }
            let pick = self.sched.draw(visible.len() as u64);
            let at = visible[usize::try_from(pick).unwrap_or(0)];
            let mut inner = self.lock();
            if inner.messages[at].receives >= self.max_receives {
                let dead = inner.messages.remove(at);
                inner.dlq.push(dead);
                continue;
            }
            let m = &mut inner.messages[at];
            m.receives += 1;
            m.visible_at_ms = now_ms + visibility_ms;
            out.push(QueueRecord {
                message_id: format!("{}#{}", m.message_id, m.receipt),
                body: m.body.clone(),
                receive_count: m.receives,
            });
        }
        out
    }

    /// Deletes the copy a record was received as.
    pub(crate) fn delete(&self, record_id: &str) {
        let receipt = record_id
            .rsplit_once('#')
            .and_then(|(_, r)| r.parse::<u64>().ok());
        self.lock().messages.retain(|m| Some(m.receipt) != receipt);
    }

    /// Delivers one message twice: a second copy under the same id.
    pub(crate) fn duplicate_one(&self) -> bool {
        let n = self.lock().messages.len() as u64;
        if n == 0 {
            return false;
        }
        let at = usize::try_from(self.sched.draw(n)).unwrap_or(0);
        let mut inner = self.lock();
        inner.next += 1;
        let mut copy = inner.messages[at].clone();
        copy.receipt = inner.next;
        copy.receives = 0;
        copy.visible_at_ms = 0;
        inner.messages.push(copy);
        true
    }

    /// The operator's redrive: every DLQ message back on the queue.
    pub(crate) fn redrive(&self) -> usize {
        let mut inner = self.lock();
        let mut back: Vec<Message> = std::mem::take(&mut inner.dlq);
        let n = back.len();
        for m in &mut back {
            m.receives = 0;
            m.visible_at_ms = 0;
        }
        inner.messages.extend(back);
        n
    }

    pub(crate) fn is_empty(&self) -> bool {
        let inner = self.lock();
        inner.messages.is_empty() && inner.dlq.is_empty()
    }

    pub(crate) fn dlq_len(&self) -> usize {
        self.lock().dlq.len()
    }

    /// Every order id on the queue or its DLQ.
    pub(crate) fn all_order_ids(&self) -> HashSet<String> {
        let inner = self.lock();
        inner
            .messages
            .iter()
            .chain(inner.dlq.iter())
            .map(|m| m.order_id.clone())
            .collect()
    }

    /// Whether a send of `order_id` ever ended unknown.
    pub(crate) fn was_ambiguous(&self, order_id: &str) -> bool {
        self.lock().ambiguous.contains(order_id)
    }

    pub(crate) fn messages(&self) -> Vec<Message> {
        let inner = self.lock();
        inner
            .messages
            .iter()
            .chain(inner.dlq.iter())
            .cloned()
            .collect()
    }
}

impl OrderQueue for SimQueue {
    async fn send(&self, message: &OrderMessage) -> Result<(), SendError> {
        let step = self.sched.gate("sqs.send", true).await;
        if step.applies() {
            let body =
                serde_json::to_string(message).map_err(|e| SendError::Rejected(e.to_string()))?;
            self.push(body, message.order_id.to_string());
        }
        let answer = match step {
            Step::Go => Ok(()),
            Step::FailAfter | Step::KillAfter => {
                Err(SendError::Ambiguous("simulated: sent, no answer".into()))
            }
            // Half of the failures before the send are timeouts too: the
            // sender cannot tell that nothing arrived.
            _ if self.sched.chance(500) => Err(SendError::Ambiguous("simulated: no answer".into())),
            _ => Err(SendError::Rejected("simulated: refused".into())),
        };
        if matches!(answer, Err(SendError::Ambiguous(_))) {
            self.lock().ambiguous.insert(message.order_id.to_string());
        }
        answer
    }
}

impl QueueInspector for SimQueue {
    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        let step = self.sched.gate("sqs.depth", false).await;
        if step != Step::Go {
            return Err(QueueError("simulated: depth did not answer".into()));
        }
        let now = crate::clock::now_ms();
        let inner = self.lock();
        let visible = inner
            .messages
            .iter()
            .filter(|m| m.visible_at_ms <= now)
            .count() as u64;
        Ok(QueueDepth {
            visible,
            in_flight: inner.messages.len() as u64 - visible,
            delayed: 0,
        })
    }

    async fn dlq_depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        let step = self.sched.gate("sqs.dlq_depth", false).await;
        if step != Step::Go {
            return Err(QueueError("simulated: depth did not answer".into()));
        }
        Ok(Some(QueueDepth {
            visible: self.dlq_len() as u64,
            ..QueueDepth::default()
        }))
    }

    async fn order_ids(&self) -> Result<HashSet<String>, QueueError> {
        let step = self.sched.gate("sqs.order_ids", false).await;
        if step != Step::Go {
            return Err(QueueError("simulated: peek did not answer".into()));
        }
        Ok(self.all_order_ids())
    }
}
