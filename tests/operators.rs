//! Operators are obeyed at once and buyers always find their orders: the
//! local stack's HTTP API driven as a client would (admin and buyer
//! tokens), with Redis losing keys where the test says so.

use redis::AsyncCommands;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::ports::{AuditTrail, CatalogAdmin, SaleEditor};
use seckill_shared::ports::{StockLoading, StockRepair};
use seckill_tests::{LocalStack, StackClient as Client, eventually, lose_key_group, unique};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn sale_json(stock: u32, shards: u32, start_ms: i64, end_ms: i64) -> Value {
    json!({
        "name": "Operator test",
        "totalStock": stock,
        "startAt": clock::rfc3339_ms(start_ms),
        "endAt": clock::rfc3339_ms(end_ms),
        "perUserLimit": 1,
        "paymentWindowSeconds": 900,
        "shards": shards,
    })
}

async fn redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(std::env::var("REDIS_URL").unwrap())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Deletes every key group of a sale, as a Redis restart would.
async fn lose_sale(id: &str, shards: u32) {
    let sale_id = SaleId::parse(id).unwrap();
    let mut groups = vec![SaleKeys::new(&sale_id)];
    groups.extend((0..shards.max(1)).map(|k| SaleKeys::shard(&sale_id, k)));
    let mut conn = redis().await;
    for keys in groups {
        lose_key_group(&mut conn, &keys).await;
    }
}

/// A one-shard sale of 10 units, started a minute ago and open for an
/// hour, that buyer `a` has bought from: its id and start.
async fn live_sale_a_bought_from(client: &Client<'_>, prefix: &str) -> (String, i64) {
    let id = unique(prefix);
    let now = clock::now_ms();
    let start = now - 60_000;
    let (status, reply) = client
        .put_sale(&id, &sale_json(10, 1, start, now + 3_600_000))
        .await;
    assert_eq!(status, 201, "{reply}");
    let (status, reply) = client.buy(&id, "a").await;
    assert_eq!(status, 202, "{reply}");
    (id, start)
}

fn code(reply: &Value) -> &str {
    reply["code"].as_str().unwrap_or("")
}

/// Polls until `user`'s order of `sale` is written (no longer `QUEUED`).
async fn until_written(client: &Client<'_>, sale: &str, user: &str) {
    let written = eventually(Duration::from_secs(30), || async {
        let (_, reply) = client.my_orders(sale, user).await;
        reply["orders"]
            .as_array()
            .is_some_and(|o| !o.is_empty() && o.iter().all(|o| o["status"] != "QUEUED"))
    })
    .await;
    assert!(written, "{user}'s order of {sale} was not written");
}

