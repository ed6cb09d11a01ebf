//! The purchase rate limiter: token buckets per buyer and per source address
//! in Redis, checked before the purchase script; it fails open when only its
//! own key is broken, while Redis out of reach still fails closed.

use redis::AsyncCommands;
use seckill_shared::clock;
use seckill_shared::config::RateLimits;
use seckill_shared::domain::{Quantity, Sale, UserId};
use seckill_shared::ports::{ReserveOutcome, ReserveRequest, StockStore};
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

/// Whether `accepted` calls since `since` are what a `tight()` buyer
/// bucket allows: its whole burst, and no more than it refilled meanwhile
/// (one token a second, counted from the clock, so a slow machine is not
/// a failure and a limiter that lets everything through still is).
fn within_the_bucket(accepted: usize, since: Instant) -> bool {
    let limits = tight();
    let refilled = (since.elapsed().as_secs_f64() * limits.user_per_sec).ceil() as usize;
    let burst = limits.user_burst as usize;
    (burst..=burst + refilled).contains(&accepted)
}

/// An app whose buyers have `tight()` buckets and whose addresses are
/// not limited.
async fn buyers_limited() -> App {
    App::spawn_with(|c| {
        c.rate_limits = RateLimits {
            ip_per_sec: 1_000.0,
            ip_burst: 1_000.0,
            ..tight()
        }
    })
    .await
}

