//! Redis AUTH and TLS (`rediss://`), as ElastiCache with in-transit
//! encryption and an AUTH token needs them, against a `redis-server` each
//! test starts itself ([`seckill_tests::tls`]): a throwaway CA and server
//! certificate made with `rcgen`, a TLS port (and a plain one, for
//! `redis://` with AUTH), `requirepass`, no persistence. A test that must
//! trust the CA runs in a child process whose `SSL_CERT_FILE` is that CA
//! ([`with_trusted_ca`]), the trust path production uses.
//!
//! And the secrets never leak: a wrong Redis password, the gate key and the
//! local JWT secret appear in no response body and no log line.

use seckill_infra::gateway::Gateway;
use seckill_infra::token::{DEFAULT_AUDIENCE, DEFAULT_ISSUER, TokenSettings};
use seckill_shared::adapters::redis::{LoadOutcome, RedisStock};
use seckill_shared::app::purchase::PurchaseError;
use seckill_shared::domain::{Quantity, SaleId, UserId};
use seckill_shared::error::ApiError;
use seckill_shared::ports::{ReserveOutcome, ReserveRequest, StockStore, StoreError};
use seckill_shared::ports::{StockLoading, StockReading};
use seckill_tests::tls::{
    Scratch, TestCa, TlsRedis, assert_hidden, encode, server_password, with_trusted_ca,
};
use seckill_tests::{App, Captured, live_sale, unique};
use std::sync::Arc;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// AUTH and TLS through the store the functions use.

#[test]
fn rediss_with_auth_sells_through_the_store() {
    with_trusted_ca(
        "redis_tls::rediss_with_auth_sells_through_the_store",
        |ca| async move {
            let password = server_password();
            let server = TlsRedis::start(&ca, &password).await;
            let pw = encode(&password);
            let urls = [
                // ElastiCache's form: the `default` user and the AUTH token.
                format!("rediss://default:{pw}@localhost:{}", server.tls_port),
                // Password only, and the certificate's IP name.
                format!("rediss://:{pw}@127.0.0.1:{}", server.tls_port),
                // AUTH without TLS.
                format!("redis://:{pw}@127.0.0.1:{}", server.plain_port),
            ];
            for url in urls {
                let stock = RedisStock::connect_lazy(&url, Duration::from_secs(2)).unwrap();
                let sale = live_sale(5, 2);
                assert_eq!(
                    stock.load_sale(&sale, 1).await.unwrap(),
                    LoadOutcome::Loaded,
                    "{url}"
                );
                let user = UserId::parse("tls-buyer").unwrap();
                let outcome = stock
                    .reserve(ReserveRequest {
                        sale_id: &sale.sale_id,
                        user_id: &user,
                        quantity: Quantity::new(2).unwrap(),
                        idempotency_key: None,
                        gate_nonce: None,
                        gate_issued_ms: None,
                        source_ip: Some("203.0.113.7"),
                    })
                    .await
                    .unwrap();
                assert!(
                    matches!(outcome, ReserveOutcome::Reserved(_)),
                    "{outcome:?}"
                );
                let snap = stock.snapshot(&sale.sale_id).await.unwrap().unwrap();
                assert_eq!((snap.stock, snap.total), (3, 5));
                assert_eq!(snap.buyers.get("tls-buyer"), Some(&2));
                assert_eq!(snap.reservations.len(), 1);
            }
        },
    );
}

