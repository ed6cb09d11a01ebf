//! Reconcile over a big sale never stalls it: every Redis command it sends
//! does a bounded amount of work, whatever the number of buyers and
//! reservations, and it still finds (and repairs) what is wrong.
//!
//! The sale is planted directly in a `redis-server` of this test's own
//! (pipelined `HSET`s, not purchases: 200,000 buyers, each holding one
//! `QUEUED` reservation that is young enough not to be relayed), so the
//! server's `SLOWLOG` (threshold 0: every command) holds this test's
//! commands only. The proof is the slowest command reconcile sent: one
//! script reading the whole sale takes about as long as the sale is big;
//! a chunked read, about as long as a chunk.

use redis::AsyncCommands;
use seckill_shared::clock;
use seckill_shared::reconcile::{ReconcileReport, ReconcileSettings};
use seckill_shared::redis_store::SaleKeys;
use seckill_tests::{App, eventually, free_port, live_sale};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Buyers (and reservations) of the planted sale.
const BUYERS: u32 = 200_000;

/// The slowest single command reconcile may send. A read of a chunk of
/// entries takes well under a millisecond on this machine; reading 200,000
/// buyers and their reservations in one script took 190-250 ms (the figure
/// this test printed on the one-script read). The bound leaves room for a
/// busy machine, not for a read whose work grows with the sale.
const SLOWEST_ALLOWED: Duration = Duration::from_millis(25);

/// A `redis-server` of this test's own, killed on drop.
struct OwnRedis {
    child: Child,
    url: String,
}

impl OwnRedis {
    async fn start() -> OwnRedis {
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--maxmemory-policy", "noeviction"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is on PATH");
            let url = format!("redis://127.0.0.1:{port}");
            let up = eventually(Duration::from_secs(10), || {
                let url = url.clone();
                async move {
                    let Ok(client) = redis::Client::open(url.as_str()) else {
                        return false;
                    };
                    match client.get_multiplexed_async_connection().await {
                        Ok(mut conn) => redis::cmd("PING")
                            .query_async::<String>(&mut conn)
                            .await
                            .is_ok(),
                        Err(_) => false,
                    }
                }
            })
            .await;
            if up {
                return OwnRedis { child, url };
            }
            // The port was taken in the meantime: another one.
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start");
    }

    async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn user(n: u32) -> String {
    format!("buyer{n}")
}

fn order(n: u32) -> String {
    // The shape of the purchase script's ids: `n` and 31 characters.
    format!("n{n:031x}")
}

/// Every buyer counted once with one young `QUEUED` reservation (in
/// `userorders` too, as the purchase script leaves it), and the stock less
/// what they hold: a consistent sale, planted in pipelined chunks.
async fn plant(conn: &mut redis::aio::MultiplexedConnection, keys: &SaleKeys, total: u32) {
    let at = clock::now_ms().to_string();
    let all: Vec<u32> = (0..BUYERS).collect();
    // 20,000 buyers a round trip: a pipeline of the whole sale would
    // outlast the connection's response timeout.
    for batch in all.chunks(20_000) {
        let mut pipe = redis::pipe();
        for chunk in batch.chunks(1_000) {
            let mut buyers = redis::cmd("HSET");
            let mut resv = redis::cmd("HSET");
            let mut listed = redis::cmd("HSET");
            buyers.arg(&keys.buyers);
            resv.arg(&keys.resv);
            listed.arg(&keys.user_orders);
            for &n in chunk {
                buyers.arg(user(n)).arg(1);
                let json = serde_json::json!({
                    "userId": user(n), "quantity": 1, "atMs": at, "state": "QUEUED",
                });
                resv.arg(order(n)).arg(json.to_string());
                listed.arg(user(n)).arg(order(n));
            }
            pipe.add_command(buyers).ignore();
            pipe.add_command(resv).ignore();
            pipe.add_command(listed).ignore();
        }
        let () = pipe.query_async(conn).await.unwrap();
    }
    let () = conn.set(&keys.stock, total - BUYERS).await.unwrap();
}

/// One entry of `SLOWLOG GET`: how long it took (µs) and what it was.
struct Logged {
    micros: i64,
    args: Vec<String>,
}

