//! The Lambda and API Gateway limits the local stack enforces, because the
//! functions run in-process here and nothing else would: each function's
//! `Timeout` (an invocation that outlives it is dropped), its concurrency
//! (`ReservedConcurrentExecutions`, or a share of the account's pool; an
//! invocation over it is refused, never queued), and API Gateway's account
//! throttle (a token bucket in front of the HTTP API).
//!
//! [`Function`] is the one table of each function's `Timeout` and reserved
//! concurrency; the `lambda_limits` test checks it against `template.yaml`
//! (through [`crate::consistency::Template`]). [`LimitSettings`] are the
//! knobs (`SECKILL_LAMBDA_TIMEOUTS`, `SECKILL_LAMBDA_CONCURRENCY`,
//! `SECKILL_API_RATE`, `SECKILL_API_BURST`), [`LambdaLimits`] what the
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
        }
    }

    /// No limit at all.
    pub fn unlimited(function: Function) -> Self {
        Self {
            function,
            timeout: None,
            slots: None,
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

    /// Runs `work` as one invocation: refused at once when every slot is
    /// taken (Lambda does not queue a synchronous invocation), dropped when
    /// it outlives the timeout (what Lambda does to a timed-out runtime: the
    /// work stops where it was).
    pub async fn invoke<F: Future>(&self, work: F) -> Result<F::Output, InvokeError> {
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
        // A panic elsewhere while holding the lock leaves numbers, not a
        // broken invariant: keep using them.
        let mut bucket = self
            .bucket
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_invocation_that_outlives_its_timeout_is_dropped() {
        let limit = FunctionLimit::template(Function::Purchase)
            .with_timeout(Some(Duration::from_millis(100)));
        let started = Instant::now();
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = finished.clone();
        let outcome = limit
            .invoke(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            })
            .await;
        assert_eq!(
            outcome,
            Err(InvokeError::TimedOut {
                function: Function::Purchase,
                after: Duration::from_millis(100)
            })
        );
        assert_eq!(started.elapsed(), Duration::from_millis(100));
        // Dropped, not left running: the rest of the work never happens.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!finished.load(std::sync::atomic::Ordering::SeqCst));
        // Without a timeout the same work finishes.
        let lenient = limit.with_timeout(None);
        let outcome = lenient
            .invoke(tokio::time::sleep(Duration::from_secs(1)))
            .await;
        assert_eq!(outcome, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn an_invocation_over_the_concurrency_is_refused_and_a_slot_comes_back() {
        let limit = FunctionLimit::template(Function::OrderWriter).with_concurrency(Some(1));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let first = tokio::spawn({
            let limit = limit.clone();
            async move { limit.invoke(released).await }
        });
        // Let the first take its slot.
        tokio::task::yield_now().await;
        assert_eq!(
            limit.invoke(async {}).await,
            Err(InvokeError::Throttled {
                function: Function::OrderWriter,
                limit: 1
            })
        );
        release.send(()).unwrap();
        assert!(first.await.unwrap().is_ok());
        assert_eq!(limit.invoke(async { 7 }).await, Ok(7));
        // No cap: both run.
        let open = limit.with_concurrency(None);
        let (a, b) = tokio::join!(
            open.invoke(tokio::time::sleep(Duration::from_millis(10))),
            open.invoke(tokio::time::sleep(Duration::from_millis(10)))
        );
        assert_eq!((a, b), (Ok(()), Ok(())));
    }

    #[test]
    fn reserved_concurrency_is_its_own_and_the_rest_share_the_account() {
        let limits = LambdaLimits::new(&LimitSettings {
            account_concurrency: 7,
            ..LimitSettings::default()
        });
        let writer = limits.function(Function::OrderWriter);
        assert_eq!(writer.slots.as_ref().map(|s| s.limit), Some(5));
        let purchase = limits.function(Function::Purchase).slots.clone().unwrap();
        let orders = limits.function(Function::OrdersApi).slots.clone().unwrap();
        assert_eq!(purchase.limit, 2);
        assert!(Arc::ptr_eq(&purchase.semaphore, &orders.semaphore));
        assert_eq!(
            limits.function(Function::Reconcile).timeout(),
            Some(Duration::from_secs(120))
        );
        let off = LambdaLimits::new(&LimitSettings::off());
        for function in Function::ALL {
            assert!(off.function(function).slots.is_none());
            assert!(off.function(function).timeout().is_none());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_api_throttle_refuses_past_its_burst_and_refills_at_its_rate() {
        let throttle = ApiThrottle::with_rate(10.0, 3).unwrap();
        assert!((0..3).all(|_| throttle.try_take()));
        assert!(!throttle.try_take());
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(throttle.try_take());
        assert!(!throttle.try_take());
        // Never more than the burst, however long it rested.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!((0..10).filter(|_| throttle.try_take()).count(), 3);
        assert!(ApiThrottle::with_rate(0.0, 3).is_none());
    }

    #[test]
    fn knobs_read_from_the_environment_and_turn_off() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            LimitSettings::from_lookup(&env(&[])),
            LimitSettings::default()
        );
        let off = LimitSettings::from_lookup(&env(&[
            ("SECKILL_LAMBDA_TIMEOUTS", "0"),
            ("SECKILL_LAMBDA_CONCURRENCY", "0"),
            ("SECKILL_API_RATE", "0"),
        ]));
        assert!(!off.timeouts && off.account_concurrency == 0);
        assert!(ApiThrottle::new(&off).is_none());
        let set = LimitSettings::from_lookup(&env(&[
            ("SECKILL_API_RATE", "20"),
            ("SECKILL_API_BURST", "40"),
            ("SECKILL_LAMBDA_CONCURRENCY", "junk"),
        ]));
        assert_eq!((set.api_rate_per_sec, set.api_burst), (20.0, 40));
        assert_eq!(set.account_concurrency, ACCOUNT_CONCURRENCY);
    }
}
