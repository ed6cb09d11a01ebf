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

use crate::invoke::{Function, Handler, Loader};
use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

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
pub const DIRECT_ENV_ALLOWED: &[&str] =
    &["shared/src/config.rs", "shared/src/observe/telemetry.rs"];

/// What `sam build` builds for one `AWS::Serverless::Function`, and how it
/// is configured and triggered.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateFunction {
    pub logical_id: String,
    /// `Metadata.BuildMethod` (`rust-cargolambda` for every function here).
    pub build_method: Option<String>,
    /// `Metadata.BuildProperties.Binary`: the Cargo binary cargo-lambda builds.
    pub binary: Option<String>,
    /// Variable name → value as written (long-form intrinsics), Globals
    /// merged under the function's own.
    pub env: BTreeMap<String, Json>,
    pub triggers: Vec<Trigger>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// The key under `Events`.
    pub name: String,
    pub kind: TriggerKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerKind {
    /// An `HttpApi` route; `public` when no authorizer guards it.
    Http {
        method: String,
        path: String,
        public: bool,
    },
    Sqs,
    /// `Schedule`: an EventBridge rule (`source: aws.events`).
    Schedule,
    /// `ScheduleV2`: EventBridge Scheduler (`source: aws.scheduler`).
    ScheduleV2,
    /// Any other event type: the checker does not know its event file yet.
    Other(String),
}

impl Trigger {
    pub fn route_key(&self) -> Option<String> {
        match &self.kind {
            TriggerKind::Http { method, path, .. } => Some(format!("{method} {path}")),
            _ => None,
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            TriggerKind::Http { method, path, .. } => {
                write!(f, "{} (HttpApi {method} {path})", self.name)
            }
            TriggerKind::Sqs => write!(f, "{} (SQS)", self.name),
            TriggerKind::Schedule => write!(f, "{} (Schedule)", self.name),
            TriggerKind::ScheduleV2 => write!(f, "{} (ScheduleV2)", self.name),
            TriggerKind::Other(kind) => write!(f, "{} ({kind})", self.name),
        }
    }
}

/// The functions of a template, by logical id.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub functions: BTreeMap<String, TemplateFunction>,
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the template has no Resources map")]
    NoResources,
}

impl Template {
    /// Reads the functions out of a template whose short tags are expanded.
    pub fn from_json(template: &Json) -> Result<Self, TemplateError> {
        let resources = template
            .get("Resources")
            .and_then(Json::as_object)
            .ok_or(TemplateError::NoResources)?;
        let globals = template.pointer("/Globals/Function");
        let global_env = variables(globals.and_then(|g| g.get("Environment")));
        let default_http_auth = template
            .pointer("/Globals/HttpApi/Auth/DefaultAuthorizer")
            .is_some();
        let mut functions = BTreeMap::new();
        for (id, resource) in resources {
            if resource.get("Type").and_then(Json::as_str) != Some("AWS::Serverless::Function") {
                continue;
            }
            let props = resource.get("Properties");
            let mut env = global_env.clone();
            env.extend(variables(props.and_then(|p| p.get("Environment"))));
            let mut triggers = Vec::new();
            if let Some(events) = props
                .and_then(|p| p.get("Events"))
                .and_then(Json::as_object)
            {
                for (name, event) in events {
                    triggers.push(Trigger {
                        name: name.clone(),
                        kind: trigger_kind(event, resources, default_http_auth),
                    });
                }
            }
            functions.insert(
                id.clone(),
                TemplateFunction {
                    logical_id: id.clone(),
                    build_method: text(resource.pointer("/Metadata/BuildMethod")),
                    binary: text(resource.pointer("/Metadata/BuildProperties/Binary")),
                    env,
                    triggers,
                },
            );
        }
        Ok(Self { functions })
    }
}

fn text(value: Option<&Json>) -> Option<String> {
    value.and_then(Json::as_str).map(str::to_owned)
}

