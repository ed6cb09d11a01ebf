//! `sam local invoke` and `sam local start-api`, for real: the functions'
//! bootstraps in Lambda containers on a Docker engine, against the suite's
//! Redis and emulator (docs/local.md "sam local").
//!
//! `make sam-local` and `make test`'s `sam-local` phase prepare what these
//! tests need and pass it in the environment: `SAM_LOCAL_TEMPLATE` (the
//! template of `infra/sam_local/template.py`, over built bootstraps),
//! `SAM_LOCAL_IMAGE` (the local invoke image), `SAM_LOCAL_HOST_GATEWAY`
//! (where a container reaches the services: the host's address on Docker's
//! bridge, forwarded to loopback), `SAM_CLI` and `DOCKER_HOST`. Without
//! them the tests skip, unless `SECKILL_REQUIRE_SAM_LOCAL` is set (the
//! phase sets it): then they fail.
//!
//! - `every_event_file_through_sam_local_invoke`: every `events/*.json`,
//!   each through its function, in an order that gives each a meaningful
//!   answer, and the answer and its effect checked.
//! - `a_buyer_and_an_operator_through_sam_local_start_api`: SAM's own
//!   gateway on the template's HTTP API: a sale created and loaded by an
//!   operator, a purchase, its order, the payment.

use redis::AsyncCommands;
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_shared::ports::SaleCatalog;
use seckill_tests::{App, eventually, unique};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What the phase prepared, or `None` (skipped) when it did not run.
struct Sam {
    cli: String,
    template: String,
    image: String,
    gateway: String,
}

impl Sam {
    fn from_env(test: &str) -> Option<Sam> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (
            var("SAM_LOCAL_TEMPLATE"),
            var("SAM_LOCAL_IMAGE"),
            var("SAM_LOCAL_HOST_GATEWAY"),
        ) {
            (Some(template), Some(image), Some(gateway)) => Some(Sam {
                cli: var("SAM_CLI").unwrap_or_else(|| "sam".into()),
                template,
                image,
                gateway,
            }),
            _ => {
                let missing = "SAM_LOCAL_TEMPLATE, SAM_LOCAL_IMAGE and SAM_LOCAL_HOST_GATEWAY \
                               (set by `make sam-local` and make test's sam-local phase)";
                assert!(
                    std::env::var_os("SECKILL_REQUIRE_SAM_LOCAL").is_none(),
                    "SECKILL_REQUIRE_SAM_LOCAL is set but not {missing}"
                );
                eprintln!("\n*** SKIPPED {test}: no {missing} ***\n");
                None
            }
        }
    }

    /// The arguments every `sam local` command here shares: the template,
    /// the environment, the local image (never pulled), the host's
    /// services by the name the env-vars file uses.
    fn common_args(&self, env_file: &Path) -> Vec<String> {
        [
            "--template",
            &self.template,
            "--env-vars",
            &env_file.display().to_string(),
            "--invoke-image",
            &self.image,
            "--skip-pull-image",
            "--add-host",
            &format!("host.docker.internal:{}", self.gateway),
            "--parameter-overrides",
            "JwtIssuer=https://local.invalid JwtAudience=local",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `sam local invoke FUNCTION --event FILE`: the function's answer.
    async fn invoke(&self, env_file: &Path, function: &str, event: &Path) -> Value {
        let began = Instant::now();
        let run = tokio::process::Command::new(&self.cli)
            .args(["local", "invoke", function, "--event"])
            .arg(event)
            .args(self.common_args(env_file))
            .env("SAM_CLI_TELEMETRY", "0")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        // A container's start and one function's run: minutes are "hung".
        let output = tokio::time::timeout(seckill_tests::HTTP_ANSWER_DEADLINE, run)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "sam local invoke {function} --event {}: no answer within {:?}",
                    event.display(),
                    seckill_tests::HTTP_ANSWER_DEADLINE
                )
            })
            .expect("run sam");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let answer = stdout
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str::<Value>(line.trim()).ok());
        eprintln!(
            "sam local invoke {function} --event {}: {:.1?}",
            event.display(),
            began.elapsed()
        );
        match (output.status.success(), answer) {
            (true, Some(answer)) => answer,
            _ => panic!(
                "sam local invoke {function} --event {} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
                event.display(),
                output.status
            ),
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A private copy of `infra/sam-local-env.json` for this test's own
/// tables, queues and secrets, with the services at their ports on the
/// host (the file the docs name, with the ports `make run` uses).
fn env_file(app: &App, gate: &str, payment: &str) -> PathBuf {
    let docs: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("infra/sam-local-env.json")).unwrap(),
    )
    .unwrap();
    let mut values = docs["Parameters"].as_object().unwrap().clone();
    let port = |url: &str| url.rsplit(':').next().unwrap().trim_matches('/').to_owned();
    let redis_port = port(&app.config.redis_url);
    let aws = format!(
        "http://host.docker.internal:{}",
        port(&std::env::var("AWS_ENDPOINT_URL").unwrap())
    );
    let queue_name = |url: &str| url.rsplit('/').next().unwrap().to_owned();
    let account_path = |url: &str| {
        format!(
            "{aws}/{}/{}",
            url.rsplit('/').nth(1).unwrap(),
            queue_name(url)
        )
    };
    for (name, value) in [
        (
            "REDIS_URL",
            format!("redis://host.docker.internal:{redis_port}"),
        ),
        ("AWS_ENDPOINT_URL", aws.clone()),
        ("SALES_TABLE", app.config.sales_table.clone()),
        ("ORDERS_TABLE", app.config.orders_table.clone()),
        ("ORDERS_QUEUE_URL", account_path(&app.queue_url)),
        ("ORDERS_DLQ_URL", account_path(&app.dlq_url)),
        ("GATE_SECRET_ARN", gate.to_owned()),
        ("PAYMENT_SECRET_ARN", payment.to_owned()),
    ] {
        assert!(
            values.contains_key(name),
            "infra/sam-local-env.json has no {name}"
        );
        values.insert(name.into(), Value::String(value));
    }
    let path = std::env::temp_dir().join(format!("{}.json", unique("sam-local-env")));
    std::fs::write(&path, json!({ "Parameters": values }).to_string()).unwrap();
    path
}

