//! The connection: one lazily connecting node or cluster per execution
//! environment, the `REDIS_URL` rules (TLS verified, seeds of a cluster),
//! EVALSHA with its `NOSCRIPT` fallback, and what a Redis error means.

use super::RedisStock;
use super::scripts::{ScriptCall, limit_args};
use crate::config::RateLimits;
use crate::ports::StoreError;
use redis::RedisError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;

/// One connection to a single node, or to a cluster.
#[derive(Clone)]
pub(super) enum Conn {
    /// Reconnects by itself; lazy, so a function starts while Redis is down.
    Single(ConnectionManager),
    Cluster(std::sync::Arc<LazyCluster>),
}

/// The cluster connection is made on first use (the crate connects eagerly),
/// and again after a failed attempt.
pub(super) struct LazyCluster {
    client: redis::cluster::ClusterClient,
    conn: tokio::sync::OnceCell<redis::cluster_async::ClusterConnection>,
}

/// A connection ready for a command, whichever kind.
pub(super) enum Ready {
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Conn {
    pub(super) async fn get(&self) -> Result<Ready, RedisError> {
        match self {
            Conn::Single(conn) => Ok(Ready::Single(conn.clone())),
            Conn::Cluster(lazy) => lazy
                .conn
                .get_or_try_init(|| lazy.client.get_async_connection())
                .await
                .map(|conn| Ready::Cluster(conn.clone())),
        }
    }
}

impl redis::aio::ConnectionLike for Ready {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Ready::Single(conn) => conn.req_packed_command(cmd),
            Ready::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Ready::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Ready::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Ready::Single(conn) => conn.get_db(),
            Ready::Cluster(conn) => conn.get_db(),
        }
    }
}

impl RedisStock {
    /// Builds a lazily connecting, auto-reconnecting multiplexed connection:
    /// one per execution environment, shared by all requests. Lazy so a
    /// function starts (and answers 503) even while Redis is down.
    ///
    /// `url` is `redis://[[user]:password@]host:port` or, for TLS (ElastiCache
    /// in-transit encryption), `rediss://...`; see `client`. With
    /// `?cluster=true` it names one node (or ElastiCache's configuration
    /// endpoint) of a Redis Cluster, and the store routes every script to the
    /// master of its keys' slot (cluster-async: one multiplexed connection
    /// per master, made on first use).
    pub fn connect_lazy(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let conn = match cluster_seed(url) {
            Some(seeds) => {
                let nodes = seeds
                    .iter()
                    .map(|node| client(node).map(|c| c.get_connection_info().clone()))
                    .collect::<Result<Vec<_>, _>>()?;
                let cluster = redis::cluster::ClusterClientBuilder::new(nodes)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(1)
                    .build()
                    .map_err(|err| {
                        StoreError::Unavailable(format!("REDIS_URL names no usable cluster: {err}"))
                    })?;
                Conn::Cluster(std::sync::Arc::new(LazyCluster {
                    client: cluster,
                    conn: tokio::sync::OnceCell::new(),
                }))
            }
            None => {
                let client = client(url)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(100));
                Conn::Single(
                    ConnectionManager::new_lazy_with_config(client, config).map_err(unavailable)?,
                )
            }
        };
        Ok(Self {
            conn,
            timeout,
            limit_args: limit_args(RateLimits::default()),
            limiter_failures: std::sync::Arc::default(),
            keys: std::sync::Arc::default(),
            dry: std::sync::Arc::default(),
            keyed: std::sync::Arc::default(),
            keyed_read: std::sync::Arc::default(),
        })
    }

    /// The same store with other rate-limit defaults.
    pub fn with_rate_limits(mut self, limits: RateLimits) -> Self {
        self.limit_args = limit_args(limits);
        self
    }

    /// Runs one script call (EVALSHA); on NOSCRIPT (a restart, `SCRIPT
    /// FLUSH`) the script is loaded and the call made again, once.
    pub(super) async fn run<T: redis::FromRedisValue, C: ScriptCall>(
        &self,
        call: &C,
    ) -> Result<T, StoreError> {
        let cmd = call.command();
        let script = C::script();
        // The connection has its own response timeout; this outer bound also
        // covers reconnect attempts, so a purchase never waits past it twice.
        let attempt = async {
            let mut conn = self.conn.get().await?;
            match cmd.query_async(&mut conn).await {
                Err(err)
                    if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    script.load_async(&mut conn).await?;
                    cmd.query_async(&mut conn).await
                }
                reply => reply,
            }
        };
        self.bounded(attempt).await
    }

    /// Any call on the connection (a command, a pipeline, a script) within
    /// the outer bound of a script call: twice the response timeout, which
    /// also covers reconnect attempts. Redis's errors and the bound's both
    /// become [`StoreError::Unavailable`].
    pub(super) async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout * 2, call).await {
            Ok(reply) => reply.map_err(unavailable),
            Err(_) => Err(StoreError::Unavailable("timed out".into())),
        }
    }
}

