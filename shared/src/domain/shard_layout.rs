//! Which shard is each buyer's home, and how a sharded sale's stock is split.
//!
//! A buyer's home is a stable hash of the user id (FNV-1a: std's hasher
//! changes between releases, and every function must find the same shard for
//! the same buyer). On one Redis node that hash modulo the shard count is
//! the whole story. On a Redis Cluster the shards' slots sit on the masters
//! unevenly (eight key groups on three masters sit 3/3/2), so a uniform hash
//! gives the master holding three shards 1.5x the calls of the one holding
//! two. There, prewarm writes a *home table* into the sale's directory: the
//! hash picks one of [`HOME_BUCKETS`] buckets, each master gets an equal
//! number of buckets, and each master's buckets are split over its shards.
//! Each shard's stock share follows its bucket count, so shards run dry
//! together rather than the busy ones first.
//!
//! The table is written once, when the directory is created, and never
//! changed while the sale lives: a buyer's count and limit live on their
//! home shard, so moving homes mid-sale would let a buyer buy twice. A later
//! resharding of the cluster only makes the table less even, never wrong.

use std::sync::Arc;

/// The shard an order id names: ids the purchase script makes on shard k
/// end in `-s<k>` after its 32 characters; ids of one-shard sales carry no
/// suffix (shard 0). A relay or a rebuild finds an order's shard here.
pub fn shard_of_order(order_id: &str) -> Option<u32> {
    let (head, tail) = order_id.split_at_checked(32)?;
    if !(head.starts_with('n') || head.starts_with('k') || head.starts_with('w')) {
        return None;
    }
    tail.strip_prefix("-s")?.parse().ok()
}

/// Buckets of a home table: divisible by every count from 1 to 8, so the
/// usual layouts (up to 8 masters, up to 8 shards on one) split exactly.
pub const HOME_BUCKETS: usize = 840;

/// A sale's shard count and, on a cluster, its home table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLayout {
    shards: u32,
    /// Bucket -> shard; empty means the uniform hash.
    homes: Arc<[u32]>,
}

/// A home table that does not fit the sale.
#[derive(Debug, thiserror::Error)]
#[error("bad home table: {0}")]
pub struct BadHomes(String);

impl ShardLayout {
    /// `shards` shards, homes by the uniform hash.
    pub fn uniform(shards: u32) -> Self {
        Self {
            shards: shards.max(1),
            homes: Arc::from(Vec::new()),
        }
    }

    /// A table giving every master the same share of buyers: `owners[k]` is
    /// the master (any id) holding shard `k`'s slot. The uniform layout when
    /// every shard sits on one master.
    pub fn balanced<T: Eq>(owners: &[T]) -> Self {
        let shards = u32::try_from(owners.len()).unwrap_or(u32::MAX).max(1);
        // Masters in order of first appearance, with their shards.
        let mut masters: Vec<(&T, Vec<u32>)> = Vec::new();
        for (k, owner) in (0u32..).zip(owners) {
            match masters.iter_mut().find(|(m, _)| *m == owner) {
                Some((_, held)) => held.push(k),
                None => masters.push((owner, vec![k])),
            }
        }
        if masters.len() <= 1 {
            return Self::uniform(shards);
        }
        let mut homes = Vec::with_capacity(HOME_BUCKETS);
        for (i, (_, held)) in masters.iter().enumerate() {
            let buckets = even_part(HOME_BUCKETS, masters.len(), i);
            for (j, &k) in held.iter().enumerate() {
                homes.extend(std::iter::repeat_n(k, even_part(buckets, held.len(), j)));
            }
        }
        Self {
            shards,
            homes: Arc::from(homes),
        }
    }

    /// The layout as Redis keeps it (`shards` and the directory's `homes`
    /// field, "" for the uniform hash).
    pub fn parse(shards: u32, homes: &str) -> Result<Self, BadHomes> {
        if homes.is_empty() {
            return Ok(Self::uniform(shards));
        }
        let homes: Vec<u32> = homes
            .split(',')
            .map(|k| k.parse::<u32>().map_err(|_| BadHomes(format!("{k:?}"))))
            .collect::<Result<_, _>>()?;
        if let Some(k) = homes.iter().find(|&&k| k >= shards) {
            return Err(BadHomes(format!("shard {k} of {shards}")));
        }
        Ok(Self {
            shards: shards.max(1),
            homes: Arc::from(homes),
        })
    }

