//! Typed configuration, read once from the environment at cold start.
//! Every name here is documented in `docs/design.md` (Configuration) and set in `template.yaml`.
//!
//! The environment holds no secret: it names them. `REDIS_AUTH_SECRET_ARN`
//! and `GATE_SECRET_ARN` are Secrets Manager ids, which each function's
//! `wire` fetches once ([`crate::adapters::secrets::resolve`]) into the two resolved
//! fields, [`Config::redis_url`] (the token as its password) and
//! [`Config::gate_secret`]. Tests and the local tools may fill those two
//! fields directly; no loader reads a secret value from the environment.
//!
//! Each function reads only what its wiring uses ([`Reads`], chosen in the
//! function crate's `config`), through a [`Lookup`]: the template-code
//! consistency test runs those same loaders with a recording lookup to learn
//! which names each function reads, and compares them with what
//! `template.yaml` sets on that function.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("environment variable {name} is invalid: {why}")]
    Invalid { name: &'static str, why: String },
}

/// The Secrets Manager secrets a function's wiring fetches at cold start
/// (secret ARNs, or names: whatever `GetSecretValue` takes as `SecretId`).
/// Not secret themselves; the values never pass through the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretArns {
    /// `REDIS_AUTH_SECRET_ARN`: the Redis AUTH token, a JSON object
    /// `{"token": "..."}`; it becomes the password of [`Config::redis_url`],
    /// which then must carry none itself. Unset: Redis without AUTH (or a
    /// password already in `REDIS_URL`, for the local stack and tests).
    pub redis_auth: Option<String>,
    /// `GATE_SECRET_ARN`: the sale gate's HMAC key, the secret string
    /// itself (32 characters or more); it becomes [`Config::gate_secret`].
    pub gate: Option<String>,
    /// `PAYMENT_SECRET_ARN`: the key the payment provider signs its
    /// callbacks with, the secret string itself (32 characters or more); it
    /// becomes [`Config::payment_secret`].
    pub payment: Option<String>,
    /// `EDGE_SECRET_ARN`: what the API's CloudFront distribution sends with
    /// every request (`ApiEdge=on`), the secret string itself (32
    /// characters or more); it becomes [`Config::edge_secret`].
    pub edge: Option<String>,
}

impl SecretArns {
    pub fn is_empty(&self) -> bool {
        self.redis_auth.is_none()
            && self.gate.is_none()
            && self.payment.is_none()
            && self.edge.is_none()
    }
}

/// Token-bucket defaults of the purchase rate limiter; a sale's meta hash
/// may override them (`rlUserRate`, `rlUserBurst`, `rlIpRate`, `rlIpBurst`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// `RATE_USER_PER_SEC` (default 2) and `RATE_USER_BURST` (default 5).
    pub user_per_sec: f64,
    pub user_burst: f64,
    /// `RATE_IP_PER_SEC` (default 200) and `RATE_IP_BURST` (default 400):
    /// generous, because carrier NAT puts many buyers behind one address.
    pub ip_per_sec: f64,
    pub ip_burst: f64,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            user_per_sec: 2.0,
            user_burst: 5.0,
            ip_per_sec: 200.0,
            ip_burst: 400.0,
        }
    }
}

