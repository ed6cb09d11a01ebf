//! A minimal Lambda Runtime API on loopback, and the cold-start measurement
//! of a real function binary against it.
//!
//! The server speaks the protocol `lambda_runtime` 1.x speaks to Lambda
//! (<https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html>):
//!
//! - `GET /2018-06-01/runtime/invocation/next` long-polls until the caller
//!   queues an event, then answers it with `Lambda-Runtime-Aws-Request-Id`,
//!   `Lambda-Runtime-Deadline-Ms`, `Lambda-Runtime-Invoked-Function-Arn` and
//!   `Lambda-Runtime-Trace-Id` (the runtime panics without the first two);
//! - `POST /2018-06-01/runtime/invocation/{id}/response` and `.../{id}/error`
//!   hand the outcome, with the instant it arrived, to the caller that
//!   queued the event (a oneshot channel per invocation);
//! - `POST /2018-06-01/runtime/init/error` is reported on its own channel.
//!
//! [`measure_cold_start`] spawns a binary against a fresh server per run, the
//! way Lambda creates an execution environment for an event that is already
//! waiting, and times process start → first `/next` (what Lambda reports as
//! Init Duration) and process start → the first `/response` (what the first
//! buyer waits for, minus the network), reads the peak RSS while the process
//! still lives, and kills it.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use seckill_shared::config::Config;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

const NEXT: &str = "/2018-06-01/runtime/invocation/next";
const INVOCATION: &str = "/2018-06-01/runtime/invocation/";
const INIT_ERROR: &str = "/2018-06-01/runtime/init/error";
/// Lambda's limit on a synchronous response (and so on what we accept).
const MAX_PAYLOAD: usize = 6 * 1024 * 1024;
const ERROR_TYPE: &str = "lambda-runtime-function-error-type";
const ACCOUNT: &str = "123456789012";

/// Why the Runtime API could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on 127.0.0.1:0 for the runtime API: {0}")]
pub struct BindError(#[from] std::io::Error);

/// What the function posted to `/response` or `/error` for one invocation.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub request_id: String,
    /// `None` for `/response`; for `/error`, its `Lambda-Runtime-Function-Error-Type`
    /// (`lambda_runtime` sends `unhandled`, or the empty string if absent).
    pub error_type: Option<String>,
    pub body: Bytes,
    /// When `/next` handed the event to the function.
    pub delivered_at: Option<Instant>,
    /// When the whole `/response` (or `/error`) body had arrived.
    pub answered_at: Instant,
}

impl Outcome {
    pub fn is_error(&self) -> bool {
        self.error_type.is_some()
    }

    /// The `statusCode` of an API Gateway proxy response payload, if it is one.
    pub fn http_status(&self) -> Option<u16> {
        let payload: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        u16::try_from(payload.get("statusCode")?.as_u64()?).ok()
    }
}

/// What the function posted to `/runtime/init/error`.
#[derive(Debug, Clone)]
pub struct InitError {
    pub error_type: String,
    pub body: Bytes,
    pub at: Instant,
}

/// One queued event; await its outcome with [`Invocation::answer`].
#[derive(Debug)]
pub struct Invocation {
    pub request_id: String,
    rx: oneshot::Receiver<Outcome>,
}

impl Invocation {
    /// The function's answer; `None` if the server went away first.
    /// Cancel-safe: it only polls the channel, so it can sit in a `select!`.
    pub async fn answer(&mut self) -> Option<Outcome> {
        (&mut self.rx).await.ok()
    }
}

struct Queued {
    request_id: String,
    payload: Bytes,
}

struct Pending {
    tx: oneshot::Sender<Outcome>,
    delivered_at: Option<Instant>,
}

