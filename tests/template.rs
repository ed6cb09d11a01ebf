//! The template's traps that only show on AWS, read from
//! `template.yaml`, `infra/redis-stack.yaml` and `samconfig.toml`: the
//! emulator enforces no IAM, zone or CloudFront limit, so these checks read
//! what CloudFormation would be given. Intrinsics are evaluated where a
//! value depends on them (a name built with `!Sub`, a zone picked with
//! `!Select`), with the parameters of each samconfig profile.
//!
//! Also `sam local invoke`: the env-vars file the documented command passes
//! (docs/operations.md) covers every function, as the installed SAM CLI
//! resolves it.

use seckill_infra::consistency::stack::{self, Stack, scalar};
use seckill_infra::consistency::{self, Template};
use seckill_infra::emulator;
use seckill_infra::invoke::{Function, Handler};
use serde_json::{Value as Json, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use crate::cfn;
use cfn::{cfn_json, root, sam_cli};

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Json {
    cfn_json(serde_norway::from_str(&read(path)).unwrap())
}

fn template() -> Json {
    yaml("template.yaml")
}

fn redis_stack() -> Json {
    yaml("infra/redis-stack.yaml")
}

fn resources<'a>(template: &'a Json, kind: &str) -> Vec<(&'a String, &'a Json)> {
    template["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == kind)
        .collect()
}

const UUID_A: &str = stack::DEFAULT_STACK_UUID;
const UUID_B: &str = "c41d9e22-3c2e-11ef-8f7b-12d4a6b8c0e3";

// ------------------------------------------------------------ samconfig

/// One `samconfig.toml` profile: its region and its parameter overrides.
#[derive(Debug)]
struct Profile {
    name: String,
    region: String,
    overrides: BTreeMap<String, String>,
}

/// The profiles of `samconfig.toml`. Read line by line: the file keeps to
/// `key = "value"` and one-string-per-line `parameter_overrides` lists.
fn profiles() -> Vec<Profile> {
    let text = read("samconfig.toml");
    let mut found: BTreeMap<String, Profile> = BTreeMap::new();
    let mut section = String::new();
    let mut in_overrides = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = header.to_owned();
            in_overrides = false;
            continue;
        }
        let Some((env, table)) = section.split_once('.') else {
            continue;
        };
        let profile = found.entry(env.to_owned()).or_insert_with(|| Profile {
            name: env.to_owned(),
            region: String::new(),
            overrides: BTreeMap::new(),
        });
        if table == "global.parameters" {
            if let Some(region) = line.strip_prefix("region = ") {
                profile.region = region.trim_matches('"').to_owned();
            }
        } else if table == "deploy.parameters" {
            if line.starts_with("parameter_overrides = [") {
                in_overrides = true;
            } else if in_overrides && line.starts_with(']') {
                in_overrides = false;
            } else if in_overrides && line.starts_with('"') {
                let pair = line.trim_end_matches(',').trim_matches('"');
                let (key, value) = pair.split_once('=').unwrap();
                profile.overrides.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    let profiles: Vec<Profile> = found
        .into_values()
        .filter(|p| !p.overrides.is_empty())
        .collect();
    assert!(
        profiles.len() >= 2,
        "samconfig.toml's profiles not found: {profiles:?}"
    );
    profiles
}

/// The zone-ID prefix of a region: `us-east-1` -> `use1`, `ap-southeast-2`
/// -> `apse2`, `eu-central-1` -> `euc1`.
fn zone_id_prefix(region: &str) -> String {
    let parts: Vec<&str> = region.split('-').collect();
    let (number, words) = parts.split_last().unwrap();
    let (area, directions) = words.split_first().unwrap();
    let mut prefix = (*area).to_owned();
    for word in directions {
        for (name, short) in [
            ("northeast", "ne"),
            ("southeast", "se"),
            ("northwest", "nw"),
            ("southwest", "sw"),
            ("central", "c"),
            ("north", "n"),
            ("south", "s"),
            ("east", "e"),
            ("west", "w"),
            ("gov", "g"),
        ] {
            if *word == name {
                prefix.push_str(short);
                break;
            }
        }
    }
    prefix.push_str(number);
    prefix
}

#[test]
fn zone_id_prefixes() {
    assert_eq!(zone_id_prefix("us-east-1"), "use1");
    assert_eq!(zone_id_prefix("ap-southeast-2"), "apse2");
    assert_eq!(zone_id_prefix("eu-central-1"), "euc1");
    assert_eq!(zone_id_prefix("us-west-2"), "usw2");
}

// ------------------------------------------------------------ 3. zones

/// Zone IDs where Lambda creates no network interface (a function in a
/// subnet there fails to deploy).
const NO_LAMBDA_ZONES: &[&str] = &["use1-az3"];

#[test]
fn subnets_choose_zones_by_id() {
    let parent = template();
    let nested = redis_stack();
    let mut problems = Vec::new();
    for (file, doc) in [
        ("template.yaml", &parent),
        ("infra/redis-stack.yaml", &nested),
    ] {
        if doc.to_string().contains("Fn::GetAZs") {
            problems.push(format!(
                "{file} picks zones with GetAZs: zone names map to different physical zones per account"
            ));
        }
        for (id, subnet) in resources(doc, "AWS::EC2::Subnet") {
            if subnet["Properties"].get("AvailabilityZone").is_some() {
                problems.push(format!(
                    "{file} {id}: AvailabilityZone {} (a zone name; use AvailabilityZoneId)",
                    subnet["Properties"]["AvailabilityZone"]
                ));
            }
            if subnet["Properties"].get("AvailabilityZoneId").is_none() {
                problems.push(format!("{file} {id}: no AvailabilityZoneId"));
            }
        }
    }
    // With each profile's values (passed down as the parent passes them):
    // two distinct zones of the profile's region, neither one Lambda refuses.
    for profile in profiles() {
        let stack = Stack::new(&parent, &profile.overrides).unwrap();
        let down = stack.nested_overrides();
        let redis = Stack::new(&nested, &down).unwrap();
        let zones: Vec<String> = resources(&nested, "AWS::EC2::Subnet")
            .into_iter()
            .filter_map(|(id, subnet)| {
                let zone = subnet["Properties"].get("AvailabilityZoneId")?;
                let zone = redis.eval(zone);
                if zone.is_none() {
                    problems.push(format!("[{}] {id}: zone not resolved", profile.name));
                }
                zone.map(|z| scalar(&z))
            })
            .collect();
        let prefix = format!("{}-az", zone_id_prefix(&profile.region));
        for zone in &zones {
            if !zone.starts_with(&prefix) {
                problems.push(format!(
                    "[{}] zone {zone} is not a zone ID of {} ({prefix}N)",
                    profile.name, profile.region
                ));
            }
            if NO_LAMBDA_ZONES.contains(&zone.as_str()) {
                problems.push(format!("[{}] zone {zone} has no Lambda", profile.name));
            }
        }
        let distinct: BTreeSet<_> = zones.iter().collect();
        if distinct.len() < 2 {
            problems.push(format!(
                "[{}] subnets in {zones:?}: two zones needed",
                profile.name
            ));
        }
    }
    assert!(problems.is_empty(), "zones:\n  {}", problems.join("\n  "));
}

// ------------------------------------------------------------ 4. replicas

/// Automatic failover with no replica: created, then every in-place change
/// of the replication group fails. Checked for each profile's values and
/// for every replica count the parameters allow.
#[test]
fn automatic_failover_always_has_a_replica() {
    let parent = template();
    let nested = redis_stack();
    let group = resources(&nested, "AWS::ElastiCache::ReplicationGroup");
    assert_eq!(group.len(), 1);
    let (_, group) = group[0];
    let mut problems = Vec::new();
    let check = |label: String, redis: &Stack<'_>, problems: &mut Vec<String>| {
        let failover = redis.eval(&group["Properties"]["AutomaticFailoverEnabled"]);
        let replicas = redis.eval(&group["Properties"]["ReplicasPerNodeGroup"]);
        let (Some(failover), Some(replicas)) = (failover, replicas) else {
            problems.push(format!("{label}: failover or replicas not resolved"));
            return;
        };
        let on = scalar(&failover) == "true";
        let replicas: u32 = scalar(&replicas).parse().unwrap();
        if on && replicas == 0 {
            problems.push(format!(
                "{label}: AutomaticFailoverEnabled with ReplicasPerNodeGroup 0"
            ));
        }
    };
    for profile in profiles() {
        if profile.overrides.get("RedisMode").map(String::as_str) == Some("create")
            && !profile.overrides.contains_key("RedisReplicasPerShard")
        {
            problems.push(format!(
                "[{}] creates Redis without saying RedisReplicasPerShard",
                profile.name
            ));
        }
        let stack = Stack::new(&parent, &profile.overrides).unwrap();
        let redis = Stack::new(&nested, &stack.nested_overrides()).unwrap();
        check(format!("[{}]", profile.name), &redis, &mut problems);
    }
    for (file, doc, parameter) in [
        ("template.yaml", &parent, "RedisReplicasPerShard"),
        ("infra/redis-stack.yaml", &nested, "ReplicasPerShard"),
    ] {
        let allowed = doc["Parameters"][parameter]["AllowedValues"]
            .as_array()
            .unwrap_or_else(|| panic!("{file} {parameter} has no AllowedValues"));
        for value in allowed {
            let down = BTreeMap::from([("ReplicasPerShard".to_owned(), scalar(value))]);
            let redis = Stack::new(&nested, &down).unwrap();
            check(
                format!("{file} {parameter} allows {}", scalar(value)),
                &redis,
                &mut problems,
            );
        }
    }
    assert!(
        problems.is_empty(),
        "replicas:\n  {}",
        problems.join("\n  ")
    );
}

// ------------------------------------------------------------ 5. CloudFront names

/// (resource type, pointer to its name, limit, unique in the account)
const CLOUDFRONT_NAMES: &[(&str, &str, usize, bool)] = &[
    ("AWS::CloudFront::Function", "/Properties/Name", 64, true),
    (
        "AWS::CloudFront::OriginAccessControl",
        "/Properties/OriginAccessControlConfig/Name",
        64,
        true,
    ),
    (
        "AWS::CloudFront::ResponseHeadersPolicy",
        "/Properties/ResponseHeadersPolicyConfig/Name",
        128,
        true,
    ),
    (
        "AWS::CloudFront::CachePolicy",
        "/Properties/CachePolicyConfig/Name",
        128,
        true,
    ),
    (
        "AWS::CloudFront::OriginRequestPolicy",
        "/Properties/OriginRequestPolicyConfig/Name",
        128,
        true,
    ),
    (
        "AWS::CloudFront::Distribution",
        "/Properties/DistributionConfig/Comment",
        128,
        false,
    ),
];

/// CloudFront is global: a name that is only the stack name collides with
/// the same stack in another region, and a 128-character stack name does
/// not fit a 64-character function name.
#[test]
fn cloudfront_names_are_region_qualified_and_fit() {
    let parent = template();
    let none = BTreeMap::new();
    let long_name = format!("seckill-{}", "x".repeat(120));
    assert_eq!(long_name.len(), 128);
    let stacks = [
        ("us-east-1", &long_name, UUID_A),
        ("ap-southeast-4", &long_name, UUID_A),
        ("us-east-1", &long_name, UUID_B),
        ("eu-west-1", &"s".to_owned(), UUID_B),
    ];
    let mut problems = Vec::new();
    let mut checked = 0;
    for (kind, pointer, limit, unique) in CLOUDFRONT_NAMES {
        for (id, resource) in resources(&parent, kind) {
            let Some(name) = resource.pointer(pointer) else {
                continue; // CloudFormation generates one
            };
            checked += 1;
            let mut seen = BTreeSet::new();
            let mut reported = BTreeSet::new();
            let mut report = |kind: &str, message: String| {
                if reported.insert(kind.to_owned()) {
                    problems.push(message);
                }
            };
            for (region, stack_name, uuid) in stacks {
                let stack = Stack::with_pseudo(&parent, &none, stack_name, region, uuid).unwrap();
                let Some(value) = stack.eval(name).map(|v| scalar(&v)) else {
                    report("resolve", format!("{id}: {name} not resolved"));
                    continue;
                };
                if value.len() > *limit {
                    report(
                        "length",
                        format!(
                            "{id}: {} characters > {limit} for a {}-character stack name: {value}",
                            value.len(),
                            stack_name.len()
                        ),
                    );
                }
                if !value.contains(region) {
                    report(
                        "region",
                        format!("{id}: {value:?} does not name the region {region}"),
                    );
                }
                if *unique && !seen.insert(value.clone()) {
                    report(
                        "unique",
                        format!("{id}: {value:?} is the same for two stacks (account-wide name)"),
                    );
                }
                if *kind == "AWS::CloudFront::Function"
                    && !value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    report(
                        "characters",
                        format!("{id}: {value:?} has characters a function name refuses"),
                    );
                }
            }
        }
    }
    assert!(checked >= 4, "only {checked} CloudFront names found");
    // The nested stack takes the stack name as its NamePrefix: it must
    // accept 128 characters too.
    let prefix = &redis_stack()["Parameters"]["NamePrefix"];
    let max = prefix["MaxLength"].as_u64().unwrap_or(u64::MAX);
    let pattern = prefix["AllowedPattern"].as_str().unwrap_or("");
    let bounded = pattern
        .split("{0,")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .and_then(|n| n.parse::<u64>().ok())
        .map(|n| n + 1);
    if max < 128 || bounded.is_some_and(|n| n < 128) {
        problems.push(format!(
            "infra/redis-stack.yaml NamePrefix refuses a 128-character stack name ({pattern}, MaxLength {max})"
        ));
    }
    assert!(
        problems.is_empty(),
        "CloudFront names:\n  {}",
        problems.join("\n  ")
    );
}

