//! Template–code consistency: `template.yaml`, read at test time,
//! against the workspace. The repository must have no mismatch, and each
//! change made on one side only (a route, a variable, a binary, an event)
//! must be reported. Then the events of `events/` against what `sam local
//! generate-event` makes for the same triggers, and those generated events
//! through the real handlers.

use seckill_infra::consistency::{self, Code, LocalRoute, Mismatch, Template, check};
use seckill_infra::invoke::{self, Function, Handler};
use seckill_shared::config::{Config, ConfigError, Lookup};
use serde_json::{Value as Json, json};
use std::path::Path;
use std::process::Command;

use crate::cfn;
use cfn::{cfn_json, root, sam_cli, template_json};

fn code() -> Code {
    Code::from_repo(&root()).unwrap()
}

fn mismatches(template: &Json, code: &Code) -> Vec<Mismatch> {
    check(&Template::from_json(template).unwrap(), code)
}

fn listed(found: &[Mismatch]) -> String {
    found
        .iter()
        .map(|m| format!("  - {m}\n"))
        .collect::<String>()
}

#[track_caller]
fn assert_reported(found: &[Mismatch], expected: &Mismatch) {
    assert!(
        found.contains(expected),
        "expected {expected:?} (\"{expected}\") among:\n{}",
        listed(found)
    );
}

/// Removes the value at a JSON pointer; it must have been there.
#[track_caller]
fn remove(json: &mut Json, pointer: &str) -> Json {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    json.pointer_mut(parent)
        .and_then(Json::as_object_mut)
        .and_then(|map| map.remove(key))
        .unwrap_or_else(|| panic!("{pointer} is not in the template"))
}

#[track_caller]
fn set(json: &mut Json, pointer: &str, value: Json) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    json.pointer_mut(parent)
        .and_then(Json::as_object_mut)
        .unwrap_or_else(|| panic!("{parent} is not in the template"))
        .insert(key.to_owned(), value);
}

#[test]
fn the_repository_is_consistent() {
    let found = mismatches(&template_json(), &code());
    assert!(
        found.is_empty(),
        "template.yaml and the code disagree:\n{}",
        listed(&found)
    );
}

#[test]
fn the_template_is_read_as_sam_reads_it() {
    let template = Template::from_json(&template_json()).unwrap();
    let purchase = &template.functions["PurchaseFunction"];
    assert_eq!(purchase.binary.as_deref(), Some("purchase"));
    // Globals come under the function's own variables.
    assert_eq!(
        purchase.env["REDIS_URL"]["Fn::If"][2],
        json!({"Ref": "RedisUrl"})
    );
    assert_eq!(
        purchase.env["METRICS_NAMESPACE"],
        json!({"Fn::Sub": "Seckill/${AWS::StackName}"})
    );
    assert_eq!(
        purchase.env["ORDERS_QUEUE_URL"],
        json!({"Ref": "OrdersQueue"})
    );
    let get_sale = template.functions["OrdersApiFunction"]
        .triggers
        .iter()
        .find(|t| t.name == "GetSale")
        .unwrap();
    assert_eq!(
        get_sale.kind,
        consistency::TriggerKind::Http {
            method: "GET".into(),
            path: "/sales/{saleId}".into(),
            public: true,
        }
    );
    // Every function of the design is there, built from its binary.
    let mut binaries: Vec<_> = template
        .functions
        .values()
        .filter_map(|f| f.binary.clone())
        .collect();
    binaries.sort();
    let mut expected: Vec<_> = Function::ALL.map(|f| f.name().to_owned()).to_vec();
    expected.sort();
    assert_eq!(binaries, expected);
}

#[test]
fn short_tags_become_the_long_form() {
    let yaml = "
a: !Ref Thing
b: !GetAtt Queue.Arn
c: !Sub ${AWS::StackName}-x
d: !If [Cond, !Ref A, !Ref AWS::NoValue]
e: !Not [!Equals [!Ref P, '']]
f: !GetAtt [Stack, Outputs.Url]
";
    let json = cfn_json(serde_norway::from_str(yaml).unwrap());
    assert_eq!(
        json,
        json!({
            "a": {"Ref": "Thing"},
            "b": {"Fn::GetAtt": ["Queue", "Arn"]},
            "c": {"Fn::Sub": "${AWS::StackName}-x"},
            "d": {"Fn::If": ["Cond", {"Ref": "A"}, {"Ref": "AWS::NoValue"}]},
            "e": {"Fn::Not": [{"Fn::Equals": [{"Ref": "P"}, ""]}]},
            "f": {"Fn::GetAtt": ["Stack", "Outputs.Url"]},
        })
    );
}

