//! A `redis-server` of a test's own (its `SLOWLOG` then holds that test's
//! commands only), and the slow log as a record of every command sent:
//! what the scale tests read to prove that no single command does work
//! that grows with the sale.

use crate::RedisServer;
use std::time::Duration;

/// A `redis-server` of this test's own, killed on drop.
pub struct OwnRedis {
    pub url: String,
    _server: RedisServer,
}

impl OwnRedis {
    pub async fn start() -> OwnRedis {
        let server = RedisServer::builder()
            .args(["--maxmemory-policy", "noeviction"])
            .spawn()
            .await;
        OwnRedis {
            url: server.url(),
            _server: server,
        }
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        patient(&self.url).await
    }
}

/// A connection for planting and reading the test's sale: redis-rs answers
/// "timed out" after 500 ms by default, and a pipelined chunk of 20,000
/// buyers takes longer than that on a loaded machine.
pub async fn patient(url: &str) -> redis::aio::MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(Duration::from_secs(60)))
        .set_connection_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// One entry of `SLOWLOG GET`: how long it took (µs) and what it was.
pub struct Logged {
    pub micros: i64,
    pub args: Vec<String>,
}

pub async fn slowlog(conn: &mut redis::aio::MultiplexedConnection) -> Vec<Logged> {
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

/// From now on the slow log keeps every command (threshold 0), up to a
/// million, starting empty.
pub async fn log_every_command(conn: &mut redis::aio::MultiplexedConnection) {
    for (name, value) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "1000000"),
    ] {
        let () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async(conn)
            .await
            .unwrap();
    }
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(conn)
        .await
        .unwrap();
}