/// Pause → 503 from the next request, still paused after prewarm,
/// reconcile, the schedule's jobs and a rebuild of lost keys; resume → 202,
/// nothing lost or counted twice. For a sale of one shard and of eight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_is_obeyed_at_once_and_survives_every_job() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    for shards in [1, 8] {
        let id = unique("pause");
        let now = clock::now_ms();
        let (status, reply) = client
            .put_sale(&id, &sale_json(20, shards, now - 1_000, now + 3_600_000))
            .await;
        assert_eq!(status, 201, "{reply}");
        assert_eq!(client.buy(&id, "a").await.0, 202);

        let (status, reply) = client
            .admin("POST", &format!("/admin/sales/{id}/pause"), "")
            .await;
        assert_eq!(
            (status, reply["status"].as_str()),
            (200, Some("PAUSED")),
            "{reply}"
        );
        let (status, reply) = client.buy(&id, "b").await;
        assert_eq!(
            (status, code(&reply)),
            (503, "SALE_PAUSED"),
            "shards={shards}"
        );
        let (_, public) = stack.request("GET", &format!("/sales/{id}"), &[], "").await;
        assert_eq!(public["status"], "PAUSED");

        // Every job, on demand and as the schedule runs them.
        let (status, _) = client
            .admin("POST", &format!("/admin/sales/{id}/prewarm"), "")
            .await;
        assert_eq!(status, 200);
        let (status, _) = client
            .admin("POST", &format!("/admin/sales/{id}/reconcile"), "")
            .await;
        assert_eq!(status, 200);
        stack
            .scheduled
            .prewarm
            .prewarm_all(clock::now_ms())
            .await
            .unwrap();
        stack
            .scheduled
            .reconcile
            .reconcile_all(
                clock::now_ms(),
                std::time::Instant::now() + std::time::Duration::from_secs(600),
            )
            .await
            .unwrap();
        let (status, reply) = client.buy(&id, "b").await;
        assert_eq!(
            (status, code(&reply)),
            (503, "SALE_PAUSED"),
            "after the jobs"
        );
        // Redis loses the sale; the rebuild (started by the purchase that
        // finds it missing) keeps the pause.
        until_written(&client, &id, "a").await;
        lose_sale(&id, shards).await;
        let rebuilt = eventually(Duration::from_secs(20), || async {
            client.buy(&id, "b").await;
            let mut conn = redis().await;
            let status: Option<String> = conn
                .hget(SaleKeys::new(&SaleId::parse(&id).unwrap()).meta, "status")
                .await
                .unwrap();
            status.is_some()
        })
        .await;
        assert!(rebuilt, "the sale was not rebuilt");
        let (status, reply) = client.buy(&id, "b").await;
        assert_eq!(
            (status, code(&reply)),
            (503, "SALE_PAUSED"),
            "after the rebuild"
        );

        let (status, reply) = client
            .admin("POST", &format!("/admin/sales/{id}/resume"), "")
            .await;
        assert_eq!(
            (status, reply["status"].as_str()),
            (200, Some("LIVE")),
            "{reply}"
        );
        let (status, reply) = client.buy(&id, "b").await;
        assert_eq!(status, 202, "after resume: {reply}");
        assert_eq!(client.buy(&id, "a").await.1["code"], "LIMIT_EXCEEDED");
        until_written(&client, &id, "b").await;
        let (_, sale) = client
            .admin("POST", &format!("/admin/sales/{id}/reconcile"), "")
            .await;
        assert_eq!(
            (sale["available"].as_i64(), sale["sold"].as_i64()),
            (Some(18), Some(2))
        );
        assert_eq!(sale["redisStock"].as_i64(), Some(18), "{sale}");
        assert_eq!(sale["violations"], json!([]), "{sale}");

        // The audit trail: who did what, before and after.
        let (status, audit) = client
            .admin("GET", &format!("/admin/sales/{id}/audit"), "")
            .await;
        assert_eq!(status, 200);
        let actions: Vec<&str> = audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap())
            .collect();
        assert_eq!(
            actions,
            [
                "create",
                "pause",
                "prewarm",
                "reconcile",
                "resume",
                "reconcile"
            ]
        );
        let pause = &audit["entries"][1];
        assert_eq!(pause["actor"], "ops-1");
        assert_eq!(
            (&pause["before"]["paused"], &pause["after"]["paused"]),
            (&json!(false), &json!(true))
        );
    }
    // Bad input changes nothing: an unknown sale, a buyer's token.
    let (status, _) = client.admin("POST", "/admin/sales/nope/pause", "").await;
    assert_eq!(status, 404);
    let (status, _) = stack
        .request(
            "POST",
            &format!("/admin/sales/{}/pause", stack.demo_sale),
            &[("authorization", &client.buyer("bob"))],
            "",
        )
        .await;
    assert_eq!(status, 403);
}

/// `PUT` with an end already past stops purchases at once (410); the
/// orders accepted before it are kept. Pausing an ended sale is 410.
#[tokio::test]
async fn an_end_moved_into_the_past_stops_purchases_at_once() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let (id, start) = live_sale_a_bought_from(&client, "end").await;
    let (status, reply) = client
        .put_sale(&id, &sale_json(10, 1, start, clock::now_ms() - 1_000))
        .await;
    assert_eq!(status, 200, "{reply}");
    let (status, reply) = client.buy(&id, "b").await;
    assert_eq!((status, code(&reply)), (410, "SALE_ENDED"));
    until_written(&client, &id, "a").await;
    let (_, orders) = client.my_orders(&id, "a").await;
    assert_eq!(orders["orders"][0]["status"], "PENDING_PAYMENT");
    let (status, reply) = client
        .admin("POST", &format!("/admin/sales/{id}/pause"), "")
        .await;
    assert_eq!((status, code(&reply)), (410, "SALE_ENDED"));
}

