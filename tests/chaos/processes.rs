//! The processes a scenario breaks: a `redis-server`, a `moto_server` and
//! a TCP proxy of its own, on free loopback ports; and `INFO replication`.
//! (The `redis-server` is the test support's one starter, [`RedisServer`].)

use super::*;

/// A `redis-server` of the scenario's own ([`RedisServer`]: its own
/// directory, so a restart meant to be empty loads no snapshot another
/// node left), so it can be killed, restarted on the same port, promoted.
pub(crate) struct OwnRedis {
    pub(crate) port: u16,
    server: RedisServer,
}

impl OwnRedis {
    pub(crate) async fn start() -> OwnRedis {
        Self::start_with(&[]).await
    }

    /// With extra `redis-server` arguments (a replica's `--replicaof`),
    /// kept for a restart.
    pub(crate) async fn start_with(args: &[&str]) -> OwnRedis {
        let server = RedisServer::builder().args(args).spawn().await;
        OwnRedis {
            port: server.port(),
            server,
        }
    }
}

impl std::ops::Deref for OwnRedis {
    type Target = RedisServer;

    fn deref(&self) -> &RedisServer {
        &self.server
    }
}

impl std::ops::DerefMut for OwnRedis {
    fn deref_mut(&mut self) -> &mut RedisServer {
        &mut self.server
    }
}

/// A `moto_server` of the scenario's own, so it can be stopped.
pub(crate) struct OwnMoto {
    pub(crate) port: u16,
    pub(crate) child: tokio::process::Child,
}

impl OwnMoto {
    pub(crate) async fn start() -> OwnMoto {
        Self::start_with(false).await
    }

    /// With `item_undo`, moto through `infra/moto/server.py` (see
    /// [`spawn_moto`]): a long run's tables stay fast to write.
    pub(crate) async fn start_with(item_undo: bool) -> OwnMoto {
        let (child, url) = spawn_moto(item_undo).await;
        let port = url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap();
        OwnMoto { port, child }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGSTOP / SIGCONT: the process freezes with its state; connections
    /// are accepted by the kernel and never answered.
    pub(crate) fn signal(&self, name: &str) {
        let pid = self.child.id().expect("moto_server is running");
        let ok = std::process::Command::new("kill")
            .args([name, &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {name}");
    }
}

impl Drop for OwnMoto {
    fn drop(&mut self) {
        // A stopped process is let go first; the child is killed on drop.
        if self.child.id().is_some() {
            self.signal("-CONT");
        }
        let _ = self.child.start_kill();
    }
}

/// A TCP forwarder the scenario can take down (connections refused, as when
/// the server process is gone) and bring back on the same port.
pub(crate) struct Proxy {
    pub(crate) port: u16,
    pub(crate) upstream: u16,
    pub(crate) task: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    pub(crate) async fn start(upstream: u16) -> Proxy {
        Self::start_on(free_port_to_keep(), upstream).await
    }

    /// On a port chosen by the caller (one already handed to a process
    /// that will connect to it).
    pub(crate) async fn start_on(port: u16, upstream: u16) -> Proxy {
        let mut proxy = Proxy {
            port,
            upstream,
            task: None,
        };
        proxy.up().await;
        proxy
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Points the proxy at another server, as a failover moves the primary
    /// endpoint: every forwarded connection is closed, new ones reach
    /// `upstream`.
    pub(crate) async fn switch_to(&mut self, upstream: u16) {
        self.down().await;
        self.upstream = upstream;
        self.up().await;
    }

    pub(crate) async fn up(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap_or_else(|e| panic!("a proxy on port {}: {e}", self.port));
        let upstream = self.upstream;
        self.task = Some(tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                conns.spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
    }

    /// A partition: connections are accepted and read, nothing is
    /// forwarded, nothing answered. A request sent now never arrives.
    pub(crate) async fn blackhole(&mut self) {
        self.down().await;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        self.task = Some(tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                conns.spawn(async move {
                    let _ = tokio::io::copy(&mut inbound, &mut tokio::io::sink()).await;
                });
            }
        }));
    }

    /// Closes the listener and every forwarded connection.
    pub(crate) async fn down(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

/// `INFO replication` of one server.
pub(crate) async fn replication(conn: &mut redis::aio::MultiplexedConnection) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await
        .unwrap_or_default()
}

pub(crate) fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// A master and its replica, as a managed Redis with failover runs them:
/// the replication link goes through a proxy (`link`) so it can be cut, and
/// the application reaches Redis through another (`primary`, its "primary
/// endpoint"), which the failover points at the promoted replica.
pub(crate) struct Replicated {
    pub(crate) master: OwnRedis,
    pub(crate) link: Proxy,
    pub(crate) replica: OwnRedis,
    pub(crate) primary: Proxy,
}

impl Replicated {
    pub(crate) async fn start() -> Replicated {
        // The master sends its first full sync at once, through no file.
        let master = OwnRedis::start_with(&[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ])
        .await;
        let link = Proxy::start(master.port).await;
        let link_port = link.port.to_string();
        let replica = OwnRedis::start_with(&[
            "--replicaof",
            "127.0.0.1",
            &link_port,
            "--repl-diskless-load",
            "on-empty-db",
        ])
        .await;
        let primary = Proxy::start(master.port).await;
        Replicated {
            master,
            link,
            replica,
            primary,
        }
    }

    /// Whether the replica follows and has every write the master had when
    /// asked (its offset reached the master's), within 30 s.
    pub(crate) async fn caught_up(&self) -> bool {
        let (to_master, to_replica) = (self.master.conn().await, self.replica.conn().await);
        eventually(Duration::from_secs(30), || {
            let (mut m, mut r) = (to_master.clone(), to_replica.clone());
            async move {
                let m = replication(&mut m).await;
                let r = replication(&mut r).await;
                field(&r, "master_link_status") == Some("up")
                    && field(&r, "master_repl_offset")
                        .and_then(|o| o.parse::<u64>().ok())
                        .zip(field(&m, "master_repl_offset").and_then(|o| o.parse().ok()))
                        .is_some_and(|(replica, master)| replica >= master)
            }
        })
        .await
    }

    /// The failover: the replica promoted, the primary endpoint moved to
    /// it, the master dead with whatever the replica never received.
    pub(crate) async fn fail_over(&mut self) {
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut self.replica.conn().await)
            .await
            .unwrap();
        self.primary.switch_to(self.replica.port).await;
        self.master.kill();
        self.link.down().await;
    }
}