/// This test's gate and payment keys' secrets, on the emulator.
async fn secrets(prefix: &str) -> (String, String) {
    use seckill_shared::adapters::aws;
    let sdk = aws::sdk_config(aws::Caller::Tool, Duration::from_secs(20)).await;
    let client = aws::secrets(&sdk);
    let gate = format!("{prefix}-gate");
    let payment = format!("{prefix}-payment");
    seckill_infra::emulator::ensure_secret(
        &client,
        &gate,
        seckill_infra::local::DEFAULT_GATE_SECRET,
    )
    .await
    .unwrap();
    seckill_infra::emulator::ensure_secret(
        &client,
        &payment,
        seckill_infra::local::DEFAULT_PAYMENT_SECRET,
    )
    .await
    .unwrap();
    (gate, payment)
}

/// An HTTP function's answer: status and JSON body.
fn http(answer: &Value) -> (u16, Value) {
    let status = answer["statusCode"]
        .as_u64()
        .unwrap_or_else(|| panic!("no statusCode in {answer}")) as u16;
    let body = answer["body"].as_str().unwrap_or("");
    let body = if answer["isBase64Encoded"] == true {
        use base64::Engine;
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(body)
                .unwrap(),
        )
        .unwrap()
    } else {
        body.to_owned()
    };
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

#[track_caller]
fn expect(file: &str, answer: &Value, status: u16) -> Value {
    let (got, body) = http(answer);
    assert_eq!(got, status, "{file}: {body}");
    eprintln!("  {file}: {got} {}", short(&body));
    body
}

