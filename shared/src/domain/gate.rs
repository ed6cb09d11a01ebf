//! The sale gate: answer a small question before you may buy.
//!
//! Stateless on the server: a challenge id and a pass token are both
//! `base64url(payload).base64url(HMAC-SHA256(secret, payload))`, bound to the
//! sale and the user, with an expiry. A pass carries a nonce; the purchase
//! script records used nonces, so a pass buys once.

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::domain::{SaleId, UserId};

/// How long an issued question may be answered.
pub const CHALLENGE_TTL_MS: i64 = 120_000;
/// How long a pass may be used to buy.
pub const PASS_TTL_MS: i64 = 60_000;
/// Questions are handed out from this long before the start.
pub const OPENS_BEFORE_START_MS: i64 = 30_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("malformed or forged")]
    Invalid,
    #[error("expired")]
    Expired,
    #[error("issued for another sale or user")]
    Foreign,
    #[error("wrong answer")]
    WrongAnswer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub question: String,
    pub challenge_id: String,
    pub expires_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub token: String,
    pub expires_at_ms: i64,
}

/// The gate's key. Never logged: `Debug` prints nothing of it.
#[derive(Clone)]
pub struct Gate {
    pub(crate) key: hmac::Key,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate(<secret>)")
    }
}

impl Gate {
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    pub(crate) fn seal(&self, payload: &str) -> String {
        let tag = hmac::sign(&self.key, payload.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    fn open(&self, sealed: &str) -> Result<String, GateError> {
        let (payload, tag) = sealed.split_once('.').ok_or(GateError::Invalid)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| GateError::Invalid)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| GateError::Invalid)?;
        hmac::verify(&self.key, &payload, &tag).map_err(|_| GateError::Invalid)?;
        String::from_utf8(payload).map_err(|_| GateError::Invalid)
    }

    /// The two numbers of the question a user gets for a sale in one
    /// window of `CHALLENGE_TTL_MS`: derived from the key, so the server
    /// keeps no state and a bot cannot predict them. Even windows sum to
    /// 5..=23 and odd ones to 30..=48: an answer that misses the current
    /// question by less than 7 is never the previous question's right
    /// answer, so the grace for the previous window cannot let a near
    /// miss through.
    fn numbers(&self, sale: &SaleId, user: &UserId, window: i64) -> (i64, i64) {
        // The user id may hold `|`; the input still names one (sale, user,
        // window) only: the sale id and the window (a number) cannot hold
        // it, so the first `|` after `q|` ends the sale and the last one
        // starts the window.
        let tag = hmac::sign(&self.key, format!("q|{sale}|{user}|{window}").as_bytes());
        let b = tag.as_ref();
        let (a, b) = (i64::from(b[0] % 10), i64::from(b[1] % 10));
        if window.rem_euclid(2) == 0 {
            (2 + a, 3 + b)
        } else {
            (20 + a, 10 + b)
        }
    }

    /// `GET /sales/{saleId}/challenge`: the question, its id (the window it
    /// belongs to) and until when it holds.
    pub fn challenge(&self, sale: &SaleId, user: &UserId, now_ms: i64) -> Challenge {
        let window = now_ms.div_euclid(CHALLENGE_TTL_MS);
        let (a, b) = self.numbers(sale, user, window);
        Challenge {
            question: format!("What is {a} + {b}?"),
            challenge_id: format!("{window}"),
            expires_at_ms: (window + 1) * CHALLENGE_TTL_MS,
        }
    }

    /// `POST /sales/{saleId}/challenge`: a right answer gives a pass that
    /// buys once. With the question's `challenge_id` the answer is checked
    /// against that question alone (the current one or the previous, so a
    /// question asked just before its window ends can still be answered);
    /// without it, against either of the two.
    pub fn answer(
        &self,
        sale: &SaleId,
        user: &UserId,
        answer: i64,
        challenge_id: Option<&str>,
        now_ms: i64,
        nonce: u64,
    ) -> Result<Pass, GateError> {
        let window = now_ms.div_euclid(CHALLENGE_TTL_MS);
        let windows = match challenge_id {
            None => vec![window, window - 1],
            Some(id) => {
                let asked: i64 = id.parse().map_err(|_| GateError::Invalid)?;
                if asked != window && asked != window - 1 {
                    return Err(GateError::Expired);
                }
                vec![asked]
            }
        };
        let right = windows.iter().any(|w| {
            let (a, b) = self.numbers(sale, user, *w);
            a + b == answer
        });
        if !right {
            return Err(GateError::WrongAnswer);
        }
        let expires_at_ms = now_ms + PASS_TTL_MS;
        Ok(Pass {
            token: self.seal(&pass_payload(sale, user, expires_at_ms, nonce)),
            expires_at_ms,
        })
    }

