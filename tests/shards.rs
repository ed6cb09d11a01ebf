//! Stock shards, on a single `redis-server` and on a real 3-master Redis
//! Cluster (`make test` starts one and exports `REDIS_CLUSTER_URL`): exact
//! stock, exact per-user limits, no false sold-out while any shard has stock,
//! a borrow that died half way completed by reconcile, and reconcile and the
//! invariant checker clean after a sale.

use redis::AsyncCommands;
use seckill_shared::adapters::redis::{LoadOutcome, RedisStock, SaleKeys, home_shard};
use seckill_shared::adapters::sqs::{SqsInspector, SqsQueue};
use seckill_shared::app::reconcile::{ReconcileSettings, Reconciler};
use seckill_shared::clock;
use seckill_shared::domain::{OrderId, Sale};
use seckill_shared::ports::StockStore;
use seckill_shared::ports::{StockLoading, StockReading};
use seckill_shared::wire::LiveReconciler;
use seckill_tests::*;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

fn cluster_url() -> String {
    std::env::var("REDIS_CLUSTER_URL").unwrap_or_else(|_| {
        panic!("REDIS_CLUSTER_URL is not set: run the suite with `make test`, which starts a 3-master cluster")
    })
}

/// The invariant checker over the sale finds nothing, `accepted` being the
/// order ids the buyers were given.
async fn assert_invariants<S: AsRef<str>>(app: &App, sale: &Sale, accepted: &[S]) {
    let accepted: Vec<OrderId> = accepted
        .iter()
        .map(|o| OrderId::parse(o.as_ref()).unwrap())
        .collect();
    let violations = app
        .checker()
        .check_sale(&sale.sale_id, &accepted)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(violations, vec![]);
    // The same sale read as a big one is, in slices of its buyers on local
    // disk (a slice per two units of stock: each shard's key group is
    // streamed into every slice).
    let sliced = app.checker().with_slice_orders(2);
    let mut read = sliced.read(&sale.sale_id).await.unwrap().unwrap();
    assert!(read.slices() > 1, "{} slices", read.slices());
    let judged = sliced.judge(&mut read, true, &accepted).await.unwrap();
    assert_eq!(judged.violations, vec![]);
    assert_eq!(judged.unplaced, vec![]);
}

fn reconciler(app: &App) -> LiveReconciler {
    let c = app.checker();
    Reconciler::new(
        c.stock().clone(),
        c.catalog().clone(),
        c.orders().clone(),
        SqsQueue::new(app.sqs.clone(), &app.queue_url),
        SqsInspector::new(app.sqs.clone(), &app.queue_url, Some(app.dlq_url.clone())),
        ReconcileSettings::default(),
    )
}

fn sharded_sale(stock: u32, limit: u32, shards: u32) -> Sale {
    let mut sale = live_sale(stock, limit);
    sale.shards = shards;
    sale
}

/// Buyers `b<n>` whose home shard (of `shards`) is `shard`.
fn buyers_homed_on(shard: u32, shards: u32, count: usize) -> Vec<String> {
    (0..)
        .map(|n| format!("b{n}"))
        .filter(|u| home_shard(u, shards) == shard)
        .take(count)
        .collect()
}

