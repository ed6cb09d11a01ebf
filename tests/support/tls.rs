//! TLS fixtures for the tests that talk `rediss://`: a throwaway CA and
//! server certificates made with the `openssl` CLI, a single TLS
//! `redis-server` ([`TlsRedis`]) and a TLS Redis Cluster ([`TlsCluster`]),
//! each killed when its guard drops, and [`with_trusted_ca`], which runs a
//! test's body in a child process that trusts the CA.
//!
//! Production verifies the server against the system roots
//! (rustls-native-certs), which honours `SSL_CERT_FILE`. Environment
//! variables are process-global and setting one needs `unsafe` (forbidden
//! here), so a test that must trust its CA re-runs itself in a child process
//! whose environment has `SSL_CERT_FILE` pointing at that CA: the same
//! mechanism an operator would use, and nothing else in the test binary sees
//! it.
//!
//! A redis-server built without TLS refuses `--tls-port` and never gets
//! ready: the fixtures then panic with its log, they never skip.

use crate::{free_port, unique};
use std::future::Future;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the child process: the directory of the CA it trusts.
const CHILD_CA_DIR: &str = "SECKILL_TEST_TRUSTED_CA_DIR";

/// The server's AUTH password: the characters a URL must percent-encode
/// (`:`, `@`, `/`, `#`), so decoding is tested too.
pub fn server_password() -> String {
    format!("pw:with@odd/chars#{}", unique("r"))
}

/// RFC 3986 userinfo encoding: everything but unreserved characters.
pub fn encode(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A secret is absent when neither it nor its URL-encoded form shows.
pub fn assert_hidden(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        assert!(
            !text.contains(secret) && !text.contains(&encode(secret)),
            "{what} shows the secret {secret:?}:\n{text}"
        );
    }
}

/// A scratch directory under the system's temporary directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Scratch {
        let dir = std::env::temp_dir()
            .join("seckill-tls-tests")
            .join(unique(prefix));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI is on PATH");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A throwaway CA: `ca.crt` and `ca.key` in `dir`.
pub struct TestCa {
    dir: PathBuf,
}

impl TestCa {
    pub fn create(dir: &Path) -> TestCa {
        openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=seckill throwaway test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
            dir,
        );
        TestCa {
            dir: dir.to_owned(),
        }
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// A server certificate for `localhost` and `127.0.0.1`, signed by this
    /// CA, written to `dir` as `server.crt` and `server.key`.
    pub fn issue(&self, dir: &Path) {
        self.issue_for(dir, "IP:127.0.0.1,DNS:localhost", "serverAuth");
    }

