//! The borrowing policy of a sharded sale: when a buyer's home shard is
//! short, whether to look at the other shards, in which order, for how many
//! units, and for how many rounds. The Redis adapter moves the units
//! (`lend.lua`, `receive.lua`); the decisions are here.
//!
//! A buyer always buys on their home shard, so the per-user limit is exact.
//! `SOLD_OUT` is answered only once every other shard was found empty; after
//! that, for [`DRY_SHARDS`], this environment refuses at the cost of one
//! round trip instead of one per shard, and when that lapses one purchase
//! looks again while the others do not.

use crate::domain::SaleId;
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// After a borrow found every other shard empty, this environment does not
/// try again for this long (the bound a unit back on another shard may wait
/// for a buyer whose home shard is empty; the sold-out flag's bound too).
pub const DRY_SHARDS: Duration = Duration::from_millis(500);

/// Borrow rounds one purchase may take before it gives up with a 503: under
/// that much contention the buyer is told to retry, never a false SOLD_OUT.
pub const MAX_BORROW_ROUNDS: u32 = 32;

/// Units to ask the other shards for: what the home shard lacks, at least one.
pub fn units_to_borrow(requested: u32, remaining: u32) -> u64 {
    u64::from(requested)
        .saturating_sub(u64::from(remaining))
        .max(1)
}

/// The shards a home shard borrows from, in order: the next one up, round
/// the ring, never itself.
pub fn donors(home: usize, shards: usize) -> impl Iterator<Item = usize> {
    (1..shards).map(move |step| (home + step) % shards)
}

/// Per sale: until when its other shards count as empty in this environment.
#[derive(Debug, Default)]
pub struct DryShards {
    until: RwLock<HashMap<String, Instant>>,
}

impl DryShards {
    /// Whether this purchase may look at the other shards: yes unless they
    /// were found empty within [`DRY_SHARDS`]; when that lapses, the first
    /// purchase to notice claims the look (pushing the mark forward).
    pub fn may_borrow(&self, sale_id: &SaleId, now: Instant) -> bool {
        let marked = self
            .until
            .read()
            .ok()
            .and_then(|dry| dry.get(sale_id.as_str()).copied());
        match marked {
            None => true,
            Some(until) if now < until => false,
            Some(_) => match self.until.write() {
                Ok(mut dry) => match dry.get_mut(sale_id.as_str()) {
                    Some(until) if *until <= now => {
                        *until = now + DRY_SHARDS;
                        true
                    }
                    Some(_) => false,
                    None => true,
                },
                Err(_) => true,
            },
        }
    }

    /// What a borrow that started at `now` brought: nothing marks the sale's
    /// other shards empty for [`DRY_SHARDS`]; anything clears the mark.
    pub fn record(&self, sale_id: &SaleId, now: Instant, got: u64) {
        if let Ok(mut dry) = self.until.write() {
            if got == 0 {
                dry.insert(sale_id.to_string(), now + DRY_SHARDS);
            } else {
                dry.remove(sale_id.as_str());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sale() -> SaleId {
        SaleId::parse("s1").unwrap()
    }

    #[test]
    fn a_home_short_of_units_asks_for_what_it_lacks_and_at_least_one() {
        assert_eq!(units_to_borrow(3, 1), 2);
        assert_eq!(units_to_borrow(1, 0), 1);
        // The script said sold out with enough left (a race): ask for one.
        assert_eq!(units_to_borrow(2, 5), 1);
    }

    #[test]
    fn donors_go_round_the_ring_from_the_next_shard_and_skip_home() {
        assert_eq!(donors(2, 4).collect::<Vec<_>>(), [3, 0, 1]);
        assert_eq!(donors(0, 1).count(), 0);
    }

    #[test]
    fn empty_shards_are_not_looked_at_again_until_the_mark_lapses_then_by_one_purchase() {
        let dry = DryShards::default();
        let t0 = Instant::now();
        assert!(dry.may_borrow(&sale(), t0));
        dry.record(&sale(), t0, 0);
        assert!(!dry.may_borrow(&sale(), t0 + DRY_SHARDS / 2));
        let later = t0 + DRY_SHARDS;
        assert!(
            dry.may_borrow(&sale(), later),
            "the first after the lapse looks"
        );
        assert!(
            !dry.may_borrow(&sale(), later),
            "and the mark moved on for the rest"
        );
        dry.record(&sale(), later, 3);
        assert!(
            dry.may_borrow(&sale(), later),
            "units arrived: the mark is gone"
        );
    }
}