/// A literal as the string Lambda would put in the environment.
fn scalar(value: &Json) -> Option<String> {
    match value {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `{"Ref": "AWS::NoValue"}`, or an `Fn::If` both of whose branches are.
fn is_no_value(value: &Json) -> bool {
    if value.get("Ref").and_then(Json::as_str) == Some("AWS::NoValue") {
        return true;
    }
    match if_branches(value) {
        Some((yes, no)) => is_no_value(yes) && is_no_value(no),
        None => false,
    }
}

/// `{"Ref": ...}` or `{"Fn::...": ...}`.
fn is_intrinsic(value: &Json) -> bool {
    value.as_object().is_some_and(|map| {
        map.len() == 1
            && map
                .keys()
                .all(|k| k == "Ref" || k == "Condition" || k.starts_with("Fn::"))
    })
}

/// The two branches of `{"Fn::If": [condition, yes, no]}`.
fn if_branches(value: &Json) -> Option<(&Json, &Json)> {
    let args = value.as_object()?.get("Fn::If")?.as_array()?;
    match args.as_slice() {
        [_, yes, no] => Some((yes, no)),
        _ => None,
    }
}

/// `Environment.Variables`, with every variable either branch of an
/// `Fn::If` (on the map or on a value) may set.
fn variables(environment: Option<&Json>) -> BTreeMap<String, Json> {
    fn collect(vars: &Json, out: &mut BTreeMap<String, Json>) {
        if let Some((yes, no)) = if_branches(vars) {
            collect(yes, out);
            collect(no, out);
        } else if is_no_value(vars) || is_intrinsic(vars) {
            // No variables, or a map only CloudFormation can compute: none
            // counts as set, so what the code reads from it is reported.
        } else if let Some(map) = vars.as_object() {
            for (name, value) in map {
                if !is_no_value(value) {
                    out.entry(name.clone()).or_insert_with(|| value.clone());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Some(vars) = environment.and_then(|e| e.get("Variables")) {
        collect(vars, &mut out);
    }
    out
}

fn trigger_kind(
    event: &Json,
    resources: &serde_json::Map<String, Json>,
    default_http_auth: bool,
) -> TriggerKind {
    let kind = event.get("Type").and_then(Json::as_str).unwrap_or_default();
    let props = event.get("Properties");
    match kind {
        "HttpApi" => {
            let get = |key: &str| props.and_then(|p| p.get(key)).and_then(Json::as_str);
            // The API's default authorizer guards a route that names none.
            let api_default = match props.and_then(|p| p.pointer("/ApiId/Ref")) {
                Some(api) => api
                    .as_str()
                    .and_then(|api| resources.get(api))
                    .and_then(|api| api.pointer("/Properties/Auth/DefaultAuthorizer"))
                    .is_some(),
                None => default_http_auth,
            };
            let public = match props
                .and_then(|p| p.pointer("/Auth/Authorizer"))
                .and_then(Json::as_str)
            {
                Some(authorizer) => authorizer == "NONE",
                None => !api_default,
            };
            TriggerKind::Http {
                method: get("Method").unwrap_or("ANY").to_ascii_uppercase(),
                path: get("Path").unwrap_or("$default").to_owned(),
                public,
            }
        }
        "SQS" => TriggerKind::Sqs,
        "Schedule" => TriggerKind::Schedule,
        "ScheduleV2" => TriggerKind::ScheduleV2,
        other => TriggerKind::Other(other.to_owned()),
    }
}

/// Routes the local gateway serves that no AWS function does, so
/// `template.yaml` does not declare them: the pages and the local token
/// endpoint exist only in `seckill-local`. On AWS the pages are static files
/// in the pages bucket behind CloudFront (the template's `PagesBucket` and
/// `PagesDistribution`, filled by `make pages`), and tokens come from the
/// identity provider. `METHOD /path`, where a `{...}` segment stands for any
/// one segment (whatever the gateway calls it). Every other route served
/// locally and not in the template is still a mismatch.
pub const LOCAL_ONLY_ROUTES: &[&str] = &[
    // The buyer page (web/index.html).
    "GET /",
    // The operator dashboard (web/ops.html).
    "GET /ops",
    // web/assets/*: css, js, svg.
    "GET /assets/{file}",
    // window.SECKILL_CONFIG for the local stack (on AWS, `make pages`
    // writes the same file into the bucket).
    "GET /config.js",
    // Mints a local JWT for a user name: a convenience of the local stack.
    "POST /local/token",
];

/// Whether `method path` (a route of the local gateway's table) is one of
/// [`LOCAL_ONLY_ROUTES`].
pub fn is_local_only(method: &str, path: &str) -> bool {
    let shape = |route: &str| -> String {
        route
            .split('/')
            .map(|segment| {
                if segment.starts_with('{') && segment.ends_with('}') {
                    "{}"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    };
    let route = shape(&format!("{method} {path}"));
    LOCAL_ONLY_ROUTES.iter().any(|local| shape(local) == route)
}

/// A workspace package and its binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    /// Its directory relative to the workspace root (`functions/purchase`).
    pub dir: String,
    pub bins: Vec<String>,
}

impl Package {
    /// A function crate: one directory under `functions/`.
    pub fn is_function(&self) -> bool {
        self.dir.starts_with("functions/")
    }
}

/// One route of the local gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRoute {
    pub method: String,
    pub path: String,
    /// The binary it invokes.
    pub function: String,
    pub public: bool,
}

/// What serves the local gateway's own routes ([`crate::gateway::LOCAL_ROUTES`]):
/// `seckill-local` itself, no function of the template.
pub const LOCAL_SERVER: &str = "seckill-local";

impl LocalRoute {
    /// The local gateway's tables: the functions' routes
    /// ([`crate::gateway::ROUTES`]) and its own ([`crate::gateway::LOCAL_ROUTES`],
    /// served by [`LOCAL_SERVER`]; each must be one of [`LOCAL_ONLY_ROUTES`]).
    pub fn gateway() -> Vec<LocalRoute> {
        let functions = crate::gateway::ROUTES.iter().map(|r| LocalRoute {
            method: r.method.to_owned(),
            path: r.path.to_owned(),
            function: r.target.function().to_owned(),
            public: !r.authorized,
        });
        let own = crate::gateway::LOCAL_ROUTES.iter().map(|r| LocalRoute {
            method: r.method.to_owned(),
            path: r.path.to_owned(),
            function: LOCAL_SERVER.to_owned(),
            public: true,
        });
        functions.chain(own).collect()
    }
}

/// What the code says: built, read, served, fed.
#[derive(Clone)]
pub struct Code {
    pub packages: Vec<Package>,
    /// Each function's configuration loader, by binary.
    pub loaders: BTreeMap<String, Loader>,
    pub routes: Vec<LocalRoute>,
    /// The route keys an HTTP handler dispatches on, by binary (only the
    /// functions that route on `routeKey`).
    pub handler_routes: BTreeMap<String, Vec<String>>,
    /// `events/*.json` by file name.
    pub events: BTreeMap<String, String>,
    /// `file:line: text` of each direct environment read in function code.
    pub direct_env_reads: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    #[error("cargo metadata: {0}")]
    Metadata(String),
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Code {
    /// The facts of the workspace at `root`.
    pub fn from_repo(root: &Path) -> Result<Self, CodeError> {
        Ok(Self {
            packages: packages(root)?,
            loaders: Function::ALL
                .into_iter()
                .map(|f| (f.name().to_owned(), f.loader()))
                .collect(),
            routes: LocalRoute::gateway(),
            handler_routes: BTreeMap::from([
                (
                    "orders-api".to_owned(),
                    orders_api::handler::ROUTES.map(str::to_owned).to_vec(),
                ),
                (
                    "admin-api".to_owned(),
                    admin_api::handler::ROUTES.map(str::to_owned).to_vec(),
                ),
            ]),
            events: event_files(&root.join("events"))?,
            direct_env_reads: direct_env_reads(root)?,
        })
    }
}

/// The workspace's packages from `cargo metadata --no-deps`.
pub fn packages(root: &Path) -> Result<Vec<Package>, CodeError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .map_err(|e| CodeError::Metadata(e.to_string()))?;
    if !out.status.success() {
        return Err(CodeError::Metadata(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let meta: Json =
        serde_json::from_slice(&out.stdout).map_err(|e| CodeError::Metadata(e.to_string()))?;
    let workspace = meta
        .get("workspace_root")
        .and_then(Json::as_str)
        .map(PathBuf::from)
        .ok_or_else(|| CodeError::Metadata("no workspace_root".into()))?;
    let mut packages = Vec::new();
    for package in meta
        .get("packages")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let manifest = package
            .get("manifest_path")
            .and_then(Json::as_str)
            .map(Path::new)
            .ok_or_else(|| CodeError::Metadata("a package has no manifest_path".into()))?;
        let dir = manifest
            .parent()
            .and_then(|d| d.strip_prefix(&workspace).ok())
            .map(|d| d.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        let bins = package
            .get("targets")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter(|t| {
                t.get("kind")
                    .and_then(Json::as_array)
                    .is_some_and(|k| k.iter().any(|k| k == "bin"))
            })
            .filter_map(|t| text(t.get("name")))
            .collect();
        packages.push(Package {
            name: text(package.get("name")).unwrap_or_default(),
            dir,
            bins,
        });
    }
    Ok(packages)
}

fn read(path: &Path) -> Result<String, CodeError> {
    std::fs::read_to_string(path).map_err(|source| CodeError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, CodeError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CodeError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    Ok(paths)
}

fn event_files(dir: &Path) -> Result<BTreeMap<String, String>, CodeError> {
    let mut events = BTreeMap::new();
    for path in read_dir(dir)? {
        if path.extension().is_some_and(|e| e == "json") {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            events.insert(name, read(&path)?);
        }
    }
    Ok(events)
}

/// Lines of `shared/src` and `functions/*/src` that read the process
/// environment themselves (`env::var`, `env::var_os`, `env::vars`), outside
/// [`DIRECT_ENV_ALLOWED`]. A file's `#[cfg(test)]` tail is not looked at.
pub fn direct_env_reads(root: &Path) -> Result<Vec<String>, CodeError> {
    let mut dirs = vec![root.join("shared/src")];
    for function in read_dir(&root.join("functions"))? {
        dirs.push(function.join("src"));
    }
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        if !dir.is_dir() {
            continue;
        }
        for path in read_dir(&dir)? {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let relative = path
            .strip_prefix(root)
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        if DIRECT_ENV_ALLOWED.contains(&relative.as_str()) {
            continue;
        }
        for (number, line) in read(&path)?.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if !code.starts_with("//") && code.contains("env::var") {
                found.push(format!("{relative}:{}: {}", number + 1, code.trim_end()));
            }
        }
    }
    Ok(found)
}

/// The names `loader` looks up when every name has a value: everything it
/// can read. Each value is `1`, which every setting parses.
pub fn reads(loader: Loader) -> Result<BTreeSet<String>, String> {
    let asked = RefCell::new(BTreeSet::new());
    let record = |name: &str| {
        asked.borrow_mut().insert(name.to_owned());
        Some("1".to_owned())
    };
    loader(&record).map_err(|e| e.to_string())?;
    Ok(asked.into_inner())
}

/// One disagreement between the template and the code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    NotCargoLambda {
        function: String,
    },
    NoBinary {
        function: String,
        binary: String,
    },
    NoTemplateFunction {
        binary: String,
        package: String,
    },
    NoLoader {
        function: String,
        binary: String,
    },
    LoaderFailed {
        binary: String,
        error: String,
    },
    ReadNotSet {
        function: String,
        binary: String,
        variable: String,
    },
    SetNotRead {
        function: String,
        binary: String,
        variable: String,
    },
    ValueRefused {
        function: String,
        error: String,
    },
    DirectEnvRead {
        location: String,
    },
    RouteNotServed {
        route: String,
        function: String,
    },
    RouteNotInTemplate {
        route: String,
        binary: String,
    },
    RouteTarget {
        route: String,
        template: String,
        local: String,
    },
    RouteAuth {
        route: String,
        template_public: bool,
    },
    HandlerMissesRoute {
        binary: String,
        route: String,
    },
    HandlerRouteNotInTemplate {
        binary: String,
        route: String,
    },
    UnknownTrigger {
        function: String,
        trigger: String,
    },
    NoEvent {
        function: String,
        trigger: String,
        expected: String,
    },
    EventRefused {
        file: String,
        why: String,
    },
    OrphanEvent {
        file: String,
    },
}

fn public_word(public: bool) -> &'static str {
    if public {
        "public (Authorizer: NONE)"
    } else {
        "behind the JWT authorizer"
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NotCargoLambda { function } => write!(
                f,
                "{function}: Metadata must say BuildMethod: rust-cargolambda and BuildProperties.Binary"
            ),
            Mismatch::NoBinary { function, binary } => write!(
                f,
                "{function} builds binary {binary:?}, which no workspace crate defines"
            ),
            Mismatch::NoTemplateFunction { binary, package } => write!(
                f,
                "binary {binary:?} of function crate {package} has no AWS::Serverless::Function in template.yaml"
            ),
            Mismatch::NoLoader { function, binary } => write!(
                f,
                "{function} ({binary}): no configuration loader in seckill_infra::invoke::Function"
            ),
            Mismatch::LoaderFailed { binary, error } => {
                write!(f, "{binary}: its configuration loader failed: {error}")
            }
            Mismatch::ReadNotSet {
                function,
                binary,
                variable,
            } => write!(
                f,
                "{binary} reads {variable}, which {function} does not set (Environment or Globals)"
            ),
            Mismatch::SetNotRead {
                function,
                binary,
                variable,
            } => write!(f, "{function} sets {variable}, which {binary} never reads"),
            Mismatch::ValueRefused { function, error } => {
                write!(
                    f,
                    "{function}: the loader refuses the template's value: {error}"
                )
            }
            Mismatch::DirectEnvRead { location } => write!(
                f,
                "{location}: reads the environment directly; go through the function's config loader so the checker sees it"
            ),
            Mismatch::RouteNotServed { route, function } => write!(
                f,
                "{route} ({function}) is in template.yaml but the local gateway does not serve it"
            ),
            Mismatch::RouteNotInTemplate { route, binary } => write!(
                f,
                "{route} is served by the local gateway ({binary}) but not declared in template.yaml"
            ),
            Mismatch::RouteTarget {
                route,
                template,
                local,
            } => write!(
                f,
                "{route} goes to {template} in template.yaml but to {local} in the local gateway"
            ),
            Mismatch::RouteAuth {
                route,
                template_public,
            } => write!(
                f,
                "{route} is {} in template.yaml but {} in the local gateway",
                public_word(*template_public),
                public_word(!*template_public)
            ),
            Mismatch::HandlerMissesRoute { binary, route } => write!(
                f,
                "{route} is routed to {binary} in template.yaml but its handler does not dispatch it"
            ),
            Mismatch::HandlerRouteNotInTemplate { binary, route } => write!(
                f,
                "the {binary} handler dispatches {route}, which template.yaml does not route to it"
            ),
            Mismatch::UnknownTrigger { function, trigger } => write!(
                f,
                "{function}: trigger {trigger} is of a type the checker has no event file rule for"
            ),
            Mismatch::NoEvent {
                function,
                trigger,
                expected,
            } => write!(
                f,
                "{function}: trigger {trigger} has no event in events/: expected {expected}"
            ),
            Mismatch::EventRefused { file, why } => write!(f, "events/{file}: {why}"),
            Mismatch::OrphanEvent { file } => {
                write!(f, "events/{file} belongs to no trigger of template.yaml")
            }
        }
    }
}

/// Every mismatch between `template` and `code`, in a stable order.
pub fn check(template: &Template, code: &Code) -> Vec<Mismatch> {
    let mut found = Vec::new();
    check_binaries(template, code, &mut found);
    check_environment(template, code, &mut found);
    check_routes(template, code, &mut found);
    check_events(template, code, &mut found);
    found
}

fn check_binaries(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    let built: BTreeSet<&str> = code
        .packages
        .iter()
        .flat_map(|p| p.bins.iter().map(String::as_str))
        .collect();
    for function in template.functions.values() {
        match (&function.build_method, &function.binary) {
            (Some(method), Some(binary)) if method == "rust-cargolambda" => {
                if !built.contains(binary.as_str()) {
                    found.push(Mismatch::NoBinary {
                        function: function.logical_id.clone(),
                        binary: binary.clone(),
                    });
                }
            }
            _ => found.push(Mismatch::NotCargoLambda {
                function: function.logical_id.clone(),
            }),
        }
    }
    let deployed: BTreeSet<&str> = template
        .functions
        .values()
        .filter_map(|f| f.binary.as_deref())
        .collect();
    for package in code.packages.iter().filter(|p| p.is_function()) {
        for binary in &package.bins {
            if !deployed.contains(binary.as_str()) {
                found.push(Mismatch::NoTemplateFunction {
                    binary: binary.clone(),
                    package: package.name.clone(),
                });
            }
        }
    }
    for location in &code.direct_env_reads {
        found.push(Mismatch::DirectEnvRead {
            location: location.clone(),
        });
    }
}

/// The functions that name a binary, with it (whether or not the
/// workspace builds it: [`check_binaries`] says so once, and its routes,
/// variables and events are still the template's).
fn deployed_functions(template: &Template) -> impl Iterator<Item = (&TemplateFunction, String)> {
    template
        .functions
        .values()
        .filter_map(|f| f.binary.clone().map(|b| (f, b)))
}

fn check_environment(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    for (function, binary) in deployed_functions(template) {
        let id = &function.logical_id;
        let Some(&loader) = code.loaders.get(&binary) else {
            // A binary the workspace lacks is reported as such; one it
            // builds must have its loader known here.
            if code.packages.iter().any(|p| p.bins.contains(&binary)) {
                found.push(Mismatch::NoLoader {
                    function: id.clone(),
                    binary,
                });
            }
            continue;
        };
        let read = match reads(loader) {
            Ok(read) => read,
            Err(error) => {
                found.push(Mismatch::LoaderFailed { binary, error });
                continue;
            }
        };
        let unset: Vec<&String> = read
            .iter()
            .filter(|v| !function.env.contains_key(*v) && !LAMBDA_PROVIDED.contains(&v.as_str()))
            .collect();
        for variable in &unset {
            found.push(Mismatch::ReadNotSet {
                function: id.clone(),
                binary: binary.clone(),
                variable: (*variable).clone(),
            });
        }
        for variable in function.env.keys() {
            if !read.contains(variable) && !TELEMETRY.contains(&variable.as_str()) {
                found.push(Mismatch::SetNotRead {
                    function: id.clone(),
                    binary: binary.clone(),
                    variable: variable.clone(),
                });
            }
        }
        if !unset.is_empty() {
            // The loader would only refuse what is missing: said above.
            continue;
        }
        // The template's literal values through the real parsers. What
        // only CloudFormation resolves (a `Ref`, an `Fn::If`, ...) stands in
        // as `1`, as in [`reads`]: the deployer chooses parameters.
        let value_of = |name: &str| -> Option<String> {
            function
                .env
                .get(name)
                .map(|value| scalar(value).unwrap_or_else(|| "1".into()))
        };
        if let Err(err) = loader(&value_of) {
            found.push(Mismatch::ValueRefused {
                function: id.clone(),
                error: err.to_string(),
            });
        }
    }
}

fn check_routes(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    let mut declared: BTreeMap<String, (String, String, bool)> = BTreeMap::new();
    for (function, binary) in deployed_functions(template) {
        for trigger in &function.triggers {
            if let (Some(key), TriggerKind::Http { public, .. }) =
                (trigger.route_key(), &trigger.kind)
            {
                declared.insert(key, (function.logical_id.clone(), binary.clone(), *public));
            }
        }
    }
    let served: BTreeMap<String, &LocalRoute> = code
        .routes
        .iter()
        .map(|r| (format!("{} {}", r.method, r.path), r))
        .collect();
    for (route, (function, binary, public)) in &declared {
        match served.get(route) {
            None => found.push(Mismatch::RouteNotServed {
                route: route.clone(),
                function: function.clone(),
            }),
            Some(local) => {
                if &local.function != binary {
                    found.push(Mismatch::RouteTarget {
                        route: route.clone(),
                        template: binary.clone(),
                        local: local.function.clone(),
                    });
                }
                if local.public != *public {
                    found.push(Mismatch::RouteAuth {
                        route: route.clone(),
                        template_public: *public,
                    });
                }
            }
        }
    }
    for (route, local) in &served {
        if !declared.contains_key(route) && !is_local_only(&local.method, &local.path) {
            found.push(Mismatch::RouteNotInTemplate {
                route: route.clone(),
                binary: local.function.clone(),
            });
        }
    }
    for (binary, dispatched) in &code.handler_routes {
        let dispatched: BTreeSet<&String> = dispatched.iter().collect();
        let routed: BTreeSet<&String> = declared
            .iter()
            .filter(|(_, (_, b, _))| b == binary)
            .map(|(route, _)| route)
            .collect();
        for route in routed.difference(&dispatched) {
            found.push(Mismatch::HandlerMissesRoute {
                binary: binary.clone(),
                route: (*route).clone(),
            });
        }
        for route in dispatched.difference(&routed) {
            found.push(Mismatch::HandlerRouteNotInTemplate {
                binary: binary.clone(),
                route: (*route).clone(),
            });
        }
    }
}

fn check_events(template: &Template, code: &Code, found: &mut Vec<Mismatch>) {
    let parsed: BTreeMap<&String, Option<Json>> = code
        .events
        .iter()
        .map(|(name, raw)| (name, serde_json::from_str(raw).ok()))
        .collect();
    let mut claimed = BTreeSet::new();
    for (function, binary) in deployed_functions(template) {
        let id = &function.logical_id;
        let handler = Function::parse(&binary);
        for trigger in &function.triggers {
            let mut no_event = |expected: String| {
                found.push(Mismatch::NoEvent {
                    function: id.clone(),
                    trigger: trigger.to_string(),
                    expected,
                })
            };
            match &trigger.kind {
                TriggerKind::Http {
                    method,
                    path,
                    public,
                } => {
                    let key = format!("{method} {path}");
                    let files: Vec<&String> = parsed
                        .iter()
                        .filter(|(_, json)| {
                            json.as_ref()
                                .and_then(|j| j.get("routeKey"))
                                .and_then(Json::as_str)
                                == Some(key.as_str())
                        })
                        .map(|(name, _)| *name)
                        .collect();
                    if files.is_empty() {
                        no_event(format!("an events/*.json with \"routeKey\": {key:?}"));
                    }
                    for file in files {
                        claimed.insert(file.clone());
                        let why = handler_refuses(handler, &code.events[file]).or_else(|| {
                            http_event_problem(&code.events[file], method, path, *public)
                        });
                        if let Some(why) = why {
                            found.push(Mismatch::EventRefused {
                                file: file.clone(),
                                why,
                            });
                        }
                    }
                }
                TriggerKind::Sqs => {
                    let file = format!("{binary}.json");
                    let Some(raw) = code.events.get(&file) else {
                        no_event(format!("events/{file} (an SQS batch)"));
                        continue;
                    };
                    claimed.insert(file.clone());
                    if let Some(why) =
                        handler_refuses(handler, raw).or_else(|| sqs_event_problem(raw))
                    {
                        found.push(Mismatch::EventRefused { file, why });
                    }
                }
                TriggerKind::Schedule | TriggerKind::ScheduleV2 => {
                    let file = format!("schedule-{binary}.json");
                    let Some(raw) = code.events.get(&file) else {
                        no_event(format!("events/{file} (the schedule's event)"));
                        continue;
                    };
                    claimed.insert(file.clone());
                    let schedule = format!("{id}{}", trigger.name);
                    let v2 = trigger.kind == TriggerKind::ScheduleV2;
                    if let Some(why) = handler_refuses(handler, raw)
                        .or_else(|| schedule_event_problem(raw, &schedule, v2))
                    {
                        found.push(Mismatch::EventRefused { file, why });
                    }
                }
                TriggerKind::Other(_) => found.push(Mismatch::UnknownTrigger {
                    function: id.clone(),
                    trigger: trigger.to_string(),
                }),
            }
        }
    }
    for file in code.events.keys() {
        if !claimed.contains(file) {
            found.push(Mismatch::OrphanEvent { file: file.clone() });
        }
    }
}

/// Why the function's handler cannot take `raw` (its own event type).
fn handler_refuses(handler: Option<Function>, raw: &str) -> Option<String> {
    match handler {
        Some(function) => function.parse_event(raw).err().map(|e| e.to_string()),
        None => Some("no handler is known for this function".into()),
    }
}

/// What API Gateway would have put in the event for this route that the
/// file does not: the route key, method and path, path parameters, and the
/// JWT authorizer's claims exactly when the route is behind it.
fn http_event_problem(raw: &str, method: &str, path: &str, public: bool) -> Option<String> {
    let event: Json = serde_json::from_str(raw).ok()?;
    let key = format!("{method} {path}");
    let field = |pointer: &str| event.pointer(pointer).and_then(Json::as_str);
    if field("/version") != Some("2.0") {
        return Some("not a payload 2.0 event (\"version\": \"2.0\")".into());
    }
    if field("/requestContext/routeKey") != Some(key.as_str()) {
        return Some(format!("requestContext.routeKey is not {key:?}"));
    }
    if field("/requestContext/http/method") != Some(method) {
        return Some(format!("requestContext.http.method is not {method:?}"));
    }
    let raw_path = field("/rawPath").unwrap_or_default();
    if field("/requestContext/http/path") != Some(raw_path) {
        return Some("requestContext.http.path differs from rawPath".into());
    }
    let Some(params) = match_path(path, raw_path) else {
        return Some(format!("rawPath {raw_path:?} does not match {path}"));
    };
    let given: BTreeMap<String, String> = event
        .get("pathParameters")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    if given != params {
        return Some(format!(
            "pathParameters {given:?} are not those of rawPath {params:?}"
        ));
    }
    let has_claims = event
        .pointer("/requestContext/authorizer/jwt/claims/sub")
        .is_some();
    match (public, has_claims) {
        (false, false) => Some(
            "the route is behind the JWT authorizer but requestContext.authorizer.jwt.claims.sub is missing"
                .into(),
        ),
        (true, true) => Some("the route is public but the event carries JWT claims".into()),
        _ => None,
    }
}

/// The path parameters of `path` against the template pattern, or `None`.
fn match_path(pattern: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let want: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    let got: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if want.len() != got.len() {
        return None;
    }
    let mut params = BTreeMap::new();
    for (w, g) in want.iter().zip(&got) {
        match w.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
            Some(name) if !g.is_empty() => {
                params.insert(name.to_owned(), (*g).to_owned());
            }
            Some(_) => return None,
            None if w == g => {}
            None => return None,
        }
    }
    Some(params)
}

/// An SQS batch as the event source mapping delivers it: records with a
/// message id (the order-writer reports failures by it) from `aws:sqs`.
fn sqs_event_problem(raw: &str) -> Option<String> {
    let event: Json = serde_json::from_str(raw).ok()?;
    let records = event.get("Records").and_then(Json::as_array)?;
    if records.is_empty() {
        return Some("the batch has no records".into());
    }
    records.iter().enumerate().find_map(|(i, r)| {
        if r.get("messageId").and_then(Json::as_str).is_none() {
            Some(format!("record {i} has no messageId"))
        } else if r.get("eventSource").and_then(Json::as_str) != Some("aws:sqs") {
            Some(format!("record {i} is not from aws:sqs"))
        } else {
            None
        }
    })
}

/// The envelope a schedule sends: a `Scheduled Event` from EventBridge
/// Scheduler (`ScheduleV2`) or an EventBridge rule (`Schedule`), naming the
/// schedule SAM creates for this trigger (`<Function><Event>`).
fn schedule_event_problem(raw: &str, schedule: &str, v2: bool) -> Option<String> {
    let event: EventBridgeEvent = match serde_json::from_str(raw) {
        Ok(event) => event,
        Err(err) => return Some(format!("not an EventBridge event: {err}")),
    };
    let (source, arn) = if v2 {
        ("aws.scheduler", ":scheduler:")
    } else {
        ("aws.events", ":events:")
    };
    if event.detail_type != "Scheduled Event" {
        return Some("detail-type is not \"Scheduled Event\"".into());
    }
    if event.source != source {
        return Some(format!("source is not {source:?}"));
    }
    let names_it = event
        .resources
        .iter()
        .flatten()
        .any(|r| r.contains(arn) && r.contains(schedule));
    if !names_it {
        return Some(format!(
            "resources do not name this trigger's schedule ({arn} ARN containing {schedule})"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_patterns_match_like_api_gateway() {
        let params = match_path("/sales/{saleId}/purchase", "/sales/s1/purchase").unwrap();
        assert_eq!(params["saleId"], "s1");
        assert!(match_path("/sales/{saleId}", "/sales//").is_none());
        assert!(match_path("/sales/{saleId}", "/sales/").is_none());
        assert!(match_path("/health", "/health").unwrap().is_empty());
        assert!(match_path("/health", "/healthz").is_none());
    }

    #[test]
    fn local_only_routes_match_by_method_and_shape() {
        assert!(is_local_only("GET", "/"));
        assert!(is_local_only("GET", "/ops"));
        assert!(is_local_only("GET", "/assets/{name}"));
        assert!(is_local_only("POST", "/local/token"));
        assert!(!is_local_only("POST", "/"));
        assert!(!is_local_only("GET", "/ops/{x}"));
        assert!(!is_local_only("GET", "/assets"));
        assert!(!is_local_only("GET", "/local/token"));
        assert!(!is_local_only("GET", "/admin/sales/{saleId}/live"));
    }

    #[test]
    fn conditions_set_a_variable_when_either_branch_does() {
        let env = serde_json::json!({"Variables": {
            "A": {"Fn::If": ["C", "x", {"Ref": "AWS::NoValue"}]},
            "B": {"Fn::If": ["C", {"Ref": "AWS::NoValue"}, {"Ref": "AWS::NoValue"}]},
            "C": {"Ref": "AWS::NoValue"},
            "D": {"Fn::Sub": "${AWS::StackName}"},
        }});
        let vars = variables(Some(&env));
        assert_eq!(vars.keys().collect::<Vec<_>>(), ["A", "D"]);
        let env = serde_json::json!({"Variables": {"Fn::If": ["C", {"X": "1"}, {"Y": "2"}]}});
        assert_eq!(variables(Some(&env)).keys().collect::<Vec<_>>(), ["X", "Y"]);
    }
}