    /// A certificate whose subjectAltName is `names` (openssl's syntax,
    /// `DNS:a,IP:b`) and extendedKeyUsage `usage`, written to `dir` as
    /// `server.crt` and `server.key`.
    pub fn issue_for(&self, dir: &Path, names: &str, usage: &str) {
        std::fs::write(
            dir.join("server.ext"),
            format!(
                "subjectAltName={names}\nbasicConstraints=CA:FALSE\n\
                 keyUsage=critical,digitalSignature\nextendedKeyUsage={usage}\n"
            ),
        )
        .unwrap();
        openssl(
            &[
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
            dir,
        );
        let (ca_crt, ca_key) = (self.cert(), self.dir.join("ca.key"));
        openssl(
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                ca_crt.to_str().unwrap(),
                "-CAkey",
                ca_key.to_str().unwrap(),
                "-CAcreateserial",
                "-CAserial",
                "ca.srl",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
            dir,
        );
    }
}

/// A `redis-server` with TLS and `requirepass`, killed on drop.
pub struct TlsRedis {
    child: Child,
    pub tls_port: u16,
    pub plain_port: u16,
    _dir: Scratch,
}

impl TlsRedis {
    pub fn start(ca: &TestCa, password: &str) -> TlsRedis {
        let dir = Scratch::new("srv");
        ca.issue(&dir.0);
        let log_path = dir.0.join("redis.log");
        for _attempt in 0..5 {
            let (plain_port, tls_port) = (free_port(), free_port());
            let log = std::fs::File::create(&log_path).unwrap();
            let mut child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &plain_port.to_string()])
                .args(["--tls-port", &tls_port.to_string()])
                .args([
                    "--tls-cert-file",
                    "server.crt",
                    "--tls-key-file",
                    "server.key",
                ])
                .arg("--tls-ca-cert-file")
                .arg(ca.cert())
                .args(["--tls-auth-clients", "no", "--requirepass", password])
                .args(["--save", "", "--appendonly", "no", "--dir", "."])
                .current_dir(&dir.0)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log)
                .spawn()
                .expect("redis-server is on PATH");
            if wait_ready(&mut child, &log_path, Duration::from_secs(10)) {
                return TlsRedis {
                    child,
                    tls_port,
                    plain_port,
                    _dir: dir,
                };
            }
            // Most likely a port taken between `free_port` and the bind: retry.
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "redis-server did not start with TLS:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The name every node of a [`TlsCluster`] announces, as ElastiCache's
/// nodes announce their DNS names: the only name its certificate holds.
pub const CLUSTER_HOSTNAME: &str = "localhost";

/// A Redis Cluster shaped like ElastiCache's cluster mode with in-transit
/// encryption and an AUTH token: TLS only (`port 0`), TLS on the cluster
/// bus and for replication, `requirepass` and `masterauth`, `noeviction`,
/// and every node announcing [`CLUSTER_HOSTNAME`] as its preferred endpoint,
/// so `CLUSTER SLOTS` and `MOVED` name a host the client must verify the
/// certificate against (whose only name is that host: no IP). Killed on drop.
pub struct TlsCluster {
    nodes: Vec<Child>,
    /// Every node's TLS port (redis-cli chose which are masters); any of
    /// them is a seed.
    pub ports: Vec<u16>,
    masters: usize,
    ca: PathBuf,
    password: String,
    dir: Scratch,
}

impl TlsCluster {
    /// `masters` masters with `replicas` replicas each, created with
    /// `redis-cli --tls --cluster create` and waited for until every node
    /// sees every other with its hostname, every slot is served, and every
    /// replica is in sync.
    pub fn start(ca: &TestCa, password: &str, masters: usize, replicas: usize) -> TlsCluster {
        let dir = Scratch::new("cluster");
        // A node presents it on the cluster bus as a client too, where the
        // other node always asks for one (whatever `tls-auth-clients` says).
        ca.issue_for(
            &dir.0,
            &format!("DNS:{CLUSTER_HOSTNAME}"),
            "serverAuth,clientAuth",
        );
        let mut cluster = TlsCluster {
            nodes: Vec::new(),
            ports: Vec::new(),
            masters,
            ca: ca.cert(),
            password: password.to_owned(),
            dir,
        };
        for _ in 0..masters * (1 + replicas) {
            cluster.start_node();
        }
        let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
        for port in &cluster.ports {
            create.push(format!("127.0.0.1:{port}"));
        }
        create.extend(["--cluster-replicas".into(), replicas.to_string()]);
        create.push("--cluster-yes".into());
        let out = cluster.run_cli(&create, Duration::from_secs(60));
        assert!(
            out.contains("All 16384 slots covered"),
            "redis-cli --cluster create failed:\n{out}\n{}",
            cluster.logs()
        );
        cluster.wait_formed(Duration::from_secs(60));
        cluster
    }

    /// One node on a free port whose bus port (port + 10000) is free too.
    fn start_node(&mut self) {
        let ssl = self.dir.0.clone();
        for _attempt in 0..5 {
            let port = free_cluster_port();
            let dir = self.dir.0.join(port.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            let log_path = dir.join("redis.log");
            let log = std::fs::File::create(&log_path).unwrap();
            let mut child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", "0"])
                .args(["--tls-port", &port.to_string()])
                .args(["--tls-cluster", "yes", "--tls-replication", "yes"])
                .arg("--tls-cert-file")
                .arg(ssl.join("server.crt"))
                .arg("--tls-key-file")
                .arg(ssl.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(&self.ca)
                // ElastiCache asks no client certificate; the nodes still
                // verify each other's server certificate against the CA.
                .args(["--tls-auth-clients", "no"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-config-file", "nodes.conf"])
                .args(["--cluster-node-timeout", "5000"])
                .args(["--cluster-announce-hostname", CLUSTER_HOSTNAME])
                .args(["--cluster-preferred-endpoint-type", "hostname"])
                .args(["--requirepass", &self.password])
                .args(["--masterauth", &self.password])
                .args(["--maxmemory-policy", "noeviction"])
                .args(["--save", "", "--appendonly", "no", "--dir", "."])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log)
                .spawn()
                .expect("redis-server is on PATH");
            if wait_ready(&mut child, &log_path, Duration::from_secs(10)) {
                self.nodes.push(child);
                self.ports.push(port);
                return;
            }
            // Most likely a port taken since `free_cluster_port`: retry.
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            if !log.contains("Address already in use") {
                panic!("redis-server did not start as a TLS cluster node:\n{log}");
            }
        }
        panic!("no free port pair for a cluster node in 5 tries");
    }

    /// `redis-cli` over TLS with this cluster's CA and password (from the
    /// environment, so it is on no command line); its output, bounded by
    /// `within` (a hung one is killed).
    fn run_cli<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], within: Duration) -> String {
        // The options first: after the command they would be its arguments.
        let mut child = Command::new("redis-cli")
            .arg("--tls")
            .arg("--cacert")
            .arg(&self.ca)
            .env("REDISCLI_AUTH", &self.password)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("redis-cli is on PATH");
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            let _ = err.read_to_string(&mut text);
            let _ = done.send(text);
        });
        let text = finished.recv_timeout(within).unwrap_or_else(|_| {
            let _ = child.kill();
            format!("redis-cli did not finish within {within:?}")
        });
        let _ = child.wait();
        text
    }