/// Edits to a sale that is loaded but not started reach Redis exactly, or
/// are refused with a 409 that says why; "started" cannot be dodged by
/// moving the start first.
#[tokio::test]
async fn edits_to_a_loaded_sale_reach_redis_or_are_refused() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let now = clock::now_ms();
    let (start, end) = (now + 300_000, now + 3_600_000);

    // Loaded at once (it starts within the prewarm lead).
    let id = unique("edit");
    let (status, reply) = client.put_sale(&id, &sale_json(100, 1, start, end)).await;
    assert_eq!(
        (status, reply["prewarm"]["outcome"].as_str()),
        (201, Some("LOADED"))
    );
    let (status, reply) = client.put_sale(&id, &sale_json(10, 1, start, end)).await;
    assert_eq!(status, 200, "{reply}");
    let stock: Option<i64> = redis()
        .await
        .get(SaleKeys::new(&SaleId::parse(&id).unwrap()).stock)
        .await
        .unwrap();
    assert_eq!(stock, Some(10), "Redis sells the edited stock");
    let (status, reply) = client.put_sale(&id, &sale_json(12, 1, start, end)).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["available"], 12);
    let stock: Option<i64> = redis()
        .await
        .get(SaleKeys::new(&SaleId::parse(&id).unwrap()).stock)
        .await
        .unwrap();
    assert_eq!(
        stock,
        Some(12),
        "each edit moves Redis by its difference, once"
    );
    let (status, reply) = client.put_sale(&id, &sale_json(12, 4, start, end)).await;
    assert_eq!((status, code(&reply)), (409, "SALE_LOADED"), "{reply}");

    // A sharded sale's stock is split across its shards once loaded.
    let sharded = unique("edit8");
    assert_eq!(
        client
            .put_sale(&sharded, &sale_json(80, 8, start, end))
            .await
            .0,
        201
    );
    let (status, reply) = client
        .put_sale(&sharded, &sale_json(40, 8, start, end))
        .await;
    assert_eq!((status, code(&reply)), (409, "SALE_LOADED"), "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("shards"));

    // Started: moving the start later first does not reopen the stock.
    let live = unique("live");
    assert_eq!(
        client
            .put_sale(&live, &sale_json(10, 1, now - 1_000, end))
            .await
            .0,
        201
    );
    let (status, reply) = client
        .put_sale(&live, &sale_json(10, 1, now + 600_000, end))
        .await;
    assert_eq!((status, code(&reply)), (409, "SALE_STARTED"), "{reply}");
    let (status, reply) = client
        .put_sale(&live, &sale_json(20, 1, now - 1_000, end))
        .await;
    assert_eq!((status, code(&reply)), (409, "SALE_STARTED"), "{reply}");
}

/// A buyer who lost their 202 finds the order with GET
/// /sales/{saleId}/orders (QUEUED ones included); after the sell-out, the
/// holder who asks again gets the same answer as everyone: 410 SOLD_OUT.
#[tokio::test]
async fn a_buyer_finds_their_orders_after_a_lost_202() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let id = unique("mine");
    let now = clock::now_ms();
    assert_eq!(
        client
            .put_sale(&id, &sale_json(2, 1, now - 1_000, now + 3_600_000))
            .await
            .0,
        201
    );
    let (status, first) = client.buy(&id, "winner").await;
    assert_eq!(status, 202);
    // The answer was lost: the buyer asks what they hold.
    let (status, mine) = client.my_orders(&id, "winner").await;
    assert_eq!(status, 200);
    let orders = mine["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 1, "{mine}");
    assert_eq!(orders[0]["orderId"], first["orderId"]);
    assert!(
        matches!(
            orders[0]["status"].as_str(),
            Some("QUEUED" | "PENDING_PAYMENT")
        ),
        "{mine}"
    );
    // Nobody else's orders, and none of another sale.
    let (_, theirs) = client.my_orders(&id, "other").await;
    assert_eq!(theirs["orders"], json!([]));
    assert_eq!(client.buy(&id, "second").await.0, 202);
    // Sold out: the holder asking again gets 410, every time.
    for _ in 0..3 {
        let (status, reply) = client.buy(&id, "winner").await;
        assert_eq!((status, code(&reply)), (410, "SOLD_OUT"), "{reply}");
    }
    until_written(&client, &id, "winner").await;
    let (_, mine) = client.my_orders(&id, "winner").await;
    assert_eq!(mine["orders"][0]["status"], "PENDING_PAYMENT");
    // Bad input: no token, an unknown sale, a malformed id.
    let (status, _) = stack
        .request("GET", &format!("/sales/{id}/orders"), &[], "")
        .await;
    assert_eq!(status, 401);
    assert_eq!(client.my_orders("no-such-sale", "winner").await.0, 404);
    assert_eq!(client.my_orders("bad%20id", "winner").await.0, 400);
}

/// After Redis loses a live sale, the purchase that finds it missing starts
/// the rebuild: the sale sells again within seconds, not at the next
/// scheduled prewarm.
#[tokio::test]
async fn a_lost_sale_sells_again_within_seconds() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let id = unique("back");
    let now = clock::now_ms();
    assert_eq!(
        client
            .put_sale(&id, &sale_json(10, 1, now - 1_000, now + 3_600_000))
            .await
            .0,
        201
    );
    assert_eq!(client.buy(&id, "a").await.0, 202);
    until_written(&client, &id, "a").await;
    lose_sale(&id, 1).await;
    let lost = Instant::now();
    let mut n = 0;
    let back = eventually(Duration::from_secs(5), || {
        n += 1;
        let user = format!("b{n}");
        let client = &client;
        let id = &id;
        async move { client.buy(id, &user).await.0 == 202 }
    })
    .await;
    assert!(back, "no 202 within 5 s of losing the sale");
    println!("lost sale: first 202 after {:?}", lost.elapsed());
    assert_eq!(client.buy(&id, "a").await.1["code"], "LIMIT_EXCEEDED");
}

