//! A seeded generator (SplitMix64). The schedule of faults and every choice
//! of the workload come from it, so a seed replays the same plan. Written
//! out rather than taken from a crate: a replayed seed must give the same
//! sequence whatever a dependency's next version does.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent stream for one actor (the schedule, one buyer, the
    /// operator): each actor's choices depend on the seed and its own
    /// number, not on how the others' calls interleave.
    pub fn stream(seed: u64, actor: u64) -> Rng {
        let mut rng = Rng(seed ^ actor.wrapping_add(1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        rng.next();
        rng
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// A fraction in `[0, 1)`.
    pub fn fraction(&mut self) -> f64 {
        // 53 bits: exactly what an f64 holds.
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.fraction() < p
    }

    /// A duration in `lo_ms..=hi_ms` milliseconds.
    pub fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(self.range(lo_ms, hi_ms))
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        let at = self.next() % items.len() as u64;
        items.get(usize::try_from(at).ok()?)
    }

    /// One of `choices`, each as likely as its weight.
    pub fn weighted<T: Copy>(&mut self, choices: &[(T, u32)]) -> T {
        let total: u64 = choices.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut at = self.next() % total.max(1);
        for (choice, weight) in choices {
            if at < u64::from(*weight) {
                return *choice;
            }
            at -= u64::from(*weight);
        }
        choices[0].0
    }
}

#[test]
fn a_seed_gives_the_same_sequence_and_streams_differ() {
    let a: Vec<u64> = (0..4).scan(Rng::new(7), |r, _| Some(r.next())).collect();
    let b: Vec<u64> = (0..4).scan(Rng::new(7), |r, _| Some(r.next())).collect();
    assert_eq!(a, b);
    assert_ne!(Rng::stream(7, 0).next(), Rng::stream(7, 1).next());
    let mut r = Rng::new(1);
    assert!((0..1000).all(|_| (3..=5).contains(&r.range(3, 5))));
}
