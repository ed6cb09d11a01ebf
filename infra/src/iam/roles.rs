//! Each function's grants, read from the template as CloudFormation
//! creates it (`infra/sam_translate.py`'s output): inline policies with
//! their resources resolved to logical ids, the managed policies this check
//! knows, and what an SQS event source needs of the role.

use super::{IamError, Permission, Resource};
use serde_json::Value;
use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iam::action_covers;
    use serde_json::json;

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
}
