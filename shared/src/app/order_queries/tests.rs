use super::*;
use crate::adapters::memory::{MemoryCatalog, MemoryStock, test_sale};
use crate::domain::Quantity;
use crate::ports::{ReserveOutcome, ReserveRequest};

// A buyer's order of a sale created after the open sales were last
// listed was a 404 while `QUEUED` (until the 5 s list expired): the
// buyer page, which looks 2 s after the `202`, told the buyer it could
// not find the order (seen in CI's browser test, scenario g).
#[tokio::test]
async fn a_queued_order_of_a_sale_made_after_the_last_list_is_found() {
    let catalog = MemoryCatalog::default();
    let stock = MemoryStock::default();
    let queries = OrderQueries::new(
        catalog.orders(),
        stock.clone(),
        catalog.clone(),
        Duration::from_secs(5),
    );
    let buyer = UserId::parse("u1").unwrap();
    // A lookup lists the open sales: none yet.
    let unknown = OrderId::parse("kffffffffffffffffffffffffffffffff").unwrap();
    assert!(matches!(
        queries.order(&unknown, &buyer).await,
        Err(QueryError::NotFound)
    ));

    let sale = test_sale("s1", 10, 2).unwrap();
    catalog.insert(sale.clone());
    stock.load(sale.clone());
    let ReserveOutcome::Reserved(r) = stock
        .reserve(ReserveRequest {
            sale_id: &sale.sale_id,
            user_id: &buyer,
            quantity: Quantity::new(1).unwrap(),
            idempotency_key: None,
            gate_nonce: None,
            gate_issued_ms: None,
            source_ip: None,
        })
        .await
        .unwrap()
    else {
        panic!("not reserved");
    };

    // Polled as the page does, within the list's 5 s.
    let deadline = Instant::now() + Duration::from_secs(3);
    let found = loop {
        match queries.order(&r.order_id, &buyer).await {
            Ok(order) => break Some(order),
            Err(QueryError::NotFound) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => break None,
        }
    };
    let found = found.expect("the buyer's QUEUED order was not found");
    assert_eq!(found.order_id, r.order_id);
    // Someone else still gets the 404.
    let other = UserId::parse("u2").unwrap();
    assert!(matches!(
        queries.order(&r.order_id, &other).await,
        Err(QueryError::NotFound)
    ));
}