/// Settings of the purchase path and the adapters it uses. `Debug` hides
/// the secrets: the gate key, and the password a `REDIS_URL` may carry.
#[derive(Clone)]
pub struct Config {
    /// `REDIS_URL`: `redis://[[user]:password@]host:port`, or `rediss://...`
    /// for TLS (ElastiCache in-transit encryption), the certificate verified
    /// against the system roots (`SSL_CERT_FILE` replaces them). Reserved
    /// characters of the password are percent-encoded. Never logged whole:
    /// see [`redact_url`]. On AWS it carries no password: the token comes
    /// from `REDIS_AUTH_SECRET_ARN` ([`SecretArns::redis_auth`]) and is
    /// added here at cold start.
    pub redis_url: String,
    /// `ORDERS_QUEUE_URL`: the SQS queue the winners go to. Only the
    /// functions that send or measure it have it (see [`Reads`]).
    pub orders_queue_url: Option<String>,
    /// `ORDERS_DLQ_URL`: the orders queue's DLQ, which reconcile reports on.
    pub orders_dlq_url: Option<String>,
    /// `SALES_TABLE`: the DynamoDB `sales` table.
    pub sales_table: String,
    /// `ORDERS_TABLE`: the DynamoDB `orders` table.
    pub orders_table: String,
    /// `REDIS_TIMEOUT_MS` (default 250): a Redis call slower than this fails
    /// closed with 503 instead of holding the buyer.
    pub redis_timeout: Duration,
    /// `SQS_TIMEOUT_MS` (default 1500): bound of one SendMessage, retries included.
    pub sqs_timeout: Duration,
    /// `SALE_CACHE_SECONDS` (default 5): how long an execution environment
    /// trusts what the `sales` table said about a sale missing from Redis.
    pub sale_cache_ttl: Duration,
    /// `PREWARM_LEAD_SECONDS` (default 600): how long before its start a
    /// sale is loaded into Redis.
    pub prewarm_lead: Duration,
    /// `QUEUE_COUNT_LAG_SECONDS` (default 60, read with
    /// `PREWARM_LEAD_SECONDS`): how long SQS's queue counts may lag behind
    /// the messages (AWS documents about a minute).
    pub queue_count_lag: Duration,
    pub rate_limits: RateLimits,
    /// The HMAC key of the sale gate's questions and passes, fetched from
    /// `GATE_SECRET_ARN` at cold start (no variable holds it). Without it,
    /// gated sales sell to nobody (and say so at cold start).
    pub gate_secret: Option<String>,
    /// The payment provider's signing key, fetched from
    /// `PAYMENT_SECRET_ARN` at cold start (no variable holds it). Without
    /// it, `POST /payments/callback` refuses every call as unsigned.
    pub payment_secret: Option<String>,
    /// What the API's CloudFront distribution sends in
    /// [`crate::http::EDGE_SECRET_HEADER`], fetched from `EDGE_SECRET_ARN`
    /// at cold start: a request carrying it came through the edge, so its
    /// viewer's address is believed ([`crate::http::source_ip`]). Without
    /// it (the local stack, `ApiEdge=off`) the limiter keys on the address
    /// API Gateway saw.
    pub edge_secret: Option<String>,
    /// The secrets to fetch at cold start (`REDIS_AUTH_SECRET_ARN`,
    /// `GATE_SECRET_ARN`, `PAYMENT_SECRET_ARN`, `EDGE_SECRET_ARN`); empty once
    /// [`crate::adapters::secrets::resolve`] has.
    pub secrets: SecretArns,
    /// `METRICS_NAMESPACE` (default `Seckill`): the CloudWatch namespace of
    /// the EMF lines; the template sets `Seckill/<stack name>`.
    pub metrics_namespace: String,
    /// `MAX_RECEIVE_COUNT`: the orders queue's redrive `maxReceiveCount`.
    /// The order-writer counts a failure on this receive as a DLQ move; only
    /// it has the variable.
    pub max_receive_count: Option<u32>,
    /// `STAND_IN_PAYS_PRICED` (orders-api; default `false`): which orders
    /// `POST /orders/{orderId}/pay`, the buyer's stand-in for the payment
    /// provider, may mark paid (`true`: any).
    pub stand_in_payments: StandInPayments,
}

/// Which orders the buyer's stand-in for the payment provider
/// (`POST /orders/{orderId}/pay`) may mark paid: it takes no money.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StandInPayments {
    /// `false`: only orders without an amount (nothing is owed); a priced
    /// order is paid through the provider's signed callback. What
    /// `template.yaml` deploys, and the default.
    #[default]
    Unpriced,
    /// `true`: every order, priced or not: the local stack, which has no
    /// payment provider.
    Any,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("redis_url", &redact_url(&self.redis_url))
            .field("orders_queue_url", &self.orders_queue_url)
            .field("orders_dlq_url", &self.orders_dlq_url)
            .field("sales_table", &self.sales_table)
            .field("orders_table", &self.orders_table)
            .field("redis_timeout", &self.redis_timeout)
            .field("sqs_timeout", &self.sqs_timeout)
            .field("sale_cache_ttl", &self.sale_cache_ttl)
            .field("prewarm_lead", &self.prewarm_lead)
            .field("queue_count_lag", &self.queue_count_lag)
            .field("rate_limits", &self.rate_limits)
            .field(
                "gate_secret",
                &self.gate_secret.as_ref().map(|_| "<secret>"),
            )
            .field(
                "payment_secret",
                &self.payment_secret.as_ref().map(|_| "<secret>"),
            )
            .field(
                "edge_secret",
                &self.edge_secret.as_ref().map(|_| "<secret>"),
            )
            .field("secrets", &self.secrets)
            .field("metrics_namespace", &self.metrics_namespace)
            .field("max_receive_count", &self.max_receive_count)
            .field("stand_in_payments", &self.stand_in_payments)
            .finish()
    }
}

