//! TLS, cluster mode and AUTH together, as `RedisMode=create` deploys them
//! (an ElastiCache replication group with cluster mode, in-transit
//! encryption and an AUTH token): a real Redis Cluster each test starts
//! itself ([`TlsCluster`]: TLS only, TLS on the bus and for replication,
//! `requirepass` + `masterauth`, `noeviction`, every node announcing a
//! hostname that is the only name on its certificate), reached by the
//! functions with `rediss://:TOKEN@host:port?cluster=true` and the password
//! percent-encoded. Each test runs in a child process that trusts the
//! cluster's CA through `SSL_CERT_FILE` ([`with_trusted_ca`]), the trust path
//! production uses.
//!
//! Through it a sharded sale is loaded by the scheduled prewarm, sold out to
//! exactly its stock with the per-user limit holding, every accepted order is
//! written to DynamoDB by the order-writer and readable by its buyer, and
//! reconcile finds nothing wrong.

use seckill_shared::adapters::redis::{RedisStock, SaleKeys};
use seckill_shared::clock;
use seckill_shared::domain::Sale;
use seckill_shared::ports::StockReading;
use seckill_shared::ports::StoreError;
use seckill_tests::tls::{
    CLUSTER_HOSTNAME, TlsCluster, assert_hidden, encode, server_password, with_trusted_ca,
};
use seckill_tests::{App, Reply, live_sale, purchase_event};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

const GET_ORDER_EVENT: &str = include_str!("../events/orders-get.json");
const SCHEDULE_EVENT: &str = include_str!("../events/schedule-prewarm.json");

/// The AUTH password: [`server_password`]'s `: @ / #` and the characters
/// that split a URL's query (`? & =`) and a seed list (`,`), and `%` and `+`.
fn cluster_password() -> String {
    format!("{}?,%&=+", server_password())
}

