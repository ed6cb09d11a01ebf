//! The OpenAPI description (`seckill_infra::openapi`) against the
//! template and against the local stack: it states every route of
//! `template.yaml` with the same method, path and authorizer, and nothing
//! else; the stack serves it at `GET /openapi.json`; and real answers of the
//! stack validate against its schemas.

use crate::cfn::template_json;
use seckill_infra::consistency::{Template, TriggerKind};
use seckill_tests::{LocalStack, StackClient};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::time::Duration;

/// `METHOD /path` → public, for every HttpApi event of the template.
fn template_routes() -> BTreeMap<String, bool> {
    let template = Template::from_json(&template_json()).unwrap();
    let mut routes = BTreeMap::new();
    for function in template.functions.values() {
        for trigger in &function.triggers {
            if let TriggerKind::Http {
                method,
                path,
                public,
            } = &trigger.kind
            {
                routes.insert(format!("{} {path}", method.to_ascii_uppercase()), *public);
            }
        }
    }
    routes
}

fn description() -> Json {
    serde_json::to_value(seckill_infra::openapi::document()).unwrap()
}

/// `METHOD /path` → the operation, for every operation of the description.
fn described(doc: &Json) -> BTreeMap<String, Json> {
    let mut routes = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            routes.insert(
                format!("{} {path}", method.to_ascii_uppercase()),
                operation.clone(),
            );
        }
    }
    routes
}

#[test]
fn the_description_has_exactly_the_templates_routes() {
    let template = template_routes();
    let doc = description();
    let described = described(&doc);
    assert!(template.len() > 20, "{template:?}");
    let missing: Vec<&String> = template
        .keys()
        .filter(|r| !described.contains_key(*r))
        .collect();
    let extra: Vec<&String> = described
        .keys()
        .filter(|r| !template.contains_key(*r))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not described: {missing:?}; not in the template: {extra:?}"
    );
    for (route, public) in &template {
        let operation = &described[route];
        // Public: an empty `security` overrides the document's bearer.
        let security = operation.get("security").unwrap_or(&doc["security"]);
        assert_eq!(
            security.as_array().unwrap().is_empty(),
            *public,
            "{route}: {security}"
        );
        let admin = route.split(' ').nth(1).unwrap().starts_with("/admin");
        assert_eq!(
            security.to_string().contains("seckill/admin"),
            admin,
            "{route}: {security}"
        );
        // Every `{param}` of the path is a required path parameter.
        let path = route.split(' ').nth(1).unwrap();
        for name in path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        {
            let declared = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"] == name && p["in"] == "path" && p["required"] == true);
            assert!(declared, "{route}: path parameter {name}");
        }
        assert!(
            operation["responses"].as_object().unwrap().len() >= 2,
            "{route}"
        );
    }
}

