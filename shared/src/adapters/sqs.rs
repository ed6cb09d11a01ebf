//! The order queue on SQS.
//!
//! The one subtle part is telling a definite rejection (the service answered
//! "no", or the request never left) from an ambiguous outcome (timeout, a
//! connection that broke after the request was sent, a 5xx): only the first
//! lets the purchase give its stock back.
//!
//! A batch (`SendMessageBatch`, for a lottery draw's winners) reports each
//! entry on its own: sent, refused (in the answer's `Failed` list: SQS did
//! not take it), or ambiguous (the call timed out or broke after sending,
//! or the answer does not name the entry).
//!
//! [`SqsInspector`] is the operations path's read of the queue and its DLQ
//! (depths, and the order ids on them) through [`QueueInspector`].

use crate::domain::OrderMessage;
use crate::ports::{OrderQueue, QueueDepth, QueueError, QueueInspector, SEND_BATCH_MAX, SendError};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::error::SdkError;
use std::collections::HashSet;
use std::error::Error as StdError;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
}

impl SqsQueue {
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

impl OrderQueue for SqsQueue {
    /// Makes the attempts itself rather than leaving them to the SDK's retry
    /// loop, which reports only the last one: a refusal after a timed-out
    /// attempt would read as definite while the first may have landed.
    async fn send(&self, message: &OrderMessage) -> Result<(), SendError> {
        let body = serde_json::to_string(message)
            .map_err(|e| SendError::Rejected(format!("unserialisable message: {e}")))?;
        let budget = Budget::of(self.client.config());
        let started = Instant::now();
        let mut failures = Vec::new();
        for n in 0..budget.attempts {
            if n > 0 {
                let pause = budget.backoff(n);
                // An attempt cut short by the operation bound is ambiguous
                // even if the queue would have said no: better not to start it.
                if !budget.fits_another(started.elapsed() + pause) {
                    break;
                }
                tokio::time::sleep(pause).await;
            }
            let request = self
                .client
                .send_message()
                .queue_url(&self.queue_url)
                .message_body(body.clone())
                .customize()
                .config_override(
                    aws_sdk_sqs::Config::builder().retry_config(RetryConfig::disabled()),
                );
            let attempt = async {
                match request.send().await {
                    Ok(_) => Ok(()),
                    // The same request built again fails the same way.
                    Err(err @ SdkError::ConstructionFailure(_)) => Err((classify(err), false)),
                    // A refusal put nothing on the queue, so another try cannot
                    // duplicate; and a throttle is a refusal worth repeating.
                    Err(err) => Err((classify(err), true)),
                }
            };
            // The SDK's own bounds cover the attempt; this one holds the whole
            // send to the operation timeout whatever happens inside.
            let outcome = match budget.left(started.elapsed()) {
                Some(left) => tokio::time::timeout(left, attempt)
                    .await
                    .unwrap_or_else(|_| {
                        Err((
                            SendError::Ambiguous("operation timeout reached mid-attempt".into()),
                            false,
                        ))
                    }),
                None => attempt.await,
            };
            match outcome {
                Ok(()) => return Ok(()),
                Err((failure, again)) => {
                    failures.push(failure);
                    if !again {
                        break;
                    }
                }
            }
        }
        Err(verdict(&failures))
    }