// ------------------------------------------------------------------ routes

/// The operator console's routes, as the console page calls them.
const CONSOLE_ROUTES: [(&str, &str); 7] = [
    ("GET", "/admin/sales"),
    ("GET", "/admin/sales/{saleId}"),
    ("POST", "/admin/sales/{saleId}/end"),
    ("GET", "/admin/orders/{orderId}"),
    ("GET", "/admin/sales/{saleId}/orders"),
    ("GET", "/admin/dlq"),
    ("POST", "/admin/dlq/redrive"),
];

/// Every `/admin` route of the template is behind the JWT authorizer with
/// the admin scope (API Gateway's 403 comes before any function runs), and
/// the console's routes are among them, dispatched by `admin-api` and
/// served by the local gateway as admin routes.
#[test]
fn every_admin_route_needs_the_admin_scope_and_the_console_has_its_routes() {
    let template = template_json();
    let events = template["Resources"]["AdminApiFunction"]["Properties"]["Events"]
        .as_object()
        .unwrap();
    let mut admin_routes = Vec::new();
    for (name, event) in events {
        let props = &event["Properties"];
        let path = props["Path"].as_str().unwrap();
        assert!(path.starts_with("/admin/"), "{name}: {path}");
        assert_eq!(props["Auth"]["Authorizer"], "JwtAuthorizer", "{name}");
        assert_eq!(
            props["Auth"]["AuthorizationScopes"],
            json!(["seckill/admin"]),
            "{name}: {path}"
        );
        admin_routes.push((props["Method"].as_str().unwrap().to_uppercase(), path));
    }
    for (method, path) in CONSOLE_ROUTES {
        assert!(
            admin_routes.iter().any(|(m, p)| m == method && *p == path),
            "{method} {path} is not in the template"
        );
        assert!(admin_api::handler::ROUTES.contains(&format!("{method} {path}").as_str()));
        let (route, _) = seckill_infra::gateway::match_route(
            method,
            &path.replace("{saleId}", "s-1").replace("{orderId}", "o-1"),
        )
        .unwrap();
        assert_eq!(
            route.path, path,
            "{method} {path}: the gateway matched another route"
        );
        assert!(
            route.authorized && route.target == seckill_infra::gateway::Target::AdminApi,
            "{method} {path}"
        );
    }
}

#[test]
fn a_route_removed_from_the_template_is_reported() {
    let mut template = template_json();
    remove(
        &mut template,
        "/Resources/OrdersApiFunction/Properties/Events/PayOrder",
    );
    let found = mismatches(&template, &code());
    assert_reported(
        &found,
        &Mismatch::RouteNotInTemplate {
            route: "POST /orders/{orderId}/pay".into(),
            binary: "orders-api".into(),
        },
    );
    assert_reported(
        &found,
        &Mismatch::HandlerRouteNotInTemplate {
            binary: "orders-api".into(),
            route: "POST /orders/{orderId}/pay".into(),
        },
    );
    assert_reported(
        &found,
        &Mismatch::OrphanEvent {
            file: "orders-pay.json".into(),
        },
    );
}

#[test]
fn a_route_removed_from_the_local_gateway_is_reported() {
    let mut code = code();
    code.routes.retain(|r| r.path != "/sales/{saleId}/purchase");
    let found = mismatches(&template_json(), &code);
    assert_eq!(
        found,
        [Mismatch::RouteNotServed {
            route: "POST /sales/{saleId}/purchase".into(),
            function: "PurchaseFunction".into(),
        }],
        "{}",
        listed(&found)
    );
}

