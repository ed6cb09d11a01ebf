//! Generated input for the edges that parse untrusted data: the purchase
//! request (body, path id, headers, claims) and the order message. 100,000
//! cases each: no panic, every refusal a 4xx, and whatever is accepted holds
//! only valid values. A sample of the refused ones then goes through the
//! real handler on Redis and the queue: nothing is written.
//!
//! The generator is a seeded xorshift, so a failure names a case that can
//! be replayed; no fuzzing framework is needed for this shape of input.

use seckill_shared::domain::Quantity;
use seckill_tests::{App, live_sale, purchase_event};

const CASES: usize = 100_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    /// A string from a hostile alphabet: id characters, hash-tag braces,
    /// glob stars, separators, quotes, control and non-ASCII characters.
    fn text(&mut self, max: usize) -> String {
        const ALPHABET: &[&str] = &[
            "a", "Z", "0", "9", "_", "-", "{", "}", "*", " ", ":", "|", "/", "\\", "\"", "'", "\n",
            "\0", "é", "漢", "%20", ".", ",", "?", "#",
        ];
        let len = self.below(max + 1);
        (0..len).map(|_| self.pick(ALPHABET)).collect()
    }
}

fn is_id(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A user id: the token's `sub` as issued, 1 to 255 bytes without control
/// characters.
fn is_user_id(s: &str) -> bool {
    (1..=255).contains(&s.len()) && !s.chars().any(char::is_control)
}

fn body(rng: &mut Rng) -> String {
    let quantity = rng.pick(&[
        "1",
        "2",
        "0",
        "-1",
        "1.5",
        "\"1\"",
        "1e3",
        "1000",
        "1001",
        "1000000000000",
        "null",
        "true",
        "[]",
        "{}",
        "18446744073709551616",
    ]);
    match rng.below(8) {
        0 => String::new(),
        1 => format!("{{\"quantity\": {quantity}}}"),
        2 => format!("{{\"quantity\": {quantity}, \"{}\": 1}}", rng.text(8)),
        3 => rng.text(40),
        4 => format!("[{quantity}]"),
        5 => format!("{{\"quantity\": {quantity}"),
        6 => "x".repeat(rng.below(6_000)),
        _ => format!("{{\"quantity\": {quantity}, \"userId\": \"admin\"}}"),
    }
}

#[test]
fn purchase_requests_never_panic_and_refusals_are_4xx() {
    let mut rng = Rng(0x5eed_cafe_f00d_beef);
    let (mut accepted, mut refused) = (0, 0);
    for case in 0..CASES {
        let sale = if rng.below(3) == 0 {
            "s-ok".to_owned()
        } else {
            rng.text(70)
        };
        let user = if rng.below(4) == 0 {
            None
        } else if rng.below(2) == 0 {
            Some("u1".to_owned())
        } else {
            // Up to 100 characters of up to 4 bytes: past the 255 bytes a
            // user id may have.
            Some(rng.text(100))
        };
        // Header values reach a function only as visible ASCII.
        let key: String = rng
            .text(70)
            .chars()
            .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
            .collect();
        let body = body(&mut rng);
        let headers: Vec<(&str, &str)> = if rng.below(2) == 0 {
            vec![("idempotency-key", key.as_str())]
        } else {
            vec![]
        };
        let req = purchase_event(&sale, user.as_deref(), &body, &headers);
        match purchase::handler::parse(&req, None) {
            Ok(p) => {
                accepted += 1;
                assert!(is_id(p.sale_id.as_str()), "case {case}: {sale:?}");
                assert!(is_user_id(p.user_id.as_str()), "case {case}: {user:?}");
                assert!(
                    (1..=Quantity::MAX).contains(&p.quantity.get()),
                    "case {case}: {body:?}"
                );
                if let Some(k) = &p.idempotency_key {
                    assert!(is_id(k.as_str()), "case {case}: {key:?}");
                }
            }
            Err(err) => {
                refused += 1;
                assert!(matches!(err.status(), 400 | 401), "case {case}: {err:?}");
                assert!(!err.to_string().is_empty());
            }
        }
    }
    println!("purchase requests: {accepted} accepted, {refused} refused");
    assert_eq!(accepted + refused, CASES, "every case ran");
    assert!(
        accepted > 1_000 && refused > 50_000,
        "the generator reaches both sides"
    );
}

#[test]
fn order_messages_never_panic_and_accept_only_valid_values() {
    let mut rng = Rng(0x0dd_ba11_5eed_1234);
    let mut accepted = 0;
    for case in 0..CASES {
        let id = |rng: &mut Rng| {
            if rng.below(2) == 0 {
                "ok-1".to_owned()
            } else {
                rng.text(70)
            }
        };
        let (order, sale, user) = (id(&mut rng), id(&mut rng), id(&mut rng));
        let quantity = rng.pick(&["1", "1", "1", "0", "-1", "2.5", "\"1\"", "1001", "null"]);
        let version = rng.pick(&["1", "1", "1", "2", "0", "\"1\""]);
        let at = rng.pick(&[
            "\"2026-11-30T03:00:00.000Z\"",
            "\"2026-11-30T03:00:00.000Z\"",
            "\"yesterday\"",
            "0",
            "null",
        ]);
        let raw = match rng.below(4) {
            0 => rng.text(80),
            _ => format!(
                "{{\"v\":{version},\"orderId\":{},\"saleId\":{},\"userId\":{},\"quantity\":{quantity},\"shard\":0,\"reservedAt\":{at}}}",
                serde_json::json!(order),
                serde_json::json!(sale),
                serde_json::json!(user)
            ),
        };
        if let Ok((m, _)) = seckill_shared::app::order_writer::parse(&raw) {
            accepted += 1;
            assert!(
                is_id(m.order_id.as_str())
                    && is_id(m.sale_id.as_str())
                    && is_user_id(m.user_id.as_str()),
                "case {case}"
            );
            assert_eq!(m.v, 1);
        }
    }
    println!("order messages: {accepted} of {CASES} accepted");
    assert!(accepted > 100, "the generator reaches valid messages too");
}

#[tokio::test]
async fn refused_requests_write_nothing() {
    let app = App::spawn().await;
    let sale = live_sale(10, 1);
    app.open_sale(&sale).await;
    let id = sale.sale_id.as_str();
    let before = app.snapshot(id).await;
    let mut rng = Rng(0xfeed_face_dead_c0de);
    let mut sent = 0;
    while sent < 2_000 {
        let body = body(&mut rng);
        let bad_sale = rng.text(70);
        let (sale_id, user) = match rng.below(3) {
            0 => (bad_sale.as_str(), Some("u1")),
            1 => (id, None),
            _ => (id, Some("u1")),
        };
        let req = purchase_event(sale_id, user, &body, &[]);
        if purchase::handler::parse(&req, None).is_ok() {
            continue;
        }
        let reply = app.call(req).await;
        assert!(matches!(reply.status, 400 | 401), "{reply:?}");
        sent += 1;
    }
    assert_eq!(app.snapshot(id).await, before, "no key of the sale changed");
    assert_eq!(app.queue_depth().await, 0, "no message");
    assert!(app.orders().await.is_empty(), "no row");
}
