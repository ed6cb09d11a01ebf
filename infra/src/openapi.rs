//! The HTTP API's OpenAPI 3.1 description, generated from the body types
//! of [`seckill_shared::http::bodies`]: every route `template.yaml`
//! declares (method, path, path parameters, security), its request body and
//! its answers by status code as `docs/api.md` states them.
//!
//! `seckill-local openapi` prints it, the local gateway serves it at
//! `GET /openapi.json`, and the suite holds it to the template
//! (`tests/openapi.rs`) and drives schemathesis with it (`make test`).

use seckill_shared::http::ADMIN_SCOPE;
use seckill_shared::http::bodies::admin::{
    AuditPageBody, DlqMessage, DlqView, DrawBody, OrderList, PrewarmBody, Redrive, RefundBody,
    Refunds, SaleChanged, SaleDefinitionView, SaleDetail, SaleList, SaleRecord, SellOutBody,
    WaitlistStats, WindowBody,
};
use seckill_shared::http::bodies::live::{FunnelBucket, LiveQueue, LiveStock, LiveView};
use seckill_shared::http::bodies::{
    AdmissionView, Challenge, ChallengeAnswer, ErrorBody, Health, MoneyBody, MyOrders, OddsBody,
    OrderView, PaymentAnswerBody, PaymentCallback, PurchaseAccepted, PurchaseRequest,
    PurchaseTicket, ReconcileReportBody, SaleDefinition, SalePass, SaleView, TicketView,
    WaitlistBody,
};
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, HeaderBuilder, InfoBuilder, OpenApi, OpenApiBuilder,
    PathsBuilder, Ref, RefOr, Required, Schema,
};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (`Authorizer: NONE`).
    Public,
    /// A valid token.
    Buyer,
    /// A valid token with the scope `seckill/admin`.
    Admin,
}

/// One route of the API as the description states it.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    pub access: Access,
    /// The request body's schema, if the route reads one.
    pub request: Option<&'static str>,
    /// Whether the body may be left out (the purchase's is optional).
    pub request_required: bool,
    /// The success statuses and the schema of their body.
    pub success: &'static [(u16, &'static str)],
    /// The error statuses (an `ErrorBody` each) beyond the access ones.
    pub errors: &'static [u16],
    /// Request headers the route reads.
    pub headers: &'static [&'static str],
}

const PURCHASE_ANSWER: &str = "PurchaseAnswer";
const ERROR: &str = "ErrorBody";

