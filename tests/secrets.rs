//! Secrets out of the environment: the functions name their
//! secrets (`REDIS_AUTH_SECRET_ARN`, `GATE_SECRET_ARN`) and fetch them from
//! Secrets Manager once per execution environment at cold start.
//!
//! - Real functions wired with secret ARNs against the emulator's Secrets
//!   Manager and a `redis-server` with `requirepass`: they sell and answer,
//!   each wiring fetches each secret it reads exactly once, invocations
//!   never do, and without the token the same Redis refuses them.
//! - A missing or malformed secret fails the wiring (the init) with an error
//!   that names the variable and the secret, never the value.
//! - No log line, at any level, holds the token or the gate key.
//! - `template.yaml`: no function's environment holds a secret or a value
//!   that can carry one, and each function may `GetSecretValue` exactly the
//!   secrets its configuration reads.
//! - `make deploy` refuses placeholders and secrets typed into parameters
//!   (the script's own check, on fake samconfig files, reaching nothing).

use seckill_infra::consistency::{self, Template};
use seckill_infra::emulator;
use seckill_infra::invoke::{self, Function, Handler};
use seckill_infra::local;
use seckill_shared::adapters::aws;
use seckill_shared::adapters::redis::LoadOutcome;
use seckill_shared::adapters::secrets::{self, SecretError};
use seckill_shared::clock;
use seckill_shared::config::{Config, SecretArns};
use seckill_shared::wire::WireError;
use seckill_tests::unique;
use seckill_tests::{App, Captured, LocalStack, RedisServer, Reply, live_sale, purchase_event};
use serde_json::{Value as Json, json};
use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cfn;
use cfn::{root, template_json};

// ---------------------------------------------------------------------------
// Fixtures.

/// A `redis-server` of this test's own with `requirepass`, killed on drop.
struct AuthRedis {
    /// Without the password: what the template gives the functions.
    url: String,
    _server: RedisServer,
}

impl AuthRedis {
    async fn start(password: &str) -> AuthRedis {
        let server = RedisServer::builder().password(password).spawn().await;
        AuthRedis {
            url: server.url(),
            _server: server,
        }
    }
}

/// A secret on the emulator, under a name no other test uses that ends in
/// `-redis`, `-gate` or `-payment` (`kind`), as the stacks name them (the IAM test maps
/// those to the template's secrets); its ARN.
async fn secret(kind: &str, value: &str) -> String {
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
    emulator::ensure_secret(&aws::secrets(&sdk), &secret_name(kind), value)
        .await
        .unwrap()
}

fn secret_name(kind: &str) -> String {
    format!("{}-{kind}", unique("secret"))
}

/// A Redis AUTH token no other test uses, shaped like an ElastiCache one.
fn redis_token() -> String {
    format!("redistoken{}", unique("r").replace('-', ""))
}

/// A gate key no other test uses, long enough to be accepted.
fn gate_key() -> String {
    format!("gatekey-{}-0123456789abcdef0123456789", unique("g"))
}

/// An orders-api event from `events/<file>` for this sale, buyer and body.
fn api_event(file: &str, sale: &str, user: &str, body: Option<&str>) -> lambda_http::Request {
    let text = std::fs::read_to_string(root().join("events").join(file)).unwrap();
    let mut event: Json = serde_json::from_str(&text).unwrap();
    let path = event["routeKey"]
        .as_str()
        .unwrap()
        .split_once(' ')
        .unwrap()
        .1
        .replace("{saleId}", sale);
    event["rawPath"] = path.clone().into();
    event["requestContext"]["http"]["path"] = path.into();
    event["pathParameters"]["saleId"] = sale.into();
    event["requestContext"]["authorizer"] =
        json!({"jwt": {"claims": {"sub": user, "scope": "openid"}, "scopes": null}});
    if let Some(body) = body {
        event["body"] = body.into();
        event["headers"]
            .as_object_mut()
            .unwrap()
            .remove("content-length");
    }
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

async fn ask(queries: &orders_api::LiveQueries, request: lambda_http::Request) -> Reply {
    Reply::from(orders_api::handler::handle(queries, request).await.unwrap())
}

/// The sum the gate's question asks for.
fn solve(question: &str) -> i64 {
    question
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<i64>().ok())
        .sum()
}

/// `config` naming these secrets, with no secret value of its own.
fn naming(config: &Config, redis_url: &str, secrets: SecretArns) -> Config {
    Config {
        redis_url: redis_url.to_owned(),
        gate_secret: None,
        payment_secret: None,
        secrets,
        ..config.clone()
    }
}

// ---------------------------------------------------------------------------
// Wired with secret ARNs.