/// On AWS a single write to an item a transaction holds is refused
/// (`TransactionConflictException`), and during a sale the order-writer's
/// transactions hold the sale item most of the time: an operator's pause,
/// the audit entry, prewarm's mark and reconcile's report all meet one.
/// Each must wait the transaction out, not fail (a pause answered 503 is a
/// pause not obeyed). The layer holds one transaction open for seconds, for
/// certain, however fast or slow the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_command_meeting_a_writers_transaction_waits_it_out() {
    use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
    use seckill_infra::strict::{self, StrictSettings};
    use seckill_shared::adapters::aws;
    use seckill_shared::adapters::dynamo::catalog::DynamoCatalog;

    let app = seckill_tests::App::spawn().await;
    let sale = seckill_tests::live_sale(10, 1);
    assert!(app.catalog.create_sale(&sale).await.unwrap());
    let emulator = std::env::var("SECKILL_EMULATOR_URL")
        .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
        .expect("make test exports SECKILL_EMULATOR_URL");
    let mut settings = StrictSettings::lenient();
    settings.dynamo.transaction_hold = Duration::from_secs(60);
    settings.dynamo.transaction_latency = Duration::from_secs(2);
    let layer = strict::start("127.0.0.1:0", &emulator, settings)
        .await
        .expect("the strict layer starts");
    // A function's own client: the SDK's retries as deployed.
    let sdk = aws::loader(aws::Caller::Tool, Duration::from_secs(30))
        .endpoint_url(layer.url())
        .load()
        .await;
    let db = aws::dynamodb(&sdk);
    let catalog = DynamoCatalog::new(db.clone(), &app.config.sales_table);

    let hold = || {
        let (db, table, id) = (
            db.clone(),
            app.config.sales_table.clone(),
            sale.sale_id.to_string(),
        );
        tokio::spawn(async move {
            db.transact_write_items()
                .transact_items(
                    TransactWriteItem::builder()
                        .update(
                            Update::builder()
                                .table_name(table)
                                .key("saleId", AttributeValue::S(id))
                                .update_expression("ADD sold :zero")
                                .expression_attribute_values(":zero", AttributeValue::N("0".into()))
                                .build()
                                .unwrap(),
                        )
                        .build(),
                )
                .send()
                .await
                .map(|_| ())
        })
    };
    let in_flight = || async {
        let tally = layer.tally.clone();
        let seen = eventually(Duration::from_secs(30), || {
            let tally = tally.clone();
            async move {
                tally
                    .transactions_in_flight
                    .load(std::sync::atomic::Ordering::SeqCst)
                    == 1
            }
        })
        .await;
        assert!(seen, "the writer's transaction never reached the layer");
    };

    let writer = hold();
    in_flight().await;
    let before = catalog.set_paused(&sale.sale_id, true).await;
    assert!(
        matches!(before, Ok(Some(_))),
        "the pause met the writer's transaction: {before:?}"
    );
    writer.await.unwrap().unwrap();

    let writer = hold();
    in_flight().await;
    let appended = catalog
        .append_audit(&sale.sale_id, &json!({"action": "pause"}))
        .await;
    assert!(appended.is_ok(), "the audit entry: {appended:?}");
    writer.await.unwrap().unwrap();

    let writer = hold();
    in_flight().await;
    let marked = catalog.mark_loaded(&sale.sale_id, clock::now_ms()).await;
    assert!(marked.is_ok(), "prewarm's mark: {marked:?}");
    writer.await.unwrap().unwrap();

    let writer = hold();
    in_flight().await;
    let stored = catalog.store_report(&sale.sale_id, "{}").await;
    assert!(stored.is_ok(), "reconcile's report: {stored:?}");
    writer.await.unwrap().unwrap();

    let (now, _) = app
        .catalog
        .get_record(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert!(now.paused, "the pause was not kept");
}