/// Every route of `template.yaml`, in its order.
pub const OPERATIONS: &[Operation] = &[
    op(
        "POST",
        "/sales/{saleId}/purchase",
        "Buy units of a sale",
        Access::Buyer,
    )
    .request("PurchaseRequest", false)
    .success(&[(202, PURCHASE_ANSWER)])
    .errors(&[400, 403, 404, 409, 410, 425, 429, 503])
    .headers(&["Idempotency-Key", "X-Sale-Token"]),
    op(
        "GET",
        "/sales/{saleId}/orders",
        "The caller's own orders of a sale and their ticket",
        Access::Buyer,
    )
    .success(&[(200, "MyOrders")])
    .errors(&[400, 404]),
    op(
        "POST",
        "/sales/{saleId}/waitlist",
        "Join a sold-out sale's waitlist (201 new, 200 the caller's entry as it is)",
        Access::Buyer,
    )
    .success(&[(201, "WaitlistBody"), (200, "WaitlistBody")])
    .errors(&[400, 403, 404, 409, 410, 425, 429, 503])
    .headers(&["X-Sale-Token"]),
    op(
        "DELETE",
        "/sales/{saleId}/waitlist",
        "Leave the waitlist (an offer already made stays the caller's)",
        Access::Buyer,
    )
    .success(&[(200, "WaitlistBody")])
    .errors(&[400, 404, 503]),
    op(
        "GET",
        "/sales/{saleId}/challenge",
        "The gate's question for a gated sale",
        Access::Buyer,
    )
    .success(&[(200, "Challenge")])
    .errors(&[400, 404, 410, 425]),
    op(
        "POST",
        "/sales/{saleId}/challenge",
        "Answer the gate's question for a pass",
        Access::Buyer,
    )
    .request("ChallengeAnswer", true)
    .success(&[(200, "SalePass")])
    .errors(&[400, 403, 404, 410, 425]),
    op(
        "GET",
        "/sales/{saleId}",
        "A sale's public view (Cache-Control: max-age >= 1 s)",
        Access::Public,
    )
    .success(&[(200, "SaleView")])
    .errors(&[400, 404]),
    op("GET", "/health", "Liveness", Access::Public).success(&[(200, "Health")]),
    op(
        "GET",
        "/orders/{orderId}",
        "The caller's order (404 for anyone else's)",
        Access::Buyer,
    )
    .success(&[(200, "OrderView")])
    .errors(&[400, 404]),
    op(
        "POST",
        "/orders/{orderId}/pay",
        "Pay an order (a stand-in for the provider)",
        Access::Buyer,
    )
    .success(&[(200, "OrderView")])
    .errors(&[400, 404, 409]),
    op(
        "POST",
        "/payments/callback",
        "The payment provider's callback (HMAC `Payment-Signature`)",
        Access::Public,
    )
    .request("PaymentCallback", true)
    .success(&[(200, "PaymentAnswerBody")])
    .errors(&[400, 401, 404])
    .headers(&["Payment-Signature"]),
    op(
        "PUT",
        "/admin/sales/{saleId}",
        "Create or update a sale",
        Access::Admin,
    )
    .request("SaleDefinition", true)
    .success(&[(200, "SaleChanged"), (201, "SaleChanged")])
    .errors(&[400, 409, 410]),
    op(
        "POST",
        "/admin/sales/{saleId}/prewarm",
        "Load a sale into Redis now",
        Access::Admin,
    )
    .success(&[(200, "PrewarmBody")])
    .errors(&[400, 404]),
    op(
        "POST",
        "/admin/sales/{saleId}/reconcile",
        "Reconcile a sale now and report",
        Access::Admin,
    )
    .success(&[(200, "ReconcileReportBody")])
    .errors(&[400, 404]),
    op(
        "POST",
        "/admin/sales/{saleId}/pause",
        "Pause a sale (durable)",
        Access::Admin,
    )
    .success(&[(200, "SaleChanged")])
    .errors(&[400, 404, 410]),
    op(
        "POST",
        "/admin/sales/{saleId}/resume",
        "Resume a paused sale",
        Access::Admin,
    )
    .success(&[(200, "SaleChanged")])
    .errors(&[400, 404, 410]),
    op(
        "GET",
        "/admin/sales/{saleId}/audit",
        "A sale's audit trail",
        Access::Admin,
    )
    .success(&[(200, "AuditPageBody")])
    .errors(&[400, 404]),
    op(
        "GET",
        "/admin/sales/{saleId}/refunds",
        "Payments that need a refund",
        Access::Admin,
    )
    .success(&[(200, "Refunds")])
    .errors(&[400, 404]),
    op(
        "GET",
        "/admin/sales/{saleId}/report",
        "A sale's report",
        Access::Admin,
    )
    .success(&[(200, "ReconcileReportBody")])
    .errors(&[400, 404]),
    op(
        "GET",
        "/admin/sales/{saleId}/live",
        "A sale's live figures",
        Access::Admin,
    )
    .success(&[(200, "LiveView")])
    .errors(&[400, 404]),
    op(
        "GET",
        "/admin/sales/{saleId}/waitlist",
        "A sale's waitlist in figures",
        Access::Admin,
    )
    .success(&[(200, "WaitlistStats")])
    .errors(&[400, 404, 503]),
    op("GET", "/admin/sales", "Every sale", Access::Admin).success(&[(200, "SaleList")]),
    op(
        "GET",
        "/admin/sales/{saleId}",
        "A sale with its figures",
        Access::Admin,
    )
    .success(&[(200, "SaleDetail")])
    .errors(&[400, 404]),
    op(
        "POST",
        "/admin/sales/{saleId}/end",
        "End a sale now",
        Access::Admin,
    )
    .success(&[(200, "SaleChanged")])
    .errors(&[400, 404, 410]),
    op("GET", "/admin/orders/{orderId}", "Any order", Access::Admin)
        .success(&[(200, "OrderView")])
        .errors(&[400, 404]),
    op(
        "GET",
        "/admin/sales/{saleId}/orders",
        "A sale's orders",
        Access::Admin,
    )
    .success(&[(200, "OrderList")])
    .errors(&[400, 404]),
    op(
        "GET",
        "/admin/dlq",
        "The orders queue's dead letters",
        Access::Admin,
    )
    .success(&[(200, "DlqView")]),
    op(
        "POST",
        "/admin/dlq/redrive",
        "Move dead letters back to the queue",
        Access::Admin,
    )
    .success(&[(200, "Redrive")])
    .errors(&[400]),
];

const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    access: Access,
) -> Operation {
    Operation {
        method,
        path,
        summary,
        access,
        request: None,
        request_required: false,
        success: &[],
        errors: &[],
        headers: &[],
    }
}

