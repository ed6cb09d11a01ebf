//! The waitlist on the local stack (gateway, JWT, order-writer, real Redis
//! and the emulator): a sale of 100 units and 1,000 buyers, 30 winners who
//! never pay (200 of the 900 turned away join the line), their units
//! offered down the line in order, exactly once;
//! a bot's re-joins and hammering gain nothing; bad joins change nothing;
//! a pause refuses joins but keeps offering to the line, an end stops it.
//!
//! The release job runs with an injected clock (`now` past every payment
//! window) instead of waiting out the windows.

use aws_sdk_dynamodb::types::AttributeValue;
use seckill_shared::adapters::aws;
use seckill_shared::adapters::dynamo::orders::DynamoOrders;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::domain::orders::{Order, OrderStatus};
use seckill_shared::ports::{OrderLedger, WaitlistStore};
use seckill_tests::{LocalStack, StackClient, eventually};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The ledger and the sale item of the stack's tables.
struct Ledger {
    db: aws_sdk_dynamodb::Client,
    orders: DynamoOrders,
    sales_table: String,
}

impl Ledger {
    async fn of(stack: &LocalStack) -> Ledger {
        let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
        let db = aws::dynamodb(&sdk);
        Ledger {
            orders: DynamoOrders::new(
                db.clone(),
                &stack.config.orders_table,
                &stack.config.sales_table,
            ),
            db,
            sales_table: stack.config.sales_table.clone(),
        }
    }

    async fn orders(&self, sale: &SaleId) -> Vec<Order> {
        self.orders.all_orders_of_sale(sale).await.unwrap()
    }

    /// `available` and `sold` of the sale item.
    async fn counters(&self, sale: &SaleId) -> (i64, i64) {
        let item = self
            .db
            .get_item()
            .table_name(&self.sales_table)
            .key("saleId", AttributeValue::S(sale.to_string()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .unwrap();
        let n = |k: &str| match item.get(k) {
            Some(AttributeValue::N(n)) => n.parse::<i64>().unwrap(),
            _ => panic!("{k} missing"),
        };
        (n("available"), n("sold"))
    }
}

async fn release_at(stack: &LocalStack, now_ms: i64) -> seckill_shared::app::jobs::ReleaseReport {
    let report = stack
        .scheduled
        .release_unpaid
        .release_unpaid(now_ms, std::time::Instant::now() + Duration::from_secs(600))
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    report
}

async fn redis_stock(stack: &LocalStack, sale: &str) -> i64 {
    let mut conn = redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("GET")
        .arg(format!("sale:{{{sale}}}:stock"))
        .query_async::<i64>(&mut conn)
        .await
        .unwrap()
}

/// A buyer's call, asked again while it answers `503` (the contract's
/// "retry shortly": the emulator under a test's load misses the orders
/// API's per-attempt timeout), for up to five minutes.
async fn patiently(
    client: &StackClient<'_>,
    method: &str,
    path: &str,
    user: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        let answer = client.as_buyer(method, path, user, body).await;
        if answer.0 != 503 || tokio::time::Instant::now() >= deadline {
            return answer;
        }
        tokio::task::yield_now().await;
    }
}

/// One unit for `user`, under an Idempotency-Key so that asking again
/// after a `503` cannot buy twice.
async fn buy_patiently(
    client: &StackClient<'_>,
    sale: &str,
    user: &str,
) -> (u16, serde_json::Value) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    let bearer = client.buyer(user);
    let key = format!("k-{user}");
    loop {
        let answer = client
            .stack
            .request(
                "POST",
                &format!("/sales/{sale}/purchase"),
                &[
                    ("authorization", &bearer),
                    ("content-type", "application/json"),
                    ("idempotency-key", &key),
                ],
                r#"{"quantity": 1}"#,
            )
            .await;
        if answer.0 != 503 || tokio::time::Instant::now() >= deadline {
            return answer;
        }
        tokio::task::yield_now().await;
    }
}

