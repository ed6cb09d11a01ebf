//! The IAM each function needs, proven from what it did.
//!
//! The emulator enforces no IAM, so a missing grant shows only on AWS (the
//! scheduled prewarm once could not load a sale: `UpdateItem` was never
//! granted). This module closes that gap:
//!
//! 1. moto's request recorder logs every AWS call a test run makes
//!    ([`calls`] reads that log). Each function's SDK client names it in the
//!    user agent (`app/seckill-<binary>`, see `seckill_shared::aws::Caller`),
//!    so every call is attributed to the function that made it; calls of
//!    tools and test harnesses carry other names and are left out.
//! 2. A call is mapped to the IAM action and resource AWS authorizes it
//!    against: a `TransactWriteItems` needs `PutItem`/`UpdateItem`/
//!    `ConditionCheckItem` on each table it touches, a `Query` on an index
//!    needs the index's ARN, `SendMessageBatch` needs `sqs:SendMessage`.
//!    Resources are named by the template's logical ids (`OrdersTable`),
//!    through a [`Names`] map from the run's concrete names.
//! 3. [`roles`] reads every function's grants from the template as
//!    CloudFormation will create them (`infra/sam_translate.py`: SAM policy
//!    templates, event sources' managed policies), and [`check`] compares:
//!    a call no grant allows is missing; a grant no call used is listed, as
//!    is any grant of our services on `*`.
//!
//! A function with an SQS event source also needs the queue actions the
//! Lambda service uses on its behalf (receive, delete, attributes): those
//! come from the template's event source mappings, not from the recording.

use base64::Engine;
use serde_json::Value;
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

/// The user-agent mark of a function's SDK clients (`seckill_shared::aws`).
const APP_PREFIX: &str = "app/seckill-";

/// The calls read from a recording, and how many records could not be read.
#[derive(Debug, Default)]
pub struct Recorded {
    pub calls: Vec<Call>,
    /// Records that were not JSON: moto's recorder writes a record and its
    /// newline in separate writes from concurrent threads, so under load two
    /// records can share a line (read apart here) or, for bodies larger than
    /// its write buffer, interleave (lost; counted so a run can say so).
    pub unreadable: usize,
}

/// Reads moto's recording (JSON objects with `headers`, `body`,
/// `body_encoded`, one a line) into the calls the functions made. Calls
/// without a function's mark (tools, tests) and unknown services are skipped.
pub fn calls(recording: &str, names: Names<'_>) -> Recorded {
    let mut out = Recorded::default();
    let mut at = 0;
    while at < recording.len() {
        // Records are read as a stream, so two on one line are two records;
        // an unreadable one is skipped to the end of its line.
        let mut stream = serde_json::Deserializer::from_str(&recording[at..]).into_iter::<Value>();
        match stream.next() {
            None => break,
            Some(Ok(entry)) => {
                at += stream.byte_offset();
                match call_of(&entry, names) {
                    Ok(Some(call)) => out.calls.push(call),
                    Ok(None) => {}
                    Err(_) => out.unreadable += 1,
                }
            }
            Some(Err(_)) => {
                out.unreadable += 1;
                at = recording[at..]
                    .find('\n')
                    .map_or(recording.len(), |n| at + n + 1);
            }
        }
    }
    out
}

/// One record as a function's call: `None` for a tool's or an unknown
/// service's, `Err` for a body that is not what the service takes.
fn call_of(entry: &Value, names: Names<'_>) -> Result<Option<Call>, IamError> {
    let bad = |why: String| IamError::Recording { why };
    let headers = &entry["headers"];
    let header = |name: &str| {
        headers.as_object().and_then(|h| {
            h.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.as_str())
        })
    };
    let agent = [header("x-amz-user-agent"), header("user-agent")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let Some(function) = agent
        .split_whitespace()
        .find_map(|part| part.strip_prefix(APP_PREFIX))
    else {
        return Ok(None);
    };
    let Some((service, operation)) = header("x-amz-target").and_then(|t| t.split_once('.')) else {
        return Ok(None);
    };
    let raw = entry["body"].as_str().unwrap_or("");
    let body = if entry["body_encoded"].as_bool() == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(raw)
            .map_err(|e| bad(format!("body: {e}")))?
    } else {
        raw.as_bytes().to_vec()
    };
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).map_err(|e| bad(format!("body: {e}")))?
    };
    let needs = match service {
        s if s.starts_with("DynamoDB_") => dynamodb_needs(operation, &body, names),
        "AmazonSQS" => sqs_needs(operation, &body, names),
        "secretsmanager" => secrets_needs(operation, &body, names),
        _ => return Ok(None),
    };
    Ok(Some(Call {
        function: function.to_owned(),
        operation: operation.to_owned(),
        needs,
    }))
}