#[test]
fn local_only_routes_are_allowed_and_no_other_gateway_only_route_is() {
    let local = |method: &str, path: &str| LocalRoute {
        method: method.into(),
        path: path.into(),
        // Whatever serves the pages locally: not a function of the template.
        function: "seckill-local".into(),
        public: true,
    };
    let mut code = code();
    code.routes
        .retain(|r| !consistency::is_local_only(&r.method, &r.path));
    for route in consistency::LOCAL_ONLY_ROUTES {
        let (method, path) = route.split_once(' ').unwrap();
        code.routes.push(local(method, path));
    }
    // The asset route under another parameter name is the same route.
    code.routes.push(local("GET", "/assets/{path}"));
    let found = mismatches(&template_json(), &code);
    assert!(found.is_empty(), "{}", listed(&found));

    // Anything else served only locally is reported, near misses included.
    for (method, path) in [
        ("GET", "/admin/debug"),
        ("POST", "/"),
        ("GET", "/ops/{saleId}"),
        ("GET", "/local/token"),
    ] {
        let mut code = code.clone();
        code.routes.push(local(method, path));
        let found = mismatches(&template_json(), &code);
        assert_eq!(
            found,
            [Mismatch::RouteNotInTemplate {
                route: format!("{method} {path}"),
                binary: "seckill-local".into(),
            }],
            "{}",
            listed(&found)
        );
    }
}

#[test]
fn the_gateways_own_routes_are_the_local_only_routes() {
    // What the gateway serves itself (the pages, the local sign-in) is the
    // checker's list, no more and no less.
    let own: Vec<String> = code()
        .routes
        .iter()
        .filter(|r| r.function == consistency::LOCAL_SERVER)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(own, consistency::LOCAL_ONLY_ROUTES);

    // The template routing one of them to a function is reported.
    let mut template = template_json();
    set(
        &mut template,
        "/Resources/OrdersApiFunction/Properties/Events/Dashboard",
        json!({"Type": "HttpApi", "Properties": {
            "ApiId": {"Ref": "HttpApi"}, "Path": "/ops", "Method": "get",
            "Auth": {"Authorizer": "NONE"}}}),
    );
    let found = mismatches(&template, &code());
    assert_reported(
        &found,
        &Mismatch::RouteTarget {
            route: "GET /ops".into(),
            template: "orders-api".into(),
            local: consistency::LOCAL_SERVER.into(),
        },
    );
}

#[test]
fn a_route_sent_elsewhere_or_guarded_differently_is_reported() {
    let mut code = code();
    let health = code
        .routes
        .iter_mut()
        .find(|r| r.path == "/health")
        .unwrap();
    health.function = "admin-api".into();
    let found = mismatches(&template_json(), &code);
    assert_reported(
        &found,
        &Mismatch::RouteTarget {
            route: "GET /health".into(),
            template: "orders-api".into(),
            local: "admin-api".into(),
        },
    );

    let mut template = template_json();
    set(
        &mut template,
        "/Resources/OrdersApiFunction/Properties/Events/GetSale/Properties/Auth/Authorizer",
        json!("JwtAuthorizer"),
    );
    let found = mismatches(&template, &self::code());
    assert_reported(
        &found,
        &Mismatch::RouteAuth {
            route: "GET /sales/{saleId}".into(),
            template_public: false,
        },
    );
    // Its event has no claims, as API Gateway sends a public route's.
    assert!(
        found
            .iter()
            .any(|m| matches!(m, Mismatch::EventRefused { file, .. } if file == "sales-get.json")),
        "{}",
        listed(&found)
    );
}

#[test]
fn a_route_the_handler_does_not_dispatch_is_reported() {
    let mut code = code();
    code.handler_routes
        .get_mut("admin-api")
        .unwrap()
        .retain(|r| r != "GET /admin/sales/{saleId}/report");
    let found = mismatches(&template_json(), &code);
    assert_eq!(
        found,
        [Mismatch::HandlerMissesRoute {
            binary: "admin-api".into(),
            route: "GET /admin/sales/{saleId}/report".into(),
        }],
        "{}",
        listed(&found)
    );
}

#[test]
fn a_new_route_on_both_sides_without_an_event_is_reported() {
    let mut template = template_json();
    set(
        &mut template,
        "/Resources/OrdersApiFunction/Properties/Events/ListOrders",
        json!({"Type": "HttpApi", "Properties": {
            "ApiId": {"Ref": "HttpApi"}, "Path": "/orders", "Method": "get",
            "Auth": {"Authorizer": "JwtAuthorizer"}}}),
    );
    let mut code = code();
    code.routes.push(LocalRoute {
        method: "GET".into(),
        path: "/orders".into(),
        function: "orders-api".into(),
        public: false,
    });
    code.handler_routes
        .get_mut("orders-api")
        .unwrap()
        .push("GET /orders".into());
    let found = mismatches(&template, &code);
    assert_eq!(found.len(), 1, "{}", listed(&found));
    assert!(
        matches!(&found[0], Mismatch::NoEvent { function, trigger, .. }
            if function == "OrdersApiFunction" && trigger.contains("GET /orders")),
        "{}",
        listed(&found)
    );
}

