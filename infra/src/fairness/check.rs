//! After a fairness run: what Redis holds for the sale ([`read_sale`]) and
//! the invariants over it ([`check`]), each broken one said.

use super::{Answers, FairnessError, Mode};
use seckill_shared::adapters::redis::SaleKeys;
use seckill_shared::domain::{Sale, SaleId};
use std::collections::{HashMap, HashSet};

/// One reservation as Redis holds it.
#[derive(Debug, Clone)]
pub struct Held {
    pub user: String,
    pub quantity: u64,
}

/// One ticket as Redis holds it after the draw.
#[derive(Debug, Clone, Default)]
pub struct TicketSeen {
    pub result: Option<String>,
    pub order_id: Option<String>,
}

/// What Redis holds for the sale after the run.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub stock: Option<i64>,
    pub resv: HashMap<String, Held>,
    pub buyers: HashMap<String, i64>,
    pub tickets: HashMap<String, TicketSeen>,
    pub draw_done: bool,
    pub sold_out_at_ms: Option<i64>,
}

pub async fn read_sale(redis_url: &str, sale_id: &SaleId) -> Result<Seen, FairnessError> {
    let keys = SaleKeys::new(sale_id);
    let mut conn = redis::Client::open(redis_url)?
        .get_multiplexed_async_connection()
        .await?;
    let meta: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(&keys.meta)
        .query_async(&mut conn)
        .await?;
    let stock: Option<i64> = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(&mut conn)
        .await?;
    let hash = |key: &str| redis::cmd("HGETALL").arg(key).clone();
    let resv: HashMap<String, String> = hash(&keys.resv).query_async(&mut conn).await?;
    let buyers: HashMap<String, i64> = hash(&keys.buyers).query_async(&mut conn).await?;
    let tickets: HashMap<String, String> = hash(&keys.tickets).query_async(&mut conn).await?;
    let json = |raw: &str| serde_json::from_str::<serde_json::Value>(raw).unwrap_or_default();
    let text = |v: &serde_json::Value, field: &str| v.get(field)?.as_str().map(str::to_owned);
    Ok(Seen {
        stock,
        resv: resv
            .iter()
            .map(|(id, raw)| {
                let v = json(raw);
                let held = Held {
                    user: text(&v, "userId").unwrap_or_default(),
                    // Encoded as a number by cjson.
                    quantity: v.get("quantity").and_then(|q| q.as_u64()).unwrap_or(0),
                };
                (id.clone(), held)
            })
            .collect(),
        buyers,
        tickets: tickets
            .iter()
            .map(|(user, raw)| {
                let v = json(raw);
                let seen = TicketSeen {
                    result: text(&v, "r"),
                    order_id: text(&v, "o"),
                };
                (user.clone(), seen)
            })
            .collect(),
        draw_done: meta.get("drawDone").is_some_and(|d| d == "1"),
        sold_out_at_ms: meta.get("soldOutAtMs").and_then(|v| v.parse().ok()),
    })
}