fn short(body: &Value) -> String {
    let text = body.to_string();
    match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_file_through_sam_local_invoke() {
    let Some(sam) = Sam::from_env("sam_local::every_event_file_through_sam_local_invoke") else {
        return;
    };
    let app = App::spawn().await;
    let (gate, payment) = secrets(&unique("sam")).await;
    let env = env_file(&app, &gate, &payment);
    // The event files name the sale `demo`: open now, 100 units, two a
    // buyer, in this test's own table. Redis starts without it.
    let demo = SaleId::parse("demo").unwrap();
    let keys = SaleKeys::new(&demo);
    let mut conn = app.redis.clone();
    seckill_tests::lose_key_group(&mut conn, &keys).await;
    let sale = seckill_shared::adapters::memory::test_sale("demo", 100, 2).unwrap();
    assert!(app.catalog.create_sale(&sale).await.unwrap());

    let events = root().join("events");
    let left: std::cell::RefCell<BTreeSet<String>> = std::fs::read_dir(&events)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect::<BTreeSet<_>>()
        .into();
    // A non-HTTP function's answer as it is.
    let invoke = async |function: &str, file: &str| -> Value {
        assert!(
            left.borrow_mut().remove(file),
            "{file}: invoked twice, or not in events/"
        );
        sam.invoke(&env, function, &events.join(file)).await
    };
    // An HTTP function's answer with this status: its body.
    let call = async |function: &str, file: &str, status: u16| -> Value {
        expect(file, &invoke(function, file).await, status)
    };
    let redis = Redis {
        conn: app.redis.clone(),
        keys,
    };
    let status_of = async |order: &str| {
        app.orders()
            .await
            .get(order)
            .map(|o| o.status.as_str().to_owned())
    };

    call("OrdersApiFunction", "health.json", 200).await;

    // The queue's batch: two orders for `demo` become rows; the third
    // record is not an order and is reported as the batch's one failure,
    // so SQS retries only it.
    let answer = invoke("OrderWriterFunction", "order-writer.json").await;
    eprintln!("  order-writer.json: {answer}");
    assert_eq!(
        answer,
        json!({"batchItemFailures": [{"itemIdentifier": "c5a8e0f2-3b6d-4e9a-8c1f-2d4e6a8b0c3e"}]})
    );
    assert_eq!(
        status_of("n0f3a9c41b7d2e5f8a06").await.as_deref(),
        Some("PENDING_PAYMENT")
    );
    assert_eq!(
        status_of("n1b7e2d90c4a6f3b5e18").await.as_deref(),
        Some("PENDING_PAYMENT")
    );

    // The schedule loads the sale from the table: its two rows are sold.
    let answer = invoke("PrewarmFunction", "schedule-prewarm.json").await;
    eprintln!("  schedule-prewarm.json: {answer}");
    assert_eq!(
        answer["sales"],
        json!([{"saleId": "demo", "outcome": "LOADED", "stock": 98, "buyers": 2}])
    );
    assert_eq!(redis.stock().await, Some(98));
    assert_eq!(redis.status().await, "LIVE");
    assert_eq!(redis.held("user-1").await, Some(1));
    let body = call("OrdersApiFunction", "sales-get.json", 200).await;
    assert_eq!(
        (&body["saleId"], &body["status"]),
        (&json!("demo"), &json!("LIVE")),
        "{body}"
    );

    // A buyer: one unit reserved in Redis and its message queued.
    let body = call("PurchaseFunction", "purchase.json", 202).await;
    let bought = body["orderId"].as_str().unwrap().to_owned();
    assert_eq!(body["status"], "QUEUED");
    assert_eq!(redis.stock().await, Some(97), "the purchase took one unit");
    assert_eq!(redis.held("user-1").await, Some(2));
    let queued = app.take_messages().await;
    assert!(
        queued.iter().any(|(_, body)| body.contains(&bought)),
        "{bought} is on the queue: {queued:?}"
    );
    // The sale has no gate: no question, and an answer changes nothing.
    for file in ["challenge-get.json", "challenge-answer.json"] {
        let body = call("OrdersApiFunction", file, 400).await;
        assert_eq!(body["message"], "this sale has no gate");
    }
    assert_eq!(redis.stock().await, Some(97));
    // The waitlist: units are on sale, so a join is refused and writes
    // nothing, and there is no entry to leave; the operator's figures.
    let body = call("OrdersApiFunction", "waitlist-join.json", 409).await;
    assert_eq!(body["code"], "NOT_SOLD_OUT", "{body}");
    let body = call("OrdersApiFunction", "waitlist-leave.json", 404).await;
    assert_eq!(body["code"], "NOT_IN_WAITLIST", "{body}");
    let body = call("AdminApiFunction", "admin-waitlist.json", 200).await;
    assert_eq!(
        (&body["saleId"], &body["waiting"], &body["offered"]),
        (&json!("demo"), &json!(0), &json!(0)),
        "{body}"
    );

    // The buyer's orders; a forged provider callback is refused and
    // changes nothing; the pay route pays (the stand-in provider).
    let body = call("OrdersApiFunction", "orders-get.json", 200).await;
    assert_eq!(
        (&body["status"], &body["userId"]),
        (&json!("PENDING_PAYMENT"), &json!("user-1"))
    );
    let body = call("OrdersApiFunction", "sales-orders.json", 200).await;
    let listed: BTreeSet<&str> = body["orders"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["orderId"].as_str())
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from(["n0f3a9c41b7d2e5f8a06", bought.as_str()])
    );
    let body = call("OrdersApiFunction", "payments-callback.json", 401).await;
    assert_eq!(body["code"], "INVALID_SIGNATURE");
    assert_eq!(
        status_of("n0f3a9c41b7d2e5f8a06").await.as_deref(),
        Some("PENDING_PAYMENT")
    );
    let body = call("OrdersApiFunction", "orders-pay.json", 200).await;
    assert_eq!(body["status"], "PAID");
    assert_eq!(
        status_of("n0f3a9c41b7d2e5f8a06").await.as_deref(),
        Some("PAID")
    );

    // The operator's reads.
    let body = call("AdminApiFunction", "admin-get-sale.json", 200).await;
    assert_eq!(
        (&body["saleId"], &body["totalStock"]),
        (&json!("demo"), &json!(100))
    );
    let body = call("AdminApiFunction", "admin-list-sales.json", 200).await;
    assert!(
        body["sales"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["saleId"] == "demo"),
        "{body}"
    );
    let body = call("AdminApiFunction", "admin-live.json", 200).await;
    assert_eq!(body["orders"]["PAID"], 1, "{body}");
    let body = call("AdminApiFunction", "admin-refunds.json", 200).await;
    assert_eq!(body["refunds"], json!([]));
    let body = call("AdminApiFunction", "admin-get-order.json", 404).await;
    assert_eq!(body["code"], "ORDER_NOT_FOUND");
    let body = call("AdminApiFunction", "admin-buyer-orders.json", 200).await;
    assert_eq!(body["orders"], json!([]));
    let body = call("AdminApiFunction", "admin-dlq.json", 200).await;
    assert_eq!(body["messages"], json!([]));
    let body = call("AdminApiFunction", "admin-dlq-redrive.json", 200).await;
    assert_eq!(body["redriven"], 0);

    // The operator's commands, each seen in Redis.
    let body = call("AdminApiFunction", "admin-pause.json", 200).await;
    assert_eq!(body["status"], "PAUSED");
    assert_eq!(redis.status().await, "PAUSED");
    let body = call("AdminApiFunction", "admin-resume.json", 200).await;
    assert_eq!(body["status"], "LIVE");
    assert_eq!(redis.status().await, "LIVE");
    let body = call("AdminApiFunction", "admin-prewarm.json", 200).await;
    assert_eq!(body["outcome"], "REFRESHED");
    assert_eq!(
        redis.stock().await,
        Some(97),
        "a refresh keeps what was sold"
    );
    let body = call("AdminApiFunction", "admin-reconcile.json", 200).await;
    assert_eq!(
        (&body["violations"], &body["redisStock"]),
        (&json!([]), &json!(97)),
        "{body}"
    );

    // The schedules.
    let answer = invoke("ReleaseUnpaidFunction", "schedule-release-unpaid.json").await;
    eprintln!("  schedule-release-unpaid.json: {answer}");
    assert_eq!(
        (&answer["expired"], &answer["errors"]),
        (&json!(0), &json!([])),
        "{answer}"
    );
    let answer = invoke("ReconcileFunction", "schedule-reconcile.json").await;
    eprintln!("  schedule-reconcile.json: {}", short(&answer));
    let demo_report = answer
        .as_array()
        .and_then(|reports| reports.iter().find(|r| r["saleId"] == "demo"))
        .unwrap_or_else(|| panic!("no report for demo: {answer}"));
    assert_eq!(demo_report["violations"], json!([]), "{demo_report}");

    // End now; then the sale's report and audit; an ended sale's edit is
    // refused (an end moved later would reopen it) and changes nothing.
    let body = call("AdminApiFunction", "admin-end-sale.json", 200).await;
    assert_eq!(body["status"], "ENDED");
    let end_ms: i64 = redis.meta("endMs").await.parse().unwrap();
    assert!(
        end_ms <= clock::now_ms(),
        "Redis ends the sale: endMs {end_ms}"
    );
    let body = call("AdminApiFunction", "admin-report.json", 200).await;
    eprintln!("    {}", short(&body));
    let body = call("AdminApiFunction", "admin-audit.json", 200).await;
    eprintln!("    {}", short(&body));
    let before = app.catalog.get_sale(&demo).await.unwrap();
    let body = call("AdminApiFunction", "admin-put-sale.json", 410).await;
    assert_eq!(body["code"], "SALE_ENDED");
    assert_eq!(app.catalog.get_sale(&demo).await.unwrap(), before);

    let left = left.into_inner();
    assert!(left.is_empty(), "event files never invoked: {left:?}");
    let _ = std::fs::remove_file(env);
}