// ------------------------------------------------------------- environment

#[test]
fn a_variable_dropped_from_a_function_is_reported() {
    let mut template = template_json();
    remove(
        &mut template,
        "/Resources/PurchaseFunction/Properties/Environment/Variables/SQS_TIMEOUT_MS",
    );
    let found = mismatches(&template, &code());
    assert_eq!(
        found,
        [Mismatch::ReadNotSet {
            function: "PurchaseFunction".into(),
            binary: "purchase".into(),
            variable: "SQS_TIMEOUT_MS".into(),
        }],
        "{}",
        listed(&found)
    );

    // From Globals: every function reads it.
    let mut template = template_json();
    remove(
        &mut template,
        "/Globals/Function/Environment/Variables/REDIS_URL",
    );
    let found = mismatches(&template, &code());
    let unset: Vec<_> = found
        .iter()
        .filter(|m| matches!(m, Mismatch::ReadNotSet { variable, .. } if variable == "REDIS_URL"))
        .collect();
    assert_eq!(unset.len(), Function::ALL.len(), "{}", listed(&found));
}

#[test]
fn an_unused_variable_is_reported() {
    let mut template = template_json();
    set(
        &mut template,
        "/Resources/PurchaseFunction/Properties/Environment/Variables/MAX_RECEIVE_COUNT",
        json!("5"),
    );
    let found = mismatches(&template, &code());
    assert_eq!(
        found,
        [Mismatch::SetNotRead {
            function: "PurchaseFunction".into(),
            binary: "purchase".into(),
            variable: "MAX_RECEIVE_COUNT".into(),
        }],
        "{}",
        listed(&found)
    );

    let mut template = template_json();
    set(
        &mut template,
        "/Globals/Function/Environment/Variables/FEATURE_X",
        json!("on"),
    );
    let found = mismatches(&template, &code());
    assert_eq!(found.len(), Function::ALL.len(), "{}", listed(&found));
    assert!(
        found
            .iter()
            .all(|m| matches!(m, Mismatch::SetNotRead { variable, .. } if variable == "FEATURE_X"))
    );
}

fn purchase_reading_more(env: Lookup<'_>) -> Result<Config, ConfigError> {
    let _ = env("PURCHASE_SURPRISE");
    purchase::config(env)
}

#[test]
fn a_variable_the_code_starts_or_stops_reading_is_reported() {
    // The code reads one more name: the template lacks it.
    let mut code = code();
    code.loaders
        .insert("purchase".into(), purchase_reading_more);
    let found = mismatches(&template_json(), &code);
    assert_eq!(
        found,
        [Mismatch::ReadNotSet {
            function: "PurchaseFunction".into(),
            binary: "purchase".into(),
            variable: "PURCHASE_SURPRISE".into(),
        }],
        "{}",
        listed(&found)
    );

    // The code reads less (the order-writer's settings): what the template
    // still sets for it is reported.
    let mut code = self::code();
    code.loaders
        .insert("purchase".into(), Function::OrderWriter.loader());
    let found = mismatches(&template_json(), &code);
    for variable in ["ORDERS_QUEUE_URL", "SQS_TIMEOUT_MS", "GATE_SECRET_ARN"] {
        assert_reported(
            &found,
            &Mismatch::SetNotRead {
                function: "PurchaseFunction".into(),
                binary: "purchase".into(),
                variable: variable.into(),
            },
        );
    }
    assert_reported(
        &found,
        &Mismatch::ReadNotSet {
            function: "PurchaseFunction".into(),
            binary: "purchase".into(),
            variable: "MAX_RECEIVE_COUNT".into(),
        },
    );
}

