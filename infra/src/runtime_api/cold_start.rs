//! The cold start of a real function binary: spawned per run against a
//! fresh [`RuntimeApi`] with the event already queued, timed to its first
//! `/next` and its first `/response`, its peak RSS read, then killed.

use super::{BindError, InitError, Outcome, RuntimeApi};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The `Timeout` of `PurchaseFunction` in `template.yaml` (the deadline header).
pub const FUNCTION_TIMEOUT: Duration = Duration::from_secs(5);
/// The `MemorySize` of `PurchaseFunction` in `template.yaml`, unless `env` says otherwise.
pub const FUNCTION_MEMORY_MB: &str = "512";
/// How long one run may take from spawn to answer before it counts as hung.
pub const RUN_DEADLINE: Duration = Duration::from_secs(30);

/// Why a cold-start measurement failed. Each run-level error carries the
/// tail of the function's log (stdout and stderr).
#[derive(Debug, thiserror::Error)]
pub enum ColdStartError {
    #[error("no events given: one event per run is needed")]
    NoEvents,
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("cannot read {path}: {source}")]
    Binary {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the log file {path}: {source}")]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {path}: {source}")]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("run {run}: init failed ({error_type}): {body}\n--- function log ---\n{log}")]
    InitFailed {
        run: usize,
        error_type: String,
        body: String,
        log: String,
    },
    #[error("run {run}: the invocation failed ({error_type}): {body}\n--- function log ---\n{log}")]
    InvocationFailed {
        run: usize,
        error_type: String,
        body: String,
        log: String,
    },
    #[error(
        "run {run}: the function exited ({status}) before answering\n--- function log ---\n{log}"
    )]
    Exited {
        run: usize,
        status: String,
        log: String,
    },
    #[error("run {run}: no answer within {after:?}\n--- function log ---\n{log}")]
    TimedOut {
        run: usize,
        after: Duration,
        log: String,
    },
}

/// One cold start.
#[derive(Debug, Clone)]
pub struct ColdStartRun {
    /// Process start → first `/next` (Lambda's Init Duration).
    pub init: Option<Duration>,
    /// Process start → the first `/response` arrived.
    pub to_first_answer: Duration,
    /// `/next` handed the event → `/response` arrived (the first invocation alone).
    pub first_invocation: Option<Duration>,
    /// `VmHWM` of the process right after it answered, in bytes.
    pub peak_rss_bytes: Option<u64>,
    /// The `statusCode` inside the response payload.
    pub status: Option<u16>,
    /// The response payload.
    pub payload: String,
}

/// All runs of one binary.
#[derive(Debug, Clone)]
pub struct ColdStart {
    pub binary: PathBuf,
    /// The binary's size on disk.
    pub binary_bytes: u64,
    pub runs: Vec<ColdStartRun>,
}

/// Minimum and median of a set of durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub min: Duration,
    pub median: Duration,
}

pub(super) fn spread(mut values: Vec<Duration>) -> Option<Spread> {
    values.sort_unstable();
    let n = values.len();
    let min = *values.first()?;
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2
    };
    Some(Spread { min, median })
}

impl ColdStart {
    /// Process start → first answered invocation.
    pub fn to_first_answer(&self) -> Option<Spread> {
        spread(self.runs.iter().map(|r| r.to_first_answer).collect())
    }

    /// Process start → first `/next`.
    pub fn init(&self) -> Option<Spread> {
        spread(self.runs.iter().filter_map(|r| r.init).collect())
    }

    /// `/next` → `/response` of the first invocation.
    pub fn first_invocation(&self) -> Option<Spread> {
        spread(
            self.runs
                .iter()
                .filter_map(|r| r.first_invocation)
                .collect(),
        )
    }

    /// The highest `VmHWM` over all runs, in bytes.
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        self.runs.iter().filter_map(|r| r.peak_rss_bytes).max()
    }

    /// Each answer's status and how many runs got it, e.g. `[(Some(202), 10)]`.
    pub fn statuses(&self) -> Vec<(Option<u16>, usize)> {
        let mut counts: Vec<(Option<u16>, usize)> = Vec::new();
        for run in &self.runs {
            match counts.iter_mut().find(|(s, _)| *s == run.status) {
                Some((_, n)) => *n += 1,
                None => counts.push((run.status, 1)),
            }
        }
        counts
    }
}

/// Spawns `binary` once per event as Lambda would for an event already
/// waiting: a fresh Runtime API per run with the event queued, a clean
/// environment (Lambda's reserved variables, then `env`, which wins), stdout
/// and stderr to a file as Lambda's log agent would take them. Each run ends
/// when the `/response` arrives; the peak RSS is read then (the process is
/// alive, blocked on its next `/next`) and the process is killed.
///
/// `env` carries what the function reads (see [`super::purchase_input::function_env`]). A run
/// fails on an init error, an `/error` post, an early exit or no answer
/// within [`RUN_DEADLINE`]; the error carries the function's log.
pub async fn measure_cold_start(
    binary: &Path,
    env: &[(String, String)],
    events: &[String],
) -> Result<ColdStart, ColdStartError> {
    if events.is_empty() {
        return Err(ColdStartError::NoEvents);
    }
    let binary_bytes = std::fs::metadata(binary)
        .map_err(|source| ColdStartError::Binary {
            path: binary.to_owned(),
            source,
        })?
        .len();
    let name = binary
        .file_name()
        .map_or_else(|| "function".into(), |n| n.to_string_lossy().into_owned());
    let mut runs = Vec::with_capacity(events.len());
    for (run, event) in events.iter().enumerate() {
        runs.push(one_run(run + 1, binary, &name, env, event).await?);
    }
    Ok(ColdStart {
        binary: binary.to_owned(),
        binary_bytes,
        runs,
    })
}

