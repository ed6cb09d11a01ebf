//! The gate's proof-of-work challenge, for a sale with `powBits`.
//!
//! - [`Gate::pow_challenge`]: the challenge a buyer gets for a sale in one
//!   window of [`CHALLENGE_TTL_MS`], derived with the gate key (HMAC), so the
//!   server keeps no state and nobody can compute it before it is served.
//! - [`Gate::pow_answer`]: checks a nonce with [`verify`] (one HMAC and one
//!   SHA-256: microseconds, whatever `bits` is) and issues the same pass as
//!   the arithmetic question, its nonce derived from the solution.
//! - [`verify`]: SHA-256(challenge || ":" || nonce) has at least `bits`
//!   leading zero bits.
//!
//! Why the pass nonce comes from the solution (the challenge and the nonce
//! that solves it): the purchase script records the nonce of every pass that
//! bought (`sale:{S}:gateused`), so every pass issued for one solution buys
//! once in all, and each purchase costs a solve (about `2^bits` hashes). Not
//! from the challenge alone: a buyer allowed a second unit could then not
//! buy it before the two-minute window turns.

use aws_lc_rs::{digest, hmac};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::domain::gate::{CHALLENGE_TTL_MS, Gate, GateError, PASS_TTL_MS, Pass, pass_payload};
use crate::domain::{SaleId, UserId};

/// The bounds of a sale's `powBits`: 8 costs nothing, 26 is about a
/// minute of a browser's CPU.
pub const POW_BITS: std::ops::RangeInclusive<u8> = 8..=26;
/// The difficulty to start from: about half a second of a browser's CPU
/// (measured by the browser test's scenario u, which prints it).
pub const DEFAULT_POW_BITS: u8 = 16;
/// The longest nonce accepted (a counter in any base fits easily).
pub const MAX_NONCE_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowChallenge {
    pub challenge: String,
    pub bits: u8,
    pub challenge_id: String,
    pub expires_at_ms: i64,
}

/// Whether SHA-256(`challenge` || ":" || `nonce`) starts with at least
/// `bits` zero bits.
pub fn verify(challenge: &str, nonce: &str, bits: u8) -> bool {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(challenge.as_bytes());
    ctx.update(b":");
    ctx.update(nonce.as_bytes());
    leading_zero_bits(ctx.finish().as_ref()) >= u32::from(bits)
}

fn leading_zero_bits(bytes: &[u8]) -> u32 {
    let mut zeros = 0;
    for b in bytes {
        zeros += b.leading_zeros();
        if *b != 0 {
            break;
        }
    }
    zeros
}

impl Gate {
    /// The challenge of (sale, user, window, bits). `bits` is part of the
    /// input so a solution found for one difficulty is never one for
    /// another (the setting is frozen from the start anyway).
    fn pow_text(&self, sale: &SaleId, user: &UserId, window: i64, bits: u8) -> String {
        // As for the question: `|` may be in the user id only, so the input
        // names one (sale, user, window, bits).
        let tag = hmac::sign(
            &self.key,
            format!("w|{sale}|{user}|{window}|{bits}").as_bytes(),
        );
        URL_SAFE_NO_PAD.encode(&tag.as_ref()[..18])
    }

    /// `GET /sales/{saleId}/challenge` of a proof-of-work sale.
    pub fn pow_challenge(
        &self,
        sale: &SaleId,
        user: &UserId,
        bits: u8,
        now_ms: i64,
    ) -> PowChallenge {
        let window = now_ms.div_euclid(CHALLENGE_TTL_MS);
        PowChallenge {
            challenge: self.pow_text(sale, user, window, bits),
            bits,
            challenge_id: format!("{window}"),
            expires_at_ms: (window + 1) * CHALLENGE_TTL_MS,
        }
    }