#[test]
fn a_wrong_password_is_a_clear_503_that_does_not_echo_it() {
    with_trusted_ca(
        "redis_tls::a_wrong_password_is_a_clear_503_that_does_not_echo_it",
        |ca| async move {
            let password = server_password();
            let server = TlsRedis::start(&ca, &password).await;
            let wrong = format!("wrong:p@ss/{}", unique("w"));
            let sale = SaleId::parse(&unique("s")).unwrap();
            let cases = [
                (
                    format!(
                        "rediss://default:{}@localhost:{}",
                        encode(&wrong),
                        server.tls_port
                    ),
                    "authentication",
                ),
                // A wrong user with the right password: the server's WRONGPASS.
                (
                    format!(
                        "rediss://nobody:{}@localhost:{}",
                        encode(&password),
                        server.tls_port
                    ),
                    "authentication",
                ),
                // No password at all: the server's NOAUTH on the first command.
                (format!("rediss://localhost:{}", server.tls_port), "noauth"),
            ];
            for (url, says) in cases {
                let stock = RedisStock::connect_lazy(&url, Duration::from_millis(500)).unwrap();
                let started = Instant::now();
                let err = stock.snapshot(&sale).await.err().unwrap();
                assert!(started.elapsed() < Duration::from_secs(3), "{url}");
                let (shown, debug) = (err.to_string(), format!("{err:?}"));
                assert!(matches!(err, StoreError::Unavailable(_)), "{debug}");
                assert!(shown.to_lowercase().contains(says), "{shown}");
                assert_hidden(&shown, &[&wrong, &password], "the error's Display");
                assert_hidden(&debug, &[&wrong, &password], "the error's Debug");
                // The purchase path turns it into the contract's 503.
                let api = ApiError::from(PurchaseError::Store(err));
                assert_eq!(api.status(), 503);
                let body = seckill_shared::http::error(&api);
                let body = format!("{:?}", body.body());
                assert_hidden(&body, &[&wrong, &password], "the 503 body");
            }
        },
    );
}

#[tokio::test]
async fn plain_redis_to_the_tls_port_fails_fast() {
    let dir = Scratch::new("ca");
    let ca = TestCa::create(&dir.0);
    let password = server_password();
    let server = TlsRedis::start(&ca, &password).await;
    let url = format!(
        "redis://:{}@127.0.0.1:{}",
        encode(&password),
        server.tls_port
    );
    let timeout = Duration::from_millis(300);
    let stock = RedisStock::connect_lazy(&url, timeout).unwrap();
    let started = Instant::now();
    let err = stock
        .snapshot(&SaleId::parse("plain").unwrap())
        .await
        .err()
        .unwrap();
    // `run` bounds a call by twice the timeout; a little slack for the runtime.
    assert!(
        started.elapsed() < timeout * 2 + Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert_hidden(&format!("{err} {err:?}"), &[&password], "the error");
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    // This process never trusts the CA: the system roots (or whatever
    // SSL_CERT_FILE the caller set) do not hold a CA made a moment ago.
    let dir = Scratch::new("ca");
    let ca = TestCa::create(&dir.0);
    let password = server_password();
    let server = TlsRedis::start(&ca, &password).await;
    let url = format!(
        "rediss://default:{}@localhost:{}",
        encode(&password),
        server.tls_port
    );
    let stock = RedisStock::connect_lazy(&url, Duration::from_millis(500)).unwrap();
    let started = Instant::now();
    let err = stock
        .snapshot(&SaleId::parse("untrusted").unwrap())
        .await
        .err()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    let shown = err.to_string();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    // rustls's "invalid peer certificate: UnknownIssuer".
    assert!(shown.to_lowercase().contains("cert"), "{shown}");
    assert_hidden(&format!("{shown} {err:?}"), &[&password], "the error");
}

#[test]
fn urls_that_cannot_be_right_are_refused_at_cold_start() {
    let secret = "never-printed-secret";
    for url in [
        // Verification off would hand the AUTH token to anyone on the path.
        format!("rediss://default:{secret}@cache.example:6379/#insecure"),
        format!("http://default:{secret}@cache.example:6379"),
        format!("rediss://default:{secret}@:6379"),
        format!("rediss://default:{secret}@cache.example:6379/#other"),
    ] {
        let err = RedisStock::connect_lazy(&url, Duration::from_millis(100))
            .err()
            .unwrap();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert_hidden(&format!("{err} {err:?}"), &[secret], "the error");
    }
}

// ---------------------------------------------------------------------------
// No secret in a body or a log line.

/// One HTTP/1.1 request; the whole response, head and body, as text.
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    token: &str,
    body: &str,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         authorization: Bearer {token}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    String::from_utf8_lossy(&raw).into_owned()
}

