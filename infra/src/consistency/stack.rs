//! One stack as CloudFormation would create it from a template whose short
//! tags are expanded: parameter values (overrides over defaults) and pseudo
//! parameters, enough to evaluate the intrinsics that build names, pick
//! zones and switch properties on and off (`Fn::If` over `Conditions`).
//! What the checks and tests read as "deployed" goes through here, so a
//! value written as a parameter is read as the parameter's value.

use serde_json::{Value as Json, json};
use std::collections::BTreeMap;

/// An override for a parameter the template does not declare.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("override {0} is not a parameter of the template")]
pub struct UnknownParameter(pub String);

/// The stack id's UUID of [`Stack::new`].
pub const DEFAULT_STACK_UUID: &str = "5f0c7a10-3c2e-11ef-9b1a-0a8e2c4d6f01";

/// One stack as CloudFormation would create it: parameter values (overrides
/// over defaults) and pseudo parameters, enough to evaluate the intrinsics
/// that build names and pick zones. `None` is "not known before deploy"
/// (a resource's `Ref` or `GetAtt`).
pub struct Stack<'a> {
    template: &'a Json,
    params: BTreeMap<String, Json>,
    pseudo: BTreeMap<&'static str, String>,
}

impl<'a> Stack<'a> {
    /// # Errors
    /// An override that names no parameter of the template (CloudFormation
    /// refuses the deploy).
    pub fn new(
        template: &'a Json,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Self, UnknownParameter> {
        Self::with_pseudo(
            template,
            overrides,
            "seckill",
            "us-east-1",
            DEFAULT_STACK_UUID,
        )
    }

    pub fn with_pseudo(
        template: &'a Json,
        overrides: &BTreeMap<String, String>,
        stack_name: &str,
        region: &str,
        uuid: &str,
    ) -> Result<Self, UnknownParameter> {
        let mut params = BTreeMap::new();
        let declared = template["Parameters"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (name, spec) in &declared {
            let raw = overrides
                .get(name)
                .cloned()
                .or_else(|| spec.get("Default").map(scalar));
            let Some(raw) = raw else { continue };
            let value = if spec["Type"] == "CommaDelimitedList" {
                Json::Array(raw.split(',').map(|s| json!(s.trim())).collect())
            } else {
                Json::String(raw)
            };
            params.insert(name.clone(), value);
        }
        if let Some(name) = overrides.keys().find(|name| !declared.contains_key(*name)) {
            return Err(UnknownParameter(name.clone()));
        }
        let pseudo = BTreeMap::from([
            ("AWS::StackName", stack_name.to_owned()),
            ("AWS::Region", region.to_owned()),
            (
                "AWS::StackId",
                format!("arn:aws:cloudformation:{region}:123456789012:stack/{stack_name}/{uuid}"),
            ),
            ("AWS::AccountId", "123456789012".to_owned()),
            ("AWS::Partition", "aws".to_owned()),
            ("AWS::URLSuffix", "amazonaws.com".to_owned()),
        ]);
        Ok(Self {
            template,
            params,
            pseudo,
        })
    }

    pub fn eval(&self, value: &Json) -> Option<Json> {
        let Some(object) = value.as_object() else {
            return match value {
                Json::Array(items) => items.iter().map(|v| self.eval(v)).collect(),
                other => Some(other.clone()),
            };
        };
        let (function, args) = object.iter().next()?;
        let intrinsic = object.len() == 1 && (function == "Ref" || function.starts_with("Fn::"));
        if !intrinsic {
            // A plain mapping: its values as deployed, a value that is
            // `AWS::NoValue` left out, one unknown before deploy kept as written.
            return Some(Json::Object(
                object
                    .iter()
                    .filter(|(_, v)| v.get("Ref").and_then(Json::as_str) != Some("AWS::NoValue"))
                    .map(|(k, v)| (k.clone(), self.eval(v).unwrap_or_else(|| v.clone())))
                    .collect(),
            ));
        }
        match function.as_str() {
            "Ref" => {
                let name = args.as_str()?;
                self.params
                    .get(name)
                    .cloned()
                    .or_else(|| self.pseudo.get(name).map(|v| json!(v)))
            }
            "Fn::Sub" => {
                let (text, vars) = match args {
                    Json::String(text) => (text.as_str(), None),
                    Json::Array(pair) => (pair[0].as_str()?, pair.get(1)),
                    _ => return None,
                };
                let mut out = String::new();
                let mut rest = text;
                while let Some(start) = rest.find("${") {
                    out.push_str(&rest[..start]);
                    let end = rest[start..].find('}')? + start;
                    let name = &rest[start + 2..end];
                    let bound = match vars.and_then(|v| v.get(name)) {
                        Some(v) => self.eval(v),
                        None => self.eval(&json!({ "Ref": name })),
                    };
                    out.push_str(&scalar(&bound?));
                    rest = &rest[end + 1..];
                }
                out.push_str(rest);
                Some(json!(out))
            }
            "Fn::Join" => {
                let separator = args[0].as_str()?;
                let items = self.eval(&args[1])?;
                let items: Vec<String> = items.as_array()?.iter().map(scalar).collect();
                Some(json!(items.join(separator)))
            }
            "Fn::Select" => {
                let index: usize = scalar(&self.eval(&args[0])?).parse().ok()?;
                self.eval(&args[1])?.as_array()?.get(index).cloned()
            }
            "Fn::Split" => {
                let separator = args[0].as_str()?;
                let text = scalar(&self.eval(&args[1])?);
                Some(Json::Array(
                    text.split(separator).map(|s| json!(s)).collect(),
                ))
            }
            "Fn::If" => {
                let branch = if self.condition(args[0].as_str()?)? {
                    &args[1]
                } else {
                    &args[2]
                };
                self.eval(branch)
            }
            _ => None,
        }
    }

    pub fn condition(&self, name: &str) -> Option<bool> {
        self.holds(&self.template["Conditions"][name])
    }

    pub fn holds(&self, expr: &Json) -> Option<bool> {
        let (function, args) = expr.as_object()?.iter().next()?;
        match function.as_str() {
            "Fn::Equals" => Some(scalar(&self.eval(&args[0])?) == scalar(&self.eval(&args[1])?)),
            "Fn::Not" => self.holds(&args[0]).map(|b| !b),
            "Fn::And" => self.all_hold(args).map(|v| v.iter().all(|b| *b)),
            "Fn::Or" => self.all_hold(args).map(|v| v.iter().any(|b| *b)),
            "Condition" => self.condition(args.as_str()?),
            _ => None,
        }
    }

    /// Each condition of a list, or `None` if one cannot be told.
    fn all_hold(&self, list: &Json) -> Option<Vec<bool>> {
        list.as_array()?.iter().map(|a| self.holds(a)).collect()
    }

    /// The parameters this stack passes to the nested Redis stack.
    pub fn nested_overrides(&self) -> BTreeMap<String, String> {
        let passed = &self.template["Resources"]["RedisStack"]["Properties"]["Parameters"];
        passed
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| Some((name.clone(), scalar(&self.eval(value)?))))
            .collect()
    }
}

pub fn scalar(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        Json::Array(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}
