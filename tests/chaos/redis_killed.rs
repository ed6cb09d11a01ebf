//! redis-killed: its `redis-server` SIGKILLed mid-batch, restarted empty.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_killed_mid_sale_answers_503_at_once_and_the_sale_completes_after_rebuild() {
    let s = scale();
    let mut redis = OwnRedis::start().await;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let stores = Stores::open(&endpoint, &redis.url(), s.stock, 5).await;
    let writer = stores.start_writer().await;
    let buyers = Buyers::new(
        stores.sale_id(),
        Buyers::service(stores.purchase_rebuilding(&endpoint).await),
    );

    buyers.run(s.stock as usize / 4, s.concurrency).await;
    // Killed while a batch of buyers is in flight (early enough that stock
    // is left for after the rebuild).
    buyers.set_phase("outage");
    buyers.hold_after(s.concurrency / 2);
    let batch = {
        let buyers = buyers.clone();
        tokio::spawn(async move { buyers.run(s.stock as usize * 2, s.concurrency).await })
    };
    buyers.until_held().await;
    redis.kill();
    buyers.release();
    batch.await.unwrap();
    // Restarted empty: the sale is not there until it is rebuilt, which the
    // purchases themselves start (no scheduled prewarm runs here), once the
    // queue has drained.
    redis.restart().await;
    let restarted = Instant::now();
    buyers.set_phase("empty");
    // The rebuild waits out the queue counts' lag after the loss, then
    // for counts that lag behind the drain.
    let settle = stores.config.rebuild_settle()
        + stores.config.queue_count_lag
        + if stores.config.queue_count_lag.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_secs(5)
        };
    // The full form (`make chaos`, alone on the machine) holds the recovery
    // and the refusals to their targets; inside `make test` they share two
    // cores with the whole suite, and the rebuild waits for a drain that
    // goes at the emulator's pace there, so the short form asserts what
    // speed cannot change: the sale comes back, and no refusal waited for
    // Redis (a refusal that waits out a client timeout over and over, or
    // for Redis to return, takes far longer than a loaded machine's stall).
    let full = std::env::var("CHAOS").as_deref() == Ok("full");
    let (back_within, refusal_bound_ms) = if full {
        (Duration::from_secs(60) + settle, 1_000)
    } else {
        (Duration::from_secs(300) + settle, 5_000)
    };
    let back = eventually(back_within, || async {
        buyers.run(s.concurrency / 4, s.concurrency / 4).await;
        buyers
            .outcomes()
            .iter()
            .any(|o| o.phase == "empty" && o.status == 202)
    })
    .await;
    let recovery = restarted.elapsed();
    if !back {
        // What the rebuild waits for, if anything (seen once in CI, under load).
        let queue = seckill_shared::adapters::sqs::depth(&stores.sqs, &stores.queue_url).await;
        let dlq = seckill_shared::adapters::sqs::depth(&stores.sqs, &stores.dlq_url).await;
        panic!(
            "the purchases' rebuild never brought the sale back: queue {queue:?}, DLQ {dlq:?}, answers {:?}",
            buyers.tally()
        );
    }
    println!(
        "chaos redis-killed: first 202 {:.1} s after the empty Redis answered again",
        recovery.as_secs_f64()
    );
    // The rebuild itself within 5 s; what it waits for by design on top
    // (none with exact counts): the settling after the loss, then counts
    // that lag behind the drain.
    let target = Duration::from_secs(5) + settle;
    assert!(
        !full || recovery <= target,
        "recovery took {recovery:?} (target: {target:?}: 5 s, plus {settle:?} of settling and lagging counts)"
    );
    buyers.set_phase("after");
    buyers
        .until_sold_out(s.concurrency, s.stock as usize * 20)
        .await;
    stores.settle(&buyers.accepted()).await;
    writer.stop().await;

    // During the outage and before the rebuild every refusal came at once.
    let outage_503: Vec<_> = buyers
        .outcomes()
        .into_iter()
        .filter(|o| o.phase != "before" && o.phase != "after" && o.status == 503)
        .collect();
    assert!(!outage_503.is_empty());
    let slowest = outage_503.iter().map(|o| o.millis).max().unwrap();
    assert!(
        slowest < refusal_bound_ms,
        "a 503 took {slowest} ms (bound {refusal_bound_ms} ms)"
    );
    // Nothing sold while the keys were missing: the first answers were
    // 503s (the rebuild waits for the queue), and the phase holds nothing
    // but 503s and what the rebuilt sale answers (202, or 410 once its
    // last units went: those complete before a 202, which waits for its
    // send). The checker below proves no unit was sold twice.
    let empty: Vec<_> = buyers
        .outcomes()
        .into_iter()
        .filter(|o| o.phase == "empty")
        .collect();
    assert_eq!(empty[0].status, 503, "an empty Redis sells nothing");
    assert!(
        empty.iter().all(|o| matches!(
            (o.status, o.code.as_str()),
            (503, _) | (202, _) | (410, "SOLD_OUT")
        )),
        "{:?}",
        buyers.tally()
    );
    stores
        .assert_sound(
            "redis-killed",
            &buyers,
            &format!(
                "outage_503={} slowest_503_ms={slowest} recovery_s={:.1}",
                outage_503.len(),
                recovery.as_secs_f64()
            ),
        )
        .await;
}
