//! When a sale sold out: `soldOutAtMs` in each key group's meta, set once
//! by the script that empties the group (`purchase.lua` taking its last
//! unit, or `lend.lua` lending it for a sharded sale).

use super::RedisStock;
use super::keys::SaleKeys;
use crate::domain::Sale;
use crate::ports::StoreError;

impl RedisStock {
    /// The moment the sale first sold out: its one group's `soldOutAtMs`,
    /// or for a sharded sale the latest of its shards' once every shard
    /// has one (the last shard to run dry). `None` before, and when Redis
    /// does not hold the sale (a rebuild starts the record again).
    pub async fn sold_out_at(&self, sale: &Sale) -> Result<Option<i64>, StoreError> {
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
}