/// What Lambda sets in every `provided.al2023` execution environment.
fn reserved_env(name: &str, api: &RuntimeApi) -> Vec<(String, String)> {
    let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
    let pairs = [
        ("AWS_LAMBDA_RUNTIME_API", api.endpoint()),
        ("AWS_LAMBDA_FUNCTION_NAME", name.to_owned()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", FUNCTION_MEMORY_MB.into()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2025/01/01/[$LATEST]coldstart".into(),
        ),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".into()),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".into()),
        ("AWS_REGION", region.clone()),
        ("AWS_DEFAULT_REGION", region),
        // Lambda hands the role's credentials in the environment; the
        // emulator takes any. The caller's `env` replaces them.
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("_HANDLER", "bootstrap".into()),
        ("LAMBDA_TASK_ROOT", "/var/task".into()),
        ("LANG", "en_US.UTF-8".into()),
        ("TZ", ":UTC".into()),
        ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

async fn one_run(
    run: usize,
    binary: &Path,
    name: &str,
    env: &[(String, String)],
    event: &str,
) -> Result<ColdStartRun, ColdStartError> {
    let mut api = RuntimeApi::start(name, FUNCTION_TIMEOUT).await?;
    // Queued before the spawn: a cold start is an environment created for
    // an event that is already waiting.
    let mut invocation = api.invoke(event.to_owned());
    let log_path = std::env::temp_dir().join(format!(
        "seckill-coldstart-{}-{run}.log",
        std::process::id()
    ));
    let log = std::fs::File::create(&log_path).map_err(|source| ColdStartError::Log {
        path: log_path.clone(),
        source,
    })?;
    let log_err = log.try_clone().map_err(|source| ColdStartError::Log {
        path: log_path.clone(),
        source,
    })?;
    let mut command = tokio::process::Command::new(binary);
    command
        .env_clear()
        .envs(reserved_env(name, &api))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .kill_on_drop(true);

    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| ColdStartError::Spawn {
        path: binary.to_owned(),
        source,
    })?;
    enum End {
        Answer(Option<Outcome>),
        InitError(Option<InitError>),
        Exit(String),
    }
    let end = tokio::time::timeout(RUN_DEADLINE, async {
        // Biased: an init error is posted before the process exits, so when
        // both are ready the report (which says why) wins over the exit.
        tokio::select! {
            biased;
            outcome = invocation.answer() => End::Answer(outcome),
            init = api.init_error() => End::InitError(init),
            status = child.wait() => End::Exit(match status {
                Ok(status) => status.to_string(),
                Err(err) => err.to_string(),
            }),
        }
    })
    .await;
    // Read while the process lives: after the answer it is blocked on the
    // next `/next`, so the high-water mark covers init and one invocation.
    let peak_rss_bytes = child.id().and_then(peak_rss);
    let _ = child.start_kill();
    let _ = child.wait().await;
    let first_poll = api.first_poll();
    drop(api);
    let log = log_tail(&log_path);
    let _ = std::fs::remove_file(&log_path);

    let outcome = match end {
        Err(_) => {
            return Err(ColdStartError::TimedOut {
                run,
                after: RUN_DEADLINE,
                log,
            });
        }
        Ok(End::Exit(status)) => return Err(ColdStartError::Exited { run, status, log }),
        Ok(End::InitError(init)) => {
            let (error_type, body) = init.map_or_else(
                || ("unknown".into(), String::new()),
                |e| (e.error_type, String::from_utf8_lossy(&e.body).into_owned()),
            );
            return Err(ColdStartError::InitFailed {
                run,
                error_type,
                body,
                log,
            });
        }
        Ok(End::Answer(None)) => {
            return Err(ColdStartError::Exited {
                run,
                status: "runtime API closed".into(),
                log,
            });
        }
        Ok(End::Answer(Some(outcome))) => outcome,
    };
    let payload = String::from_utf8_lossy(&outcome.body).into_owned();
    if let Some(error_type) = outcome.error_type.clone() {
        return Err(ColdStartError::InvocationFailed {
            run,
            error_type,
            body: payload,
            log,
        });
    }
    Ok(ColdStartRun {
        init: first_poll.map(|at| at.saturating_duration_since(started)),
        to_first_answer: outcome.answered_at.saturating_duration_since(started),
        first_invocation: outcome
            .delivered_at
            .map(|at| outcome.answered_at.saturating_duration_since(at)),
        peak_rss_bytes,
        status: outcome.http_status(),
        payload,
    })
}

/// `VmHWM` (peak resident set) of a live process, in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The last few KiB of the function's log, for error messages.
fn log_tail(path: &Path) -> String {
    const TAIL: usize = 4096;
    let Ok(bytes) = std::fs::read(path) else {
        return String::new();
    };
    let start = bytes.len().saturating_sub(TAIL);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}
