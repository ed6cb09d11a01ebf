//! The sale gate over HTTP: `gate` in the public sale view, a question
//! before the purchase, a pass bound to buyer and sale that buys once, and
//! 403 GATE_REQUIRED for everything else.

use seckill_infra::token::TokenSettings;
use seckill_shared::clock;
use seckill_tests::{LocalStack, eventually, unique};
use std::time::Duration;

fn solve(question: &str) -> i64 {
    question
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<i64>().ok())
        .sum()
}

#[tokio::test]
async fn a_gated_sale_sells_only_to_a_fresh_pass() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
    let alice = format!("Bearer {}", tokens.mint("alice", false, 300).unwrap());
    let bob = format!("Bearer {}", tokens.mint("bob", false, 300).unwrap());
    let now = clock::now_ms();
    let put = |id: &str, start: i64| {
        let body = serde_json::json!({
            "name": "Gated", "totalStock": 10, "startAt": clock::rfc3339_ms(start),
            "endAt": clock::rfc3339_ms(start + 3_600_000), "perUserLimit": 2, "gate": true,
        });
        let (stack, admin, id) = (&stack, admin.clone(), id.to_owned());
        async move {
            stack
                .request(
                    "PUT",
                    &format!("/admin/sales/{id}"),
                    &[("authorization", &admin)],
                    &body.to_string(),
                )
                .await
        }
    };
    let sale = unique("gated");
    let start = now + 1_500;
    assert_eq!(put(&sale, start).await.0, 201);
    let later = unique("gated");
    assert_eq!(put(&later, now + 3_600_000).await.0, 201);

    // The public view says which sales ask a question, so a page asks for
    // one only then.
    for (id, gated) in [(&sale, true), (&later, true), (&stack.demo_sale, false)] {
        let (status, view) = stack.request("GET", &format!("/sales/{id}"), &[], "").await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["gate"], serde_json::json!(gated), "{id}: {view}");
    }

    // Questions only from shortly before the start.
    let (status, reply) = stack
        .request(
            "GET",
            &format!("/sales/{later}/challenge"),
            &[("authorization", &alice)],
            "",
        )
        .await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (425, Some("SALE_NOT_STARTED")),
        "{reply}"
    );
    let (status, _) = stack
        .request("GET", &format!("/sales/{sale}/challenge"), &[], "")
        .await;
    assert_eq!(status, 401);
    assert!(eventually(Duration::from_secs(5), || async { clock::now_ms() > start }).await);

    let buy = |auth: String, token: Option<String>| {
        let (stack, path) = (&stack, format!("/sales/{sale}/purchase"));
        async move {
            let mut headers = vec![("authorization", auth.as_str())];
            if let Some(t) = &token {
                headers.push(("x-sale-token", t.as_str()));
            }
            stack.request("POST", &path, &headers, "").await
        }
    };
    let (status, reply) = buy(alice.clone(), None).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "no pass"
    );

    let (status, question) = stack
        .request(
            "GET",
            &format!("/sales/{sale}/challenge"),
            &[("authorization", &alice)],
            "",
        )
        .await;
    assert_eq!(status, 200, "{question}");
    let right = solve(question["question"].as_str().unwrap());
    let answer = |n: i64| {
        let (stack, alice, path) = (&stack, alice.clone(), format!("/sales/{sale}/challenge"));
        async move {
            stack
                .request(
                    "POST",
                    &path,
                    &[("authorization", &alice)],
                    &format!("{{\"answer\": {n}}}"),
                )
                .await
        }
    };
    let (status, _) = answer(right + 1000).await;
    assert_eq!(status, 400, "wrong answer");
    // The question's id binds an answer to it; a malformed or unknown id is
    // refused with the right answer too, and gives no pass.
    let id = question["challengeId"].as_str().unwrap().to_owned();
    for (body, why) in [
        (
            format!("{{\"answer\": {right}, \"challengeId\": 7}}"),
            "an id that is not a string",
        ),
        (
            format!("{{\"answer\": {right}, \"challengeId\": \"junk\"}}"),
            "a junk id",
        ),
        (
            format!(
                "{{\"answer\": {right}, \"challengeId\": \"{}\"}}",
                id.parse::<i64>().unwrap() + 1
            ),
            "a future id",
        ),
        (
            format!("{{\"answer\": {}, \"challengeId\": \"{id}\"}}", right + 1),
            "a near miss with its id",
        ),
    ] {
        let (status, reply) = stack
            .request(
                "POST",
                &format!("/sales/{sale}/challenge"),
                &[("authorization", &alice)],
                &body,
            )
            .await;
        assert_eq!(
            (status, reply["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{why}: {reply}"
        );
        assert!(reply.get("token").is_none(), "{why}");
    }
    let (status, pass) = stack
        .request(
            "POST",
            &format!("/sales/{sale}/challenge"),
            &[("authorization", &alice)],
            &format!("{{\"answer\": {right}, \"challengeId\": \"{id}\"}}"),
        )
        .await;
    assert_eq!(status, 200, "{pass}");
    let (status, other_pass) = answer(right).await;
    assert_eq!(
        status, 200,
        "without its id the answer still counts: {other_pass}"
    );
    let token = pass["token"].as_str().unwrap().to_owned();

    let (status, reply) = buy(bob.clone(), Some(token.clone())).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "someone else's pass"
    );
    let mut forged = token.clone();
    forged.insert(5, 'A');
    let (status, _) = buy(alice.clone(), Some(forged)).await;
    assert_eq!(status, 403, "forged pass");
    let (status, reply) = buy(alice.clone(), Some(token.clone())).await;
    assert_eq!(status, 202, "{reply}");
    let (status, reply) = buy(alice.clone(), Some(token)).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "a pass buys once"
    );

    // A sale without a gate ignores the header.
    let (status, _) = stack
        .request(
            "POST",
            &format!("/sales/{}/purchase", stack.demo_sale),
            &[("authorization", &bob), ("x-sale-token", "junk")],
            "",
        )
        .await;
    assert_eq!(status, 202);
}
