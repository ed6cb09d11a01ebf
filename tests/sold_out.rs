//! The sold-out flag for page traffic: after a sell-out, purchases with an
//! `Idempotency-Key` (the buyer page sends one with every click) are
//! answered without Redis unless a reservation under their key may exist,
//! and every winner's retry still gets its own order back (`REPLAY`): on one
//! shard and on four, after the sale's keys were lost and rebuilt from the
//! ledger, and when the filter itself is gone.

use seckill_shared::adapters::redis::{RedisStock, SaleKeys};
use seckill_shared::adapters::sqs::SqsQueue;
use seckill_shared::app::purchase::{Accepted, PurchaseError, PurchaseRequest, PurchaseService};
use seckill_shared::domain::{IdempotencyKey, Quantity, Sale, SaleId, UserId};
use seckill_tests::{App, live_sale, prewarm_now};
use std::collections::BTreeMap;
use std::time::Duration;

type Service =
    PurchaseService<RedisStock, SqsQueue, seckill_shared::adapters::dynamo::catalog::DynamoCatalog>;

/// An environment of its own on the app's Redis, queue and tables, whose
/// flag outlives the test (the default half second is shorter than a slow
/// CI step): what it answers from memory is what this test is about.
fn environment(app: &App) -> Service {
    PurchaseService::new(
        RedisStock::connect_lazy(&app.config.redis_url, app.config.redis_timeout).unwrap(),
        SqsQueue::new(app.sqs.clone(), app.queue_url.clone()),
        app.catalog.clone(),
    )
    .with_sold_out_flag(Duration::from_secs(600))
}

async fn buy(
    service: &Service,
    sale: &SaleId,
    user: &str,
    key: &str,
) -> Result<Accepted, PurchaseError> {
    service
        .purchase(&PurchaseRequest {
            sale_id: sale.clone(),
            user_id: UserId::parse(user).unwrap(),
            quantity: Quantity::ONE,
            idempotency_key: Some(IdempotencyKey::parse(key).unwrap()),
            source_ip: None,
            sale_token: None,
        })
        .await
}

/// Sells the whole sale to keyed winners; returns user -> (key, order id).
async fn sell_out(service: &Service, sale: &Sale) -> BTreeMap<String, (String, String)> {
    let mut winners = BTreeMap::new();
    let mut n = 0;
    while winners.len() < sale.total_stock as usize {
        n += 1;
        assert!(n < 10 * sale.total_stock, "{winners:?}");
        let (user, key) = (format!("auth0|w{n}"), format!("page-w{n}"));
        if let Ok(won) = buy(service, &sale.sale_id, &user, &key).await {
            winners.insert(user, (key, won.order_id.to_string()));
        }
    }
    winners
}

/// `fresh` new buyers with new keys; returns how many were answered from
/// memory. Each must be refused `SOLD_OUT`.
async fn late_buyers(service: &Service, sale: &SaleId, tag: &str, fresh: usize) -> u64 {
    let before = service.sold_out_fast_path_hits();
    for n in 0..fresh {
        let user = format!("late-{tag}-{n}");
        match buy(service, sale, &user, &format!("page-{user}")).await {
            Err(PurchaseError::SoldOut { .. }) => {}
            other => panic!("{user}: {other:?}"),
        }
    }
    service.sold_out_fast_path_hits() - before
}

/// Every winner's retry, with its key: its own order, replayed.
async fn winners_replay(
    service: &Service,
    sale: &SaleId,
    winners: &BTreeMap<String, (String, String)>,
) {
    let before = service.sold_out_fast_path_hits();
    for (user, (key, order_id)) in winners {
        let again = buy(service, sale, user, key).await;
        match again {
            Ok(a) => assert_eq!(
                (a.order_id.to_string(), a.replayed),
                (order_id.clone(), true),
                "{user}"
            ),
            other => panic!("{user} won {order_id}, its retry got {other:?}"),
        }
    }
    assert_eq!(
        service.sold_out_fast_path_hits(),
        before,
        "a winner's retry was answered from memory"
    );
}

async fn keyed_traffic_after_sell_out(shards: u32) {
    let app = App::spawn().await;
    let mut sale = live_sale(24, 1);
    sale.shards = shards;
    app.open_sale(&sale).await;
    let id = &sale.sale_id;
    let first = environment(&app);
    let winners = sell_out(&first, &sale).await;

    // The first late buyer meets Redis's SOLD_OUT (and arms the flag);
    // the others are answered from memory: 48 bits set of at least 8,192,
    // so a fresh key finds both of its bits set about once in 30,000.
    assert_eq!(late_buyers(&first, id, "a", 1).await, 0);
    let fast = late_buyers(&first, id, "b", 200).await;
    assert!(fast >= 198, "{fast} of 200 answered from memory");
    winners_replay(&first, id, &winners).await;

    // Another environment, after the keys were lost and rebuilt from the
    // ledger: the filter is rebuilt with the reservations.
    app.write_queued_orders().await;
    app.lose_redis_keys(id.as_str()).await;
    for k in 0..shards {
        seckill_tests::lose_key_group(&mut app.redis.clone(), &SaleKeys::of(id, shards, k)).await;
    }
    let outcome = prewarm_now(&app.jobs().await, id).await;
    assert!(format!("{outcome:?}").starts_with("Loaded"), "{outcome:?}");
    let second = environment(&app);
    assert_eq!(late_buyers(&second, id, "c", 1).await, 0);
    let fast = late_buyers(&second, id, "d", 200).await;
    assert!(fast >= 198, "after the rebuild: {fast} of 200 from memory");
    winners_replay(&second, id, &winners).await;

    // The filter alone lost: nothing is answered from memory for a key, and
    // every winner still gets its order.
    let mut conn = app.redis.clone();
    for k in 0..shards {
        let _: () = redis::cmd("DEL")
            .arg(&SaleKeys::of(id, shards, k).keyed)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let third = environment(&app);
    assert_eq!(late_buyers(&third, id, "e", 1).await, 0);
    assert_eq!(late_buyers(&third, id, "f", 50).await, 0);
    winners_replay(&third, id, &winners).await;
}

#[tokio::test]
async fn keyed_requests_after_sell_out_skip_redis_and_winners_replay() {
    keyed_traffic_after_sell_out(1).await;
}

#[tokio::test]
async fn the_same_on_a_sale_of_four_shards() {
    keyed_traffic_after_sell_out(4).await;
}