struct Shared {
    function_arn: String,
    timeout: Duration,
    // A tokio mutex: the `/next` that holds it awaits the next event, and a
    // second concurrent `/next` must wait behind it, not fail.
    queue: tokio::sync::Mutex<mpsc::UnboundedReceiver<Queued>>,
    pending: Mutex<HashMap<String, Pending>>,
    first_poll: OnceLock<Instant>,
    init_errors: mpsc::UnboundedSender<InitError>,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        // The map stays consistent across a panic (single inserts/removes).
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The Runtime API server. Dropping it stops the server and ends any `/next`
/// still waiting.
pub struct RuntimeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Queued>,
    init_errors: mpsc::UnboundedReceiver<InitError>,
    shutdown: watch::Sender<bool>,
    accept: JoinHandle<()>,
    next_id: AtomicU64,
}

impl RuntimeApi {
    /// Serves on `127.0.0.1:0` for a function named `function_name` whose
    /// invocations get `timeout` (the deadline header).
    pub async fn start(function_name: &str, timeout: Duration) -> Result<Self, BindError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (events, queue) = mpsc::unbounded_channel();
        let (init_tx, init_errors) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
        let shared = Arc::new(Shared {
            function_arn: format!("arn:aws:lambda:{region}:{ACCOUNT}:function:{function_name}"),
            timeout,
            queue: tokio::sync::Mutex::new(queue),
            pending: Mutex::new(HashMap::new()),
            first_poll: OnceLock::new(),
            init_errors: init_tx,
            shutdown: shutdown_rx,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Self {
            addr,
            shared,
            events,
            init_errors,
            shutdown,
            accept,
            next_id: AtomicU64::new(1),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The value of `AWS_LAMBDA_RUNTIME_API` (`host:port`, no scheme).
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    /// Queues an event; the next `/next` (waiting or future) receives it.
    pub fn invoke(&self, payload: impl Into<Bytes>) -> Invocation {
        let seq = self.next_id.fetch_add(1, Ordering::Relaxed);
        // UUID-shaped like Lambda's; unique per server, which is all the
        // runtime needs (it echoes it in the response path).
        let request_id = format!(
            "{seq:08x}-{:04x}-4000-8000-{:012x}",
            std::process::id() & 0xffff,
            epoch_nanos() & 0xffff_ffff_ffff
        );
        let (tx, rx) = oneshot::channel();
        self.shared.pending().insert(
            request_id.clone(),
            Pending {
                tx,
                delivered_at: None,
            },
        );
        // The receiver lives in `shared`, which we hold: sending cannot fail.
        let _ = self.events.send(Queued {
            request_id: request_id.clone(),
            payload: payload.into(),
        });
        Invocation { request_id, rx }
    }

    /// When the first `/next` arrived: the end of the function's init phase.
    pub fn first_poll(&self) -> Option<Instant> {
        self.shared.first_poll.get().copied()
    }

    /// The next `/runtime/init/error`; cancel-safe.
    pub async fn init_error(&mut self) -> Option<InitError> {
        self.init_errors.recv().await
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(&shared, req).await) }
            });
            if let Err(err) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%err, "runtime API connection ended with an error");
            }
        });
    }
}

type Response = hyper::Response<Full<Bytes>>;

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut response = hyper::Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// The Runtime API's error shape.
fn api_error(status: StatusCode, error_type: &str, message: &str) -> Response {
    let body = serde_json::json!({ "errorMessage": message, "errorType": error_type });
    reply(status, body.to_string())
}

fn accepted() -> Response {
    reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
}

