//! The slices of a read: whole buyers per slice, every field of a row back
//! from a file, the last read attempt of a group standing.

use super::*;

fn order(id: &str, user: &str) -> Order {
    Order {
        order_id: OrderId::parse(id).unwrap(),
        sale_id: SaleId::parse("s1").unwrap(),
        user_id: UserId::parse(user).unwrap(),
        quantity: Quantity::new(2).unwrap(),
        status: OrderStatus::Rejected,
        created_at_ms: 11,
        expires_at_ms: Some(22),
        reject_reason: Some(RejectReason::OverLimit),
        return_seq: Some(7),
        amount: Some(Money {
            amount: 1999,
            currency: Currency::parse("EUR").unwrap(),
        }),
        paid_at_ms: Some(33),
        payment_id: Some(PaymentId::parse("pay-1").unwrap()),
        refunds: vec![PaymentId::parse("pay-2").unwrap()],
        offer_of: None,
        offered: 0,
    }
}

fn resv(user: &str, state: &str) -> StoredReservation {
    StoredReservation {
        user_id: user.into(),
        quantity: 1,
        at_ms: "5".into(),
        state: state.into(),
    }
}

fn sale() -> SaleId {
    SaleId::parse("s1").unwrap()
}

fn users(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("u{i}")).collect()
}

#[test]
fn every_buyer_is_whole_in_one_slice_and_every_entry_is_in_some_slice() {
    for slices in [1, 4] {
        let mut read = SaleSlices::new(&sale(), slices).unwrap();
        for (i, user) in users(40).iter().enumerate() {
            read.row(order(&format!("o{i}"), user));
            read.buyer(0, user.clone(), 2);
            read.reservation(0, format!("o{i}"), resv(user, "WRITTEN"));
        }
        read.finish().unwrap();
        let mut seen = 0;
        for k in 0..read.slices() {
            let slice = read.load(k).unwrap();
            for (id, row) in &slice.rows {
                assert_eq!(
                    slice.reservations[id].user_id,
                    row.user_id.as_str(),
                    "{id}'s reservation is in its row's slice"
                );
                assert_eq!(slice.buyers[row.user_id.as_str()], 2);
            }
            assert_eq!(slice.rows.len(), slice.buyers.len());
            assert_eq!(slice.rows.len(), slice.reservations.len());
            if slices > 1 {
                assert!(slice.rows.len() < 40, "slice {k} holds every buyer");
            }
            seen += slice.rows.len();
        }
        assert_eq!(seen, 40, "{slices} slices");
    }
}

#[test]
fn a_row_comes_back_from_a_file_with_every_field() {
    let mut read = SaleSlices::new(&sale(), 3).unwrap();
    let row = order("o1", "alice");
    read.row(row.clone());
    read.finish().unwrap();
    let k = slice_of("alice", 3);
    assert_eq!(read.load(k).unwrap().rows["o1"], row);
}

#[test]
fn a_group_read_again_keeps_only_its_last_attempt_and_a_buyer_sums_over_groups() {
    for slices in [1, 2] {
        let mut read = SaleSlices::new(&sale(), slices).unwrap();
        read.buyer(0, "alice".into(), 1);
        // A scan may hand an entry twice: the later stands.
        read.buyer(0, "alice".into(), 2);
        read.buyer(1, "alice".into(), 3);
        read.reservation(0, "gone".into(), resv("alice", "QUEUED"));
        read.reservation(1, "kept-1".into(), resv("alice", "QUEUED"));
        read.restart_reservations(0);
        read.reservation(0, "kept-0".into(), resv("alice", "WRITTEN"));
        read.finish().unwrap();
        let slice = read.load(slice_of("alice", slices)).unwrap();
        assert_eq!(slice.buyers["alice"], 5, "{slices} slices");
        let ids: Vec<&str> = slice.reservations.keys().map(String::as_str).collect();
        assert_eq!(ids, ["kept-0", "kept-1"], "{slices} slices");
    }
}

#[test]
fn the_files_go_with_the_read() {
    let read = SaleSlices::new(&sale(), 2).unwrap();
    let Store::Files { folder, .. } = &read.store else {
        panic!("two slices are kept in files");
    };
    let folder = folder.clone();
    assert!(folder.is_dir());
    drop(read);
    assert!(!folder.exists());
}

#[test]
fn a_slice_is_a_function_of_the_user_alone_and_spreads_users() {
    assert_eq!(slice_of("alice", 8), slice_of("alice", 8));
    assert_eq!(slice_of("alice", 1), 0);
    let mut counts = [0u32; 8];
    for user in users(8_000) {
        counts[slice_of(&user, 8) as usize] += 1;
    }
    assert!(
        counts.iter().all(|&c| (800..1_200).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn an_order_takes_at_most_bytes_per_order_on_disk_at_the_longest_ids() {
    let user = "u".repeat(64);
    let sale_id = SaleId::parse(&"s".repeat(64)).unwrap();
    let order_id = format!("n{}-s7", "f".repeat(31));
    let mut row = order(&order_id, &user);
    row.sale_id = sale_id.clone();
    row.payment_id = Some(PaymentId::parse(&"p".repeat(64)).unwrap());
    row.refunds.clear();
    let mut read = SaleSlices::new(&sale_id, 2).unwrap();
    read.row(row);
    read.buyer(0, user.clone(), 1000);
    let mut reservation = resv(&user, "WRITTEN");
    reservation.at_ms = i64::MAX.to_string();
    reservation.quantity = 1000;
    read.reservation(0, order_id, reservation);
    read.finish().unwrap();
    let Store::Files { folder, .. } = &read.store else {
        panic!("two slices are kept in files");
    };
    let bytes: u64 = (0..2)
        .map(|k| std::fs::metadata(folder.join(k.to_string())).unwrap().len())
        .sum();
    println!("an order at the longest ids: {bytes} B on disk");
    assert!(bytes <= BYTES_PER_ORDER, "{bytes} B");
    assert!(
        bytes * 2 > BYTES_PER_ORDER,
        "{bytes} B: the figure overstates"
    );
}
