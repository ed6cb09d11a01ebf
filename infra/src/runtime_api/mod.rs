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
//!
//! # Layout
//!
//! - [`server`]: the HTTP side: `/next`, `/response`, `/error`,
//!   `/init/error` and the Runtime API's answers.
//! - [`cold_start`]: [`measure_cold_start`]: a fresh environment per run,
//!   the timings, the peak RSS, and why a run failed.
//! - [`purchase_input`]: what the purchase function is given: the
//!   environment `template.yaml` sets and `events/purchase.json`.
//! - here: the server's state, [`RuntimeApi`] and [`Invocation`].

mod cold_start;
mod purchase_input;
mod server;
#[cfg(test)]
mod tests;

pub use cold_start::{
    ColdStart, ColdStartError, ColdStartRun, FUNCTION_MEMORY_MB, FUNCTION_TIMEOUT, RUN_DEADLINE,
    Spread, measure_cold_start,
};
pub use purchase_input::{PURCHASE_EVENT, function_env, purchase_event};

use hyper::body::Bytes;
use server::{accept_loop, epoch_nanos};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
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