    /// The `homes` field to store ("" for the uniform hash).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.homes.len() * 2);
        for (i, k) in self.homes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&k.to_string());
        }
        out
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The buyer's home shard.
    pub fn home(&self, user_id: &str) -> u32 {
        if self.shards <= 1 {
            return 0;
        }
        let hash = fnv1a(user_id);
        if self.homes.is_empty() {
            return u32::try_from(hash % u64::from(self.shards)).unwrap_or(0);
        }
        let bucket = usize::try_from(hash % self.homes.len() as u64).unwrap_or(0);
        self.homes.get(bucket).copied().unwrap_or(0)
    }

    /// `units` split over the shards in proportion to their buckets (equal
    /// shares under the uniform hash, the first ones taking the remainder);
    /// the shares always add up to `units`.
    pub fn shares(&self, units: i64) -> Vec<i64> {
        let n = self.shards as usize;
        let units = units.max(0);
        if self.homes.is_empty() {
            return (0..n).map(|k| even_share(units, n, k)).collect();
        }
        let mut weight = vec![0i64; n];
        for &k in self.homes.iter() {
            if let Some(w) = weight.get_mut(k as usize) {
                *w += 1;
            }
        }
        let buckets = self.homes.len() as i64;
        // Largest remainder: floors first, then one more unit each to the
        // shards whose exact share lost the most (ties: lowest index).
        let mut shares: Vec<i64> = weight.iter().map(|w| units * w / buckets).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&k| (std::cmp::Reverse(units * weight[k] % buckets), k));
        let left = units - shares.iter().sum::<i64>();
        for &k in order.iter().take(usize::try_from(left).unwrap_or(0)) {
            shares[k] += 1;
        }
        shares
    }
}

/// FNV-1a, 64 bits.
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Part `i` of `total` split into `parts` (the first ones take the rest).
fn even_part(total: usize, parts: usize, i: usize) -> usize {
    let parts = parts.max(1);
    total / parts + usize::from(i < total % parts)
}

fn even_share(units: i64, parts: usize, k: usize) -> i64 {
    let n = parts.max(1) as i64;
    units / n + i64::from((k as i64) < units % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn per_shard(layout: &ShardLayout, buyers: usize) -> Vec<usize> {
        let mut counts = vec![0; layout.shards() as usize];
        for n in 0..buyers {
            counts[layout.home(&format!("user-{n}")) as usize] += 1;
        }
        counts
    }

    #[test]
    fn the_uniform_hash_is_stable_and_spread() {
        let layout = ShardLayout::uniform(8);
        // Pinned: a changed hash would move every buyer of a live sale.
        assert_eq!(layout.home("alice"), (fnv1a("alice") % 8) as u32);
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(ShardLayout::uniform(1).home("anyone"), 0);
        let counts = per_shard(&layout, 8_000);
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(layout.shares(10), vec![2, 2, 1, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn eight_shards_on_three_masters_load_the_masters_evenly() {
        // The slots of {S:0}..{S:7} as a 3-master cluster may place them.
        let owners = ["a", "b", "c", "a", "b", "c", "a", "b"];
        let layout = ShardLayout::balanced(&owners);
        let counts = per_shard(&layout, 120_000);
        let mut per_master = [0usize; 3];
        for (k, c) in counts.iter().enumerate() {
            per_master[(owners[k].as_bytes()[0] - b'a') as usize] += c;
        }
        let (max, min) = (
            *per_master.iter().max().unwrap(),
            *per_master.iter().min().unwrap(),
        );
        assert!(
            (max as f64) / (min as f64) < 1.05,
            "per master {per_master:?}"
        );
        // The uniform hash on the same placement: 3/3/2, so 1.5x.
        let uniform = per_shard(&ShardLayout::uniform(8), 120_000);
        let c_master: usize = uniform[2] + uniform[5];
        assert!((uniform.iter().sum::<usize>() as f64 / 3.0) / (c_master as f64) > 1.2);
        // Stock follows the buckets and adds up.
        let shares = layout.shares(1_000);
        assert_eq!(shares.iter().sum::<i64>(), 1_000);
        let on = |m: &str| -> i64 { (0..8).filter(|&k| owners[k] == m).map(|k| shares[k]).sum() };
        // Each shard's share is rounded by less than one unit.
        assert!((on("a") - on("c")).abs() <= 3, "{shares:?}");
        assert!((on("b") - on("c")).abs() <= 3, "{shares:?}");
    }

    #[test]
    fn one_master_means_the_uniform_hash() {
        assert_eq!(
            ShardLayout::balanced(&[1, 1, 1, 1]),
            ShardLayout::uniform(4)
        );
        assert_eq!(ShardLayout::balanced::<u8>(&[]).shards(), 1);
    }

    #[test]
    fn the_table_survives_its_round_trip_through_redis() {
        let layout = ShardLayout::balanced(&["x", "y", "x"]);
        let back = ShardLayout::parse(3, &layout.encode()).unwrap();
        assert_eq!(back, layout);
        assert_eq!(back.home("bob"), layout.home("bob"));
        assert_eq!(ShardLayout::parse(3, "").unwrap(), ShardLayout::uniform(3));
        assert!(
            ShardLayout::parse(3, "0,1,3").is_err(),
            "shard out of range"
        );
        assert!(ShardLayout::parse(3, "0,x").is_err());
    }

    #[test]
    fn shares_add_up_for_any_stock() {
        let layout = ShardLayout::balanced(&[0, 1, 2, 0, 1, 2, 0, 1]);
        for units in [0, 1, 7, 8, 9, 100, 999, 1_000_003] {
            let shares = layout.shares(units);
            assert_eq!(shares.iter().sum::<i64>(), units, "{units}: {shares:?}");
            assert!(shares.iter().all(|&s| s >= 0));
        }
    }
}