/// `rediss://user:password@host:port` without the password.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}:<secret>{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Whether `url` names a password: `scheme://user:password@host...` (a
/// cluster seed list's hosts share it).
pub fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// The environment, as a lookup function so tests can pass a map.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment as a [`Lookup`]: what a function's `main.rs`
/// hands to its crate's `config`.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Which settings a function reads besides those every function reads
/// (`REDIS_URL`, `REDIS_AUTH_SECRET_ARN`, `REDIS_TIMEOUT_MS`, `SALES_TABLE`,
/// `METRICS_NAMESPACE`). A setting a function
/// does not read keeps its default (`None`, the documented default, or an
/// empty table name), which that function's wiring never looks at; so its
/// `template.yaml` entry sets exactly what it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    /// `ORDERS_TABLE` (required when read).
    pub orders_table: bool,
    /// `ORDERS_QUEUE_URL`.
    pub orders_queue: bool,
    /// `ORDERS_DLQ_URL`.
    pub orders_dlq: bool,
    /// `SQS_TIMEOUT_MS`.
    pub sqs_timeout: bool,
    /// `SALE_CACHE_SECONDS`.
    pub sale_cache: bool,
    /// `PREWARM_LEAD_SECONDS`.
    pub prewarm_lead: bool,
    /// `RATE_USER_PER_SEC`, `RATE_USER_BURST`, `RATE_IP_PER_SEC`, `RATE_IP_BURST`.
    pub rate_limits: bool,
    /// `GATE_SECRET_ARN`: the gate key's secret.
    pub gate_secret: bool,
    /// `PAYMENT_SECRET_ARN`: the payment provider's signing key's secret.
    pub payment_secret: bool,
    /// `EDGE_SECRET_ARN`: the API edge's secret (purchase: whose address
    /// the limiter counts).
    pub edge_secret: bool,
    /// `MAX_RECEIVE_COUNT` (the order-writer's: when a failure is final).
    pub max_receive_count: bool,
    /// `STAND_IN_PAYS_PRICED` (orders-api's pay route).
    pub stand_in_payments: bool,
}

impl Reads {
    /// Only the settings every function reads.
    pub const COMMON: Reads = Reads {
        orders_table: false,
        orders_queue: false,
        orders_dlq: false,
        sqs_timeout: false,
        sale_cache: false,
        prewarm_lead: false,
        rate_limits: false,
        gate_secret: false,
        payment_secret: false,
        edge_secret: false,
        max_receive_count: false,
        stand_in_payments: false,
    };

    /// Every setting: the local stack runs every function in one process.
    pub const ALL: Reads = Reads {
        orders_table: true,
        orders_queue: true,
        orders_dlq: true,
        sqs_timeout: true,
        sale_cache: true,
        prewarm_lead: true,
        rate_limits: true,
        gate_secret: true,
        payment_secret: true,
        edge_secret: true,
        max_receive_count: true,
        stand_in_payments: true,
    };
}

impl Config {
    /// How long after a lost sale is noticed its rebuild may trust a zero
    /// queue count: a purchase accepted just before the loss may still be
    /// sending (`SQS_TIMEOUT_MS`), and its message may be missing from the
    /// counts for `QUEUE_COUNT_LAG_SECONDS` after.
    /// Zero with `QUEUE_COUNT_LAG_SECONDS=0`: counts declared exact (an
    /// emulator without the strict layer's lag), nothing to wait for.
    pub fn rebuild_settle(&self) -> Duration {
        if self.queue_count_lag.is_zero() {
            Duration::ZERO
        } else {
            self.queue_count_lag + self.sqs_timeout
        }
    }

    /// The queue URL, for the functions that cannot work without it.
    pub fn queue_url(&self) -> Result<&str, ConfigError> {
        self.orders_queue_url
            .as_deref()
            .ok_or(ConfigError::Missing("ORDERS_QUEUE_URL"))
    }

    /// Every setting (the local stack, which hosts every function).
    pub fn from_lookup(env: Lookup<'_>) -> Result<Self, ConfigError> {
        Self::reading(env, Reads::ALL)
    }