#[test]
fn conditions_and_intrinsics_count_as_set_unless_no_value() {
    let pointer = "/Resources/PurchaseFunction/Properties/Environment/Variables/REDIS_TIMEOUT_MS";
    let mut template = template_json();
    set(
        &mut template,
        pointer,
        json!({"Fn::If": ["HasAlarmTopic", "250", {"Ref": "AWS::NoValue"}]}),
    );
    let found = mismatches(&template, &code());
    assert!(found.is_empty(), "{}", listed(&found));

    set(&mut template, pointer, json!({"Ref": "AWS::NoValue"}));
    let found = mismatches(&template, &code());
    assert_eq!(
        found,
        [Mismatch::ReadNotSet {
            function: "PurchaseFunction".into(),
            binary: "purchase".into(),
            variable: "REDIS_TIMEOUT_MS".into(),
        }],
        "{}",
        listed(&found)
    );

    // A conditional Globals map: a variable set in either branch is set.
    let mut template = template_json();
    let globals = remove(&mut template, "/Globals/Function/Environment/Variables");
    let mut without_url = globals.clone();
    without_url
        .as_object_mut()
        .unwrap()
        .remove("REDIS_URL")
        .unwrap();
    set(
        &mut template,
        "/Globals/Function/Environment/Variables",
        json!({"Fn::If": ["HasAlarmTopic", without_url, globals]}),
    );
    let found = mismatches(&template, &code());
    assert!(found.is_empty(), "{}", listed(&found));
    // ... and none when the only other branch is no variables at all.
    set(
        &mut template,
        "/Globals/Function/Environment/Variables",
        json!({"Fn::If": ["HasAlarmTopic", without_url, {"Ref": "AWS::NoValue"}]}),
    );
    let found = mismatches(&template, &code());
    assert_eq!(found.len(), Function::ALL.len(), "{}", listed(&found));
    assert!(
        found
            .iter()
            .all(|m| matches!(m, Mismatch::ReadNotSet { variable, .. } if variable == "REDIS_URL")),
        "{}",
        listed(&found)
    );
}

#[test]
fn a_value_the_code_refuses_is_reported() {
    let mut template = template_json();
    set(
        &mut template,
        "/Resources/OrderWriterFunction/Properties/Environment/Variables/REDIS_TIMEOUT_MS",
        json!("fast"),
    );
    let found = mismatches(&template, &code());
    assert!(
        matches!(found.as_slice(), [Mismatch::ValueRefused { function, error }]
            if function == "OrderWriterFunction" && error.contains("REDIS_TIMEOUT_MS")),
        "{}",
        listed(&found)
    );
}

#[test]
fn direct_environment_reads_in_function_code_are_found() {
    let dir = std::env::temp_dir().join(seckill_tests::unique("consistency"));
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "shared/src/config.rs",
        "pub fn f() { std::env::var(\"A\"); }\n",
    );
    write(
        "shared/src/metrics.rs",
        "// std::env::var in a comment\nfn ns() -> Option<String> { std::env::var(\"NS\").ok() }\n#[cfg(test)]\nmod tests { fn t() { std::env::var(\"REDIS_URL\"); } }\n",
    );
    write(
        "functions/x/src/main.rs",
        "fn main() { let _ = std::env::var_os(\"X\"); }\n",
    );
    let found = consistency::direct_env_reads(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        [
            "functions/x/src/main.rs:1: fn main() { let _ = std::env::var_os(\"X\"); }",
            "shared/src/metrics.rs:2: fn ns() -> Option<String> { std::env::var(\"NS\").ok() }",
        ]
    );

    let mut code = code();
    code.direct_env_reads.push(found[1].clone());
    let found = mismatches(&template_json(), &code);
    assert!(
        matches!(found.as_slice(), [Mismatch::DirectEnvRead { location }] if location.starts_with("shared/src/metrics.rs:2")),
        "{}",
        listed(&found)
    );
}

// ---------------------------------------------------- binaries and functions

#[test]
fn a_binary_dropped_from_the_workspace_is_reported() {
    let mut code = code();
    let package = code
        .packages
        .iter_mut()
        .find(|p| p.name == "release-unpaid")
        .unwrap();
    package.bins.clear();
    let found = mismatches(&template_json(), &code);
    assert_eq!(
        found,
        [Mismatch::NoBinary {
            function: "ReleaseUnpaidFunction".into(),
            binary: "release-unpaid".into(),
        }],
        "{}",
        listed(&found)
    );
}

#[test]
fn a_function_dropped_from_the_template_is_reported() {
    let mut template = template_json();
    remove(&mut template, "/Resources/PurchaseFunction");
    let found = mismatches(&template, &code());
    assert_reported(
        &found,
        &Mismatch::NoTemplateFunction {
            binary: "purchase".into(),
            package: "purchase".into(),
        },
    );
    assert_reported(
        &found,
        &Mismatch::RouteNotInTemplate {
            route: "POST /sales/{saleId}/purchase".into(),
            binary: "purchase".into(),
        },
    );
    assert_reported(
        &found,
        &Mismatch::OrphanEvent {
            file: "purchase.json".into(),
        },
    );
}