impl Operation {
    const fn request(self, schema: &'static str, required: bool) -> Self {
        Self {
            request: Some(schema),
            request_required: required,
            ..self
        }
    }
    const fn success(self, success: &'static [(u16, &'static str)]) -> Self {
        Self { success, ..self }
    }
    const fn errors(self, errors: &'static [u16]) -> Self {
        Self { errors, ..self }
    }
    const fn headers(self, headers: &'static [&'static str]) -> Self {
        Self { headers, ..self }
    }

    /// `METHOD /path`, as the template's route keys read.
    pub fn route_key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Every error status the route may answer: its own, the gateway's
    /// (`401` without a valid token, `403` for a buyer on `/admin`, `413`
    /// for a body too large, `429` when throttled) and `400` for ids that
    /// are not ids.
    pub fn error_statuses(&self) -> Vec<u16> {
        let mut all: Vec<u16> = self.errors.to_vec();
        if self.access != Access::Public {
            all.push(401);
        }
        if self.access == Access::Admin {
            all.push(403);
        }
        all.extend([413, 429]);
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// The security scheme's name in the description.
pub const BEARER: &str = "jwt";

/// The description, as `seckill-local openapi` prints it.
pub fn document() -> OpenApi {
    let mut paths = PathsBuilder::new();
    for operation in OPERATIONS {
        paths = paths.path(
            operation.path,
            PathItem::new(method(operation.method), build(operation)),
        );
    }
    let purchase_answer = OneOfBuilder::new()
        .item(Ref::from_schema_name("PurchaseAccepted"))
        .item(Ref::from_schema_name("PurchaseTicket"));
    let components = ComponentsBuilder::new()
        .schema_from::<ErrorBody>()
        .schema_from::<Health>()
        .schema_from::<PurchaseRequest>()
        .schema_from::<PurchaseAccepted>()
        .schema_from::<PurchaseTicket>()
        .schema(PURCHASE_ANSWER, purchase_answer)
        .schema_from::<SaleView>()
        .schema_from::<MoneyBody>()
        .schema_from::<AdmissionView>()
        .schema_from::<TicketView>()
        .schema_from::<OrderView>()
        .schema_from::<MyOrders>()
        .schema_from::<OddsBody>()
        .schema_from::<WaitlistBody>()
        .schema_from::<Challenge>()
        .schema_from::<ChallengeAnswer>()
        .schema_from::<SalePass>()
        .schema_from::<PaymentCallback>()
        .schema_from::<PaymentAnswerBody>()
        .schema_from::<SaleDefinition>()
        .schema_from::<ReconcileReportBody>()
        .schema_from::<WindowBody>()
        .schema_from::<SaleDefinitionView>()
        .schema_from::<SaleRecord>()
        .schema_from::<PrewarmBody>()
        .schema_from::<SaleChanged>()
        .schema_from::<DrawBody>()
        .schema_from::<SellOutBody>()
        .schema_from::<SaleDetail>()
        .schema_from::<SaleList>()
        .schema_from::<AuditPageBody>()
        .schema_from::<RefundBody>()
        .schema_from::<Refunds>()
        .schema_from::<OrderList>()
        .schema_from::<DlqMessage>()
        .schema_from::<DlqView>()
        .schema_from::<Redrive>()
        .schema_from::<LiveStock>()
        .schema_from::<LiveQueue>()
        .schema_from::<FunnelBucket>()
        .schema_from::<LiveView>()
        .schema_from::<WaitlistStats>()
        .security_scheme(
            BEARER,
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(format!(
                        "API Gateway's JWT authorizer: the caller is the token's `sub`; \
                         `/admin` routes need the scope `{ADMIN_SCOPE}` (claim `scope`, space separated)"
                    )))
                    .build(),
            ),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Seckill")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "A flash-sale backend. Errors are `{\"code\",\"message\"}` (ErrorBody); \
                     times are RFC 3339 in UTC.",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components))
        .security(Some([SecurityRequirement::new(
            BEARER,
            Vec::<String>::new(),
        )]))
        .build()
}

/// The description as pretty JSON text.
pub fn document_json() -> String {
    document()
        .to_pretty_json()
        .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
}

fn method(name: &str) -> HttpMethod {
    match name {
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "DELETE" => HttpMethod::Delete,
        "PATCH" => HttpMethod::Patch,
        _ => HttpMethod::Get,
    }
}

fn schema_ref(name: &str) -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(name))
}

fn json_content(name: &str) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(schema_ref(name))).build()
}