/// Runs `f` for every item, `width` at a time; the answers in order.
async fn each<T, F, Fut>(items: Vec<T>, width: usize, f: F) -> Vec<Fut::Output>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future,
{
    let mut out = Vec::new();
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        let wave: Vec<Fut> = items.by_ref().take(width).map(&f).collect();
        out.extend(seckill_shared::app::draw::join_all(wave).await);
    }
    out
}

#[tokio::test]
async fn thirty_unpaid_units_go_down_the_line_once_each_in_order() {
    // On an emulator of its own: a thousand buyers' orders and entries in
    // the shared one would be copied by every other test's transactions
    // (moto copies every table in each), and theirs by this one's.
    if !seckill_tests::in_own_strict_emulator(
        "waitlist::thirty_unpaid_units_go_down_the_line_once_each_in_order",
    )
    .await
    {
        return;
    }
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    let sale = stack.demo_sale.clone();
    let sale_id = SaleId::parse(&sale).unwrap();
    let ledger = Ledger::of(&stack).await;
    let buyers: Vec<String> = (0..1_000).map(|i| format!("buyer-{i:04}")).collect();

    // 1,000 buyers for 100 units, one each.
    let answers = each(buyers.clone(), 50, |user| {
        let (client, sale) = (&client, sale.clone());
        async move { (user.clone(), buy_patiently(client, &sale, &user).await) }
    })
    .await;
    let winners: Vec<(String, String)> = answers
        .iter()
        .filter(|(_, (status, _))| *status == 202)
        .map(|(u, (_, body))| (u.clone(), body["orderId"].as_str().unwrap().to_owned()))
        .collect();
    let losers: Vec<String> = answers
        .iter()
        .filter(|(_, (status, body))| *status == 410 && body["code"] == "SOLD_OUT")
        .map(|(u, _)| u.clone())
        .collect();
    assert_eq!((winners.len(), losers.len()), (100, 900));

    // A winner holds their limit: they cannot join. A join with a body
    // that asks for something changes nothing.
    let (status, body) = patiently(
        &client,
        "POST",
        &format!("/sales/{sale}/waitlist"),
        &winners[0].0,
        "",
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{body}"
    );
    let (status, body) = patiently(
        &client,
        "POST",
        &format!("/sales/{sale}/waitlist"),
        &losers[0],
        r#"{"quantity": 5}"#,
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("INVALID_REQUEST")),
        "{body}"
    );
    let (status, body) = patiently(
        &client,
        "DELETE",
        &format!("/sales/{sale}/waitlist"),
        &losers[0],
        "",
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("NOT_IN_WAITLIST")),
        "{body}"
    );
    assert_eq!(
        ledger
            .orders
            .entry(
                &sale_id,
                &seckill_shared::domain::UserId::parse(&losers[0]).unwrap()
            )
            .await
            .unwrap(),
        None,
        "a refused join wrote no entry"
    );
    let (status, body) = patiently(
        &client,
        "POST",
        "/sales/no-such-sale/waitlist",
        &losers[0],
        "",
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("SALE_NOT_FOUND")),
        "{body}"
    );

    // 200 of the 900 join, ten at a time (the emulator answers the line's
    // index queries by scanning the table: a bigger line only slows it).
    let joiners: Vec<String> = losers[..200].to_vec();
    let joins = each(joiners.clone(), 10, |user| {
        let (client, sale) = (&client, sale.clone());
        async move {
            patiently(
                client,
                "POST",
                &format!("/sales/{sale}/waitlist"),
                &user,
                "",
            )
            .await
        }
    })
    .await;
    // 201, or 200 for a join asked again after a 503 whose first try had
    // put the entry: the same entry either way.
    for (status, body) in &joins {
        assert!(*status == 201 || *status == 200, "{status} {body}");
        assert_eq!(body["status"], "WAITING", "{body}");
    }
    assert!(
        joins.iter().filter(|(s, _)| *s == 201).count() > 0,
        "new entries are answered 201"
    );

    // A script joining again gains no place: the same entry, 200.
    let line = ledger.orders.heads(&sale_id, 1_000).await.unwrap();
    assert_eq!(line.len(), 200);
    let tenth = line[9].user_id.to_string();
    for _ in 0..5 {
        let (status, body) = patiently(
            &client,
            "POST",
            &format!("/sales/{sale}/waitlist"),
            &tenth,
            "",
        )
        .await;
        assert_eq!(
            (status, body["position"].as_u64(), body["ahead"].as_u64()),
            (200, Some(10), Some(9)),
            "{body}"
        );
    }
    let (_, mine) = patiently(&client, "GET", &format!("/sales/{sale}/orders"), &tenth, "").await;
    assert_eq!(mine["waitlist"]["position"], 10, "{mine}");
    assert!(
        mine["waitlist"]["odds"].is_null(),
        "no unit has come back yet: {mine}"
    );

    // Every winner's order written; 70 pay, 30 never do.
    assert!(
        eventually(Duration::from_secs(600), || async {
            ledger
                .orders(&sale_id)
                .await
                .iter()
                .filter(|o| o.status == OrderStatus::PendingPayment)
                .count()
                == 100
        })
        .await,
        "the 100 orders were never written"
    );
    let (payers, _never_pay) = winners.split_at(70);
    for (user, order) in payers {
        let (status, body) =
            patiently(&client, "POST", &format!("/orders/{order}/pay"), user, "").await;
        assert_eq!(status, 200, "{body}");
    }

    // The 30 windows close: each unit goes to the next in line, as an order.
    let first = clock::now_ms() + 1_000_000;
    let report = release_at(&stack, first).await;
    assert_eq!(
        (report.expired, report.units_offered),
        (30, 30),
        "{report:?}"
    );
    assert_eq!(
        redis_stock(&stack, &sale).await,
        0,
        "no returned unit went back on sale"
    );
    // A buyer hammering the purchase route meanwhile gets nothing.
    for _ in 0..20 {
        let (status, _) = client.buy(&sale, &losers[899]).await;
        assert!(status == 410 || status == 503, "{status}");
    }
    let offers: Vec<Order> = ledger
        .orders(&sale_id)
        .await
        .into_iter()
        .filter(|o| o.offer_of.is_some())
        .collect();
    let offered_users: BTreeSet<String> = offers.iter().map(|o| o.user_id.to_string()).collect();
    let head30: BTreeSet<String> = line[..30].iter().map(|e| e.user_id.to_string()).collect();
    assert_eq!(
        offered_users, head30,
        "offered to the first 30 in line, in order"
    );
    let (_, seen) = patiently(
        &client,
        "GET",
        &format!("/sales/{sale}/orders"),
        &line[0].user_id.to_string(),
        "",
    )
    .await;
    assert_eq!(seen["waitlist"]["status"], "OFFERED", "{seen}");
    assert_eq!(
        seen["waitlist"]["offer"]["status"], "PENDING_PAYMENT",
        "{seen}"
    );
    let (_, next) = patiently(
        &client,
        "GET",
        &format!("/sales/{sale}/orders"),
        &line[30].user_id.to_string(),
        "",
    )
    .await;
    assert_eq!(next["waitlist"]["position"], 1, "{next}");
    assert!(
        next["waitlist"]["odds"]["chance"].as_f64().is_some(),
        "{next}"
    );

    // 20 of the offered pay; 10 let theirs lapse: those go on down the line.
    for offer in &offers[..20] {
        let (status, body) = patiently(
            &client,
            "POST",
            &format!("/orders/{}/pay", offer.order_id),
            offer.user_id.as_str(),
            "",
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let report = release_at(&stack, first + 1_000_000).await;
    assert_eq!(
        (report.expired, report.units_offered),
        (10, 10),
        "{report:?}"
    );
    // Duplicate runs (a redelivered schedule) change nothing.
    let again = release_at(&stack, first + 1_000_000).await;
    assert_eq!((again.expired, again.units_offered), (0, 0), "{again:?}");

    let all = ledger.orders(&sale_id).await;
    let offers: Vec<&Order> = all.iter().filter(|o| o.offer_of.is_some()).collect();
    assert_eq!(offers.len(), 40);
    let second: BTreeSet<String> = offers
        .iter()
        .filter(|o| o.status == OrderStatus::PendingPayment)
        .map(|o| o.user_id.to_string())
        .collect();
    let next10: BTreeSet<String> = line[30..40].iter().map(|e| e.user_id.to_string()).collect();
    assert_eq!(
        second, next10,
        "the lapsed offers went to the next 10 in line"
    );
    for offer in offers
        .iter()
        .filter(|o| o.status == OrderStatus::PendingPayment)
    {
        let (status, body) = patiently(
            &client,
            "POST",
            &format!("/orders/{}/pay", offer.order_id),
            offer.user_id.as_str(),
            "",
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }

    // The ledger's account: every unit sold once.
    let all = ledger.orders(&sale_id).await;
    let paid = all.iter().filter(|o| o.status == OrderStatus::Paid).count();
    assert_eq!(paid, 100, "70 winners, 20 + 10 from the line");
    let (available, sold) = ledger.counters(&sale_id).await;
    assert_eq!((available, sold), (0, 100), "sold + available = total");
    // No unit offered twice: each offer names an expired order, each
    // expired order's units offered at most once each.
    let mut per_source: BTreeMap<String, u32> = BTreeMap::new();
    for o in all.iter().filter(|o| o.offer_of.is_some()) {
        *per_source
            .entry(o.offer_of.as_ref().unwrap().to_string())
            .or_default() += 1;
    }
    for (source, n) in &per_source {
        let expired = all.iter().find(|o| o.order_id.as_str() == source).unwrap();
        assert_eq!(expired.status, OrderStatus::Expired);
        assert_eq!((expired.offered, *n), (1, 1), "{source}");
    }
    // Every buyer within the limit of one.
    let mut held: BTreeMap<String, u32> = BTreeMap::new();
    for o in all
        .iter()
        .filter(|o| matches!(o.status, OrderStatus::Paid | OrderStatus::PendingPayment))
    {
        *held.entry(o.user_id.to_string()).or_default() += o.quantity.get();
    }
    assert!(held.values().all(|n| *n <= 1), "{held:?}");
    assert_eq!(redis_stock(&stack, &sale).await, 0);
    let accepted: Vec<seckill_shared::domain::OrderId> = winners
        .iter()
        .map(|(_, o)| seckill_shared::domain::OrderId::parse(o).unwrap())
        .collect();
    let violations = stack
        .checker()
        .await
        .check_sale(&sale_id, &accepted)
        .await
        .unwrap()
        .unwrap();
    assert!(violations.is_empty(), "{violations:?}");
    println!("waitlist: 100 sold, 40 offers (30 + 10 passed on), 30 + 10 expired, 0 back on sale");
}

#[tokio::test]
async fn a_buyer_who_leaves_is_passed_over_and_stays_left() {
    // On an emulator of its own: its hundred expiries are a transaction
    // each (a line waits), and moto copies every table in each.
    if !seckill_tests::in_own_strict_emulator(
        "waitlist::a_buyer_who_leaves_is_passed_over_and_stays_left",
    )
    .await
    {
        return;
    }
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    let sale = stack.demo_sale.clone();
    let sale_id = SaleId::parse(&sale).unwrap();
    let ledger = Ledger::of(&stack).await;
    // Units on sale: a join is refused and writes nothing.
    let (status, body) = patiently(
        &client,
        "POST",
        &format!("/sales/{sale}/waitlist"),
        "early",
        "",
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("NOT_SOLD_OUT")),
        "{body}"
    );
    assert!(ledger.orders.heads(&sale_id, 10).await.unwrap().is_empty());
    let mut winners = Vec::new();
    for i in 0..100 {
        let (status, body) = client.buy(&sale, &format!("w{i}")).await;
        assert_eq!(status, 202, "{body}");
        winners.push(body["orderId"].as_str().unwrap().to_owned());
    }
    for user in ["a", "b", "c"] {
        let (status, body) = patiently(
            &client,
            "POST",
            &format!("/sales/{sale}/waitlist"),
            user,
            "",
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body) = patiently(
        &client,
        "DELETE",
        &format!("/sales/{sale}/waitlist"),
        "a",
        "",
    )
    .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("LEFT")),
        "{body}"
    );
    // Joining again after leaving keeps the left entry: no new place.
    let (status, body) =
        patiently(&client, "POST", &format!("/sales/{sale}/waitlist"), "a", "").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("LEFT")),
        "{body}"
    );
    let (_, b) = patiently(&client, "GET", &format!("/sales/{sale}/orders"), "b", "").await;
    assert_eq!(b["waitlist"]["position"], 1, "{b}");
    assert!(
        eventually(Duration::from_secs(600), || async {
            ledger.orders(&sale_id).await.len() == 100
        })
        .await
    );
    // One unpaid order comes back: "b" gets it, "a" does not.
    let report = release_at(&stack, clock::now_ms() + 1_000_000).await;
    assert_eq!(
        (report.expired, report.units_offered),
        (100, 2),
        "{report:?}"
    );
    let (_, a) = patiently(&client, "GET", &format!("/sales/{sale}/orders"), "a", "").await;
    assert_eq!(a["waitlist"]["status"], "LEFT", "{a}");
    assert!(a["orders"].as_array().unwrap().is_empty(), "{a}");
    for user in ["b", "c"] {
        let (_, seen) = patiently(&client, "GET", &format!("/sales/{sale}/orders"), user, "").await;
        assert_eq!(seen["waitlist"]["status"], "OFFERED", "{seen}");
    }
    // The other 98 units went back on sale: nobody else waits.
    assert_eq!(redis_stock(&stack, &sale).await, 98);
    let (available, sold) = ledger.counters(&sale_id).await;
    assert_eq!((available, sold), (98, 2));
    // An offer counts for its buyer's limit in Redis too: "b" cannot buy
    // one of the 98 on top of it. Nor after Redis loses the sale and it is
    // rebuilt from the ledger, where the offer is an order like any.
    let (status, body) =
        patiently(&client, "POST", &format!("/sales/{sale}/purchase"), "b", "").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{body}"
    );
    let mut conn = redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    seckill_tests::lose_key_group(
        &mut conn,
        &seckill_shared::adapters::redis::SaleKeys::new(&sale_id),
    )
    .await;
    let rebuilt = seckill_tests::prewarm_now(&stack.scheduled.prewarm, &sale_id).await;
    assert!(
        matches!(
            rebuilt,
            seckill_shared::app::jobs::PrewarmOutcome::Loaded { .. }
        ),
        "{rebuilt:?}"
    );
    assert_eq!(
        redis_stock(&stack, &sale).await,
        98,
        "the rebuild offers no unit twice"
    );
    let (status, body) =
        patiently(&client, "POST", &format!("/sales/{sale}/purchase"), "b", "").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{body}"
    );
    let (_, seen) = patiently(&client, "GET", &format!("/sales/{sale}/orders"), "b", "").await;
    assert_eq!(
        seen["waitlist"]["status"], "OFFERED",
        "the line lives in the ledger: {seen}"
    );
    let (status, _) = patiently(
        &client,
        "GET",
        &format!("/admin/sales/{sale}/waitlist"),
        "x",
        "",
    )
    .await;
    assert_eq!(status, 403, "the figures are the operators'");
    let (status, stats) = client
        .admin("GET", &format!("/admin/sales/{sale}/waitlist"), "")
        .await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(
        (
            stats["waiting"].as_u64(),
            stats["offered"].as_u64(),
            stats["left"].as_u64(),
            stats["returned"].as_u64()
        ),
        (Some(0), Some(2), Some(1), Some(100)),
        "{stats}"
    );
}