/// Approximately DynamoDB's size of an item: names and values, as its
/// documentation counts them (numbers as their digits, close enough here).
fn item_bytes(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> usize {
    use aws_sdk_dynamodb::types::AttributeValue as V;
    fn value(v: &V) -> usize {
        match v {
            V::S(s) | V::N(s) => s.len(),
            V::B(b) => b.as_ref().len(),
            V::L(l) => 3 + l.iter().map(|v| 1 + value(v)).sum::<usize>(),
            V::M(m) => 3 + m.iter().map(|(k, v)| 1 + k.len() + value(v)).sum::<usize>(),
            V::Ss(l) | V::Ns(l) => l.iter().map(String::len).sum(),
            _ => 1,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

/// Every order transaction updates the sale item, DynamoDB charges a
/// write unit per KB of it and refuses items over 400 KB: the item must
/// not grow with the sale's history. Forty admin actions and reports
/// later it is the size it was at its creation, and the whole trail is
/// still there, paged, oldest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hot_sale_item_does_not_grow_with_its_history() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let id = unique("small");
    let now = clock::now_ms();
    let (status, reply) = client
        .put_sale(&id, &sale_json(20, 1, now - 1_000, now + 3_600_000))
        .await;
    assert_eq!(status, 201, "{reply}");
    let sdk = seckill_shared::adapters::aws::loader(
        seckill_shared::adapters::aws::Caller::Tool,
        Duration::from_secs(30),
    )
    .load()
    .await;
    let db = seckill_shared::adapters::aws::dynamodb(&sdk);
    let size = || async {
        let item = db
            .get_item()
            .table_name(&stack.config.sales_table)
            .key(
                "saleId",
                aws_sdk_dynamodb::types::AttributeValue::S(id.clone()),
            )
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .expect("the sale item");
        item_bytes(&item)
    };
    assert_eq!(client.buy(&id, "a").await.0, 202);
    until_written(&client, &id, "a").await;
    let at_start = size().await;

    for _ in 0..18 {
        for action in ["pause", "resume"] {
            let (status, reply) = client
                .admin("POST", &format!("/admin/sales/{id}/{action}"), "")
                .await;
            assert_eq!(status, 200, "{action}: {reply}");
        }
    }
    for _ in 0..3 {
        let (status, reply) = client
            .admin("POST", &format!("/admin/sales/{id}/reconcile"), "")
            .await;
        assert_eq!(status, 200, "{reply}");
    }
    let after = size().await;
    // The counters' digits and the version may move; nothing grows.
    assert!(
        after <= at_start + 16,
        "the sale item grew from {at_start} to {after} bytes"
    );

    // The whole trail, seven at a time.
    let mut actions = Vec::new();
    let mut seqs = Vec::new();
    let mut path = format!("/admin/sales/{id}/audit?limit=7");
    loop {
        let (status, page) = client.admin("GET", &path, "").await;
        assert_eq!(status, 200, "{page}");
        assert!(page["entries"].as_array().unwrap().len() <= 7, "{page}");
        for e in page["entries"].as_array().unwrap() {
            actions.push(e["action"].as_str().unwrap().to_owned());
            seqs.push(e["seq"].as_u64().unwrap());
        }
        match page["next"].as_u64() {
            Some(next) => path = format!("/admin/sales/{id}/audit?after={next}&limit=7"),
            None => {
                assert_eq!(page["total"].as_u64(), Some(40), "{page}");
                break;
            }
        }
    }
    assert_eq!(seqs, (1..=40).collect::<Vec<u64>>());
    assert_eq!(actions[0], "create");
    assert_eq!(actions[1..37].iter().filter(|a| *a == "pause").count(), 18);
    assert_eq!(actions[37..], ["reconcile", "reconcile", "reconcile"]);
    let (_, newest) = client
        .admin("GET", &format!("/admin/sales/{id}/audit?last=3"), "")
        .await;
    let newest: Vec<u64> = newest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(newest, [38, 39, 40]);
    // The last report is still one read away, and the listing is only sales.
    let (status, report) = client
        .admin("GET", &format!("/admin/sales/{id}/report"), "")
        .await;
    assert_eq!(
        (status, report["saleId"].as_str()),
        (200, Some(id.as_str()))
    );
    let (_, listing) = client.admin("GET", "/admin/sales", "").await;
    let listed: Vec<&str> = listing["sales"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["saleId"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&id.as_str()), "{listing}");
    assert!(listed.iter().all(|s| !s.contains('#')), "{listing}");

    // Bad input: a clear 400, nothing else.
    for query in [
        "limit=0",
        "limit=101",
        "after=x",
        "last=3&after=1",
        "last=-1",
    ] {
        let (status, reply) = client
            .admin("GET", &format!("/admin/sales/{id}/audit?{query}"), "")
            .await;
        assert_eq!(
            (status, code(&reply)),
            (400, "INVALID_REQUEST"),
            "{query}: {reply}"
        );
    }
    let (status, _) = client.admin("GET", "/admin/sales/nope/audit", "").await;
    assert_eq!(status, 404);
}

/// The per-user limit is frozen from the start, as the
/// stock is. It used to be editable on a live sale: the new limit reached
/// Redis at once while the order-writer went on with the sale it had
/// cached, so a buyer's second unit under a raised limit was accepted
/// (`202`) and written `REJECTED LIMIT_EXCEEDED` for good; a lowered one
/// made reconcile page `USER_OVER_LIMIT` for every buyer already above it.
/// Now both edits are refused (`409 SALE_STARTED`), every `202` ends as an
/// order, and the invariant checker finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_the_per_user_limit_of_a_live_sale_never_rejects_an_accepted_order() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let id = unique("limit");
    let now = clock::now_ms();
    let mut sale = sale_json(20, 1, now - 1_000, now + 3_600_000);
    sale["perUserLimit"] = json!(2);
    assert_eq!(client.put_sale(&id, &sale).await.0, 201);
    let mut accepted = Vec::new();
    for _ in 0..2 {
        let (status, reply) = client.buy(&id, "a").await;
        assert_eq!(status, 202, "{reply}");
        accepted.push(reply["orderId"].as_str().unwrap().to_owned());
    }
    until_written(&client, &id, "a").await;

    // Raised: the writer has this sale cached from a's orders.
    sale["perUserLimit"] = json!(3);
    let (raised, raise_reply) = client.put_sale(&id, &sale).await;
    let (third, reply) = client.buy(&id, "a").await;
    if third == 202 {
        accepted.push(reply["orderId"].as_str().unwrap().to_owned());
    }
    until_written(&client, &id, "a").await;
    let (_, mine) = client.my_orders(&id, "a").await;
    let statuses: Vec<&str> = mine["orders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["status"].as_str().unwrap())
        .collect();
    assert!(
        statuses.iter().all(|s| *s == "PENDING_PAYMENT"),
        "every 202 ends as an order: {statuses:?} ({mine})"
    );
    assert_eq!(
        (raised, code(&raise_reply)),
        (409, "SALE_STARTED"),
        "{raise_reply}"
    );
    assert_eq!((third, code(&reply)), (409, "LIMIT_EXCEEDED"), "{reply}");

    // Lowered below what a holds: refused too.
    sale["perUserLimit"] = json!(1);
    let (lowered, reply) = client.put_sale(&id, &sale).await;
    assert_eq!((lowered, code(&reply)), (409, "SALE_STARTED"), "{reply}");
    let (_, view) = client.admin("GET", &format!("/admin/sales/{id}"), "").await;
    assert_eq!(view["perUserLimit"], 2, "{view}");

    // Before the start it may still change, and Redis follows.
    let later = unique("limit");
    let mut upcoming = sale_json(20, 1, now + 300_000, now + 3_600_000);
    assert_eq!(client.put_sale(&later, &upcoming).await.0, 201);
    upcoming["perUserLimit"] = json!(4);
    assert_eq!(client.put_sale(&later, &upcoming).await.0, 200);
    let limit: Option<i64> = redis()
        .await
        .hget(
            SaleKeys::new(&SaleId::parse(&later).unwrap()).meta,
            "perUserLimit",
        )
        .await
        .unwrap();
    assert_eq!(limit, Some(4));

    let report = stack.checker().await;
    seckill_tests::assert_clean(&report, &id, &accepted).await;
}

/// An end is obeyed whatever came before it: a sale paused, then ended,
/// answered `503 SALE_PAUSED` (retry shortly) until its keys expired an
/// hour after the end, where the contract and the sale's view say
/// `410 SALE_ENDED` (`purchase.lua` checked the pause before the clock, and
/// an ended sale cannot be resumed).
#[tokio::test]
async fn a_paused_sale_that_is_ended_answers_sale_ended() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let id = unique("pause-end");
    let now = clock::now_ms();
    assert_eq!(
        client
            .put_sale(&id, &sale_json(20, 1, now - 1_000, now + 3_600_000))
            .await
            .0,
        201
    );
    let (status, first) = client.buy(&id, "a").await;
    assert_eq!(status, 202, "{first}");
    for action in ["pause", "end"] {
        let (status, reply) = client
            .admin("POST", &format!("/admin/sales/{id}/{action}"), "")
            .await;
        assert_eq!(status, 200, "{action}: {reply}");
    }
    let (status, reply) = client.buy(&id, "b").await;
    assert_eq!((status, code(&reply)), (410, "SALE_ENDED"), "{reply}");
    let (_, view) = stack.request("GET", &format!("/sales/{id}"), &[], "").await;
    assert_eq!(view["status"], "ENDED", "{view}");
    until_written(&client, &id, "a").await;
    let accepted = vec![first["orderId"].as_str().unwrap().to_owned()];
    seckill_tests::assert_clean(&stack.checker().await, &id, &accepted).await;
}

/// A loaded sale whose start is moved later than the prewarm lead kept its
/// old start in Redis (the edit's prewarm answered NOT_DUE before it looked
/// at Redis), so it sold from the old start until the next prewarm within
/// the new start's lead. The edit reaches Redis at once, as every edit of a
/// loaded sale does.
#[tokio::test]
async fn moving_a_loaded_sales_start_later_keeps_it_closed_until_then() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let id = unique("later");
    let now = clock::now_ms();
    let old_start = now + 2_000;
    let (status, reply) = client
        .put_sale(&id, &sale_json(20, 1, old_start, now + 7_200_000))
        .await;
    assert_eq!(
        (status, reply["prewarm"]["outcome"].as_str()),
        (201, Some("LOADED")),
        "{reply}"
    );
    let new_start = now + 3_600_000;
    let (status, reply) = client
        .put_sale(&id, &sale_json(20, 1, new_start, now + 7_200_000))
        .await;
    assert_eq!(status, 200, "{reply}");
    let start: Option<i64> = redis()
        .await
        .hget(SaleKeys::new(&SaleId::parse(&id).unwrap()).meta, "startMs")
        .await
        .unwrap();
    assert_eq!(start, Some(new_start), "Redis has the new start");
    assert!(
        eventually(Duration::from_secs(10), || async {
            clock::now_ms() > old_start + 100
        })
        .await
    );
    let (status, reply) = client.buy(&id, "a").await;
    assert_eq!((status, code(&reply)), (425, "SALE_NOT_STARTED"), "{reply}");
    seckill_tests::assert_clean(&stack.checker().await, &id, &[]).await;
}

/// The rules that keep a slow prewarm from undoing an operator, on the real
/// scripts (the simulation found each broken; `docs/testing.md`,
/// Simulation): a load never opens a sale, only `OPEN` opens what a load
/// closed, a refresh creates nothing, and a refresh read at an earlier
/// version of the sale item than one already applied writes nothing.
#[tokio::test]
async fn a_load_never_opens_a_sale_and_a_stale_refresh_writes_nothing() {
    use seckill_shared::adapters::redis::RedisStock;
    use seckill_shared::domain::{Quantity, Sale, UserId};
    use seckill_shared::ports::{ReserveOutcome, ReserveRequest, StockStore};

    let stock =
        RedisStock::connect_lazy(&std::env::var("REDIS_URL").unwrap(), Duration::from_secs(2))
            .unwrap();
    let buyer = UserId::parse("rules-buyer").unwrap();
    let try_buy = |sale: Sale| {
        let stock = stock.clone();
        let buyer = buyer.clone();
        async move {
            stock
                .reserve(ReserveRequest {
                    sale_id: &sale.sale_id,
                    user_id: &buyer,
                    quantity: Quantity::ONE,
                    idempotency_key: None,
                    gate_nonce: None,
                    gate_issued_ms: None,
                    source_ip: None,
                })
                .await
                .unwrap()
        }
    };
    let paused = |open: bool, outcome: &ReserveOutcome| {
        assert_eq!(
            matches!(outcome, ReserveOutcome::Paused),
            !open,
            "expected the sale {}: {outcome:?}",
            if open { "open" } else { "closed" }
        );
    };
    for shards in [1, 3] {
        let mut live = seckill_tests::live_sale(100, 50);
        live.shards = shards;
        let closed = Sale {
            paused: true,
            ..live.clone()
        };

        // A sale loaded closed (prewarm's rebuild) stays closed until OPEN.
        stock.load_sale(&closed, 1).await.unwrap();
        paused(false, &try_buy(live.clone()).await);
        assert_eq!(
            stock.open_loaded(&live).await.unwrap(),
            shards.max(1) + u32::from(shards > 1)
        );
        paused(true, &try_buy(live.clone()).await);

        // An operator's pause: a refresh given the live sale read before it
        // leaves it paused, and OPEN does not open it either.
        stock.set_status(&closed).await.unwrap();
        assert!(stock.refresh_sale(&live, 2).await.unwrap());
        paused(false, &try_buy(live.clone()).await);
        assert_eq!(
            stock.open_loaded(&live).await.unwrap(),
            0,
            "OPEN opened an operator's pause"
        );
        paused(false, &try_buy(live.clone()).await);

        // An operator's resume opens it; a refresh given the paused sale
        // read before the resume closes it as a load does, and OPEN (sent
        // once the table is read again) opens it.
        stock.set_status(&live).await.unwrap();
        paused(true, &try_buy(live.clone()).await);
        assert!(stock.refresh_sale(&closed, 3).await.unwrap());
        paused(false, &try_buy(live.clone()).await);
        stock.open_loaded(&live).await.unwrap();
        paused(true, &try_buy(live.clone()).await);

        // An end applied at version 5; a refresh read at version 4 (before
        // the end) writes nothing: the sale stays ended.
        let ended = Sale {
            end_ms: clock::now_ms() - 1,
            ..live.clone()
        };
        assert!(stock.refresh_sale(&ended, 5).await.unwrap());
        assert!(matches!(try_buy(live.clone()).await, ReserveOutcome::Ended));
        assert!(stock.refresh_sale(&live, 4).await.unwrap());
        assert!(
            matches!(try_buy(live.clone()).await, ReserveOutcome::Ended),
            "a refresh read before the end put the old end back"
        );

        // A refresh of a sale whose keys are gone makes none.
        let lost = seckill_tests::live_sale(100, 50);
        assert!(!stock.refresh_sale(&lost, 1).await.unwrap());
        assert!(
            stock.view(&lost.sale_id, None).await.unwrap().is_none(),
            "a refresh made the sale anew"
        );
    }
}

/// Redis can go back in time: a replica promoted before it had the end's
/// write, or a node restarted from an older snapshot. The scheduled
/// prewarm skipped every sale past its end, so an ended sale that Redis
/// brought back as it was before the end sold again until its old end
/// (the nemesis's seed 271828: 202s minutes after an end answered 200).
/// The next prewarm closes it, for as long as its keys may exist.
#[tokio::test]
async fn an_ended_sale_that_redis_brings_back_is_closed_by_the_next_prewarm() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let (id, _) = live_sale_a_bought_from(&client, "end-back").await;
    // Redis's copy of the sale as it was before the end.
    let meta = SaleKeys::new(&SaleId::parse(&id).unwrap()).meta;
    let mut conn = redis().await;
    let before: Vec<u8> = redis::cmd("DUMP")
        .arg(&meta)
        .query_async(&mut conn)
        .await
        .unwrap();
    let (status, reply) = client
        .admin("POST", &format!("/admin/sales/{id}/end"), "")
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(code(&client.buy(&id, "b").await.1), "SALE_ENDED");

    let _: () = redis::cmd("RESTORE")
        .arg(&meta)
        .arg(0)
        .arg(before)
        .arg("REPLACE")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        client.buy(&id, "c").await.0,
        202,
        "the old definition is back in Redis, so it sells"
    );
    stack
        .scheduled
        .prewarm
        .prewarm_all(clock::now_ms())
        .await
        .unwrap();
    let (status, reply) = client.buy(&id, "d").await;
    assert_eq!(
        (status, code(&reply)),
        (410, "SALE_ENDED"),
        "the next prewarm left the ended sale selling: {reply}"
    );
}