fn build(operation: &Operation) -> utoipa::openapi::path::Operation {
    let mut builder = OperationBuilder::new()
        .summary(Some(operation.summary))
        .operation_id(Some(operation_id(operation)));
    for segment in operation.path.split('/') {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            builder = builder.parameter(
                ParameterBuilder::new()
                    .name(name)
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .schema(Some(id_schema()))
                    // The local stack's demo sale (`SECKILL_DEMO_SALE`'s
                    // default): schemathesis' examples phase buys from it.
                    .example((name == "saleId").then(|| serde_json::json!("demo"))),
            );
        }
    }
    for header in operation.headers {
        builder = builder.parameter(
            ParameterBuilder::new()
                .name(*header)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .schema(Some(ObjectBuilder::new().schema_type(Type::String))),
        );
    }
    if let Some(request) = operation.request {
        builder = builder.request_body(Some(
            RequestBodyBuilder::new()
                .content("application/json", json_content(request))
                .required(Some(if operation.request_required {
                    Required::True
                } else {
                    Required::False
                }))
                .build(),
        ));
    }
    for (status, schema) in operation.success {
        let mut response = ResponseBuilder::new()
            .description(success_text(*status))
            .content("application/json", json_content(schema));
        if *status == 202 {
            response = response.header(
                "Location",
                HeaderBuilder::new()
                    .schema(ObjectBuilder::new().schema_type(Type::String))
                    .description(Some("`/orders/{orderId}` (an order, not a ticket)"))
                    .build(),
            );
        }
        builder = builder.response(status.to_string(), response.build());
    }
    for status in operation.error_statuses() {
        let mut response = ResponseBuilder::new()
            .description(error_text(status))
            .content("application/json", json_content(ERROR));
        if matches!(status, 429 | 503) {
            response = response.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(ObjectBuilder::new().schema_type(Type::Integer))
                    .description(Some("seconds"))
                    .build(),
            );
        }
        builder = builder.response(status.to_string(), response.build());
    }
    match operation.access {
        Access::Public => builder.securities(Some(Vec::<SecurityRequirement>::new())),
        Access::Buyer => builder,
        Access::Admin => builder.security(SecurityRequirement::new(BEARER, [ADMIN_SCOPE])),
    }
    .build()
}

/// `get_sales_saleId_orders`.
fn operation_id(operation: &Operation) -> String {
    let path: String = operation
        .path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_start_matches('{').trim_end_matches('}'))
        .collect::<Vec<_>>()
        .join("_");
    format!("{}_{path}", operation.method.to_ascii_lowercase())
}

/// Sale and order ids: `[A-Za-z0-9_-]{1,64}`.
fn id_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[A-Za-z0-9_-]{1,64}$"))
}

fn success_text(status: u16) -> &'static str {
    match status {
        201 => "Created",
        202 => "Accepted",
        _ => "OK",
    }
}

fn error_text(status: u16) -> &'static str {
    match status {
        400 => "INVALID_REQUEST",
        401 => "UNAUTHENTICATED (or, on the payment callback, a bad signature)",
        403 => "FORBIDDEN, GATE_REQUIRED",
        404 => "not found (SALE_NOT_FOUND, ORDER_NOT_FOUND, ...)",
        409 => "a conflict (LIMIT_EXCEEDED with orderIds, ORDER_EXPIRED, ORDER_NOT_PAYABLE, ...)",
        410 => "SALE_ENDED, SOLD_OUT",
        413 => "PAYLOAD_TOO_LARGE",
        425 => "SALE_NOT_STARTED",
        429 => "RATE_LIMITED (Retry-After)",
        503 => "SALE_PAUSED (Retry-After)",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_states_every_route_of_the_local_gateway() {
        let described: Vec<String> = OPERATIONS.iter().map(Operation::route_key).collect();
        let served: Vec<String> = crate::gateway::ROUTES
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        for route in &served {
            assert!(described.contains(route), "{route} is not described");
        }
        assert_eq!(described.len(), served.len());
        for r in crate::gateway::ROUTES {
            let Some(op) = OPERATIONS
                .iter()
                .find(|o| o.method == r.method && o.path == r.path)
            else {
                continue;
            };
            assert_eq!(
                op.access == Access::Public,
                !r.authorized,
                "{}",
                op.route_key()
            );
        }
    }

    #[test]
    fn every_referenced_schema_is_a_component() {
        let doc = serde_json::to_value(document()).unwrap();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for piece in text.split("#/components/schemas/").skip(1) {
            let name: String = piece.chars().take_while(|c| *c != '"').collect();
            assert!(
                schemas.contains_key(&name),
                "{name} is referenced, not defined"
            );
        }
        assert_eq!(doc["openapi"], "3.1.0");
    }
}
