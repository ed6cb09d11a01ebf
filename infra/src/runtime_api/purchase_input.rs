//! What the cold-start measurement gives the purchase function: the
//! environment `template.yaml` sets for it and `events/purchase.json`.

use seckill_shared::config::Config;

/// The environment `template.yaml` gives the purchase function for `config`
/// (globals plus its own variables), plus the `AWS_*` settings of this
/// process (endpoint, region, credentials) so the child reaches the same
/// emulator. Secrets pass as their ARNs (`config.secrets`), as on AWS: the
/// child fetches them at cold start; `config.gate_secret` has no variable.
pub fn function_env(config: &Config) -> Vec<(String, String)> {
    let mut env = vec![
        ("REDIS_URL".to_owned(), config.redis_url.clone()),
        ("SALES_TABLE".to_owned(), config.sales_table.clone()),
        // A purchase that finds its sale's keys lost starts the rebuild,
        // which reads the orders, the prewarm lead and the counts' lag.
        ("ORDERS_TABLE".to_owned(), config.orders_table.clone()),
        (
            "PREWARM_LEAD_SECONDS".to_owned(),
            config.prewarm_lead.as_secs().to_string(),
        ),
        (
            "QUEUE_COUNT_LAG_SECONDS".to_owned(),
            config.queue_count_lag.as_secs().to_string(),
        ),
        ("RUST_LOG".to_owned(), "info".to_owned()),
        ("LOG_FORMAT".to_owned(), "json".to_owned()),
        (
            "REDIS_TIMEOUT_MS".to_owned(),
            config.redis_timeout.as_millis().to_string(),
        ),
        (
            "SQS_TIMEOUT_MS".to_owned(),
            config.sqs_timeout.as_millis().to_string(),
        ),
        (
            "SALE_CACHE_SECONDS".to_owned(),
            config.sale_cache_ttl.as_secs().to_string(),
        ),
        (
            "RATE_USER_PER_SEC".to_owned(),
            config.rate_limits.user_per_sec.to_string(),
        ),
        (
            "RATE_USER_BURST".to_owned(),
            config.rate_limits.user_burst.to_string(),
        ),
        (
            "RATE_IP_PER_SEC".to_owned(),
            config.rate_limits.ip_per_sec.to_string(),
        ),
        (
            "RATE_IP_BURST".to_owned(),
            config.rate_limits.ip_burst.to_string(),
        ),
        (
            "METRICS_NAMESPACE".to_owned(),
            config.metrics_namespace.clone(),
        ),
    ];
    let optional = [
        ("ORDERS_QUEUE_URL", config.orders_queue_url.clone()),
        ("ORDERS_DLQ_URL", config.orders_dlq_url.clone()),
        ("REDIS_AUTH_SECRET_ARN", config.secrets.redis_auth.clone()),
        ("GATE_SECRET_ARN", config.secrets.gate.clone()),
        ("EDGE_SECRET_ARN", config.secrets.edge.clone()),
    ];
    let forwarded = [
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ]
    .map(|name| (name, std::env::var(name).ok()));
    for (name, value) in optional.into_iter().chain(forwarded) {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            env.push((name.to_owned(), value));
        }
    }
    env
}

/// `events/purchase.json`, the real-shaped API Gateway v2 event.
pub const PURCHASE_EVENT: &str = include_str!("../../../events/purchase.json");

/// `events/purchase.json` aimed at `sale_id`, from the buyer `sub` with its
/// own `Idempotency-Key`, as the JWT authorizer would pass it on.
pub fn purchase_event(
    sale_id: &str,
    sub: &str,
    idempotency_key: &str,
) -> Result<String, serde_json::Error> {
    let mut event: serde_json::Value = serde_json::from_str(PURCHASE_EVENT)?;
    let path = format!("/sales/{sale_id}/purchase");
    event["rawPath"] = path.clone().into();
    event["pathParameters"]["saleId"] = sale_id.into();
    event["requestContext"]["http"]["path"] = path.into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub.into();
    event["headers"]["idempotency-key"] = idempotency_key.into();
    serde_json::to_string(&event)
}
