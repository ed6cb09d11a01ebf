//! Sharded sales: which layout a sale has, the key groups this environment
//! knows, and borrowing units from other shards (`lend.lua`, `receive.lua`).

use super::connection::{Conn, unavailable};
use super::keys::SaleKeys;
use super::replies::Peeked;
use super::replies::{master_of_slot, parse_i64, protocol};
use super::scripts::{LendArgs, ReceiveArgs, request_id};
use super::{KEY_CACHE_SALES, Known, RedisStock};
use crate::domain::SaleId;
use crate::domain::borrowing::donors;
use crate::domain::shard_layout::ShardLayout;
use crate::ports::StoreError;
use redis::RedisError;

impl RedisStock {
    /// The key groups of a sale of this layout, cached for the next purchase.
    pub(super) fn remember(&self, sale_id: &SaleId, layout: ShardLayout) -> Known {
        let n = layout.shards();
        let known = Known {
            groups: (0..n).map(|k| SaleKeys::of(sale_id, n, k)).collect(),
            layout,
        };
        if let Ok(mut cache) = self.keys.write() {
            if cache.len() >= KEY_CACHE_SALES {
                cache.clear();
            }
            cache.insert(sale_id.to_string(), known.clone());
        }
        known
    }

    /// The key groups this environment knows for the sale (one group until
    /// Redis says the sale is sharded).
    pub(super) fn known(&self, sale_id: &SaleId) -> Known {
        if let Ok(cache) = self.keys.read()
            && let Some(found) = cache.get(sale_id.as_str())
        {
            return found.clone();
        }
        self.remember(sale_id, ShardLayout::uniform(1))
    }

    /// How many shards Redis holds the sale in, from its directory keys;
    /// `None` when the sale is not there.
    pub async fn shard_count(&self, sale_id: &SaleId) -> Result<Option<u32>, StoreError> {
        Ok(self.layout(sale_id).await?.map(|l| l.shards()))
    }

    /// The sale's shards and homes as its directory says; `None` when the
    /// sale is not in Redis.
    pub async fn layout(&self, sale_id: &SaleId) -> Result<Option<ShardLayout>, StoreError> {
        let keys = SaleKeys::new(sale_id);
        Ok(match self.peek(&keys, "").await? {
            None => None,
            Some(Peeked::View(_)) => Some(ShardLayout::uniform(1)),
            Some(Peeked::Sharded(layout)) => Some(layout),
        })
    }

    /// The home table a new sharded sale gets: on a cluster, one that gives
    /// every master the same share of buyers (from where the shards' slots
    /// sit now); on one node, none (the uniform hash). Balancing is worth a
    /// few commands at load time but never a failed load: if the cluster
    /// will not say where the slots are, the uniform hash it is.
    pub(super) async fn new_layout(&self, sale_id: &SaleId, shards: u32) -> ShardLayout {
        if shards <= 1 || matches!(self.conn, Conn::Single(_)) {
            return ShardLayout::uniform(shards);
        }
        match self.slot_owners(sale_id, shards).await {
            Ok(owners) => ShardLayout::balanced(&owners),
            Err(err) => {
                tracing::warn!(sale_id = %sale_id, error = %err, "cluster topology unknown; homes by the uniform hash");
                ShardLayout::uniform(shards)
            }
        }
    }

