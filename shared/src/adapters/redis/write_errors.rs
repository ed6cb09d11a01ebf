//! Why the order-writer last failed to write an order, kept for the
//! operator's DLQ view: `sale:{S}:writeerrors`, a hash on the sale's own
//! tag (a sharded sale's directory), order id -> a [`WriteFailure`] as JSON.
//!
//! Not a sale key like the others: a message can sit in the DLQ for as
//! long as the DLQ keeps it (14 days), well past the sale's keys, and a
//! failure is worth keeping while the sale is not in Redis at all. So the
//! hash has its own TTL, [`WRITE_ERRORS_TTL`], moved on by every write; it
//! holds one field per order that ever failed, bounded by the orders.
//!
//! Beside it, `sale:{S}:redriven`: DLQ message id -> when a redrive sent it
//! back (ms), same tag and TTL. SQS delivers at least once, so a copy of a
//! message sent back may still come out of the DLQ; the view knows it by
//! its id, and deletes it rather than list it again.

use super::RedisStock;
use crate::domain::{OrderId, SaleId};
use crate::ports::{StoreError, WriteErrorLog, WriteFailure};
use std::time::Duration;

/// The DLQ's retention (`template.yaml`'s `OrdersDLQ`): nothing older can
/// still be asked about.
pub const WRITE_ERRORS_TTL: Duration = Duration::from_secs(14 * 24 * 3600);

fn key(sale_id: &SaleId) -> String {
    format!("sale:{{{sale_id}}}:writeerrors")
}

fn redriven_key(sale_id: &SaleId) -> String {
    format!("sale:{{{sale_id}}}:redriven")
}

fn ttl_ms() -> u64 {
    u64::try_from(WRITE_ERRORS_TTL.as_millis()).unwrap_or(u64::MAX)
}

impl RedisStock {
    /// Keeps `failure` as the order's last, replacing what was kept.
    pub(super) async fn keep_write_error(
        &self,
        sale_id: &SaleId,
        failure: &WriteFailure,
    ) -> Result<(), StoreError> {
        let key = key(sale_id);
        let value = serde_json::to_string(failure)
            .map_err(|e| StoreError::Protocol(format!("unserialisable failure: {e}")))?;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::pipe()
                .cmd("HSET")
                .arg(&key)
                .arg(failure.order_id.as_str())
                .arg(&value)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(ttl_ms())
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        };
        self.bounded(call).await
    }
}

impl WriteErrorLog for RedisStock {
    /// The last failure kept for each of these orders of one sale, in the
    /// same order; `None` where none was (or it was unreadable).
    async fn write_errors(
        &self,
        sale_id: &SaleId,
        order_ids: &[&OrderId],
    ) -> Result<Vec<Option<WriteFailure>>, StoreError> {
        if order_ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = key(sale_id);
        let call = async {
            let mut conn = self.conn.get().await?;
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&key);
            for id in order_ids {
                cmd.arg(id.as_str());
            }
            cmd.query_async::<Vec<Option<String>>>(&mut conn).await
        };
        let raw = self.bounded(call).await?;
        Ok(raw
            .into_iter()
            .map(|v| v.and_then(|json| serde_json::from_str(&json).ok()))
            .collect())
    }

    async fn keep_redriven(
        &self,
        sale_id: &SaleId,
        message_ids: &[&str],
        at_ms: i64,
    ) -> Result<(), StoreError> {
        if message_ids.is_empty() {
            return Ok(());
        }
        let key = redriven_key(sale_id);
        let call = async {
            let mut conn = self.conn.get().await?;
            let mut pipe = redis::pipe();
            let hset = pipe.cmd("HSET").arg(&key);
            for id in message_ids {
                hset.arg(*id).arg(at_ms);
            }
            hset.ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(ttl_ms())
                .ignore()
                .query_async::<()>(&mut conn)
                .await
        };
        self.bounded(call).await
    }

    async fn redriven(
        &self,
        sale_id: &SaleId,
        message_ids: &[&str],
    ) -> Result<Vec<bool>, StoreError> {
        if message_ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = redriven_key(sale_id);
        let call = async {
            let mut conn = self.conn.get().await?;
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&key);
            for id in message_ids {
                cmd.arg(*id);
            }
            cmd.query_async::<Vec<Option<String>>>(&mut conn).await
        };
        Ok(self
            .bounded(call)
            .await?
            .into_iter()
            .map(|v| v.is_some())
            .collect())
    }
}