async fn route(shared: &Shared, req: hyper::Request<Incoming>) -> Response {
    let path = req.uri().path().to_owned();
    match (req.method(), path.as_str()) {
        (&Method::GET, NEXT) => next(shared).await,
        (&Method::POST, INIT_ERROR) => {
            let error_type = header(&req, ERROR_TYPE).unwrap_or_default();
            match read_body(req).await {
                Ok(body) => {
                    let _ = shared.init_errors.send(InitError {
                        error_type,
                        body,
                        at: Instant::now(),
                    });
                    accepted()
                }
                Err(response) => response,
            }
        }
        (&Method::POST, p) if p.starts_with(INVOCATION) => {
            let rest = &p[INVOCATION.len()..];
            let (id, error) = match rest.rsplit_once('/') {
                Some((id, "response")) => (id.to_owned(), false),
                Some((id, "error")) => (id.to_owned(), true),
                _ => return api_error(StatusCode::NOT_FOUND, "NotFound", "no such route"),
            };
            // lambda_runtime sends the type only on errors; "" if a runtime omits it.
            let error_type = error.then(|| header(&req, ERROR_TYPE).unwrap_or_default());
            let body = match read_body(req).await {
                Ok(body) => body,
                Err(response) => return response,
            };
            let answered_at = Instant::now();
            let Some(pending) = shared.pending().remove(&id) else {
                return api_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidRequestID",
                    "unknown or already answered request id",
                );
            };
            let _ = pending.tx.send(Outcome {
                request_id: id,
                error_type,
                body,
                delivered_at: pending.delivered_at,
                answered_at,
            });
            accepted()
        }
        _ => api_error(StatusCode::NOT_FOUND, "NotFound", "no such route"),
    }
}

/// Long-poll: waits for a queued event, or for the server to stop.
async fn next(shared: &Shared) -> Response {
    let arrived = Instant::now();
    let _ = shared.first_poll.set(arrived);
    let mut shutdown = shared.shutdown.clone();
    let mut queue = tokio::select! {
        queue = shared.queue.lock() => queue,
        _ = shutdown.wait_for(|stop| *stop) => return stopping(),
    };
    let event = tokio::select! {
        event = queue.recv() => event,
        _ = shutdown.wait_for(|stop| *stop) => None,
    };
    drop(queue);
    let Some(event) = event else {
        return stopping();
    };
    let now = Instant::now();
    if let Some(pending) = shared.pending().get_mut(&event.request_id) {
        pending.delivered_at = Some(now);
    }
    let deadline_ms = epoch_nanos() / 1_000_000 + shared.timeout.as_millis();
    let mut response = reply(StatusCode::OK, event.payload);
    let headers = response.headers_mut();
    let values = [
        ("lambda-runtime-aws-request-id", event.request_id.clone()),
        ("lambda-runtime-deadline-ms", deadline_ms.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            shared.function_arn.clone(),
        ),
        ("lambda-runtime-trace-id", trace_id()),
    ];
    for (name, value) in values {
        // Every value is ASCII we built; a failure would be a bug here, and
        // the runtime would then report the missing header itself.
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

fn stopping() -> Response {
    api_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "ServiceStopping",
        "runtime API is shutting down",
    )
}

fn header(req: &hyper::Request<Incoming>, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

async fn read_body(req: hyper::Request<Incoming>) -> Result<Bytes, Response> {
    match Limited::new(req.into_body(), MAX_PAYLOAD).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(err) => Err(api_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            &err.to_string(),
        )),
    }
}

fn epoch_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// An X-Ray header of the shape Lambda sends (not sampled: nothing collects it).
fn trace_id() -> String {
    let nanos = epoch_nanos();
    format!(
        "Root=1-{:08x}-{:024x};Parent={:016x};Sampled=0",
        nanos / 1_000_000_000,
        nanos & 0xffff_ffff_ffff_ffff_ffff_ffff,
        nanos & 0xffff_ffff_ffff_ffff
    )
}

// ---------------------------------------------------------------------------
// Cold-start measurement.

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