/// A sharded sale: a join is decided on the buyer's home shard, and an
/// offer's id names that shard, where Redis counts it for their limit.
#[tokio::test]
async fn a_sharded_sales_offers_live_on_each_buyers_home_shard() {
    use seckill_shared::app::order_queries::{JoinAnswer, JoinRequest};
    use seckill_shared::domain::UserId;
    use seckill_shared::domain::shard_layout::shard_of_order;
    let app = seckill_tests::App::spawn().await;
    let mut sale = seckill_tests::live_sale(4, 1);
    sale.shards = 2;
    app.open_sale(&sale).await;
    let sale_id = sale.sale_id.to_string();
    // Sold out on every shard: buyers come until the store holds no unit
    // (a shard found dry is not asked again for a moment).
    let mut winners = 0;
    for i in 0..400 {
        if app.purchase(&sale_id, &format!("w{i}"), "").await.status == 202 {
            winners += 1;
        }
        if winners == 4 {
            break;
        }
    }
    assert_eq!(winners, 4);
    app.write_queued_orders().await;
    let queries = orders_api::wire(&app.config).await.unwrap();
    let waiting: Vec<String> = (0..6).map(|i| format!("line-{i}")).collect();
    for user in &waiting {
        let joined = queries
            .join_waitlist(&JoinRequest {
                sale_id: sale.sale_id.clone(),
                user_id: UserId::parse(user).unwrap(),
                sale_token: None,
                source_ip: None,
            })
            .await
            .unwrap();
        assert!(matches!(joined, JoinAnswer::New(_)), "{joined:?}");
    }
    let jobs = app.jobs().await;
    let report = jobs
        .release_unpaid(
            clock::now_ms() + 1_000_000,
            std::time::Instant::now() + Duration::from_secs(300),
        )
        .await
        .unwrap();
    assert_eq!((report.expired, report.units_offered), (4, 4), "{report:?}");
    let stock = seckill_shared::adapters::redis::RedisStock::connect_lazy(
        &app.config.redis_url,
        Duration::from_secs(2),
    )
    .unwrap();
    let layout = stock.layout(&sale.sale_id).await.unwrap().unwrap();
    let orders = DynamoOrders::new(
        app.db.clone(),
        &app.config.orders_table,
        &app.config.sales_table,
    );
    let offers: Vec<Order> = orders
        .all_orders_of_sale(&sale.sale_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.offer_of.is_some())
        .collect();
    assert_eq!(offers.len(), 4);
    for offer in &offers {
        let home = layout.home(offer.user_id.as_str());
        assert_eq!(
            shard_of_order(offer.order_id.as_str()),
            Some(home),
            "{offer:?}"
        );
        // The offer counts on the buyer's home shard: a purchase there is
        // refused for the limit, not sold.
        let answer = app.purchase(&sale_id, offer.user_id.as_str(), "").await;
        assert!(answer.status == 409 || answer.status == 410, "{answer:?}");
    }
    let counted: i64 = {
        let mut total = 0;
        for k in 0..2 {
            let keys = seckill_shared::adapters::redis::SaleKeys::shard(&sale.sale_id, k);
            let mut conn = app.redis.clone();
            let held: std::collections::HashMap<String, i64> =
                redis::AsyncCommands::hgetall(&mut conn, &keys.buyers)
                    .await
                    .unwrap();
            total += offers
                .iter()
                .filter(|o| layout.home(o.user_id.as_str()) == k)
                .map(|o| held.get(o.user_id.as_str()).copied().unwrap_or(0))
                .sum::<i64>();
        }
        total
    };
    assert_eq!(
        counted, 4,
        "each offer counted once, on its buyer's home shard"
    );
}