fn named(service: Service, raw: &str, names: Names<'_>) -> Resource {
    match names(service, raw) {
        Some(id) => Resource::logical(&id),
        None => Resource::Other(raw.to_owned()),
    }
}

fn dynamodb_needs(operation: &str, body: &Value, names: Names<'_>) -> Vec<Permission> {
    let table = |raw: &Value| named(Service::DynamoDb, raw.as_str().unwrap_or("?"), names);
    let need = |action: &str, resource: Resource| Permission {
        action: format!("dynamodb:{action}"),
        resource,
    };
    match operation {
        // One permission per item, on that item's table: what IAM checks
        // for a transaction (there is no TransactWriteItems action).
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, inner) = item.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    _ => return None,
                };
                Some(need(action, table(&inner["TableName"])))
            })
            .collect(),
        "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| need("GetItem", table(&item["Get"]["TableName"])))
            .collect(),
        "BatchGetItem" | "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, _)| need(operation, table(&Value::String(name.clone()))))
            .collect(),
        _ => {
            let mut resource = table(&body["TableName"]);
            if let (Some(index), Resource::Logical { index: slot, .. }) =
                (body["IndexName"].as_str(), &mut resource)
            {
                *slot = Some(index.to_owned());
            }
            vec![need(operation, resource)]
        }
    }
}

fn sqs_needs(operation: &str, body: &Value, names: Names<'_>) -> Vec<Permission> {
    let action = match operation {
        "SendMessageBatch" => "SendMessage",
        "DeleteMessageBatch" => "DeleteMessage",
        "ChangeMessageVisibilityBatch" => "ChangeMessageVisibility",
        other => other,
    };
    let queue = body["QueueUrl"]
        .as_str()
        .and_then(|url| url.rsplit('/').next())
        .or_else(|| body["QueueName"].as_str())
        .unwrap_or("?");
    vec![Permission {
        action: format!("sqs:{action}"),
        resource: named(Service::Sqs, queue, names),
    }]
}

fn secrets_needs(operation: &str, body: &Value, names: Names<'_>) -> Vec<Permission> {
    vec![Permission {
        action: format!("secretsmanager:{operation}"),
        resource: named(
            Service::SecretsManager,
            body["SecretId"].as_str().unwrap_or("?"),
            names,
        ),
    }]
}

/// A function's grants as CloudFormation creates them.
#[derive(Debug, Clone, Default)]
pub struct Role {
    /// (action pattern, resource) pairs of the inline policies, with the
    /// managed policies this check knows expanded.
    pub grants: Vec<(String, Resource, String)>,
    /// What the Lambda service does with this role for the function (an SQS
    /// event source's receive/delete), needed whatever the code calls.
    pub platform_needs: Vec<Permission>,
}

/// The managed policies SAM attaches that grant actions on our services,
/// as AWS defines them. (AWSLambdaBasicExecutionRole, the VPC and X-Ray
/// ones grant logs, network interfaces and traces: nothing the code calls.)
fn managed_grants(arn: &str) -> Vec<(String, Resource)> {
    if arn.ends_with("/AWSLambdaSQSQueueExecutionRole") {
        [
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        ]
        .into_iter()
        .map(|a| (a.to_owned(), Resource::Any))
        .collect()
    } else {
        Vec::new()
    }
}

