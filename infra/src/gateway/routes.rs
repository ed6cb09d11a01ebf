//! The routes of the local stack: the functions' ([`ROUTES`], as
//! `template.yaml` declares them) and its own ([`LOCAL_ROUTES`]), and which
//! one a request hits with what path parameters.

use crate::pages::Page;
use matchit::{InsertError, Router};
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

/// The function a route invokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Purchase,
    OrdersApi,
    AdminApi,
}

impl Target {
    /// The binary of the function (`functions/<name>`).
    pub fn function(self) -> &'static str {
        match self {
            Target::Purchase => "purchase",
            Target::OrdersApi => "orders-api",
            Target::AdminApi => "admin-api",
        }
    }
}

/// One route of the HTTP API, as `template.yaml` declares it.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub target: Target,
    /// False only for the public routes of the design.
    pub authorized: bool,
}

/// Every route the local stack serves. Kept in step with `template.yaml`
/// (the consistency test compares the two, target and authorizer included).
pub const ROUTES: &[Route] = &[
    Route {
        method: "GET",
        path: "/health",
        target: Target::OrdersApi,
        authorized: false,
    },
    Route {
        method: "POST",
        path: "/sales/{saleId}/purchase",
        target: Target::Purchase,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/sales/{saleId}",
        target: Target::OrdersApi,
        authorized: false,
    },
    Route {
        method: "GET",
        path: "/sales/{saleId}/challenge",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/sales/{saleId}/orders",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/sales/{saleId}/waitlist",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "DELETE",
        path: "/sales/{saleId}/waitlist",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/sales/{saleId}/challenge",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/orders/{orderId}",
        target: Target::OrdersApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/orders/{orderId}/pay",
        target: Target::OrdersApi,
        authorized: true,
    },
    // The payment provider: no JWT, the signature over the body instead.
    Route {
        method: "POST",
        path: "/payments/callback",
        target: Target::OrdersApi,
        authorized: false,
    },
    Route {
        method: "PUT",
        path: "/admin/sales/{saleId}",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/prewarm",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/reconcile",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/pause",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/resume",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/audit",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/refunds",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/report",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/live",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/waitlist",
        target: Target::AdminApi,
        authorized: true,
    }, // The operator console.
    Route {
        method: "GET",
        path: "/admin/sales",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/sales/{saleId}/end",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/orders/{orderId}",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/sales/{saleId}/orders",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "GET",
        path: "/admin/dlq",
        target: Target::AdminApi,
        authorized: true,
    },
    Route {
        method: "POST",
        path: "/admin/dlq/redrive",
        target: Target::AdminApi,
        authorized: true,
    },
];

/// A route of the local stack only: the pages and the local sign-in. Not
/// in `template.yaml` (on AWS the pages are files in the pages bucket and
/// tokens come from Cognito), and public, as static files are.
pub struct LocalOnlyRoute {
    pub method: &'static str,
    pub path: &'static str,
    pub serves: Page,
}

/// The routes [`crate::pages`] answers. The consistency check requires each
/// to be listed in [`crate::consistency::LOCAL_ONLY_ROUTES`], and
/// `template.yaml` not to route it to a function.
pub const LOCAL_ROUTES: &[LocalOnlyRoute] = &[
    LocalOnlyRoute {
        method: "GET",
        path: "/",
        serves: Page::Buyer,
    },
    LocalOnlyRoute {
        method: "GET",
        path: "/ops",
        serves: Page::Dashboard,
    },
    LocalOnlyRoute {
        method: "GET",
        path: "/assets/{file}",
        serves: Page::Asset,
    },
    LocalOnlyRoute {
        method: "GET",
        path: "/config.js",
        serves: Page::Config,
    },
    LocalOnlyRoute {
        method: "POST",
        path: "/local/token",
        serves: Page::Token,
    },
];

/// Finds the route for a request and its path parameters (percent-decoded).
pub fn match_route(method: &str, path: &str) -> Option<(&'static Route, HashMap<String, String>)> {
    match_route_at(method, path).map(|(i, params)| (&ROUTES[i], params))
}

/// [`match_route`], with the route's index in [`ROUTES`].
pub(super) fn match_route_at(method: &str, path: &str) -> Option<(usize, HashMap<String, String>)> {
    static TABLE: LazyLock<Result<Table, InsertError>> =
        LazyLock::new(|| Table::new(ROUTES.iter().map(|r| (r.method, r.path))));
    find(&TABLE, method, path)
}

/// The local-only route for a request, and its path parameters.
pub fn match_local_only(
    method: &str,
    path: &str,
) -> Option<(&'static LocalOnlyRoute, HashMap<String, String>)> {
    static TABLE: LazyLock<Result<Table, InsertError>> =
        LazyLock::new(|| Table::new(LOCAL_ROUTES.iter().map(|r| (r.method, r.path))));
    find(&TABLE, method, path).map(|(i, params)| (&LOCAL_ROUTES[i], params))
}

