//! What the live view and the console read of a sale beside the ledger
//! ([`LiveFigures`]): the purchase answers by outcome (`sale:{S}:outcomes`,
//! as the execution environments flushed them), the same per 10-second
//! bucket ([`super::funnel`]), when the sale sold out, and the live view's
//! shared count of the sale's orders.
//!
//! When a sale sold out: `soldOutAtMs` in each key group's meta, set once
//! by the script that empties the group (`purchase.lua` taking its last
//! unit, or `lend.lua` lending it for a sharded sale).

use super::RedisStock;
use super::funnel::key as funnel_key;
use super::keys::SaleKeys;
use crate::domain::{Sale, SaleId};
use crate::ports::{FunnelBucket, LiveFigures, StoreError};
use std::collections::BTreeMap;

impl LiveFigures for RedisStock {
    async fn outcomes(
        &self,
        sale_id: &SaleId,
    ) -> Result<std::collections::BTreeMap<String, u64>, StoreError> {
        let key = SaleKeys::new(sale_id).outcomes;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HGETALL").arg(&key).query_async(&mut conn).await
        };
        let all: std::collections::BTreeMap<String, String> = self.bounded(call).await?;
        all.into_iter()
            .map(|(outcome, n)| {
                n.parse::<u64>()
                    .map(|n| (outcome, n))
                    .map_err(|_| StoreError::Protocol(format!("outcome count {n:?}")))
            })
            .collect()
    }

    /// The live view's last count of the sale's orders, if kept.
    async fn order_counts(
        &self,
        sale_id: &SaleId,
    ) -> Result<Option<crate::ports::OrderCounts>, StoreError> {
        let key = SaleKeys::new(sale_id).order_counts;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("GET").arg(&key).query_async(&mut conn).await
        };
        let raw: Option<String> = self.bounded(call).await?;
        raw.map(|raw| {
            serde_json::from_str(&raw)
                .map_err(|e| StoreError::Protocol(format!("order counts: {e}")))
        })
        .transpose()
    }

    /// `SET NX PX`: true when this caller counts the orders next.
    async fn claim_order_count(
        &self,
        sale_id: &SaleId,
        hold: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let key = SaleKeys::new(sale_id).order_counting;
        let ms = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX).max(1);
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(ms)
                .query_async(&mut conn)
                .await
        };
        let set: Option<String> = self.bounded(call).await?;
        Ok(set.is_some())
    }

    /// Keeps a count for an hour: a console polling after that counts
    /// again (and a sale's keys are long gone by then).
    async fn store_order_counts(
        &self,
        sale_id: &SaleId,
        counts: &crate::ports::OrderCounts,
    ) -> Result<(), StoreError> {
        let key = SaleKeys::new(sale_id).order_counts;
        let json =
            serde_json::to_string(counts).map_err(|e| StoreError::Protocol(e.to_string()))?;
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("SET")
                .arg(&key)
                .arg(json)
                .arg("PX")
                .arg(3_600_000)
                .query_async::<()>(&mut conn)
                .await
        };
        self.bounded(call).await
    }

    /// The moment the sale first sold out: its one group's `soldOutAtMs`,
    /// or for a sharded sale the latest of its shards' once every shard
    /// has one (the last shard to run dry). `None` before, and when Redis
    /// does not hold the sale (a rebuild starts the record again).
    async fn sold_out_at(&self, sale: &Sale) -> Result<Option<i64>, StoreError> {
        let groups: Vec<SaleKeys> = if sale.shards > 1 {
            (0..sale.shards)
                .map(|k| SaleKeys::shard(&sale.sale_id, k))
                .collect()
        } else {
            vec![SaleKeys::new(&sale.sale_id)]
        };
        let mut latest = None;
        for keys in &groups {
            let call = async {
                let mut conn = self.conn.get().await?;
                redis::cmd("HGET")
                    .arg(&keys.meta)
                    .arg("soldOutAtMs")
                    .query_async::<Option<String>>(&mut conn)
                    .await
            };
            let at = self.bounded(call).await?;
            let Some(at) = at.and_then(|v| v.parse::<i64>().ok()) else {
                return Ok(None);
            };
            latest = latest.max(Some(at));
        }
        Ok(latest)
    }

    /// The sale's funnel, oldest bucket first; empty when none was kept.
    async fn funnel(&self, sale_id: &SaleId) -> Result<Vec<FunnelBucket>, StoreError> {
        let key = funnel_key(sale_id);
        let call = async {
            let mut conn = self.conn.get().await?;
            redis::cmd("HGETALL")
                .arg(&key)
                .query_async::<BTreeMap<String, String>>(&mut conn)
                .await
        };
        let all = self.bounded(call).await?;
        let mut buckets = all
            .into_iter()
            .map(|(at, counts)| {
                let at = at
                    .parse::<i64>()
                    .map_err(|_| StoreError::Protocol(format!("funnel bucket {at:?}")))?;
                let counts = serde_json::from_str::<BTreeMap<String, u64>>(&counts)
                    .map_err(|_| StoreError::Protocol(format!("funnel counts {counts:?}")))?;
                Ok((at, counts))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        buckets.sort_by_key(|(at, _)| *at);
        Ok(buckets)
    }
}
