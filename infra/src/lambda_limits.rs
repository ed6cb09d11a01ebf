//! The Lambda and API Gateway limits the local stack enforces, because the
//! functions run in-process here and nothing else would: each function's
//! `Timeout` (an invocation that outlives it is dropped), its concurrency
//! (`ReservedConcurrentExecutions`, or a share of the account's pool; an
//! invocation over it is refused, never queued), and API Gateway's account
//! throttle (a token bucket in front of the HTTP API). Each function also
//! scales as Lambda does: a new execution environment is needed only when
//! every warm one is busy, and a function gains at most
//! [`SCALING_PER_10_SECONDS`] of them every ten seconds; an invocation that
//! needs one beyond that is refused like one over the concurrency.
//!
//! [`Function`] is the one table of each function's `Timeout` and reserved
//! concurrency; the `lambda_limits` test checks it against `template.yaml`
//! (through [`crate::consistency::Template`]). [`LimitSettings`] are the
//! knobs (`SECKILL_LAMBDA_TIMEOUTS`, `SECKILL_LAMBDA_CONCURRENCY`,
//! `SECKILL_LAMBDA_SCALING`, `SECKILL_API_RATE`, `SECKILL_API_BURST`), [`LambdaLimits`] what the
//! gateway, the event source and the schedules invoke through.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// A function of `template.yaml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    Purchase,
    OrdersApi,
    AdminApi,
    OrderWriter,
    Prewarm,
    ReleaseUnpaid,
    Reconcile,
}

impl Function {
    pub const ALL: [Function; 7] = [
        Function::Purchase,
        Function::OrdersApi,
        Function::AdminApi,
        Function::OrderWriter,
        Function::Prewarm,
        Function::ReleaseUnpaid,
        Function::Reconcile,
    ];

    /// The binary (`functions/<name>`), as the metrics and logs name it.
    pub fn name(self) -> &'static str {
        match self {
            Function::Purchase => "purchase",
            Function::OrdersApi => "orders-api",
            Function::AdminApi => "admin-api",
            Function::OrderWriter => "order-writer",
            Function::Prewarm => "prewarm",
            Function::ReleaseUnpaid => "release-unpaid",
            Function::Reconcile => "reconcile",
        }
    }

    /// Its resource in `template.yaml`.
    pub fn logical_id(self) -> &'static str {
        match self {
            Function::Purchase => "PurchaseFunction",
            Function::OrdersApi => "OrdersApiFunction",
            Function::AdminApi => "AdminApiFunction",
            Function::OrderWriter => "OrderWriterFunction",
            Function::Prewarm => "PrewarmFunction",
            Function::ReleaseUnpaid => "ReleaseUnpaidFunction",
            Function::Reconcile => "ReconcileFunction",
        }
    }

    /// `Timeout` in `template.yaml`, in seconds.
    pub fn timeout_secs(self) -> u64 {
        match self {
            Function::Purchase | Function::OrdersApi => 5,
            Function::OrderWriter => 10,
            Function::AdminApi => 30,
            Function::Prewarm | Function::ReleaseUnpaid => 60,
            Function::Reconcile => 120,
        }
    }

    /// `ReservedConcurrentExecutions` in `template.yaml`, if it sets one.
    pub fn reserved_concurrency(self) -> Option<u32> {
        match self {
            Function::OrderWriter => Some(5),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            Function::Purchase => 0,
            Function::OrdersApi => 1,
            Function::AdminApi => 2,
            Function::OrderWriter => 3,
            Function::Prewarm => 4,
            Function::ReleaseUnpaid => 5,
            Function::Reconcile => 6,
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Lambda's default concurrency quota of an account and Region.
pub const ACCOUNT_CONCURRENCY: u32 = 1_000;
/// Lambda's scaling rate: each function gains at most this many execution
/// environments every ten seconds (and may have that many at once from
/// cold).
pub const SCALING_PER_10_SECONDS: u32 = 1_000;
/// API Gateway's account throttle at AWS's default (10,000 requests a
/// second, a burst of 5,000): above what the suite's bursts and the demo
/// send, within reach of a load test against one process; the knobs scale
/// it down.
pub const API_RATE_PER_SEC: f64 = 10_000.0;
pub const API_BURST: u32 = 5_000;

/// The knobs. Each has a way off, for the lenient behaviour.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitSettings {
    /// `SECKILL_LAMBDA_TIMEOUTS` (on; `0` off): each function's `Timeout`.
    pub timeouts: bool,
    /// `SECKILL_LAMBDA_CONCURRENCY` ([`ACCOUNT_CONCURRENCY`]; `0` no caps at
    /// all, reserved ones included): the account's pool, which the
    /// functions without reserved concurrency share.
    pub account_concurrency: u32,
    /// `SECKILL_LAMBDA_SCALING` ([`SCALING_PER_10_SECONDS`]; `0` off): the
    /// new execution environments a function may gain every ten seconds.
    pub scaling_per_10_seconds: u32,
    /// `SECKILL_API_RATE` ([`API_RATE_PER_SEC`]; `0` no throttle) and
    /// `SECKILL_API_BURST` ([`API_BURST`]): the account throttle's token
    /// bucket.
    pub api_rate_per_sec: f64,
    pub api_burst: u32,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            timeouts: true,
            account_concurrency: ACCOUNT_CONCURRENCY,
            scaling_per_10_seconds: SCALING_PER_10_SECONDS,
            api_rate_per_sec: API_RATE_PER_SEC,
            api_burst: API_BURST,
        }
    }
}

