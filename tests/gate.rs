//! The sale gate over HTTP: `gate` in the public sale view, a question
//! before the purchase, a pass bound to buyer and sale that buys once, and
//! 403 GATE_REQUIRED for everything else; a sale with `powBits` asks for a
//! proof of work instead, only from its start, and one solution buys once;
//! with a lottery window too, a ticket needs a solution.

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
        assert_eq!(view["powBits"], serde_json::Value::Null, "{id}: {view}");
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
    assert_eq!(question["kind"], "arithmetic", "{question}");
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

/// Leading zero bits of SHA-256(challenge ":" nonce), computed here apart
/// from the server's code.
fn zero_bits(challenge: &str, nonce: &str) -> u32 {
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        format!("{challenge}:{nonce}").as_bytes(),
    );
    let mut zeros = 0;
    for b in digest.as_ref() {
        zeros += b.leading_zeros();
        if *b != 0 {
            break;
        }
    }
    zeros
}

/// The first decimal nonce from `from` with at least `bits` zero bits
/// that `reject` does not refuse.
fn brute_force(challenge: &str, bits: u32, from: u64, reject: impl Fn(&str) -> bool) -> String {
    (from..)
        .map(|n| n.to_string())
        .find(|n| zero_bits(challenge, n) >= bits && !reject(n))
        .unwrap()
}

