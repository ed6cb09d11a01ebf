//! The cluster rows' machinery: a sale whose shards spread evenly over the
//! masters, and each master's script calls.

use crate::BoxError;
use seckill_shared::adapters::memory::test_sale;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::domain::Sale;
use std::collections::BTreeMap;

/// Rounds of the cluster rows (each side's median is shown).
pub(crate) const CLUSTER_ROUNDS: usize = 3;

/// A connection to one cluster node, for its own statistics.
pub(crate) async fn node_conn(port: u16) -> Result<redis::aio::MultiplexedConnection, BoxError> {
    Ok(redis::Client::open(format!("redis://127.0.0.1:{port}"))?
        .get_multiplexed_async_connection()
        .await?)
}

/// EVALSHA calls one node served since its last `CONFIG RESETSTAT`.
pub(crate) async fn evalsha_calls(port: u16) -> Result<u64, BoxError> {
    let mut node = node_conn(port).await?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut node)
        .await?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

/// A sale for the cluster rows. With 8 shards, an id whose shards spread
/// 3/3/2 over the three masters (the best 8 can do on 3; a sale id fixes its
/// slots, so the bench picks one rather than depend on luck).
pub(crate) async fn cluster_sale(
    tag: &str,
    stock: u32,
    shards: u32,
    ports: &[u16],
) -> Result<Sale, BoxError> {
    let first = ports
        .first()
        .copied()
        .ok_or("REDIS_CLUSTER_PORTS is empty")?;
    let mut node = node_conn(first).await?;
    let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut node)
        .await?;
    let mut owners: Vec<(i64, i64, i64)> = Vec::new();
    for range in ranges {
        if let redis::Value::Array(parts) = range
            && let [start, end, redis::Value::Array(master), ..] = parts.as_slice()
            && let Some(port) = master.get(1)
        {
            owners.push((
                redis::from_redis_value(start.clone())?,
                redis::from_redis_value(end.clone())?,
                redis::from_redis_value(port.clone())?,
            ));
        }
    }
    for attempt in 0..1_000 {
        let mut sale = test_sale(&format!("{tag}-c{shards}-{attempt}"), stock, 1)?;
        sale.shards = shards;
        if shards == 1 {
            return Ok(sale);
        }
        let mut per_master: BTreeMap<i64, u32> = BTreeMap::new();
        for k in 0..shards {
            let key = SaleKeys::shard(&sale.sale_id, k).stock;
            let slot: i64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&key)
                .query_async(&mut node)
                .await?;
            if let Some((_, _, port)) = owners.iter().find(|(a, b, _)| (*a..=*b).contains(&slot)) {
                *per_master.entry(*port).or_default() += 1;
            }
        }
        let counts: Vec<u32> = per_master.values().copied().collect();
        if counts.len() == ports.len()
            && counts.iter().max().copied().unwrap_or(0)
                <= counts.iter().min().copied().unwrap_or(0) + 1
        {
            return Ok(sale);
        }
    }
    Err("no sale id spreads 8 shards evenly over the masters".into())
}
