//! Tracing set-up: JSON lines in Lambda (CloudWatch Logs Insights parses
//! them), readable text locally. `RUST_LOG` filters; `LOG_FORMAT=json|text`
//! overrides the choice.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let in_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
    let json = match std::env::var("LOG_FORMAT").as_deref() {
        Ok("json") => true,
        Ok("text") => false,
        _ => in_lambda,
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // try_init: a second call (tests, the local stack) keeps the first set-up.
    let _ = if json {
        builder
            .json()
            .with_current_span(false)
            .without_time()
            .try_init()
    } else {
        builder.with_ansi(!in_lambda).try_init()
    };
}
