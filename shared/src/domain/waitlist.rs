//! A sale's waitlist, the rules alone (the ledger's entries are in
//! `adapters::dynamo::waitlist`, the use cases in `app::waitlist`):
//!
//! - [`Entry`]: one buyer's place and what became of it. It resolves at
//!   most once: offered a unit, left, or ended with the sale; a second
//!   resolution is refused, whoever asks.
//! - [`LineKey`]: the order of the line. First come first served by join
//!   order; on a lottery sale the draw's seed order continued, so anyone
//!   holding the seed replays the line as they replay the draw.
//! - [`Odds`]: the chance of an offer before the sale ends, from what the
//!   sale has actually returned so far.

use crate::domain::OrderId;
use crate::domain::draw::DrawSeed;

/// Where an entry stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryStatus {
    Waiting,
    /// A returned unit was offered: this order, written like any other.
    Offered(OrderId),
    Left,
    /// The sale ended while the entry waited.
    Ended,
}

impl EntryStatus {
    /// The status as its buyer is told at `now_ms` of a sale ending at
    /// `end_ms`: still waiting at the end is `ENDED`.
    pub fn at(&self, end_ms: i64, now_ms: i64) -> EntryStatus {
        match self {
            Self::Waiting if now_ms >= end_ms => Self::Ended,
            status => status.clone(),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Waiting => "WAITING",
            Self::Offered(_) => "OFFERED",
            Self::Left => "LEFT",
            Self::Ended => "ENDED",
        }
    }
}

/// A second resolution of an entry: what it had already become.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the waitlist entry is already {}", .0.as_str())]
pub struct AlreadyResolved(pub EntryStatus);

/// One buyer's entry in one sale's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: LineKey,
    pub status: EntryStatus,
}

impl Entry {
    pub fn waiting(key: LineKey) -> Self {
        Self {
            key,
            status: EntryStatus::Waiting,
        }
    }

    /// The entry as its buyer is told at `now_ms` of a sale ending at
    /// `end_ms`: still waiting at the end is `ENDED`, whether or not a job
    /// has written it yet.
    pub fn status_at(&self, end_ms: i64, now_ms: i64) -> EntryStatus {
        self.status.at(end_ms, now_ms)
    }

    /// Resolves a waiting entry to `to`; any other is left as it is.
    pub fn resolve(&mut self, to: EntryStatus) -> Result<(), AlreadyResolved> {
        if self.status != EntryStatus::Waiting {
            return Err(AlreadyResolved(self.status.clone()));
        }
        self.status = to;
        Ok(())
    }
}

/// An entry's place in the line: the smaller key is offered first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LineKey {
    /// First come first served: when the buyer joined (Redis's clock, one
    /// clock for every environment; a buyer joining again keeps the
    /// first), ties broken by the user id.
    Joined(u64, String),
    /// A lottery sale: the holder's draw rank, HMAC-SHA256(seed, userId),
    /// then the id (as the draw breaks a tie).
    Drawn([u8; 32], String),
}

impl LineKey {
    /// A lottery sale's key for `user_id`: where the draw's order puts
    /// them, continued past the last winner.
    pub fn drawn(seed: &DrawSeed, user_id: &str) -> Self {
        Self::Drawn(seed.rank(user_id), user_id.to_owned())
    }

    /// The key as the ledger stores it: strings that sort as the keys do
    /// (a sale's line holds one kind only). The user id is hashed so the
    /// key stays short whatever the identity provider's `sub` holds.
    pub fn sort_key(&self) -> String {
        match self {
            Self::Joined(at_ms, user) => format!("j{at_ms:016}#{}", user_digest(user)),
            Self::Drawn(rank, user) => {
                format!("d{}#{}", crate::domain::draw::hex(rank), user_digest(user))
            }
        }
    }
}

/// SHA-256 of the user id, first 16 hex digits.
fn user_digest(user_id: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, user_id.as_bytes());
    crate::domain::draw::hex(&digest.as_ref()[..8])
}

/// The order a waitlist entry is offered: one per (sale, buyer), since an
/// entry is offered once, so every retry of the offer writes the same row.
/// `w` and 31 hex digits (as a purchase's `n`/`k` ids), then the shard
/// suffix of the buyer's home shard (`-s3`) on a sharded sale.
pub fn offer_order_id(
    sale_id: &str,
    user_id: &str,
    shard_suffix: &str,
) -> Result<OrderId, crate::domain::InvalidValue> {
    let input = format!("{sale_id}|{user_id}|waitlist");
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, input.as_bytes());
    let hex = crate::domain::draw::hex(digest.as_ref());
    OrderId::parse(&format!("w{}{shard_suffix}", &hex[..31]))
}

