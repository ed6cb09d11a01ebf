//! The IAM each function needs, proven from what it did.
//!
//! The emulator enforces no IAM, so a missing grant shows only on AWS (the
//! scheduled prewarm once could not load a sale: `UpdateItem` was never
//! granted). This module closes that gap:
//!
//! # Layout
//!
//! - [`recording`]: moto's recording read into each function's calls and
//!   the permissions they need.
//! - [`mod@roles`]: each function's grants from the translated template.
//! - here: resources, permissions, [`check`] and its [`Report`], and the
//!   names the local stack and the tests give their resources.
//!
//! # How
//!
//! 1. moto's request recorder logs every AWS call a test run makes
//!    ([`calls`] reads that log). Each function's SDK client names it in the
//!    user agent (`app/seckill-<binary>`, see `seckill_shared::adapters::aws::Caller`),
//!    so every call is attributed to the function that made it; calls of
//!    tools and test harnesses carry other names and are left out.
//! 2. A call is mapped to the IAM action and resource AWS authorizes it
//!    against: a `TransactWriteItems` needs `PutItem`/`UpdateItem`/
//!    `ConditionCheckItem` on each table it touches, a `Query` on an index
//!    needs the index's ARN, `SendMessageBatch` needs `sqs:SendMessage`.
//!    Resources are named by the template's logical ids (`OrdersTable`),
//!    through a [`Names`] map from the run's concrete names.
//! 3. [`mod@roles`] reads every function's grants from the template as
//!    CloudFormation will create them (`infra/sam_translate.py`: SAM policy
//!    templates, event sources' managed policies), and [`check`] compares:
//!    a call no grant allows is missing; a grant no call used is listed, as
//!    is any grant of our services on `*`.
//!
//! A function with an SQS event source also needs the queue actions the
//! Lambda service uses on its behalf (receive, delete, attributes): those
//! come from the template's event source mappings, not from the recording.

mod recording;
mod roles;

pub use recording::{Recorded, calls};
pub use roles::{Role, roles};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A resource as the template names it: a logical id, and for a DynamoDB
/// index its name (`*` in a grant for every index).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Logical {
        id: String,
        index: Option<String>,
    },
    /// `*`: every resource.
    Any,
    /// Something this check cannot resolve to a logical id (a literal ARN).
    Other(String),
}

impl Resource {
    pub fn logical(id: &str) -> Self {
        Resource::Logical {
            id: id.to_owned(),
            index: None,
        }
    }

    fn index(id: &str, index: &str) -> Self {
        Resource::Logical {
            id: id.to_owned(),
            index: Some(index.to_owned()),
        }
    }

    /// Whether a grant on `self` covers a call on `used`.
    fn covers(&self, used: &Resource) -> bool {
        match (self, used) {
            (Resource::Any, _) => true,
            (Resource::Logical { id: g, index: gi }, Resource::Logical { id: u, index: ui }) => {
                g == u
                    && match (gi.as_deref(), ui.as_deref()) {
                        (None, None) => true,
                        (Some("*"), Some(_)) => true,
                        (Some(g), Some(u)) => g == u,
                        _ => false,
                    }
            }
            (Resource::Other(g), Resource::Other(u)) => g == u,
            _ => false,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Logical { id, index: None } => f.write_str(id),
            Resource::Logical {
                id,
                index: Some(index),
            } => write!(f, "{id}/index/{index}"),
            Resource::Any => f.write_str("*"),
            Resource::Other(raw) => f.write_str(raw),
        }
    }
}

/// One permission a function needs (or a grant gives): `dynamodb:UpdateItem`
/// on `SalesTable`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permission {
    pub action: String,
    pub resource: Resource,
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.action, self.resource)
    }
}

/// The services whose resources a [`Names`] map resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    DynamoDb,
    Sqs,
    SecretsManager,
}

/// Maps a concrete name of this run (a table name, a queue's name, a
/// secret's id) to the template's logical id; `None` for a resource the
/// functions were not given (then the call is reported as such).
pub type Names<'a> = &'a dyn Fn(Service, &str) -> Option<String>;

/// What a recorded call needs: the function that made it and its permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The Cargo binary, e.g. `prewarm`.
    pub function: String,
    /// The API operation, e.g. `TransactWriteItems`.
    pub operation: String,
    pub needs: Vec<Permission>,
}

#[derive(Debug, thiserror::Error)]
pub enum IamError {
    #[error("recording: {why}")]
    Recording { why: String },
    #[error("template: {0}")]
    Template(String),
}

/// Whether an IAM action pattern (`dynamodb:*`, `sqs:Get*`) covers an action.
fn action_covers(pattern: &str, action: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => action
            .to_ascii_lowercase()
            .starts_with(&prefix.to_ascii_lowercase()),
        None => pattern.eq_ignore_ascii_case(action),
    }
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// (function, permission, the operations that needed it): calls no
    /// grant allows. On AWS each is an AccessDenied.
    pub missing: BTreeSet<(String, Permission, String)>,
    /// (function, grant, policy): grants no recorded call used.
    pub unused: BTreeSet<(String, Permission, String)>,
    /// (function, grant, policy): grants on `*` (any queue, any table).
    pub broad: BTreeSet<(String, Permission, String)>,
    /// Functions that made calls but have no role in the template.
    pub unknown_functions: BTreeSet<String>,
}