impl LimitSettings {
    /// Every limit off: the in-process functions as kind as before.
    pub fn off() -> Self {
        Self {
            timeouts: false,
            account_concurrency: 0,
            scaling_per_10_seconds: 0,
            api_rate_per_sec: 0.0,
            api_burst: 0,
        }
    }

    /// The defaults, each replaced by its variable when that is set; a
    /// value that does not parse keeps the default (and says so).
    pub fn from_env() -> Self {
        Self::from_lookup(&|name| std::env::var(name).ok())
    }

    pub fn from_lookup(env: &dyn Fn(&str) -> Option<String>) -> Self {
        fn read<T: std::str::FromStr>(
            env: &dyn Fn(&str) -> Option<String>,
            name: &str,
            default: T,
        ) -> T {
            match env(name).map(|v| v.trim().to_owned()) {
                None => default,
                Some(v) if v.is_empty() => default,
                Some(v) => v.parse().unwrap_or_else(|_| {
                    tracing::warn!(variable = name, value = %v, "not a number; the default applies");
                    default
                }),
            }
        }
        let defaults = Self::default();
        Self {
            timeouts: read::<u8>(env, "SECKILL_LAMBDA_TIMEOUTS", 1) != 0,
            account_concurrency: read(
                env,
                "SECKILL_LAMBDA_CONCURRENCY",
                defaults.account_concurrency,
            ),
            scaling_per_10_seconds: read(
                env,
                "SECKILL_LAMBDA_SCALING",
                defaults.scaling_per_10_seconds,
            ),
            api_rate_per_sec: read(env, "SECKILL_API_RATE", defaults.api_rate_per_sec),
            api_burst: read(env, "SECKILL_API_BURST", defaults.api_burst),
        }
    }
}

/// Why an invocation did not give the function's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// Lambda refused the invocation: the function's concurrency is in use
    /// (`TooManyRequestsException`, "Rate Exceeded.").
    #[error("{function}: TooManyRequestsException: Rate Exceeded. ({limit} concurrent executions)")]
    Throttled { function: Function, limit: u32 },
    /// Every warm environment is busy and the function has gained as many
    /// new ones as its scaling rate allows in the last ten seconds.
    #[error(
        "{function}: TooManyRequestsException: Rate Exceeded. ({environments} environments, scaling {per_10_seconds} per 10 s)"
    )]
    ScalingThrottled {
        function: Function,
        environments: u32,
        per_10_seconds: u32,
    },
    /// The invocation outlived the function's `Timeout` and was stopped.
    #[error("{function}: Task timed out after {:.2} seconds", .after.as_secs_f64())]
    TimedOut { function: Function, after: Duration },
}