    /// The master (`host:port`) serving each shard's slot, from `CLUSTER
    /// KEYSLOT` and `CLUSTER SLOTS`.
    pub(super) async fn slot_owners(
        &self,
        sale_id: &SaleId,
        shards: u32,
    ) -> Result<Vec<String>, StoreError> {
        let call = async {
            let mut conn = self.conn.get().await?;
            let map: redis::Value = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut conn)
                .await?;
            let mut owners = Vec::with_capacity(shards as usize);
            for k in 0..shards {
                let slot: i64 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(&SaleKeys::shard(sale_id, k).meta)
                    .query_async(&mut conn)
                    .await?;
                owners.push(master_of_slot(&map, slot));
            }
            Ok::<_, RedisError>(owners)
        };
        let owners = match tokio::time::timeout(self.timeout * 4, call).await {
            Ok(reply) => reply.map_err(unavailable)?,
            Err(_) => return Err(StoreError::Unavailable("timed out".into())),
        };
        owners
            .into_iter()
            .map(|o| o.ok_or_else(|| StoreError::Protocol("a slot no master serves".into())))
            .collect()
    }

    /// Moves units from other shards to `home` until it has `need` more or
    /// every other shard is empty. Returns how many arrived.
    pub(super) async fn borrow(
        &self,
        groups: &[SaleKeys],
        home: usize,
        need: u64,
    ) -> Result<u64, StoreError> {
        let n = groups.len();
        let home_keys = &groups[home];
        let now = crate::clock::now_ms();
        let mut got = 0u64;
        for donor in donors(home, n) {
            let donor = &groups[donor];
            let id = transfer_id(now);
            let lent: Vec<String> = self
                .run(&LendArgs {
                    donor,
                    transfer_id: &id,
                    need: need - got,
                    home,
                    now_ms: now,
                })
                .await?;
            let units = match lent.as_slice() {
                [tag, units] if tag == "LENT" => units.clone(),
                [tag] if tag == "SHORT" || tag == "MISSING" => continue,
                other => return Err(protocol(other)),
            };
            // If this call dies here the units are in `lent` and not in
            // `received`: reconcile finishes the transfer.
            let received: Vec<String> = self
                .run(&ReceiveArgs {
                    home: home_keys,
                    transfer_id: &id,
                    units: &units,
                })
                .await?;
            if received.first().map(String::as_str) == Some("RECEIVED") {
                got += u64::try_from(parse_i64(&units)?).unwrap_or(0);
            }
            if got >= need {
                break;
            }
        }
        Ok(got)
    }
}

/// The id of one transfer a borrow starts at `now_ms`: unique across
/// execution environments, because `lend.lua` answers an id it has seen as
/// a replay of that loan without deducting, and the home shard would then
/// be credited units no shard gave. The random part is the purchase request
/// id's (a prefix drawn once per environment, then a counter): a pid and a
/// counter from 0 are not enough, as Lambda environments commonly run the
/// function under the same pid.
fn transfer_id(now_ms: i64) -> String {
    format!("t{now_ms}-{}", request_id())
}

#[cfg(test)]
mod tests {
    use super::transfer_id;
    use std::process::Command;

    /// Set in the children of [`transfer_ids_differ_between_environments_that_share_a_pid`].
    const CHILD: &str = "SECKILL_TRANSFER_ID_CHILD";
    const CHILD_TEST: &str = "adapters::redis::shards::tests::transfer_id_of_a_child";
    /// Both children borrow in the same millisecond.
    const NOW_MS: i64 = 1_764_471_962_123;

    /// In a child: prints its pid and the first transfer id it mints (as a
    /// fresh execution environment does); elsewhere, nothing.
    #[test]
    fn transfer_id_of_a_child() {
        if std::env::var_os(CHILD).is_some() {
            println!("pid={} id={}", std::process::id(), transfer_id(NOW_MS));
        }
    }

    /// Lambda environments commonly run the function with the same pid,
    /// each from a fresh process: two children, each pid 1 of its own pid
    /// namespace, mint their first transfer id in the same millisecond.
    /// `lend.lua` answers a repeated id as a replay, so equal ids would
    /// credit units never lent.
    #[test]
    fn transfer_ids_differ_between_environments_that_share_a_pid() {
        let exe = std::env::current_exe().unwrap();
        let child = || {
            let out = Command::new("unshare")
                .args(["--pid", "--fork", "--mount-proc"])
                .arg(&exe)
                .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads", "1"])
                .env(CHILD, "1")
                .output()
                .unwrap_or_else(|e| {
                    panic!("this test needs util-linux's `unshare` (run as root): {e}")
                });
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "`unshare --pid --fork --mount-proc` failed (it needs root, or \
                 unprivileged user namespaces): {}{stdout}",
                String::from_utf8_lossy(&out.stderr)
            );
            // The harness prints the test's name on the same line.
            let at = stdout
                .find("pid=")
                .unwrap_or_else(|| panic!("no id printed: {stdout}"));
            stdout[at..].lines().next().unwrap_or_default().to_owned()
        };
        let (a, b) = (child(), child());
        println!("{a}\n{b}");
        assert!(
            a.starts_with("pid=1 ") && b.starts_with("pid=1 "),
            "{a} / {b}"
        );
        assert_ne!(a, b, "two environments minted the same transfer id");
    }
}