    /// `POST /sales/{saleId}/challenge` of a proof-of-work sale: the
    /// challenge named by `challenge_id` (this window's or the previous
    /// one's, so a challenge solved as its window turns still counts)
    /// solved by `nonce` gives a pass whose nonce is the challenge's.
    pub fn pow_answer(
        &self,
        sale: &SaleId,
        user: &UserId,
        bits: u8,
        challenge_id: &str,
        nonce: &str,
        now_ms: i64,
    ) -> Result<Pass, GateError> {
        if nonce.is_empty() || nonce.len() > MAX_NONCE_LEN {
            return Err(GateError::Invalid);
        }
        let asked: i64 = challenge_id.parse().map_err(|_| GateError::Invalid)?;
        let window = now_ms.div_euclid(CHALLENGE_TTL_MS);
        if asked != window && asked != window - 1 {
            return Err(GateError::Expired);
        }
        let challenge = self.pow_text(sale, user, asked, bits);
        if !verify(&challenge, nonce, bits) {
            return Err(GateError::WrongAnswer);
        }
        let expires_at_ms = now_ms + PASS_TTL_MS;
        Ok(Pass {
            token: self.seal(&pass_payload(
                sale,
                user,
                expires_at_ms,
                self.pass_nonce(&challenge, nonce),
            )),
            expires_at_ms,
        })
    }