#[test]
fn a_binary_renamed_on_one_side_is_reported() {
    let mut template = template_json();
    set(
        &mut template,
        "/Resources/ReconcileFunction/Metadata/BuildProperties/Binary",
        json!("reconciler"),
    );
    let found = mismatches(&template, &code());
    assert_reported(
        &found,
        &Mismatch::NoBinary {
            function: "ReconcileFunction".into(),
            binary: "reconciler".into(),
        },
    );
    assert_reported(
        &found,
        &Mismatch::NoTemplateFunction {
            binary: "reconcile".into(),
            package: "reconcile".into(),
        },
    );
}

// ------------------------------------------------------------------ events

#[test]
fn an_event_file_dropped_is_reported() {
    for (file, function) in [
        ("purchase.json", "PurchaseFunction"),
        ("order-writer.json", "OrderWriterFunction"),
        ("schedule-release-unpaid.json", "ReleaseUnpaidFunction"),
    ] {
        let mut code = code();
        code.events.remove(file).unwrap();
        let found = mismatches(&template_json(), &code);
        assert!(
            matches!(found.as_slice(), [Mismatch::NoEvent { function: f, .. }] if f == function),
            "without {file}:\n{}",
            listed(&found)
        );
    }
}

#[test]
fn an_event_its_handler_or_its_trigger_would_not_take_is_reported() {
    let cases = [
        // Not a payload 2.0 event at all.
        (
            "purchase.json",
            r#"{"routeKey": "POST /sales/{saleId}/purchase"}"#,
        ),
        // An SQS record without the id failures are reported by.
        (
            "order-writer.json",
            r#"{"Records": [{"body": "{}", "eventSource": "aws:sqs"}]}"#,
        ),
        // Another function's schedule.
        (
            "schedule-prewarm.json",
            r#"{"version": "0", "id": "1", "detail-type": "Scheduled Event", "source": "aws.scheduler",
                "account": "1", "time": "2026-12-01T11:50:00Z", "region": "us-east-1",
                "resources": ["arn:aws:scheduler:us-east-1:1:schedule/default/s-ReconcileFunctionEveryFiveMinutes-X"],
                "detail": "{}"}"#,
        ),
    ];
    for (file, raw) in cases {
        let mut code = code();
        code.events.insert(file.into(), raw.into());
        let found = mismatches(&template_json(), &code);
        assert!(
            matches!(found.as_slice(), [Mismatch::EventRefused { file: f, .. }] if f == file),
            "with a broken {file}:\n{}",
            listed(&found)
        );
    }
    let mut code = code();
    code.events.insert("stray.json".into(), "{}".into());
    let found = mismatches(&template_json(), &code);
    assert_eq!(
        found,
        [Mismatch::OrphanEvent {
            file: "stray.json".into()
        }]
    );
}

// ----------------------------------------------- events from the real tool