/// The client for `REDIS_URL`, refused at cold start rather than at the first
/// purchase when it cannot be right.
///
/// `rediss://` verifies the server's certificate chain and name with rustls
/// against the system's roots (rustls-native-certs: the OS store, or only
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` when set). ElastiCache certificates chain
/// to Amazon's public roots, so no CA setting is needed in AWS. `#insecure`
/// (no verification) is refused: it would let anyone on the path read the
/// AUTH password. The errors never carry the URL, which may hold that password.
pub(super) fn client(url: &str) -> Result<redis::Client, StoreError> {
    let client = redis::Client::open(url).map_err(|err| {
        // redis-rs describes what is wrong ("Redis URL did not parse",
        // "Missing hostname"), never the URL itself.
        StoreError::Unavailable(format!("REDIS_URL is not a usable Redis URL: {err}"))
    })?;
    if let redis::ConnectionAddr::TcpTls { insecure: true, .. } =
        client.get_connection_info().addr()
    {
        return Err(StoreError::Unavailable(
            "REDIS_URL asks for TLS without certificate verification (#insecure); refused".into(),
        ));
    }
    Ok(client)
}

/// The seed nodes of a `?cluster=true` URL, one URL each, or `None` for a
/// single node. `scheme://[user:password@]host:port,host:port[/db][?query][#fragment]`
/// names several seeds (any one answering is enough); each gets the scheme,
/// credentials, database, query (without the flag) and fragment of the URL,
/// so a `#insecure` or a bad host is refused for each. A password's `@` `,`
/// `?` `#` are percent-encoded, so they split nothing here.
pub(super) fn cluster_seed(url: &str) -> Option<Vec<String>> {
    let (rest, fragment) = match url.split_once('#') {
        Some((rest, fragment)) => (rest, format!("#{fragment}")),
        None => (url, String::new()),
    };
    let (base, query) = rest.split_once('?')?;
    let mut cluster = false;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let is_flag = *pair == "cluster=true";
            cluster |= is_flag;
            !is_flag && !pair.is_empty()
        })
        .collect();
    if !cluster {
        return None;
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    // Without a scheme the URL is not one: left whole for `client` to refuse.
    let Some((scheme, authority_path)) = base.split_once("://") else {
        return Some(vec![format!("{base}{query}{fragment}")]);
    };
    // The last `@` ends the credentials, as URL parsers read it.
    let (userinfo, hosts_path) = match authority_path.rsplit_once('@') {
        Some((userinfo, hosts_path)) => (format!("{userinfo}@"), hosts_path),
        None => (String::new(), authority_path),
    };
    let (hosts, path) = hosts_path.split_at(hosts_path.find('/').unwrap_or(hosts_path.len()));
    Some(
        hosts
            .split(',')
            .map(|host| format!("{scheme}://{userinfo}{host}{path}{query}{fragment}"))
            .collect(),
    )
}

