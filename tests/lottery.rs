//! The lottery window (`admission: {"window": W}`): the setting through the
//! admin API (bounds, one shard, frozen from the start, the seed's
//! commitment then the seed), and the window's meta in Redis.

use redis::AsyncCommands;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::domain::draw::DrawSeed;
use seckill_tests::{LocalStack, StackClient, eventually, unique};
use std::collections::HashMap;
use std::time::Duration;

fn sale_body(start: i64, admission: serde_json::Value, shards: u32) -> serde_json::Value {
    serde_json::json!({
        "name": "Lottery", "totalStock": 5, "startAt": clock::rfc3339_ms(start),
        "endAt": clock::rfc3339_ms(start + 3_600_000), "perUserLimit": 2,
        "shards": shards, "admission": admission,
    })
}

fn sha256_hex(hex_seed: &str) -> String {
    DrawSeed::parse_hex(hex_seed).unwrap().commitment()
}

async fn meta(stack: &LocalStack, sale: &str) -> HashMap<String, String> {
    let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
    let mut conn = redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    conn.hgetall(&keys.meta).await.unwrap()
}

#[tokio::test]
async fn the_window_is_set_checked_frozen_and_its_seed_shown_after_it_closes() {
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    let start = clock::now_ms() + 1_500;

    // Bad values and a sharded sale: 400 naming admission.window, nothing
    // written.
    for (admission, shards) in [
        (serde_json::json!({"window": 0}), 1),
        (serde_json::json!({"window": 11}), 1),
        (serde_json::json!({"window": "3"}), 1),
        (serde_json::json!({"window": 3}), 2),
    ] {
        let sale = unique("lot");
        let (status, reply) = client
            .put_sale(&sale, &sale_body(start, admission.clone(), shards))
            .await;
        assert_eq!(status, 400, "{admission} on {shards}: {reply}");
        assert_eq!(reply["code"], "INVALID_REQUEST");
        assert!(
            reply["message"]
                .as_str()
                .unwrap()
                .contains("admission.window"),
            "{reply}"
        );
        let (status, _) = client
            .admin("GET", &format!("/admin/sales/{sale}"), "")
            .await;
        assert_eq!(status, 404, "{sale} was written");
        assert!(meta(&stack, &sale).await.is_empty());
    }

    let sale = unique("lot");
    let body = sale_body(start, serde_json::json!({"window": 1}), 1);
    let (status, made) = client.put_sale(&sale, &body).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["admission"], serde_json::json!({"window": 1}));
    let hash = made["drawSeedHash"].as_str().unwrap().to_owned();
    assert_eq!(hash.len(), 64);
    assert!(
        made.get("drawSeed").is_none(),
        "secret before the window closes: {made}"
    );

    // Redis holds the window's end and the seed the hash commits to.
    let m = meta(&stack, &sale).await;
    assert_eq!(m["windowEndMs"], (start + 1_000).to_string());
    assert_eq!(sha256_hex(&m["drawSeed"]), hash);

    // An edit before the start keeps the seed.
    let mut renamed = body.clone();
    renamed["name"] = "Lottery lamp".into();
    let (status, edited) = client.put_sale(&sale, &renamed).await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["drawSeedHash"], hash.as_str());

    assert!(
        eventually(Duration::from_secs(5), || async {
            clock::now_ms() >= start
        })
        .await
    );
    // From the start the window is frozen (other fields are not).
    for admission in [serde_json::json!({"window": 2}), serde_json::Value::Null] {
        let mut changed = renamed.clone();
        changed["admission"] = admission.clone();
        let (status, reply) = client.put_sale(&sale, &changed).await;
        assert_eq!(
            (status, reply["code"].as_str()),
            (409, Some("SALE_STARTED")),
            "{admission}: {reply}"
        );
    }
    let m_after = meta(&stack, &sale).await;
    assert_eq!(m_after["windowEndMs"], m["windowEndMs"]);
    assert_eq!(m_after["drawSeed"], m["drawSeed"]);

    // Once it closes, the seed itself, which the earlier hash committed to.
    assert!(
        eventually(Duration::from_secs(5), || async {
            clock::now_ms() >= start + 1_000
        })
        .await
    );
    let (status, shown) = client
        .admin("GET", &format!("/admin/sales/{sale}"), "")
        .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["drawSeedHash"], hash.as_str());
    assert_eq!(shown["drawSeed"], m["drawSeed"].as_str());
}