    async fn send_batch(&self, messages: &[OrderMessage]) -> Vec<Result<(), SendError>> {
        let mut outcomes = Vec::with_capacity(messages.len());
        for group in messages.chunks(SEND_BATCH_MAX) {
            outcomes.extend(self.send_group(group).await);
        }
        outcomes
    }
}

impl SqsQueue {
    /// One `SendMessageBatch` of at most [`SEND_BATCH_MAX`] messages, with
    /// the client's attempts made here as [`OrderQueue::send`] makes them.
    /// Only entries that definitely failed and may succeed again (a refused
    /// call, an entry failed by SQS's side) go in the next attempt: an entry
    /// that may have landed is never sent twice from here.
    async fn send_group(&self, group: &[OrderMessage]) -> Vec<Result<(), SendError>> {
        let mut outcomes: Vec<Result<(), SendError>> = Vec::with_capacity(group.len());
        let mut pending = Vec::new();
        for (n, message) in group.iter().enumerate() {
            match serde_json::to_string(message) {
                Ok(body) => {
                    outcomes.push(Err(SendError::Rejected("no attempt was made".into())));
                    pending.push((n, body));
                }
                Err(e) => outcomes.push(Err(SendError::Rejected(format!(
                    "unserialisable message: {e}"
                )))),
            }
        }
        let budget = Budget::of(self.client.config());
        let started = Instant::now();
        for attempt in 0..budget.attempts {
            if pending.is_empty() {
                break;
            }
            if attempt > 0 {
                let pause = budget.backoff(attempt);
                if !budget.fits_another(started.elapsed() + pause) {
                    break;
                }
                tokio::time::sleep(pause).await;
            }
            let entries = match batch_entries(&pending) {
                Ok(entries) => entries,
                Err(why) => {
                    for (n, _) in &pending {
                        outcomes[*n] = Err(SendError::Rejected(why.clone()));
                    }
                    break;
                }
            };
            let request = self
                .client
                .send_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .customize()
                .config_override(
                    aws_sdk_sqs::Config::builder().retry_config(RetryConfig::disabled()),
                );
            let call = async {
                match request.send().await {
                    Ok(out) => {
                        let sent: Vec<&str> = out.successful().iter().map(|e| e.id()).collect();
                        let failed: Vec<(&str, bool, String)> = out
                            .failed()
                            .iter()
                            .map(|e| {
                                let why = match e.message() {
                                    Some(m) => format!("{}: {m}", e.code()),
                                    None => e.code().to_owned(),
                                };
                                (e.id(), e.sender_fault(), why)
                            })
                            .collect();
                        Ok(read_batch(&pending, &sent, &failed))
                    }
                    Err(err @ SdkError::ConstructionFailure(_)) => Err((classify(err), false)),
                    Err(err) => Err((classify(err), true)),
                }
            };
            let answer = match budget.left(started.elapsed()) {
                Some(left) => tokio::time::timeout(left, call).await.unwrap_or_else(|_| {
                    Err((
                        SendError::Ambiguous("operation timeout reached mid-attempt".into()),
                        false,
                    ))
                }),
                None => call.await,
            };
            match answer {
                Ok(entries) => {
                    let mut again = Vec::new();
                    for ((n, body), entry) in pending.into_iter().zip(entries) {
                        match entry {
                            Entry::Sent => outcomes[n] = Ok(()),
                            Entry::Failed { error, retry } => {
                                outcomes[n] = Err(error);
                                if retry {
                                    again.push((n, body));
                                }
                            }
                        }
                    }
                    pending = again;
                }
                Err((error, retry)) => {
                    for (n, _) in &pending {
                        outcomes[*n] = Err(error.clone());
                    }
                    // Only a refusal put nothing on the queue.
                    if !retry || matches!(error, SendError::Ambiguous(_)) {
                        break;
                    }
                }
            }
        }
        outcomes
    }
}

/// The request's entries, each named by its message's place in the group
/// (unique within one call, as SQS requires).
fn batch_entries(
    pending: &[(usize, String)],
) -> Result<Vec<aws_sdk_sqs::types::SendMessageBatchRequestEntry>, String> {
    pending
        .iter()
        .map(|(n, body)| {
            aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                .id(n.to_string())
                .message_body(body.clone())
                .build()
                .map_err(|e| format!("batch entry: {e}"))
        })
        .collect()
}

/// One entry's outcome in a batch's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Sent,
    /// `retry`: it definitely failed and another attempt may succeed.
    Failed {
        error: SendError,
        retry: bool,
    },
}