async fn slowlog(conn: &mut redis::aio::MultiplexedConnection) -> Vec<Logged> {
    let raw: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap();
    raw.into_iter()
        .map(|entry| {
            let redis::Value::Array(fields) = entry else {
                panic!("slowlog entry {entry:?}");
            };
            let micros: i64 = redis::from_redis_value(fields[2].clone()).unwrap();
            let args: Vec<String> = redis::from_redis_value(fields[3].clone()).unwrap();
            Logged { micros, args }
        })
        .filter(|l| !matches!(l.args[0].to_uppercase().as_str(), "SLOWLOG" | "CONFIG"))
        .collect()
}

fn names(report: &ReconcileReport, code: &str) -> bool {
    report.violations.iter().any(|v| v.code == code)
}

fn repaired(report: &ReconcileReport, kind: &str) -> Vec<String> {
    report
        .repairs
        .iter()
        .filter(|r| r.kind == kind)
        .map(|r| r.detail.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_of_a_big_sale_sends_only_bounded_commands_and_still_repairs() {
    let redis = OwnRedis::start().await;
    let url = redis.url.clone();
    let app = App::spawn_with(|config| config.redis_url = url).await;
    let total = BUYERS + 100_000;
    let sale = live_sale(total, 2);
    app.open_sale(&sale).await;
    let keys = SaleKeys::new(&sale.sale_id);
    let mut conn = redis.conn().await;
    plant(&mut conn, &keys, total).await;
    let len: u32 = conn.hlen(&keys.resv).await.unwrap();
    assert_eq!(len, BUYERS);

    // Two things wrong: a buyer Redis forgot (the limit check could let
    // them buy again; reconcile raises the count to their reservation),
    // and seven units stuck out of the stock.
    let forgotten = user(7);
    let () = conn.hdel(&keys.buyers, &forgotten).await.unwrap();
    let () = conn.decr(&keys.stock, 7).await.unwrap();

    let reconciler = seckill_shared::reconcile::wire(&app.config, seckill_shared::aws::Caller::Tool)
        .await
        .unwrap()
        .with_settings(ReconcileSettings {
            grace: Duration::from_secs(600),
            max_age: Duration::from_secs(3_600),
            ..ReconcileSettings::default()
        });
    for (name, value) in [("slowlog-log-slower-than", "0"), ("slowlog-max-len", "1000000")] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(&mut conn)
        .await
        .unwrap();

    let started = std::time::Instant::now();
    let outcome = reconciler
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await;
    let took = started.elapsed();

    let mut logged = slowlog(&mut conn).await;
    logged.sort_by_key(|l| -l.micros);
    let slowest: Vec<String> = logged
        .iter()
        .take(3)
        .map(|l| {
            let shown: Vec<&str> = l.args.iter().take(4).map(String::as_str).collect();
            format!("{} µs {}", l.micros, shown.join(" "))
        })
        .collect();
    println!(
        "reconcile of {BUYERS} buyers and reservations: {:.1} s, {} Redis commands; slowest: {}",
        took.as_secs_f64(),
        logged.len(),
        slowest.join(" | ")
    );
    let report = outcome.unwrap().unwrap();
    println!("violations {:?}", report.violations);
    println!("repairs {:?}", report.repairs);

    // It read the whole sale...
    assert_eq!(
        report.reservations.get("QUEUED").copied(),
        Some(BUYERS as usize),
        "every reservation read"
    );
    // ...and found what was planted, and repaired it.
    assert!(names(&report, "STOCK_DRIFT"), "{:?}", report.violations);
    assert_eq!(
        repaired(&report, "BUYER_RAISED"),
        vec![format!("{forgotten}: 0 -> 1")]
    );
    assert_eq!(repaired(&report, "STOCK_RESET").len(), 1, "{:?}", report.repairs);
    let stock: i64 = conn.get(&keys.stock).await.unwrap();
    assert_eq!(stock, i64::from(total - BUYERS));
    let count: Option<i64> = conn.hget(&keys.buyers, &forgotten).await.unwrap();
    assert_eq!(count, Some(1));

    // No command it sent did work that grows with the sale.
    let worst = logged.first().map_or(0, |l| l.micros);
    assert!(
        Duration::from_micros(u64::try_from(worst).unwrap()) <= SLOWEST_ALLOWED,
        "a single command took {worst} µs: {}",
        slowest.join(" | ")
    );

    // Repaired, it reconciles clean.
    let again = reconciler
        .reconcile_sale(&sale.sale_id, clock::now_ms())
        .await
        .unwrap()
        .unwrap();
    assert!(again.violations.is_empty(), "{:?}", again.violations);
    assert!(again.repairs.is_empty(), "{:?}", again.repairs);
    assert!(again.counts_compared);
}