/// A pause stops newcomers, not the line: joins are refused with
/// `SALE_PAUSED` and write nothing, while a unit that comes back is still
/// offered to the buyer waiting for it (a unit changing hands, not a
/// sale). Ending the sale is what stops offers: the units go back to the
/// stock.
#[tokio::test]
async fn a_paused_sale_keeps_offering_to_its_line_and_an_ended_one_stops() {
    use seckill_shared::app::operators::{PauseOutcome, set_paused};
    use seckill_shared::app::order_queries::{JoinAnswer, JoinRefused, JoinRequest, QueryError};
    use seckill_shared::domain::UserId;
    use seckill_shared::ports::WaitlistAdmission;
    let app = seckill_tests::App::spawn().await;
    let sale = seckill_tests::live_sale(2, 1);
    app.open_sale(&sale).await;
    let sale_id = sale.sale_id.to_string();
    let mut winners = Vec::new();
    for user in ["w0", "w1"] {
        let reply = app.purchase(&sale_id, user, "").await;
        assert_eq!(reply.status, 202, "{reply:?}");
        winners.push(user);
    }
    app.write_queued_orders().await;
    let queries = orders_api::wire(&app.config).await.unwrap();
    let join = |user: &str| JoinRequest {
        sale_id: sale.sale_id.clone(),
        user_id: UserId::parse(user).unwrap(),
        sale_token: None,
        source_ip: None,
    };
    let joined = queries.join_waitlist(&join("first")).await.unwrap();
    assert!(matches!(joined, JoinAnswer::New(_)), "{joined:?}");
    let jobs = app.jobs().await;
    let paused = set_paused(&jobs, &sale.sale_id, true, clock::now_ms())
        .await
        .unwrap();
    assert!(matches!(paused, PauseOutcome::Done { .. }), "{paused:?}");
    let refused = queries.join_waitlist(&join("late")).await;
    assert!(
        matches!(
            refused,
            Err(QueryError::JoinRefused(JoinRefused(
                WaitlistAdmission::Paused
            )))
        ),
        "{refused:?}"
    );
    let ledger = Ledger {
        db: app.db.clone(),
        orders: DynamoOrders::new(
            app.db.clone(),
            &app.config.orders_table,
            &app.config.sales_table,
        ),
        sales_table: app.config.sales_table.clone(),
    };
    let orders = &ledger.orders;
    assert_eq!(
        orders
            .entry(&sale.sale_id, &UserId::parse("late").unwrap())
            .await
            .unwrap(),
        None,
        "a refused join writes nothing"
    );
    // w0's order is past its window while the sale is paused: its unit is
    // offered to "first".
    let w0_order = orders
        .all_orders_of_sale(&sale.sale_id)
        .await
        .unwrap()
        .into_iter()
        .find(|o| o.user_id.as_str() == "w0")
        .unwrap();
    let due = w0_order.expires_at_ms.unwrap() + 1;
    let released = seckill_shared::app::release::release(
        orders,
        app.service.stock(),
        Some(&sale),
        &w0_order.order_id,
        due,
    )
    .await
    .unwrap();
    let seckill_shared::app::release::Released::Now { offers, .. } = released else {
        panic!("not released: {released:?}");
    };
    assert_eq!(
        offers
            .iter()
            .map(|o| o.user_id.as_str())
            .collect::<Vec<_>>(),
        vec!["first"]
    );
    // After the sale's end, w1's unit goes back to the stock, though
    // "second" waits.
    set_paused(&jobs, &sale.sale_id, false, clock::now_ms())
        .await
        .unwrap();
    let joined = queries.join_waitlist(&join("second")).await.unwrap();
    assert!(matches!(joined, JoinAnswer::New(_)), "{joined:?}");
    let w1_order = orders
        .all_orders_of_sale(&sale.sale_id)
        .await
        .unwrap()
        .into_iter()
        .find(|o| o.user_id.as_str() == "w1")
        .unwrap();
    let after_end = sale.end_ms.max(w1_order.expires_at_ms.unwrap()) + 1;
    let released = seckill_shared::app::release::release(
        orders,
        app.service.stock(),
        Some(&sale),
        &w1_order.order_id,
        after_end,
    )
    .await
    .unwrap();
    let seckill_shared::app::release::Released::Now { offers, .. } = released else {
        panic!("not released: {released:?}");
    };
    assert!(offers.is_empty(), "offered after the end: {offers:?}");
    let second = orders
        .entry(&sale.sale_id, &UserId::parse("second").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        second.status,
        seckill_shared::domain::waitlist::EntryStatus::Waiting
    );
    let (available, sold) = ledger.counters(&sale.sale_id).await;
    assert_eq!((available, sold), (1, 1), "one offered, one back in stock");
    seckill_tests::assert_clean(&app.checker(), &sale_id, &[]).await;
}