/// The invariants after a run; each broken one, said.
///
/// Stock 0 and exactly `total_stock` units reserved; nobody over the limit
/// (and the buyers' counts are their reservations); every `WON` ticket has
/// its reservation, of its holder; every reservation is a `WON` ticket's or
/// an order a buyer was told of; every order a buyer was told of is
/// reserved; every reservation's message was sent; with a window, the draw
/// is over and every ticket decided; without one, no ticket exists; every
/// buyer got a final answer.
pub fn check(
    sale: &Sale,
    mode: Mode,
    seen: &Seen,
    accepted: &HashSet<String>,
    sent: &[String],
    answers: &Answers,
) -> Vec<String> {
    let mut broken = Vec::new();
    let total = u64::from(sale.total_stock);
    if seen.stock != Some(0) {
        broken.push(format!("stock left {:?}, expected 0", seen.stock));
    }
    let reserved: u64 = seen.resv.values().map(|h| h.quantity).sum();
    if reserved != total {
        broken.push(format!(
            "{reserved} units reserved, expected exactly {total}"
        ));
    }
    let limit = i64::from(sale.per_user_limit);
    let over: Vec<_> = seen.buyers.iter().filter(|(_, n)| **n > limit).collect();
    if !over.is_empty() {
        broken.push(format!(
            "{} buyer(s) over the limit of {limit}: {:?}",
            over.len(),
            over.iter().take(3).collect::<Vec<_>>()
        ));
    }
    let mut per_user: HashMap<&str, i64> = HashMap::new();
    for held in seen.resv.values() {
        *per_user.entry(held.user.as_str()).or_default() +=
            i64::try_from(held.quantity).unwrap_or(i64::MAX);
    }
    let counted: HashMap<&str, i64> = seen
        .buyers
        .iter()
        .filter(|(_, n)| **n != 0)
        .map(|(u, n)| (u.as_str(), *n))
        .collect();
    if per_user != counted {
        broken.push("the buyers' counts are not their reservations".into());
    }
    let mut won = HashSet::new();
    for (user, ticket) in &seen.tickets {
        match (ticket.result.as_deref(), &ticket.order_id) {
            (Some("WON"), Some(order_id)) => {
                match seen.resv.get(order_id) {
                    Some(held) if held.user == *user => {}
                    _ => broken.push(format!("{user}'s WON ticket has no reservation {order_id}")),
                }
                won.insert(order_id.as_str());
            }
            (Some("LOST"), None) => {}
            other => broken.push(format!(
                "{user}'s ticket is undecided or malformed: {other:?}"
            )),
        }
    }
    for order_id in seen.resv.keys() {
        if !won.contains(order_id.as_str()) && !accepted.contains(order_id) {
            broken.push(format!(
                "reservation {order_id} is neither a WON ticket's nor an accepted purchase's"
            ));
        }
    }
    for order_id in accepted {
        if !seen.resv.contains_key(order_id) {
            broken.push(format!("accepted order {order_id} has no reservation"));
        }
    }
    let sent: HashSet<&str> = sent.iter().map(String::as_str).collect();
    let unsent = seen
        .resv
        .keys()
        .filter(|id| !sent.contains(id.as_str()))
        .count();
    if unsent != 0 || sent.len() != seen.resv.len() {
        broken.push(format!(
            "{} distinct order messages sent for {} reservations ({unsent} reservations unsent)",
            sent.len(),
            seen.resv.len()
        ));
    }
    match mode {
        Mode::Window(_) if !seen.draw_done => broken.push("the draw is not done".into()),
        Mode::Fcfs if !seen.tickets.is_empty() => {
            broken.push(format!("{} tickets without a window", seen.tickets.len()));
        }
        _ => {}
    }
    if !answers.other.is_empty() {
        broken.push(format!(
            "{} buyer(s) without a final answer, first: {}",
            answers.other.len(),
            answers
                .other
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    broken
}

#[cfg(test)]
mod tests {
    use super::*;
    use seckill_shared::adapters::memory::test_sale;

    /// A drawn sale of 2 units: `p1` and `s1` won, `p2` lost.
    fn drawn() -> (Sale, Seen, HashSet<String>, Vec<String>) {
        let sale = test_sale("fair-check", 2, 1).unwrap();
        let held = |user: &str| Held {
            user: user.into(),
            quantity: 1,
        };
        let ticket = |r: &str, o: Option<&str>| TicketSeen {
            result: Some(r.into()),
            order_id: o.map(str::to_owned),
        };
        let seen = Seen {
            stock: Some(0),
            resv: HashMap::from([("o1".into(), held("p1")), ("o2".into(), held("s1"))]),
            buyers: HashMap::from([("p1".into(), 1), ("s1".into(), 1)]),
            tickets: HashMap::from([
                ("p1".into(), ticket("WON", Some("o1"))),
                ("s1".into(), ticket("WON", Some("o2"))),
                ("p2".into(), ticket("LOST", None)),
            ]),
            draw_done: true,
            sold_out_at_ms: Some(1),
        };
        (sale, seen, HashSet::new(), vec!["o1".into(), "o2".into()])
    }

    #[test]
    fn a_clean_draw_breaks_nothing_and_each_defect_is_named() {
        let (sale, seen, accepted, sent) = drawn();
        let answers = Answers::default();
        let mode = Mode::Window(3);
        assert_eq!(
            check(&sale, mode, &seen, &accepted, &sent, &answers),
            Vec::<String>::new()
        );

        let broken = |seen: &Seen, accepted: &HashSet<String>, sent: &[String]| {
            check(&sale, mode, seen, accepted, sent, &answers).join("; ")
        };
        // A unit left, and a reservation of nobody's WON ticket.
        let mut extra = seen.clone();
        extra.stock = Some(1);
        extra.resv.insert("o3".into(), extra.resv["o1"].clone());
        let said = broken(&extra, &accepted, &sent);
        assert!(said.contains("stock left Some(1)"), "{said}");
        assert!(said.contains("3 units reserved"), "{said}");
        assert!(said.contains("o3 is neither"), "{said}");
        assert!(said.contains("counts are not their reservations"), "{said}");
        // ... unless a buyer was told of it as a purchase.
        let told = HashSet::from(["o3".to_owned()]);
        assert!(!broken(&extra, &told, &sent).contains("o3 is neither"));

        // A buyer over the limit, a WON ticket without its reservation, an
        // undecided ticket, an unsent message, a draw not done.
        let mut bad = seen.clone();
        bad.buyers.insert("p1".into(), 2);
        bad.resv.remove("o2");
        bad.tickets.insert("p3".into(), TicketSeen::default());
        bad.draw_done = false;
        let said = broken(&bad, &accepted, &sent[..1]);
        for expected in [
            "over the limit of 1",
            "s1's WON ticket has no reservation o2",
            "p3's ticket is undecided",
            "the draw is not done",
        ] {
            assert!(said.contains(expected), "{expected}: {said}");
        }
        let said = broken(&seen, &accepted, &sent[..1]);
        assert!(said.contains("1 reservations unsent"), "{said}");

        // Without a window, a ticket is itself a defect.
        let fcfs = check(&sale, Mode::Fcfs, &seen, &accepted, &sent, &answers).join("; ");
        assert!(fcfs.contains("3 tickets without a window"), "{fcfs}");
    }
}
