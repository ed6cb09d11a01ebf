//! The one `redis-server` starter of the tests. Every server a test starts
//! itself is a [`RedisServer`]: a plain one ([`crate::own_redis`]), one
//! with `requirepass` (the secrets tests), a TLS one and a TLS cluster's
//! nodes ([`crate::tls`]), the chaos and nemesis scenarios' primaries and
//! replicas that are killed and started again.
//!
//! Each listens on loopback ports below the ephemeral range (so a restart
//! finds its port free), persists nothing, and works in a directory of its
//! own: a node started in a shared one loads whatever `dump.rdb` another
//! left there (a replica's full sync onto a non-empty dataset writes one),
//! and a restart meant to be empty once brought back another node's older
//! data. It is up once it logs that it is ready (its listeners bound, its
//! snapshot loaded) and, with a plain port, answers a `PING`; a start that
//! lost its port to another process tries other ports, any other failure
//! panics with the server's log. Killed, and its directory removed, when
//! dropped.

use crate::processes::{Scratch, free_cluster_port, free_port_to_keep};
use crate::wait::eventually;
use redis::IntoConnectionInfo;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long a start may take before it is a failure (it ends at once when
/// the server exits).
const START_WITHIN: Duration = Duration::from_secs(30);

/// What `redis-server` logs once its listeners are bound and its data loaded.
const READY: &str = "Ready to accept connections";

/// A TLS server's PEM files: its certificate and key, and the CA it
/// verifies its peers against (a cluster's nodes verify each other).
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// How a [`RedisServer`] is started; [`RedisServer::builder`].
#[derive(Default)]
pub struct RedisServerBuilder {
    args: Vec<OsString>,
    password: Option<String>,
    tls: Option<TlsFiles>,
    tls_only: bool,
    cluster: bool,
}

impl RedisServerBuilder {
    /// One more `redis-server` argument, after the starter's own (so it
    /// may override one of them).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I>(mut self, args: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// `requirepass`: clients must `AUTH` with it (this starter's own
    /// `PING` and [`RedisServer::conn`] do).
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// A TLS port beside the plain one, with these files; no client
    /// certificate asked (as ElastiCache asks none).
    pub fn tls(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }

    /// TLS only (`--port 0`), as ElastiCache with in-transit encryption.
    pub fn tls_only(mut self, files: TlsFiles) -> Self {
        self.tls_only = true;
        self.tls(files)
    }

    /// A Redis Cluster node (`cluster-enabled`, its `nodes.conf` in its
    /// directory), on a port whose bus port (port + 10000) is free too.
    pub fn cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Starts the server and waits until it is up; panics with its log if
    /// it does not come up.
    pub async fn spawn(self) -> RedisServer {
        let pick = || {
            if self.cluster {
                free_cluster_port()
            } else {
                free_port_to_keep()
            }
        };
        let mut log = String::new();
        for _attempt in 0..5 {
            let mut server = RedisServer {
                plain_port: (!self.tls_only).then(pick),
                tls_port: self.tls.is_some().then(pick),
                args: self.args.clone(),
                password: self.password.clone(),
                tls: self.tls.clone(),
                cluster: self.cluster,
                child: None,
                dir: Scratch::new("redis"),
            };
            match server.start().await {
                Ok(()) => return server,
                // Taken since it was picked: other ports.
                Err(text) if text.contains("Address already in use") => log = text,
                Err(text) => panic!("redis-server did not start:\n{text}"),
            }
        }
        panic!("redis-server found no free port in 5 tries:\n{log}");
    }
}

/// A `redis-server` of a test's own; see the module's page.
pub struct RedisServer {
    plain_port: Option<u16>,
    tls_port: Option<u16>,
    /// The caller's arguments, kept for a restart.
    args: Vec<OsString>,
    password: Option<String>,
    tls: Option<TlsFiles>,
    cluster: bool,
    child: Option<Child>,
    /// Its working directory (`dump.rdb`, `nodes.conf`, `redis.log`).
    dir: Scratch,
}

impl RedisServer {
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// The plain port (a server started [`tls_only`](RedisServerBuilder::tls_only) has none).
    pub fn port(&self) -> u16 {
        self.plain_port.expect("a server with a plain port")
    }

    /// The TLS port (a server started with TLS).
    pub fn tls_port(&self) -> u16 {
        self.tls_port.expect("a server started with TLS")
    }

    /// `redis://` on the plain port, without the password.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port())
    }

    /// The running process's id (for a signal), `None` while it is down.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Everything the server logged, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("redis.log")).unwrap_or_default()
    }

    /// A connection on the plain port, authenticated when it has a password.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        connect(&self.url(), self.password.as_deref())
            .await
            .unwrap_or_else(|e| panic!("redis-server on {}: {e}", self.port()))
    }

    /// SIGKILL: no shutdown, no save; everything it held is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts again, empty, on the same ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.forget_snapshot();
        self.start_again().await;
    }

    /// Starts again on the same ports from the snapshot a `SAVE` wrote.
    pub async fn restart_from_snapshot(&mut self) {
        self.kill();
        self.start_again().await;
        self.forget_snapshot();
    }

    /// Its `dump.rdb` gone, so the next start is empty.
    pub fn forget_snapshot(&self) {
        let _ = std::fs::remove_file(self.dir.0.join("dump.rdb"));
    }

    /// `REPLICAOF NO ONE`: a replica made a primary, and one still when
    /// restarted (its `--replicaof` dropped, as a failover rewrites the
    /// node's configuration).
    pub async fn promote(&mut self) {
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

    async fn start_again(&mut self) {
        if let Err(log) = self.start().await {
            panic!("redis-server did not start again:\n{log}");
        }
    }

    /// One start on this server's ports; `Err` with its log if it exits or
    /// does not come up in time (the process is then gone).
    async fn start(&mut self) -> Result<(), String> {
        let log_path = self.dir.0.join("redis.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let mut child = self
            .command()
            .current_dir(&self.dir.0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("redis-server is on PATH (make test installs it)");
        let ready = ready_signal(&mut child, &log_path);
        self.child = Some(child);
        let up = matches!(tokio::time::timeout(START_WITHIN, ready).await, Ok(Ok(())))
            && match self.plain_port {
                Some(_) => self.answers().await,
                None => true,
            };
        if up {
            return Ok(());
        }
        self.kill();
        Err(self.log())
    }

    /// The whole command line: the starter's arguments, then the caller's.
    fn command(&self) -> Command {
        let mut command = Command::new("redis-server");
        let plain = self.plain_port.unwrap_or(0).to_string();
        command.args(["--bind", "127.0.0.1", "--port", &plain]);
        if let (Some(port), Some(tls)) = (self.tls_port, &self.tls) {
            command
                .args(["--tls-port", &port.to_string()])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca)
                .args(["--tls-auth-clients", "no"]);
        }
        if let Some(password) = &self.password {
            command.args(["--requirepass", password]);
        }
        if self.cluster {
            command.args(["--cluster-enabled", "yes"]);
            command.args(["--cluster-config-file", "nodes.conf"]);
        }
        command
            .args(["--save", "", "--appendonly", "no"])
            // A replica's full sync onto a non-empty dataset goes through
            // a file; it is deleted once loaded, as nothing else persists.
            .args(["--rdb-del-sync-files", "yes"])
            .arg("--dir")
            .arg(&self.dir.0)
            .args(&self.args);
        command
    }

    /// A `PING` on the plain port is answered (after an `AUTH`). A
    /// replica loading its first sync answers `LOADING`: it is up.
    async fn answers(&self) -> bool {
        let (url, password) = (self.url(), self.password.clone());
        eventually(Duration::from_secs(10), || {
            let (url, password) = (url.clone(), password.clone());
            async move {
                let Ok(mut conn) = connect(&url, password.as_deref()).await else {
                    return false;
                };
                match redis::cmd("PING").query_async::<String>(&mut conn).await {
                    Ok(_) => true,
                    Err(e) => e.code() == Some("LOADING"),
                }
            }
        })
        .await
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn connect(
    url: &str,
    password: Option<&str>,
) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let mut info = url.into_connection_info()?;
    if let Some(password) = password {
        let settings = info.redis_settings().clone().set_password(password);
        info = info.set_redis_settings(settings);
    }
    redis::Client::open(info)?
        .get_multiplexed_async_connection()
        .await
}

/// Resolves once the server logs [`READY`]; fails if it exits first. Its
/// output is copied to `log_path` as it comes, read until it exits (the
/// pipe closes), so a full pipe never blocks it.
fn ready_signal(child: &mut Child, log_path: &Path) -> tokio::sync::oneshot::Receiver<()> {
    let (ready, told) = tokio::sync::oneshot::channel();
    let out = child.stdout.take().expect("stdout piped");
    let log_path = log_path.to_owned();
    std::thread::spawn(move || {
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(&log_path)
            .ok();
        let mut ready = Some(ready);
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(log) = log.as_mut() {
                let _ = writeln!(log, "{line}");
            }
            if line.contains(READY)
                && let Some(ready) = ready.take()
            {
                let _ = ready.send(());
            }
        }
    });
    told
}