/// Redis out of reach (refused, dropped, timed out, TLS handshake refused,
/// credentials refused) is `Unavailable`; Redis answering with an error (a
/// wrong type, a script error) is `Protocol`. The difference decides whether
/// the rate limiter may fail open. A refused AUTH is "out of reach": no
/// command ran, and the fix is the deployment's, not the sale's. Its message
/// is redis-rs's ("Password authentication failed") or the server's
/// (`WRONGPASS ...`, `NOAUTH ...`), neither of which repeats the password.
pub(super) fn unavailable(err: RedisError) -> StoreError {
    if err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.kind() == redis::ErrorKind::AuthenticationFailed
        // The cluster client found no connection to the slot's master: it
        // is down, or its certificate was refused. An outage, not a reply.
        || err.kind() == redis::ErrorKind::ClusterConnectionNotFound
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
    {
        StoreError::Unavailable(err.to_string())
    } else {
        StoreError::Protocol(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ConnectionAddr;

    #[test]
    fn auth_and_tls_urls_parse_with_their_credentials() {
        let tls = client("rediss://default:p%40ss%3Aw0rd@cache.example:6380").unwrap();
        let info = tls.get_connection_info();
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls { host, port: 6380, insecure: false, .. } if host == "cache.example"
        ));
        assert_eq!(info.redis_settings().username(), Some("default"));
        assert_eq!(info.redis_settings().password(), Some("p@ss:w0rd"));

        let plain = client("redis://:hunter2@127.0.0.1:6379").unwrap();
        let info = plain.get_connection_info();
        assert!(matches!(info.addr(), ConnectionAddr::Tcp(host, 6379) if host == "127.0.0.1"));
        assert_eq!(info.redis_settings().username(), None);
        assert_eq!(info.redis_settings().password(), Some("hunter2"));
    }

    #[test]
    fn refuses_unverified_tls_and_never_echoes_the_url() {
        for url in [
            "rediss://default:hunter2@cache.example:6379/#insecure",
            "https://default:hunter2@cache.example:6379",
            "rediss://default:hunter2@:6379",
            "rediss://default:hunter2@cache.example:6379/notadb",
        ] {
            let err = client(url).err().unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("REDIS_URL"), "{shown}");
        }
    }

    #[test]
    fn the_cluster_flag_is_read_and_removed_from_the_url() {
        assert_eq!(cluster_seed("redis://h:1"), None);
        assert_eq!(cluster_seed("redis://h:1?protocol=resp3"), None);
        assert_eq!(
            cluster_seed("rediss://:pw@h:1?cluster=true"),
            Some(vec!["rediss://:pw@h:1".to_owned()])
        );
        assert_eq!(
            cluster_seed("redis://h:1?protocol=resp3&cluster=true"),
            Some(vec!["redis://h:1?protocol=resp3".to_owned()])
        );
    }

    #[test]
    fn every_seed_node_gets_the_scheme_credentials_and_options_of_the_url() {
        assert_eq!(
            cluster_seed("rediss://default:p%40ss@a:1,b:2,[::1]:3?cluster=true"),
            Some(vec![
                "rediss://default:p%40ss@a:1".to_owned(),
                "rediss://default:p%40ss@b:2".to_owned(),
                "rediss://default:p%40ss@[::1]:3".to_owned(),
            ])
        );
        assert_eq!(
            cluster_seed("redis://a:1,b:2/0?protocol=resp3&cluster=true"),
            Some(vec![
                "redis://a:1/0?protocol=resp3".to_owned(),
                "redis://b:2/0?protocol=resp3".to_owned(),
            ])
        );
        // Each node parses, with the password decoded: an encoded `,` `?`
        // `@` `#` in it splits nothing.
        let seeds = cluster_seed("rediss://:a%2Cb%3Fc%40d%23e@a:1,b:2?cluster=true").unwrap();
        assert_eq!(seeds.len(), 2);
        for (seed, host) in seeds.iter().zip(["a", "b"]) {
            let info = client(seed).unwrap().get_connection_info().clone();
            assert!(
                matches!(info.addr(), ConnectionAddr::TcpTls { host: h, insecure: false, .. } if h == host),
                "{seed}"
            );
            assert_eq!(info.redis_settings().password(), Some("a,b?c@d#e"));
        }
    }

    #[test]
    fn a_seed_list_cannot_turn_verification_off_or_hide_a_bad_node() {
        // The fragment is every node's: `#insecure` is refused for each.
        let seeds = cluster_seed("rediss://:hunter2@a:1,b:2?cluster=true#insecure").unwrap();
        assert_eq!(seeds.len(), 2);
        for seed in &seeds {
            let err = client(seed).err().unwrap();
            assert!(!format!("{err} {err:?}").contains("hunter2"));
        }
        for url in [
            "rediss://:hunter2@a:1,b:2?cluster=true#insecure",
            "rediss://:hunter2@a:1,?cluster=true",
            "rediss://:hunter2@a:1,b:notaport?cluster=true",
        ] {
            let err = RedisStock::connect_lazy(url, Duration::from_millis(100))
                .err()
                .unwrap();
            assert!(matches!(err, StoreError::Unavailable(_)), "{url}: {err:?}");
            let shown = format!("{err} {err:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("REDIS_URL"), "{shown}");
        }
    }

    #[test]
    fn a_cluster_with_no_reachable_node_is_unavailable() {
        // What the cluster client says when no connection to a slot's
        // master could be made (down, or its certificate refused).
        let err = RedisError::from((
            redis::ErrorKind::ClusterConnectionNotFound,
            "No connections found",
        ));
        assert!(matches!(unavailable(err), StoreError::Unavailable(_)));
        let err = RedisError::from((redis::ErrorKind::UnexpectedReturnType, "odd"));
        assert!(matches!(unavailable(err), StoreError::Protocol(_)));
    }
}