/// A function's slots: its own (reserved) or the account pool's.
#[derive(Debug, Clone)]
struct Slots {
    semaphore: Arc<Semaphore>,
    limit: u32,
}

/// The limits one function is invoked under.
#[derive(Debug, Clone)]
pub struct FunctionLimit {
    function: Function,
    timeout: Option<Duration>,
    slots: Option<Slots>,
    scaling: Option<Scaling>,
}

impl FunctionLimit {
    /// The function alone under the template's limits: its `Timeout` and,
    /// if it has reserved concurrency, that many slots of its own (else no
    /// cap: there is no account here to share).
    pub fn template(function: Function) -> Self {
        Self {
            function,
            timeout: Some(Duration::from_secs(function.timeout_secs())),
            slots: function.reserved_concurrency().map(Slots::new),
            scaling: Some(Scaling::new(SCALING_PER_10_SECONDS)),
        }
    }

    /// No limit at all.
    pub fn unlimited(function: Function) -> Self {
        Self {
            function,
            timeout: None,
            slots: None,
            scaling: None,
        }
    }

    pub fn function(&self) -> Function {
        self.function
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The same function with this timeout (`None`: none).
    pub fn with_timeout(self, timeout: Option<Duration>) -> Self {
        Self { timeout, ..self }
    }

    /// The same function with `limit` slots of its own (`None`: no cap).
    pub fn with_concurrency(self, limit: Option<u32>) -> Self {
        Self {
            slots: limit.map(Slots::new),
            ..self
        }
    }

    /// The same function gaining at most `per_10_seconds` environments
    /// every ten seconds (`None`: as many as it asks for).
    pub fn with_scaling(self, per_10_seconds: Option<u32>) -> Self {
        Self {
            scaling: per_10_seconds.map(Scaling::new),
            ..self
        }
    }

    /// Runs `work` as one invocation: refused at once when every slot is
    /// taken or it needs an environment the scaling rate does not allow yet
    /// (Lambda does not queue a synchronous invocation), dropped when it
    /// outlives the timeout (what Lambda does to a timed-out runtime: the
    /// work stops where it was).
    pub async fn invoke<F: Future>(&self, work: F) -> Result<F::Output, InvokeError> {
        let _environment = match &self.scaling {
            Some(scaling) => Some(scaling.enter(self.function)?),
            None => None,
        };
        let _slot = match &self.slots {
            Some(slots) => Some(slots.semaphore.clone().try_acquire_owned().map_err(|_| {
                InvokeError::Throttled {
                    function: self.function,
                    limit: slots.limit,
                }
            })?),
            None => None,
        };
        match self.timeout {
            Some(after) => {
                tokio::time::timeout(after, work)
                    .await
                    .map_err(|_| InvokeError::TimedOut {
                        function: self.function,
                        after,
                    })
            }
            None => Ok(work.await),
        }
    }
}

impl Slots {
    fn new(limit: u32) -> Self {
        Self {
            semaphore: Arc::new(Semaphore::new(limit as usize)),
            limit,
        }
    }
}

/// A function's execution environments: the warm ones, how many are busy,
/// and a bucket of the new ones it may still gain, refilled at its scaling
/// rate over ten seconds. Environments are never retired here: an idle one
/// stays warm, as Lambda keeps them for a while.
#[derive(Debug, Clone)]
struct Scaling {
    per_10_seconds: u32,
    state: Arc<Mutex<Environments>>,
}

#[derive(Debug)]
struct Environments {
    warm: u32,
    busy: u32,
    new_allowed: f64,
    at: Instant,
}

/// One busy environment, given back when the invocation ends.
struct Busy(Arc<Mutex<Environments>>);

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = lock(&self.0);
        state.busy = state.busy.saturating_sub(1);
    }
}

