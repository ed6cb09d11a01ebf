//! Writes that meet a transaction, or a throttle, on their item.
//!
//! DynamoDB refuses a single write to an item that a transaction holds
//! (`TransactionConflictException`), and the SDK's retry policy does not
//! count that as retryable; during a sale the order-writer's transactions
//! hold the sale item most of the time, so every other write of that item
//! (an operator's pause or edit, the audit head, prewarm's mark,
//! reconcile's report) meets one sooner or later. A throttled hot
//! partition (`ProvisionedThroughputExceededException`) is retried by the
//! SDK only a few times. Both mean nothing was written and the same write
//! a moment later is likely to succeed.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use std::future::Future;
use std::hash::BuildHasher;
use std::time::Duration;

const CONTENTION: [&str; 2] = [
    "TransactionConflictException",
    "ProvisionedThroughputExceededException",
];

/// The first retry's ceiling, the largest ceiling, and the most a write
/// waits in all: long enough for a hot item's queue of writer transactions
/// (each holds it for tens of milliseconds), short enough that the admin
/// function (timeout in `template.yaml`) still answers.
const BASE: Duration = Duration::from_millis(10);
const CAP: Duration = Duration::from_millis(250);
pub(super) const BUDGET: Duration = Duration::from_secs(6);

/// Whether the service refused the write for contention only.
pub(super) fn contended<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    err.as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|code| CONTENTION.contains(&code))
}

/// A fully jittered wait before retry `attempt` (0 first): drawn uniformly
/// between zero and `base * 2^attempt` (at most `cap`), so writers that
/// collided spread out instead of meeting again.
pub(super) fn jittered(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let ceiling = base.saturating_mul(1u32 << attempt.min(20)).min(cap);
    let ceiling_us = u64::try_from(ceiling.as_micros()).unwrap_or(u64::MAX);
    // A fresh `RandomState` is randomly keyed: enough for jitter.
    let draw = std::collections::hash_map::RandomState::new().hash_one(attempt);
    Duration::from_micros(draw % ceiling_us.saturating_add(1))
}

/// Sends the write until it is not refused for contention, within
/// [`BUDGET`]; every other answer (success, a failed condition, a fault)
/// is the caller's at once.
pub(super) async fn through_contention<T, E, R, F, Fut>(mut send: F) -> Result<T, SdkError<E, R>>
where
    E: ProvideErrorMetadata,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, R>>>,
{
    let mut waited = Duration::ZERO;
    let mut attempt = 0;
    loop {
        match send().await {
            Err(err) if contended(&err) && waited < BUDGET => {
                let wait = jittered(attempt, BASE, CAP).min(BUDGET.saturating_sub(waited));
                tokio::time::sleep(wait).await;
                waited += wait;
                attempt += 1;
            }
            answer => return answer,
        }
    }
}

/// A fully jittered wait that grows with the attempt, so colliding
/// expiries and writers spread out instead of meeting again at once.
pub(super) async fn jittered_wait(attempt: u32) {
    let ceiling_ms = (10u64 << attempt.min(5)).min(200);
    let draw = std::collections::hash_map::RandomState::new().hash_one(attempt);
    tokio::time::sleep(std::time::Duration::from_millis(draw % (ceiling_ms + 1))).await;
}