/// Below this chance the page says plainly that an offer is unlikely.
pub const POOR_ODDS: f64 = 0.1;

/// The chance that enough units come back, before the sale ends, to reach
/// an entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Odds {
    /// From 0 to 1.
    pub chance: f64,
    /// Below [`POOR_ODDS`].
    pub poor: bool,
}

impl Odds {
    /// Returns so far are taken as the pace of returns to come: `returned`
    /// units in the `elapsed_ms` the sale has been live make a rate, and the
    /// units still to come back before the end (`left_ms` away) are a
    /// Poisson count of mean rate x `left_ms`. An entry is reached when at
    /// least `units_ahead + quantity` units come back (the units the
    /// entries ahead wait for, then its own), so the chance is
    /// P(N >= units_ahead + quantity). `None` before the sale has been live
    /// at all: there is no pace to go by.
    pub fn estimate(
        returned: u64,
        elapsed_ms: i64,
        left_ms: i64,
        units_ahead: u64,
        quantity: u32,
    ) -> Option<Self> {
        if elapsed_ms <= 0 {
            return None;
        }
        let mean = returned as f64 * left_ms.max(0) as f64 / elapsed_ms as f64;
        let needed = units_ahead.saturating_add(u64::from(quantity));
        let chance = at_least(mean, needed);
        Some(Self {
            chance,
            poor: chance < POOR_ODDS,
        })
    }
}