/// A prewarm run stopped at the first sale it could not prewarm, so every
/// sale after that one in the table's order went without: one bad sale
/// (here its meta is not a hash; on AWS, say, a sharded sale whose
/// cluster master is down) kept the others from loading. The run now
/// prewarms every sale and fails afterwards, naming the first error.
#[tokio::test]
async fn a_sale_whose_prewarm_fails_does_not_keep_the_others_from_loading() {
    let stack = LocalStack::start().await;
    let client = Client::new(&stack);
    let (broken, _) = live_sale_a_bought_from(&client, "broken").await;
    let soon = clock::now_ms() + 120_000;
    let mut due = Vec::new();
    for _ in 0..10 {
        let id = unique("due");
        let (status, reply) = client
            .put_sale(&id, &sale_json(5, 1, soon, soon + 3_600_000))
            .await;
        assert_eq!(status, 201, "{reply}");
        // Loaded by its PUT; gone again, so the run has to load it.
        lose_sale(&id, 1).await;
        due.push(id);
    }
    let meta = SaleKeys::new(&SaleId::parse(&broken).unwrap()).meta;
    let mut conn = redis().await;
    let _: () = conn.del(&meta).await.unwrap();
    let _: () = conn.set(&meta, "not a hash").await.unwrap();

    let run = stack.scheduled.prewarm.prewarm_all(clock::now_ms()).await;
    assert!(
        run.is_err(),
        "the broken sale's failure is the run's: {run:?}"
    );
    let mut missing = Vec::new();
    for id in &due {
        let keys = SaleKeys::new(&SaleId::parse(id).unwrap());
        let loaded: bool = conn.exists(&keys.meta).await.unwrap();
        if !loaded {
            missing.push(id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "{} of the {} due sales were left unloaded by one broken sale: {missing:?}",
        missing.len(),
        due.len()
    );
}