/// `sam local generate-event ARGS`, offline.
fn generate(sam: &Path, args: &[&str]) -> Json {
    let out = Command::new(sam)
        .args(["local", "generate-event"])
        .args(args)
        .env("SAM_CLI_TELEMETRY", "0")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sam local generate-event {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Keys the event sources leave out when they have nothing to put there
/// (no cookies, no query, no body; `authentication` is mTLS only;
/// `authorizer` is absent on public routes).
const OPTIONAL_KEYS: &[&str] = &[
    "cookies",
    "queryStringParameters",
    "pathParameters",
    "stageVariables",
    "body",
    "authentication",
    "authorizer",
];

/// Maps whose keys are data, not shape.
const FREE_FORM: &[&str] = &[
    "headers",
    "claims",
    "pathParameters",
    "queryStringParameters",
    "stageVariables",
    "messageAttributes",
    "detail",
];

fn kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// Where `ours` is not shaped like `generated`: keys it has that the tool's
/// event lacks (beyond `extra`), keys it lacks that are not optional, and
/// values of another JSON type (null aside: a `null` field is how API
/// Gateway sends an empty one).
fn shape_diffs(ours: &Json, generated: &Json, at: &str, extra: &[&str], out: &mut Vec<String>) {
    match (ours, generated) {
        (Json::Object(o), Json::Object(g)) => {
            for key in o.keys() {
                if !g.contains_key(key) && !extra.contains(&key.as_str()) {
                    out.push(format!("{at}.{key}: not in the generated event"));
                }
            }
            for key in g.keys() {
                if !o.contains_key(key) && !OPTIONAL_KEYS.contains(&key.as_str()) {
                    out.push(format!("{at}.{key}: missing"));
                }
            }
            for (key, value) in o {
                if let Some(theirs) = g.get(key)
                    && !FREE_FORM.contains(&key.as_str())
                {
                    shape_diffs(value, theirs, &format!("{at}.{key}"), extra, out);
                }
            }
        }
        (Json::Array(o), Json::Array(g)) => {
            if let (Some(o), Some(g)) = (o.first(), g.first()) {
                shape_diffs(o, g, &format!("{at}[0]"), extra, out);
            }
        }
        (Json::Null, _) | (_, Json::Null) => {}
        (o, g) if kind(o) != kind(g) => {
            out.push(format!("{at}: {} here, {} generated", kind(o), kind(g)));
        }
        _ => {}
    }
}

/// `$default`, or `METHOD /path`.
fn is_route_key(key: &str) -> bool {
    key == "$default"
        || key.split_once(' ').is_some_and(|(method, path)| {
            !method.is_empty()
                && method.chars().all(|c| c.is_ascii_uppercase())
                && path.starts_with('/')
                && !path.contains(' ')
        })
}

/// A configuration for wiring the functions without touching anything:
/// connections are lazy, and the generated events are refused before any
/// call (no caller, `$default` route, a poison SQS body).
fn unreachable_env(name: &str) -> Option<String> {
    match name {
        "REDIS_URL" => Some("redis://127.0.0.1:1".into()),
        "ORDERS_QUEUE_URL" | "ORDERS_DLQ_URL" => Some("http://127.0.0.1:1/123456789012/q".into()),
        "SALES_TABLE" | "ORDERS_TABLE" => Some("consistency".into()),
        _ => None,
    }
}

#[tokio::test]
async fn events_agree_with_sam_local_generate_event() {
    let sam = sam_cli();
    if !sam.exists() {
        eprintln!(
            "SKIPPED: no SAM CLI at {} (set SAM_CLI; `make test` installs it into .venv)",
            sam.display()
        );
        return;
    }
    let template = Template::from_json(&template_json()).unwrap();
    let code = code();
    let mut problems = Vec::new();
    let mut fed = 0;
    for function in template.functions.values() {
        let binary = function.binary.clone().unwrap();
        let handler = Function::parse(&binary).unwrap();
        for trigger in &function.triggers {
            let (file, generated, extra): (String, Json, &[&str]) = match &trigger.kind {
                consistency::TriggerKind::Http { method, .. } => {
                    let key = trigger.route_key().unwrap();
                    let (file, ours) = code
                        .events
                        .iter()
                        .map(|(f, raw)| (f, serde_json::from_str::<Json>(raw).unwrap()))
                        .find(|(_, e)| e["routeKey"] == key.as_str())
                        .unwrap_or_else(|| panic!("no event for {key}"));
                    let path = ours["rawPath"].as_str().unwrap();
                    let body = ours["body"].as_str().unwrap_or("");
                    let generated = generate(
                        &sam,
                        &[
                            "apigateway",
                            "http-api-proxy",
                            "--method",
                            method,
                            "--path",
                            path,
                            "--body",
                            body,
                        ],
                    );
                    assert_eq!(generated["version"], ours["version"], "{file}: version");
                    for event in [&ours, &generated] {
                        for key in [&event["routeKey"], &event["requestContext"]["routeKey"]] {
                            assert!(
                                key.as_str().is_some_and(is_route_key),
                                "{file}: route key {key} is neither $default nor METHOD /path"
                            );
                        }
                    }
                    assert_eq!(
                        generated["requestContext"]["http"]["method"],
                        ours["requestContext"]["http"]["method"],
                        "{file}"
                    );
                    // The tool's event through the function, as `sam local
                    // invoke -e` would send it: a contract error, not a
                    // failure to parse (it has no caller and routes `$default`).
                    let answer = invoke::invoke(handler, &generated.to_string(), &unreachable_env)
                        .await
                        .unwrap_or_else(|e| panic!("{binary} refused sam's event for {key}: {e}"));
                    let status = answer["statusCode"].as_u64().unwrap();
                    let body: Json =
                        serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
                    assert!(
                        (400..500).contains(&status)
                            && body["code"].is_string()
                            && body["message"].is_string(),
                        "{binary} on sam's event for {key}: {answer}"
                    );
                    fed += 1;
                    (file.clone(), generated, &[])
                }
                consistency::TriggerKind::Sqs => {
                    let generated = generate(&sam, &["sqs", "receive-message"]);
                    // Its body is not an order: the writer reports the record
                    // failed by its message id, which it could only do after
                    // parsing the batch.
                    let answer = invoke::invoke(handler, &generated.to_string(), &unreachable_env)
                        .await
                        .unwrap();
                    assert_eq!(answer["errorType"], "AllRecordsFailed", "{answer}");
                    fed += 1;
                    (format!("{binary}.json"), generated, &[])
                }
                consistency::TriggerKind::Schedule | consistency::TriggerKind::ScheduleV2 => {
                    // The tool knows EventBridge rules' scheduled event; the
                    // Scheduler's (ScheduleV2) has the same envelope, plus
                    // the `version` every EventBridge event carries.
                    let generated = generate(&sam, &["cloudwatch", "scheduled-event"]);
                    let envelope: aws_lambda_events::event::eventbridge::EventBridgeEvent =
                        serde_json::from_value(generated.clone()).unwrap();
                    assert_eq!(envelope.detail_type, "Scheduled Event");
                    // The scheduled handlers take any JSON and never read it.
                    handler.parse_event(&generated.to_string()).unwrap();
                    (format!("schedule-{binary}.json"), generated, &["version"])
                }
                consistency::TriggerKind::Other(kind) => panic!("no generator for {kind}"),
            };
            let ours: Json = serde_json::from_str(&code.events[&file]).unwrap();
            let mut diffs = Vec::new();
            shape_diffs(&ours, &generated, "", extra, &mut diffs);
            problems.extend(diffs.into_iter().map(|d| format!("events/{file}: {d}")));
        }
    }
    assert!(fed > 0, "no generated event was fed to a handler");
    assert!(
        problems.is_empty(),
        "events/ differs in shape from `sam local generate-event`:\n{}",
        problems.join("\n")
    );
}

#[test]
fn shape_differences_are_found() {
    let generated = json!({"version": "2.0", "rawPath": "/x", "requestContext": {"http": {"method": "GET"}, "timeEpoch": 1},
        "headers": {"a": "b"}, "cookies": []});
    let ours = json!({"version": "2.0", "requestContext": {"http": {"method": "GET", "verb": "GET"}, "timeEpoch": "1"},
        "headers": {"c": "d"}, "extra": true});
    let mut diffs = Vec::new();
    shape_diffs(&ours, &generated, "", &[], &mut diffs);
    diffs.sort();
    assert_eq!(
        diffs,
        [
            ".extra: not in the generated event",
            ".rawPath: missing",
            ".requestContext.http.verb: not in the generated event",
            ".requestContext.timeEpoch: string here, number generated",
        ]
    );
    assert!(is_route_key("POST /sales/{saleId}/purchase") && is_route_key("$default"));
    assert!(!is_route_key("post /x") && !is_route_key("GET x"));
}

/// The seeds' monitoring: a low-stock alarm and a purchase latency alarm,
/// each watching a metric the code writes, from the function that writes it.
#[test]
fn the_low_stock_and_latency_alarms_watch_what_the_code_writes() {
    use seckill_shared::observe::metrics::{Function, LUA_LATENCY, STOCK_LEFT_PERCENT};
    let template = template_json();
    let resources = &template["Resources"];
    for (alarm, metric, function, comparison) in [
        (
            "LowStockAlarm",
            STOCK_LEFT_PERCENT,
            Function::Prewarm,
            "LessThanThreshold",
        ),
        (
            "PurchaseLatencyAlarm",
            LUA_LATENCY,
            Function::Purchase,
            "GreaterThanThreshold",
        ),
    ] {
        let props = &resources[alarm]["Properties"];
        assert_eq!(props["MetricName"], metric, "{alarm}");
        assert_eq!(
            props["Dimensions"],
            json!([{"Name": "Function", "Value": function.name()}]),
            "{alarm}"
        );
        assert_eq!(props["ComparisonOperator"], comparison, "{alarm}");
        assert!(props["Threshold"].as_f64().is_some(), "{alarm}");
        assert!(props["AlarmActions"].is_object(), "{alarm} notifies");
    }
    assert_eq!(
        resources["PurchaseLatencyAlarm"]["Properties"]["ExtendedStatistic"],
        "p99"
    );
    assert_eq!(resources["LowStockAlarm"]["Properties"]["Threshold"], 10);
}