/// P(N >= k) for N ~ Poisson(mean): one minus the first k terms, each
/// computed in logarithms (a large mean underflows `exp(-mean)` alone).
fn at_least(mean: f64, k: u64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if mean <= 0.0 {
        return 0.0;
    }
    let ln_mean = mean.ln();
    let mut ln_factorial = 0.0;
    let mut below = 0.0;
    for i in 0..k {
        if i > 0 {
            ln_factorial += (i as f64).ln();
        }
        let term = (i as f64 * ln_mean - mean - ln_factorial).exp();
        below += term;
        // Past the mean the terms only shrink, each by a factor below one:
        // once one no longer moves the sum, neither do the rest.
        if i as f64 > mean && term <= below * f64::EPSILON {
            break;
        }
    }
    (1.0 - below).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(id: &str) -> OrderId {
        OrderId::parse(id).unwrap()
    }

    #[test]
    fn an_entry_resolves_once_whoever_asks_again() {
        let mut entry = Entry::waiting(LineKey::Joined(1, "u1".into()));
        entry.resolve(EntryStatus::Offered(order("o1"))).unwrap();
        for again in [
            EntryStatus::Offered(order("o2")),
            EntryStatus::Left,
            EntryStatus::Ended,
            EntryStatus::Waiting,
        ] {
            assert_eq!(
                entry.resolve(again),
                Err(AlreadyResolved(EntryStatus::Offered(order("o1"))))
            );
        }
        assert_eq!(entry.status, EntryStatus::Offered(order("o1")));
        let mut left = Entry::waiting(LineKey::Joined(2, "u2".into()));
        left.resolve(EntryStatus::Left).unwrap();
        assert!(left.resolve(EntryStatus::Offered(order("o3"))).is_err());
    }

    #[test]
    fn still_waiting_at_the_end_is_told_it_ended() {
        let entry = Entry::waiting(LineKey::Joined(1, "u1".into()));
        assert_eq!(entry.status_at(1_000, 999), EntryStatus::Waiting);
        assert_eq!(entry.status_at(1_000, 1_000), EntryStatus::Ended);
        let mut offered = entry.clone();
        offered.resolve(EntryStatus::Offered(order("o1"))).unwrap();
        assert_eq!(
            offered.status_at(1_000, 5_000),
            EntryStatus::Offered(order("o1")),
            "an offer made before the end stays an offer"
        );
        assert_eq!(EntryStatus::Ended.as_str(), "ENDED");
    }

    #[test]
    fn first_come_first_served_is_join_order_and_a_lottery_replays_its_seed() {
        let joined = |at: u64, user: &str| LineKey::Joined(at, user.into());
        let mut line = vec![
            joined(7, "a"),
            joined(2, "b"),
            joined(5, "c"),
            joined(5, "b"),
        ];
        line.sort();
        assert_eq!(
            line,
            [
                joined(2, "b"),
                joined(5, "b"),
                joined(5, "c"),
                joined(7, "a")
            ]
        );
        // The ledger's strings sort the same way.
        let mut stored: Vec<String> = line.iter().map(LineKey::sort_key).collect();
        stored.sort();
        let by_time: Vec<&str> = stored.iter().map(|k| &k[..17]).collect();
        assert_eq!(
            by_time,
            [
                "j0000000000000002",
                "j0000000000000005",
                "j0000000000000005",
                "j0000000000000007"
            ]
        );
        let seed = DrawSeed::from_bytes([9; 32]);
        let users = ["u-a", "u-b", "u-c", "u-d", "u-e"];
        let mut drawn: Vec<LineKey> = users.iter().map(|u| LineKey::drawn(&seed, u)).collect();
        drawn.sort();
        let replayed: Vec<String> = drawn
            .into_iter()
            .map(|k| match k {
                LineKey::Drawn(_, id) => id,
                LineKey::Joined(..) => unreachable!(),
            })
            .collect();
        let mut stored: Vec<(String, &str)> = users
            .iter()
            .map(|u| (LineKey::drawn(&seed, u).sort_key(), *u))
            .collect();
        stored.sort();
        assert_eq!(
            stored.iter().map(|(_, u)| *u).collect::<Vec<_>>(),
            replayed,
            "the ledger's keys sort in the draw's order"
        );
        assert_eq!(
            replayed,
            crate::domain::draw::draw_order(&seed, &users),
            "the line continues the draw's order"
        );
    }

    #[test]
    fn an_offer_id_is_one_per_buyer_and_sale_and_names_its_shard() {
        let id = |sale: &str, user: &str, suffix: &str| offer_order_id(sale, user, suffix).unwrap();
        let a = id("s1", "auth0|u-1", "");
        assert_eq!(a, id("s1", "auth0|u-1", ""));
        assert_ne!(a, id("s1", "auth0|u-2", ""));
        assert_ne!(a, id("s2", "auth0|u-1", ""));
        assert!(a.as_str().starts_with('w') && a.as_str().len() == 32);
        let sharded = id("s1", "auth0|u-1", "-s3");
        assert_eq!(
            crate::domain::shard_layout::shard_of_order(sharded.as_str()),
            Some(3)
        );
    }

    #[test]
    fn the_chance_follows_the_pace_of_returns_so_far() {
        // No return in an hour live, an hour left: no offer expected.
        let none = Odds::estimate(0, 3_600_000, 3_600_000, 0, 1).unwrap();
        assert_eq!(none.chance, 0.0);
        assert!(none.poor);
        // 10 returns in an hour, an hour left: a mean of 10 more.
        let first = Odds::estimate(10, 3_600_000, 3_600_000, 0, 1).unwrap();
        let expected = 1.0 - (-10.0f64).exp();
        assert!((first.chance - expected).abs() < 1e-12, "{first:?}");
        assert!(!first.poor);
        // Far back in the line, the same pace rarely reaches.
        let far = Odds::estimate(10, 3_600_000, 3_600_000, 30, 1).unwrap();
        assert!(far.chance < 1e-4 && far.poor, "{far:?}");
        // Exactly at the mean: about one half (the Poisson median).
        let mid = Odds::estimate(10, 3_600_000, 3_600_000, 9, 1).unwrap();
        assert!((0.5..0.6).contains(&mid.chance), "{mid:?}");
        // The end passed: nothing more comes back.
        let over = Odds::estimate(10, 3_600_000, -5, 0, 1).unwrap();
        assert_eq!(over.chance, 0.0);
        assert_eq!(Odds::estimate(10, 0, 3_600_000, 0, 1), None);
    }

    #[test]
    fn the_chance_never_leaves_zero_to_one_however_large_the_figures() {
        for (returned, ahead) in [(1_000_000, 0), (1_000_000, 999_999), (5, 10_000_000)] {
            let odds = Odds::estimate(returned, 1_000, 10_000, ahead, 1).unwrap();
            assert!((0.0..=1.0).contains(&odds.chance), "{odds:?}");
        }
        let sure = Odds::estimate(1_000_000, 1_000, 10_000, 0, 1).unwrap();
        assert_eq!(sure.chance, 1.0);
    }

    #[test]
    fn the_poisson_tail_matches_its_sum() {
        // P(N >= 3), mean 2: 1 - e^-2 (1 + 2 + 2).
        let exact = 1.0 - (-2.0f64).exp() * 5.0;
        assert!((at_least(2.0, 3) - exact).abs() < 1e-12);
        assert_eq!(at_least(2.0, 0), 1.0);
        assert_eq!(at_least(0.0, 1), 0.0);
    }
}