/// Each pending entry's outcome from the answer's `Successful` ids and its
/// `Failed` entries (id, sender's fault, why). A failed entry was not put
/// on the queue; one the sender caused fails the same way again. An entry
/// the answer does not name may or may not be on the queue.
fn read_batch(
    pending: &[(usize, String)],
    sent: &[&str],
    failed: &[(&str, bool, String)],
) -> Vec<Entry> {
    pending
        .iter()
        .map(|(n, _)| {
            let id = n.to_string();
            if sent.contains(&id.as_str()) {
                return Entry::Sent;
            }
            match failed.iter().find(|(f, _, _)| *f == id) {
                Some((_, sender_fault, why)) => Entry::Failed {
                    error: SendError::Rejected(why.clone()),
                    retry: !sender_fault,
                },
                None => Entry::Failed {
                    error: SendError::Ambiguous("the batch answer does not name the entry".into()),
                    retry: false,
                },
            }
        })
        .collect()
}

/// What a failed send amounts to, from every attempt's failure in order. It
/// is definite only if no attempt could have reached the queue: one that may
/// have landed makes the send ambiguous whatever the others answered.
fn verdict(failures: &[SendError]) -> SendError {
    if failures.is_empty() {
        return SendError::Rejected("no attempt was made".into());
    }
    let ambiguous = failures
        .iter()
        .any(|f| matches!(f, SendError::Ambiguous(_)));
    let text = failures
        .iter()
        .enumerate()
        .map(|(n, f)| {
            let (SendError::Rejected(why) | SendError::Ambiguous(why)) = f;
            format!("attempt {}: {why}", n + 1)
        })
        .collect::<Vec<_>>()
        .join("; ");
    if ambiguous {
        SendError::Ambiguous(text)
    } else {
        SendError::Rejected(text)
    }
}

/// The attempts a send may make, read from the client's own retry and
/// timeout settings so that `aws.rs` stays the one place they are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Budget {
    attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    attempt_timeout: Option<Duration>,
    operation_timeout: Option<Duration>,
}

impl Budget {
    fn of(config: &aws_sdk_sqs::Config) -> Self {
        // Without one the SDK would use its standard strategy.
        let retry = config
            .retry_config()
            .cloned()
            .unwrap_or_else(RetryConfig::standard);
        let timeouts = config.timeout_config();
        Self {
            attempts: retry.max_attempts().max(1),
            initial_backoff: retry.initial_backoff(),
            max_backoff: retry.max_backoff(),
            attempt_timeout: timeouts.and_then(|t| t.operation_attempt_timeout()),
            operation_timeout: timeouts.and_then(|t| t.operation_timeout()),
        }
    }

