//! Unit tests of the Lambda and API Gateway limits, on the paused clock.

use super::*;

#[tokio::test(start_paused = true)]
async fn an_invocation_that_outlives_its_timeout_is_dropped() {
    let limit =
        FunctionLimit::template(Function::Purchase).with_timeout(Some(Duration::from_millis(100)));
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

#[tokio::test(start_paused = true)]
async fn a_function_gains_environments_no_faster_than_its_scaling_rate() {
    let limit = FunctionLimit::template(Function::Purchase).with_scaling(Some(3));
    // Three at once from cold; a fourth at the same moment needs a
    // fourth environment the rate has not given yet.
    let (release, released) = tokio::sync::watch::channel(false);
    let hold = |limit: FunctionLimit| {
        let mut released = released.clone();
        tokio::spawn(async move {
            limit
                .invoke(async move {
                    let _ = released.wait_for(|done| *done).await;
                })
                .await
        })
    };
    let held: Vec<_> = (0..3).map(|_| hold(limit.clone())).collect();
    tokio::task::yield_now().await;
    assert_eq!(
        limit.invoke(async {}).await,
        Err(InvokeError::ScalingThrottled {
            function: Function::Purchase,
            environments: 3,
            per_10_seconds: 3
        })
    );
    // A tenth of the window later one more environment may start.
    tokio::time::advance(Duration::from_millis(3_400)).await;
    assert_eq!(limit.invoke(async { 4 }).await, Ok(4));
    release.send(true).unwrap();
    for invocation in held {
        assert!(invocation.await.unwrap().is_ok());
    }
    // Warm environments are reused: a hundred invocations one after the
    // other, and four at once, need no new one.
    for _ in 0..100 {
        assert_eq!(limit.invoke(async {}).await, Ok(()));
    }
    let four = futures_join4(&limit).await;
    assert!(four.iter().all(Result::is_ok), "{four:?}");
    // Off: a fresh function at a rate of one takes four at once.
    let one = limit.clone().with_scaling(Some(1));
    assert!(futures_join4(&one).await.iter().any(Result::is_err));
    let open = limit.with_scaling(None);
    assert!(futures_join4(&open).await.iter().all(Result::is_ok));
}

async fn futures_join4(limit: &FunctionLimit) -> Vec<Result<(), InvokeError>> {
    let pause = || tokio::time::sleep(Duration::from_millis(10));
    let (a, b, c, d) = tokio::join!(
        limit.invoke(pause()),
        limit.invoke(pause()),
        limit.invoke(pause()),
        limit.invoke(pause())
    );
    vec![a, b, c, d]
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
        ("SECKILL_LAMBDA_SCALING", "0"),
    ]));
    assert!(!off.timeouts && off.account_concurrency == 0);
    assert_eq!(off.scaling_per_10_seconds, 0);
    assert!(
        LambdaLimits::new(&off)
            .function(Function::Purchase)
            .scaling
            .is_none()
    );
    assert!(ApiThrottle::new(&off).is_none());
    let set = LimitSettings::from_lookup(&env(&[
        ("SECKILL_API_RATE", "20"),
        ("SECKILL_API_BURST", "40"),
        ("SECKILL_LAMBDA_CONCURRENCY", "junk"),
    ]));
    assert_eq!((set.api_rate_per_sec, set.api_burst), (20.0, 40));
    assert_eq!(set.account_concurrency, ACCOUNT_CONCURRENCY);
}
