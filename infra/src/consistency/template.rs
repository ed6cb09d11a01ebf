//! The template side: each `AWS::Serverless::Function`'s binary, its
//! environment (Globals merged under its own, both branches of an `Fn::If`)
//! and its triggers.

use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt;

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
    /// `Timeout` in seconds (the function's, else `Globals.Function`'s).
    pub timeout_secs: Option<u64>,
    /// `ReservedConcurrentExecutions` as deployed with the parameters'
    /// defaults (a parameter, an `Fn::If` that may drop it); `None`: unset.
    pub reserved_concurrency: Option<u64>,
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
        let global_timeout = globals
            .and_then(|g| g.get("Timeout"))
            .and_then(Json::as_u64);
        let default_http_auth = template
            .pointer("/Globals/HttpApi/Auth/DefaultAuthorizer")
            .is_some();
        // The stack as deployed with every parameter at its default.
        let no_overrides = BTreeMap::new();
        let defaults = super::stack::Stack::new(template, &no_overrides).ok();
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
                    timeout_secs: props
                        .and_then(|p| p.get("Timeout"))
                        .and_then(Json::as_u64)
                        .or(global_timeout),
                    reserved_concurrency: props
                        .and_then(|p| p.get("ReservedConcurrentExecutions"))
                        .and_then(|v| defaults.as_ref()?.eval(v))
                        .and_then(|v| match v {
                            Json::Number(n) => n.as_u64(),
                            Json::String(s) => s.parse().ok(),
                            _ => None,
                        }),
                },
            );
        }
        Ok(Self { functions })
    }
}

pub(super) fn text(value: Option<&Json>) -> Option<String> {
    value.and_then(Json::as_str).map(str::to_owned)
}

/// A literal as the string Lambda would put in the environment.
pub(super) fn scalar(value: &Json) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
