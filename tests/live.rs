//! The operator dashboard's poll, `GET /admin/sales/{saleId}/live`, over
//! HTTP against the local stack: exact numbers after a small sale (stock,
//! orders by status, queue, the flushed outcome tally, the last reconcile
//! report), a sharded sale summed over its shards, no tally for a sale Redis
//! does not hold, 404 for an unknown sale, and the admin scope; with Redis or
//! the queue unreachable, the rest of the view still answers.

use redis::AsyncCommands;
use seckill_infra::token::TokenSettings;
use seckill_shared::clock;
use seckill_shared::domain::Outcome;
use seckill_shared::http::bodies::live::LiveView;
use seckill_shared::ports::LiveFigures;
use seckill_tests::{App, LocalStack, eventually, free_port, live_sale, unique};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Flushes happen every second; generous for a loaded test machine.
const FLUSHED_WITHIN: Duration = Duration::from_secs(15);

fn sale_json(total: u64, limit: u64, shards: u64, start_ms: i64) -> String {
    json!({
        "name": "Live", "totalStock": total,
        "startAt": clock::rfc3339_ms(start_ms),
        "endAt": clock::rfc3339_ms(start_ms + 3_600_000),
        "perUserLimit": limit, "paymentWindowSeconds": 60, "shards": shards, "gate": false,
    })
    .to_string()
}

struct Caller<'a> {
    stack: &'a LocalStack,
    tokens: TokenSettings,
    admin: String,
}

impl<'a> Caller<'a> {
    /// A caller of `stack` holding an admin token.
    fn new(stack: &'a LocalStack) -> Self {
        let tokens = TokenSettings::from_env();
        let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
        Self {
            stack,
            tokens,
            admin,
        }
    }

    fn bearer(&self, user: &str) -> String {
        format!("Bearer {}", self.tokens.mint(user, false, 300).unwrap())
    }

    async fn put_sale(&self, id: &str, body: &str) {
        let (status, reply) = self
            .stack
            .request(
                "PUT",
                &format!("/admin/sales/{id}"),
                &[("authorization", &self.admin)],
                body,
            )
            .await;
        assert_eq!(status, 201, "{reply}");
    }

    async fn buy(&self, sale: &str, user: &str) -> (u16, Value) {
        self.stack
            .request(
                "POST",
                &format!("/sales/{sale}/purchase"),
                &[("authorization", &self.bearer(user))],
                "",
            )
            .await
    }

    async fn live(&self, sale: &str) -> (u16, Value) {
        self.stack
            .request(
                "GET",
                &format!("/admin/sales/{sale}/live"),
                &[("authorization", &self.admin)],
                "",
            )
            .await
    }

    /// Polls `/live` until `check` holds; the last body either way.
    async fn live_until(&self, sale: &str, check: impl Fn(&Value) -> bool) -> Value {
        let last = std::cell::RefCell::new(Value::Null);
        let held = eventually(FLUSHED_WITHIN, || async {
            let (status, body) = self.live(sale).await;
            assert_eq!(status, 200, "{body}");
            let ok = check(&body);
            *last.borrow_mut() = body;
            ok
        })
        .await;
        let body = last.into_inner();
        assert!(held, "never held; last: {body:#}");
        body
    }
}

