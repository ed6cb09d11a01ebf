//! The processes a scenario breaks: a `redis-server`, a `moto_server` and
//! a TCP proxy of its own, on free loopback ports; and `INFO replication`.

use super::*;

/// A `redis-server` of the scenario's own, so it can be killed and paused.
pub(crate) struct OwnRedis {
    pub(crate) port: u16,
    /// Extra `redis-server` arguments (a replica's `--replicaof`), kept for
    /// a restart.
    pub(crate) args: Vec<String>,
    /// Its working directory, its own: a node started in a shared one
    /// loads whatever `dump.rdb` another left there (a replica's full sync
    /// onto a non-empty dataset writes one), so a restart meant to be
    /// empty brought back another node's older data.
    pub(crate) dir: std::path::PathBuf,
    pub(crate) child: Option<std::process::Child>,
}

impl OwnRedis {
    pub(crate) async fn start() -> OwnRedis {
        Self::start_with(&[]).await
    }

    pub(crate) async fn start_with(args: &[&str]) -> OwnRedis {
        let dir = std::env::temp_dir().join(unique("redis-node"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut redis = OwnRedis {
            port: free_port_to_keep(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            dir,
            child: None,
        };
        redis.spawn().await;
        redis
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) async fn spawn(&mut self) {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            // A replica's full sync onto a non-empty dataset goes through a
            // file; it is deleted once loaded, as nothing else persists.
            .args(["--rdb-del-sync-files", "yes"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server on PATH (make test installs it)");
        self.child = Some(child);
        let url = self.url();
        let up = eventually(Duration::from_secs(10), || {
            let url = url.clone();
            async move {
                match redis::Client::open(url) {
                    Ok(c) => c.get_multiplexed_async_connection().await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        assert!(up, "redis-server did not start on {}", self.port);
    }

    /// SIGKILL: no shutdown, no save; everything it held is gone.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// `REPLICAOF NO ONE`: a replica made a primary, and one still when
    /// restarted (its `--replicaof` dropped, as a failover rewrites the
    /// node's configuration).
    pub(crate) async fn promote(&mut self) {
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut self.conn().await)
            .await
            .unwrap();
        if let Some(at) = self.args.iter().position(|a| a == "--replicaof") {
            self.args.drain(at..(at + 3).min(self.args.len()));
        }
    }

    /// Starts again, empty, on the same port.
    pub(crate) async fn restart(&mut self) {
        self.kill();
        self.forget_snapshot();
        self.spawn().await;
    }

    /// Starts again on the same port from the snapshot a `SAVE` wrote.
    pub(crate) async fn restart_from_snapshot(&mut self) {
        self.kill();
        self.spawn().await;
        self.forget_snapshot();
    }

    /// Its `dump.rdb` gone, so the next start is empty.
    pub(crate) fn forget_snapshot(&self) {
        let _ = std::fs::remove_file(self.dir.join("dump.rdb"));
    }

    pub(crate) async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
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