/// Every function's role in the translated template (the JSON
/// `infra/sam_translate.py` prints), by Cargo binary.
pub fn roles(translated: &Value) -> Result<BTreeMap<String, Role>, IamError> {
    let resources = translated["Resources"]
        .as_object()
        .ok_or_else(|| IamError::Template("no Resources".into()))?;
    let mut out = BTreeMap::new();
    for (logical, resource) in resources {
        if resource["Type"] != "AWS::Lambda::Function" {
            continue;
        }
        let Some(binary) = resource
            .pointer("/Metadata/BuildProperties/Binary")
            .and_then(Value::as_str)
        else {
            continue;
        };
        let role_id = resource
            .pointer("/Properties/Role/Fn::GetAtt/0")
            .and_then(Value::as_str)
            .ok_or_else(|| IamError::Template(format!("{logical}: Role is not a GetAtt")))?;
        let role = &resources
            .get(role_id)
            .ok_or_else(|| IamError::Template(format!("{logical}: no role {role_id}")))?["Properties"];
        let mut found = Role::default();
        for policy in role["Policies"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(branches)
        {
            let name = policy["PolicyName"].as_str().unwrap_or("?");
            for statement in statements(&policy["PolicyDocument"]) {
                if statement["Effect"] != "Allow" {
                    continue;
                }
                for action in strings(&statement["Action"]) {
                    for resource in resources_of(&statement["Resource"]) {
                        found
                            .grants
                            .push((action.clone(), resource, name.to_owned()));
                    }
                }
            }
        }
        for arn in role["ManagedPolicyArns"].as_array().into_iter().flatten() {
            let arn = arn.as_str().unwrap_or("?");
            for (action, resource) in managed_grants(arn) {
                let name = arn.rsplit('/').next().unwrap_or(arn).to_owned();
                found.grants.push((action, resource, name));
            }
        }
        for mapping in resources.values() {
            if mapping["Type"] == "AWS::Lambda::EventSourceMapping"
                && mapping.pointer("/Properties/FunctionName/Ref")
                    == Some(&Value::from(logical.as_str()))
                && let Some(queue) = mapping
                    .pointer("/Properties/EventSourceArn/Fn::GetAtt/0")
                    .and_then(Value::as_str)
            {
                for action in ["ReceiveMessage", "DeleteMessage", "GetQueueAttributes"] {
                    found.platform_needs.push(Permission {
                        action: format!("sqs:{action}"),
                        resource: Resource::logical(queue),
                    });
                }
            }
        }
        out.insert(binary.to_owned(), found);
    }
    Ok(out)
}

/// A `Policies` item as the policies it may be: itself, or each branch of
/// an `Fn::If` (nested ones too; `AWS::NoValue` is none). Either branch
/// may be the deployed one, so each counts as a grant.
fn branches(policy: &Value) -> Vec<&Value> {
    if policy.get("Ref").and_then(Value::as_str) == Some("AWS::NoValue") {
        return Vec::new();
    }
    match policy
        .get("Fn::If")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([_, yes, no]) => branches(yes).into_iter().chain(branches(no)).collect(),
        _ => vec![policy],
    }
}