fn outcomes(body: &Value) -> Vec<(String, u64)> {
    body["outcomes"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() != Some(0))
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

#[tokio::test]
async fn live_shows_the_exact_numbers_of_a_small_sale() {
    let stack = LocalStack::start().await;
    let caller = Caller::new(&stack);
    let sale = unique("live");
    // Started a minute ago: PUT loads a due sale into Redis at once.
    caller
        .put_sale(&sale, &sale_json(2, 1, 1, clock::now_ms() - 60_000))
        .await;

    // Before any purchase: everything at zero, nothing reported yet.
    let (status, body) = caller.live(&sale).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["saleId"], sale.as_str());
    let at = body["atMs"].as_i64().unwrap();
    assert!((at - clock::now_ms()).abs() < 60_000, "{at}");
    assert_eq!(
        body["stock"],
        json!({"total": 2, "remaining": 2, "status": "LIVE"})
    );
    assert_eq!(
        body["orders"],
        json!({"PENDING_PAYMENT": 0, "PAID": 0, "EXPIRED": 0, "REJECTED": 0})
    );
    assert!(body["ordersAt"].is_string(), "{body}");
    assert_eq!(outcomes(&body), []);
    assert!(body["outcomes"]["ACCEPTED"].is_number());
    // The rows a page shows: the listed outcomes, in their order.
    let listed: Vec<&str> = Outcome::listed().map(Outcome::as_str).collect();
    assert_eq!(body["outcomeCodes"], json!(listed));
    assert!(body["lastReport"].is_null());

    // Two winners, a second click at the limit, two sold-out answers (the
    // second from the environment's in-memory sold-out flag).
    let (status, first) = caller.buy(&sale, "ann").await;
    assert_eq!(status, 202, "{first}");
    let (status, reply) = caller.buy(&sale, "ann").await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED"))
    );
    let (status, second) = caller.buy(&sale, "bob").await;
    assert_eq!(status, 202, "{second}");
    for user in ["cat", "dan"] {
        let (status, reply) = caller.buy(&sale, user).await;
        assert_eq!((status, reply["code"].as_str()), (410, Some("SOLD_OUT")));
    }

    // Both orders written by the order-writer; ann pays, bob's expires
    // (the release run with its clock past the 60 s payment window).
    for (user, order) in [("ann", &first), ("bob", &second)] {
        let path = format!("/orders/{}", order["orderId"].as_str().unwrap());
        let token = caller.bearer(user);
        assert!(
            eventually(Duration::from_secs(30), || async {
                let (_, o) = stack
                    .request("GET", &path, &[("authorization", &token)], "")
                    .await;
                o["status"] == "PENDING_PAYMENT"
            })
            .await,
            "{user}'s order never written"
        );
    }
    let ann = caller.bearer("ann");
    let pay = format!("/orders/{}/pay", first["orderId"].as_str().unwrap());
    let (status, paid) = stack
        .request("POST", &pay, &[("authorization", &ann)], "")
        .await;
    assert_eq!((status, paid["status"].as_str()), (200, Some("PAID")));
    // The scheduled release-unpaid function (its own role: the IAM test
    // attributes every call to the function that makes it).
    let report = stack
        .scheduled
        .release_unpaid
        .release_unpaid(
            clock::now_ms() + 120_000,
            Instant::now() + Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(report.expired, 1, "{report:?}");

    // The numbers: one unit back in Redis, one paid, one expired, the queue
    // drained, and every answer tallied once the tally is flushed.
    let tallied = [
        ("ACCEPTED".to_owned(), 2),
        ("LIMIT_EXCEEDED".to_owned(), 1),
        ("SOLD_OUT".to_owned(), 2),
    ];
    // The orders as counted at most about once a second (a count every
    // console shares: `ordersAt` says when).
    let settled = json!({"PENDING_PAYMENT": 0, "PAID": 1, "EXPIRED": 1, "REJECTED": 0});
    let body = caller
        .live_until(&sale, |b| {
            b["queue"]["visible"] == 0
                && b["queue"]["inFlight"] == 0
                && outcomes(b) == tallied
                && b["orders"] == settled
        })
        .await;
    let counted_at = clock::parse_rfc3339_ms(body["ordersAt"].as_str().unwrap()).unwrap();
    assert!(counted_at <= body["atMs"].as_i64().unwrap(), "{body}");
    assert_eq!(
        body["stock"],
        json!({"total": 2, "remaining": 1, "status": "LIVE"})
    );
    assert_eq!(
        body["orders"],
        json!({"PENDING_PAYMENT": 0, "PAID": 1, "EXPIRED": 1, "REJECTED": 0})
    );
    assert_eq!(
        body["queue"],
        json!({"visible": 0, "inFlight": 0, "dlq": 0})
    );
    assert_eq!(outcomes(&body), tallied);
    assert!(body["lastReport"].is_null());

    // The tally expires with the sale's keys.
    let mut redis = redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let meta_expiry: i64 = redis::cmd("PEXPIRETIME")
        .arg(format!("sale:{{{sale}}}:meta"))
        .query_async(&mut redis)
        .await
        .unwrap();
    let tally_expiry: i64 = redis::cmd("PEXPIRETIME")
        .arg(format!("sale:{{{sale}}}:outcomes"))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(meta_expiry > 0);
    assert_eq!(tally_expiry, meta_expiry);

    // The last reconcile report, exactly as GET .../report returns it.
    let (status, reconciled) = stack
        .request(
            "POST",
            &format!("/admin/sales/{sale}/reconcile"),
            &[("authorization", &caller.admin)],
            "",
        )
        .await;
    assert_eq!(status, 200, "{reconciled}");
    let (_, report) = stack
        .request(
            "GET",
            &format!("/admin/sales/{sale}/report"),
            &[("authorization", &caller.admin)],
            "",
        )
        .await;
    let (status, body) = caller.live(&sale).await;
    assert_eq!(status, 200);
    assert_eq!(body["lastReport"], report);
    assert_eq!(body["lastReport"]["violations"], json!([]));
}