/// The sale's Redis keys, read.
struct Redis {
    conn: redis::aio::MultiplexedConnection,
    keys: SaleKeys,
}

impl Redis {
    async fn stock(&self) -> Option<i64> {
        self.conn.clone().get(&self.keys.stock).await.unwrap()
    }

    async fn meta(&self, field: &str) -> String {
        let value: Option<String> = self
            .conn
            .clone()
            .hget(&self.keys.meta, field)
            .await
            .unwrap();
        value.unwrap_or_default()
    }

    async fn status(&self) -> String {
        self.meta("status").await
    }

    async fn held(&self, user: &str) -> Option<i64> {
        self.conn
            .clone()
            .hget(&self.keys.buyers, user)
            .await
            .unwrap()
    }
}

/// `sam local start-api` on a free port, stopped (with its containers)
/// when dropped, also when the test fails (its log's tail printed then).
struct StartApi {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    log: PathBuf,
}

impl StartApi {
    async fn start(sam: &Sam, env_file: &Path) -> StartApi {
        let port = seckill_tests::free_port();
        let log = std::env::temp_dir().join(format!("{}.log", unique("sam-start-api")));
        let out = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new(&sam.cli)
            .args(["local", "start-api", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            // One container per function, started at its first request and
            // kept: the walk's later requests skip the start.
            .args(["--warm-containers", "LAZY"])
            .args(sam.common_args(env_file))
            .env("SAM_CLI_TELEMETRY", "0")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("run sam local start-api");
        let api = StartApi {
            child,
            addr: ([127, 0, 0, 1], port).into(),
            log,
        };
        // SAM reads the template and serves; a refused connection until then.
        let addr = api.addr;
        let listening = eventually(Duration::from_secs(120), || async move {
            tokio::net::TcpStream::connect(addr).await.is_ok()
        })
        .await;
        assert!(
            listening,
            "sam local start-api did not listen within 120 s:\n{}",
            api.log_text()
        );
        api
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `authorization` is the header's whole value (`Bearer ...`).
    async fn call(
        &self,
        method: &str,
        path: &str,
        authorization: Option<&str>,
        body: &str,
    ) -> (u16, Value) {
        let mut headers = vec![("content-type", "application/json")];
        if let Some(value) = authorization {
            headers.push(("authorization", value));
        }
        let (status, _, body) =
            seckill_tests::http_request(self.addr, method, path, &headers, body).await;
        eprintln!("  {method} {path}: {status} {}", short(&body));
        (status, body)
    }
}

impl Drop for StartApi {
    /// SIGTERM: SAM removes its warm containers on the way out (a kill
    /// would leave them running; SIGINT may be ignored in a background
    /// job). A SAM that does not exit within 30 s is killed.
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What SAM said is the one clue to a refused or hung request.
            let log = self.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("sam local start-api's log, last 40 lines:");
            for line in tail.into_iter().rev() {
                eprintln!("  {line}");
            }
        }
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        // Blocks until SAM exits, or 30 s at most (no poll of our own).
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("timeout")
            .args(["30", "tail", &format!("--pid={pid}"), "-f", "/dev/null"])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_and_an_operator_through_sam_local_start_api() {
    let Some(sam) = Sam::from_env("sam_local::a_buyer_and_an_operator_through_sam_local_start_api")
    else {
        return;
    };
    let app = App::spawn().await;
    let (gate, payment) = secrets(&unique("sam")).await;
    let env = env_file(&app, &gate, &payment);
    let api = StartApi::start(&sam, &env).await;
    let tokens = seckill_infra::token::TokenSettings::from_env();
    let bearer =
        |user: &str, admin: bool| format!("Bearer {}", tokens.mint(user, admin, 3_600).unwrap());
    let admin = bearer("ops-1", true);
    let buyer = bearer("buyer-1", false);
    let sale = unique("sam");
    let keys = SaleKeys::new(&SaleId::parse(&sale).unwrap());
    let redis = Redis {
        conn: app.redis.clone(),
        keys,
    };

    // Public routes (`Authorizer: NONE`) need no token.
    let (status, body) = api.call("GET", "/health", None, "").await;
    assert_eq!(
        (status, body),
        (200, json!({"status": "ok"})),
        "{}",
        api.log_text()
    );

    // The authorizer stand-in refuses what API Gateway's JWT authorizer
    // refuses, before any function runs: no token, a buyer's token on an
    // admin route is the function's own 403.
    let now = clock::now_ms();
    let spec = json!({
        "name": "sam local start-api",
        "totalStock": 5,
        "startAt": clock::rfc3339_ms(now),
        "endAt": clock::rfc3339_ms(now + 3_600_000),
        "perUserLimit": 1,
        "paymentWindowSeconds": 900,
    })
    .to_string();
    let path = format!("/admin/sales/{sale}");
    let (status, _) = api.call("PUT", &path, None, &spec).await;
    assert_eq!(status, 401, "no token");
    let forged = seckill_tests::forged_admin_bearer(&tokens);
    let (status, _) = api.call("PUT", &path, Some(&forged), &spec).await;
    assert_eq!(status, 403, "a token signed with another key");
    let (status, _) = api.call("PUT", &path, Some(&buyer), &spec).await;
    assert_eq!(status, 403, "a buyer on an admin route");
    assert!(
        app.catalog
            .get_sale(&SaleId::parse(&sale).unwrap())
            .await
            .unwrap()
            .is_none()
    );

    // The operator creates the sale (open now, so it is loaded at once)
    // and loads it again: a refresh.
    let (status, body) = api.call("PUT", &path, Some(&admin), &spec).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(redis.stock().await, Some(5));
    let (status, body) = api
        .call("POST", &format!("{path}/prewarm"), Some(&admin), "")
        .await;
    assert_eq!(
        (status, &body["outcome"]),
        (200, &json!("REFRESHED")),
        "{body}"
    );
    assert_eq!(redis.stock().await, Some(5));

    // The buyer: the sale, a purchase, its order once written, the payment.
    let purchase_path = format!("/sales/{sale}/purchase");
    let buy = || api.call("POST", &purchase_path, Some(&buyer), r#"{"quantity": 1}"#);
    let (status, body) = api.call("GET", &format!("/sales/{sale}"), None, "").await;
    assert_eq!((status, &body["remaining"]), (200, &json!(5)), "{body}");
    let (status, body) = buy().await;
    assert_eq!(status, 202, "{body}");
    let order = body["orderId"].as_str().unwrap().to_owned();
    assert_eq!(redis.stock().await, Some(4));
    assert_eq!(redis.held("buyer-1").await, Some(1));
    let (status, body) = buy().await;
    assert_eq!(
        (status, &body["code"]),
        (409, &json!("LIMIT_EXCEEDED")),
        "{body}"
    );

    // SAM runs no event source: the test hands the queued message to the
    // order-writer as Lambda's SQS poller would, through `sam local invoke`.
    let messages = app.take_messages().await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let records: Vec<(&str, &str)> = messages
        .iter()
        .map(|(id, body)| (id.as_str(), body.as_str()))
        .collect();
    let event = std::env::temp_dir().join(format!("{}.json", unique("sam-sqs")));
    std::fs::write(
        &event,
        serde_json::to_string(&seckill_tests::sqs_event(&records)).unwrap(),
    )
    .unwrap();
    let answer = sam.invoke(&env, "OrderWriterFunction", &event).await;
    assert_eq!(answer, json!({"batchItemFailures": []}));
    let _ = std::fs::remove_file(&event);

    let order_path = format!("/orders/{order}");
    let (status, body) = api.call("GET", &order_path, Some(&buyer), "").await;
    assert_eq!(
        (status, &body["status"]),
        (200, &json!("PENDING_PAYMENT")),
        "{body}"
    );
    let other = bearer("buyer-2", false);
    let (status, _) = api.call("GET", &order_path, Some(&other), "").await;
    assert_eq!(status, 404, "another buyer's order is not found");
    let (status, body) = api
        .call("POST", &format!("{order_path}/pay"), Some(&buyer), "")
        .await;
    assert_eq!((status, &body["status"]), (200, &json!("PAID")), "{body}");
    let (status, body) = api.call("GET", &order_path, Some(&buyer), "").await;
    assert_eq!((status, &body["status"]), (200, &json!("PAID")), "{body}");

    // The operator's view agrees.
    let (status, body) = api.call("GET", &path, Some(&admin), "").await;
    assert_eq!(
        (status, &body["sold"], &body["available"]),
        (200, &json!(1), &json!(4)),
        "{body}"
    );

    drop(api);
    let _ = std::fs::remove_file(env);
}
