//! AWS SDK clients, built once per execution environment.
//!
//! The endpoint comes from the SDK's standard `AWS_ENDPOINT_URL`, so the same
//! code talks to AWS and to the local emulator. Timeouts are short and
//! retries few: the purchase path answers in milliseconds or not at all.

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use std::time::Duration;

/// Loads the shared SDK configuration with an overall bound per operation.
pub async fn sdk_config(operation_timeout: Duration) -> SdkConfig {
    let attempt = operation_timeout.mul_f64(0.45);
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(attempt.min(Duration::from_millis(500)))
        .operation_attempt_timeout(attempt)
        .operation_timeout(operation_timeout)
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts)
        .retry_config(RetryConfig::standard().with_max_attempts(2))
        .load()
        .await
}

pub fn sqs(sdk: &SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}

pub fn dynamodb(sdk: &SdkConfig) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(sdk)
}
