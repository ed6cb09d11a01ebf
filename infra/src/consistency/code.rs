//! The code side: the workspace's binaries, each function's configuration
//! loader, the local gateway's routes, the files in `events/` and any direct
//! environment read in function code.

use super::DIRECT_ENV_ALLOWED;
use super::template::text;
use crate::invoke::{Function, Handler, Loader};
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
    // The API's OpenAPI description (`seckill-local openapi` prints the
    // same): for a client team and the schemathesis run of `make test`.
    "GET /openapi.json",
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
    /// ([`crate::gateway::ROUTES`]) and its own ([`crate::gateway::LOCAL_ROUTES`]
    /// and [`crate::gateway::OPENAPI_ROUTE`], served by [`LOCAL_SERVER`];
    /// each must be one of [`LOCAL_ONLY_ROUTES`]).
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
        let (method, path) = crate::gateway::OPENAPI_ROUTE;
        let description = LocalRoute {
            method: method.to_owned(),
            path: path.to_owned(),
            function: LOCAL_SERVER.to_owned(),
            public: true,
        };
        functions.chain(own).chain([description]).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
