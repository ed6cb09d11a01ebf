//! Authorization audit over HTTP: every route of the API with no token, a
//! bad token, another user's token, and (admin routes) a buyer's token; the
//! payment provider's callback without its signature, whatever the token.

use seckill_infra::gateway::ROUTES;
use seckill_infra::token::TokenSettings;
use seckill_tests::LocalStack;

#[tokio::test]
async fn every_route_refuses_the_wrong_caller() {
    let stack = LocalStack::start().await;
    let tokens = TokenSettings::from_env();
    let owner = format!("Bearer {}", tokens.mint("owner", false, 300).unwrap());
    let other = format!("Bearer {}", tokens.mint("intruder", false, 300).unwrap());
    let admin = format!("Bearer {}", tokens.mint("ops", true, 300).unwrap());
    let forged = seckill_tests::forged_admin_bearer(&tokens);
    let sale = stack.demo_sale.clone();

    // An order that belongs to "owner".
    let (status, body) = stack
        .request(
            "POST",
            &format!("/sales/{sale}/purchase"),
            &[("authorization", &owner)],
            "",
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let order = body["orderId"].as_str().unwrap().to_owned();

    let public = ["/health", "/sales/{saleId}"];
    // The operator dashboard's poll is admin-only like the other /admin routes.
    assert!(
        ROUTES
            .iter()
            .any(|r| (r.method, r.path) == ("GET", "/admin/sales/{saleId}/live"))
    );
    for route in ROUTES {
        let path = route
            .path
            .replace("{saleId}", &sale)
            .replace("{orderId}", &order);
        let body = if route.method == "PUT" { "{}" } else { "" };
        let call = |auth: Option<&str>| {
            let (stack, path, body) = (&stack, path.clone(), body);
            let auth = auth.map(str::to_owned);
            async move {
                let headers: Vec<(&str, &str)> =
                    auth.iter().map(|a| ("authorization", a.as_str())).collect();
                stack.request(route.method, &path, &headers, body).await
            }
        };
        if public.contains(&route.path) {
            let (status, _) = call(None).await;
            assert_eq!(status, 200, "{} {} is public", route.method, route.path);
            continue;
        }
        // The payment provider's route has no JWT: its signature is the
        // authentication, and no token (an admin's either) stands in for it.
        if route.path == "/payments/callback" {
            for auth in [None, Some(owner.as_str()), Some(admin.as_str())] {
                let (status, reply) = call(auth).await;
                assert_eq!(
                    (status, reply["code"].as_str()),
                    (401, Some("INVALID_SIGNATURE")),
                    "{} {} without a signature",
                    route.method,
                    route.path
                );
            }
            continue;
        }
        let (status, reply) = call(None).await;
        assert_eq!(
            (status, reply["code"].as_str()),
            (401, Some("UNAUTHENTICATED")),
            "{} {}: no token",
            route.method,
            route.path
        );
        let (status, _) = call(Some(&forged)).await;
        assert_eq!(status, 401, "{} {}: bad token", route.method, route.path);
        if route.path.starts_with("/admin/") {
            let (status, reply) = call(Some(&other)).await;
            assert_eq!(
                (status, reply["code"].as_str()),
                (403, Some("FORBIDDEN")),
                "{} {}: buyer token",
                route.method,
                route.path
            );
            let (status, _) = call(Some(&admin)).await;
            assert_ne!(status, 403, "{} {}: admin passes", route.method, route.path);
        } else if route.path.starts_with("/orders/") {
            let (status, reply) = call(Some(&other)).await;
            assert_eq!(
                (status, reply["code"].as_str()),
                (404, Some("ORDER_NOT_FOUND")),
                "{} {}: another user's token",
                route.method,
                route.path
            );
        }
    }
    // The owner's order is untouched by all of that.
    let (status, mine) = stack
        .request(
            "GET",
            &format!("/orders/{order}"),
            &[("authorization", &owner)],
            "",
        )
        .await;
    assert_eq!(status, 200);
    assert_ne!(mine["status"], "PAID");
}
