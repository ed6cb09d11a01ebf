//! Over HTTP against the local stack (`seckill-local up`): the JWT checks of
//! the API Gateway stand-in and a purchase end to end.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use seckill_infra::token::TokenSettings;
use seckill_tests::LocalStack;

fn b64(json: serde_json::Value) -> String {
    URL_SAFE_NO_PAD.encode(json.to_string())
}

#[tokio::test]
async fn health_is_public() {
    let stack = LocalStack::start().await;
    let (status, body) = stack.request("GET", "/health", &[], "").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("ok")));
    let (status, body) = stack.request("GET", "/nowhere", &[], "").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("NOT_FOUND")));
}

/// The contract: the public sale view may be served from a cache (a CDN,
/// the page) for a second, which is what keeps page polls off the API's
/// quota; `remaining` may lag by that second and no more.
#[tokio::test]
async fn the_sale_view_is_cacheable_for_one_second() {
    let stack = LocalStack::start().await;
    let (status, headers, body) = stack
        .request_with_headers("GET", &format!("/sales/{}", stack.demo_sale), &[], "")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        headers.get("cache-control").map(String::as_str),
        Some("public, max-age=1"),
        "{headers:?}"
    );
}

#[tokio::test]
async fn a_good_token_buys_from_the_demo_sale() {
    let stack = LocalStack::start().await;
    let token = TokenSettings::from_env()
        .mint("walker", false, 300)
        .unwrap();
    let path = format!("/sales/{}/purchase", stack.demo_sale);
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let (status, body) = stack
        .request("POST", &path, &headers, r#"{"quantity": 1}"#)
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "QUEUED");
    let order_id = body["orderId"].clone();
    // The demo sale allows one per buyer.
    let (status, body) = stack.request("POST", &path, &headers, "").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["orderIds"], serde_json::json!([order_id]));
}

#[tokio::test]
async fn bad_tokens_are_401() {
    let stack = LocalStack::start().await;
    let good = TokenSettings::from_env();
    let path = format!("/sales/{}/purchase", stack.demo_sale);
    let now = seckill_shared::clock::now_ms() / 1000;

    let wrong_secret = TokenSettings {
        secret: "not-the-secret".into(),
        ..good.clone()
    }
    .mint("u1", false, 300)
    .unwrap();
    let expired = good.mint("u1", false, -120).unwrap();
    let wrong_audience = TokenSettings {
        audience: "someone-else".into(),
        ..good.clone()
    }
    .mint("u1", false, 300)
    .unwrap();
    let wrong_issuer = TokenSettings {
        issuer: "https://evil.example".into(),
        ..good.clone()
    }
    .mint("u1", false, 300)
    .unwrap();
    let claims = serde_json::json!({
        "sub": "u1", "iss": good.issuer, "aud": good.audience, "exp": now + 300, "iat": now,
    });
    let alg_none = format!(
        "{}.{}.",
        b64(serde_json::json!({"alg": "none", "typ": "JWT"})),
        b64(claims.clone())
    );
    // A valid signature moved onto other claims.
    let real = good.mint("u1", false, 300).unwrap();
    let signature = real.rsplit('.').next().unwrap();
    let forged_claims = serde_json::json!({
        "sub": "admin", "iss": good.issuer, "aud": good.audience, "exp": now + 300, "iat": now,
    });
    let spliced = format!(
        "{}.{}.{signature}",
        real.split('.').next().unwrap(),
        b64(forged_claims)
    );

    let cases = [
        ("bad signature", format!("Bearer {wrong_secret}")),
        ("expired", format!("Bearer {expired}")),
        ("wrong audience", format!("Bearer {wrong_audience}")),
        ("wrong issuer", format!("Bearer {wrong_issuer}")),
        ("alg none", format!("Bearer {alg_none}")),
        ("spliced claims", format!("Bearer {spliced}")),
        ("not a JWT", "Bearer hello".to_string()),
        ("basic auth", "Basic dTE6cGFzcw==".to_string()),
    ];
    for (what, header) in &cases {
        let (status, body) = stack
            .request("POST", &path, &[("authorization", header.as_str())], "")
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (401, Some("UNAUTHENTICATED")),
            "{what}"
        );
    }
    let (status, _) = stack.request("POST", &path, &[], "").await;
    assert_eq!(status, 401, "no token");

    // None of them bought anything: a good token still gets the first unit.
    let token = good.mint("u1", false, 300).unwrap();
    let auth = format!("Bearer {token}");
    let (status, body) = stack
        .request("POST", &path, &[("authorization", auth.as_str())], "")
        .await;
    assert_eq!(status, 202, "{body}");
}
