//! [`CatalogAdmin`] and [`OrderLedger`] on DynamoDB: each method hands
//! over to the `DynamoCatalog` / `DynamoOrders` method of the same name, so
//! the operations path can be written against the ports.

use super::catalog::DynamoCatalog;
use super::orders::DynamoOrders;
use crate::domain::ledger::SaleCounters;
use crate::domain::orders::{Order, OrderStatus};
use crate::domain::{OrderId, Sale, SaleId, UserId};
use crate::ports::{CatalogAdmin, CatalogError, OrderLedger, OrderStoreError, SaleEditor, Upsert};
use std::collections::HashMap;
use std::future::Future;

impl CatalogAdmin for DynamoCatalog {
    fn get_record(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<(Sale, SaleCounters)>, CatalogError>> + Send {
        DynamoCatalog::get_record(self, sale_id)
    }

    fn mark_loaded(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
    ) -> impl Future<Output = Result<bool, CatalogError>> + Send {
        DynamoCatalog::mark_loaded(self, sale_id, now_ms)
    }

    fn store_report(
        &self,
        sale_id: &SaleId,
        json: &str,
    ) -> impl Future<Output = Result<(), CatalogError>> + Send {
        DynamoCatalog::store_report(self, sale_id.as_str(), json)
    }

    fn sale_with_report(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Option<(Sale, Option<String>)>, CatalogError>> + Send {
        DynamoCatalog::sale_with_report(self, sale_id)
    }
}

impl SaleEditor for DynamoCatalog {
    fn list_records(
        &self,
    ) -> impl Future<Output = Result<Vec<(Sale, SaleCounters)>, CatalogError>> + Send {
        DynamoCatalog::list_records(self)
    }

    fn upsert_sale(
        &self,
        sale: &Sale,
        now_ms: i64,
    ) -> impl Future<Output = Result<(Upsert, Option<Sale>), CatalogError>> + Send {
        DynamoCatalog::upsert_sale(self, sale, now_ms)
    }
}

impl OrderLedger for DynamoOrders {
    fn all_orders_of_sale(
        &self,
        sale_id: &SaleId,
    ) -> impl Future<Output = Result<Vec<Order>, OrderStoreError>> + Send {
        DynamoOrders::all_orders_of_sale(self, sale_id)
    }

    fn send_orders_of_sale(
        &self,
        sale_id: &SaleId,
        pages: tokio::sync::mpsc::Sender<Vec<Order>>,
    ) -> impl Future<Output = Result<(), OrderStoreError>> + Send {
        DynamoOrders::send_orders_of_sale(self, sale_id, pages)
    }

    fn count_of_sale(
        &self,
        sale_id: &SaleId,
        status: OrderStatus,
    ) -> impl Future<Output = Result<u64, OrderStoreError>> + Send {
        DynamoOrders::count_of_sale(self, sale_id, status)
    }

    fn due_unpaid(
        &self,
        sale_id: &SaleId,
        now_ms: i64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<OrderId>, OrderStoreError>> + Send {
        // The SDK's page size is an i32; a chunk is a few dozen orders.
        DynamoOrders::due_unpaid(
            self,
            sale_id,
            now_ms,
            i32::try_from(limit).unwrap_or(i32::MAX),
        )
    }

    fn held_by_all(
        &self,
        sale_id: &SaleId,
        users: &[&UserId],
    ) -> impl Future<Output = Result<HashMap<String, u64>, OrderStoreError>> + Send {
        DynamoOrders::held_by_all(self, sale_id, users)
    }
}