    /// The nonce of every pass one solution gives: keyed, so it cannot be
    /// computed from the (public) challenge to spoil another buyer's pass.
    /// The challenge is base64url (no `:`), so the input names one
    /// (challenge, nonce).
    fn pass_nonce(&self, challenge: &str, nonce: &str) -> u64 {
        let tag = hmac::sign(&self.key, format!("n|{challenge}:{nonce}").as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&tag.as_ref()[..8]);
        u64::from_be_bytes(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SaleId, UserId) {
        (SaleId::parse("s1").unwrap(), UserId::parse("u1").unwrap())
    }

    /// The first nonce (a decimal counter) that solves `challenge`.
    fn solve(challenge: &str, bits: u8) -> String {
        (0u64..)
            .map(|n| n.to_string())
            .find(|n| verify(challenge, n, bits))
            .unwrap()
    }

    #[test]
    fn zero_bits_are_counted_from_the_first_byte() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x80]), 16);
        assert_eq!(leading_zero_bits(&[0, 0x01, 0xff]), 15);
        assert_eq!(leading_zero_bits(&[0xff]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
    }

    #[test]
    fn a_brute_forced_solution_gives_a_single_use_pass() {
        let gate = Gate::new(b"secret");
        let (sale, user) = ids();
        let c = gate.pow_challenge(&sale, &user, 12, 1_000);
        assert_eq!(c.bits, 12);
        assert_eq!(c.expires_at_ms, CHALLENGE_TTL_MS);
        let nonce = solve(&c.challenge, 12);
        let pass = gate
            .pow_answer(&sale, &user, 12, &c.challenge_id, &nonce, 2_000)
            .unwrap();
        let used = gate.verify(&sale, &user, &pass.token, 3_000).unwrap();
        // Another pass of the same solution carries the same nonce: the
        // purchase script's record of used nonces refuses it.
        let again = gate
            .pow_answer(&sale, &user, 12, &c.challenge_id, &nonce, 2_500)
            .unwrap();
        assert_ne!(again.token, pass.token);
        assert_eq!(
            gate.verify(&sale, &user, &again.token, 3_000)
                .map(|p| p.nonce),
            Ok(used.nonce.clone())
        );
        let other_nonce = ((nonce.parse::<u64>().unwrap() + 1)..)
            .map(|n| n.to_string())
            .find(|n| verify(&c.challenge, n, 12))
            .unwrap();
        let third = gate
            .pow_answer(&sale, &user, 12, &c.challenge_id, &other_nonce, 2_500)
            .unwrap();
        // Another solution is another solve's work, and buys once too.
        assert_ne!(
            gate.verify(&sale, &user, &third.token, 3_000)
                .map(|p| p.nonce),
            Ok(used.nonce.clone())
        );
        // The next window's challenge is another one, with another nonce.
        let next = gate.pow_challenge(&sale, &user, 12, CHALLENGE_TTL_MS + 1);
        assert_ne!(next.challenge, c.challenge);
        let next_pass = gate
            .pow_answer(
                &sale,
                &user,
                12,
                &next.challenge_id,
                &solve(&next.challenge, 12),
                CHALLENGE_TTL_MS + 2,
            )
            .unwrap();
        assert_ne!(
            gate.verify(&sale, &user, &next_pass.token, CHALLENGE_TTL_MS + 3)
                .map(|p| p.nonce),
            Ok(used.nonce)
        );
    }

    #[test]
    fn a_short_foreign_expired_or_forged_answer_is_refused() {
        let gate = Gate::new(b"secret");
        let (sale, user) = ids();
        let bits = 12;
        let c = gate.pow_challenge(&sale, &user, bits, 1_000);
        let nonce = solve(&c.challenge, bits);
        let answer = |sale: &SaleId, user: &UserId, bits: u8, id: &str, nonce: &str, now: i64| {
            gate.pow_answer(sale, user, bits, id, nonce, now)
        };
        // One bit short: a nonce with exactly bits - 1 zero bits.
        let short = (0u64..)
            .map(|n| n.to_string())
            .find(|n| verify(&c.challenge, n, bits - 1) && !verify(&c.challenge, n, bits))
            .unwrap();
        assert_eq!(
            answer(&sale, &user, bits, &c.challenge_id, &short, 2_000),
            Err(GateError::WrongAnswer)
        );
        // The solution was for 12 bits: it does not pass a 13-bit sale
        // unless by chance it has 13 zero bits of the 13-bit challenge.
        let c13 = gate.pow_challenge(&sale, &user, 13, 1_000);
        assert_ne!(c13.challenge, c.challenge);
        if !verify(&c13.challenge, &nonce, 13) {
            assert_eq!(
                answer(&sale, &user, 13, &c.challenge_id, &nonce, 2_000),
                Err(GateError::WrongAnswer)
            );
        }
        // Another buyer's or another sale's challenge is another one: the
        // solution does not carry over (unless by a 1 in 4096 chance, which
        // the assertion on the challenges rules out checking blindly).
        let other_user = UserId::parse("u2").unwrap();
        let other_sale = SaleId::parse("s2").unwrap();
        for (s, u) in [(&sale, &other_user), (&other_sale, &user)] {
            let theirs = gate.pow_challenge(s, u, bits, 1_000);
            assert_ne!(theirs.challenge, c.challenge);
            assert_eq!(
                answer(s, u, bits, &c.challenge_id, &nonce, 2_000).is_ok(),
                verify(&theirs.challenge, &nonce, bits)
            );
        }
        // A solved challenge's pass verifies only for its buyer.
        let pass = answer(&sale, &user, bits, &c.challenge_id, &nonce, 2_000).unwrap();
        assert_eq!(
            gate.verify(&sale, &other_user, &pass.token, 3_000),
            Err(GateError::Foreign)
        );
        // Expired: two windows on; from the future; not a window at all.
        assert_eq!(
            answer(
                &sale,
                &user,
                bits,
                &c.challenge_id,
                &nonce,
                2 * CHALLENGE_TTL_MS + 1
            ),
            Err(GateError::Expired)
        );
        assert!(
            answer(
                &sale,
                &user,
                bits,
                &c.challenge_id,
                &nonce,
                CHALLENGE_TTL_MS + 1
            )
            .is_ok()
        );
        assert_eq!(
            answer(&sale, &user, bits, "1", &nonce, 2_000),
            Err(GateError::Expired)
        );
        for junk in ["", "x", "0x0", "1.5"] {
            assert_eq!(
                answer(&sale, &user, bits, junk, &nonce, 2_000),
                Err(GateError::Invalid),
                "{junk:?}"
            );
        }
        // A forged key solves nothing: its challenge is another one.
        let forger = Gate::new(b"guess");
        let forged = forger.pow_challenge(&sale, &user, bits, 1_000);
        assert_ne!(forged.challenge, c.challenge);
        let forged_nonce = solve(&forged.challenge, bits);
        assert_eq!(
            answer(&sale, &user, bits, &c.challenge_id, &forged_nonce, 2_000).is_ok(),
            verify(&c.challenge, &forged_nonce, bits)
        );
        // Empty and overlong nonces are refused before any hashing.
        for bad in [String::new(), "1".repeat(MAX_NONCE_LEN + 1)] {
            assert_eq!(
                answer(&sale, &user, bits, &c.challenge_id, &bad, 2_000),
                Err(GateError::Invalid)
            );
        }
    }

    #[test]
    fn verifying_costs_microseconds_whatever_the_bits() {
        let gate = Gate::new(b"secret");
        let (sale, user) = ids();
        let c = gate.pow_challenge(&sale, &user, 26, 1_000);
        let started = std::time::Instant::now();
        for n in 0..1_000 {
            let _ = gate.pow_answer(&sale, &user, 26, &c.challenge_id, &n.to_string(), 2_000);
        }
        // A thousand checks of the hardest setting in well under a second
        // even unoptimised: a few microseconds each.
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
    }
}