    /// The nonce of a valid pass for this user and sale, and when it was
    /// issued.
    pub fn verify(
        &self,
        sale: &SaleId,
        user: &UserId,
        token: &str,
        now_ms: i64,
    ) -> Result<VerifiedPass, GateError> {
        let payload = self.open(token)?;
        let (s, u, exp, nonce) = parse_pass(&payload).ok_or(GateError::Invalid)?;
        if s != sale.as_str() || u != user.as_str() {
            return Err(GateError::Foreign);
        }
        let expires_at_ms = exp.parse::<i64>().map_err(|_| GateError::Invalid)?;
        if expires_at_ms <= now_ms {
            return Err(GateError::Expired);
        }
        Ok(VerifiedPass {
            nonce: nonce.to_owned(),
            issued_at_ms: expires_at_ms - PASS_TTL_MS,
        })
    }
}

/// A pass whose signature, buyer, sale and expiry were checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPass {
    /// What makes it one pass: the purchase script records it once used.
    pub nonce: String,
    /// When it was issued (its expiry less [`PASS_TTL_MS`]): a pass from
    /// before the sale's keys were rebuilt is refused, since which passes
    /// bought before is not in the ledger.
    pub issued_at_ms: i64,
}

/// A pass's signed payload: `p|<sale>|<user>|<expiresAtMs>|<nonce>`. The
/// user id is the identity provider's `sub` and may hold `|` itself (Auth0's
/// `auth0|…`); every other field cannot (a sale id's alphabet, a number,
/// hex), so [`parse_pass`] reads the sale up to the first `|` after `p|`,
/// the nonce and expiry back from the end, and the user id is exactly what
/// lies between: one payload names one user, and a pass never verifies for
/// another whose id is a prefix or an extension of it. The layout is the
/// one passes had before user ids could hold `|`, so passes issued then
/// still verify.
pub(crate) fn pass_payload(sale: &SaleId, user: &UserId, expires_at_ms: i64, nonce: u64) -> String {
    format!("p|{sale}|{user}|{expires_at_ms}|{nonce:016x}")
}