    /// The pause before retry `n` (1 for the first retry): exponential with
    /// full jitter, like the SDK's, so that buyers refused together do not
    /// all come back together.
    fn backoff(&self, n: u32) -> Duration {
        use std::hash::BuildHasher;
        let ceiling = self
            .initial_backoff
            .saturating_mul(1 << (n.saturating_sub(1)).min(16))
            .min(self.max_backoff);
        // A fresh `RandomState` is randomly keyed: enough for jitter,
        // without a dependency.
        let random = std::collections::hash_map::RandomState::new().hash_one(n);
        ceiling.mul_f64((random >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Whether an attempt starting after `elapsed` can run its full course
    /// within the operation timeout.
    fn fits_another(&self, elapsed: Duration) -> bool {
        match (self.operation_timeout, self.attempt_timeout) {
            (Some(total), Some(attempt)) => elapsed.saturating_add(attempt) <= total,
            (Some(total), None) => elapsed < total,
            (None, _) => true,
        }
    }

    /// What is left of the operation timeout after `elapsed`.
    fn left(&self, elapsed: Duration) -> Option<Duration> {
        self.operation_timeout
            .map(|total| total.saturating_sub(elapsed))
    }
}

/// Sorts an SDK failure into definite or ambiguous. When in doubt: ambiguous.
pub fn classify<E, R>(err: SdkError<E, R>) -> SendError
where
    E: StdError + 'static,
    R: HasStatus + std::fmt::Debug + 'static,
{
    let text = describe(&err);
    match &err {
        SdkError::ConstructionFailure(_) => SendError::Rejected(text),
        SdkError::ServiceError(service) => {
            if service.raw().status_code() >= 500 {
                SendError::Ambiguous(text)
            } else {
                SendError::Rejected(text)
            }
        }
        SdkError::DispatchFailure(_) if connection_refused(&err) => SendError::Rejected(text),
        _ => SendError::Ambiguous(text),
    }
}

/// The queue's depth (`GetQueueAttributes`).
pub async fn depth(client: &Client, queue_url: &str) -> Result<QueueDepth, String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attrs = client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .map_err(|e| describe(&e))?
        .attributes
        .unwrap_or_default();
    let n = |a: A| attrs.get(&a).and_then(|v| v.parse().ok()).unwrap_or(0);
    Ok(QueueDepth {
        visible: n(A::ApproximateNumberOfMessages),
        in_flight: n(A::ApproximateNumberOfMessagesNotVisible),
        delayed: n(A::ApproximateNumberOfMessagesDelayed),
    })
}

/// The orders queue and its DLQ, read by the operations path.
#[derive(Clone)]
pub struct SqsInspector {
    client: Client,
    queue_url: String,
    dlq_url: Option<String>,
}

impl SqsInspector {
    pub fn new(client: Client, queue_url: impl Into<String>, dlq_url: Option<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            dlq_url,
        }
    }
}

impl QueueInspector for SqsInspector {
    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        depth(&self.client, &self.queue_url)
            .await
            .map_err(QueueError)
    }

    async fn dlq_depth(&self) -> Result<Option<QueueDepth>, QueueError> {
        match &self.dlq_url {
            Some(url) => depth(&self.client, url).await.map(Some).map_err(QueueError),
            None => Ok(None),
        }
    }

    /// Pages through with a short visibility timeout, then makes every
    /// message visible again.
    async fn order_ids(&self) -> Result<HashSet<String>, QueueError> {
        let mut ids = HashSet::new();
        let urls = std::iter::once(self.queue_url.as_str()).chain(self.dlq_url.as_deref());
        for url in urls {
            let mut receipts = Vec::new();
            // Bounded: a checker must finish even on a queue that keeps filling.
            for _ in 0..100 {
                let out = self
                    .client
                    .receive_message()
                    .queue_url(url)
                    .max_number_of_messages(10)
                    .visibility_timeout(30)
                    .wait_time_seconds(0)
                    .send()
                    .await
                    .map_err(|e| QueueError(describe(&e)))?;
                let messages = out.messages.unwrap_or_default();
                if messages.is_empty() {
                    break;
                }
                for m in messages {
                    if let Some(id) = m
                        .body
                        .as_deref()
                        .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
                        .and_then(|v| v.get("orderId")?.as_str().map(str::to_owned))
                    {
                        ids.insert(id);
                    }
                    receipts.extend(m.receipt_handle);
                }
            }
            for receipt in receipts {
                // Best effort: a message left invisible comes back after 30 s.
                let _ = self
                    .client
                    .change_message_visibility()
                    .queue_url(url)
                    .receipt_handle(receipt)
                    .visibility_timeout(0)
                    .send()
                    .await;
            }
        }
        Ok(ids)
    }
}

/// The HTTP status of a raw response, so [`classify`] stays generic.
pub trait HasStatus {
    fn status_code(&self) -> u16;
}

