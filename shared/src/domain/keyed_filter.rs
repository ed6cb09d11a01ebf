//! The sold-out fast path for requests with an `Idempotency-Key`.
//!
//! After a sell-out an environment answers `SOLD_OUT` from memory
//! ([`crate::app::purchase::SOLD_OUT_FLAG`]). A keyed request may be the retry of
//! a purchase that won, whose answer must be its order again (`REPLAY`), so
//! it is answered from memory only when no reservation under its key can
//! exist. Redis keeps that knowledge per key group as a bitmap
//! (`sale:{S}:keyed`, `shared/lua/keyed.lua`): every reservation made under a
//! key sets two bits, in the same script that makes it. An environment reads
//! the bitmap once after its flag is armed (`keyed_filter.lua`); a request
//! whose two bits are not both set provably has no reservation made before
//! that read, and after a sell-out no reservation is made until stock comes
//! back, which the flag's bound already covers for every buyer.
//!
//! A bit set proves nothing (another key's bit, or a reservation released
//! since): the request goes to Redis, which answers exactly.

use crate::domain::{IdempotencyKey, SaleId, UserId};

/// What one read of a key group's filter said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyedFilter {
    /// The group's bitmap, as Redis holds it (most significant bit first).
    Bits(Vec<u8>),
    /// No reservation at all in the group: none under any key.
    Empty,
    /// Reservations but no bitmap (made before it existed): ask Redis.
    Unknown,
}

impl KeyedFilter {
    /// Parses `keyed_filter.lua`'s reply.
    pub fn parse(reply: &[Vec<u8>]) -> Option<Self> {
        match reply {
            [tag, bits] if tag == b"FILTER" && !bits.is_empty() => Some(Self::Bits(bits.clone())),
            [tag] if tag == b"EMPTY" => Some(Self::Empty),
            [tag] if tag == b"UNKNOWN" => Some(Self::Unknown),
            _ => None,
        }
    }

    /// Whether a reservation of `(sale, user, key)` may exist in the group.
    /// `false` is certain; `true` is only "maybe".
    pub fn may_hold(&self, sale: &SaleId, user: &UserId, key: &IdempotencyKey) -> bool {
        match self {
            Self::Empty => false,
            Self::Unknown => true,
            Self::Bits(bits) => {
                let [a, b] = positions(&keyed_digest(sale, user, key), bits.len() * 8);
                bit(bits, a) && bit(bits, b)
            }
        }
    }
}

/// The first 16 hex digits of the SHA-1 that `purchase.lua` makes a keyed
/// order id of (`redis.sha1hex(sale .. '|' .. user .. '|' .. key)`).
pub fn keyed_digest(sale: &SaleId, user: &UserId, key: &IdempotencyKey) -> [u8; 8] {
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{sale}|{user}|{key}").as_bytes(),
    );
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest.as_ref()[..8]);
    head
}

/// The two bits `keyed.lua` sets: the digest's first and second 32 bits
/// (its hex digits 1-8 and 9-16), modulo the bitmap's size.
fn positions(digest: &[u8; 8], m: usize) -> [usize; 2] {
    let word = |i: usize| {
        u32::from_be_bytes([digest[i], digest[i + 1], digest[i + 2], digest[i + 3]]) as usize
    };
    if m == 0 {
        return [0, 0];
    }
    [word(0) % m, word(4) % m]
}

/// Bit `n` as `GETBIT` reads it (most significant bit of each byte first).
fn bit(bits: &[u8], n: usize) -> bool {
    bits.get(n / 8)
        .is_some_and(|byte| byte & (0x80 >> (n % 8)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SaleId, UserId, IdempotencyKey) {
        (
            SaleId::parse("s1").unwrap(),
            UserId::parse("auth0|u1").unwrap(),
            IdempotencyKey::parse("k-1").unwrap(),
        )
    }

    /// A bitmap with the bits of `(sale, user, key)` set as `keyed.lua` would.
    fn marked(m: usize, digest: &[u8; 8]) -> Vec<u8> {
        let mut bits = vec![0u8; m / 8];
        for p in positions(digest, m) {
            bits[p / 8] |= 0x80 >> (p % 8);
        }
        bits
    }

    #[test]
    fn the_digest_is_redis_sha1hex_of_sale_user_key() {
        let (sale, user, key) = ids();
        // printf 's1|auth0|u1|k-1' | sha1sum
        let hex: String = keyed_digest(&sale, &user, &key)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex.len(), 16);
        let full = aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
            b"s1|auth0|u1|k-1",
        );
        let expected: String = full.as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, expected);
    }

    #[test]
    fn a_marked_key_may_exist_and_others_mostly_do_not() {
        let (sale, user, key) = ids();
        let bits = marked(8192, &keyed_digest(&sale, &user, &key));
        let filter = KeyedFilter::Bits(bits);
        assert!(filter.may_hold(&sale, &user, &key));
        let maybe = (0..1000)
            .filter(|n| {
                let other = IdempotencyKey::parse(&format!("other-{n}")).unwrap();
                filter.may_hold(&sale, &user, &other)
            })
            .count();
        assert!(maybe <= 1, "{maybe} of 1000 unmarked keys said maybe");
    }

    #[test]
    fn empty_is_certain_and_unknown_always_asks() {
        let (sale, user, key) = ids();
        assert!(!KeyedFilter::Empty.may_hold(&sale, &user, &key));
        assert!(KeyedFilter::Unknown.may_hold(&sale, &user, &key));
    }

    #[test]
    fn replies_parse_and_junk_does_not() {
        assert_eq!(
            KeyedFilter::parse(&[b"FILTER".to_vec(), vec![1, 2]]),
            Some(KeyedFilter::Bits(vec![1, 2]))
        );
        assert_eq!(
            KeyedFilter::parse(&[b"EMPTY".to_vec()]),
            Some(KeyedFilter::Empty)
        );
        assert_eq!(KeyedFilter::parse(&[b"FILTER".to_vec(), vec![]]), None);
        assert_eq!(KeyedFilter::parse(&[b"OK".to_vec()]), None);
    }
}