#[tokio::test]
async fn one_flooding_buyer_gets_429_while_others_buy() {
    let app = buyers_limited().await;
    let sale = live_sale(100, 100);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();

    let mut statuses = Vec::new();
    let mut retry_after = Vec::new();
    let flood = Instant::now();
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
    // The burst of 3, plus the tokens refilled while the flood ran.
    assert!(within_the_bucket(accepted, flood), "{statuses:?}");
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

// A keyed retry of an order not written yet sends it again (its first
// answer may have been lost before anything was sent); each such send is
// paid from the buyer's bucket like a purchase, so a client repeating one
// key cannot flood the queue. Once the order is written, retries send
// nothing and pay nothing.
#[tokio::test]
async fn a_repeated_key_pays_for_each_send_of_its_order() {
    let app = buyers_limited().await;
    let sale = live_sale(100, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let keyed =
        || seckill_tests::purchase_event(id, Some("repeater"), "", &[("Idempotency-Key", "k-1")]);
    let mut statuses = Vec::new();
    let repeated = Instant::now();
    for _ in 0..30 {
        statuses.push(app.call(keyed()).await.status);
    }
    let accepted = statuses.iter().filter(|&&s| s == 202).count();
    // The burst of 3 (the purchase and two sends again), plus the tokens
    // refilled while the loop ran; the rest told to wait.
    assert!(within_the_bucket(accepted, repeated), "{statuses:?}");
    assert!(
        statuses.iter().all(|&s| s == 202 || s == 429),
        "{statuses:?}"
    );
    assert_eq!(app.stock(id).await, Some(99), "one unit taken");
    let sent: Vec<seckill_shared::domain::OrderMessage> = app
        .take_messages()
        .await
        .iter()
        .map(|(_, body)| serde_json::from_str(body).unwrap())
        .collect();
    assert_eq!(sent.len(), accepted, "one message per 202");
    assert!(sent.iter().all(|m| m.order_id == sent[0].order_id));

    // Written: a retry is answered from the reservation, free.
    let order = sent[0].order_id.clone();
    app.service
        .stock()
        .resolve(
            &sale.sale_id,
            &order,
            seckill_shared::ports::Resolution::Written,
        )
        .await
        .unwrap();
    for _ in 0..10 {
        let reply = app.call(keyed()).await;
        assert_eq!(reply.status, 202, "{reply:?}");
        assert_eq!(reply.body["orderId"], order.as_str());
    }
    assert_eq!(
        app.queue_depth().await,
        0,
        "nothing sent for a written order"
    );
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

/// Behind the API's edge every request reaches API Gateway from an edge
/// server's address: the limiter counts the viewer's address the edge
/// vouches for (its secret in the request), and a viewer header sent
/// straight to the API, without that secret, changes nothing.
#[tokio::test]
async fn behind_the_edge_each_viewer_is_limited_by_their_own_address() {
    use seckill_shared::http::{EDGE_SECRET_HEADER, VIEWER_IP_HEADER};
    const SECRET: &str = "edge-secret-0123456789abcdef0123456789";
    let app = App::spawn_with(|c| {
        // An address's burst of 5 that refills about never: however slow
        // the machine, 20 requests from one address take 5.
        c.rate_limits = RateLimits {
            user_per_sec: 1_000.0,
            user_burst: 1_000.0,
            ip_per_sec: 0.001,
            ..tight()
        };
        c.edge_secret = Some(SECRET.into());
    })
    .await;
    let sale = live_sale(100, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let from = |user: &str, source: &str, headers: &[(&'static str, &str)]| {
        let mut req = purchase_event_from(id, user, source);
        for (name, value) in headers {
            req.headers_mut().insert(
                *name,
                lambda_http::http::HeaderValue::from_str(value).unwrap(),
            );
        }
        req
    };
    let edge_server = "130.176.1.2";
    // Twenty viewers through one edge server: each their own bucket.
    for n in 0..20 {
        let viewer = format!("198.51.100.{}", n + 1);
        let reply = app
            .call(from(
                &format!("viewer{n}"),
                edge_server,
                &[(EDGE_SECRET_HEADER, SECRET), (VIEWER_IP_HEADER, &viewer)],
            ))
            .await;
        assert_eq!(reply.status, 202, "{viewer}: {reply:?}");
    }
    // One viewer with twenty accounts, through the same edge server: the
    // address's burst of 5.
    let mut one_viewer = Vec::new();
    for n in 0..20 {
        let reply = app
            .call(from(
                &format!("sock{n}"),
                edge_server,
                &[
                    (EDGE_SECRET_HEADER, SECRET),
                    (VIEWER_IP_HEADER, "203.0.113.66"),
                ],
            ))
            .await;
        one_viewer.push(reply.status);
    }
    let accepted = one_viewer.iter().filter(|&&s| s == 202).count();
    assert_eq!(accepted, 5, "{one_viewer:?}");
    // Straight to the API with a new viewer header each time, and no or a
    // wrong secret: counted on the address API Gateway saw.
    let mut forged = Vec::new();
    for n in 0..20 {
        let viewer = format!("192.0.2.{}", n + 1);
        let secret = if n % 2 == 0 { "guess" } else { "" };
        let mut headers = vec![(VIEWER_IP_HEADER, viewer.as_str())];
        if !secret.is_empty() {
            headers.push((EDGE_SECRET_HEADER, secret));
        }
        let reply = app
            .call(from(&format!("forger{n}"), "192.0.2.200", &headers))
            .await;
        forged.push(reply.status);
    }
    let accepted = forged.iter().filter(|&&s| s == 202).count();
    assert_eq!(accepted, 5, "{forged:?}");
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

/// Every key Redis holds for a sale (the limiter's included), dumped.
async fn every_key_of(app: &App, sale: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut conn = app.redis.clone();
    let names: Vec<String> = redis::cmd("KEYS")
        .arg(format!("sale:{{{sale}}}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut out = std::collections::BTreeMap::new();
    for name in names {
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg(&name)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.insert(name, dump);
    }
    out
}

/// Sold out, not started, paused, or the buyer at their limit: the script
/// refuses with reads only, before the limiter, so a refused buyer (or a
/// flood of them after sell-out) costs Redis no write and is told the real
/// reason every time, not 429.
#[tokio::test]
async fn refusals_are_reads_only_and_come_before_the_limiter() {
    let app = App::spawn_with(|c| c.rate_limits = tight()).await;
    let stock = app.service.stock();
    let ask = |sale: &Sale, user: &str| {
        let (sale_id, user) = (sale.sale_id.clone(), UserId::parse(user).unwrap());
        async move {
            stock
                .reserve(ReserveRequest {
                    sale_id: &sale_id,
                    user_id: &user,
                    quantity: Quantity::ONE,
                    idempotency_key: None,
                    gate_nonce: None,
                    gate_issued_ms: None,
                    source_ip: Some("198.51.100.9"),
                })
                .await
                .unwrap()
        }
    };

    let sold_out = live_sale(1, 1);
    let at_limit = live_sale(10, 1);
    let mut later = live_sale(10, 1);
    later.start_ms = clock::now_ms() + 1_800_000;
    let mut paused = live_sale(10, 1);
    paused.paused = true;
    for sale in [&sold_out, &at_limit, &later, &paused] {
        app.open_sale(sale).await;
    }
    assert!(matches!(
        ask(&sold_out, "winner").await,
        ReserveOutcome::Reserved(_)
    ));
    assert!(matches!(
        ask(&at_limit, "flooder").await,
        ReserveOutcome::Reserved(_)
    ));

    for sale in [&sold_out, &at_limit, &later, &paused] {
        let id = sale.sale_id.as_str();
        let before = every_key_of(&app, id).await;
        let mut answers = Vec::new();
        // Twice the burst of both buckets: the old order answered 429 and
        // wrote the buckets on every call.
        for _ in 0..12 {
            answers.push(format!("{:?}", ask(sale, "flooder").await));
        }
        assert!(
            answers
                .iter()
                .all(|a| a == &answers[0] && !a.contains("RateLimited")),
            "{id}: {answers:?}"
        );
        assert_eq!(every_key_of(&app, id).await, before, "{id}: {answers:?}");
    }
}
