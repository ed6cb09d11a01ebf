//! CloudFormation YAML as JSON, for the tests that read `template.yaml`
//! and `infra/redis-stack.yaml` (consistency, template, secrets, order_index).

use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `template.yaml` as it is now on disk.
pub fn template_json() -> Json {
    let text = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    cfn_json(serde_norway::from_str(&text).unwrap())
}

/// `SAM_CLI` (set by `infra/stack.sh`), else `.venv/bin/sam`; relative
/// paths are from the workspace root.
pub fn sam_cli() -> PathBuf {
    let path = std::env::var_os("SAM_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".venv/bin/sam"));
    if path.is_absolute() {
        path
    } else {
        root().join(path)
    }
}

/// YAML as CloudFormation reads it, as JSON: each short tag in its long
/// form (`!Ref x` is `{"Ref": "x"}`, `!GetAtt a.b` is `{"Fn::GetAtt": ["a",
/// "b"]}`, `!Sub`, `!If`, ... are `{"Fn::Sub": ...}`, `{"Fn::If": ...}`).
pub fn cfn_json(yaml: serde_norway::Value) -> Json {
    use serde_norway::Value as Yaml;
    match yaml {
        Yaml::Null => Json::Null,
        Yaml::Bool(b) => Json::Bool(b),
        Yaml::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => json!(i),
            (_, Some(u), _) => json!(u),
            (_, _, f) => json!(f),
        },
        Yaml::String(s) => Json::String(s),
        Yaml::Sequence(items) => Json::Array(items.into_iter().map(cfn_json).collect()),
        Yaml::Mapping(map) => Json::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let key = match cfn_json(k) {
                        Json::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, cfn_json(v))
                })
                .collect(),
        ),
        Yaml::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let value = cfn_json(tagged.value);
            match tag.trim_start_matches('!') {
                "Ref" => json!({"Ref": value}),
                "Condition" => json!({"Condition": value}),
                "GetAtt" => match value {
                    Json::String(dotted) => {
                        let (resource, attribute) = dotted.split_once('.').unwrap_or((&dotted, ""));
                        json!({"Fn::GetAtt": [resource, attribute]})
                    }
                    other => json!({"Fn::GetAtt": other}),
                },
                function => json!({ format!("Fn::{function}"): value }),
            }
        }
    }
}
