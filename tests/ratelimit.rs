//! The purchase rate limiter: token buckets per buyer and per source address
//! in Redis, checked before the purchase script; it fails open when only its
//! own key is broken, while Redis out of reach still fails closed.

use redis::AsyncCommands;
use seckill_shared::config::RateLimits;
use seckill_tests::{App, live_sale, purchase_event_from};
use std::time::{Duration, Instant};

fn tight() -> RateLimits {
    RateLimits {
        user_per_sec: 1.0,
        user_burst: 3.0,
        ip_per_sec: 1.0,
        ip_burst: 5.0,
    }
}

#[tokio::test]
async fn one_flooding_buyer_gets_429_while_others_buy() {
    let app = App::spawn_with(|c| {
        c.rate_limits = RateLimits {
            ip_per_sec: 1_000.0,
            ip_burst: 1_000.0,
            ..tight()
        }
    })
    .await;
    let sale = live_sale(100, 100);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let mut statuses = Vec::new();
    let mut retry_after = Vec::new();
    for _ in 0..40 {
        let reply = app
            .call(purchase_event_from(id, "flooder", "198.51.100.1"))
            .await;
        if reply.status == 429 {
            assert_eq!(reply.code(), "RATE_LIMITED");
            retry_after.push(reply.headers["retry-after"].parse::<u64>().unwrap());
        }
        statuses.push(reply.status);
    }
    let accepted = statuses.iter().filter(|&&s| s == 202).count();
    // The burst of 3, plus at most one token refilled while the flood ran.
    assert!((3..=4).contains(&accepted), "{statuses:?}");
    assert_eq!(
        statuses.iter().filter(|&&s| s == 429).count(),
        40 - accepted
    );
    assert!(retry_after.iter().all(|&s| s >= 1));
    assert_eq!(
        app.buyers(id).await["flooder"],
        accepted as i64,
        "429s took nothing"
    );

    for n in 0..10 {
        let reply = app
            .call(purchase_event_from(id, &format!("calm{n}"), "198.51.100.1"))
            .await;
        assert_eq!(reply.status, 202, "others still buy: {reply:?}");
    }
}

#[tokio::test]
async fn one_address_is_limited_across_buyers() {
    let app = App::spawn_with(|c| {
        c.rate_limits = RateLimits {
            user_per_sec: 1_000.0,
            user_burst: 1_000.0,
            ..tight()
        }
    })
    .await;
    let sale = live_sale(100, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let mut from_bot = Vec::new();
    for n in 0..20 {
        from_bot.push(
            app.call(purchase_event_from(id, &format!("bot{n}"), "203.0.113.66"))
                .await
                .status,
        );
    }
    let accepted = from_bot.iter().filter(|&&s| s == 202).count();
    assert!((5..=6).contains(&accepted), "{from_bot:?}");
    let reply = app
        .call(purchase_event_from(id, "human", "192.0.2.10"))
        .await;
    assert_eq!(reply.status, 202, "another address is not affected");
}

#[tokio::test]
async fn the_limiter_fails_open_but_the_stock_script_fails_closed() {
    let app = App::spawn_with(|c| c.rate_limits = tight()).await;
    let sale = live_sale(10, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // The limiter's key holds the wrong type: Redis answers its script with
    // an error. The purchase goes through, and the failure is counted.
    let key = format!("sale:{{{id}}}:ratelimit");
    let _: () = app.redis.clone().set(&key, "not a hash").await.unwrap();
    let reply = app
        .call(purchase_event_from(id, "u1", "198.51.100.7"))
        .await;
    assert_eq!(reply.status, 202, "{reply:?}");
    assert_eq!(app.service.limiter_failures(), 1);

    // Redis itself out of reach: 503 at once, limiter or not.
    let down = App::spawn_with(|c| {
        c.rate_limits = tight();
        c.redis_url = "redis://127.0.0.1:1".into();
        c.redis_timeout = Duration::from_millis(250);
    })
    .await;
    let started = Instant::now();
    let reply = down
        .call(purchase_event_from(id, "u2", "198.51.100.7"))
        .await;
    assert_eq!((reply.status, reply.code()), (503, "SALE_PAUSED"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        down.service.limiter_failures(),
        0,
        "an outage is not a limiter failure"
    );
}