#[tokio::test]
async fn a_proof_of_work_sale_sells_once_per_solution_from_its_start() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
    let alice = format!("Bearer {}", tokens.mint("alice", false, 300).unwrap());
    let bob = format!("Bearer {}", tokens.mint("bob", false, 300).unwrap());
    let sale = unique("pow");
    // Time for the refused PUTs below before the start.
    let start = clock::now_ms() + 3_000;
    let body = |extra: serde_json::Value| {
        let mut b = serde_json::json!({
            "name": "Proof of work", "totalStock": 10, "startAt": clock::rfc3339_ms(start),
            "endAt": clock::rfc3339_ms(start + 3_600_000), "perUserLimit": 2,
        });
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b.to_string()
    };
    let put = |b: String| {
        let (stack, admin, path) = (&stack, admin.clone(), format!("/admin/sales/{sale}"));
        async move {
            stack
                .request("PUT", &path, &[("authorization", &admin)], &b)
                .await
        }
    };

    // Out of bounds, not an integer, or with the gate turned off: 400
    // naming powBits, and no sale written.
    for bad in [
        serde_json::json!({"powBits": 7}),
        serde_json::json!({"powBits": 27}),
        serde_json::json!({"powBits": "12"}),
        serde_json::json!({"powBits": 12, "gate": false}),
    ] {
        let (status, reply) = put(body(bad.clone())).await;
        assert_eq!(
            (status, reply["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{bad}: {reply}"
        );
        assert!(
            reply["message"].as_str().unwrap().contains("powBits"),
            "{reply}"
        );
        // The table itself (the public view caches a miss for a moment).
        let (status, _) = stack
            .request(
                "GET",
                &format!("/admin/sales/{sale}"),
                &[("authorization", &admin)],
                "",
            )
            .await;
        assert_eq!(status, 404, "{bad} wrote the sale");
    }

    // powBits alone turns the gate on.
    let bits = 12;
    let (status, created) = put(body(serde_json::json!({"powBits": bits}))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (created["gate"].as_bool(), created["powBits"].as_u64()),
        (Some(true), Some(12))
    );
    let (status, view) = stack
        .request("GET", &format!("/sales/{sale}"), &[], "")
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["gate"].as_bool(), view["powBits"].as_u64()),
        (Some(true), Some(12))
    );

    // No challenge before the start (not even the 30 s the question gets):
    // 425 with the wait.
    let (status, headers, reply) = stack
        .request_with_headers(
            "GET",
            &format!("/sales/{sale}/challenge"),
            &[("authorization", &alice)],
            "",
        )
        .await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (425, Some("SALE_NOT_STARTED")),
        "{reply}"
    );
    let wait: u64 = headers["retry-after"].parse().unwrap();
    assert!((1..=4).contains(&wait), "retry-after {wait}");
    assert!(eventually(Duration::from_secs(6), || async { clock::now_ms() > start }).await);

    // Frozen from the start.
    let (status, reply) = put(body(serde_json::json!({"powBits": 14}))).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (409, Some("SALE_STARTED")),
        "{reply}"
    );

    let challenge = |auth: String| {
        let (stack, path) = (&stack, format!("/sales/{sale}/challenge"));
        async move {
            let (status, c) = stack
                .request("GET", &path, &[("authorization", &auth)], "")
                .await;
            assert_eq!(status, 200, "{c}");
            c
        }
    };
    let post = |auth: String, b: String| {
        let (stack, path) = (&stack, format!("/sales/{sale}/challenge"));
        async move {
            stack
                .request(
                    "POST",
                    &path,
                    &[
                        ("authorization", &auth),
                        ("content-type", "application/json"),
                    ],
                    &b,
                )
                .await
        }
    };
    let mine = challenge(alice.clone()).await;
    assert_eq!(
        (mine["kind"].as_str(), mine["bits"].as_u64()),
        (Some("pow"), Some(12)),
        "{mine}"
    );
    assert!(mine.get("question").is_none(), "{mine}");
    let theirs = challenge(bob.clone()).await;
    let (c, id) = (
        mine["challenge"].as_str().unwrap(),
        mine["challengeId"].as_str().unwrap(),
    );
    let bob_c = theirs["challenge"].as_str().unwrap();
    assert_ne!(c, bob_c, "a challenge is the buyer's own");
    // Alice's solution, picked so that it does not solve Bob's challenge.
    let nonce = brute_force(c, bits, 0, |n| zero_bits(bob_c, n) >= bits);
    // One bit short: exactly bits - 1 zero bits.
    let short = (0u64..)
        .map(|n| n.to_string())
        .find(|n| zero_bits(c, n) == bits - 1)
        .unwrap();
    let solution = |nonce: &str| format!("{{\"challengeId\": \"{id}\", \"nonce\": \"{nonce}\"}}");
    for (auth, b, why) in [
        (alice.clone(), solution(&short), "one bit short"),
        (alice.clone(), solution(""), "an empty nonce"),
        (bob.clone(), solution(&nonce), "another buyer's solution"),
        (
            alice.clone(),
            "{\"answer\": 5}".into(),
            "an arithmetic answer",
        ),
        (
            alice.clone(),
            format!("{{\"challengeId\": \"{id}\", \"nonce\": 5}}"),
            "a number",
        ),
        (
            alice.clone(),
            format!("{{\"nonce\": \"{nonce}\"}}"),
            "no challengeId",
        ),
        (
            alice.clone(),
            format!(
                "{{\"challengeId\": \"{}\", \"nonce\": \"{nonce}\"}}",
                id.parse::<i64>().unwrap() + 1
            ),
            "a future window",
        ),
    ] {
        let (status, reply) = post(auth, b).await;
        assert_eq!(
            (status, reply["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{why}: {reply}"
        );
        assert!(reply.get("token").is_none(), "{why}");
    }

    // Two passes from one solved challenge.
    let (status, first) = post(alice.clone(), solution(&nonce)).await;
    assert_eq!(status, 200, "{first}");
    let (status, second) = post(alice.clone(), solution(&nonce)).await;
    assert_eq!(status, 200, "{second}");
    // (Two passes issued in one millisecond are the same token; either
    // way they carry the challenge's one nonce.)

    let buy = |auth: String, token: &serde_json::Value| {
        let (stack, path) = (&stack, format!("/sales/{sale}/purchase"));
        let token = token.as_str().unwrap().to_owned();
        async move {
            stack
                .request(
                    "POST",
                    &path,
                    &[("authorization", &auth), ("x-sale-token", &token)],
                    "",
                )
                .await
        }
    };
    let (status, reply) = buy(bob.clone(), &first["token"]).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "{reply}"
    );
    let (status, reply) = buy(alice.clone(), &first["token"]).await;
    assert_eq!(status, 202, "{reply}");
    let (status, reply) = buy(alice.clone(), &second["token"]).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "the second pass of one solution: {reply}"
    );
    // Another solution is another solve, and buys the second unit the
    // limit allows.
    let again = brute_force(c, bits, nonce.parse::<u64>().unwrap() + 1, |_| false);
    let (status, pass) = post(alice.clone(), solution(&again)).await;
    assert_eq!(status, 200, "{pass}");
    let (status, reply) = buy(alice.clone(), &pass["token"]).await;
    assert_eq!(status, 202, "{reply}");

    // Bob solves his own and buys; exactly three units went.
    let bob_nonce = brute_force(bob_c, bits, 0, |_| false);
    let bob_id = theirs["challengeId"].as_str().unwrap();
    let (status, pass) = post(
        bob.clone(),
        format!("{{\"challengeId\": \"{bob_id}\", \"nonce\": \"{bob_nonce}\"}}"),
    )
    .await;
    assert_eq!(status, 200, "{pass}");
    let (status, reply) = buy(bob.clone(), &pass["token"]).await;
    assert_eq!(status, 202, "{reply}");
    let (_, view) = stack
        .request("GET", &format!("/sales/{sale}"), &[], "")
        .await;
    assert_eq!(view["remaining"].as_i64(), Some(7), "{view}");
}