/// A plain connection to one node (no cluster routing), for what the
/// cluster says about itself.
async fn node(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// `CLUSTER SLOTS` as (first slot, last slot, master's endpoint, port).
async fn slots(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(i64, i64, String, u16)> {
    let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(conn)
        .await
        .unwrap();
    ranges
        .into_iter()
        .map(|range| {
            let redis::Value::Array(parts) = range else {
                panic!("slot range {range:?}")
            };
            let start: i64 = redis::from_redis_value(parts[0].clone()).unwrap();
            let end: i64 = redis::from_redis_value(parts[1].clone()).unwrap();
            let redis::Value::Array(master) = parts[2].clone() else {
                panic!("master {parts:?}")
            };
            let host: String = redis::from_redis_value(master[0].clone()).unwrap();
            let port: u16 = redis::from_redis_value(master[1].clone()).unwrap();
            (start, end, host, port)
        })
        .collect()
}

/// The master (by port) serving each key.
async fn masters_of(conn: &mut redis::aio::MultiplexedConnection, keys: &[String]) -> Vec<u16> {
    let map = slots(conn).await;
    let mut out = Vec::new();
    for key in keys {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap();
        let (.., port) = map
            .iter()
            .find(|(start, end, ..)| (*start..=*end).contains(&slot))
            .unwrap();
        out.push(*port);
    }
    out
}

/// A sale of `shards` shards whose key groups sit on all three masters (a
/// sale id's slots follow from its name; the test must not depend on luck).
async fn spread_sale(
    conn: &mut redis::aio::MultiplexedConnection,
    stock: u32,
    limit: u32,
    shards: u32,
) -> Sale {
    for _ in 0..100 {
        let mut sale = live_sale(stock, limit);
        sale.shards = shards;
        let keys: Vec<String> = (0..shards)
            .map(|k| SaleKeys::shard(&sale.sale_id, k).stock)
            .collect();
        let masters: BTreeSet<u16> = masters_of(conn, &keys).await.into_iter().collect();
        if masters.len() == 3 {
            return sale;
        }
    }
    panic!("no sale id spread over three masters in 100 tries");
}

/// `GET /orders/{orderId}` as `user`, through the orders-api handler.
async fn get_order(queries: &orders_api::LiveQueries, order_id: &str, user: &str) -> Reply {
    let mut event: serde_json::Value = serde_json::from_str(GET_ORDER_EVENT).unwrap();
    event["pathParameters"]["orderId"] = order_id.into();
    event["rawPath"] = format!("/orders/{order_id}").into();
    event["requestContext"]["http"]["path"] = format!("/orders/{order_id}").into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = user.into();
    let req = lambda_http::request::from_str(&event.to_string()).unwrap();
    Reply::from(orders_api::handler::handle(queries, req).await.unwrap())
}

async fn buy(app: &App, sale: &str, user: &str) -> Reply {
    Reply::from(
        purchase::handler::handle(&app.service, purchase_event(sale, Some(user), "", &[]))
            .await
            .unwrap(),
    )
}

#[test]
fn a_sharded_sale_sells_exactly_through_a_tls_cluster_with_auth() {
    with_trusted_ca(
        "cluster_tls::a_sharded_sale_sells_exactly_through_a_tls_cluster_with_auth",
        |ca| async move {
            let password = cluster_password();
            // ElastiCache's create mode: 3 shards, 1 replica each (the
            // replicas prove replication over TLS with `masterauth`).
            let cluster = TlsCluster::start(&ca, &password, 3, 1).await;
            let pw = encode(&password);
            let seed = cluster.ports[0];
            let url = format!("rediss://:{pw}@{CLUSTER_HOSTNAME}:{seed}?cluster=true");

            // The cluster is shaped as intended: TLS only, noeviction, and
            // every master announced by hostname.
            let mut direct = node(&format!("rediss://:{pw}@{CLUSTER_HOSTNAME}:{seed}")).await;
            let config: HashMap<String, String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("*")
                .query_async(&mut direct)
                .await
                .unwrap();
            for (name, value) in [
                ("port", "0"),
                ("tls-cluster", "yes"),
                ("tls-replication", "yes"),
                ("maxmemory-policy", "noeviction"),
                ("cluster-preferred-endpoint-type", "hostname"),
            ] {
                assert_eq!(config.get(name).map(String::as_str), Some(value), "{name}");
            }
            let map = slots(&mut direct).await;
            assert_eq!(map.len(), 3, "{map:?}");
            assert!(
                map.iter().all(|(.., host, _)| host == CLUSTER_HOSTNAME),
                "{map:?}"
            );

            let app = App::spawn_with(|c| c.redis_url = url.clone()).await;
            let (stock, limit, shards) = (60, 2, 6);
            let sale = spread_sale(&mut direct, stock, limit, shards).await;
            let id = sale.sale_id.as_str().to_owned();
            assert!(app.catalog.create_sale(&sale).await.unwrap());
            let store = RedisStock::connect_lazy(&url, Duration::from_secs(2)).unwrap();
            assert!(store.snapshot(&sale.sale_id).await.unwrap().is_none());

            // Loaded by the scheduled prewarm, through the cluster.
            let prewarm = prewarm::wire(&app.config).await.unwrap();
            let tick = lambda_runtime::LambdaEvent::new(
                serde_json::from_str(SCHEDULE_EVENT).unwrap(),
                lambda_runtime::Context::default(),
            );
            let done = prewarm::handler::handle(&prewarm, tick).await.unwrap();
            assert_eq!(
                done["sales"],
                serde_json::json!([{"saleId": id, "outcome": "LOADED", "stock": stock, "buyers": 0}]),
            );
            let loaded = store.snapshot(&sale.sale_id).await.unwrap().unwrap();
            assert_eq!(
                (loaded.shards, loaded.stock, loaded.total),
                (shards, i64::from(stock), i64::from(stock))
            );

            // The per-user limit, one buyer at a time: the third is refused
            // and names the two orders the buyer holds.
            let queries = orders_api::wire(&app.config).await.unwrap();
            let mut accepted: Vec<(String, String)> = Vec::new();
            for _ in 0..2 {
                let r = buy(&app, &id, "limit-buyer").await;
                assert_eq!(r.status, 202, "{:?}", r.body);
                accepted.push((
                    r.body["orderId"].as_str().unwrap().to_owned(),
                    "limit-buyer".into(),
                ));
            }
            let r = buy(&app, &id, "limit-buyer").await;
            assert_eq!(
                (r.status, r.code()),
                (409, "LIMIT_EXCEEDED"),
                "{:?}",
                r.body
            );
            let named: BTreeSet<&str> = r.body["orderIds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap())
                .collect();
            assert_eq!(
                named,
                accepted.iter().map(|(o, _)| o.as_str()).collect(),
                "{:?}",
                r.body
            );
            // Readable by its buyer while only Redis knows it, and by no one else.
            let first = &accepted[0].0;
            let r = get_order(&queries, first, "limit-buyer").await;
            assert_eq!(
                (r.status, r.body["status"].as_str()),
                (200, Some("QUEUED")),
                "{:?}",
                r.body
            );
            let r = get_order(&queries, first, "someone-else").await;
            assert_eq!((r.status, r.code()), (404, "ORDER_NOT_FOUND"));

            // The rush: 40 buyers, each clicking three times at once, for
            // the 58 units left. Every purchase is its own task.
            let tasks: Vec<_> = (0..40)
                .flat_map(|n| std::iter::repeat_n(format!("rush-{n}"), 3))
                .map(|user| {
                    let service = app.service.clone();
                    let event = purchase_event(&id, Some(&user), "", &[]);
                    tokio::spawn(async move {
                        let reply =
                            Reply::from(purchase::handler::handle(&service, event).await.unwrap());
                        (user, reply)
                    })
                })
                .collect();
            let mut refused: BTreeMap<String, usize> = BTreeMap::new();
            for task in tasks {
                let (user, r) = task.await.unwrap();
                if r.status == 202 {
                    accepted.push((r.body["orderId"].as_str().unwrap().to_owned(), user));
                } else {
                    *refused
                        .entry(format!("{} {}", r.status, r.code()))
                        .or_default() += 1;
                }
            }
            // A rush can end with a unit left on a shard whose buyers were
            // all answered in the moment the sale looked sold out (a unit
            // still moving between shards, then the other shards marked dry
            // and the environment's sold-out flag, each for a moment): the
            // design's brief undersell. Late buyers, one at a time, take what
            // is left until the store holds no unit, so a refusal that only
            // a mark or the flag gave does not end the sale early, and a unit
            // really lost fails the count below.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let mut every = tokio::time::interval(Duration::from_millis(20));
            for late in 0.. {
                every.tick().await;
                let user = format!("straggler-{late}");
                let r = buy(&app, &id, &user).await;
                if r.status == 202 {
                    accepted.push((r.body["orderId"].as_str().unwrap().to_owned(), user));
                    continue;
                }
                assert_eq!((r.status, r.code()), (410, "SOLD_OUT"), "{:?}", r.body);
                let left = store.snapshot(&sale.sale_id).await.unwrap().unwrap();
                if left.stock == 0 || std::time::Instant::now() >= deadline {
                    break;
                }
            }
            assert_eq!(
                accepted.len(),
                stock as usize,
                "exactly the stock: {refused:?}"
            );
            assert!(
                refused
                    .keys()
                    .all(|k| k == "410 SOLD_OUT" || k == "409 LIMIT_EXCEEDED"),
                "{refused:?}"
            );
            let mut per_user: BTreeMap<&str, u32> = BTreeMap::new();
            for (_, user) in &accepted {
                *per_user.entry(user).or_default() += 1;
            }
            assert!(per_user.values().all(|&n| n <= limit), "{per_user:?}");
            let r = buy(&app, &id, "late-buyer").await;
            assert_eq!((r.status, r.code()), (410, "SOLD_OUT"), "{:?}", r.body);

            // The order-writer writes every accepted order, and nothing else.
            app.write_queued_orders().await;
            let orders = app.orders().await;
            let expected: BTreeSet<&str> = accepted.iter().map(|(o, _)| o.as_str()).collect();
            assert_eq!(
                orders.keys().map(String::as_str).collect::<BTreeSet<_>>(),
                expected
            );
            for (order_id, user) in &accepted {
                let order = &orders[order_id];
                assert_eq!(order.user_id.as_str(), user);
                assert_eq!(order.sale_id, sale.sale_id);
                assert_eq!(order.quantity.get(), 1);
            }
            assert_eq!(app.sale_counters(&id).await, (0, i64::from(stock)));
            // Each buyer reads their order's status, now from DynamoDB.
            for (order_id, user) in &accepted {
                let r = get_order(&queries, order_id, user).await;
                assert_eq!(
                    (r.status, r.body["status"].as_str()),
                    (200, Some("PENDING_PAYMENT")),
                    "{order_id}: {:?}",
                    r.body
                );
            }

            // Redis agrees, on every shard, and reconcile finds nothing.
            let after = store.snapshot(&sale.sale_id).await.unwrap().unwrap();
            assert_eq!(after.stock, 0);
            assert_eq!(after.reservations.len(), stock as usize);
            assert!(
                after.reservations.values().all(|r| r.state == "WRITTEN"),
                "{:?}",
                after.reservations
            );
            assert_eq!(after.buyers.values().sum::<i64>(), i64::from(stock));
            let report = reconcile::wire(&app.config)
                .await
                .unwrap()
                .reconcile_sale(&sale.sale_id, clock::now_ms())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(report.violations, vec![], "{report:?}");
            assert_eq!((report.sold, report.available), (i64::from(stock), 0));
            let masters: BTreeSet<u16> = masters_of(
                &mut direct,
                &(0..shards)
                    .map(|k| SaleKeys::shard(&sale.sale_id, k).stock)
                    .collect::<Vec<_>>(),
            )
            .await
            .into_iter()
            .collect();
            println!(
                "TLS cluster (3 masters + 3 replicas, AUTH, hostnames): {stock} of {} \
                 sold over {shards} shards on masters {masters:?}, {} orders written, \
                 reconcile clean",
                40 * 3 + 3,
                orders.len()
            );
        },
    );
}

#[test]
fn the_tls_cluster_refuses_a_wrong_password_and_names_its_certificate_lacks() {
    with_trusted_ca(
        "cluster_tls::the_tls_cluster_refuses_a_wrong_password_and_names_its_certificate_lacks",
        |ca| async move {
            let password = cluster_password();
            let cluster = TlsCluster::start(&ca, &password, 3, 0).await;
            let (pw, seed) = (encode(&password), cluster.ports[0]);
            let sale = live_sale(1, 1).sale_id;
            let timeout = Duration::from_millis(500);

            // A wrong password: a clear error that shows neither password.
            let wrong = format!("wrong:p@ss/{}", cluster_password());
            let url = format!(
                "rediss://:{}@{CLUSTER_HOSTNAME}:{seed}?cluster=true",
                encode(&wrong)
            );
            let err = RedisStock::connect_lazy(&url, timeout)
                .unwrap()
                .snapshot(&sale)
                .await
                .err()
                .unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
            let shown = format!("{err} {err:?}");
            assert!(shown.to_lowercase().contains("auth"), "{shown}");
            assert_hidden(&shown, &[&wrong, &password], "the error");

            // The certificate names the hostname only: a seed given by IP
            // fails verification, as it would against ElastiCache.
            let url = format!("rediss://:{pw}@127.0.0.1:{seed}?cluster=true");
            let err = RedisStock::connect_lazy(&url, timeout)
                .unwrap()
                .snapshot(&sale)
                .await
                .err()
                .unwrap();
            let shown = format!("{err} {err:?}");
            assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
            assert!(shown.to_lowercase().contains("cert"), "{shown}");
            assert_hidden(&shown, &[&password], "the error");

            // Several seeds, the first one down: the next one serves, with
            // the scheme and password of the URL.
            let down = seckill_tests::tls::free_cluster_port();
            let url = format!(
                "rediss://:{pw}@{CLUSTER_HOSTNAME}:{down},{CLUSTER_HOSTNAME}:{}?cluster=true",
                cluster.ports[1]
            );
            let store = RedisStock::connect_lazy(&url, Duration::from_secs(2)).unwrap();
            assert!(store.snapshot(&sale).await.unwrap().is_none());

            // Every node the cluster names is verified, not only the seed:
            // announced by IP, which their certificate does not hold, the
            // masters are refused, and that is an outage like any other.
            for &port in &cluster.ports {
                let out = cluster.cli(
                    port,
                    &["config", "set", "cluster-preferred-endpoint-type", "ip"],
                );
                assert_eq!(out.trim(), "OK", "{out}");
            }
            let url = format!("rediss://:{pw}@{CLUSTER_HOSTNAME}:{seed}?cluster=true");
            let err = RedisStock::connect_lazy(&url, timeout)
                .unwrap()
                .snapshot(&sale)
                .await
                .err()
                .unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
            assert_hidden(&format!("{err} {err:?}"), &[&password], "the error");
        },
    );
}
