//! Processes of a test's own: the test run again alone in a child of this
//! binary ([`in_own_process`], [`in_own_emulator`]), a `moto_server`
//! ([`spawn_moto`]), the free loopback ports they listen on, and the
//! scratch directories they write in. (`redis-server`: [`crate::RedisServer`].)

use crate::app::unique;
use crate::wait::eventually;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A loopback port that was free a moment ago, for a server a test starts
/// itself (the start retries or fails loudly on the rare race).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A free loopback port below the kernel's ephemeral range, for a server
/// a test stops and starts again on the same port (a killed
/// `redis-server`, a proxy taken down): while it is down, a port of that
/// range may be given to any outgoing connection, and the restart would
/// find it taken.
pub fn free_port_to_keep() -> u16 {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    const LOWEST: u32 = 10_000;
    if ephemeral <= LOWEST + 1_000 {
        return free_port();
    }
    let span = ephemeral - LOWEST;
    // Processes and calls start their search at different ports, so tests
    // running side by side rarely try the same one.
    let start = std::process::id().wrapping_mul(7_919)
        ^ CALLS.fetch_add(1, Ordering::SeqCst).wrapping_mul(104_729);
    (0..span)
        .map(|i| LOWEST + (start.wrapping_add(i) % span))
        .filter_map(|port| u16::try_from(port).ok())
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port below the ephemeral range")
}

/// A loopback port whose cluster bus port (port + 10000) was free a moment
/// ago too, both below 65536; like [`free_port_to_keep`], below the
/// ephemeral range, so a node can be started again on it.
pub fn free_cluster_port() -> u16 {
    loop {
        let port = free_port_to_keep();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        if std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok() {
            return port;
        }
    }
}

/// A scratch directory under the system's temporary directory, its own
/// (named by [`unique`]), removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(prefix: &str) -> Scratch {
        let dir = std::env::temp_dir()
            .join("seckill-tests")
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

/// Set in a child process started by [`in_own_process`].
const OWN_PROCESS: &str = "SECKILL_TEST_OWN_PROCESS";

/// For a test that needs the process to itself (it installs something
/// process-wide, such as the metrics emitter, that every other test's
/// handlers in the suite binary would write into): runs `test` again alone
/// in a child process of this binary and asserts it passed. `test` is the
/// test's full name in the suite (`module::name`). `true` in the child (run
/// the test there), `false` in the parent (done).
pub async fn in_own_process(test: &str) -> bool {
    if std::env::var_os(OWN_PROCESS).is_some() {
        return true;
    }
    assert!(
        run_alone(test, &[(OWN_PROCESS, "1".into())]).await,
        "{test} failed in its own process"
    );
    false
}

/// Runs this binary's test `test` alone in a child process with `env`
/// added, prints its output, and says whether exactly that test passed.
async fn run_alone(test: &str, env: &[(&str, String)]) -> bool {
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    println!("{text}{}", String::from_utf8_lossy(&output.stderr));
    output.status.success() && text.contains("1 passed")
}

/// As [`run_alone`], for a long test whose progress must show while it
/// runs (`make nemesis`): the child's output is printed line by line as it
/// comes, and the test runs even if it is marked ignored. Whether exactly
/// that test passed.
pub async fn run_alone_streaming(test: &str, env: &[(&str, String)]) -> bool {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .arg("--include-ignored")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut passed = false;
    while let Some(line) = lines.next_line().await.unwrap() {
        passed |= line.contains("1 passed");
        println!("{line}");
    }
    child.wait().await.unwrap().success() && passed
}

/// Set in a child process started by [`in_own_emulator`].
const OWN_EMULATOR: &str = "SECKILL_TEST_OWN_EMULATOR";

/// For a test whose figures the shared emulator's load would decide (moto
/// is one Python process: every other test's requests slow it down and,
/// past its timeouts, it fails transactions): runs `test` again in a child
/// process of this binary whose `AWS_ENDPOINT_URL` is a `moto_server` of its
/// own, and asserts the child passed. `test` is the test's full name in
/// the suite (`module::name`). `true` in the child (run the test there),
/// `false` in the parent (done).
pub async fn in_own_emulator(test: &str) -> bool {
    own_emulator(test, false).await
}

/// As [`in_own_emulator`], with a strict layer of its own (the suite's
/// settings, `STRICT_*`) in front of that emulator, served by this
/// process: for a test that needs the strict stack's queues and limits
/// and whose volume would starve the shared emulator (moto copies every
/// table in each transaction: the suite's accumulated tables make each
/// one slow, and concurrent ones held copies until it ran out of memory).
pub async fn in_own_strict_emulator(test: &str) -> bool {
    own_emulator(test, true).await
}

/// An emulator of the caller's own on a free port, and its URL: moto's
/// server (`MOTO_SERVER`, or the one `make test` installs into `.venv`),
/// or with `item_undo` the same moto through `infra/moto/server.py`, as
/// `make run` and `make bench` start it. Killed when dropped.
pub async fn spawn_moto(item_undo: bool) -> (tokio::process::Child, String) {
    let port = free_port();
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/moto_server");
    let moto_server = std::env::var("MOTO_SERVER").unwrap_or_else(|_| venv.into());
    let mut command = if item_undo {
        let python = std::path::Path::new(&moto_server).with_file_name("python3");
        let mut command = tokio::process::Command::new(python);
        command.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../infra/moto/server.py"
        ));
        command
    } else {
        tokio::process::Command::new(&moto_server)
    };
    let moto = command
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{moto_server} (make test installs it into .venv): {e}"));
    let up = eventually(Duration::from_secs(30), || async move {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    assert!(
        up,
        "the emulator did not start on {port} (item_undo: {item_undo})"
    );
    (moto, format!("http://127.0.0.1:{port}"))
}

async fn own_emulator(test: &str, strict: bool) -> bool {
    if std::env::var_os(OWN_EMULATOR).is_some() {
        return true;
    }
    // One at a time: these are the suite's heaviest tests (thousands of
    // orders each), and two of them at once on two cores starve their
    // emulators into timeouts and 500s, which is not what they measure.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let (mut moto, emulator) = spawn_moto(false).await;
    let layer = if strict {
        let mut settings = seckill_infra::strict::StrictSettings::from_env().unwrap();
        // The suite's recording is the shared stack's; this one is apart.
        settings.record_file = None;
        Some(
            seckill_infra::strict::start("127.0.0.1:0", &emulator, settings)
                .await
                .unwrap(),
        )
    } else {
        None
    };
    let endpoint = layer.as_ref().map_or(emulator, |l| l.url());
    let output = run_alone(
        test,
        &[(OWN_EMULATOR, "1".into()), ("AWS_ENDPOINT_URL", endpoint)],
    )
    .await;
    drop(layer);
    let _ = moto.kill().await;
    assert!(output, "{test} failed on its own emulator");
    false
}