impl HasStatus for aws_sdk_sqs::config::http::HttpResponse {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

/// A refused connection means nothing was sent.
fn connection_refused(err: &(dyn StdError + 'static)) -> bool {
    let mut cause: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// An error and its chain of causes on one line.
pub fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::config::timeout::TimeoutConfig;

    fn rejected(why: &str) -> SendError {
        SendError::Rejected(why.into())
    }

    fn ambiguous(why: &str) -> SendError {
        SendError::Ambiguous(why.into())
    }

    #[test]
    fn a_send_is_definite_only_if_every_attempt_was() {
        // The first attempt timed out, the second was
        // refused. The first may have landed.
        assert_eq!(
            verdict(&[ambiguous("timed out"), rejected("400")]),
            ambiguous("attempt 1: timed out; attempt 2: 400")
        );
        assert_eq!(
            verdict(&[rejected("connection refused"), ambiguous("503")]),
            ambiguous("attempt 1: connection refused; attempt 2: 503")
        );
        assert_eq!(
            verdict(&[rejected("connection refused"), rejected("400")]),
            rejected("attempt 1: connection refused; attempt 2: 400")
        );
        assert_eq!(verdict(&[rejected("400")]), rejected("attempt 1: 400"));
        assert_eq!(
            verdict(&[ambiguous("reset")]),
            ambiguous("attempt 1: reset")
        );
        assert!(matches!(verdict(&[]), SendError::Rejected(_)));
    }

    fn budget(total_ms: u64, attempt_ms: u64) -> Budget {
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(2)
                    .with_initial_backoff(Duration::from_millis(25)),
            )
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(Duration::from_millis(total_ms))
                    .operation_attempt_timeout(Duration::from_millis(attempt_ms))
                    .build(),
            )
            .build();
        Budget::of(&config)
    }

    #[test]
    fn each_batch_entry_is_reported_on_its_own() {
        let pending: Vec<(usize, String)> =
            [0, 2, 3, 5].iter().map(|n| (*n, format!("m{n}"))).collect();
        let entries = read_batch(
            &pending,
            &["0", "5"],
            &[
                ("2", true, "InvalidParameterValue: too long".into()),
                ("3", false, "InternalError".into()),
            ],
        );
        assert_eq!(
            entries,
            vec![
                Entry::Sent,
                Entry::Failed {
                    error: rejected("InvalidParameterValue: too long"),
                    retry: false
                },
                Entry::Failed {
                    error: rejected("InternalError"),
                    retry: true
                },
                Entry::Sent,
            ]
        );
        // An entry the answer leaves out may have landed.
        assert_eq!(
            read_batch(&pending[..1], &[], &[]),
            vec![Entry::Failed {
                error: ambiguous("the batch answer does not name the entry"),
                retry: false
            }]
        );
        let built = batch_entries(&pending).unwrap();
        let ids: Vec<&str> = built.iter().map(|e| e.id()).collect();
        assert_eq!(ids, ["0", "2", "3", "5"]);
    }

    #[test]
    fn the_budget_is_the_clients_retry_and_timeout_settings() {
        let b = budget(800, 360);
        assert_eq!(b.attempts, 2);
        assert_eq!(b.initial_backoff, Duration::from_millis(25));
        assert_eq!(b.attempt_timeout, Some(Duration::from_millis(360)));
        assert_eq!(b.operation_timeout, Some(Duration::from_millis(800)));
    }

    #[test]
    fn another_attempt_starts_only_if_it_can_finish_in_time() {
        let b = budget(800, 360);
        assert!(b.fits_another(Duration::from_millis(440)));
        assert!(!b.fits_another(Duration::from_millis(441)));
        assert_eq!(
            b.left(Duration::from_millis(300)),
            Some(Duration::from_millis(500))
        );
        assert_eq!(b.left(Duration::from_secs(2)), Some(Duration::ZERO));
    }

    #[test]
    fn backoff_stays_under_its_ceiling() {
        let b = budget(800, 360);
        for _ in 0..100 {
            assert!(b.backoff(1) <= Duration::from_millis(25));
            assert!(b.backoff(2) <= Duration::from_millis(50));
        }
        assert!(b.backoff(40) <= b.max_backoff);
    }
}
