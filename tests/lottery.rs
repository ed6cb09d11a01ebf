//! The lottery window (`admission: {"window": W}`): the setting through the
//! admin API (bounds, one shard, frozen from the start, the seed's
//! commitment then the seed), and the window's meta in Redis; tickets
//! during the window (one per buyer, no stock moved, refused like any
//! purchase when paused or over the limit), first come first served after.

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

async fn conn(stack: &LocalStack) -> redis::aio::MultiplexedConnection {
    redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

fn keys(sale: &str) -> SaleKeys {
    SaleKeys::new(&SaleId::parse(sale).unwrap())
}

async fn meta(stack: &LocalStack, sale: &str) -> HashMap<String, String> {
    conn(stack).await.hgetall(&keys(sale).meta).await.unwrap()
}

/// Stock, reservations, buyers and tickets of a one-shard sale.
async fn held(stack: &LocalStack, sale: &str) -> (i64, usize, usize, HashMap<String, String>) {
    let (k, mut c) = (keys(sale), conn(stack).await);
    let stock: i64 = c.get(&k.stock).await.unwrap();
    let resv: usize = c.hlen(&k.resv).await.unwrap();
    let buyers: usize = c.hlen(&k.buyers).await.unwrap();
    let tickets: HashMap<String, String> = c.hgetall(&k.tickets).await.unwrap();
    (stock, resv, buyers, tickets)
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

#[tokio::test]
async fn purchases_in_the_window_get_one_ticket_each_and_move_no_stock() {
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    let start = clock::now_ms() + 1_500;
    let sale = unique("lot");
    let (status, made) = client
        .put_sale(
            &sale,
            &sale_body(start, serde_json::json!({"window": 3}), 1),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let path = format!("/sales/{sale}/purchase");
    assert!(
        eventually(Duration::from_secs(5), || async {
            clock::now_ms() >= start
        })
        .await
    );

    for user in ["ann", "bob", "cat"] {
        let (status, reply) = client.buy(&sale, user).await;
        assert_eq!(status, 202, "{user}: {reply}");
        assert_eq!(
            reply,
            serde_json::json!({"saleId": sale, "quantity": 1, "status": "TICKET"})
        );
    }
    // A second purchase of a buyer answers the same ticket, even asking for more.
    let (status, again) = client
        .as_buyer("POST", &path, "ann", r#"{"quantity": 2}"#)
        .await;
    assert_eq!(
        (status, again["quantity"].as_u64()),
        (202, Some(1)),
        "{again}"
    );
    assert_eq!(again["status"], "TICKET");
    // Over the per-user limit: refused as a purchase is, no ticket.
    let (status, over) = client
        .as_buyer("POST", &path, "dan", r#"{"quantity": 3}"#)
        .await;
    assert_eq!(
        (status, over["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{over}"
    );
    // Paused: refused, no ticket.
    let (status, _) = client
        .admin("POST", &format!("/admin/sales/{sale}/pause"), "")
        .await;
    assert_eq!(status, 200);
    let (status, paused) = client.buy(&sale, "eve").await;
    assert_eq!(
        (status, paused["code"].as_str()),
        (503, Some("SALE_PAUSED")),
        "{paused}"
    );
    let (status, _) = client
        .admin("POST", &format!("/admin/sales/{sale}/resume"), "")
        .await;
    assert_eq!(status, 200);

    let (stock, resv, buyers, tickets) = held(&stack, &sale).await;
    assert_eq!(
        (stock, resv, buyers),
        (5, 0, 0),
        "no stock, reservation or buyer moved"
    );
    let mut holders: Vec<&str> = tickets.keys().map(String::as_str).collect();
    holders.sort_unstable();
    assert_eq!(holders, ["ann", "bob", "cat"]);
    let ann: serde_json::Value = serde_json::from_str(&tickets["ann"]).unwrap();
    assert_eq!(ann["q"], 1);
    let at: i64 = ann["at"].as_str().unwrap().parse().unwrap();
    assert!((start..start + 3_000).contains(&at), "{ann}");
}
