//! An [`App`]'s orders queue: what is on it, taken off it, or drained
//! through the order-writer as the event source does, and its depth.

use crate::app::App;
use crate::events::{invoke_writer, sqs_event};
use seckill_shared::domain::OrderMessage;

impl App {
    /// Every message on the queue (received, left to reappear later).
    pub async fn drain_queue(&self) -> Vec<OrderMessage> {
        let mut out = Vec::new();
        // The messages sent, each once: a standard queue (and the strict
        // layer) may deliver one twice, under its own MessageId.
        let mut seen = std::collections::HashSet::new();
        let mut empty_in_a_row = 0;
        while empty_in_a_row < 2 {
            let messages = self.receive_ten(Some(300)).await;
            if messages.is_empty() {
                empty_in_a_row += 1;
            } else {
                empty_in_a_row = 0;
            }
            for m in messages {
                if seen.insert(m.message_id.clone().unwrap_or_default()) {
                    out.push(serde_json::from_str(m.body.as_deref().unwrap()).unwrap());
                }
            }
        }
        out
    }

    /// Receives every message on the queue and deletes it, as the
    /// event source does after a successful batch.
    pub async fn take_messages(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        loop {
            let got = self.receive_ten(None).await;
            if got.is_empty() {
                return out;
            }
            for m in got {
                self.delete_received(&m).await;
                // A second delivery of one message (at least once) is
                // taken off the queue, not counted again.
                let id = m.message_id.unwrap();
                if !out.iter().any(|(seen, _)| *seen == id) {
                    out.push((id, m.body.unwrap()));
                }
            }
        }
    }

    /// Drains the queue through the order-writer: every message written,
    /// then deleted, as the event source does (a message deleted before its
    /// order is written would let a rebuild running meanwhile see neither).
    pub async fn write_queued_orders(&self) {
        self.write_queued_orders_pausing(|| async {}).await
    }

    /// [`Self::write_queued_orders`], awaiting `between` after each batch
    /// is written, so a test can interleave its own steps with the writes
    /// whatever the machine's pace.
    pub async fn write_queued_orders_pausing<F, Fut>(&self, mut between: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let writer = self.writer().await;
        let mut seen = std::collections::HashSet::new();
        loop {
            let got = self.receive_ten(Some(300)).await;
            if got.is_empty() {
                return;
            }
            // A second delivery of one message (at least once) is written
            // once more (a duplicate) and deleted like the first.
            let records: Vec<(String, String)> = got
                .iter()
                .map(|m| (m.message_id.clone().unwrap(), m.body.clone().unwrap()))
                .collect();
            let fresh: Vec<(&str, &str)> = records
                .iter()
                .filter(|(id, _)| seen.insert(id.clone()))
                .map(|(id, body)| (id.as_str(), body.as_str()))
                .collect();
            if !fresh.is_empty() {
                let failures = invoke_writer(&writer, sqs_event(&fresh)).await.unwrap();
                assert!(failures.is_empty(), "{failures:?}");
            }
            for m in &got {
                self.delete_received(m).await;
            }
            between().await;
        }
    }

    /// Up to ten messages of this test's queue, without waiting (held for
    /// `visibility` seconds, or the queue's own timeout).
    async fn receive_ten(&self, visibility: Option<i32>) -> Vec<aws_sdk_sqs::types::Message> {
        self.sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .set_visibility_timeout(visibility)
            .wait_time_seconds(0)
            .send()
            .await
            .unwrap()
            .messages
            .unwrap_or_default()
    }

    async fn delete_received(&self, m: &aws_sdk_sqs::types::Message) {
        self.sqs
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(m.receipt_handle.clone().unwrap())
            .send()
            .await
            .unwrap();
    }

    /// Visible plus in-flight messages of a queue.
    pub async fn depth_of(&self, queue_url: &str) -> u64 {
        self.try_depth_of(queue_url).await.unwrap()
    }

    /// [`App::depth_of`] for a poll: a count the busy emulator did not
    /// answer in time is tried again, not a verdict.
    pub async fn try_depth_of(&self, queue_url: &str) -> Option<u64> {
        let depth = seckill_shared::adapters::sqs::depth(&self.sqs, queue_url)
            .await
            .ok()?;
        Some(depth.visible + depth.in_flight)
    }

    /// Messages on the queue, visible or not, by the queue's own count.
    pub async fn queue_depth(&self) -> u64 {
        self.depth_of(&self.queue_url).await
    }
}
