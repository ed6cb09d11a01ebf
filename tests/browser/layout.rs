//! Both pages at 375 and 1280 px, and the buyer page by keyboard alone.

use super::harness::*;
use fantoccini::key::Key;
use seckill_shared::clock;
use seckill_tests::unique;
use serde_json::json;

/// e) Both widths, no sideways scroll; at 375 px the buyer signs in and
/// buys with the keyboard alone (Tab to the field and to the button, Enter).
pub(super) async fn pages_fit_and_work_by_keyboard(ui: &Ui) {
    let sale = ui.sale("e", 10, 1, clock::now_ms() - 1_000).await;
    for width in [375, 1280] {
        ui.resize(width).await;
        ui.open(&format!("/?sale={sale}")).await;
        ui.until(
            "sale shown",
            "return document.getElementById('sale-name').textContent.startsWith('Browser test')",
        )
        .await;
        ui.assert_fits(&format!("buyer page, signed out, {width} px"))
            .await;
        ui.shot(&format!("buyer-signed-out-{width}")).await;
        ui.open("/ops").await;
        ui.until(
            "dashboard sign-in",
            "return !document.getElementById('local-signin').hidden",
        )
        .await;
        ui.assert_fits(&format!("dashboard, signed out, {width} px"))
            .await;
    }

    ui.resize(375).await;
    ui.open(&format!("/?sale={sale}")).await;
    ui.until(
        "sign-in form shown",
        "return !document.getElementById('local-signin').hidden",
    )
    .await;
    // From the top of the page, Tab until the name field has the focus.
    let mut tabs = 0;
    while ui.active_id().await != "user" {
        tabs += 1;
        assert!(tabs <= 10, "the name field is not reachable with Tab");
        ui.keys(&Key::Tab.to_string()).await;
    }
    let buyer = unique("e-keys");
    ui.keys(&format!("{buyer}{}", Key::Enter)).await;
    ui.until(
        "signed in by keyboard",
        &format!(
            "return document.getElementById('who-name').textContent === {}",
            json!(buyer)
        ),
    )
    .await;
    ui.until_buyable("buy button on").await;
    let mut tabs = 0;
    while ui.active_id().await != "buy-button" {
        tabs += 1;
        assert!(tabs <= 10, "the buy button is not reachable with Tab");
        ui.keys(&Key::Tab.to_string()).await;
    }
    // The focus ring is visible (an outline, not just the browser default
    // that some resets remove).
    let outline = ui
        .js("return getComputedStyle(document.activeElement).outlineStyle")
        .await;
    assert_eq!(
        outline,
        json!("solid"),
        "no visible focus on the buy button"
    );
    ui.shot("buyer-keyboard-focus-375").await;
    ui.keys(&Key::Enter.to_string()).await;
    ui.until_order("PENDING_PAYMENT").await;
    ui.assert_fits("buyer page, pending, 375 px").await;
    ui.shot("buyer-pending-375").await;
    let (buyers, _) = ui.held(&sale).await;
    assert_eq!(buyers.get(buyer.as_str()), Some(&1), "{buyers:?}");
    ui.resize(1280).await;
}