/// Concurrent purchases through the real handler, one per entry; the
/// accepted order ids and the refusals' codes.
async fn buy_all(app: &App, sale: &str, users: &[String]) -> (Vec<String>, Vec<String>) {
    let tasks: Vec<_> = users
        .iter()
        .map(|user| {
            let service = app.service.clone();
            let event = purchase_event(sale, Some(user), "", &[]);
            tokio::spawn(async move {
                Reply::from(purchase::handler::handle(&service, event).await.unwrap())
            })
        })
        .collect();
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for task in tasks {
        let r = task.await.unwrap();
        if r.status == 202 {
            accepted.push(r.body["orderId"].as_str().unwrap().to_owned());
        } else {
            refused.push(r.code().to_owned());
        }
    }
    (accepted, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_false_sold_out_while_any_shard_has_stock() {
    let app = App::spawn().await;
    let sale = sharded_sale(40, 1, 8);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // Every buyer's home is shard 0, which holds 5 of the 40 units: the
    // other 35 must be borrowed.
    let users = buyers_homed_on(0, 8, 60);
    let (accepted, refused) = buy_all(&app, id, &users).await;
    assert_eq!(accepted.len(), 40, "every unit sold: {refused:?}");
    assert!(refused.iter().all(|c| c == "SOLD_OUT"), "{refused:?}");
    let ids: HashSet<&String> = accepted.iter().collect();
    assert_eq!(ids.len(), 40);
    assert!(
        accepted.iter().all(|o| o.ends_with("-s0")),
        "reserved on the home shard"
    );
    app.write_queued_orders().await;
    assert_invariants(&app, &sale, &accepted).await;
    let view = app
        .service
        .stock()
        .view(&sale.sale_id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.remaining, 0, "the shards add up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_user_limit_is_exact_across_shards() {
    let app = App::spawn().await;
    let sale = sharded_sale(100, 2, 8);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let clicks: Vec<String> = vec!["greedy".to_owned(); 50];
    let (accepted, refused) = buy_all(&app, id, &clicks).await;
    assert_eq!(accepted.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|c| c == "LIMIT_EXCEEDED"));
    let snap = app
        .service
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((snap.shards, snap.stock), (8, 98));
    assert_eq!(snap.buyers.get("greedy"), Some(&2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_borrow_that_died_between_its_steps_is_completed_by_reconcile() {
    let app = App::spawn().await;
    let sale = sharded_sale(16, 1, 4);
    app.open_sale(&sale).await;
    // The first step of a borrow (shard 2 lends 3 units to shard 0) and
    // then nothing: the caller died before the home shard received them.
    let from = SaleKeys::shard(&sale.sale_id, 2);
    let long_ago = clock::now_ms() - 120_000;
    let mut redis = app.redis.clone();
    let left: i64 = redis.decr(&from.stock, 3).await.unwrap();
    assert_eq!(left, 1);
    let _: () = redis
        .hset(&from.lent, "t-crashed", format!("0:3:{long_ago}"))
        .await
        .unwrap();
    let snap = app
        .service
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((snap.stock, snap.in_transit), (13, 3));
    // Not a drift: the units are in transit, still Redis's to sell.
    assert_invariants::<&str>(&app, &sale, &[]).await;
    let report = reconciler(&app)
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap();
    assert!(
        report
            .repairs
            .iter()
            .any(|r| r.kind == "TRANSFER_COMPLETED"),
        "{report:?}"
    );
    let snap = app
        .service
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((snap.stock, snap.in_transit), (16, 0));
    // Completing it again changes nothing.
    let again = reconciler(&app)
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap();
    assert!(again.repairs.iter().all(|r| r.kind != "TRANSFER_COMPLETED"));
    // And every unit still sells, from any home shard.
    let users: Vec<String> = (0..20).map(|n| format!("u{n}")).collect();
    let (accepted, _) = buy_all(&app, sale.sale_id.as_str(), &users).await;
    assert_eq!(accepted.len(), 16);
}

/// The master (by port) serving each of `keys`, from the cluster itself.
async fn masters_of(keys: &[String]) -> Vec<u16> {
    let seed = cluster_url().replace("?cluster=true", "");
    let mut conn = redis::Client::open(seed)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let slots: Vec<(i64, i64, Vec<redis::Value>)> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async::<Vec<redis::Value>>(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .map(|range| {
            let redis::Value::Array(parts) = range else {
                panic!("slot range")
            };
            let start: i64 = redis::from_redis_value(parts[0].clone()).unwrap();
            let end: i64 = redis::from_redis_value(parts[1].clone()).unwrap();
            let redis::Value::Array(master) = parts[2].clone() else {
                panic!("master")
            };
            (start, end, master)
        })
        .collect();
    let mut out = Vec::new();
    for key in keys {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let (_, _, master) = slots
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .unwrap();
        let port: i64 = redis::from_redis_value(master[1].clone()).unwrap();
        out.push(u16::try_from(port).unwrap());
    }
    out
}

/// A sale id whose 8 shards land on all three masters (a sale id's slots
/// are fixed by its name; most names spread, this test must not depend on
/// luck).
async fn spread_sale(stock: u32) -> Sale {
    for _ in 0..100 {
        let sale = sharded_sale(stock, 1, 8);
        let keys: Vec<String> = (0..8)
            .map(|k| SaleKeys::shard(&sale.sale_id, k).stock)
            .collect();
        let masters: BTreeSet<u16> = masters_of(&keys).await.into_iter().collect();
        if masters.len() == 3 {
            return sale;
        }
    }
    panic!("no sale id spread over three masters in 100 tries");
}

async fn sell_on_the_cluster(shards: u32) {
    let app = App::spawn_with(|c| c.redis_url = cluster_url()).await;
    let sale = if shards == 1 {
        sharded_sale(100, 1, 1)
    } else {
        spread_sale(100).await
    };
    let keys: Vec<String> = (0..shards)
        .map(|k| SaleKeys::of(&sale.sale_id, shards, k).stock)
        .collect();
    let masters: BTreeSet<u16> = masters_of(&keys).await.into_iter().collect();
    if shards > 1 {
        assert_eq!(
            masters.len(),
            3,
            "the shards' slots are on different masters"
        );
    }
    app.open_sale(&sale).await;
    if shards > 1 {
        // The directory's home table gives each master the same share of
        // buyers, although 8 shards sit 3/3/2 on 3 masters (the uniform
        // hash would give the busiest 1.5x the least).
        let store = RedisStock::connect_lazy(&cluster_url(), Duration::from_secs(2)).unwrap();
        let layout = store.layout(&sale.sale_id).await.unwrap().unwrap();
        assert_eq!(layout.shards(), 8);
        let ports = masters_of(&keys).await;
        let mut per_master: BTreeMap<u16, u32> = BTreeMap::new();
        for n in 0..30_000 {
            let home = layout.home(&format!("buyer-{n}")) as usize;
            *per_master.entry(ports[home]).or_default() += 1;
        }
        let (most, least) = (
            per_master.values().max().copied().unwrap(),
            per_master.values().min().copied().unwrap(),
        );
        assert_eq!(per_master.len(), 3, "{per_master:?}");
        assert!(
            f64::from(most) / f64::from(least) < 1.1,
            "buyers per master {per_master:?}"
        );
    }
    let users: Vec<String> = (0..300).map(|n| format!("c{n}")).collect();
    let (accepted, refused) = buy_all(&app, sale.sale_id.as_str(), &users).await;
    assert_eq!(accepted.len(), 100, "exactly the stock: {refused:?}");
    assert!(refused.iter().all(|c| c == "SOLD_OUT"), "{refused:?}");
    app.write_queued_orders().await;
    let report = reconciler(&app)
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.violations, vec![], "{report:?}");
    assert_eq!((report.sold, report.available), (100, 0));
    assert_invariants(&app, &sale, &accepted).await;
    println!("cluster, {shards} shard(s) on masters {masters:?}: 100 of 300 sold, reconcile clean");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_of_one_shard_sells_exactly_on_a_three_master_cluster() {
    sell_on_the_cluster(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_of_eight_shards_spread_over_three_masters_sells_exactly() {
    sell_on_the_cluster(8).await;
}

/// Every key of a sharded sale, as a lost Redis would leave it: none.
async fn lose_every_key(app: &App, sale: &Sale) {
    app.lose_group(&SaleKeys::new(&sale.sale_id)).await;
    for k in 0..sale.shards {
        app.lose_group(&SaleKeys::shard(&sale.sale_id, k)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_key_gets_the_same_order_on_a_sharded_sale() {
    let app = App::spawn().await;
    let sale = sharded_sale(10, 1, 4);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let click = || purchase_event(id, Some("alice"), "", &[("Idempotency-Key", "click-1")]);
    let first = app.call(click()).await;
    let again = app.call(click()).await;
    assert_eq!((first.status, again.status), (202, 202));
    assert_eq!(first.body["orderId"], again.body["orderId"]);
    let snap = app
        .service
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((snap.stock, snap.reservations.len()), (9, 1), "taken once");
    assert_eq!(snap.buyers.get("alice"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_sale_that_lost_its_keys_fails_closed_and_is_rebuilt_from_dynamodb() {
    let app = App::spawn().await;
    let sale = sharded_sale(20, 1, 4);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let first: Vec<String> = (0..8).map(|n| format!("early{n}")).collect();
    let (accepted, _) = buy_all(&app, id, &first).await;
    assert_eq!(accepted.len(), 8);
    app.write_queued_orders().await;

    lose_every_key(&app, &sale).await;
    let reply = app.purchase(id, "late", "").await;
    assert_eq!((reply.status, reply.code()), (503, "SALE_PAUSED"));

    // That purchase started the rebuild itself; the schedule's run either
    // does it or finds it done.
    let jobs = app.jobs().await;
    let outcome = prewarm_now(&jobs, &sale.sale_id).await;
    assert!(
        matches!(
            outcome,
            seckill_shared::app::jobs::PrewarmOutcome::Loaded {
                stock: 12,
                buyers: 8
            } | seckill_shared::app::jobs::PrewarmOutcome::Refreshed
        ),
        "{outcome:?}"
    );
    let snap = app
        .service
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((snap.shards, snap.stock), (4, 12));
    assert!(first.iter().all(|u| snap.buyers.get(u) == Some(&1)));
    // An earlier buyer is still at the limit; the rest sells, exactly.
    assert_eq!(
        app.purchase(id, "early0", "").await.code(),
        "LIMIT_EXCEEDED"
    );
    let later: Vec<String> = (0..30).map(|n| format!("later{n}")).collect();
    let (more, refused) = buy_all(&app, id, &later).await;
    assert_eq!(more.len(), 12, "{refused:?}");
    app.write_queued_orders().await;
    let all: Vec<&String> = accepted.iter().chain(&more).collect();
    assert_invariants(&app, &sale, &all).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaid_orders_of_a_sharded_sale_give_their_units_back_to_their_shards() {
    let app = App::spawn().await;
    let sale = sharded_sale(8, 1, 4);
    app.open_sale(&sale).await;
    let users: Vec<String> = (0..8).map(|n| format!("p{n}")).collect();
    let (accepted, _) = buy_all(&app, sale.sale_id.as_str(), &users).await;
    assert_eq!(accepted.len(), 8);
    app.write_queued_orders().await;
    // Time injected past every payment window.
    let after = clock::now_ms() + i64::from(sale.payment_window_seconds) * 1_000 + 1_000;
    let report = app
        .jobs()
        .await
        .release_unpaid(after, std::time::Instant::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(report.expired, 8);
    let snap = app
        .service
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.stock, 8, "every unit back");
    assert!(snap.reservations.values().all(|r| r.state == "EXPIRED"));
    assert!(snap.buyers.values().all(|&units| units == 0));
    assert_invariants::<&str>(&app, &sale, &[]).await;
}

/// The per-user limit is exact only while each buyer keeps one home shard:
/// a prewarm refresh of a sale whose directory holds a home table keeps it,
/// and purchases follow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_never_moves_a_buyer_home() {
    let app = App::spawn().await;
    let sale = sharded_sale(40, 1, 4);
    app.open_sale(&sale).await;
    // As a cluster's prewarm may have written it: every bucket is shard 2.
    let directory = SaleKeys::new(&sale.sale_id);
    let table = "2,2,2,2";
    let mut redis = app.redis.clone();
    let _: () = redis.hset(&directory.meta, "homes", table).await.unwrap();
    let refreshed = app
        .service
        .stock()
        .load_sale(&sale, clock::now_ms())
        .await
        .unwrap();
    assert!(
        matches!(refreshed, LoadOutcome::Refreshed { .. }),
        "{refreshed:?}"
    );
    let kept: String = redis.hget(&directory.meta, "homes").await.unwrap();
    assert_eq!(kept, table, "a refresh rewrote the home table");
    let id = sale.sale_id.as_str();
    for user in ["h1", "h2", "h3"] {
        let reply = app.purchase(id, user, "").await;
        assert_eq!(reply.status, 202, "{:?}", reply.body);
        let order = reply.body["orderId"].as_str().unwrap();
        assert!(order.ends_with("-s2"), "{user} bought on {order}");
        // The same buyer again: refused by the count on that one shard.
        assert_eq!(app.purchase(id, user, "").await.code(), "LIMIT_EXCEEDED");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_lost_alone_gets_only_what_the_others_do_not_offer() {
    let app = App::spawn().await;
    let sale = sharded_sale(40, 1, 4);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    // Uneven: shard 1's buyers take its 10 units and borrow 4 more from
    // the others, whose own buyers take 2 each.
    let heavy = buyers_homed_on(1, 4, 14);
    let light: Vec<String> = [0, 2, 3]
        .into_iter()
        .flat_map(|k| buyers_homed_on(k, 4, 2))
        .collect();
    let (mut accepted, refused) = buy_all(&app, id, &heavy).await;
    assert_eq!((accepted.len(), refused.len()), (14, 0), "{refused:?}");
    let (more, refused) = buy_all(&app, id, &light).await;
    assert_eq!((more.len(), refused.len()), (6, 0), "{refused:?}");
    accepted.extend(more);
    app.write_queued_orders().await;
    assert_eq!(app.sale_counters(id).await, (20, 20));

    // Shard 1's node restarts empty; the others keep their stock.
    app.lose_group(&SaleKeys::shard(&sale.sale_id, 1)).await;
    // Fail closed for the lost shard's buyers only; the others buy on.
    let homed_on = |k: u32| {
        (0..)
            .map(|n| format!("fresh{n}"))
            .find(|u| home_shard(u, 4) == k)
            .unwrap()
    };
    let reply = app.purchase(id, &homed_on(1), "").await;
    assert_eq!((reply.status, reply.code()), (503, "SALE_PAUSED"));
    let reply = app.purchase(id, &homed_on(0), "").await;
    assert_eq!(reply.status, 202, "{:?}", reply.body);
    accepted.push(reply.body["orderId"].as_str().unwrap().to_owned());
    // Its order is on the queue: the rebuild waits for it, as any does
    // (unless the refused purchase's own rebuild ran before it was sent).
    let jobs = app.jobs().await;
    let outcome = prewarm_now(&jobs, &sale.sale_id).await;
    assert!(
        matches!(
            outcome,
            seckill_shared::app::jobs::PrewarmOutcome::WaitingForQueue { .. }
                | seckill_shared::app::jobs::PrewarmOutcome::Refreshed
        ),
        "{outcome:?}"
    );
    app.write_queued_orders().await;
    match prewarm_now(&jobs, &sale.sale_id).await {
        seckill_shared::app::jobs::PrewarmOutcome::Loaded { .. }
        | seckill_shared::app::jobs::PrewarmOutcome::Refreshed => {}
        other => panic!("the lost shard was not rebuilt: {other:?}"),
    }
    // Redis offers exactly what DynamoDB has left, not the lost shard's
    // first share on top of what the others still hold.
    let snap = app
        .checker()
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.stock + snap.in_transit, 19, "{snap:?}");
    // Prewarm again: the shard is there now, nothing is added.
    assert_eq!(
        jobs.prewarm_sale(&sale.sale_id, clock::now_ms())
            .await
            .unwrap(),
        seckill_shared::app::jobs::PrewarmOutcome::Refreshed
    );
    let again = app
        .checker()
        .stock()
        .snapshot(&sale.sale_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.stock, again.in_transit),
        (snap.stock, snap.in_transit)
    );
    // Reconcile finds nothing to complete twice.
    let report = reconciler(&app)
        .reconcile_sale(&sale.sale_id, clock::now_ms() + 120_000)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !report
            .repairs
            .iter()
            .any(|r| r.kind == "TRANSFER_COMPLETED"),
        "{:?}",
        report.repairs
    );

    // The lost shard's buyers are still held to the limit (from the rows);
    // 60 newcomers get the 19 units left, and DynamoDB rejects none.
    let (again, _) = buy_all(&app, id, &heavy).await;
    assert!(again.is_empty(), "{again:?}");
    let newcomers: Vec<String> = (0..60).map(|n| format!("late{n}")).collect();
    let (late, _) = buy_all(&app, id, &newcomers).await;
    assert_eq!(late.len(), 19);
    accepted.extend(late);
    app.write_queued_orders().await;
    assert_eq!(app.sale_counters(id).await, (0, 40));
    let orders = app.orders().await;
    assert!(
        accepted.iter().all(|o| orders[o.as_str()].status
            == seckill_shared::domain::orders::OrderStatus::PendingPayment),
        "an accepted order was rejected"
    );
    assert_invariants(&app, &sale, &accepted).await;
}

/// Reconcile relayed a sharded sale's reservation with
/// `shard: 0` in its message whatever shard held it, and the order row was
/// written with it. The order id names its shard; the relay now says it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_order_of_a_sharded_sale_carries_its_shard() {
    use seckill_shared::domain::OrderMessage;
    let app = App::spawn().await;
    let sale = sharded_sale(8, 1, 4);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let buyer = buyers_homed_on(3, 4, 1).remove(0);
    let reply = app.purchase(id, &buyer, "").await;
    assert_eq!(reply.status, 202, "{reply:?}");
    let order = reply.body["orderId"].as_str().unwrap().to_owned();
    // Its message never arrived (a lost send): taken off the queue.
    let lost = app.take_messages().await;
    let sent: OrderMessage = serde_json::from_str(&lost[0].1).unwrap();
    assert_eq!(sent.shard, 3, "the purchase's own message");

    let report = Reconciler::new(
        app.checker().stock().clone(),
        app.checker().catalog().clone(),
        app.checker().orders().clone(),
        SqsQueue::new(app.sqs.clone(), &app.queue_url),
        SqsInspector::new(app.sqs.clone(), &app.queue_url, Some(app.dlq_url.clone())),
        ReconcileSettings {
            grace: Duration::ZERO,
            ..ReconcileSettings::default()
        },
    )
    .reconcile_sale(&sale.sale_id, clock::now_ms() + 1)
    .await
    .unwrap()
    .unwrap();
    assert!(
        report.repairs.iter().any(|r| r.kind == "RELAYED"),
        "{report:?}"
    );
    let relayed = app.take_messages().await;
    let message: OrderMessage = serde_json::from_str(&relayed[0].1).unwrap();
    assert_eq!(
        (message.order_id.as_str(), message.shard),
        (order.as_str(), 3),
        "the relay names the shard"
    );
    let records: Vec<(&str, &str)> = relayed
        .iter()
        .map(|(m, b)| (m.as_str(), b.as_str()))
        .collect();
    let failures = invoke_writer(&*app.writer().await, sqs_event(&records))
        .await
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let row = app
        .db
        .get_item()
        .table_name(&app.config.orders_table)
        .key(
            "orderId",
            aws_sdk_dynamodb::types::AttributeValue::S(order.clone()),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(
        row.get("shard"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::N("3".into()))
    );
    assert_invariants(&app, &sale, &[order]).await;
}
