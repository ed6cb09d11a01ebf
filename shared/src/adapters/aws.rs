//! AWS SDK clients, built once per execution environment.
//!
//! The endpoint comes from the SDK's standard `AWS_ENDPOINT_URL`, so the same
//! code talks to AWS and to the local emulator. Timeouts are short and
//! retries few: the purchase path answers in milliseconds or not at all.

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{AppName, BehaviorVersion, ConfigLoader, SdkConfig};
use std::time::Duration;

use crate::observe::metrics::Function;

/// Who calls AWS. Every request names it in its user agent
/// (`app/seckill-<function>`): CloudTrail shows which function made a call,
/// and the IAM test (`seckill_infra::iam`) checks each function's calls
/// against that function's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Function(Function),
    /// A tool or a test harness (`seckill-local`, tests): not a function,
    /// so not held to any role.
    Tool,
}

impl Caller {
    fn app_name(self) -> Option<AppName> {
        let name = match self {
            Caller::Function(f) => match f {
                Function::Purchase => "seckill-purchase",
                Function::OrderWriter => "seckill-order-writer",
                Function::OrdersApi => "seckill-orders-api",
                Function::AdminApi => "seckill-admin-api",
                Function::Prewarm => "seckill-prewarm",
                Function::ReleaseUnpaid => "seckill-release-unpaid",
                Function::Reconcile => "seckill-reconcile",
            },
            // Not `seckill-<name>`: the IAM test holds only functions to roles.
            Caller::Tool => "seckill.tool",
        };
        // Static names in the allowed alphabet: `None` cannot happen.
        AppName::new(name).ok()
    }
}

/// Loads the shared SDK configuration with an overall bound per operation.
pub async fn sdk_config(caller: Caller, operation_timeout: Duration) -> SdkConfig {
    loader(caller, operation_timeout).load().await
}

/// The loader behind [`sdk_config`], for callers that must change one more
/// setting (tests point it at an endpoint that refuses or never answers).
pub fn loader(caller: Caller, operation_timeout: Duration) -> ConfigLoader {
    let attempt = operation_timeout.mul_f64(0.45);
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(attempt.min(Duration::from_millis(500)))
        .operation_attempt_timeout(attempt)
        .operation_timeout(operation_timeout)
        .build();
    // Two attempts with a short backoff: the SDK's default first backoff (up
    // to 1 s) alone would outlast the operation bound, turning a definite
    // failure of the first attempt (connection refused) into a timeout, which
    // the purchase must treat as ambiguous. `SqsQueue::send` makes these
    // attempts itself, to judge all of them rather than the last.
    let retry = RetryConfig::standard()
        .with_max_attempts(2)
        .with_initial_backoff(Duration::from_millis(25));
    let loader = aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts)
        .retry_config(retry);
    match caller.app_name() {
        Some(name) => loader.app_name(name),
        None => loader,
    }
}

pub fn sqs(sdk: &SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}

pub fn dynamodb(sdk: &SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(sdk)
}

/// The Secrets Manager client, named here so the local tools and tests
/// create secrets without depending on the SDK crate themselves.
pub type SecretsClient = aws_sdk_secretsmanager::Client;

pub fn secrets(sdk: &SdkConfig) -> SecretsClient {
    SecretsClient::new(sdk)
}
