//! The sale gate's routes: the question (`GET /sales/{saleId}/challenge`),
//! its answer and the proof of work's solution, each a pass to buy with.

use super::*;
use crate::domain::gate::{Challenge, Pass};
use crate::domain::pow::PowChallenge;

impl<O: OrderStore + PaymentStore + WaitlistStore, S: StockStore + StockAdmin, C: SaleCatalog>
    OrderQueries<O, S, C>
{
    /// The same service with the sale gate's key.
    pub fn with_gate(mut self, gate: crate::domain::gate::Gate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// A gated sale that is open for challenges, and the gate. The
    /// arithmetic question is handed out from shortly before the start; a
    /// proof of work only from the start, so the opening spike spreads over
    /// the time buyers take to solve it.
    async fn gated(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> Result<(&crate::domain::gate::Gate, Sale), QueryError> {
        let sale = self
            .catalog
            .get_sale(sale_id)
            .await?
            .ok_or(QueryError::NotFound)?;
        if !sale.gate {
            return Err(QueryError::NoGate);
        }
        let opens_ms = match sale.pow_bits {
            Some(_) => sale.start_ms,
            None => sale.start_ms - crate::domain::gate::OPENS_BEFORE_START_MS,
        };
        if now_ms < opens_ms {
            return Err(QueryError::GateNotOpen { opens_ms });
        }
        if now_ms >= sale.end_ms {
            return Err(QueryError::SaleEnded);
        }
        let gate = self.gate.as_ref().ok_or(QueryError::GateUnavailable)?;
        Ok((gate, sale))
    }

    /// `GET /sales/{saleId}/challenge`: the arithmetic question (`kind`
    /// `arithmetic`) or the proof of work (`kind` `pow`).
    pub async fn challenge(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
    ) -> Result<Question, QueryError> {
        let now = clock::now_ms();
        let (gate, sale) = self.gated(sale_id, now).await?;
        if let Some(bits) = sale.pow_bits {
            return Ok(Question::Pow(
                gate.pow_challenge(sale_id, caller, bits, now),
            ));
        }
        Ok(Question::Arithmetic(gate.challenge(sale_id, caller, now)))
    }

    /// `POST /sales/{saleId}/challenge` with `{"answer": n}` and, when the
    /// client kept it, the question's `challengeId`.
    pub async fn answer(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
        answer: i64,
        challenge_id: Option<&str>,
    ) -> Result<Pass, QueryError> {
        let now = clock::now_ms();
        let (gate, sale) = self.gated(sale_id, now).await?;
        if sale.pow_bits.is_some() {
            return Err(QueryError::WrongKind(
                "this sale's gate is a proof of work: send {\"challengeId\", \"nonce\"}",
            ));
        }
        let nonce = nonce_from(now, caller);
        gate.answer(sale_id, caller, answer, challenge_id, now, nonce)
            .map_err(QueryError::WrongAnswer)
    }

    /// `POST /sales/{saleId}/challenge` with `{"challengeId", "nonce"}`: a
    /// solved proof of work gives the same pass as a right answer. A nonce
    /// that does not solve it records nothing.
    pub async fn solve(
        &self,
        sale_id: &SaleId,
        caller: &UserId,
        challenge_id: &str,
        nonce: &str,
    ) -> Result<Pass, QueryError> {
        let now = clock::now_ms();
        let (gate, sale) = self.gated(sale_id, now).await?;
        let Some(bits) = sale.pow_bits else {
            return Err(QueryError::WrongKind(
                "this sale's gate asks a question: send {\"answer\": n}",
            ));
        };
        gate.pow_answer(sale_id, caller, bits, challenge_id, nonce, now)
            .map_err(QueryError::PowRefused)
    }
}

/// What `GET /sales/{saleId}/challenge` hands out: the arithmetic
/// question, or for a sale with `powBits` the proof of work (the edge writes
/// the body, `http::bodies::Challenge`).
#[derive(Debug, Clone)]
pub enum Question {
    Arithmetic(Challenge),
    Pow(PowChallenge),
}

/// A pass nonce: unique per issue (time, caller, a process counter).
fn nonce_from(now_ms: i64, caller: &UserId) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static ISSUED: AtomicU64 = AtomicU64::new(0);
    let n = ISSUED.fetch_add(1, Ordering::Relaxed);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in caller
        .as_str()
        .bytes()
        .chain(now_ms.to_le_bytes())
        .chain(n.to_le_bytes())
        .chain(u64::from(std::process::id()).to_le_bytes())
    {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}