/// (sale, user, expiresAtMs, nonce) of a pass payload; see [`pass_payload`].
fn parse_pass(payload: &str) -> Option<(&str, &str, &str, &str)> {
    let rest = payload.strip_prefix("p|")?;
    let (sale, rest) = rest.split_once('|')?;
    let (rest, nonce) = rest.rsplit_once('|')?;
    let (user, exp) = rest.rsplit_once('|')?;
    Some((sale, user, exp, nonce))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SaleId, UserId) {
        (SaleId::parse("s1").unwrap(), UserId::parse("u1").unwrap())
    }

    fn solve(question: &str) -> i64 {
        question
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|p| p.parse::<i64>().ok())
            .sum()
    }

    #[test]
    fn a_right_answer_gives_a_pass_bound_to_user_and_sale() {
        let gate = Gate::new(b"secret");
        let (sale, user) = ids();
        let c = gate.challenge(&sale, &user, 1_000);
        let pass = gate
            .answer(&sale, &user, solve(&c.question), None, 2_000, 7)
            .unwrap();
        assert!(gate.verify(&sale, &user, &pass.token, 3_000).is_ok());
        let other = UserId::parse("u2").unwrap();
        assert_eq!(
            gate.verify(&sale, &other, &pass.token, 3_000),
            Err(GateError::Foreign)
        );
        let later = pass.expires_at_ms;
        assert_eq!(
            gate.verify(&sale, &user, &pass.token, later),
            Err(GateError::Expired)
        );
        assert_eq!(
            Gate::new(b"other").verify(&sale, &user, &pass.token, 3_000),
            Err(GateError::Invalid)
        );
        let mut forged = pass.token.clone();
        forged.insert(3, 'x');
        assert!(gate.verify(&sale, &user, &forged, 3_000).is_err());
    }

    #[test]
    fn a_pass_names_one_user_whatever_their_id_holds() {
        let gate = Gate::new(b"secret");
        let sale = SaleId::parse("s1").unwrap();
        let users: Vec<UserId> = [
            "auth0|x",
            "auth0",
            "auth0|x|1",
            "auth0|x|99999999999999|00",
            "|",
            "||",
            "x|",
            "|x",
        ]
        .iter()
        .map(|u| UserId::parse(u).unwrap())
        .collect();
        for (i, user) in users.iter().enumerate() {
            let c = gate.challenge(&sale, user, 1_000);
            let pass = gate
                .answer(&sale, user, solve(&c.question), None, 2_000, 7)
                .unwrap();
            assert_eq!(
                gate.verify(&sale, user, &pass.token, 3_000)
                    .map(|p| (p.nonce, p.issued_at_ms)),
                Ok((format!("{:016x}", 7), 2_000)),
                "{user}"
            );
            for (j, other) in users.iter().enumerate().filter(|(j, _)| *j != i) {
                assert_eq!(
                    gate.verify(&sale, other, &pass.token, 3_000),
                    Err(GateError::Foreign),
                    "the pass of {:?} verified for {:?}",
                    users[i],
                    users[j]
                );
            }
        }
        // The payload's layout is the one of passes issued before.
        assert_eq!(
            parse_pass("p|s1|u1|5000|0000000000000007"),
            Some(("s1", "u1", "5000", "0000000000000007"))
        );
        for bad in ["", "p|", "p|s1", "p|s1|u1", "p|s1|5000|n", "q|s1|u1|5000|n"] {
            assert_eq!(parse_pass(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn wrong_and_stale_answers_are_refused() {
        let gate = Gate::new(b"secret");
        let (sale, user) = ids();
        // Every window of a day, every question answered just after its
        // window turned (when the previous question is still accepted):
        // a near miss is refused with or without the question's id.
        for w in 0..720 {
            let now = w * CHALLENGE_TTL_MS + 1;
            let c = gate.challenge(&sale, &user, now);
            let right = solve(&c.question);
            for miss in (-6..=6).filter(|m| *m != 0) {
                for id in [None, Some(c.challenge_id.as_str())] {
                    assert_eq!(
                        gate.answer(&sale, &user, right + miss, id, now, 1),
                        Err(GateError::WrongAnswer),
                        "window {w}, {} answered {}",
                        c.question,
                        right + miss
                    );
                }
            }
        }
        // With its id, only that question's answer counts: the previous
        // question's right answer is refused for the current one.
        let before = gate.challenge(&sale, &user, 1_000);
        let now = before.expires_at_ms + 1;
        let current = gate.challenge(&sale, &user, now);
        let old_right = solve(&before.question);
        assert_ne!(old_right, solve(&current.question));
        assert!(gate.answer(&sale, &user, old_right, None, now, 1).is_ok());
        assert!(
            gate.answer(&sale, &user, old_right, Some(&before.challenge_id), now, 1)
                .is_ok()
        );
        assert_eq!(
            gate.answer(&sale, &user, old_right, Some(&current.challenge_id), now, 1),
            Err(GateError::WrongAnswer)
        );
        // Not answerable two windows later, with or without its id (unless
        // that window's question has the same sum).
        let two_later = before.expires_at_ms + CHALLENGE_TTL_MS + 1;
        assert_eq!(
            gate.answer(
                &sale,
                &user,
                old_right,
                Some(&before.challenge_id),
                two_later,
                1
            ),
            Err(GateError::Expired)
        );
        if solve(&gate.challenge(&sale, &user, two_later).question) != old_right {
            assert_eq!(
                gate.answer(&sale, &user, old_right, None, two_later, 1),
                Err(GateError::WrongAnswer)
            );
        }
        // An id from the future or not a number is refused too.
        assert_eq!(
            gate.answer(&sale, &user, old_right, Some("junk"), now, 1),
            Err(GateError::Invalid)
        );
        let next = format!("{}", now.div_euclid(CHALLENGE_TTL_MS) + 1);
        assert_eq!(
            gate.answer(&sale, &user, old_right, Some(&next), now, 1),
            Err(GateError::Expired)
        );
        assert!(format!("{gate:?}").contains("<secret>"));
    }
}