#[tokio::test]
async fn live_sums_the_shards_and_tallies_only_sales_redis_holds() {
    let stack = LocalStack::start().await;
    let caller = Caller::new(&stack);
    let now = clock::now_ms();
    let sharded = unique("live");
    caller
        .put_sale(&sharded, &sale_json(10, 1, 3, now - 60_000))
        .await;
    // Starts in two hours: past the prewarm lead, so not in Redis yet.
    let upcoming = unique("live");
    caller
        .put_sale(&upcoming, &sale_json(5, 1, 1, now + 7_200_000))
        .await;
    let ghost = unique("ghost");

    let (status, body) = caller.live(&upcoming).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["stock"],
        json!({"total": 5, "remaining": null, "status": "UPCOMING"})
    );

    let (status, reply) = caller.buy(&upcoming, "eve").await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (425, Some("SALE_NOT_STARTED"))
    );
    let (status, _) = caller.buy(&ghost, "eve").await;
    assert_eq!(status, 404);
    for user in ["u1", "u2", "u3"] {
        assert_eq!(caller.buy(&sharded, user).await.0, 202);
    }
    // Answered after the others, so once its flush shows, theirs happened.
    let body = caller
        .live_until(&sharded, |b| b["outcomes"]["ACCEPTED"] == 3)
        .await;
    assert_eq!(
        body["stock"],
        json!({"total": 10, "remaining": 7, "status": "LIVE"})
    );
    let mut redis = redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for id in [&upcoming, &ghost] {
        let keys: Vec<String> = redis.keys(format!("sale:{{{id}}}:*")).await.unwrap();
        assert!(keys.is_empty(), "{id}: {keys:?}");
    }
    let (_, body) = caller.live(&upcoming).await;
    assert_eq!(outcomes(&body), []);
}

#[tokio::test]
async fn live_is_404_for_an_unknown_sale_and_admin_only() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
    let buyer = format!("Bearer {}", tokens.mint("bob", false, 300).unwrap());
    let forged = seckill_tests::forged_admin_bearer(&tokens);
    let ghost = format!("/admin/sales/{}/live", unique("ghost"));
    let (status, body) = stack
        .request("GET", &ghost, &[("authorization", &admin)], "")
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("SALE_NOT_FOUND"))
    );

    let demo = format!("/admin/sales/{}/live", stack.demo_sale);
    let (status, body) = stack.request("GET", &demo, &[], "").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("UNAUTHENTICATED"))
    );
    let (status, _) = stack
        .request("GET", &demo, &[("authorization", &forged)], "")
        .await;
    assert_eq!(status, 401);
    let (status, body) = stack
        .request("GET", &demo, &[("authorization", &buyer)], "")
        .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("FORBIDDEN")));
    let (status, body) = stack
        .request("GET", &demo, &[("authorization", &admin)], "")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stock"]["total"], 100);
}

/// A sale of 5 units with one order, bought by alice and written.
async fn one_written_order() -> (App, seckill_shared::domain::Sale) {
    let app = App::spawn().await;
    let sale = live_sale(5, 1);
    app.open_sale(&sale).await;
    let reply = app.purchase(sale.sale_id.as_str(), "alice", "").await;
    assert_eq!(reply.status, 202, "{:?}", reply.body);
    app.write_queued_orders().await;
    (app, sale)
}