/// A panic elsewhere while holding the lock leaves numbers, not a broken
/// invariant: keep using them.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Scaling {
    fn new(per_10_seconds: u32) -> Self {
        Self {
            per_10_seconds,
            state: Arc::new(Mutex::new(Environments {
                warm: 0,
                busy: 0,
                new_allowed: f64::from(per_10_seconds),
                at: Instant::now(),
            })),
        }
    }

    /// A warm idle environment if there is one, else a new one if the
    /// scaling rate allows it.
    fn enter(&self, function: Function) -> Result<Busy, InvokeError> {
        let mut state = lock(&self.state);
        if state.busy >= state.warm {
            let now = Instant::now();
            let rate = f64::from(self.per_10_seconds);
            let refill = now.saturating_duration_since(state.at).as_secs_f64() * rate / 10.0;
            state.new_allowed = (state.new_allowed + refill).min(rate);
            state.at = now;
            if state.new_allowed < 1.0 {
                return Err(InvokeError::ScalingThrottled {
                    function,
                    environments: state.warm,
                    per_10_seconds: self.per_10_seconds,
                });
            }
            state.new_allowed -= 1.0;
            state.warm += 1;
        }
        state.busy += 1;
        Ok(Busy(self.state.clone()))
    }
}

/// Every function's limits, as one account has them: a function with
/// reserved concurrency has its own slots, the others share what is left of
/// the account's.
#[derive(Debug, Clone)]
pub struct LambdaLimits {
    functions: Vec<FunctionLimit>,
}

impl Default for LambdaLimits {
    fn default() -> Self {
        Self::new(&LimitSettings::default())
    }
}

impl LambdaLimits {
    pub fn new(settings: &LimitSettings) -> Self {
        let reserved: u32 = Function::ALL
            .iter()
            .filter_map(|f| f.reserved_concurrency())
            .sum();
        let pool = (settings.account_concurrency > 0)
            .then(|| Slots::new(settings.account_concurrency.saturating_sub(reserved).max(1)));
        let functions = Function::ALL
            .iter()
            .map(|&function| FunctionLimit {
                function,
                timeout: settings
                    .timeouts
                    .then(|| Duration::from_secs(function.timeout_secs())),
                slots: match (
                    settings.account_concurrency,
                    function.reserved_concurrency(),
                ) {
                    (0, _) => None,
                    (_, Some(own)) => Some(Slots::new(own)),
                    (_, None) => pool.clone(),
                },
                scaling: (settings.scaling_per_10_seconds > 0)
                    .then(|| Scaling::new(settings.scaling_per_10_seconds)),
            })
            .collect();
        Self { functions }
    }

    pub fn from_env() -> Self {
        Self::new(&LimitSettings::from_env())
    }

    /// The limits `function` is invoked under.
    pub fn function(&self, function: Function) -> &FunctionLimit {
        // Built from `Function::ALL` in `index` order, so always present.
        &self.functions[function.index()]
    }

    /// The same limits with `function`'s replaced (tests inject small ones).
    pub fn with(mut self, limit: FunctionLimit) -> Self {
        let at = limit.function.index();
        self.functions[at] = limit;
        self
    }
}

/// API Gateway's account throttle: a token bucket of `burst` tokens refilled
/// at `rate` a second, a request taking one.
#[derive(Debug)]
pub struct ApiThrottle {
    rate_per_sec: f64,
    burst: f64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl ApiThrottle {
    /// `None` when `settings` turn it off (a rate of 0).
    pub fn new(settings: &LimitSettings) -> Option<Self> {
        Self::with_rate(settings.api_rate_per_sec, settings.api_burst)
    }

    /// `None` for a rate that is not positive.
    pub fn with_rate(rate_per_sec: f64, burst: u32) -> Option<Self> {
        (rate_per_sec > 0.0 && rate_per_sec.is_finite()).then(|| {
            // A burst of 0 would refuse everything: at least one request.
            let burst = f64::from(burst.max(1));
            Self {
                rate_per_sec,
                burst,
                bucket: Mutex::new(Bucket {
                    tokens: burst,
                    at: Instant::now(),
                }),
            }
        })
    }

    /// Takes a token; false when the bucket is empty (answer `429`).
    pub fn try_take(&self) -> bool {
        let mut bucket = lock(&self.bucket);
        let now = Instant::now();
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * self.rate_per_sec;
        bucket.tokens = (bucket.tokens + refill).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests;