    /// The common settings plus those `reads` names; nothing else is looked up.
    pub fn reading(env: Lookup<'_>, reads: Reads) -> Result<Self, ConfigError> {
        let none = |_: &str| None;
        // A setting not read is looked up in an empty environment, so it
        // takes its default through the same parser.
        let env_if = |read: bool| -> Lookup<'_> { if read { env } else { &none } };
        let redis_url = required(env, "REDIS_URL")?;
        let secrets = SecretArns {
            redis_auth: env("REDIS_AUTH_SECRET_ARN").filter(|v| !v.trim().is_empty()),
            gate: env_if(reads.gate_secret)("GATE_SECRET_ARN").filter(|v| !v.trim().is_empty()),
            payment: env_if(reads.payment_secret)("PAYMENT_SECRET_ARN")
                .filter(|v| !v.trim().is_empty()),
            edge: env_if(reads.edge_secret)("EDGE_SECRET_ARN").filter(|v| !v.trim().is_empty()),
        };
        if secrets.redis_auth.is_some() && has_password(&redis_url) {
            // Two sources of one password: refuse rather than guess.
            return Err(ConfigError::Invalid {
                name: "REDIS_URL",
                why:
                    "carries a password while REDIS_AUTH_SECRET_ARN names the AUTH token's secret; \
                      leave the password out of the URL"
                        .into(),
            });
        }
        Ok(Self {
            redis_url,
            orders_queue_url: env_if(reads.orders_queue)("ORDERS_QUEUE_URL")
                .filter(|v| !v.trim().is_empty()),
            orders_dlq_url: env_if(reads.orders_dlq)("ORDERS_DLQ_URL")
                .filter(|v| !v.trim().is_empty()),
            sales_table: required(env, "SALES_TABLE")?,
            orders_table: if reads.orders_table {
                required(env, "ORDERS_TABLE")?
            } else {
                String::new()
            },
            redis_timeout: millis(env, "REDIS_TIMEOUT_MS", 250)?,
            sqs_timeout: millis(env_if(reads.sqs_timeout), "SQS_TIMEOUT_MS", 1_500)?,
            sale_cache_ttl: Duration::from_secs(number(
                env_if(reads.sale_cache),
                "SALE_CACHE_SECONDS",
                5,
            )?),
            prewarm_lead: Duration::from_secs(number(
                env_if(reads.prewarm_lead),
                "PREWARM_LEAD_SECONDS",
                600,
            )?),
            queue_count_lag: Duration::from_secs(number(
                env_if(reads.prewarm_lead),
                "QUEUE_COUNT_LAG_SECONDS",
                60,
            )?),
            rate_limits: rate_limits(env_if(reads.rate_limits))?,
            gate_secret: None,
            payment_secret: None,
            edge_secret: None,
            secrets,
            metrics_namespace: env("METRICS_NAMESPACE")
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| crate::observe::metrics::DEFAULT_NAMESPACE.to_owned()),
            max_receive_count: match env_if(reads.max_receive_count)("MAX_RECEIVE_COUNT") {
                None => None,
                // Parsed from the value already read: one lookup per name.
                Some(raw) => Some(positive(&|_| Some(raw.clone()), "MAX_RECEIVE_COUNT")?),
            },
            stand_in_payments: match env_if(reads.stand_in_payments)("STAND_IN_PAYS_PRICED")
                .as_deref()
                .map(str::trim)
            {
                None | Some("false" | "0") => StandInPayments::Unpriced,
                Some("true" | "1") => StandInPayments::Any,
                Some(_) => {
                    return Err(ConfigError::Invalid {
                        name: "STAND_IN_PAYS_PRICED",
                        why: "must be true or false".into(),
                    });
                }
            },
        })
    }
}

fn rate_limits(env: Lookup<'_>) -> Result<RateLimits, ConfigError> {
    let d = RateLimits::default();
    let rate = |name: &'static str, default: f64| -> Result<f64, ConfigError> {
        match env(name) {
            None => Ok(default),
            Some(raw) => match raw.trim().parse::<f64>() {
                Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
                _ => Err(ConfigError::Invalid {
                    name,
                    why: format!("{raw:?} is not a positive number"),
                }),
            },
        }
    };
    Ok(RateLimits {
        user_per_sec: rate("RATE_USER_PER_SEC", d.user_per_sec)?,
        user_burst: rate("RATE_USER_BURST", d.user_burst)?,
        ip_per_sec: rate("RATE_IP_PER_SEC", d.ip_per_sec)?,
        ip_burst: rate("RATE_IP_BURST", d.ip_burst)?,
    })
}

fn required(env: Lookup<'_>, name: &'static str) -> Result<String, ConfigError> {
    match env(name) {
        Some(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ConfigError::Missing(name)),
    }
}

fn number(env: Lookup<'_>, name: &'static str, default: u64) -> Result<u64, ConfigError> {
    match env(name) {
        None => Ok(default),
        Some(raw) => raw.trim().parse().map_err(|_| ConfigError::Invalid {
            name,
            why: format!("{raw:?} is not a whole number"),
        }),
    }
}

fn positive(env: Lookup<'_>, name: &'static str) -> Result<u32, ConfigError> {
    match u32::try_from(number(env, name, 0)?) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::Invalid {
            name,
            why: "must be a whole number from 1".into(),
        }),
    }
}

fn millis(env: Lookup<'_>, name: &'static str, default: u64) -> Result<Duration, ConfigError> {
    match number(env, name, default)? {
        0 => Err(ConfigError::Invalid {
            name,
            why: "must be above 0".into(),
        }),
        ms => Ok(Duration::from_millis(ms)),
    }
}

#[cfg(test)]
mod tests;