/// The schema named by a `$ref`, else the schema itself.
fn resolve<'a>(doc: &'a Json, schema: &'a Json) -> &'a Json {
    match schema.get("$ref").and_then(Json::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/components/schemas/");
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// Whether `value` has one of the schema's JSON types.
fn type_ok(types: &Json, value: &Json) -> bool {
    let one = |t: &str| match t {
        "null" => value.is_null(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    match types {
        Json::String(t) => one(t),
        Json::Array(all) => all.iter().filter_map(Json::as_str).any(one),
        _ => true,
    }
}

/// What of `value` the schema does not allow (the subset of JSON Schema
/// the description uses: `$ref`, `type`, `required`, `properties`,
/// `items`, `oneOf`), as `path: why` lines.
fn violations(doc: &Json, schema: &Json, value: &Json, at: &str) -> Vec<String> {
    let schema = resolve(doc, schema);
    if let Some(options) = schema.get("oneOf").and_then(Json::as_array) {
        let fits = options
            .iter()
            .filter(|o| violations(doc, o, value, at).is_empty())
            .count();
        return if fits == 1 {
            Vec::new()
        } else {
            vec![format!("{at}: fits {fits} of oneOf: {value}")]
        };
    }
    let mut found = Vec::new();
    if let Some(types) = schema.get("type")
        && !type_ok(types, value)
    {
        found.push(format!("{at}: {value} is not {types}"));
        return found;
    }
    if let Json::Object(fields) = value {
        for name in schema["required"].as_array().into_iter().flatten() {
            if !fields.contains_key(name.as_str().unwrap_or_default()) {
                found.push(format!("{at}: {name} is missing"));
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Json::as_object) {
            for (name, field) in fields {
                match properties.get(name) {
                    Some(property) => {
                        found.extend(violations(doc, property, field, &format!("{at}.{name}")))
                    }
                    None => found.push(format!("{at}: {name} is not in the schema")),
                }
            }
        }
    }
    if let (Json::Array(items), Some(item)) = (value, schema.get("items")) {
        for (i, v) in items.iter().enumerate() {
            found.extend(violations(doc, item, v, &format!("{at}[{i}]")));
        }
    }
    found
}

/// The schema of `route`'s answer with `status`.
fn answer_schema<'a>(doc: &'a Json, route: &str, status: u16) -> &'a Json {
    let (method, path) = route.split_once(' ').unwrap();
    let schema = &doc["paths"][path][method.to_ascii_lowercase()]["responses"][status.to_string()]
        ["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "{route} has no {status} answer");
    schema
}

#[track_caller]
fn assert_valid(doc: &Json, route: &str, status: u16, body: &Json) {
    let found = violations(doc, answer_schema(doc, route, status), body, "$");
    assert!(found.is_empty(), "{route} {status} {body}:\n{found:#?}");
}

#[test]
fn the_checker_refuses_what_the_schemas_do_not_allow() {
    let doc = description();
    let route = "GET /health";
    assert!(
        !violations(
            &doc,
            answer_schema(&doc, route, 200),
            &serde_json::json!({"status": 1}),
            "$"
        )
        .is_empty()
    );
    assert!(
        !violations(
            &doc,
            answer_schema(&doc, "GET /sales/{saleId}", 404),
            &serde_json::json!({"code": "X"}),
            "$"
        )
        .is_empty()
    );
}

#[tokio::test]
async fn the_stack_serves_the_description_and_its_answers_fit_it() {
    let stack = LocalStack::start().await;
    let doc = description();
    let (status, served) = stack.request("GET", "/openapi.json", &[], "").await;
    assert_eq!(status, 200);
    assert_eq!(served, doc);

    let (status, body) = stack.request("GET", "/health", &[], "").await;
    assert_eq!(status, 200);
    assert_valid(&doc, "GET /health", 200, &body);

    let sale = format!("/sales/{}", stack.demo_sale);
    let (status, body) = stack.request("GET", &sale, &[], "").await;
    assert_eq!(status, 200, "{body}");
    assert_valid(&doc, "GET /sales/{saleId}", 200, &body);
    let (status, body) = stack.request("GET", "/sales/nope", &[], "").await;
    assert_eq!(status, 404, "{body}");
    assert_valid(&doc, "GET /sales/{saleId}", 404, &body);

    let client = StackClient::new(&stack);
    let auth = client.buyer("openapi-1");
    let headers = [("authorization", auth.as_str())];
    let purchase = format!("{sale}/purchase");
    let (status, body) = stack
        .request("POST", &purchase, &headers, r#"{"quantity": 1}"#)
        .await;
    assert_eq!(status, 202, "{body}");
    assert_valid(&doc, "POST /sales/{saleId}/purchase", 202, &body);
    let order = body["orderId"].as_str().unwrap().to_owned();
    let (status, body) = stack.request("POST", &purchase, &headers, "").await;
    assert_eq!(status, 409, "{body}");
    assert_valid(&doc, "POST /sales/{saleId}/purchase", 409, &body);
    let (status, body) = stack.request("POST", &purchase, &[], "").await;
    assert_eq!(status, 401, "{body}");
    assert_valid(&doc, "POST /sales/{saleId}/purchase", 401, &body);

    let (status, body) = stack
        .request("GET", &format!("/orders/{order}"), &headers, "")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_valid(&doc, "GET /orders/{orderId}", 200, &body);
    let (status, body) = stack
        .request("GET", &format!("{sale}/orders"), &headers, "")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_valid(&doc, "GET /sales/{saleId}/orders", 200, &body);

    let (status, body) = client.admin("GET", "/admin/sales", "").await;
    assert_eq!(status, 200, "{body}");
    assert_valid(&doc, "GET /admin/sales", 200, &body);
}

/// schemathesis (`infra/schemathesis/requirements.txt`, installed by
/// `infra/stack.sh` into `.venv-schemathesis`, which exports
/// `SCHEMATHESIS`), else `.venv-schemathesis/bin/schemathesis`; `None`
/// when neither is there (a run outside `make test` skips the test unless
/// `SECKILL_REQUIRE_SCHEMATHESIS=1`).
fn schemathesis() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("SCHEMATHESIS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::cfn::root().join(".venv-schemathesis/bin/schemathesis"));
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("SECKILL_REQUIRE_SCHEMATHESIS").is_none(),
        "schemathesis not found at {}",
        path.display()
    );
    eprintln!("skipped: no schemathesis at {}", path.display());
    None
}

/// One schemathesis run of the description against the stack with the
/// token `bearer`, bounded in examples and time; its output on failure.
fn schemathesis_run(
    tool: &std::path::Path,
    spec: &std::path::Path,
    base: &str,
    bearer: &str,
    only: Option<&str>,
) {
    // The examples bound the work; the time limit only catches a hang, so
    // it is many times what a run takes on a slow machine sharing its two
    // cores with the whole suite (a limit near the run's length would fail
    // a sound run there).
    let mut command = std::process::Command::new("timeout");
    command
        .args(["--kill-after=10", "900"])
        .arg(tool)
        .arg("run")
        .arg(spec)
        .args(["--url", base])
        .args(["--header", &format!("Authorization: {bearer}")])
        .args([
            "--checks",
            "not_a_server_error,response_schema_conformance,status_code_conformance",
        ])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--max-examples", "40"])
        .args(["--workers", "2"])
        .args(["--seed", "31"])
        .args(["--request-timeout", "10"])
        .arg("--no-color")
        .current_dir(spec.parent().unwrap());
    if let Some(regex) = only {
        command.args(["--include-path-regex", regex]);
    }
    let out = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis ({bearer:.20}...):\n{text}"
    );
}

/// schemathesis drives the description against the stack: no request it
/// makes, from the schemas and beside them, gets a 5xx, every answer's
/// body fits the schema the description gives it, and every status is one
/// the description lists for the route. A buyer first
/// (every route; `/admin` answers it 403), then an operator on `/admin`
/// (after the buyer's run: an operator's pause would make purchases the
/// contract's `503 SALE_PAUSED`).
#[tokio::test]
async fn schemathesis_finds_no_server_error() {
    let Some(tool) = schemathesis() else { return };
    let stack = LocalStack::start().await;
    let client = StackClient::new(&stack);
    // The description, with the test's own demo sale as the sale example.
    let mut doc = description();
    let text = doc.to_string().replace(
        "\"example\":\"demo\"",
        &format!("\"example\":{:?}", stack.demo_sale),
    );
    doc = serde_json::from_str(&text).unwrap();
    let dir = std::env::temp_dir().join(format!("seckill-schemathesis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("openapi.json");
    std::fs::write(&spec, doc.to_string()).unwrap();
    let base = format!("http://{}", stack.addr);
    let buyer = client.buyer("schemathesis-buyer");
    let admin = format!(
        "Bearer {}",
        client.tokens.mint("schemathesis-ops", true, 600).unwrap()
    );
    let (spec_for, base_for) = (spec.clone(), base.clone());
    tokio::task::spawn_blocking(move || {
        schemathesis_run(&tool, &spec_for, &base_for, &buyer, None);
        schemathesis_run(&tool, &spec_for, &base_for, &admin, Some("^/admin"));
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // And no invariant broken by what it sent: the checker over the demo
    // sale, once what is in flight has settled (a violation that lasts is
    // one; a purchase still on its way to the ledger is not).
    let checker = stack.checker().await;
    let sale = seckill_shared::domain::SaleId::parse(&stack.demo_sale).unwrap();
    let last = std::sync::Mutex::new(Vec::new());
    let clean = seckill_tests::eventually(Duration::from_secs(180), || async {
        let found = checker
            .check_sale(&sale, &[])
            .await
            .unwrap()
            .unwrap_or_default();
        let none = found.is_empty();
        *last.lock().unwrap() = found;
        none
    })
    .await;
    let last = last.into_inner().unwrap();
    assert!(clean, "the invariants after schemathesis: {last:?}");
}