#[tokio::test]
async fn a_proof_of_work_lottery_sale_gives_a_ticket_only_for_a_solution() {
    let stack = LocalStack::start().await;
    let client = seckill_tests::StackClient::new(&stack);
    let sale = unique("powlot");
    let start = clock::now_ms() + 1_500;
    let (status, made) = client
        .put_sale(
            &sale,
            &serde_json::json!({
                "name": "Both", "totalStock": 5, "startAt": clock::rfc3339_ms(start),
                "endAt": clock::rfc3339_ms(start + 3_600_000), "perUserLimit": 1,
                "powBits": 8, "admission": {"window": 5},
            }),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    assert!(
        eventually(Duration::from_secs(5), || async {
            clock::now_ms() >= start
        })
        .await
    );
    // No pass: refused, no ticket.
    let (status, reply) = client.buy(&sale, "alice").await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "{reply}"
    );
    let (_, mine) = client.my_orders(&sale, "alice").await;
    assert_eq!(mine["ticket"], serde_json::Value::Null);
    // Solved: the pass takes a ticket.
    let path = format!("/sales/{sale}/challenge");
    let (status, c) = client.as_buyer("GET", &path, "alice", "").await;
    assert_eq!(status, 200, "{c}");
    let nonce = brute_force(c["challenge"].as_str().unwrap(), 8, 0, |_| false);
    let answer = serde_json::json!({"challengeId": c["challengeId"], "nonce": nonce});
    let (status, pass) = client
        .as_buyer("POST", &path, "alice", &answer.to_string())
        .await;
    assert_eq!(status, 200, "{pass}");
    let (status, reply) = stack
        .request(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &[
                ("authorization", &client.buyer("alice")),
                ("x-sale-token", pass["token"].as_str().unwrap()),
            ],
            "",
        )
        .await;
    assert_eq!(
        (status, reply["status"].as_str()),
        (202, Some("TICKET")),
        "{reply}"
    );
    let (_, mine) = client.my_orders(&sale, "alice").await;
    assert_eq!(mine["ticket"]["status"], "TICKET", "{mine}");
}