fn statements(document: &Value) -> Vec<&Value> {
    match &document["Statement"] {
        Value::Array(all) => all.iter().collect(),
        one @ Value::Object(_) => vec![one],
        _ => Vec::new(),
    }
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(all) => all
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// A statement's `Resource` as logical ids: `GetAtt X.Arn`, `Ref X`,
/// `Sub "${X.Arn}/index/name"`, the SAM policy templates' `Sub [arn, vars]`,
/// both branches of an `If`.
fn resources_of(value: &Value) -> Vec<Resource> {
    match value {
        Value::Array(all) => all.iter().flat_map(resources_of).collect(),
        Value::String(s) if s == "*" => vec![Resource::Any],
        Value::String(s) => vec![Resource::Other(s.clone())],
        Value::Object(map) => {
            if let Some(Value::Array(parts)) = map.get("Fn::GetAtt")
                && let Some(id) = parts.first().and_then(Value::as_str)
            {
                return vec![Resource::logical(id)];
            }
            if let Some(Value::String(id)) = map.get("Ref") {
                return vec![Resource::logical(id)];
            }
            if let Some(Value::Array(branches)) = map.get("Fn::If") {
                return branches.iter().skip(1).flat_map(resources_of).collect();
            }
            if let Some(sub) = map.get("Fn::Sub") {
                return vec![sub_resource(sub)];
            }
            vec![Resource::Other(value.to_string())]
        }
        _ => Vec::new(),
    }
}

/// `${X.Arn}/index/name`, `arn:...:table/${tableName}` with `tableName: !Ref X`,
/// `arn:...:${queueName}` with `queueName: !GetAtt X.QueueName`.
fn sub_resource(sub: &Value) -> Resource {
    let (text, vars) = match sub {
        Value::String(s) => (s.as_str(), None),
        Value::Array(parts) => (
            parts.first().and_then(Value::as_str).unwrap_or(""),
            parts.get(1).and_then(Value::as_object),
        ),
        _ => return Resource::Other(sub.to_string()),
    };
    let mut logical = None;
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + end];
        rest = &rest[start + end + 1..];
        if name.starts_with("AWS::") {
            continue;
        }
        let var = vars.and_then(|v| v.get(name));
        logical = Some(match var {
            Some(v) => match resources_of(v).into_iter().next() {
                Some(Resource::Logical { id, .. }) => id,
                _ => return Resource::Other(sub.to_string()),
            },
            None => name.split('.').next().unwrap_or(name).to_owned(),
        });
    }
    let Some(id) = logical else {
        return Resource::Other(text.to_owned());
    };
    match text.rsplit_once("/index/") {
        Some((_, index)) => Resource::index(&id, index),
        None => Resource::logical(&id),
    }
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
/// (the orders queue), secrets `-gate` and `-redis`.
const SUFFIXES: [(Service, &str, &str); 6] = [
    (Service::DynamoDb, "-sales", "SalesTable"),
    (Service::DynamoDb, "-orders", "OrdersTable"),
    (Service::Sqs, "-dlq", "OrdersDLQ"),
    (Service::Sqs, "", "OrdersQueue"),
    (Service::SecretsManager, "-gate", "GateSecret"),
    (Service::SecretsManager, "-redis", "RedisAuthSecret"),
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
    use serde_json::json;

    fn line(app: &str, target: &str, body: Value) -> String {
        let encoded = base64::engine::general_purpose::STANDARD.encode(body.to_string());
        json!({
            "headers": {"x-amz-user-agent": format!("aws-sdk-rust/1.3 ua/2.1 app/{app}"), "X-Amz-Target": target},
            "method": "POST", "url": "http://127.0.0.1:4566/", "body": encoded, "body_encoded": true,
        })
        .to_string()
    }

    #[test]
    fn a_transaction_needs_each_items_action_on_its_table() {
        let names = stack_names("t");
        let recording = [
            line(
                "seckill-order-writer",
                "DynamoDB_20120810.TransactWriteItems",
                json!({"TransactItems": [
                    {"Put": {"TableName": "t-orders"}},
                    {"Update": {"TableName": "t-sales"}},
                    {"ConditionCheck": {"TableName": "t-orders"}},
                ]}),
            ),
            line(
                "seckill-purchase",
                "AmazonSQS.SendMessageBatch",
                json!({"QueueUrl": "http://127.0.0.1:4566/000000000000/t"}),
            ),
            line(
                "seckill-orders-api",
                "DynamoDB_20120810.Query",
                json!({"TableName": "t-orders", "IndexName": "byBuyer"}),
            ),
            line(
                "seckill.tool",
                "DynamoDB_20120810.Scan",
                json!({"TableName": "t-sales"}),
            ),
        ]
        .join("\n");
        // Two records on one line, as concurrent writes leave them.
        let recording = recording.replacen('\n', "", 1);
        let read = calls(&recording, &names);
        assert_eq!(read.unreadable, 0);
        let calls = read.calls;
        assert_eq!(calls.len(), 3, "the tool's call is not a function's");
        let actions: Vec<String> = calls[0].needs.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            actions,
            [
                "dynamodb:PutItem on OrdersTable",
                "dynamodb:UpdateItem on SalesTable",
                "dynamodb:ConditionCheckItem on OrdersTable"
            ]
        );
        assert_eq!(
            calls[1].needs[0].to_string(),
            "sqs:SendMessage on OrdersQueue"
        );
        assert_eq!(
            calls[2].needs[0].to_string(),
            "dynamodb:Query on OrdersTable/index/byBuyer"
        );
    }

    #[test]
    fn grants_resolve_to_logical_ids_and_patterns_match() {
        let index = sub_resource(&json!("${OrdersTable.Arn}/index/*"));
        assert!(index.covers(&Resource::index("OrdersTable", "byBuyer")));
        assert!(!index.covers(&Resource::logical("OrdersTable")));
        let template = sub_resource(&json!([
            "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${tableName}",
            {"tableName": {"Ref": "SalesTable"}}
        ]));
        assert_eq!(template, Resource::logical("SalesTable"));
        assert!(action_covers("dynamodb:*", "dynamodb:UpdateItem"));
        assert!(action_covers("sqs:Get*", "sqs:GetQueueAttributes"));
        assert!(!action_covers("dynamodb:GetItem", "dynamodb:UpdateItem"));
    }

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
