//! TLS fixtures for the tests that talk `rediss://`: a throwaway CA and
//! server certificates made with `rcgen` ([`TestCa`], PEM files as
//! `redis-server`'s TLS options read them), a single TLS `redis-server`
//! ([`TlsRedis`]) and a TLS Redis Cluster ([`TlsCluster`]), both
//! [`RedisServer`]s killed when their guard drops, and [`with_trusted_ca`],
//! which runs a test's body in a child process that trusts the CA.
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

pub use crate::processes::{Scratch, free_cluster_port};
use crate::{RedisServer, TlsFiles, unique};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

/// Valid from a minute ago for two days: made for one run.
fn for_one_run(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(1);
    params.not_after = now + time::Duration::days(2);
}

fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// The CA's name and what it may sign: its certificate is made from
/// them, and so is the issuer that signs with its key (the issued
/// certificates name it, and their key identifier is its key's).
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = named("seckill throwaway test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// A throwaway CA: `ca.crt` and `ca.key` (PEM, an ECDSA P-256 key) in
/// `dir`. A child process of [`with_trusted_ca`] finds it by its directory.
pub struct TestCa {
    dir: PathBuf,
}

impl TestCa {
    pub fn create(dir: &Path) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = ca_params();
        for_one_run(&mut params);
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("ca.key"), key.serialize_pem()).unwrap();
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
        self.issue_for(
            dir,
            &["127.0.0.1", "localhost"],
            &[ExtendedKeyUsagePurpose::ServerAuth],
        );
    }

    /// A certificate whose subjectAltNames are `names` (an IP address or a
    /// DNS name each) and whose extended key usages are `usages`, signed by
    /// this CA, written to `dir` as `server.crt` and `server.key`.
    pub fn issue_for(&self, dir: &Path, names: &[&str], usages: &[ExtendedKeyUsagePurpose]) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = named("localhost");
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages.to_vec();
        params.use_authority_key_identifier_extension = true;
        for_one_run(&mut params);
        let ca_key = std::fs::read_to_string(self.dir.join("ca.key")).unwrap();
        let issuer = Issuer::new(ca_params(), KeyPair::from_pem(&ca_key).unwrap());
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
        std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    }

    /// The files of a server whose certificate [`issue`](Self::issue) or
    /// [`issue_for`](Self::issue_for) wrote to `dir`.
    fn files(&self, dir: &Path) -> TlsFiles {
        TlsFiles {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            ca: self.cert(),
        }
    }
}

/// A `redis-server` with TLS and `requirepass`, killed on drop.
pub struct TlsRedis {
    pub tls_port: u16,
    pub plain_port: u16,
    _server: RedisServer,
    _certs: Scratch,
}

impl TlsRedis {
    pub async fn start(ca: &TestCa, password: &str) -> TlsRedis {
        let certs = Scratch::new("srv");
        ca.issue(&certs.0);
        let server = RedisServer::builder()
            .tls(ca.files(&certs.0))
            .password(password)
            .spawn()
            .await;
        TlsRedis {
            tls_port: server.tls_port(),
            plain_port: server.port(),
            _server: server,
            _certs: certs,
        }
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
    nodes: Vec<RedisServer>,
    /// Every node's TLS port (redis-cli chose which are masters); any of
    /// them is a seed.
    pub ports: Vec<u16>,
    masters: usize,
    ca: PathBuf,
    password: String,
    /// The nodes' certificate and key.
    certs: Scratch,
}

impl TlsCluster {
    /// `masters` masters with `replicas` replicas each, created with
    /// `redis-cli --tls --cluster create` and waited for until every node
    /// sees every other with its hostname, every slot is served, and every
    /// replica is in sync.
    pub async fn start(ca: &TestCa, password: &str, masters: usize, replicas: usize) -> TlsCluster {
        let certs = Scratch::new("cluster");
        // A node presents it on the cluster bus as a client too, where the
        // other node always asks for one (whatever `tls-auth-clients` says).
        ca.issue_for(
            &certs.0,
            &[CLUSTER_HOSTNAME],
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        let mut cluster = TlsCluster {
            nodes: Vec::new(),
            ports: Vec::new(),
            masters,
            ca: ca.cert(),
            password: password.to_owned(),
            certs,
        };
        for _ in 0..masters * (1 + replicas) {
            // ElastiCache asks no client certificate; the nodes still
            // verify each other's server certificate against the CA.
            let node = RedisServer::builder()
                .tls_only(ca.files(&cluster.certs.0))
                .args(["--tls-cluster", "yes", "--tls-replication", "yes"])
                .cluster()
                .args(["--cluster-node-timeout", "5000"])
                .args(["--cluster-announce-hostname", CLUSTER_HOSTNAME])
                .args(["--cluster-preferred-endpoint-type", "hostname"])
                .password(password)
                .args(["--masterauth", password])
                .args(["--maxmemory-policy", "noeviction"])
                .spawn()
                .await;
            cluster.ports.push(node.tls_port());
            cluster.nodes.push(node);
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
        self.nodes
            .iter()
            .map(|node| format!("--- node {}\n{}", node.tls_port(), node.log()))
            .collect()
    }
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