fn status_of(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn secrets_never_reach_logs_or_error_bodies() {
    with_trusted_ca(
        "redis_tls::secrets_never_reach_logs_or_error_bodies",
        |ca| async move {
            // The child runs this test alone, so a process-wide subscriber sees
            // every thread (the runtime's workers, the SDK's) and nothing else.
            let logs = Captured::default();
            let writer = logs.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).unwrap();

            let password = server_password();
            let server = TlsRedis::start(&ca, &password).await;
            let wrong = format!("wrong-redis-pw-{}", unique("w"));
            let gate_secret = format!("gate-secret-{}", unique("g"));
            let jwt_secret = format!("jwt-secret-{}", unique("j"));
            let secrets = [
                wrong.as_str(),
                gate_secret.as_str(),
                jwt_secret.as_str(),
                password.as_str(),
            ];

            let app = App::spawn_with(|config| {
                config.redis_url =
                    format!("rediss://default:{wrong}@localhost:{}", server.tls_port);
                config.redis_timeout = Duration::from_millis(500);
                config.gate_secret = Some(gate_secret.clone());
            })
            .await;
            assert_hidden(&format!("{:?}", app.config), &secrets, "Config's Debug");
            assert!(format!("{:?}", app.config).contains("<secret>"));

            // In DynamoDB only: Redis refuses this service's credentials.
            let sale = live_sale(10, 1);
            assert!(app.catalog.create_sale(&sale).await.unwrap());
            let mut gated = live_sale(10, 1);
            gated.gate = true;
            assert!(app.catalog.create_sale(&gated).await.unwrap());

            let mut bodies = Vec::new();
            // Straight through the purchase handler, as the other suites call it.
            let reply = app
                .purchase(sale.sale_id.as_str(), "leak-buyer", r#"{"quantity": 1}"#)
                .await;
            assert_eq!(
                (reply.status, reply.code()),
                (503, "SALE_PAUSED"),
                "{:?}",
                reply.body
            );
            bodies.push(format!("{:?} {}", reply.headers, reply.body));

            // And over HTTP through the local gateway, whose tokens are signed
            // with this test's JWT secret.
            let tokens = TokenSettings {
                secret: jwt_secret.clone(),
                issuer: DEFAULT_ISSUER.into(),
                audience: DEFAULT_AUDIENCE.into(),
            };
            let gateway = Arc::new(Gateway::new(
                tokens.clone(),
                purchase::wire(&app.config).await.unwrap(),
                orders_api::wire(&app.config).await.unwrap(),
                Arc::new(admin_api::wire(&app.config).await.unwrap()),
            ));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let served = tokio::spawn(seckill_infra::gateway::serve(listener, gateway, async {
                let _ = stopped.await;
            }));
            let buyer = tokens.mint("leak-buyer-2", false, 300).unwrap();
            let admin = tokens.mint("leak-admin", true, 300).unwrap();
            let forged = TokenSettings {
                secret: "not-the-secret".into(),
                ..tokens.clone()
            }
            .mint("leak-buyer-3", false, 300)
            .unwrap();
            let (id, gid) = (sale.sale_id.as_str(), gated.sale_id.as_str());
            let purchase_path = format!("/sales/{id}/purchase");
            let requests = [
                (
                    "POST",
                    purchase_path.clone(),
                    buyer.clone(),
                    r#"{"quantity": 1}"#,
                    Some(503),
                ),
                (
                    "POST",
                    purchase_path,
                    forged,
                    r#"{"quantity": 1}"#,
                    Some(401),
                ),
                ("GET", format!("/sales/{id}"), buyer.clone(), "", None),
                (
                    "GET",
                    format!("/sales/{gid}/challenge"),
                    buyer.clone(),
                    "",
                    None,
                ),
                (
                    "POST",
                    format!("/sales/{gid}/purchase"),
                    buyer,
                    r#"{"quantity": 1}"#,
                    None,
                ),
                (
                    "POST",
                    format!("/admin/sales/{id}/prewarm"),
                    admin.clone(),
                    "",
                    None,
                ),
                (
                    "POST",
                    format!("/admin/sales/{id}/reconcile"),
                    admin,
                    "",
                    None,
                ),
            ];
            for (method, path, token, body, expected) in requests {
                let response = http(addr, method, &path, &token, body).await;
                if let Some(expected) = expected {
                    assert_eq!(
                        status_of(&response),
                        expected,
                        "{method} {path}:\n{response}"
                    );
                }
                bodies.push(response);
            }
            let _ = stop.send(());
            let _ = served.await;

            for body in &bodies {
                assert_hidden(body, &secrets, "a response");
            }
            let logged = logs.text();
            // Proof the capture works: the refused purchase is in it, with why.
            assert!(logged.contains("purchase refused"), "{logged}");
            assert!(logged.to_lowercase().contains("authentication"), "{logged}");
            assert_hidden(&logged, &secrets, "the logs");
        },
    );
}
