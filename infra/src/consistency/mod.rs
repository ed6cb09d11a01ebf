//! Template–code consistency: what `template.yaml` declares against what the
//! workspace builds, reads, serves and feeds. [`check`] lists every
//! mismatch; the consistency test runs it on the repository (none allowed)
//! and on copies with one side changed (each change must be reported).
//!
//! - Template side ([`Template::from_json`]): the template as JSON, its
//!   CloudFormation short tags already expanded to the long form (`!Ref x`
//!   is `{"Ref": "x"}`, `!If` is `{"Fn::If": [...]}`). Per
//!   `AWS::Serverless::Function`: the binary `sam build` builds, the
//!   environment (Globals merged under the function's own; both branches of
//!   an `Fn::If` count, `AWS::NoValue` is not set) and the triggers.
//! - Code side ([`Code::from_repo`]): the workspace's binaries (`cargo
//!   metadata`), each function's configuration loader (run with a recording
//!   lookup to learn what it reads), the local gateway's routes, the routes
//!   the HTTP handlers dispatch on, the files in `events/`, and any direct
//!   environment read in function code (which the loaders would not see).
//!
//! Allowed without a match on the other side: the variables Lambda itself
//! provides ([`LAMBDA_PROVIDED`]) may be read without being set, and
//! `RUST_LOG`/`LOG_FORMAT` ([`TELEMETRY`], read by `telemetry::init` in
//! every function's `main.rs`, outside the loader) may be set; the local
//! gateway may serve the routes of [`LOCAL_ONLY_ROUTES`] (the pages and the
//! local token endpoint) that the template does not declare.
//!
//! # Layout
//!
//! - [`template`]: the template side: functions, their environment and
//!   triggers.
//! - [`code`]: the code side: packages, loaders, the local gateway's routes,
//!   `events/`, direct environment reads.
//! - [`mismatch`]: every kind of [`Mismatch`] and how it reads.
//! - [`checks`]: binaries, environment and routes, template against code.
//! - [`events`]: each trigger's file in `events/` against what AWS sends.
//! - here: what is allowed without a match, and [`check`].

mod checks;
mod code;
mod events;
mod mismatch;
pub mod stack;
mod template;

pub use code::{
    Code, CodeError, LOCAL_ONLY_ROUTES, LOCAL_SERVER, LocalRoute, Package, direct_env_reads,
    is_local_only, packages, reads,
};
pub use mismatch::Mismatch;
pub use template::{Template, TemplateError, TemplateFunction, Trigger, TriggerKind};

/// Set by Lambda in every execution environment; code may read them
/// without the template setting them (and the template may not set them).
pub const LAMBDA_PROVIDED: &[&str] = &[
    "_HANDLER",
    "_X_AMZN_TRACE_ID",
    "AWS_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_DEFAULT_REGION",
    "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_FUNCTION_VERSION",
    "AWS_LAMBDA_INITIALIZATION_TYPE",
    "AWS_LAMBDA_LOG_FORMAT",
    "AWS_LAMBDA_LOG_GROUP_NAME",
    "AWS_LAMBDA_LOG_LEVEL",
    "AWS_LAMBDA_LOG_STREAM_NAME",
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_REGION",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_XRAY_CONTEXT_MISSING",
    "AWS_XRAY_DAEMON_ADDRESS",
    "LAMBDA_RUNTIME_DIR",
    "LAMBDA_TASK_ROOT",
    "LANG",
    "LD_LIBRARY_PATH",
    "PATH",
    "TZ",
];

/// Read by `seckill_shared::observe::telemetry::init` (every `main.rs` calls it)
/// straight from the process environment: the template may set them on
/// any function, and need not.
pub const TELEMETRY: &[&str] = &["RUST_LOG", "LOG_FORMAT"];

/// Files allowed to read the process environment directly: the lookup
/// itself, and telemetry (see [`TELEMETRY`]; it also reads the
/// Lambda-provided `AWS_LAMBDA_FUNCTION_NAME`).
pub const DIRECT_ENV_ALLOWED: &[&str] = &[
    "shared/src/config.rs",
    "shared/src/observe/telemetry.rs",
    // The simulation's knobs (`make simulate`): a module of the test build only.
    "shared/src/sim/tests.rs",
];

/// Every mismatch between `template` and `code`, in a stable order.
pub fn check(template: &Template, code: &Code) -> Vec<Mismatch> {
    let mut found = Vec::new();
    checks::check_binaries(template, code, &mut found);
    checks::check_environment(template, code, &mut found);
    checks::check_routes(template, code, &mut found);
    events::check_events(template, code, &mut found);
    found
}