#[tokio::test]
async fn functions_fetch_their_secrets_once_per_environment_and_sell_with_them() {
    let token = redis_token();
    let key = gate_key();
    let redis = AuthRedis::start(&token).await;
    let redis_arn = secret("redis", &json!({ "token": token }).to_string()).await;
    let gate_arn = secret("gate", &key).await;
    let arns = SecretArns {
        redis_auth: Some(redis_arn.clone()),
        gate: Some(gate_arn.clone()),
        payment: None,
        edge: None,
    };
    let fetched = || {
        (
            secrets::fetch_count(&redis_arn),
            secrets::fetch_count(&gate_arn),
        )
    };
    assert_eq!(fetched(), (0, 0));

    // App::spawn_with wires the purchase function once: one environment.
    let app = App::spawn_with(|config| *config = naming(config, &redis.url, arns.clone())).await;
    assert_eq!(fetched(), (1, 1), "the purchase wiring");

    // A gated sale, loaded through the purchase function's own Redis client:
    // the server refuses any unauthenticated write.
    let mut sale = live_sale(5, 2);
    sale.gate = true;
    let id = sale.sale_id.to_string();
    assert!(app.catalog.create_sale(&sale).await.unwrap());
    let loaded = seckill_shared::app::jobs::mark_and_load(
        &app.catalog,
        app.service.stock(),
        &sale,
        clock::now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(loaded, LoadOutcome::Loaded);

    // The orders API: a second environment, fetching both secrets once.
    let queries = orders_api::wire(&app.config).await.unwrap();
    assert_eq!(fetched(), (2, 2), "the orders-api wiring");
    let info = ask(&queries, api_event("sales-get.json", &id, "anyone", None)).await;
    assert_eq!(
        (info.status, info.body["remaining"].clone()),
        (200, json!(5))
    );

    // Through the gate: the question of one environment's key, the pass
    // checked by the other's. Both came from the one secret.
    for buyer in ["alice", "bob", "carol"] {
        let question = ask(&queries, api_event("challenge-get.json", &id, buyer, None)).await;
        assert_eq!(question.status, 200, "{}", question.body);
        let answer = json!({
            "answer": solve(question.body["question"].as_str().unwrap()),
            "challengeId": question.body["challengeId"],
        });
        let pass = ask(
            &queries,
            api_event(
                "challenge-answer.json",
                &id,
                buyer,
                Some(&answer.to_string()),
            ),
        )
        .await;
        assert_eq!(pass.status, 200, "{}", pass.body);
        let token = pass.body["token"].as_str().unwrap();
        let bought = app
            .call(purchase_event(
                &id,
                Some(buyer),
                r#"{"quantity": 1}"#,
                &[("x-sale-token", token)],
            ))
            .await;
        assert_eq!(bought.status, 202, "{buyer}: {}", bought.body);
    }
    // Without a pass the gate refuses: it really checks.
    let refused = app.purchase(&id, "mallory", r#"{"quantity": 1}"#).await;
    assert_eq!((refused.status, refused.code()), (403, "GATE_REQUIRED"));

    let info = ask(&queries, api_event("sales-get.json", &id, "anyone", None)).await;
    assert_eq!(info.body["remaining"], json!(2), "{}", info.body);
    // Nine invocations later: still one fetch per environment.
    assert_eq!(fetched(), (2, 2), "invocations fetch nothing");

    // The stock really moved in the password-protected Redis.
    let mut conn = redis::Client::open(format!(
        "redis://:{token}@{}",
        redis.url.trim_start_matches("redis://")
    ))
    .unwrap()
    .get_multiplexed_async_connection()
    .await
    .unwrap();
    let keys = seckill_shared::adapters::redis::SaleKeys::new(&sale.sale_id);
    let left: i64 = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 2);

    // Functions that read only the Redis token fetch only it, once each.
    order_writer::wire(&app.config).await.unwrap();
    prewarm::wire(&app.config).await.unwrap();
    assert_eq!(fetched(), (4, 2), "order-writer and prewarm");
    // The admin function wires the jobs and the reconciler: one fetch.
    admin_api::wire(&app.config).await.unwrap();
    assert_eq!(fetched(), (5, 2), "admin-api, two wirings, one environment");

    // Control: the same Redis without the fetched token refuses the purchase
    // function, so the sales above went through the secret.
    let bare = purchase::wire(&naming(&app.config, &redis.url, SecretArns::default()))
        .await
        .unwrap();
    let reply = Reply::from(
        purchase::handler::handle(
            &bare,
            purchase_event(&id, Some("dave"), r#"{"quantity": 1}"#, &[]),
        )
        .await
        .unwrap(),
    );
    assert_eq!(
        (reply.status, reply.code()),
        (503, "SALE_PAUSED"),
        "{}",
        reply.body
    );
}

// ---------------------------------------------------------------------------
// The API edge's secret: purchase alone fetches it, once.

#[tokio::test]
async fn the_edge_secret_is_fetched_once_by_the_purchase_alone() {
    let app = App::spawn().await;
    let redis_url = std::env::var("REDIS_URL").unwrap();
    let key = format!("edgekey-{}-0123456789abcdef0123456789", unique("k"));
    let arn = secret("edge", &key).await;
    let edge_only = |arn: &str| {
        naming(
            &app.config,
            &redis_url,
            SecretArns {
                redis_auth: None,
                gate: None,
                payment: None,
                edge: Some(arn.to_owned()),
            },
        )
    };
    let config = edge_only(&arn);
    // The functions that count no caller's address never fetch it.
    orders_api::wire(&config).await.unwrap();
    order_writer::wire(&config).await.unwrap();
    assert_eq!(secrets::fetch_count(&arn), 0);
    let service = purchase::wire(&config).await.unwrap();
    assert_eq!(secrets::fetch_count(&arn), 1, "the purchase wiring");
    assert_eq!(service.edge_secret(), Some(key.as_str()));

    // Too short to be the template's: the init fails and says which.
    let short = secret("edge", "short-edge-key").await;
    let config = edge_only(&short);
    let err = purchase::wire(&config).await.err().unwrap().to_string();
    assert!(
        err.contains("EDGE_SECRET_ARN") && err.contains("shorter than 32 characters"),
        "{err}"
    );
    assert!(!err.contains("short-edge-key"), "{err}");
}

// ---------------------------------------------------------------------------
// The payment provider's key: orders-api alone fetches it, once.

#[tokio::test]
async fn the_payment_key_is_fetched_once_by_the_orders_api_and_checks_its_callbacks() {
    let app = App::spawn().await;
    let redis_url = std::env::var("REDIS_URL").unwrap();
    let key = format!("paykey-{}-0123456789abcdef0123456789", unique("k"));
    let arn = secret("payment", &key).await;
    let arns = |payment: &str| SecretArns {
        redis_auth: None,
        gate: None,
        payment: Some(payment.to_owned()),
        edge: None,
    };
    let config = naming(&app.config, &redis_url, arns(&arn));
    // The functions that take no callback never fetch it.
    purchase::wire(&config).await.unwrap();
    order_writer::wire(&config).await.unwrap();
    assert_eq!(secrets::fetch_count(&arn), 0);
    let queries = orders_api::wire(&config).await.unwrap();
    assert_eq!(secrets::fetch_count(&arn), 1, "the orders-api wiring");

    // Signed with the secret's key the callback is read (no such order);
    // signed with any other it is refused.
    let body = json!({"paymentId": "pay_s1", "orderId": "no-such-order", "amount": 1,
                      "currency": "EUR", "status": "SUCCEEDED"})
    .to_string();
    for (signer, expected) in [
        (key.as_str(), (404, "ORDER_NOT_FOUND")),
        (
            seckill_tests::TEST_PAYMENT_SECRET,
            (401, "INVALID_SIGNATURE"),
        ),
    ] {
        let text = std::fs::read_to_string(root().join("events/payments-callback.json")).unwrap();
        let mut event: Json = serde_json::from_str(&text).unwrap();
        event["body"] = body.clone().into();
        event["headers"]["payment-signature"] =
            seckill_shared::domain::payment::PaymentKey::new(signer.as_bytes())
                .sign(clock::now_ms() / 1000, body.as_bytes())
                .into();
        let reply = ask(
            &queries,
            lambda_http::request::from_str(&event.to_string()).unwrap(),
        )
        .await;
        assert_eq!((reply.status, reply.code()), expected, "{}", reply.body);
    }
    assert_eq!(secrets::fetch_count(&arn), 1, "invocations fetch nothing");

    // A short or missing key fails the orders API's init, naming the
    // variable and the secret, never the value.
    let short = format!("short-{}", &unique("s")[..8]);
    let short_arn = secret("payment", &short).await;
    let missing = secret_name("payment");
    for (id, why) in [
        (&short_arn, "shorter than 32 characters"),
        (&missing, "ResourceNotFound"),
    ] {
        let err = match orders_api::wire(&naming(&app.config, &redis_url, arns(id))).await {
            Ok(_) => panic!("{id}: wired anyway"),
            Err(err) => err,
        };
        let shown = format!("{err} | {err:?}");
        for part in ["PAYMENT_SECRET_ARN", id.as_str(), why] {
            assert!(shown.contains(part), "{part:?} not in: {shown}");
        }
        assert!(!shown.contains(&short), "{shown}");
    }
}

// ---------------------------------------------------------------------------
// The local stack and `seckill-local invoke` take the same path.

#[tokio::test]
async fn the_local_stack_and_invoke_fetch_the_gate_key_from_the_emulator() {
    let stack = LocalStack::start().await;
    // Named like the stack's other resources: `<prefix>-gate`.
    let settings = local::LocalSettings {
        queue_name: stack
            .config
            .sales_table
            .trim_end_matches("-sales")
            .to_owned(),
        ..local::LocalSettings::from_env()
    };
    let arn = stack.config.secrets.gate.clone().unwrap();
    assert!(
        arn.contains(&format!(":secret:{}-", settings.gate_secret_name())),
        "{arn}"
    );
    assert_eq!(stack.config.gate_secret, None, "no key outside the secret");
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
    let stored = aws::secrets(&sdk)
        .get_secret_value()
        .secret_id(&arn)
        .send()
        .await
        .unwrap();
    assert_eq!(stored.secret_string(), Some(local::DEFAULT_GATE_SECRET));
    // Wired by `up`'s own code: purchase and orders-api, once each; the
    // other functions never fetch the gate key.
    assert_eq!(secrets::fetch_count(&arn), 2);

    // `seckill-local invoke`: the functions that read the key get the local
    // secret, the others none; a named secret wins.
    let none = |_: &str| None;
    assert_eq!(
        local::invoke_gate_secret(Function::Purchase, &none, &settings)
            .await
            .unwrap(),
        Some(arn.clone())
    );
    assert_eq!(
        local::invoke_gate_secret(Function::OrderWriter, &none, &settings)
            .await
            .unwrap(),
        None
    );
    let named = |name: &str| (name == "GATE_SECRET_ARN").then(|| "mine".to_owned());
    assert_eq!(
        local::invoke_gate_secret(Function::OrdersApi, &named, &settings)
            .await
            .unwrap(),
        Some("mine".into())
    );
    // ... and its wiring fetches it, once, before the handler runs.
    let env = |name: &str| match name {
        "REDIS_URL" => Some(stack.config.redis_url.clone()),
        "SALES_TABLE" => Some(stack.config.sales_table.clone()),
        "ORDERS_TABLE" => Some(stack.config.orders_table.clone()),
        "ORDERS_QUEUE_URL" => stack.config.orders_queue_url.clone(),
        "GATE_SECRET_ARN" => Some(arn.clone()),
        _ => None,
    };
    let raw = std::fs::read_to_string(root().join("events/sales-get.json"))
        .unwrap()
        .replace("\"demo\"", &format!("{:?}", stack.demo_sale))
        .replace("/sales/demo", &format!("/sales/{}", stack.demo_sale));
    let answer = invoke::invoke(Function::OrdersApi, &raw, &env)
        .await
        .unwrap();
    assert_eq!(answer["statusCode"], json!(200), "{answer}");
    assert_eq!(secrets::fetch_count(&arn), 3);
}

// ---------------------------------------------------------------------------
// A secret that cannot be used fails the init, and says which.

#[tokio::test]
async fn a_missing_or_malformed_secret_fails_init_naming_it_without_its_value() {
    let app = App::spawn().await;
    let redis_url = std::env::var("REDIS_URL").unwrap();
    let missing_redis = secret_name("redis");
    let missing_gate = secret_name("gate");
    let plain = format!("plain-token-{}", unique("p"));
    let no_token_key = format!("no-token-key-{}", unique("n"));
    let short = format!("short-{}", &unique("s")[..8]);
    let plain_arn = secret("redis", &plain).await;
    let no_token_arn = secret("redis", &json!({ "password": no_token_key }).to_string()).await;
    let short_arn = secret("gate", &short).await;
    let good_gate = secret("gate", &gate_key()).await;

    let cases = [
        (
            SecretArns {
                redis_auth: Some(missing_redis.clone()),
                gate: Some(good_gate.clone()),
                payment: None,
                edge: None,
            },
            "REDIS_AUTH_SECRET_ARN",
            &missing_redis,
            "ResourceNotFound",
            None,
        ),
        (
            SecretArns {
                redis_auth: Some(plain_arn.clone()),
                gate: None,
                payment: None,
                edge: None,
            },
            "REDIS_AUTH_SECRET_ARN",
            &plain_arn,
            "is not a JSON object",
            Some(&plain),
        ),
        (
            SecretArns {
                redis_auth: Some(no_token_arn.clone()),
                gate: None,
                payment: None,
                edge: None,
            },
            "REDIS_AUTH_SECRET_ARN",
            &no_token_arn,
            "has no string \"token\" key",
            Some(&no_token_key),
        ),
        (
            SecretArns {
                redis_auth: None,
                gate: Some(short_arn.clone()),
                payment: None,
                edge: None,
            },
            "GATE_SECRET_ARN",
            &short_arn,
            "shorter than 32 characters",
            Some(&short),
        ),
        (
            SecretArns {
                redis_auth: None,
                gate: Some(missing_gate.clone()),
                payment: None,
                edge: None,
            },
            "GATE_SECRET_ARN",
            &missing_gate,
            "ResourceNotFound",
            None,
        ),
    ];
    for (arns, variable, id, why, value) in cases {
        let config = naming(&app.config, &redis_url, arns);
        let before = secrets::fetch_count(id);
        let err = match purchase::wire(&config).await {
            Ok(_) => panic!("{variable} {id}: wired anyway"),
            Err(err) => err,
        };
        assert!(
            matches!(
                err,
                WireError::Secret(SecretError::Fetch { .. } | SecretError::Shape { .. })
            ),
            "{err:?}"
        );
        // What main.rs would end the init with: Display and Debug.
        let shown = format!("{err} | {err:?}");
        for part in [variable, id.as_str(), why] {
            assert!(shown.contains(part), "{part:?} not in: {shown}");
        }
        if let Some(value) = value {
            assert!(!shown.contains(value.as_str()), "{shown}");
        }
        // Fetched once, not retried in a loop by the wiring.
        assert_eq!(secrets::fetch_count(id), before + 1, "{id}");
        // The orders API fails the same way on the secrets it reads.
        if variable == "GATE_SECRET_ARN" {
            let err = orders_api::wire(&config).await.err().unwrap();
            assert!(err.to_string().contains(variable), "{err}");
        }
    }

    // A REDIS_URL with a password next to REDIS_AUTH_SECRET_ARN is refused
    // by the function's own loader, before any fetch.
    let env = |name: &str| match name {
        "REDIS_URL" => Some("rediss://:hunter2-in-url@cache.example:6379".to_owned()),
        "REDIS_AUTH_SECRET_ARN" => Some(plain_arn.clone()),
        "SALES_TABLE" | "ORDERS_TABLE" | "ORDERS_QUEUE_URL" => Some("x".to_owned()),
        _ => None,
    };
    let err = purchase::config(&env).unwrap_err().to_string();
    assert!(
        err.contains("REDIS_AUTH_SECRET_ARN") && !err.contains("hunter2"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// No secret in a log line.

const CHILD: &str = "SECKILL_SECRETS_CHILD";

/// Runs `body` alone in a child process (this binary, this one test), so a
/// process-wide TRACE subscriber sees every thread's events and no other
/// test's. The child must report exactly one test passed. `test` is the
/// test's full name in the suite (`module::name`).
fn in_child<F, Fut>(test: &str, body: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    if std::env::var_os(CHILD).is_some() {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(body());
        return;
    }
    let output = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let child = tokio::process::Command::new(std::env::current_exe().unwrap())
                .args([test, "--exact", "--nocapture", "--test-threads", "1"])
                .env(CHILD, "1")
                // The SDK would print response bodies with it.
                .env_remove("LOG_SENSITIVE_BODIES")
                .env_remove("RUST_LOG")
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output();
            tokio::time::timeout(Duration::from_secs(180), child)
                .await
                .expect("the child run hung")
                .unwrap()
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && text.contains("1 passed"),
        "child run of {test} failed or ran nothing:\n{text}"
    );
}

#[test]
fn no_log_line_holds_the_token_or_the_gate_key() {
    in_child(
        "secrets::no_log_line_holds_the_token_or_the_gate_key",
        || async {
            let token = redis_token();
            let key = gate_key();
            let redis = AuthRedis::start(&token).await;
            // Created before the capture starts: the SDK traces a CreateSecret
            // request with its body, which is the test's doing, not a function's.
            let redis_arn = secret("redis", &json!({ "token": token }).to_string()).await;
            let gate_arn = secret("gate", &key).await;
            let pay_key = format!("paykey-{}-0123456789abcdef0123456789", unique("k"));
            let pay_arn = secret("payment", &pay_key).await;
            let malformed = secret("redis", &token).await;

            let logs = Captured::default();
            let writer = logs.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).unwrap();

            let arns = SecretArns {
                redis_auth: Some(redis_arn.clone()),
                gate: Some(gate_arn.clone()),
                payment: Some(pay_arn.clone()),
                edge: None,
            };
            let app =
                App::spawn_with(|config| *config = naming(config, &redis.url, arns.clone())).await;
            let queries = orders_api::wire(&app.config).await.unwrap();
            admin_api::wire(&app.config).await.unwrap();
            // The resolved configuration, as a careless log line would show it.
            let resolved = secrets::resolve(
                &app.config,
                aws::Caller::Tool,
                secrets::Uses::RedisGateAndPayment,
            )
            .await
            .unwrap();
            assert!(
                resolved.redis_url.contains(&token)
                    && resolved.gate_secret == Some(key.clone())
                    && resolved.payment_secret == Some(pay_key.clone())
            );
            tracing::info!(config = ?resolved, "resolved configuration");

            let mut sale = live_sale(3, 1);
            sale.gate = true;
            let id = sale.sale_id.to_string();
            assert!(app.catalog.create_sale(&sale).await.unwrap());
            seckill_shared::app::jobs::mark_and_load(
                &app.catalog,
                app.service.stock(),
                &sale,
                clock::now_ms(),
            )
            .await
            .unwrap();
            let question = ask(&queries, api_event("challenge-get.json", &id, "eve", None)).await;
            assert_eq!(question.status, 200, "{}", question.body);
            let refused = app.purchase(&id, "eve", r#"{"quantity": 1}"#).await;
            assert_eq!(refused.status, 403);
            // A failed init, as main.rs would print it.
            let err = purchase::wire(&naming(
                &app.config,
                &redis.url,
                SecretArns {
                    redis_auth: Some(malformed),
                    gate: None,
                    payment: None,
                    edge: None,
                },
            ))
            .await
            .err()
            .unwrap();
            tracing::error!(error = ?err, "init failed: {err}");

            let logged = logs.text();
            // The capture works: the fetches and the wiring are in it.
            assert!(logged.contains("GetSecretValue"), "{logged}");
            assert!(logged.contains("resolved configuration"), "{logged}");
            assert!(logged.contains("init failed"), "{logged}");
            for secret in [token.as_str(), key.as_str(), pay_key.as_str()] {
                assert!(
                    !logged.contains(secret),
                    "a log line holds {secret:?}:\n{logged}"
                );
            }
        },
    );
}

// ---------------------------------------------------------------------------
// template.yaml: secrets stay out of the environment; grants match reads.

/// The parameters a value refers to (`Ref`, and `${Name}` in `Fn::Sub`).
fn referenced(value: &Json, out: &mut BTreeSet<String>) {
    match value {
        Json::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("Ref", Json::String(name)) => {
                        out.insert(name.clone());
                    }
                    ("Fn::Sub", Json::String(text)) => subs(text, out),
                    ("Fn::Sub", Json::Array(parts)) => {
                        if let Some(Json::String(text)) = parts.first() {
                            subs(text, out);
                        }
                        parts.iter().skip(1).for_each(|p| referenced(p, out));
                    }
                    _ => referenced(v, out),
                }
            }
        }
        Json::Array(items) => items.iter().for_each(|i| referenced(i, out)),
        _ => {}
    }
}

fn subs(text: &str, out: &mut BTreeSet<String>) {
    for part in text.split("${").skip(1) {
        if let Some((name, _)) = part.split_once('}') {
            out.insert(name.split('.').next().unwrap_or(name).to_owned());
        }
    }
}

/// Every string inside a value.
fn strings(value: &Json, out: &mut Vec<String>) {
    match value {
        Json::String(s) => out.push(s.clone()),
        Json::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Json::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Whether CloudFormation's `AllowedPattern` accepts `value` (python's `re`
/// stands in for Java's here; the patterns use nothing they disagree on).
fn pattern_accepts(pattern: &str, value: &str) -> bool {
    let out = Command::new("python3")
        .args([
            "-c",
            "import re, sys; sys.exit(0 if re.fullmatch(sys.argv[1], sys.argv[2]) else 1)",
            pattern,
            value,
        ])
        .output()
        .expect("python3 is on PATH");
    out.status.success()
}

/// What in the template could put a secret into a function's environment:
/// a dynamic reference (resolved into plain text at deploy), a variable
/// named like a secret that is not an ARN, a `NoEcho` parameter, or a
/// `REDIS_URL` whose parameters accept a password.
fn secret_exposures(template: &Json) -> Vec<String> {
    let parsed = Template::from_json(template).unwrap();
    let params = template["Parameters"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut found = Vec::new();
    for function in parsed.functions.values() {
        let id = &function.logical_id;
        for (name, value) in &function.env {
            let upper = name.to_ascii_uppercase();
            if ["SECRET", "TOKEN", "PASSWORD"]
                .iter()
                .any(|w| upper.contains(w))
                && !upper.ends_with("_ARN")
            {
                found.push(format!("{id}: {name} holds a secret value"));
            }
            let mut texts = Vec::new();
            strings(value, &mut texts);
            if texts.iter().any(|t| t.contains("{{resolve:")) {
                found.push(format!("{id}: {name} resolves a secret at deploy time"));
            }
            let mut refs = BTreeSet::new();
            referenced(value, &mut refs);
            for param in refs.iter().filter_map(|r| params.get(r).map(|p| (r, p))) {
                if param.1["NoEcho"] == json!(true) {
                    found.push(format!(
                        "{id}: {name} takes the NoEcho parameter {}",
                        param.0
                    ));
                }
            }
            if name == "REDIS_URL" {
                if texts.iter().any(|t| t.contains('@')) {
                    found.push(format!("{id}: REDIS_URL writes credentials into the URL"));
                }
                for (param, spec) in refs.iter().filter_map(|r| params.get(r).map(|p| (r, p))) {
                    let pattern = spec["AllowedPattern"].as_str().unwrap_or(".*");
                    for with_password in [
                        "rediss://:hunter2@cache.example:6379",
                        "rediss://default:hunter2@cache.example:6379?cluster=true",
                    ] {
                        if pattern_accepts(pattern, with_password) {
                            found.push(format!(
                                "{id}: REDIS_URL takes {param}, which accepts a password ({with_password})"
                            ));
                        }
                    }
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The values a template expression may take: both branches of each
/// `Fn::If`, `AWS::NoValue` left out.
fn outcomes(value: &Json) -> BTreeSet<String> {
    if value.get("Ref").and_then(Json::as_str) == Some("AWS::NoValue") {
        return BTreeSet::new();
    }
    match value
        .get("Fn::If")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
    {
        Some([_, yes, no]) => outcomes(yes).union(&outcomes(no)).cloned().collect(),
        _ => BTreeSet::from([value.to_string()]),
    }
}

/// The policy items of a function's role: its own `Policies` (SAM), or
/// those of the role its `Role: !GetAtt X.Arn` names.
fn policy_items<'a>(template: &'a Json, function: &str) -> Vec<&'a Json> {
    let props = &template["Resources"][function]["Properties"];
    let policies = match props.pointer("/Role/Fn::GetAtt/0").and_then(Json::as_str) {
        Some(role) => &template["Resources"][role]["Properties"]["Policies"],
        None => &props["Policies"],
    };
    policies.as_array().into_iter().flatten().collect()
}

/// An item as the policies it may be: each branch of an `Fn::If`, nested
/// ones too, `AWS::NoValue` none.
fn branches(item: &Json) -> Vec<&Json> {
    if item.get("Ref").and_then(Json::as_str) == Some("AWS::NoValue") {
        return Vec::new();
    }
    match item
        .get("Fn::If")
        .and_then(Json::as_array)
        .map(Vec::as_slice)
    {
        Some([_, yes, no]) => branches(yes).into_iter().chain(branches(no)).collect(),
        _ => vec![item],
    }
}

/// Every secret a function may `GetSecretValue` on, as the values its
/// resource expressions may take: SAM's `AWSSecretsManagerGetSecretValuePolicy`,
/// SAM `Statement` items and a role's `PolicyDocument`s.
fn granted(template: &Json, function: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for policy in policy_items(template, function)
        .into_iter()
        .flat_map(branches)
    {
        if let Some(arn) = policy.pointer("/AWSSecretsManagerGetSecretValuePolicy/SecretArn") {
            out.extend(outcomes(arn));
        }
        let statements = [&policy["Statement"], &policy["PolicyDocument"]["Statement"]];
        for statement in statements.into_iter().filter_map(Json::as_array).flatten() {
            let actions = match &statement["Action"] {
                Json::Array(a) => a.clone(),
                single => vec![single.clone()],
            };
            let reads_secrets = actions.iter().any(|a| {
                a.as_str().is_some_and(|a| {
                    a == "secretsmanager:GetSecretValue" || a == "secretsmanager:*" || a == "*"
                })
            });
            if reads_secrets {
                out.extend(outcomes(&statement["Resource"]));
            }
        }
    }
    out
}

/// Grants without a read and reads without a grant, per function: a
/// function may read exactly the secrets its configuration names.
fn grant_mismatches(template: &Json) -> Vec<String> {
    let parsed = Template::from_json(template).unwrap();
    let mut found = Vec::new();
    for function in parsed.functions.values() {
        let id = &function.logical_id;
        let Some(handler) = function.binary.as_deref().and_then(Function::parse) else {
            continue;
        };
        let reads = consistency::reads(handler.loader()).unwrap();
        let named: Vec<(&String, BTreeSet<String>)> = function
            .env
            .iter()
            .filter(|(name, _)| name.ends_with("_SECRET_ARN") && reads.contains(*name))
            .map(|(name, value)| (name, outcomes(value)))
            .collect();
        let grants = granted(template, id);
        for grant in &grants {
            if grant.contains('*') {
                found.push(format!("{id}: GetSecretValue on a wildcard {grant}"));
            } else if !named.iter().any(|(_, arns)| arns.contains(grant)) {
                found.push(format!(
                    "{id}: may GetSecretValue on {grant}, which it never reads"
                ));
            }
        }
        for (name, arns) in &named {
            for arn in arns.difference(&grants) {
                found.push(format!(
                    "{id}: reads {name} but may not GetSecretValue on {arn}"
                ));
            }
        }
    }
    found
}

#[test]
fn no_function_environment_holds_a_secret() {
    let template = template_json();
    assert_eq!(secret_exposures(&template), Vec::<String>::new());

    // The checker sees each way a secret could come back.
    let purchase_env = "/Resources/PurchaseFunction/Properties/Environment/Variables";
    let globals_env = "/Globals/Function/Environment/Variables";
    let mut old = template.clone();
    old.pointer_mut(globals_env).unwrap()["REDIS_URL"] = json!({"Fn::Sub":
        "rediss://:{{resolve:secretsmanager:${RedisStack.Outputs.AuthSecretArn}:SecretString:token}}@${RedisStack.Outputs.ConfigurationEndpoint}:6379"});
    old.pointer_mut(purchase_env).unwrap()["GATE_SECRET"] = json!({"Ref": "GateSecretArn"});
    old["Parameters"]["RedisUrl"]["AllowedPattern"] = json!("^(rediss?://\\S+)?$");
    old["Parameters"]["RedisUrl"]["NoEcho"] = json!(true);
    let found = secret_exposures(&old).join("\n");
    for expected in [
        "PurchaseFunction: GATE_SECRET holds a secret value",
        "OrderWriterFunction: REDIS_URL resolves a secret at deploy time",
        "OrderWriterFunction: REDIS_URL writes credentials into the URL",
    ] {
        assert!(found.contains(expected), "{expected:?} not in:\n{found}");
    }
    let mut loose = template.clone();
    loose["Parameters"]["RedisUrl"]["AllowedPattern"] = json!("^(rediss?://\\S+)?$");
    loose["Parameters"]["RedisUrl"]["NoEcho"] = json!(true);
    let found = secret_exposures(&loose).join("\n");
    for expected in [
        "ReconcileFunction: REDIS_URL takes RedisUrl, which accepts a password",
        "ReconcileFunction: REDIS_URL takes the NoEcho parameter RedisUrl",
    ] {
        assert!(found.contains(expected), "{expected:?} not in:\n{found}");
    }
    // The pattern still takes what it should.
    let pattern = template["Parameters"]["RedisUrl"]["AllowedPattern"]
        .as_str()
        .unwrap();
    for fine in [
        "",
        "rediss://clustercfg.x.cache.amazonaws.com:6379?cluster=true",
        "rediss://app@h:6379",
    ] {
        assert!(pattern_accepts(pattern, fine), "{fine:?}");
    }
    // No secret is a parameter any more: the gate key is generated.
    assert!(template["Parameters"].get("GateSecret").is_none());
    assert!(
        template
            .pointer("/Resources/GateSecret/Properties/GenerateSecretString")
            .is_some()
    );
}

fn policies_of<'a>(template: &'a mut Json, id: &str) -> &'a mut Vec<Json> {
    template["Resources"][id]["Properties"]["Policies"]
        .as_array_mut()
        .unwrap()
}

#[test]
fn each_function_may_read_exactly_the_secrets_it_reads() {
    let template = template_json();
    assert_eq!(grant_mismatches(&template), Vec::<String>::new());
    // Which functions read what: every one the Redis token, two the gate key.
    let parsed = Template::from_json(&template).unwrap();
    let gate_readers: BTreeSet<&str> = parsed
        .functions
        .values()
        .filter(|f| f.env.contains_key("GATE_SECRET_ARN"))
        .map(|f| f.logical_id.as_str())
        .collect();
    assert_eq!(
        gate_readers,
        BTreeSet::from(["OrdersApiFunction", "PurchaseFunction"])
    );
    assert!(
        parsed
            .functions
            .values()
            .all(|f| f.env.contains_key("REDIS_AUTH_SECRET_ARN"))
    );

    let is_gate_grant = |p: &Json| p.to_string().contains("GateSecretArn");
    // A reader loses its grant: its init would fail with AccessDenied.
    let mut missing = template.clone();
    policies_of(&mut missing, "OrdersApiFunction").retain(|p| !is_gate_grant(p));
    let found = grant_mismatches(&missing);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found
            .iter()
            .all(|f| f.starts_with("OrdersApiFunction: reads GATE_SECRET_ARN but may not")),
        "{found:#?}"
    );
    // A function that never reads the gate key gets it: a grant too many.
    let mut extra = template.clone();
    let gate_grant = policies_of(&mut extra, "PurchaseFunction")
        .iter()
        .find(|p| is_gate_grant(p))
        .cloned()
        .unwrap();
    policies_of(&mut extra, "ReconcileFunction").push(gate_grant);
    let found = grant_mismatches(&extra);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found
            .iter()
            .all(|f| f.starts_with("ReconcileFunction: may GetSecretValue on")),
        "{found:#?}"
    );
    // The order-writer's own role: its Redis grant removed is seen too.
    let mut role = template.clone();
    policies_of(&mut role, "OrderWriterRole").retain(|p| !p.to_string().contains("RedisAuth"));
    let found = grant_mismatches(&role);
    assert!(
        !found.is_empty()
            && found
                .iter()
                .all(|f| f.starts_with("OrderWriterFunction: reads REDIS_AUTH_SECRET_ARN")),
        "{found:#?}"
    );
    // A wildcard is never right.
    let mut wild = template.clone();
    policies_of(&mut wild, "ReconcileFunction").push(json!({"Statement": [
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"}
    ]}));
    let found = grant_mismatches(&wild);
    assert!(found.iter().any(|f| f.contains("wildcard")), "{found:?}");
}

// ---------------------------------------------------------------------------
// make deploy refuses placeholders and typed-in secrets.

/// `infra/stack.sh ARGS` with only `python3` and `dirname` on PATH, no AWS
/// settings and an empty HOME: nothing it could start reaches AWS (no `sam`,
/// no `aws`, no credentials). Exit status and stderr.
fn stack_sh(args: &[&str], samconfig: Option<&Path>) -> (bool, String) {
    let dir = std::env::temp_dir().join(unique("stack-sh"));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let which = |tool: &str| {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        PathBuf::from(String::from_utf8(found.stdout).unwrap().trim())
    };
    // The interpreter itself, not a version manager's shell shim.
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    std::os::unix::fs::symlink(python.trim(), bin.join("python3")).unwrap();
    std::os::unix::fs::symlink(which("dirname"), bin.join("dirname")).unwrap();
    // By its full path: the child's PATH has only the two tools above.
    let mut command = Command::new(which("bash"));
    command
        .arg(root().join("infra/stack.sh"))
        .args(args)
        .env_clear()
        .env("PATH", &bin)
        .env("HOME", &dir)
        .stdin(Stdio::null());
    if let Some(samconfig) = samconfig {
        command.env("SAMCONFIG", samconfig);
    }
    let out = command.output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn samconfig(text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}.toml", unique("samconfig")));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn deploy_refuses_placeholders_and_secrets_in_parameters() {
    let secret_value = "CorrectHorseBatteryStaple0123456789abcdef";
    let profile = |overrides: &[&str]| {
        let list: Vec<String> = overrides.iter().map(|o| format!("{o:?}")).collect();
        samconfig(&format!(
            "version = 0.1\n[default.deploy.parameters]\nparameter_overrides = [{}]\n",
            list.join(", ")
        ))
    };
    let good = [
        "JwtIssuer=https://cognito-idp.us-east-1.amazonaws.com/us-east-1_abc",
        "JwtAudience=client",
        "RedisMode=create",
    ];
    let fine = profile(&good);
    assert_eq!(
        stack_sh(&["check-deploy"], Some(&fine)),
        (true, String::new())
    );

    for (bad, named) in [
        (
            "GateSecret=CHANGEME-at-least-32-characters-long-secret",
            "GateSecret",
        ),
        (&*format!("GateSecret={secret_value}"), "GateSecret"),
        ("JwtAudience=CHANGEME-app-client-id", "JwtAudience"),
        (
            &*format!("RedisUrl=rediss://:{secret_value}@h:6379"),
            "RedisUrl",
        ),
    ] {
        let file = profile(&[&good[..], &[bad]].concat());
        let (ok, said) = stack_sh(&["check-deploy"], Some(&file));
        assert!(
            !ok && said.contains(named) && said.contains("refusing"),
            "{bad}: {said}"
        );
        assert!(!said.contains(secret_value), "{said}");
        // `make deploy` runs the same check before building anything: it
        // stops there (with nothing on PATH, a build would fail otherwise).
        let (ok, said) = stack_sh(&["deploy"], Some(&file));
        assert!(
            !ok && said.contains("refusing") && !said.contains("installing"),
            "{said}"
        );
        let _ = std::fs::remove_file(file);
    }
    // A secret's ARN is welcome; command-line overrides replace the file's.
    let arn = profile(
        &[
            &good[..],
            &["GateSecretArn=arn:aws:secretsmanager:us-east-1:123456789012:secret:gate-AbCdEf"],
        ]
        .concat(),
    );
    assert!(stack_sh(&["check-deploy"], Some(&arn)).0);
    let placeholder = profile(&["JwtAudience=CHANGEME"]);
    assert!(!stack_sh(&["check-deploy"], Some(&placeholder)).0);
    assert!(
        stack_sh(
            &["check-deploy", "--parameter-overrides", &good.join(" ")],
            Some(&placeholder)
        )
        .0
    );

    // The repository's own samconfig.toml: no secret in either profile, and
    // its placeholders keep a plain `make deploy` from running as shipped.
    let shipped = std::fs::read_to_string(root().join("samconfig.toml")).unwrap();
    assert!(!shipped.contains("GateSecret="), "{shipped}");
    let (ok, said) = stack_sh(&["check-deploy"], Some(&root().join("samconfig.toml")));
    assert!(!ok && said.contains("CHANGEME"), "{said}");
    for file in [fine, arn, placeholder] {
        let _ = std::fs::remove_file(file);
    }
}
