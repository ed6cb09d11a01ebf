//! The memory waitlist against the DynamoDB adapter's rules: an entry put
//! once and resolved once, the line in key order, and the handover's
//! conditions (a head passed over, units beyond the line to the stock, an
//! order handed over once); then a release through the app, Redis's side
//! included.

use crate::app::fixture::Stores;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::stock_state::Returned;
use crate::domain::waitlist::{EntryStatus, offer_order_id};
use crate::domain::{OrderId, SaleId, UserId};
use crate::ports::{
    Candidate, ExpireOutcome, Handover, Joined, OfferTerms, OrderLedger, OrderStore, WaitlistEntry,
    WaitlistStock, WaitlistStore,
};

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn terms(stores: &Stores) -> OfferTerms {
    OfferTerms::of(&stores.sale)
}

fn candidate(sale: &SaleId, entry: WaitlistEntry) -> Candidate {
    let offer_id = offer_order_id(sale.as_str(), entry.user_id.as_str(), "").unwrap();
    Candidate { entry, offer_id }
}

impl Stores {
    async fn join(&self, who: &str, key: &str) -> WaitlistEntry {
        match self
            .orders
            .join(self.sale_id(), &user(who), key, 1_000)
            .await
            .unwrap()
        {
            Joined::New(entry) => entry,
            Joined::Existing(entry) => panic!("{who} was in the line already: {entry:?}"),
        }
    }

    /// A purchase of `units` by `who`, written: its row as the ledger has it.
    async fn bought(&self, who: &str, units: u64) -> Order {
        let r = self.reserve(who, units).await;
        self.write(who, &r, crate::clock::now_ms()).await;
        self.orders.get(&r.order_id).await.unwrap().unwrap()
    }

    /// The line's heads, as the release reads them.
    async fn candidates(&self) -> Vec<Candidate> {
        let heads = self.orders.heads(self.sale_id(), 32).await.unwrap();
        heads
            .into_iter()
            .map(|e| candidate(self.sale_id(), e))
            .collect()
    }

    async fn hand_over(&self, order: &Order) -> Handover {
        let due = order.expires_at_ms.unwrap();
        let heads = self.candidates().await;
        self.orders
            .expire_to_line(order, &heads, &terms(self), due)
            .await
            .unwrap()
    }

    async fn entry(&self, who: &str) -> EntryStatus {
        let entry = self.orders.entry(self.sale_id(), &user(who)).await.unwrap();
        entry.unwrap().status
    }

    async fn held(&self, who: &str) -> u64 {
        let u = user(who);
        self.orders
            .held_by_all(self.sale_id(), &[&u])
            .await
            .unwrap()[who]
    }
}

#[tokio::test]
async fn a_join_is_put_once_and_a_second_keeps_the_first_place() {
    let s = Stores::new(2, 1);
    let first = s.join("ann", "j1").await;
    let again = s
        .orders
        .join(s.sale_id(), &user("ann"), "j9", 9_000)
        .await
        .unwrap();
    assert_eq!(again, Joined::Existing(first.clone()));
    // The same join sent again (its answer lost) is the same new entry.
    let resent = s
        .orders
        .join(s.sale_id(), &user("ann"), "j1", 1_000)
        .await
        .unwrap();
    assert_eq!(resent, Joined::New(first.clone()));
    assert_eq!(
        s.orders.entry(s.sale_id(), &user("ann")).await.unwrap(),
        Some(first)
    );
}