/// A route table: a router per method, each route's value its index in
/// its table. A pattern segment `{name}` matches one whole segment, never
/// an empty one.
struct Table {
    routers: Vec<(&'static str, Router<usize>)>,
}

impl Table {
    fn new(
        routes: impl Iterator<Item = (&'static str, &'static str)>,
    ) -> Result<Self, InsertError> {
        let mut routers: Vec<(&'static str, Router<usize>)> = Vec::new();
        for (index, (method, path)) in routes.enumerate() {
            let at = match routers.iter().position(|(m, _)| *m == method) {
                Some(at) => at,
                None => {
                    routers.push((method, Router::new()));
                    routers.len() - 1
                }
            };
            routers[at].1.insert(path, index)?;
        }
        Ok(Self { routers })
    }
}

/// The route of `table` that `method path` hits, and its path parameters.
/// Leading slashes count as one (`//health` is `/health`).
fn find(
    table: &Result<Table, InsertError>,
    method: &str,
    path: &str,
) -> Option<(usize, HashMap<String, String>)> {
    let table = match table {
        Ok(table) => table,
        Err(err) => {
            // The tables are constants and a unit test builds them: this
            // would be a bug in them, answered as "no such route".
            tracing::error!(%err, "the gateway's route table does not build");
            return None;
        }
    };
    let (_, router) = table.routers.iter().find(|(m, _)| *m == method)?;
    let trimmed = path.trim_start_matches('/');
    let path: Cow<'_, str> = match path.len() - trimmed.len() {
        0 => Cow::Owned(format!("/{trimmed}")),
        slashes => Cow::Borrowed(&path[slashes - 1..]),
    };
    let found = router.at(&path).ok()?;
    let params = found
        .params
        .iter()
        .map(|(name, value)| (name.to_owned(), percent_decode(value)))
        .collect();
    Some((*found.value, params))
}

/// `%XX` decoded; anything else, and bytes that are not UTF-8 after
/// decoding (replaced), as API Gateway passes them.
pub(super) fn percent_decode(raw: &str) -> String {
    percent_decode_str(raw).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_tables_build() {
        Table::new(ROUTES.iter().map(|r| (r.method, r.path))).unwrap();
        Table::new(LOCAL_ROUTES.iter().map(|r| (r.method, r.path))).unwrap();
    }

    #[test]
    fn leading_slashes_count_as_one_and_percent_escapes_decode() {
        assert_eq!(match_route("GET", "//health").unwrap().0.path, "/health");
        assert_eq!(match_route("GET", "health").unwrap().0.path, "/health");
        let (_, params) = match_route("GET", "/sales/a%2Fb%zz%4").unwrap();
        assert_eq!(params["saleId"], "a/b%zz%4");
        let (_, params) = match_route("GET", "/sales/%ff").unwrap();
        assert_eq!(params["saleId"], "\u{fffd}");
        assert!(match_route("GET", "/sales/s1/").is_none());
        assert!(match_route("GET", "/sales/s1//orders").is_none());
    }

    #[test]
    fn routes_match_with_decoded_parameters() {
        let (route, params) = match_route("POST", "/sales/a%20b/purchase").unwrap();
        assert_eq!(route.target, Target::Purchase);
        assert_eq!(params["saleId"], "a b");
        assert!(match_route("GET", "/sales/a/purchase").is_none());
        assert!(match_route("POST", "/sales//purchase").is_none());
        assert!(match_route("POST", "/sales/a/purchase/x").is_none());
        assert_eq!(
            match_route("GET", "/health").unwrap().0.target,
            Target::OrdersApi
        );
        let (route, params) = match_route("POST", "/orders/o1/pay").unwrap();
        assert_eq!(
            (route.path, params["orderId"].as_str()),
            ("/orders/{orderId}/pay", "o1")
        );
        assert!(match_route("GET", "/sales/s1").is_some_and(|(r, _)| !r.authorized));
    }

    #[test]
    fn local_only_routes_match_and_never_shadow_an_api_route() {
        let page = |method, path| match_local_only(method, path).map(|(r, p)| (r.serves, p));
        assert_eq!(page("GET", "/").unwrap().0, Page::Buyer);
        assert_eq!(page("GET", "/ops").unwrap().0, Page::Dashboard);
        assert_eq!(page("GET", "/config.js").unwrap().0, Page::Config);
        assert_eq!(page("POST", "/local/token").unwrap().0, Page::Token);
        let (serves, params) = page("GET", "/assets/app.css").unwrap();
        assert_eq!((serves, params["file"].as_str()), (Page::Asset, "app.css"));
        // An asset is one segment: nothing below /assets/ is reachable by
        // adding segments, and `..` is only a name the asset list lacks.
        assert!(page("GET", "/assets/a/b.css").is_none());
        assert!(page("GET", "/assets/").is_none());
        assert!(page("POST", "/").is_none());
        assert!(page("GET", "/local/token").is_none());
        assert!(page("GET", "/ops/").is_none());
        for local in LOCAL_ROUTES {
            let concrete = local.path.replace("{file}", "x");
            assert!(
                match_route(local.method, &concrete).is_none(),
                "{} {} is also an API route",
                local.method,
                local.path
            );
            assert!(!local.path.starts_with("/admin") && !local.path.starts_with("/sales"));
        }
        for route in ROUTES {
            let concrete = route.path.replace(['{', '}'], "");
            assert!(match_local_only(route.method, &concrete).is_none());
        }
    }
}