// ------------------------------------------------------------ 6. order-writer

fn order_writer(template: &Json) -> &Json {
    &template["Resources"]["OrderWriterFunction"]
}

/// The order-writer's SQS events: (queue logical id, MaximumConcurrency,
/// MaximumBatchingWindowInSeconds).
/// A number as `stack` deploys it (a literal, a parameter, an `Fn::If`);
/// `None`: not set (`AWS::NoValue`) or not a number.
fn deployed_number(stack: &Stack, value: &Json) -> Option<u64> {
    scalar(&stack.eval(value)?).parse().ok()
}

fn sqs_events(stack: &Stack, function: &Json) -> Vec<(String, Option<u64>, u64)> {
    function["Properties"]["Events"]
        .as_object()
        .unwrap()
        .values()
        .filter(|e| e["Type"] == "SQS")
        .map(|e| {
            let p = &e["Properties"];
            let queue = p["Queue"]["Fn::GetAtt"][0].as_str().unwrap().to_owned();
            (
                queue,
                deployed_number(stack, &p["ScalingConfig"]["MaximumConcurrency"]),
                p["MaximumBatchingWindowInSeconds"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn as_list(value: &Json) -> Vec<Json> {
    match value {
        Json::Array(items) => items.clone(),
        Json::Null => Vec::new(),
        other => vec![other.clone()],
    }
}

/// Does any Rust file (or directory of them) under `dirs` contain `needle`
/// before its test module?
fn code_contains(dirs: &[&str], needle: &str) -> bool {
    fn walk(dir: &Path, needle: &str) -> bool {
        if dir.is_file() {
            return std::fs::read_to_string(dir).is_ok_and(|text| {
                text.split("#[cfg(test)]")
                    .next()
                    .unwrap_or("")
                    .contains(needle)
            });
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|entry| {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, needle)
            } else {
                path.extension().is_some_and(|e| e == "rs")
                    && std::fs::read_to_string(&path).is_ok_and(|text| {
                        // Code before any test module.
                        let code = text.split("#[cfg(test)]").next().unwrap_or("");
                        code.contains(needle)
                    })
            }
        })
    }
    dirs.iter().any(|dir| walk(&root().join(dir), needle))
}

#[test]
fn order_writer_polls_only_its_queue_with_reserved_concurrency() {
    let parent = template();
    let function = order_writer(&parent);
    let defaults = Stack::new(&parent, &BTreeMap::new()).unwrap();
    let events = sqs_events(&defaults, function);
    assert_eq!(events.len(), 1, "the order-writer's SQS events: {events:?}");
    let (queue, _, _) = &events[0];
    let mut problems = Vec::new();

    // Reserved as many as its pollers in every profile, and with any
    // writer concurrency; none at all only when the operator says so
    // (OrderWriterReserved=false, for an account whose quota cannot spare
    // the reservation).
    let mut stacks: Vec<(String, BTreeMap<String, String>)> = profiles()
        .into_iter()
        .map(|p| (format!("[{}]", p.name), p.overrides))
        .collect();
    stacks.push((
        "OrderWriterConcurrency=40".into(),
        BTreeMap::from([("OrderWriterConcurrency".into(), "40".into())]),
    ));
    for (name, overrides) in &stacks {
        let stack = Stack::new(&parent, overrides).unwrap();
        let max = sqs_events(&stack, function)[0].1;
        let reserved = deployed_number(
            &stack,
            &function["Properties"]["ReservedConcurrentExecutions"],
        );
        match (reserved, max) {
            (Some(r), Some(m)) if r == m => {}
            (r, m) => problems.push(format!(
                "{name}: ReservedConcurrentExecutions {r:?} is not ScalingConfig.MaximumConcurrency \
                 {m:?}: below it a burst elsewhere in the account throttles the writer"
            )),
        }
    }
    let unreserved = Stack::new(
        &parent,
        &BTreeMap::from([("OrderWriterReserved".into(), "false".into())]),
    )
    .unwrap();
    let reserved = deployed_number(
        &unreserved,
        &function["Properties"]["ReservedConcurrentExecutions"],
    );
    if reserved.is_some() || sqs_events(&unreserved, function)[0].1 != Some(5) {
        problems.push(format!(
            "OrderWriterReserved=false: reserved {reserved:?} (none expected), pollers still capped"
        ));
    }

    // A role SAM generates for a function with an SQS event gets the
    // managed AWSLambdaSQSQueueExecutionRole (receive/delete on any queue).
    let role = &function["Properties"]["Role"];
    let Some(role_id) = role["Fn::GetAtt"][0].as_str() else {
        problems.push(format!(
            "OrderWriterFunction has no role of its own (Role: {role}): SAM's generated role \
             gets AWSLambdaSQSQueueExecutionRole, sqs:ReceiveMessage/DeleteMessage on every queue"
        ));
        panic!("order-writer:\n  {}", problems.join("\n  "));
    };
    let role = &parent["Resources"][role_id];
    assert_eq!(role["Type"], "AWS::IAM::Role", "{role_id}");
    for arn in as_list(&role["Properties"]["ManagedPolicyArns"]) {
        let arn = arn.to_string().to_lowercase();
        if arn.contains("sqs") || arn.contains("dynamodb") || arn.contains("fullaccess") {
            problems.push(format!(
                "{role_id}: managed policy {arn} grants beyond the queue and tables"
            ));
        }
    }
    let mut sqs_actions = BTreeSet::new();
    let mut dynamodb: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for policy in as_list(&role["Properties"]["Policies"]) {
        for statement in as_list(&policy["PolicyDocument"]["Statement"]) {
            if statement["Effect"] != "Allow" {
                continue;
            }
            let resources = as_list(&statement["Resource"]);
            for action in as_list(&statement["Action"]) {
                let action = action.as_str().unwrap().to_owned();
                if action.contains('*') {
                    problems.push(format!("{role_id}: wildcard action {action}"));
                }
                if action.starts_with("sqs:") {
                    if resources != [json!({"Fn::GetAtt": [queue, "Arn"]})] {
                        problems.push(format!(
                            "{role_id}: {action} on {resources:?}, not only the {queue} queue"
                        ));
                    }
                    sqs_actions.insert(action);
                } else if action.starts_with("dynamodb:") {
                    for resource in &resources {
                        let table = resource["Fn::GetAtt"][0].as_str().unwrap_or("?");
                        dynamodb
                            .entry(table.to_owned())
                            .or_default()
                            .insert(action.clone());
                    }
                } else if !action.starts_with("logs:") && !action.starts_with("xray:") {
                    problems.push(format!("{role_id}: unexpected action {action}"));
                }
            }
        }
    }
    // What the event source mapping needs; ChangeMessageVisibility only if
    // the function's own code changes a visibility.
    let mut needed: BTreeSet<String> = [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
    ]
    .map(String::from)
    .into();
    if code_contains(
        &[
            "functions/order-writer/src",
            "shared/src/app/order_writer.rs",
        ],
        "change_message_visibility",
    ) {
        needed.insert("sqs:ChangeMessageVisibility".into());
    }
    if sqs_actions != needed {
        problems.push(format!(
            "{role_id}: SQS actions {sqs_actions:?}, the event source needs exactly {needed:?}"
        ));
    }
    // The DynamoDB grants as the IAM test (tests/iam.rs) found them used.
    let expected: BTreeMap<String, BTreeSet<String>> = [
        (
            "OrdersTable",
            &[
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:GetItem",
            ][..],
        ),
        (
            "SalesTable",
            &["dynamodb:UpdateItem", "dynamodb:GetItem"][..],
        ),
    ]
    .into_iter()
    .map(|(t, a)| (t.to_owned(), a.iter().map(|s| s.to_string()).collect()))
    .collect();
    if dynamodb != expected {
        problems.push(format!(
            "{role_id}: DynamoDB grants {dynamodb:?}, expected {expected:?}"
        ));
    }
    assert!(
        problems.is_empty(),
        "order-writer:\n  {}",
        problems.join("\n  ")
    );
}

// ------------------------------------------------------------ 7. visibility

/// AWS's rule for an SQS event source: the queue's visibility timeout is at
/// least 6 x the function's timeout plus its batching window. And the local
/// stack's queue has the template's value.
#[test]
fn visibility_timeout_follows_the_rule() {
    let parent = template();
    let global_timeout = parent["Globals"]["Function"]["Timeout"].as_u64();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (id, function) in resources(&parent, "AWS::Serverless::Function") {
        let timeout = function["Properties"]["Timeout"]
            .as_u64()
            .or(global_timeout)
            .unwrap_or(3);
        for (queue, _, window) in
            sqs_events(&Stack::new(&parent, &BTreeMap::new()).unwrap(), function)
        {
            checked += 1;
            let visibility = parent["Resources"][&queue]["Properties"]["VisibilityTimeout"]
                .as_u64()
                .unwrap_or(30);
            let needed = 6 * timeout + window;
            if visibility < needed {
                problems.push(format!(
                    "{queue}: VisibilityTimeout {visibility} < 6 x {id}'s Timeout {timeout} + batching window {window} = {needed}"
                ));
            }
            if queue == "OrdersQueue" && u64::from(emulator::VISIBILITY_TIMEOUT_SECS) != visibility
            {
                problems.push(format!(
                    "the local stack's visibility timeout {} differs from the template's {visibility} (infra/src/emulator.rs)",
                    emulator::VISIBILITY_TIMEOUT_SECS
                ));
            }
        }
    }
    assert!(checked >= 1);
    assert!(
        problems.is_empty(),
        "visibility:\n  {}",
        problems.join("\n  ")
    );
}

// ------------------------------------------------------------ 8. tables

#[test]
fn tables_are_protected_and_ttl_has_a_writer() {
    let parent = template();
    let tables = resources(&parent, "AWS::DynamoDB::Table");
    assert_eq!(tables.len(), 2, "sales and orders");
    let mut problems = Vec::new();
    for (id, table) in tables {
        if table["Properties"]["DeletionProtectionEnabled"] != json!(true) {
            problems.push(format!("{id}: no DeletionProtectionEnabled: true"));
        }
        for policy in ["DeletionPolicy", "UpdateReplacePolicy"] {
            if table[policy] != "Retain" {
                problems.push(format!("{id}: {policy} is {}, not Retain", table[policy]));
            }
        }
        if let Some(spec) = table["Properties"].get("TimeToLiveSpecification") {
            let attribute = spec["AttributeName"].as_str().unwrap_or("");
            if !code_contains(&["shared/src", "functions"], &format!("\"{attribute}\"")) {
                problems.push(format!(
                    "{id}: TimeToLiveSpecification on {attribute:?}, which no code writes"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "tables:\n  {}", problems.join("\n  "));
}

// ------------------------------------------------------------ 11. sam local invoke

const SAM_LOCAL_ENV: &str = "infra/sam-local-env.json";

/// The local stack's names (`infra/src/local.rs` defaults, `make run`'s
/// ports) as a function in a container reaches them.
const LOCAL_REDIS: &str = "redis://host.docker.internal:6379";
const LOCAL_AWS: &str = "http://host.docker.internal:4566";

fn env_file() -> BTreeMap<String, BTreeMap<String, String>> {
    serde_json::from_str(&read(SAM_LOCAL_ENV)).unwrap()
}

/// The value `name` gets in `function` from the env-vars file: its own
/// entry over `Parameters` (SAM CLI's precedence).
fn from_file(
    file: &BTreeMap<String, BTreeMap<String, String>>,
    function: &str,
    name: &str,
) -> Option<String> {
    file.get(function)
        .and_then(|f| f.get(name))
        .or_else(|| file.get("Parameters").and_then(|p| p.get(name)))
        .cloned()
}

/// Checks one function's environment as a local container would get it.
/// Read by the functions, deliberately empty against the local stack: its
/// Redis has no AUTH token and no edge is in front of its API.
const UNSET_LOCALLY: &[&str] = &["REDIS_AUTH_SECRET_ARN", "EDGE_SECRET_ARN"];

fn check_local_env(
    function: &str,
    binary: &str,
    env: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
) {
    let expect = [
        ("REDIS_URL", LOCAL_REDIS.to_owned()),
        ("AWS_ENDPOINT_URL", LOCAL_AWS.to_owned()),
        ("SALES_TABLE", "seckill-sales".to_owned()),
        ("ORDERS_TABLE", "seckill-orders".to_owned()),
        (
            "ORDERS_QUEUE_URL",
            format!("{LOCAL_AWS}/123456789012/seckill-orders"),
        ),
        (
            "ORDERS_DLQ_URL",
            format!("{LOCAL_AWS}/123456789012/seckill-orders-dlq"),
        ),
    ];
    let handler = Function::parse(binary).unwrap();
    let reads = consistency::reads(handler.loader()).unwrap();
    for (name, value) in expect {
        let needed = name == "AWS_ENDPOINT_URL" || reads.contains(name);
        if needed && env.get(name) != Some(&value) {
            problems.push(format!(
                "{function}: {name} is {:?}, not the local stack's {value:?}",
                env.get(name)
            ));
        }
    }
    for name in &reads {
        // Empty is unset to the loaders: right only where the local stack
        // has nothing to name (its Redis has no AUTH token).
        if env.get(name).is_some_and(|v| v.is_empty()) && !UNSET_LOCALLY.contains(&name.as_str()) {
            problems.push(format!("{function}: {name} is empty"));
        }
    }
    let lookup = |name: &str| env.get(name).cloned();
    if let Err(e) = handler.loader()(&lookup) {
        problems.push(format!(
            "{function}: its configuration refuses the local env: {e}"
        ));
    }
}

/// Without SAM CLI: every variable the template sets through an intrinsic
/// that needs a deployed stack (a resource's `Ref`, a `GetAtt`, a
/// condition; `sam local` leaves it empty or a logical id) is in the
/// env-vars file, and `AWS_ENDPOINT_URL` is declared (SAM CLI passes only
/// declared variables). Parameters and pseudo parameters resolve, as
/// SAM CLI resolves them (stack name `local`).
#[test]
fn the_sam_local_env_file_covers_every_function() {
    let parent = template();
    let file = env_file();
    let declared = &parent["Globals"]["Function"]["Environment"]["Variables"];
    let mut problems = Vec::new();
    if declared.get("AWS_ENDPOINT_URL").is_none() {
        problems.push(
            "Globals declare no AWS_ENDPOINT_URL: sam local invoke drops it from the env-vars file"
                .to_owned(),
        );
    }
    let sam_local =
        Stack::with_pseudo(&parent, &BTreeMap::new(), "local", "us-east-1", UUID_A).unwrap();
    let functions = Template::from_json(&parent).unwrap().functions;
    for (id, function) in &functions {
        let mut env = BTreeMap::new();
        for (name, value) in &function.env {
            // Only parameters and pseudo parameters: a resource's Ref is
            // not known locally.
            let resolved = match value.get("Fn::If") {
                Some(_) => None,
                None => sam_local.eval(value).map(|v| scalar(&v)),
            };
            match from_file(&file, id, name).or(resolved) {
                Some(v) => {
                    env.insert(name.clone(), v);
                }
                None => problems.push(format!(
                    "{id}: {name} = {value} has no value in {SAM_LOCAL_ENV}"
                )),
            }
        }
        if let Some(v) = from_file(&file, id, "AWS_ENDPOINT_URL") {
            env.insert("AWS_ENDPOINT_URL".into(), v);
        }
        let binary = function.binary.clone().unwrap();
        check_local_env(id, &binary, &env, &mut problems);
    }
    assert!(
        problems.is_empty(),
        "{SAM_LOCAL_ENV}:\n  {}",
        problems.join("\n  ")
    );
}

/// The page that documents deploying, with the `sam local invoke` command
/// and the first sale's walkthrough.
const OPERATIONS_DOC: &str = "docs/operations.md";

/// The documented `sam local invoke` command: its `--env-vars` file and
/// `--parameter-overrides`.
fn documented_invoke_command() -> (String, Vec<String>) {
    let doc = read(OPERATIONS_DOC);
    let start = doc
        .find("sam local invoke PurchaseFunction")
        .unwrap_or_else(|| {
            panic!("{OPERATIONS_DOC} has no `sam local invoke PurchaseFunction` command")
        });
    let mut command = String::new();
    for line in doc[start..].lines() {
        command.push_str(line.trim_end_matches('\\'));
        command.push(' ');
        if !line.ends_with('\\') {
            break;
        }
    }
    // Shell words: whitespace-separated, single quotes group.
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in command.chars() {
        match c {
            '\'' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    let after = |flag: &str| {
        let at = words
            .iter()
            .position(|w| w == flag)
            .unwrap_or_else(|| panic!("{OPERATIONS_DOC}'s command has no {flag}: {command}"));
        words[at + 1].clone()
    };
    let env_vars = after("--env-vars");
    let overrides = after("--parameter-overrides")
        .split_whitespace()
        .map(String::from)
        .collect();
    (env_vars, overrides)
}

/// The documented command as the installed SAM CLI resolves it, every
/// function: what each container would get, checked against the local
/// stack and each function's configuration loader. (Running the containers
/// needs Docker, which the tests do not.)
#[test]
fn the_documented_sam_local_invoke_resolves_to_the_local_stack() {
    let sam = sam_cli();
    let python = sam.with_file_name("python3");
    if !python.exists() {
        eprintln!(
            "SKIPPED: no SAM CLI Python at {} (set SAM_CLI; `make test` installs it into .venv)",
            python.display()
        );
        return;
    }
    let (env_vars, overrides) = documented_invoke_command();
    assert_eq!(env_vars, SAM_LOCAL_ENV);
    let out = Command::new(&python)
        .arg(root().join("tests/sam_local_env.py"))
        .arg(root().join("template.yaml"))
        .arg(root().join(&env_vars))
        .args(&overrides)
        .env("SAM_CLI_TELEMETRY", "0")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tests/sam_local_env.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resolved: BTreeMap<String, BTreeMap<String, String>> =
        serde_json::from_slice(&out.stdout).unwrap();
    let functions = Template::from_json(&template()).unwrap().functions;
    assert_eq!(
        resolved.keys().collect::<Vec<_>>(),
        functions.keys().collect::<Vec<_>>()
    );
    let mut problems = Vec::new();
    for (id, env) in &resolved {
        let binary = functions[id].binary.clone().unwrap();
        check_local_env(id, &binary, env, &mut problems);
        // An intrinsic SAM CLI could not resolve and the file did not
        // override shows as a logical id or a parameter's name.
        let declared = &functions[id].env;
        for (name, value) in env.iter().filter(|(name, _)| declared.contains_key(*name)) {
            if template()["Resources"].get(value).is_some()
                || template()["Parameters"].get(value).is_some()
            {
                problems.push(format!("{id}: {name} = {value:?}, an unresolved reference"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "sam local invoke, as {OPERATIONS_DOC} runs it:\n  {}",
        problems.join("\n  ")
    );
}

/// The walkthrough's commands run on macOS as on Linux: no GNU-only
/// `date -d` in the README or any page of docs/, and the time helper the
/// walkthrough uses instead prints what a sale takes.
#[test]
fn the_walkthrough_is_portable() {
    let mut pages = vec!["README.md".to_string()];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    assert!(pages.iter().any(|p| p == OPERATIONS_DOC), "{pages:?}");
    for page in &pages {
        let text = read(page);
        for gnu in ["date -u -d", "date -d", "date --date"] {
            assert!(!text.contains(gnu), "{page} uses GNU-only `{gnu}`");
        }
    }
    let helper = read(OPERATIONS_DOC)
        .lines()
        .find(|l| l.starts_with("utc_in()"))
        .map(String::from)
        .unwrap_or_else(|| panic!("{OPERATIONS_DOC} defines no utc_in() helper"));
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("{helper}\nutc_in 120"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let at = seckill_shared::clock::parse_rfc3339_ms(printed.trim())
        .unwrap_or_else(|| panic!("utc_in printed {printed:?}, not an RFC 3339 time"));
    let ahead = at - seckill_shared::clock::now_ms();
    assert!(
        (100_000..=121_000).contains(&ahead),
        "utc_in 120 is {ahead} ms ahead"
    );
}

// ------------------------------------------------------------ 30. a big sale

/// Each `MetricStat` of an alarm as `(MetricName, {dimension: value})`,
/// values as written (long-form intrinsics).
fn alarm_metrics(alarm: &Json) -> Vec<(String, BTreeMap<String, Json>)> {
    let props = &alarm["Properties"];
    let single = props["MetricName"].as_str().map(|name| {
        let dims = as_list(&props["Dimensions"])
            .iter()
            .map(|d| (d["Name"].as_str().unwrap().to_owned(), d["Value"].clone()))
            .collect();
        (name.to_owned(), dims)
    });
    as_list(&props["Metrics"])
        .iter()
        .filter_map(|m| {
            let metric = &m["MetricStat"]["Metric"];
            let dims = as_list(&metric["Dimensions"])
                .iter()
                .map(|d| (d["Name"].as_str().unwrap().to_owned(), d["Value"].clone()))
                .collect();
            Some((metric["MetricName"].as_str()?.to_owned(), dims))
        })
        .chain(single)
        .collect()
}

fn watches(alarm: &Json, metric: &str, dims: &[(&str, Json)]) -> bool {
    let wanted: BTreeMap<String, Json> = dims
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    alarm_metrics(alarm)
        .iter()
        .any(|(name, d)| name == metric && *d == wanted)
}

/// The alarms a big sale needs, each watching every part it
/// names, each notifying, and each with its runbook row in
/// docs/operations.md "Alarms" (as does every other alarm of the template).
#[test]
fn the_alarms_that_matter_watch_every_table_index_and_api_function() {
    let parent = template();
    let r = &parent["Resources"];
    let mut problems = Vec::new();
    let mut need = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    // DynamoDB: every table's and every index's throttles, every table's
    // transaction conflicts.
    for (table, spec) in resources(&parent, "AWS::DynamoDB::Table") {
        let name = json!({ "Ref": table });
        for metric in ["WriteThrottleEvents", "ReadThrottleEvents"] {
            need(
                watches(
                    &r["DynamoDbThrottlesAlarm"],
                    metric,
                    &[("TableName", name.clone())],
                ),
                format!("DynamoDbThrottlesAlarm does not watch {metric} of {table}"),
            );
        }
        for index in as_list(&spec["Properties"]["GlobalSecondaryIndexes"]) {
            let index = index["IndexName"].clone();
            need(
                watches(
                    &r["DynamoDbThrottlesAlarm"],
                    "WriteThrottleEvents",
                    &[
                        ("TableName", name.clone()),
                        ("GlobalSecondaryIndexName", index.clone()),
                    ],
                ),
                format!("DynamoDbThrottlesAlarm does not watch {table}'s index {index}"),
            );
        }
        need(
            watches(
                &r["DynamoDbTransactionConflictsAlarm"],
                "TransactionConflict",
                &[("TableName", name.clone())],
            ),
            format!("DynamoDbTransactionConflictsAlarm does not watch {table}"),
        );
    }
    // Lambda: every function the API invokes is watched for throttles (the
    // order-writer by its own alarm), and the account's claimed concurrency.
    for (id, function) in resources(&parent, "AWS::Serverless::Function") {
        let events = function["Properties"]["Events"].as_object();
        let behind_api = events.is_some_and(|e| e.values().any(|e| e["Type"] == "HttpApi"));
        let alarm = if id == "OrderWriterFunction" {
            "OrderWriterThrottlesAlarm"
        } else if behind_api {
            "FunctionThrottlesAlarm"
        } else {
            continue;
        };
        need(
            watches(
                &r[alarm],
                "Throttles",
                &[("FunctionName", json!({ "Ref": id }))],
            ),
            format!("{alarm} does not watch {id}'s Throttles"),
        );
    }
    need(
        watches(
            &r["AccountConcurrencyAlarm"],
            "ClaimedAccountConcurrency",
            &[],
        ),
        "AccountConcurrencyAlarm does not watch ClaimedAccountConcurrency".into(),
    );
    // The API: 5xx of every route, and API Gateway's own 429s, counted from
    // the access log by a filter on the fields the log format writes.
    let api = [
        ("ApiId", json!({"Ref": "HttpApi"})),
        ("Stage", json!("$default")),
    ];
    for (alarm, metric) in [("Api5xxRateAlarm", "5xx"), ("Api5xxRateAlarm", "Count")] {
        need(
            watches(&r[alarm], metric, &api),
            format!("{alarm} does not watch the API's {metric}"),
        );
    }
    let filter = &r["ApiThrottledMetricFilter"]["Properties"];
    let format = r["HttpApi"]["Properties"]["AccessLogSettings"]["Format"]
        .as_str()
        .unwrap()
        .replace(char::is_whitespace, "");
    need(
        filter["LogGroupName"] == json!({"Ref": "HttpApiAccessLogs"})
            && r["HttpApi"]["Properties"]["AccessLogSettings"]["DestinationArn"]
                == json!({"Fn::GetAtt": ["HttpApiAccessLogs", "Arn"]}),
        "ApiThrottledMetricFilter does not read the API's access log".into(),
    );
    let pattern = filter["FilterPattern"].as_str().unwrap_or_default();
    need(
        pattern.contains(r#"$.status = "429""#)
            && pattern.contains(r#"$.integrationLatencyMs = "-""#)
            && format.contains(r#""status":"$context.status""#)
            && format.contains(r#""integrationLatencyMs":"$context.integrationLatency""#),
        format!("the 429 filter {pattern} does not match the access log's fields {format}"),
    );
    let transform = &filter["MetricTransformations"][0];
    need(
        watches(&r["ApiThrottledRateAlarm"], "ApiThrottled", &[])
            && watches(&r["ApiThrottledRateAlarm"], "Count", &api)
            && alarm_namespaces(&r["ApiThrottledRateAlarm"])
                .contains(&transform["MetricNamespace"]),
        "ApiThrottledRateAlarm does not read what the filter writes".into(),
    );
    // The queue's age, the DLQ's depth.
    need(
        r["OrdersQueueAgeAlarm"]["Properties"]["MetricName"] == "ApproximateAgeOfOldestMessage",
        "OrdersQueueAgeAlarm".into(),
    );
    need(
        r["OrdersDlqNotEmptyAlarm"]["Type"] == "AWS::CloudWatch::Alarm",
        "OrdersDlqNotEmptyAlarm".into(),
    );
    // Every alarm notifies and has its runbook row.
    let runbook = read("docs/operations.md");
    let runbook = runbook
        .split("\n## Alarms\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_default()
        .to_owned();
    for (id, alarm) in resources(&parent, "AWS::CloudWatch::Alarm") {
        need(
            runbook.contains(&format!("| `{id}`")),
            format!("{id} has no row in docs/operations.md \"Alarms\""),
        );
        need(
            alarm["Properties"]["AlarmActions"].is_object()
                && alarm["Properties"]["OKActions"].is_object(),
            format!("{id} notifies nobody"),
        );
    }
    assert!(problems.is_empty(), "alarms:\n  {}", problems.join("\n  "));
}

fn alarm_namespaces(alarm: &Json) -> Vec<Json> {
    as_list(&alarm["Properties"]["Metrics"])
        .iter()
        .map(|m| m["MetricStat"]["Metric"]["Namespace"].clone())
        .collect()
}

/// What a big sale switches on is off by default and off when asked, so
/// the template deploys in a new account (no reserved concurrency, no
/// provisioned concurrency, no warm throughput) and deploys them as the
/// plan says when set.
#[test]
fn a_big_sales_settings_are_parameters_that_can_be_off() {
    let parent = template();
    let r = &parent["Resources"];
    let purchase = &r["PurchaseFunction"]["Properties"];
    let orders = &r["OrdersTable"]["Properties"];
    let warm = |stack: &Stack| -> Vec<Option<u64>> {
        std::iter::once(&orders["WarmThroughput"])
            .chain(
                orders["GlobalSecondaryIndexes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| &i["WarmThroughput"]),
            )
            .map(|w| {
                let w = stack.eval(w)?;
                deployed_number(stack, &w["WriteUnitsPerSecond"])
            })
            .collect()
    };
    let orders_api = &r["OrdersApiFunction"]["Properties"];
    let defaults = Stack::new(&parent, &BTreeMap::new()).unwrap();
    for function in [purchase, orders_api] {
        assert_eq!(function["AutoPublishAlias"], "live");
        assert_eq!(
            defaults.eval(&function["ProvisionedConcurrencyConfig"]),
            None
        );
    }
    assert!(
        warm(&defaults).iter().all(Option::is_none),
        "{:?}",
        warm(&defaults)
    );

    let big = Stack::new(
        &parent,
        &BTreeMap::from([
            ("PurchaseProvisionedConcurrency".into(), "300".into()),
            ("OrdersApiProvisionedConcurrency".into(), "40".into()),
            ("OrdersTableWarmWriteUnitsPerSecond".into(), "20000".into()),
        ]),
    )
    .unwrap();
    for (function, expected) in [(purchase, 300), (orders_api, 40)] {
        let provisioned = big.eval(&function["ProvisionedConcurrencyConfig"]).unwrap();
        assert_eq!(
            deployed_number(&big, &provisioned["ProvisionedConcurrentExecutions"]),
            Some(expected)
        );
    }
    // The table and each index an order writes: every order writes them
    // all. The waitlist's index (last) has none: no order writes it.
    assert_eq!(warm(&big), [vec![Some(20_000); 4], vec![None]].concat());
    // Lambda refuses a provisioned concurrency of 0 and DynamoDB a warm
    // throughput of 0: 0 must mean "leave it out", never a value sent.
    for name in [
        "PurchaseProvisionedConcurrency",
        "OrdersApiProvisionedConcurrency",
        "OrdersTableWarmWriteUnitsPerSecond",
    ] {
        assert_eq!(parent["Parameters"][name]["Default"], 0, "{name}");
    }
}

/// Provisioned concurrency can be kept for the sale's window alone: with
/// `ProvisionedConcurrencyFrom` and `...Until` set, the functions' aliases
/// get no standing configuration, and Application Auto Scaling raises each
/// to its parameter at the start of the window and takes it to 0 at its end
/// (billed for the window, not every hour the stack stands); without them,
/// as before. Half a window is refused by the template's rules.
#[test]
fn provisioned_concurrency_can_be_held_for_the_sales_window_alone() {
    let parent = template();
    let r = &parent["Resources"];
    let (from, until) = ("2026-12-05T09:50:00", "2026-12-05T11:00:00");
    let windowed = Stack::new(
        &parent,
        &BTreeMap::from([
            ("PurchaseProvisionedConcurrency".into(), "300".into()),
            ("OrdersApiProvisionedConcurrency".into(), "40".into()),
            ("ProvisionedConcurrencyFrom".into(), from.into()),
            ("ProvisionedConcurrencyUntil".into(), until.into()),
        ]),
    )
    .unwrap();
    let always = Stack::new(
        &parent,
        &BTreeMap::from([
            ("PurchaseProvisionedConcurrency".into(), "300".into()),
            ("OrdersApiProvisionedConcurrency".into(), "40".into()),
        ]),
    )
    .unwrap();
    let defaults = Stack::new(&parent, &BTreeMap::new()).unwrap();
    for (function, schedule, n) in [
        ("PurchaseFunction", "PurchaseProvisionedSchedule", 300),
        ("OrdersApiFunction", "OrdersApiProvisionedSchedule", 40),
    ] {
        let config = &r[function]["Properties"]["ProvisionedConcurrencyConfig"];
        assert_eq!(
            windowed.eval(config),
            None,
            "{function} keeps a standing configuration"
        );
        assert!(always.eval(config).is_some(), "{function}");
        let target = &r[schedule];
        assert_eq!(
            target["Type"],
            "AWS::ApplicationAutoScaling::ScalableTarget"
        );
        let condition = target["Condition"].as_str().unwrap();
        assert_eq!(windowed.condition(condition), Some(true), "{schedule}");
        assert_eq!(always.condition(condition), Some(false), "{schedule}");
        assert_eq!(defaults.condition(condition), Some(false), "{schedule}");
        // The alias SAM makes for `AutoPublishAlias: live`.
        assert_eq!(target["DependsOn"], format!("{function}Aliaslive"));
        let p = &target["Properties"];
        assert_eq!(p["ServiceNamespace"], "lambda");
        assert_eq!(
            p["ScalableDimension"],
            "lambda:function:ProvisionedConcurrency"
        );
        assert_eq!(
            p["ResourceId"],
            json!({"Fn::Sub": format!("function:${{{function}}}:live")})
        );
        assert_eq!(deployed_number(&windowed, &p["MinCapacity"]), Some(0));
        assert_eq!(deployed_number(&windowed, &p["MaxCapacity"]), Some(n));
        let actions = as_list(&p["ScheduledActions"]);
        let at = |a: &Json| scalar(&windowed.eval(&a["Schedule"]).unwrap());
        let capacity = |a: &Json| {
            (
                deployed_number(&windowed, &a["ScalableTargetAction"]["MinCapacity"]),
                deployed_number(&windowed, &a["ScalableTargetAction"]["MaxCapacity"]),
            )
        };
        assert_eq!(actions.len(), 2, "{schedule}");
        assert_eq!(at(&actions[0]), format!("at({from})"));
        assert_eq!(capacity(&actions[0]), (Some(n), Some(n)));
        assert_eq!(at(&actions[1]), format!("at({until})"));
        assert_eq!(capacity(&actions[1]), (Some(0), Some(0)));
    }
    // Both ends or neither, each a UTC time as `at()` takes it.
    for name in ["ProvisionedConcurrencyFrom", "ProvisionedConcurrencyUntil"] {
        let spec = &parent["Parameters"][name];
        assert_eq!(spec["Default"], "", "{name}");
        let pattern = spec["AllowedPattern"].as_str().unwrap();
        assert_eq!(
            pattern, r"^$|^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$",
            "{name}"
        );
    }
    let rule = &parent["Rules"]["ProvisionedConcurrencyWindowIsWhole"]["Assertions"][0]["Assert"];
    assert_eq!(
        rule,
        &json!({"Fn::Or": [
            {"Fn::And": [
                {"Fn::Equals": [{"Ref": "ProvisionedConcurrencyFrom"}, ""]},
                {"Fn::Equals": [{"Ref": "ProvisionedConcurrencyUntil"}, ""]}
            ]},
            {"Fn::And": [
                {"Fn::Not": [{"Fn::Equals": [{"Ref": "ProvisionedConcurrencyFrom"}, ""]}]},
                {"Fn::Not": [{"Fn::Equals": [{"Ref": "ProvisionedConcurrencyUntil"}, ""]}]}
            ]}
        ]}),
        "half a window must be refused"
    );
}

/// The polling routes have a ceiling of their own below the stage's, on
/// routes the template has, so polls cannot take the purchases' share.
#[test]
fn polling_routes_are_throttled_apart_from_the_purchase() {
    let parent = template();
    let api = &parent["Resources"]["HttpApi"]["Properties"];
    let routes: BTreeSet<String> = Template::from_json(&parent)
        .unwrap()
        .functions
        .values()
        .flat_map(|f| f.triggers.iter().filter_map(|t| t.route_key()))
        .collect();
    let settings = api["RouteSettings"].as_object().unwrap();
    let polls: BTreeSet<&str> = settings.keys().map(String::as_str).collect();
    assert_eq!(
        polls,
        BTreeSet::from([
            "GET /sales/{saleId}",
            "GET /sales/{saleId}/orders",
            "GET /orders/{orderId}"
        ])
    );
    assert!(!polls.contains("POST /sales/{saleId}/purchase"));
    for profile in profiles() {
        let stack = Stack::new(&parent, &profile.overrides).unwrap();
        let stage = deployed_number(&stack, &api["DefaultRouteSettings"]["ThrottlingRateLimit"]);
        for (route, s) in settings {
            assert!(
                routes.contains(route),
                "{route} is not a route of the template"
            );
            let rate = deployed_number(&stack, &s["ThrottlingRateLimit"]);
            assert!(
                rate.is_some() && rate < stage,
                "[{}] {route}: {rate:?} against the stage's {stage:?}",
                profile.name
            );
            assert_eq!(s["DetailedMetricsEnabled"], true, "{route}");
        }
    }
}

/// `sam deploy` is given the capabilities the template needs (roles; a
/// transform with a nested stack), and `make build` runs on the SAM CLI
/// the project pins, exactly (its Rust builder must honour the shared
/// target directory): the one these tests run.
#[test]
fn deploys_get_their_capabilities_and_the_sam_cli_is_the_pinned_one() {
    let samconfig = read("samconfig.toml");
    let capabilities: Vec<&str> = samconfig
        .lines()
        .filter_map(|l| l.trim().strip_prefix("capabilities = "))
        .collect();
    assert_eq!(capabilities.len(), profiles().len(), "{capabilities:?}");
    for line in capabilities {
        let given: BTreeSet<&str> = line.trim_matches('"').split_whitespace().collect();
        assert_eq!(
            given,
            BTreeSet::from(["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"]),
            "{line}"
        );
    }
    let requirements = read("infra/requirements.txt");
    let pin = requirements
        .lines()
        .find_map(|l| l.strip_prefix("aws-sam-cli"))
        .unwrap();
    let version = pin
        .strip_prefix("==")
        .unwrap_or_else(|| panic!("aws-sam-cli{pin}: not an exact pin"));
    let out = Command::new(sam_cli()).arg("--version").output().unwrap();
    let installed = String::from_utf8_lossy(&out.stdout);
    assert!(
        installed.trim().ends_with(&format!("version {version}")),
        "pinned {version}, installed: {installed}"
    );
}

/// `make plan`'s `--parameter-overrides` deploy as they read: every name is
/// a parameter of the template and every value one the parameter takes,
/// for each example sale; where a value is beyond what the template
/// allows (more Redis masters than the stack creates), the plan says so.
#[test]
fn the_plans_overrides_are_values_the_template_takes() {
    use seckill_infra::plan::{PlanInput, plan};
    let parent = template();
    for input in [
        PlanInput::scarce(),
        PlanInput::plenty(),
        PlanInput::lottery(),
    ] {
        let p = plan(&input).unwrap();
        let overrides: BTreeMap<String, String> = p
            .overrides
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        Stack::new(&parent, &overrides).unwrap_or_else(|e| panic!("{}: {e}", input.name));
        for (name, value) in &overrides {
            let spec = &parent["Parameters"][name];
            let allowed = as_list(&spec["AllowedValues"]);
            let number: Option<f64> = value.parse().ok();
            let within = (allowed.is_empty() || allowed.iter().any(|a| scalar(a) == *value))
                && spec["MinValue"]
                    .as_f64()
                    .is_none_or(|min| number.is_some_and(|n| n >= min))
                && spec["MaxValue"]
                    .as_f64()
                    .is_none_or(|max| number.is_some_and(|n| n <= max));
            if !within {
                assert!(
                    p.notes
                        .iter()
                        .any(|n| n.contains(&format!("{name}={value}"))),
                    "{}: {name}={value} is outside the parameter ({spec}) and the plan does not say so",
                    input.name
                );
            }
        }
    }
}

/// The plan holds the jobs that read a whole sale to their functions'
/// `Timeout` and their memory's share of a vCPU: the figures it uses are
/// the template's, and the memory it picks is the `JobsMemorySize`
/// parameter both functions take (its default the plan's first step, every
/// step a value the parameter allows).
#[test]
fn the_plans_job_limits_are_the_templates() {
    use seckill_infra::plan::{JOBS_MEMORY_MB, PREWARM_TIMEOUT_SECS, RECONCILE_TIMEOUT_SECS};
    let parent = template();
    let parameter = &parent["Parameters"]["JobsMemorySize"];
    assert_eq!(parameter["Type"], "Number");
    assert_eq!(
        scalar(&parameter["Default"]),
        JOBS_MEMORY_MB[0].to_string(),
        "JobsMemorySize's Default"
    );
    for step in JOBS_MEMORY_MB {
        let step = f64::from(step);
        assert!(
            parameter["MinValue"].as_f64().is_some_and(|m| m <= step)
                && parameter["MaxValue"].as_f64().is_some_and(|m| m >= step),
            "JobsMemorySize ({parameter}) refuses the plan's {step} MB"
        );
    }
    for (function, timeout) in [
        ("PrewarmFunction", PREWARM_TIMEOUT_SECS),
        ("ReconcileFunction", RECONCILE_TIMEOUT_SECS),
    ] {
        let properties = &parent["Resources"][function]["Properties"];
        assert_eq!(
            properties["Timeout"].as_f64(),
            Some(timeout),
            "{function}'s Timeout"
        );
        assert_eq!(
            properties["MemorySize"],
            json!({"Ref": "JobsMemorySize"}),
            "{function}'s MemorySize"
        );
    }
}

// ------------------------------------------------------------ API edge

/// CloudFront's managed cache policy `CachingDisabled`.
const CACHING_DISABLED: &str = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
/// CloudFront's managed origin request policy `AllViewerExceptHostHeader`:
/// every viewer header but Host (API Gateway answers only its own), and,
/// with caching disabled, Authorization.
const ALL_VIEWER_EXCEPT_HOST: &str = "b689b0a8-53d0-40ab-baf2-68738e2966ac";

/// A CloudFront path pattern against a path: `*` is any run of characters,
/// `/` included, and `?` one character.
fn path_matches(pattern: &[u8], path: &[u8]) -> bool {
    match (pattern.split_first(), path.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => {
            path_matches(rest, path) || (!path.is_empty() && path_matches(pattern, &path[1..]))
        }
        (Some((b'?', rest)), Some((_, tail))) => path_matches(rest, tail),
        (Some((p, rest)), Some((c, tail))) => p == c && path_matches(rest, tail),
        _ => false,
    }
}

/// The cache behavior CloudFront picks for `path`: the first whose
/// pattern matches, in order, else the default.
fn behavior_for<'a>(config: &'a Json, path: &str) -> &'a Json {
    config["CacheBehaviors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| {
            path_matches(
                b["PathPattern"].as_str().unwrap().as_bytes(),
                path.as_bytes(),
            )
        })
        .unwrap_or(&config["DefaultCacheBehavior"])
}

/// `ApiEdge=on` puts the whole API behind one distribution. Every route of
/// the template lands on a behavior that serves it: the public sale view
/// alone is cached, for no longer than its `Cache-Control` and keyed on
/// nothing a buyer's token is in; every other route passes uncached with
/// its `Authorization` and its method, through the function that sets the
/// viewer's address. The origin gets the secret the purchase function
/// fetches, in the header it checks; WAF limits each viewer address and
/// answers as the API does. With `ApiEdge=off` none of it is made.
#[test]
fn the_api_edge_caches_only_the_public_sale_view_and_vouches_for_its_viewers() {
    use seckill_shared::http::{EDGE_SECRET_HEADER, SALE_VIEW_MAX_AGE_SECS, VIEWER_IP_HEADER};
    let parent = template();
    let r = &parent["Resources"];
    let config = &r["ApiDistribution"]["Properties"]["DistributionConfig"];
    let viewer_function =
        json!({"Fn::GetAtt": ["ApiEdgeViewerFunction", "FunctionMetadata.FunctionARN"]});

    let mut cached = BTreeSet::new();
    for function in Template::from_json(&parent).unwrap().functions.values() {
        for trigger in &function.triggers {
            let consistency::TriggerKind::Http {
                method,
                path,
                public,
            } = &trigger.kind
            else {
                continue;
            };
            let concrete = path.replace("{saleId}", "s-1").replace("{orderId}", "o-1");
            let behavior = behavior_for(config, &concrete);
            let route = format!("{method} {path}");
            assert!(
                as_list(&behavior["AllowedMethods"]).contains(&json!(method)),
                "{route}: {behavior}"
            );
            if behavior["CachePolicyId"] == CACHING_DISABLED {
                assert_eq!(
                    behavior["OriginRequestPolicyId"], ALL_VIEWER_EXCEPT_HOST,
                    "{route}"
                );
                assert_eq!(
                    behavior["FunctionAssociations"],
                    json!([{"EventType": "viewer-request", "FunctionARN": viewer_function}]),
                    "{route}"
                );
            } else {
                assert!(*public && method == "GET", "{route} is cached");
                assert_eq!(
                    behavior["CachePolicyId"],
                    json!({"Ref": "ApiSaleViewCachePolicy"})
                );
                cached.insert(route);
            }
        }
    }
    assert_eq!(cached, BTreeSet::from(["GET /sales/{saleId}".to_owned()]));

    let policy = &r["ApiSaleViewCachePolicy"]["Properties"]["CachePolicyConfig"];
    // No Cache-Control, no caching; never longer than the view's max-age
    // allows by more than a second.
    assert_eq!(
        (policy["MinTTL"].as_u64(), policy["DefaultTTL"].as_u64()),
        (Some(0), Some(0))
    );
    let max_ttl = policy["MaxTTL"].as_u64().unwrap();
    let max_age = u64::from(SALE_VIEW_MAX_AGE_SECS);
    assert!(
        (max_age..=max_age + 1).contains(&max_ttl),
        "MaxTTL {max_ttl}"
    );
    let key = &policy["ParametersInCacheKeyAndForwardedToOrigin"];
    assert_eq!(
        key["HeadersConfig"],
        json!({"HeaderBehavior": "whitelist", "Headers": ["Origin"]})
    );
    assert_eq!(key["CookiesConfig"]["CookieBehavior"], "none");
    assert_eq!(key["QueryStringsConfig"]["QueryStringBehavior"], "none");

    // The origin: this stack's API, over TLS, with the edge's secret in the
    // header the purchase function checks, the secret it fetches.
    let origin = &config["Origins"][0];
    assert_eq!(
        origin["DomainName"],
        json!({"Fn::Sub": "${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"})
    );
    assert_eq!(
        origin["CustomOriginConfig"]["OriginProtocolPolicy"],
        "https-only"
    );
    let header = &origin["OriginCustomHeaders"][0];
    assert!(
        header["HeaderName"]
            .as_str()
            .unwrap()
            .eq_ignore_ascii_case(EDGE_SECRET_HEADER)
    );
    assert_eq!(
        header["HeaderValue"],
        json!({"Fn::Sub": "{{resolve:secretsmanager:${ApiEdgeSecret}:SecretString}}"})
    );
    let on_edge =
        json!({"Fn::If": ["ApiEdgeOn", {"Ref": "ApiEdgeSecret"}, {"Ref": "AWS::NoValue"}]});
    for (name, resource) in resources(&parent, "AWS::Serverless::Function") {
        let env = &resource["Properties"]["Environment"]["Variables"]["EDGE_SECRET_ARN"];
        let policies = resource["Properties"]["Policies"].to_string();
        let may_read = policies.contains(r#"{"SecretArn":{"Ref":"ApiEdgeSecret"}}"#);
        if name == "PurchaseFunction" {
            assert_eq!(*env, on_edge);
            assert!(may_read, "{name} cannot read the edge's secret");
        } else {
            assert!(env.is_null() && !may_read, "{name} has the edge's secret");
        }
    }
    // The viewer function: the address CloudFront saw, replacing whatever
    // the viewer sent under either header.
    let code = r["ApiEdgeViewerFunction"]["Properties"]["FunctionCode"]
        .as_str()
        .unwrap();
    assert!(
        code.contains(&format!("delete request.headers['{EDGE_SECRET_HEADER}']")),
        "{code}"
    );
    assert!(
        code.contains(&format!(
            "request.headers['{VIEWER_IP_HEADER}'] = {{ value: event.viewer.ip }}"
        )),
        "{code}"
    );

    // WAF: per viewer address, the purchase route and everything, answered
    // with the API's own 429.
    let acl = &r["ApiEdgeWebAcl"]["Properties"];
    assert_eq!(acl["Scope"], "CLOUDFRONT");
    let limited = seckill_shared::error::ApiError::RateLimited {
        retry_after_secs: 60,
    };
    let body: Json = serde_json::from_str(
        acl["CustomResponseBodies"]["RateLimited"]["Content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(body["code"], limited.code());
    let rules = acl["Rules"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    for rule in rules {
        let rate = &rule["Statement"]["RateBasedStatement"];
        assert_eq!(rate["AggregateKeyType"], "IP", "{rule}");
        let block = &rule["Action"]["Block"]["CustomResponse"];
        assert_eq!(block["ResponseCode"], 429);
        assert_eq!(block["CustomResponseBodyKey"], "RateLimited");
    }
    let suffix = rules[0]["Statement"]["RateBasedStatement"]["ScopeDownStatement"]["ByteMatchStatement"]
        ["SearchString"]
        .as_str()
        .unwrap();
    let routes: Vec<String> = Template::from_json(&parent)
        .unwrap()
        .functions
        .values()
        .flat_map(|f| f.triggers.iter().filter_map(|t| t.route_key()))
        .collect();
    let purchases: Vec<&String> = routes.iter().filter(|r| r.ends_with(suffix)).collect();
    assert_eq!(purchases, vec!["POST /sales/{saleId}/purchase"]);

    // Where each part is made.
    let pick = |overrides: &[(&str, &str)], region: &str| {
        let overrides: BTreeMap<String, String> = overrides
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let stack = Stack::with_pseudo(&parent, &overrides, "seckill", region, UUID_A).unwrap();
        (
            stack.condition("ApiEdgeOn"),
            stack.condition("CreateApiEdgeWebAcl"),
            stack.eval(&config["WebACLId"]),
        )
    };
    let arn = "arn:aws:wafv2:us-east-1:123456789012:global/webacl/shared/0123";
    assert_eq!(pick(&[], "us-east-1").0, Some(true), "on by default");
    assert_eq!(pick(&[], "us-east-1").1, Some(true));
    assert_eq!(pick(&[], "eu-west-1"), (Some(true), Some(false), None));
    assert_eq!(
        pick(&[("ApiEdgeWebAclArn", arn)], "eu-west-1"),
        (Some(true), Some(false), Some(json!(arn)))
    );
    assert_eq!(pick(&[("ApiEdge", "off")], "us-east-1").0, Some(false));
    assert_eq!(pick(&[("ApiEdge", "off")], "us-east-1").1, Some(false));
    for name in [
        "ApiEdgeSecret",
        "ApiEdgeViewerFunction",
        "ApiSaleViewCachePolicy",
        "ApiDistribution",
    ] {
        assert_eq!(r[name]["Condition"], "ApiEdgeOn", "{name}");
    }
    assert_eq!(r["ApiEdgeWebAcl"]["Condition"], "CreateApiEdgeWebAcl");
    assert_eq!(parent["Outputs"]["ApiEdgeUrl"]["Condition"], "ApiEdgeOn");
}

/// An accepted purchase still queued at reconcile's maximum age is given up
/// (`REJECTED`, its unit back on sale): its buyer's order is lost. The
/// queue-age alarm must page in time to save it at any threshold its
/// parameter takes: the highest, plus the minutes the alarm needs to fire,
/// plus a quarter of an hour for someone to act (scale the writers, fix
/// them, redrive), stay within the maximum age reconcile runs with.
#[test]
fn the_queue_age_alarm_pages_before_reconcile_gives_a_queued_order_up() {
    const TIME_TO_ACT_SECS: u64 = 900;
    let parent = template();
    let alarm = &parent["Resources"]["OrdersQueueAgeAlarm"]["Properties"];
    assert_eq!(alarm["MetricName"], "ApproximateAgeOfOldestMessage");
    assert_eq!(alarm["Threshold"], json!({"Ref": "QueueAgeAlarmSeconds"}));
    let highest = parent["Parameters"]["QueueAgeAlarmSeconds"]["MaxValue"]
        .as_u64()
        .unwrap();
    let to_fire = alarm["Period"].as_u64().unwrap() * alarm["DatapointsToAlarm"].as_u64().unwrap();
    let give_up = seckill_shared::app::reconcile::ReconcileSettings::default()
        .max_age
        .as_secs();
    assert!(
        highest + to_fire + TIME_TO_ACT_SECS <= give_up,
        "QueueAgeAlarmSeconds may be {highest} s: the alarm fires {} s after a purchase, {} s before reconcile gives it up at {give_up} s",
        highest + to_fire,
        give_up.saturating_sub(highest + to_fire)
    );
}

/// Reconcile and the invariant checker read a big sale in slices of its
/// buyers kept on local disk (`seckill_shared::app::invariants::spill`), at most
/// `BYTES_PER_ORDER` an order: every function whose code reconciles has the
/// `/tmp` for a sale of a million orders at the longest ids, and no other
/// asks for more than Lambda's default.
#[test]
fn the_functions_that_reconcile_have_tmp_for_a_million_orders() {
    use seckill_shared::app::invariants::spill::BYTES_PER_ORDER;
    let t = template();
    let needed_mb = (1_000_000 * BYTES_PER_ORDER).div_ceil(1_024 * 1_024);
    let mut reconciling = Vec::new();
    for (name, function) in resources(&t, "AWS::Serverless::Function") {
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} names its binary"));
        let dir = format!("functions/{binary}/src");
        let reconciles = code_contains(&[&dir], "reconcile_sale")
            || code_contains(&[&dir], "reconcile::wire")
            || code_contains(&[&dir], "check_sale");
        let size = function["Properties"]["EphemeralStorage"]["Size"].as_u64();
        if reconciles {
            reconciling.push(name.as_str());
            let size = size.unwrap_or(512);
            assert!(
                size >= needed_mb,
                "{name}: /tmp of {size} MB, a read of 1,000,000 orders takes up to {needed_mb} MB"
            );
        } else {
            assert_eq!(size, None, "{name} reads no sale in slices");
        }
    }
    assert_eq!(reconciling, ["AdminApiFunction", "ReconcileFunction"]);
}