fn spread(mut values: Vec<Duration>) -> Option<Spread> {
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
/// `env` carries what the function reads (see [`function_env`]). A run
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

/// The environment `template.yaml` gives the purchase function for `config`
/// (globals plus its own variables), plus the `AWS_*` settings of this
/// process (endpoint, region, credentials) so the child reaches the same
/// emulator. Secrets pass as their ARNs (`config.secrets`), as on AWS: the
/// child fetches them at cold start; `config.gate_secret` has no variable.
pub fn function_env(config: &Config) -> Vec<(String, String)> {
    let mut env = vec![
        ("REDIS_URL".to_owned(), config.redis_url.clone()),
        ("SALES_TABLE".to_owned(), config.sales_table.clone()),
        // A purchase that finds its sale's keys lost starts the rebuild,
        // which reads the orders and the prewarm lead.
        ("ORDERS_TABLE".to_owned(), config.orders_table.clone()),
        (
            "PREWARM_LEAD_SECONDS".to_owned(),
            config.prewarm_lead.as_secs().to_string(),
        ),
        ("RUST_LOG".to_owned(), "info".to_owned()),
        ("LOG_FORMAT".to_owned(), "json".to_owned()),
        (
            "REDIS_TIMEOUT_MS".to_owned(),
            config.redis_timeout.as_millis().to_string(),
        ),
        (
            "SQS_TIMEOUT_MS".to_owned(),
            config.sqs_timeout.as_millis().to_string(),
        ),
        (
            "SALE_CACHE_SECONDS".to_owned(),
            config.sale_cache_ttl.as_secs().to_string(),
        ),
        (
            "RATE_USER_PER_SEC".to_owned(),
            config.rate_limits.user_per_sec.to_string(),
        ),
        (
            "RATE_USER_BURST".to_owned(),
            config.rate_limits.user_burst.to_string(),
        ),
        (
            "RATE_IP_PER_SEC".to_owned(),
            config.rate_limits.ip_per_sec.to_string(),
        ),
        (
            "RATE_IP_BURST".to_owned(),
            config.rate_limits.ip_burst.to_string(),
        ),
        (
            "METRICS_NAMESPACE".to_owned(),
            config.metrics_namespace.clone(),
        ),
    ];
    let optional = [
        ("ORDERS_QUEUE_URL", config.orders_queue_url.clone()),
        ("ORDERS_DLQ_URL", config.orders_dlq_url.clone()),
        ("REDIS_AUTH_SECRET_ARN", config.secrets.redis_auth.clone()),
        ("GATE_SECRET_ARN", config.secrets.gate.clone()),
    ];
    let forwarded = [
        "AWS_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ]
    .map(|name| (name, std::env::var(name).ok()));
    for (name, value) in optional.into_iter().chain(forwarded) {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            env.push((name.to_owned(), value));
        }
    }
    env
}

/// `events/purchase.json`, the real-shaped API Gateway v2 event.
pub const PURCHASE_EVENT: &str = include_str!("../../events/purchase.json");

/// `events/purchase.json` aimed at `sale_id`, from the buyer `sub` with its
/// own `Idempotency-Key`, as the JWT authorizer would pass it on.
pub fn purchase_event(
    sale_id: &str,
    sub: &str,
    idempotency_key: &str,
) -> Result<String, serde_json::Error> {
    let mut event: serde_json::Value = serde_json::from_str(PURCHASE_EVENT)?;
    let path = format!("/sales/{sale_id}/purchase");
    event["rawPath"] = path.clone().into();
    event["pathParameters"]["saleId"] = sale_id.into();
    event["requestContext"]["http"]["path"] = path.into();
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub.into();
    event["headers"]["idempotency-key"] = idempotency_key.into();
    serde_json::to_string(&event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A blocking one-shot HTTP/1.1 client (`Connection: close`): enough to
    /// drive the server without depending on a client stack.
    fn call(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, HashMap<String, String>, String) {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status = lines.next().unwrap().split_whitespace().nth(1).unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        (status.parse().unwrap(), headers, body.to_owned())
    }

    async fn call_async(
        addr: SocketAddr,
        method: &'static str,
        path: String,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    ) -> (u16, HashMap<String, String>, String) {
        tokio::task::spawn_blocking(move || call(addr, method, &path, &headers, &body))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn next_long_polls_then_response_round_trips() {
        let api = RuntimeApi::start("purchase", FUNCTION_TIMEOUT)
            .await
            .unwrap();
        let addr = api.addr();
        // The poll goes out before any event exists: it must wait, not fail.
        let poll = tokio::spawn(call_async(addr, "GET", NEXT.into(), vec![], String::new()));
        let polled = tokio::time::timeout(Duration::from_secs(5), async {
            while api.first_poll().is_none() {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(polled.is_ok(), "the poll never arrived");
        assert!(!poll.is_finished(), "/next answered with nothing queued");

        let mut invocation = api.invoke(r#"{"hello":"world"}"#);
        let (status, headers, body) = poll.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, r#"{"hello":"world"}"#);
        let id = headers["lambda-runtime-aws-request-id"].clone();
        assert_eq!(id, invocation.request_id);
        let deadline: u128 = headers["lambda-runtime-deadline-ms"].parse().unwrap();
        assert!(deadline > epoch_nanos() / 1_000_000);
        assert!(headers["lambda-runtime-invoked-function-arn"].ends_with(":function:purchase"));
        assert!(headers["lambda-runtime-trace-id"].starts_with("Root=1-"));
        assert_eq!(headers["content-type"], "application/json");

        let answer = r#"{"statusCode":202,"body":"{}"}"#;
        let (status, _, _) = call_async(
            addr,
            "POST",
            format!("{INVOCATION}{id}/response"),
            vec![("content-type", "application/json")],
            answer.into(),
        )
        .await;
        assert_eq!(status, 202);
        let outcome = invocation.answer().await.unwrap();
        assert!(!outcome.is_error());
        assert_eq!(outcome.http_status(), Some(202));
        assert!(outcome.delivered_at.unwrap() <= outcome.answered_at);

        // A second answer for the same id is refused.
        let (status, _, body) = call_async(
            addr,
            "POST",
            format!("{INVOCATION}{id}/response"),
            vec![],
            answer.into(),
        )
        .await;
        assert_eq!(status, 400, "{body}");
    }

    #[tokio::test]
    async fn invocation_and_init_errors_are_captured() {
        let mut api = RuntimeApi::start("purchase", FUNCTION_TIMEOUT)
            .await
            .unwrap();
        let addr = api.addr();
        let mut invocation = api.invoke("{}");
        let (_, headers, _) = call_async(addr, "GET", NEXT.into(), vec![], String::new()).await;
        let id = headers["lambda-runtime-aws-request-id"].clone();
        let (status, _, _) = call_async(
            addr,
            "POST",
            format!("{INVOCATION}{id}/error"),
            vec![(ERROR_TYPE, "unhandled")],
            r#"{"errorType":"boom","errorMessage":"it broke"}"#.into(),
        )
        .await;
        assert_eq!(status, 202);
        let outcome = invocation.answer().await.unwrap();
        assert_eq!(outcome.error_type.as_deref(), Some("unhandled"));
        assert!(String::from_utf8_lossy(&outcome.body).contains("it broke"));

        let (status, _, _) = call_async(
            addr,
            "POST",
            INIT_ERROR.into(),
            vec![(ERROR_TYPE, "Runtime.InitError")],
            r#"{"errorType":"Config","errorMessage":"REDIS_URL is required"}"#.into(),
        )
        .await;
        assert_eq!(status, 202);
        let init = api.init_error().await.unwrap();
        assert_eq!(init.error_type, "Runtime.InitError");
        assert!(String::from_utf8_lossy(&init.body).contains("REDIS_URL"));

        let (status, _, _) = call_async(
            addr,
            "GET",
            "/2018-06-01/nope".into(),
            vec![],
            String::new(),
        )
        .await;
        assert_eq!(status, 404);
    }

    #[tokio::test]
    async fn dropping_the_server_ends_a_waiting_poll() {
        let api = RuntimeApi::start("purchase", FUNCTION_TIMEOUT)
            .await
            .unwrap();
        let addr = api.addr();
        let poll = tokio::spawn(call_async(addr, "GET", NEXT.into(), vec![], String::new()));
        tokio::time::timeout(Duration::from_secs(5), async {
            while api.first_poll().is_none() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        drop(api);
        let (status, _, _) = tokio::time::timeout(Duration::from_secs(5), poll)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status, 500);
    }

    /// The whole measurement against a stand-in function: a shell script
    /// speaking the protocol with curl (polls, answers, polls again).
    #[tokio::test]
    async fn measures_a_stand_in_function() {
        let dir = std::env::temp_dir().join(format!("seckill-rt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("bootstrap");
        std::fs::write(
            &script,
            r#"#!/bin/sh
set -e
base="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime"
[ "$GREETING" = hi ] || { curl -sf -X POST -H 'Lambda-Runtime-Function-Error-Type: Runtime.InitError' -d '{"errorMessage":"no GREETING"}' "$base/init/error"; exit 1; }
id=$(curl -sf -D - -o /dev/null "$base/invocation/next" | tr -d '\r' | sed -n 's/^[Ll]ambda-[Rr]untime-[Aa]ws-[Rr]equest-[Ii]d: //p')
curl -sf -X POST -d '{"statusCode":410,"body":"{}"}' "$base/invocation/$id/response" > /dev/null
curl -sf "$base/invocation/next" > /dev/null
"#,
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

        let env = vec![("GREETING".to_owned(), "hi".to_owned())];
        let events = vec!["{}".to_owned(); 3];
        let measured = measure_cold_start(&script, &env, &events).await.unwrap();
        assert_eq!(measured.runs.len(), 3);
        assert_eq!(measured.statuses(), vec![(Some(410), 3)]);
        let answer = measured.to_first_answer().unwrap();
        assert!(answer.min <= answer.median);
        let init = measured.init().unwrap();
        assert!(init.min <= answer.min);
        assert!(measured.peak_rss_bytes().unwrap() > 0);
        assert!(measured.binary_bytes > 0);

        // Without the variable, the stand-in reports an init error.
        let err = measure_cold_start(&script, &[], &events[..1])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ColdStartError::InitFailed { error_type, .. } if error_type == "Runtime.InitError"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_purchase_function_env_is_all_its_loader_reads() {
        let lookup = |name: &str| match name {
            "REDIS_URL" => Some("redis://127.0.0.1:1".to_owned()),
            "ORDERS_QUEUE_URL" | "ORDERS_DLQ_URL" => Some("http://127.0.0.1:1/0/q".to_owned()),
            "SALES_TABLE" | "ORDERS_TABLE" => Some("t".to_owned()),
            "REDIS_AUTH_SECRET_ARN" => Some("x-redis".to_owned()),
            "GATE_SECRET_ARN" => Some("x-gate".to_owned()),
            _ => None,
        };
        let config = purchase::config(&lookup).unwrap();
        let env: HashMap<String, String> = function_env(&config).into_iter().collect();
        // What the measured binary's own loader reads, every name present.
        let read = crate::consistency::reads(purchase::config).unwrap();
        let missing: Vec<&String> = read.iter().filter(|n| !env.contains_key(*n)).collect();
        assert!(missing.is_empty(), "{missing:?}");
        let parsed = purchase::config(&|name| env.get(name).cloned()).unwrap();
        assert_eq!(parsed.secrets, config.secrets);
        assert_eq!(parsed.orders_table, "t");
    }

    #[test]
    fn purchase_event_targets_the_sale_and_buyer() {
        let event: serde_json::Value =
            serde_json::from_str(&purchase_event("cs-1", "buyer-7", "key-7").unwrap()).unwrap();
        assert_eq!(event["rawPath"], "/sales/cs-1/purchase");
        assert_eq!(event["pathParameters"]["saleId"], "cs-1");
        assert_eq!(
            event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"],
            "buyer-7"
        );
        assert_eq!(event["headers"]["idempotency-key"], "key-7");
    }

    #[test]
    fn median_of_even_and_odd_counts() {
        let ms = Duration::from_millis;
        let odd = spread(vec![ms(5), ms(1), ms(3)]).unwrap();
        assert_eq!((odd.min, odd.median), (ms(1), ms(3)));
        let even = spread(vec![ms(4), ms(1), ms(2), ms(8)]).unwrap();
        assert_eq!((even.min, even.median), (ms(1), ms(3)));
        assert!(spread(vec![]).is_none());
    }
}
