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
    key: hmac::Key,
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

    fn seal(&self, payload: &str) -> String {
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
    /// keeps no state and a bot cannot predict them.
    fn numbers(&self, sale: &SaleId, user: &UserId, window: i64) -> (i64, i64) {
        let tag = hmac::sign(&self.key, format!("q|{sale}|{user}|{window}").as_bytes());
        let b = tag.as_ref();
        (2 + i64::from(b[0] % 17), 3 + i64::from(b[1] % 23))
    }

    /// `GET /sales/{saleId}/challenge`: the question, and until when it holds.
    pub fn challenge(&self, sale: &SaleId, user: &UserId, now_ms: i64) -> Challenge {
        let window = now_ms.div_euclid(CHALLENGE_TTL_MS);
        let (a, b) = self.numbers(sale, user, window);
        Challenge {
            question: format!("What is {a} + {b}?"),
            challenge_id: format!("{window}"),
            expires_at_ms: (window + 1) * CHALLENGE_TTL_MS,
        }
    }

    /// `POST /sales/{saleId}/challenge`: a right answer to the current
    /// question (or the previous one, so a question asked just before its
    /// window ends can still be answered) gives a pass that buys once.
    pub fn answer(
        &self,
        sale: &SaleId,
        user: &UserId,
        answer: i64,
        now_ms: i64,
        nonce: u64,
    ) -> Result<Pass, GateError> {
        let window = now_ms.div_euclid(CHALLENGE_TTL_MS);
        let right = [window, window - 1].iter().any(|w| {
            let (a, b) = self.numbers(sale, user, *w);
            a + b == answer
        });
        if !right {
            return Err(GateError::WrongAnswer);
        }
        let expires_at_ms = now_ms + PASS_TTL_MS;
        Ok(Pass {
            token: self.seal(&format!("p|{sale}|{user}|{expires_at_ms}|{nonce:016x}")),
            expires_at_ms,
        })
    }

    /// The nonce of a valid pass for this user and sale.
    pub fn verify(
        &self,
        sale: &SaleId,
        user: &UserId,
        token: &str,
        now_ms: i64,
    ) -> Result<String, GateError> {
        let payload = self.open(token)?;
        let parts: Vec<&str> = payload.split('|').collect();
        let ["p", s, u, exp, nonce] = parts.as_slice() else {
            return Err(GateError::Invalid);
        };
        if *s != sale.as_str() || *u != user.as_str() {
            return Err(GateError::Foreign);
        }
        if exp.parse::<i64>().map_err(|_| GateError::Invalid)? <= now_ms {
            return Err(GateError::Expired);
        }
        Ok((*nonce).to_owned())
    }
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
            .answer(&sale, &user, solve(&c.question), 2_000, 7)
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
    fn wrong_and_stale_answers_are_refused() {
        let gate = Gate::new(b"secret");
        let (sale, user) = ids();
        let c = gate.challenge(&sale, &user, 1_000);
        let right = solve(&c.question);
        // A wrong answer may, by chance, be another question's right one:
        // try two and require at least one refusal.
        let wrong = [right + 1, right + 2]
            .iter()
            .filter(|a| gate.answer(&sale, &user, **a, 2_000, 1).is_err())
            .count();
        assert!(wrong >= 1);
        // Not answerable two windows later (unless that question has the same sum).
        let two_later = c.expires_at_ms + CHALLENGE_TTL_MS + 1;
        let other_q = gate.challenge(&sale, &user, two_later);
        if solve(&other_q.question) != right {
            assert_eq!(
                gate.answer(&sale, &user, right, two_later, 1),
                Err(GateError::WrongAnswer)
            );
        }
        assert!(format!("{gate:?}").contains("<secret>"));
    }
}