#[tokio::test]
async fn a_leave_resolves_a_waiting_entry_once() {
    let s = Stores::new(2, 1);
    s.join("ann", "j1").await;
    s.join("bob", "j2").await;
    let left = s.orders.leave(s.sale_id(), &user("ann"), 5).await.unwrap();
    assert_eq!(left.map(|e| e.status), Some(EntryStatus::Left));
    let heads = s.orders.heads(s.sale_id(), 5).await.unwrap();
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].user_id, user("bob"));
    // Leaving again, or joining again, changes nothing.
    let again = s.orders.leave(s.sale_id(), &user("ann"), 6).await.unwrap();
    assert_eq!(again.map(|e| e.status), Some(EntryStatus::Left));
    let rejoined = s
        .orders
        .join(s.sale_id(), &user("ann"), "j3", 7)
        .await
        .unwrap();
    assert!(matches!(rejoined, Joined::Existing(e) if e.status == EntryStatus::Left));
    assert_eq!(
        s.orders.leave(s.sale_id(), &user("cat"), 8).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn the_heads_are_the_waiting_entries_in_key_order() {
    let s = Stores::new(2, 1);
    let cat = s.join("cat", "j3").await;
    s.join("ann", "j1").await;
    s.join("bob", "j2").await;
    let heads = s.orders.heads(s.sale_id(), 2).await.unwrap();
    let names: Vec<&str> = heads.iter().map(|e| e.user_id.as_str()).collect();
    assert_eq!(names, ["ann", "bob"]);
    assert_eq!(s.orders.ahead(&cat).await.unwrap(), 2);
    s.orders.leave(s.sale_id(), &user("ann"), 5).await.unwrap();
    assert_eq!(s.orders.ahead(&cat).await.unwrap(), 1);
}

#[tokio::test]
async fn a_head_at_its_limit_is_passed_over_and_keeps_its_place() {
    let s = Stores::new(2, 1);
    s.load().await;
    let ann = s.bought("ann", 1).await;
    s.bought("bob", 1).await;
    s.join("bob", "j1").await;
    s.join("cat", "j2").await;
    let Handover::Done {
        expired,
        offers,
        to_stock,
    } = s.hand_over(&ann).await
    else {
        panic!("not handed over");
    };
    assert_eq!(
        (expired.status, expired.offered, to_stock),
        (OrderStatus::Expired, 1, 0)
    );
    assert_eq!(expired.return_seq, Some(1));
    assert_eq!(offers.len(), 1);
    let offer = &offers[0];
    assert_eq!(offer.user_id, user("cat"));
    assert_eq!(offer.offer_of, Some(ann.order_id.clone()));
    assert_eq!(offer.status, OrderStatus::PendingPayment);
    assert_eq!(
        s.orders.get(&offer.order_id).await.unwrap().as_ref(),
        Some(offer)
    );
    assert_eq!(
        s.entry("cat").await,
        EntryStatus::Offered(offer.order_id.clone())
    );
    assert_eq!(
        s.entry("bob").await,
        EntryStatus::Waiting,
        "passed over, still waiting"
    );
    assert_eq!((s.held("ann").await, s.held("cat").await), (0, 1));
    // The unit went from one buyer to another: nothing back on sale.
    let c = s.counters().await;
    assert_eq!((c.available, c.sold, c.return_seq), (0, 2, 1));
}

#[tokio::test]
async fn units_beyond_the_line_go_back_to_the_stock() {
    let s = Stores::new(3, 3);
    s.load().await;
    let ann = s.bought("ann", 3).await;
    s.join("bob", "j1").await;
    let Handover::Done {
        expired,
        offers,
        to_stock,
    } = s.hand_over(&ann).await
    else {
        panic!("not handed over");
    };
    assert_eq!((expired.offered, offers.len(), to_stock), (1, 1, 2));
    let c = s.counters().await;
    assert_eq!((c.available, c.sold), (2, 1));
}

#[tokio::test]
async fn an_order_is_handed_over_once_and_only_when_due() {
    let s = Stores::new(2, 2);
    s.load().await;
    let ann = s.bought("ann", 1).await;
    s.join("ann", "j0").await;
    s.join("bob", "j1").await;
    s.join("cat", "j2").await;
    let early = s
        .orders
        .expire_to_line(&ann, &s.candidates().await, &terms(&s), ann.created_at_ms)
        .await
        .unwrap();
    assert_eq!(early, Handover::Not(ExpireOutcome::NotExpirable));
    let Handover::Done { offers, .. } = s.hand_over(&ann).await else {
        panic!("not handed over");
    };
    // Not to its own buyer, who waits too: to the next in line.
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].user_id, user("bob"));
    // The same order as read before, handed over again: its condition fails.
    assert_eq!(
        s.hand_over(&ann).await,
        Handover::Not(ExpireOutcome::NotExpirable)
    );
    let offered = s
        .orders
        .all_orders_of_sale(s.sale_id())
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.offer_of.is_some())
        .count();
    assert_eq!(offered, 1);
    let stats = s.orders.stats(s.sale_id()).await.unwrap();
    assert_eq!((stats.waiting, stats.offered, stats.returned), (2, 1, 1));
}