#[tokio::test]
async fn a_store_that_cannot_be_read_leaves_only_its_parts_blank() {
    let (app, sale) = one_written_order().await;

    // The view as admin-api builds it, over stores of which one is gone.
    let view = |tweak: fn(&mut seckill_shared::config::Config)| {
        let mut config = app.config.clone();
        tweak(&mut config);
        let sale_id = sale.sale_id.clone();
        async move {
            let reconciler = seckill_shared::wire::reconciler(
                &config,
                seckill_shared::adapters::aws::Caller::Tool,
            )
            .await
            .unwrap();
            let started = Instant::now();
            let state = seckill_shared::app::live::live(reconciler.checker(), &sale_id)
                .await
                .unwrap()
                .unwrap();
            let body = serde_json::to_value(LiveView::of(&state, seckill_shared::clock::now_ms()))
                .unwrap();
            (body, started.elapsed())
        }
    };
    let (all, _) = view(|_| {}).await;
    assert_eq!(all["unavailable"], json!([]));
    assert_eq!(all["stock"]["remaining"], 4);
    assert_eq!(all["orders"]["PENDING_PAYMENT"], 1);

    let (body, took) = view(|c| {
        // Nothing listens there: connections are refused.
        c.redis_url = format!("redis://127.0.0.1:{}", free_port());
    })
    .await;
    assert_eq!(body["unavailable"], json!(["redis"]), "{body}");
    assert!(body["stock"]["remaining"].is_null(), "{body}");
    assert!(body["outcomes"].is_null(), "{body}");
    assert_eq!(body["outcomeCodes"][0], "ACCEPTED", "{body}");
    assert_eq!(body["stock"]["total"], 5);
    assert_eq!(body["orders"]["PENDING_PAYMENT"], 1, "{body}");
    assert_eq!(body["queue"]["visible"], 0, "{body}");
    assert!(took < Duration::from_secs(5), "answered in {took:?}");

    let (body, _) = view(|c| {
        let url = c.orders_queue_url.clone().unwrap();
        c.orders_queue_url = Some(format!("{url}-gone"));
    })
    .await;
    assert_eq!(body["unavailable"], json!(["queue"]), "{body}");
    assert!(body["queue"]["visible"].is_null(), "{body}");
    assert!(body["queue"]["inFlight"].is_null(), "{body}");
    assert_eq!(body["queue"]["dlq"], 0, "the DLQ still answers: {body}");
    assert_eq!(body["stock"]["remaining"], 4, "{body}");
}

// Every console polling a sale shares one count of its orders, made at most
// as often as the count's read units allow (`live::count_holds`): the
// index is not read per poll.
#[tokio::test]
async fn consoles_share_one_count_of_the_orders_for_as_long_as_it_holds() {
    use seckill_shared::ports::OrderCounts;
    let (app, sale) = one_written_order().await;
    let reconciler =
        seckill_shared::wire::reconciler(&app.config, seckill_shared::adapters::aws::Caller::Tool)
            .await
            .unwrap();
    let view = || async {
        let state = seckill_shared::app::live::live(reconciler.checker(), &sale.sale_id)
            .await
            .unwrap()
            .unwrap();
        serde_json::to_value(LiveView::of(&state, seckill_shared::clock::now_ms())).unwrap()
    };
    let stock = reconciler.checker().stock();
    // A count of a million orders made just now holds for minutes: the
    // view answers it (not the index's one order) and says when it was made.
    let now = clock::now_ms();
    let big = OrderCounts {
        at_ms: now,
        counts: [("PAID".to_owned(), 1_000_000)].into(),
    };
    stock.store_order_counts(&sale.sale_id, &big).await.unwrap();
    let body = view().await;
    assert_eq!(body["orders"]["PAID"], 1_000_000, "{body}");
    assert_eq!(body["orders"]["PENDING_PAYMENT"], 0, "{body}");
    assert_eq!(body["ordersAt"], clock::rfc3339_ms(now), "{body}");

    // Made long enough ago, while another console holds the next count:
    // the old count still (one reader of the index at a time).
    let old = OrderCounts {
        at_ms: now - 3_600_000,
        ..big
    };
    stock.store_order_counts(&sale.sale_id, &old).await.unwrap();
    assert!(
        stock
            .claim_order_count(&sale.sale_id, Duration::from_secs(600))
            .await
            .unwrap()
    );
    assert_eq!(view().await["orders"]["PAID"], 1_000_000);

    // Once nobody holds it, this poll counts the index and shares the count.
    let mut redis = app.redis.clone();
    let _: () = redis
        .del(format!("sale:{{{}}}:ordercounting", sale.sale_id))
        .await
        .unwrap();
    let body = view().await;
    assert_eq!(
        body["orders"],
        json!({"PENDING_PAYMENT": 1, "PAID": 0, "EXPIRED": 0, "REJECTED": 0}),
        "{body}"
    );
    let shared = stock.order_counts(&sale.sale_id).await.unwrap().unwrap();
    assert_eq!(shared.counts["PENDING_PAYMENT"], 1);
    assert_eq!(body["ordersAt"], clock::rfc3339_ms(shared.at_ms));
}
