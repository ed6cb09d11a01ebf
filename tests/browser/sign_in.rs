//! Sign-in through a hosted UI (a stand-in identity provider answering the
//! implicit grant).

use super::harness::*;
use seckill_shared::clock;
use seckill_tests::{LocalStack, unique};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A stand-in for Cognito's hosted UI (implicit grant), on a free port:
/// `GET /oauth2/authorize?...&redirect_uri=R&state=X` answers `302` to
/// `R#access_token=<a token the local gateway accepts for user>&...&state=X`.
/// Every authorize request's query is kept for the test to check.
pub(super) async fn identity_provider(
    user: String,
) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    tokio::spawn(async move {
        let tokens = seckill_infra::token::TokenSettings::from_env();
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head);
            let target = head.split(' ').nth(1).unwrap_or_default();
            let query = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
            seen.lock().unwrap().push(query.to_owned());
            let param = |name: &str| {
                query
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| percent_decoded(value))
                    .unwrap_or_default()
            };
            let token = tokens.mint(&user, false, 600).unwrap();
            let reply = format!(
                "HTTP/1.1 302 Found\r\nLocation: {}#access_token={token}&token_type=Bearer&expires_in=600&state={}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                param("redirect_uri"),
                param("state"),
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        }
    });
    (base, asked)
}

/// `application/x-www-form-urlencoded` value, decoded.
pub(super) fn percent_decoded(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// h) Signing in as on AWS: a stack whose pages use a hosted UI. A forged
/// answer (a token with a state the page never sent) signs nobody in; the
/// sign-in link goes to the identity provider with this page as
/// `redirect_uri` and a fresh `state`, the page takes the token from the
/// fragment, clears it from the address bar, and the buyer buys with it.
pub(super) async fn a_hosted_ui_sign_in_buys(ui: &Ui) {
    let buyer = unique("h-cognito");
    let (idp, asked) = identity_provider(buyer.clone()).await;
    let stack = Arc::new(
        LocalStack::start_signing_in_at(&format!(
            "{idp}/oauth2/authorize?client_id=seckill-pages&response_type=token&scope=openid"
        ))
        .await,
    );
    let hosted = Ui {
        c: ui.c.clone(),
        base: format!("http://{}", stack.addr),
        stack,
        shots: ui.shots.clone(),
        width: AtomicU32::new(ui.width.load(Ordering::Relaxed)),
    };
    let sale = hosted.sale("h", 5, 1, clock::now_ms() - 1_000).await;
    hosted.open(&format!("/?sale={sale}")).await;
    hosted
        .until(
            "the hosted UI's sign-in link",
            "return !document.getElementById('login-link').hidden \
             && !document.getElementById('cognito-signin').hidden \
             && document.getElementById('local-signin').hidden",
        )
        .await;

    let forged = seckill_infra::token::TokenSettings::from_env()
        .mint(&unique("h-forger"), false, 600)
        .unwrap();
    // Arriving from elsewhere, as a redirect does (a fragment change alone
    // would not load the page again).
    hosted.c.goto("about:blank").await.unwrap();
    hosted
        .c
        .goto(&format!(
            "{}/?sale={sale}#access_token={forged}&state=never-sent",
            hosted.base
        ))
        .await
        .unwrap();
    hosted
        .until(
            "a forged answer signs nobody in",
            "return location.hash === '' && !document.getElementById('cognito-signin').hidden \
             && document.getElementById('who-name').textContent === ''",
        )
        .await;
    assert!(asked.lock().unwrap().is_empty());

    hosted.click("#login-link").await;
    hosted
        .until(
            "signed in through the hosted UI",
            &format!(
                "return document.getElementById('who-name').textContent === {}",
                json!(buyer)
            ),
        )
        .await;
    let query = asked.lock().unwrap().clone();
    assert_eq!(query.len(), 1, "{query:?}");
    // This page (origin and path) is where the token comes back to.
    let back = format!(
        "redirect_uri={}",
        hosted.base.replace(':', "%3A").replace('/', "%2F")
    );
    assert!(
        query[0].contains("client_id=seckill-pages") && query[0].contains(&back),
        "{query:?}"
    );
    assert!(
        hosted
            .holds(&format!(
                "return location.hash === '' && location.search === {}",
                json!(format!("?sale={sale}"))
            ))
            .await,
        "the token is left in the address bar, or the sale is lost"
    );
    hosted.shot("buyer-hosted-ui-signed-in-1280").await;
    hosted.until_buyable("buy button on").await;
    hosted.click("#buy-button").await;
    hosted.until_order("PENDING_PAYMENT").await;
    // The sale the buyer left with (`?sale=`), not the stack's default.
    let (buyers, _) = hosted.held(&sale).await;
    assert_eq!(buyers.get(buyer.as_str()), Some(&1), "{buyers:?}");
}