#[tokio::test]
async fn a_release_with_a_line_offers_the_unit_and_redis_follows() {
    let s = Stores::new(1, 1);
    s.load().await;
    let ann = s.bought("ann", 1).await;
    let admitted = s
        .stock
        .admit_waitlist(crate::ports::WaitlistJoin {
            sale_id: s.sale_id(),
            user_id: &user("bob"),
            gate_nonce: None,
            gate_issued_ms: None,
            source_ip: None,
        })
        .await
        .unwrap();
    assert!(matches!(
        admitted,
        crate::ports::WaitlistAdmission::Admitted { .. }
    ));
    s.join("bob", "j1").await;
    let due = ann.expires_at_ms.unwrap();
    let released =
        crate::app::release::release(&s.orders, &s.stock, Some(&s.sale), &ann.order_id, due)
            .await
            .unwrap();
    let crate::app::release::Released::Now { offers, .. } = released else {
        panic!("not released: {released:?}");
    };
    let offer_id: OrderId = offers[0].order_id.clone();
    let snap = s.snapshot().await;
    assert_eq!(snap.stock, 0, "the unit is bob's, not back on sale");
    assert_eq!(snap.buyers.get("ann"), None);
    assert_eq!(snap.buyers.get("bob"), Some(&1));
    // Counted once, whoever runs it again.
    let again = s
        .stock
        .hold_offer(s.sale_id(), &offer_id, &user("bob"), due, 1)
        .await
        .unwrap();
    assert_eq!(again, Returned::Already);
    assert_eq!(s.snapshot().await.buyers.get("bob"), Some(&1));
}

#[tokio::test]
async fn a_join_is_admitted_only_when_nothing_is_on_sale_and_below_the_limit() {
    let s = Stores::new(1, 1);
    s.load().await;
    let admit = |who: &'static str| {
        let u = user(who);
        let stock = s.stock.clone();
        let sale_id = s.sale_id().clone();
        async move {
            stock
                .admit_waitlist(crate::ports::WaitlistJoin {
                    sale_id: &sale_id,
                    user_id: &u,
                    gate_nonce: None,
                    gate_issued_ms: None,
                    source_ip: None,
                })
                .await
                .unwrap()
        }
    };
    assert_eq!(
        admit("bob").await,
        crate::ports::WaitlistAdmission::Available { remaining: 1 }
    );
    let ann = s.bought("ann", 1).await;
    assert!(matches!(
        admit("ann").await,
        crate::ports::WaitlistAdmission::LimitExceeded { order_ids } if order_ids == [ann.order_id]
    ));
    s.stock.pause(s.sale_id());
    assert_eq!(admit("bob").await, crate::ports::WaitlistAdmission::Paused);
}

#[tokio::test]
async fn a_given_up_reservation_offers_its_units_from_available_once() {
    let s = Stores::new(2, 1);
    s.load().await;
    let r = s.reserve("ann", 1).await;
    let order = s.order_of("ann", &r, crate::clock::now_ms());
    let heads = s.candidates().await;
    let nobody = s
        .orders
        .abandon_to_line(&order, &heads, &terms(&s), 5)
        .await
        .unwrap();
    assert_eq!(nobody, crate::ports::GiveUp::Nobody, "nobody waits");
    s.join("ann", "j0").await;
    s.join("bob", "j1").await;
    let heads = s.candidates().await;
    let crate::ports::GiveUp::Offered { rejected, offers } = s
        .orders
        .abandon_to_line(&order, &heads, &terms(&s), 5)
        .await
        .unwrap()
    else {
        panic!("not offered");
    };
    assert_eq!(rejected.status, OrderStatus::Rejected);
    assert_eq!((rejected.offered, rejected.return_seq), (1, Some(1)));
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0].user_id, user("bob"));
    let c = s.counters().await;
    assert_eq!(
        (c.available, c.sold),
        (1, 1),
        "the unit came out of available"
    );
    let again = s
        .orders
        .abandon_to_line(&order, &heads, &terms(&s), 6)
        .await
        .unwrap();
    assert_eq!(again, crate::ports::GiveUp::Exists(rejected));
}
