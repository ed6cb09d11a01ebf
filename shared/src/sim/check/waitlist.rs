//! The waitlist's promises after a run, from the ledger's rows and entries
//! and every version each entry had: an entry keeps its place and resolves
//! once; a buyer is offered at most once; every unit an expiry (or a
//! give-up) handed to the line is one offer, no more, no less; an offer goes to an entry
//! marked offered it, and an entry marked offered has its order.

use super::super::world::World;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::waitlist::EntryStatus;
use std::collections::BTreeMap;

pub(super) fn violations(w: &World, rows: &BTreeMap<String, Order>) -> Vec<String> {
    let mut found = Vec::new();
    let history = w.orders.entry_history();
    for (user, versions) in &history {
        let Some((_, first)) = versions.first() else {
            continue;
        };
        let mut resolved: Option<&EntryStatus> = None;
        for (at, entry) in versions {
            if entry.line_key != first.line_key || entry.joined_at_ms != first.joined_at_ms {
                found.push(format!(
                    "ENTRY_MOVED: {user}'s entry changed its place at +{} ms",
                    at - super::super::world::EPOCH_MS
                ));
            }
            match resolved {
                Some(was) if *was != entry.status => found.push(format!(
                    "RESOLVED_TWICE: {user}'s entry was {} and became {} at +{} ms",
                    was.as_str(),
                    entry.status.as_str(),
                    at - super::super::world::EPOCH_MS
                )),
                Some(_) => {}
                None if entry.status != EntryStatus::Waiting => resolved = Some(&entry.status),
                None => {}
            }
        }
    }

    let offers: Vec<&Order> = rows.values().filter(|o| o.offer_of.is_some()).collect();
    let mut per_user: BTreeMap<&str, u32> = BTreeMap::new();
    let mut per_order: BTreeMap<&str, u32> = BTreeMap::new();
    for offer in &offers {
        *per_user.entry(offer.user_id.as_str()).or_default() += 1;
        if let Some(of) = &offer.offer_of {
            *per_order.entry(of.as_str()).or_default() += 1;
        }
        if offer.quantity.get() != 1 {
            found.push(format!(
                "OFFER_SIZE: {} offers {} units",
                offer.order_id,
                offer.quantity.get()
            ));
        }
    }
    for (user, n) in &per_user {
        if *n > 1 {
            found.push(format!("OFFERED_TWICE: {user} has {n} offer orders"));
        }
    }
    // The units an expired order (or a given-up reservation, `REJECTED`)
    // handed to the line are its offers; nothing else has any.
    for o in rows.values() {
        let named = per_order.get(o.order_id.as_str()).copied().unwrap_or(0);
        let handed = match o.status {
            OrderStatus::Expired | OrderStatus::Rejected => o.offered,
            _ => 0,
        };
        if named != handed || o.offered > o.quantity.get() {
            found.push(format!(
                "OFFER_COUNT: {} ({}, {} units) handed {} to the line, {named} offers name it",
                o.order_id,
                o.status.as_str(),
                o.quantity.get(),
                o.offered
            ));
        }
    }
    for of in per_order.keys() {
        if !rows.contains_key(*of) {
            found.push(format!(
                "OFFER_OF_NOTHING: offers name {of}, which has no row"
            ));
        }
    }

    let entries = w.memory_catalog.orders().entries_of(&w.sale.sale_id);
    let by_user: BTreeMap<&str, &EntryStatus> = entries
        .iter()
        .map(|e| (e.user_id.as_str(), &e.status))
        .collect();
    for offer in &offers {
        let expected = EntryStatus::Offered(offer.order_id.clone());
        if by_user.get(offer.user_id.as_str()) != Some(&&expected) {
            found.push(format!(
                "OFFER_WITHOUT_ENTRY: {} went to {}, whose entry is {:?}",
                offer.order_id,
                offer.user_id,
                by_user.get(offer.user_id.as_str()).map(|s| s.as_str())
            ));
        }
    }
    for entry in &entries {
        if let EntryStatus::Offered(id) = &entry.status {
            let ok = rows
                .get(id.as_str())
                .is_some_and(|o| o.offer_of.is_some() && o.user_id == entry.user_id);
            if !ok {
                found.push(format!(
                    "OFFER_ROW_MISSING: {}'s entry is OFFERED {id}, which is no offer of theirs",
                    entry.user_id
                ));
            }
        }
    }
    found
}

/// The run's offers by what became of them, for the counts of the outcome.
pub(crate) fn offer_counts(rows: &BTreeMap<String, Order>) -> [(&'static str, u64); 3] {
    let mut made = 0;
    let mut paid = 0;
    let mut lapsed = 0;
    for o in rows.values().filter(|o| o.offer_of.is_some()) {
        made += 1;
        match o.status {
            OrderStatus::Paid => paid += 1,
            OrderStatus::Expired => lapsed += 1,
            _ => {}
        }
    }
    [
        ("waitlist: offers made", made),
        ("waitlist: offers paid", paid),
        ("waitlist: offers lapsed", lapsed),
    ]
}