/// A pass buys once (`sale:{S}:gateused`), but the
/// rebuild of a lost sale did not restore which passes were used: after
/// Redis lost the sale and prewarm rebuilt it from the ledger, the same
/// pass bought a second unit. A pass issued before the rebuild is refused
/// now (`403 GATE_REQUIRED`: the buyer answers a new question), and a pass
/// issued after it buys once.
#[tokio::test]
async fn a_used_pass_does_not_buy_again_after_a_rebuild() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
    let alice = format!("Bearer {}", tokens.mint("alice", false, 300).unwrap());
    let now = clock::now_ms();
    let sale = unique("gated");
    let body = serde_json::json!({
        "name": "Gated", "totalStock": 10, "startAt": clock::rfc3339_ms(now - 1_000),
        "endAt": clock::rfc3339_ms(now + 3_600_000), "perUserLimit": 2, "gate": true,
    });
    let (status, reply) = stack
        .request(
            "PUT",
            &format!("/admin/sales/{sale}"),
            &[("authorization", &admin)],
            &body.to_string(),
        )
        .await;
    assert_eq!(status, 201, "{reply}");
    let pass = || {
        let (stack, sale, alice) = (&stack, &sale, &alice);
        async move {
            let (status, question) = stack
                .request(
                    "GET",
                    &format!("/sales/{sale}/challenge"),
                    &[("authorization", alice)],
                    "",
                )
                .await;
            assert_eq!(status, 200, "{question}");
            let right = solve(question["question"].as_str().unwrap());
            let (status, pass) = stack
                .request(
                    "POST",
                    &format!("/sales/{sale}/challenge"),
                    &[("authorization", alice)],
                    &format!(
                        "{{\"answer\": {right}, \"challengeId\": \"{}\"}}",
                        question["challengeId"].as_str().unwrap()
                    ),
                )
                .await;
            assert_eq!(status, 200, "{pass}");
            pass["token"].as_str().unwrap().to_owned()
        }
    };
    let buy = |token: String| {
        let (stack, sale, alice) = (&stack, &sale, &alice);
        async move {
            stack
                .request(
                    "POST",
                    &format!("/sales/{sale}/purchase"),
                    &[("authorization", alice), ("x-sale-token", &token)],
                    "",
                )
                .await
        }
    };
    let used = pass().await;
    let (status, first) = buy(used.clone()).await;
    assert_eq!(status, 202, "{first}");
    let mut accepted = vec![first["orderId"].as_str().unwrap().to_owned()];
    // Written, so nothing of the sale is in flight.
    let written = eventually(Duration::from_secs(30), || async {
        let (_, mine) = stack
            .request(
                "GET",
                &format!("/sales/{sale}/orders"),
                &[("authorization", &alice)],
                "",
            )
            .await;
        mine["orders"][0]["status"] == "PENDING_PAYMENT"
    })
    .await;
    assert!(written);

    // Redis loses the sale; prewarm rebuilds it from the ledger.
    let mut conn = redis::Client::open(stack.config.redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    seckill_tests::lose_key_group(
        &mut conn,
        &seckill_shared::adapters::redis::SaleKeys::new(
            &seckill_shared::domain::SaleId::parse(&sale).unwrap(),
        ),
    )
    .await;
    let rebuilt = eventually(Duration::from_secs(30), || async {
        let (status, reply) = stack
            .request(
                "POST",
                &format!("/admin/sales/{sale}/prewarm"),
                &[("authorization", &admin)],
                "",
            )
            .await;
        status == 200 && reply["outcome"] == "LOADED"
    })
    .await;
    assert!(rebuilt, "the sale was not rebuilt");

    let (status, again) = buy(used).await;
    if status == 202 {
        accepted.push(again["orderId"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        (status, again["code"].as_str()),
        (403, Some("GATE_REQUIRED")),
        "the used pass bought again after the rebuild: {again}"
    );
    let (status, fresh) = buy(pass().await).await;
    assert_eq!(status, 202, "{fresh}");
    accepted.push(fresh["orderId"].as_str().unwrap().to_owned());
    seckill_tests::assert_clean(&stack.checker().await, &sale, &accepted).await;
}