impl Report {
    pub fn is_ok(&self) -> bool {
        self.missing.is_empty() && self.unknown_functions.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (function, need, operations) in &self.missing {
            writeln!(f, "MISSING  {function}: {need} (used by {operations})")?;
        }
        for function in &self.unknown_functions {
            writeln!(
                f,
                "UNKNOWN  {function}: calls AWS but has no role in the template"
            )?;
        }
        for (function, grant, policy) in &self.broad {
            writeln!(f, "BROAD    {function}: {grant} (from {policy})")?;
        }
        for (function, grant, policy) in &self.unused {
            writeln!(f, "UNUSED   {function}: {grant} (from {policy})")?;
        }
        Ok(())
    }
}

/// Compares what the functions did with what their roles allow.
pub fn check(calls: &[Call], roles: &BTreeMap<String, Role>) -> Report {
    let mut report = Report::default();
    let mut used: BTreeSet<(String, usize)> = BTreeSet::new();
    let mut needs: BTreeMap<(String, Permission), BTreeSet<String>> = BTreeMap::new();
    for call in calls {
        for need in &call.needs {
            needs
                .entry((call.function.clone(), need.clone()))
                .or_default()
                .insert(call.operation.clone());
        }
    }
    for (function, role) in roles {
        for need in &role.platform_needs {
            needs
                .entry((function.clone(), need.clone()))
                .or_default()
                .insert("event source mapping".into());
        }
    }
    for ((function, need), operations) in needs {
        let Some(role) = roles.get(&function) else {
            report.unknown_functions.insert(function);
            continue;
        };
        let mut allowed = false;
        for (n, (action, resource, _)) in role.grants.iter().enumerate() {
            if action_covers(action, &need.action) && resource.covers(&need.resource) {
                allowed = true;
                used.insert((function.clone(), n));
            }
        }
        if !allowed {
            let operations = operations.into_iter().collect::<Vec<_>>().join(", ");
            report.missing.insert((function, need, operations));
        }
    }
    for (function, role) in roles {
        for (n, (action, resource, policy)) in role.grants.iter().enumerate() {
            let grant = Permission {
                action: action.clone(),
                resource: resource.clone(),
            };
            if *resource == Resource::Any {
                report
                    .broad
                    .insert((function.clone(), grant.clone(), policy.clone()));
            }
            if !used.contains(&(function.clone(), n)) {
                report
                    .unused
                    .insert((function.clone(), grant, policy.clone()));
            }
        }
    }
    report
}

/// The names `seckill-local` and the tests give their resources after a
/// prefix: tables `-sales` and `-orders`, queues `-dlq` and the bare prefix
/// (the orders queue), secrets `-gate`, `-payment`, `-redis` and `-edge`.
const SUFFIXES: [(Service, &str, &str); 8] = [
    (Service::DynamoDb, "-sales", "SalesTable"),
    (Service::DynamoDb, "-orders", "OrdersTable"),
    (Service::Sqs, "-dlq", "OrdersDLQ"),
    (Service::Sqs, "", "OrdersQueue"),
    (Service::SecretsManager, "-gate", "GateSecret"),
    (Service::SecretsManager, "-payment", "PaymentSecret"),
    (Service::SecretsManager, "-redis", "RedisAuthSecret"),
    (Service::SecretsManager, "-edge", "ApiEdgeSecret"),
];

/// A secret's name from how a call names it: the name, or its ARN
/// (`arn:aws:secretsmanager:region:account:secret:<name>-AbCdEf`).
fn secret_name(id: &str) -> &str {
    id.split(":secret:")
        .nth(1)
        .map_or(id, |name| name.rsplit_once('-').map_or(name, |(n, _)| n))
}

fn plain_name(service: Service, raw: &str) -> &str {
    match service {
        Service::SecretsManager => secret_name(raw),
        _ => raw,
    }
}

/// One stack's resources: exactly `prefix` plus a known suffix. Anything
/// else is not a resource of this stack.
pub fn stack_names(prefix: &str) -> impl Fn(Service, &str) -> Option<String> + '_ {
    move |service, raw| {
        let rest = plain_name(service, raw).strip_prefix(prefix)?;
        SUFFIXES
            .iter()
            .find(|(s, suffix, _)| *s == service && rest == *suffix)
            .map(|(_, _, logical)| (*logical).to_owned())
    }
}

/// Every stack of a test suite at once: any name ending in a known suffix
/// (for queues, any other name is an orders queue).
pub fn suite_names(service: Service, raw: &str) -> Option<String> {
    let name = plain_name(service, raw);
    SUFFIXES
        .iter()
        .find(|(s, suffix, _)| *s == service && name.ends_with(suffix))
        .map(|(_, _, logical)| (*logical).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_grant_and_an_unused_one_are_reported() {
        let calls = vec![Call {
            function: "prewarm".into(),
            operation: "UpdateItem".into(),
            needs: vec![Permission {
                action: "dynamodb:UpdateItem".into(),
                resource: Resource::logical("SalesTable"),
            }],
        }];
        let mut roles = BTreeMap::new();
        roles.insert(
            "prewarm".to_owned(),
            Role {
                grants: vec![
                    (
                        "dynamodb:GetItem".into(),
                        Resource::logical("SalesTable"),
                        "p".into(),
                    ),
                    ("sqs:ReceiveMessage".into(), Resource::Any, "m".into()),
                ],
                platform_needs: Vec::new(),
            },
        );
        let report = check(&calls, &roles);
        assert!(!report.is_ok());
        let text = report.to_string();
        assert!(
            text.contains("MISSING  prewarm: dynamodb:UpdateItem on SalesTable"),
            "{text}"
        );
        assert!(
            text.contains("UNUSED   prewarm: dynamodb:GetItem on SalesTable"),
            "{text}"
        );
        assert!(
            text.contains("BROAD    prewarm: sqs:ReceiveMessage on *"),
            "{text}"
        );
    }
}
