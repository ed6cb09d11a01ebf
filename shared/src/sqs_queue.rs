//! The order queue on SQS.
//!
//! The one subtle part is telling a definite rejection (the service answered
//! "no", or the request never left) from an ambiguous outcome (timeout, a
//! connection that broke after the request was sent, a 5xx): only the first
//! lets the purchase give its stock back.

use crate::domain::OrderMessage;
use crate::ports::{OrderQueue, SendError};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::SdkError;
use std::error::Error as StdError;

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
    async fn send(&self, message: &OrderMessage) -> Result<(), SendError> {
        let body = serde_json::to_string(message)
            .map_err(|e| SendError::Rejected(format!("unserialisable message: {e}")))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .send()
            .await
            .map(|_| ())
            .map_err(classify)
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

/// How many messages a queue holds, by its own approximate counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub visible: u64,
    pub in_flight: u64,
    pub delayed: u64,
}

impl QueueDepth {
    pub fn total(self) -> u64 {
        self.visible + self.in_flight + self.delayed
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