    /// One command on the node at `port`, its raw output.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let port = port.to_string();
        let mut all = vec!["-h", CLUSTER_HOSTNAME, "-p", &port];
        all.extend(args);
        self.run_cli(&all, Duration::from_secs(10))
    }

    /// Polls every node until the cluster is whole as each node sees it.
    fn wait_formed(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let nodes = self.ports.len();
        let mut last = String::new();
        loop {
            let mut whole = true;
            for &port in &self.ports {
                let info = self.cli(port, &["cluster", "info"]);
                let seen = self.cli(port, &["cluster", "nodes"]);
                // `<id> <ip>:<port>@<bus>,<hostname> <flags> ... connected`
                let announced = seen
                    .lines()
                    .filter(|l| l.contains(&format!(",{CLUSTER_HOSTNAME} ")))
                    .filter(|l| l.contains(" connected"))
                    .count();
                let masters = seen.lines().filter(|l| l.contains("master")).count();
                let synced = !info.is_empty() && {
                    let role = self.cli(port, &["info", "replication"]);
                    !role.contains("role:slave") || role.contains("master_link_status:up")
                };
                if !info.contains("cluster_state:ok")
                    || announced != nodes
                    || masters != self.masters
                    || !synced
                {
                    whole = false;
                    last = format!("node {port}:\n{info}\n{seen}");
                    break;
                }
            }
            if whole {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the TLS cluster did not form within {within:?}; last seen {last}\n{}",
                self.logs()
            );
            // No pause between rounds: a round is 18 redis-cli runs, which
            // paces the poll; the deadline bounds it.
        }
    }

    /// Every node's log, for a failure message.
    fn logs(&self) -> String {
        self.ports
            .iter()
            .map(|port| {
                let log = self.dir.0.join(port.to_string()).join("redis.log");
                format!(
                    "--- node {port}\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            })
            .collect()
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
        }
        for node in &mut self.nodes {
            let _ = node.wait();
        }
    }
}

/// A loopback port whose cluster bus port (port + 10000) was free a moment
/// ago too, both below 65536.
pub fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
}

/// Waits for the server's own "Ready to accept connections" (logged once
/// its listeners are bound); false if it exits first or `within` passes.
/// Its log is copied to `log_path` as it comes.
fn wait_ready(child: &mut Child, log_path: &Path, within: Duration) -> bool {
    let Some(out) = child.stdout.take() else {
        return false;
    };
    let (ready, told) = std::sync::mpsc::channel();
    let log_path = log_path.to_owned();
    // Reads until the server exits (the pipe closes, dropping the sender),
    // so a full pipe never blocks it.
    std::thread::spawn(move || {
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(&log_path)
            .ok();
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(log) = log.as_mut() {
                let _ = writeln!(log, "{line}");
            }
            if line.contains("Ready to accept connections") {
                let _ = ready.send(());
            }
        }
    });
    told.recv_timeout(within).is_ok()
}

/// Runs `body` in a child process (this test binary, this one test) whose
/// `SSL_CERT_FILE` is a fresh CA, so the production trust path (system
/// roots via rustls-native-certs) trusts the test server and nothing else.
/// `test` is the test's full name in the suite (`module::name`).
pub fn with_trusted_ca<F, Fut>(test: &str, body: F)
where
    F: FnOnce(TestCa) -> Fut,
    Fut: Future<Output = ()>,
{
    if let Some(dir) = std::env::var_os(CHILD_CA_DIR) {
        let ca = TestCa {
            dir: PathBuf::from(dir),
        };
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(body(ca));
        return;
    }
    let dir = Scratch::new("ca");
    let ca = TestCa::create(&dir.0);
    let output = dir.0.join("child.out");
    let out = std::fs::File::create(&output).unwrap();
    // Waits on the child's exit itself, bounded; a hung child is killed.
    // (tokio's child reaper needs its runtime from the spawn on.)
    let status = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
                .args([test, "--exact", "--nocapture", "--test-threads", "1"])
                .env(CHILD_CA_DIR, &dir.0)
                .env("SSL_CERT_FILE", ca.cert())
                .env_remove("SSL_CERT_DIR")
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .unwrap();
            match tokio::time::timeout(Duration::from_secs(180), child.wait()).await {
                Ok(status) => Some(status.unwrap()),
                Err(_) => {
                    let _ = child.kill().await;
                    None
                }
            }
        });
    let text = std::fs::read_to_string(&output).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "child run of {test} failed or hung ({status:?}):\n{text}"
    );
    // A renamed test would otherwise "pass" by running nothing.
    assert!(text.contains("1 passed"), "child ran no test:\n{text}");
    // What the child printed (its figures), for `--nocapture`.
    print!("{text}");
}
