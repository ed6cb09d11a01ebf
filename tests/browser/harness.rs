//! What every scenario drives: the tools (chromedriver, Chromium), the
//! WebDriver session, and `Ui`, the page as a buyer or an operator uses it.

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use redis::AsyncCommands;
use seckill_shared::adapters::redis::{SaleKeys, StoredReservation};
use seckill_shared::clock;
use seckill_shared::domain::SaleId;
use seckill_tests::{LocalStack, eventually, free_port, unique};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How long a page may take to show what a step expects.
pub(super) const STEP: Duration = Duration::from_secs(20);
pub(super) const PURCHASE_ROUTE: (&str, &str) = ("POST", "/sales/{saleId}/purchase");

// ---------------------------------------------------------------- tools

pub(super) struct Tools {
    pub(super) chromedriver: PathBuf,
    pub(super) chromium: PathBuf,
}

/// `var` if set, else the first of `names` on `PATH` or in `/usr/bin`.
pub(super) fn tool(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push("/usr/bin".into());
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|path| path.is_file())
}

pub(super) fn tools() -> Option<Tools> {
    Some(Tools {
        chromedriver: tool("CHROMEDRIVER", &["chromedriver"])?,
        chromium: tool(
            "CHROMIUM",
            &["chromium", "chromium-browser", "google-chrome"],
        )?,
    })
}

/// `chromedriver` on a free loopback port; killed when dropped.
pub(super) struct Driver {
    pub(super) child: tokio::process::Child,
    pub(super) url: String,
}

impl Driver {
    pub(super) async fn start(path: &Path) -> Driver {
        let port = free_port();
        let child = tokio::process::Command::new(path)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
        let listening = eventually(Duration::from_secs(20), || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        assert!(listening, "chromedriver did not listen on port {port}");
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium session at 1280 px wide.
    pub(super) async fn session(&self, chromium: &Path) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Root in a container: Chromium's sandbox needs user
                    // namespaces it may not have.
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    // Overlay scrollbars: innerWidth is the page's width.
                    "--hide-scrollbars",
                    "--window-size=1280,900",
                    "--lang=en-GB",
                ],
            }),
        );
        ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("no Chromium session from chromedriver: {e}"))
    }

    pub(super) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

// ----------------------------------------------------------------- page

/// The browser and the stack behind it, with the helpers the scenarios use.
pub(super) struct Ui {
    pub(super) c: Client,
    pub(super) stack: Arc<LocalStack>,
    pub(super) base: String,
    pub(super) shots: PathBuf,
    /// The window width last set: headless Chromium reports an
    /// `outerWidth` of at least 500 even when the viewport is narrower.
    pub(super) width: AtomicU32,
}

impl Ui {
    /// Opens `path` with no session kept from an earlier scenario.
    pub(super) async fn open(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        self.c.goto(&url).await.unwrap();
        self.js("sessionStorage.clear(); return true").await;
        self.c.goto(&url).await.unwrap();
    }

    pub(super) async fn js(&self, script: &str) -> Value {
        self.c
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {script}: {e}"))
    }

    /// The text of the first element matching `css` ("" when none).
    pub(super) async fn text(&self, css: &str) -> String {
        let value = self
            .c
            .execute(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : ''",
                vec![json!(css)],
            )
            .await
            .unwrap();
        value.as_str().unwrap_or_default().to_owned()
    }

    pub(super) async fn holds(&self, script: &str) -> bool {
        self.js(script).await == json!(true)
    }

    /// Polls a page condition (a script returning true) until it holds;
    /// else a screenshot of the page and a failure that says what it shows.
    pub(super) async fn until(&self, what: &str, script: &str) {
        self.until_within(what, script, STEP).await;
    }

    /// As [`until`](Self::until), within `within` rather than [`STEP`]: for
    /// what a page must show at once (an expiry its own clock knows).
    pub(super) async fn until_within(&self, what: &str, script: &str, within: Duration) {
        if !eventually(within, || self.holds(script)).await {
            self.shot(&format!("failed-{}", what.replace(' ', "-")))
                .await;
            // What either page says, for the failure to explain itself.
            let mut shows = Vec::new();
            for css in [
                "#status",
                "#buy-hint",
                "#report-summary",
                "#violations",
                "#updated",
                "#action-result",
                "#editor-error",
                "#lookup-message",
                "#dlq-message",
            ] {
                let text = self.text(css).await;
                if !text.is_empty() {
                    shows.push(format!("{css}: {text:?}"));
                }
            }
            panic!(
                "{what}: not within {within:?}; the page shows {}",
                shows.join(", ")
            );
        }
    }

    /// A PNG of the whole page: the window is made as tall as the page for
    /// the shot (WebDriver's screenshot is of the viewport), then restored.
    pub(super) async fn shot(&self, name: &str) {
        let size = self
            .js("return [outerHeight, innerHeight, document.documentElement.scrollHeight]")
            .await;
        let [height, inner, page] = [0, 1, 2].map(|i| size[i].as_u64().unwrap() as u32);
        let width = self.width.load(Ordering::Relaxed);
        let taller = page > inner;
        if taller {
            self.c
                .set_window_size(width, page + (height - inner))
                .await
                .unwrap();
        }
        let png = self.c.screenshot().await.unwrap();
        if taller {
            self.c.set_window_size(width, height).await.unwrap();
        }
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    pub(super) async fn click(&self, css: &str) {
        self.c
            .find(Locator::Css(css))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// Keys to whatever has the focus, as a keyboard would send them.
    pub(super) async fn keys(&self, text: &str) {
        self.c
            .active_element()
            .await
            .unwrap()
            .send_keys(text)
            .await
            .unwrap();
    }

    pub(super) async fn active_id(&self) -> String {
        self.js("return document.activeElement ? document.activeElement.id : ''")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Width in CSS pixels of the page's viewport, set through the window.
    /// The browser applies a new size a moment after it answers (longer on
    /// a loaded machine: seen answering the old width under the suite), so
    /// the width is polled until it is the one asked for.
    pub(super) async fn resize(&self, width: u32) {
        self.c.set_window_size(width, 900).await.unwrap();
        self.width.store(width, Ordering::Relaxed);
        let taken = eventually(STEP, || async {
            self.js("return window.innerWidth").await == json!(width)
        })
        .await;
        let inner = self.js("return window.innerWidth").await;
        assert!(taken, "the viewport did not take {width} px: {inner}");
    }

    /// No horizontal scroll: nothing is wider than the viewport.
    pub(super) async fn assert_fits(&self, page: &str) {
        let widths = self
            .js("const d = document.documentElement; return [d.scrollWidth, d.clientWidth, window.innerWidth]")
            .await;
        let [scroll, client, inner] = [0, 1, 2].map(|i| widths[i].as_i64().unwrap());
        assert!(
            scroll <= inner && scroll <= client,
            "{page}: scrolls sideways (scrollWidth {scroll}, clientWidth {client}, innerWidth {inner})"
        );
    }

    /// Signs in on the buyer page with the form (local stack).
    pub(super) async fn sign_in(&self, user: &str) {
        self.until(
            "sign-in form shown",
            "return !document.getElementById('local-signin').hidden",
        )
        .await;
        let input = self.c.find(Locator::Id("user")).await.unwrap();
        input.clear().await.unwrap();
        input.send_keys(user).await.unwrap();
        self.click("#local-signin button[type=submit]").await;
        self.until(
            "signed in",
            &format!(
                "return document.getElementById('who-name').textContent === {}",
                json!(user)
            ),
        )
        .await;
    }

    const BUYABLE: &str = "return !document.getElementById('buy-button').disabled";

    pub(super) async fn buy_enabled(&self) -> bool {
        self.holds(Self::BUYABLE).await
    }

    /// Until the buy button is on (`what` names the step in a failure).
    pub(super) async fn until_buyable(&self, what: &str) {
        self.until(what, Self::BUYABLE).await;
    }

    /// Until the page's status line says `text` (after answer `code`).
    pub(super) async fn until_said(&self, code: &str, text: &str) {
        self.until(
            &format!("{code} said"),
            &format!(
                "return document.getElementById('status').textContent.includes({})",
                json!(text)
            ),
        )
        .await;
    }

    pub(super) async fn until_order(&self, status: &str) {
        self.until(
            &format!("order {status}"),
            &format!(
                "const o = document.getElementById('order'); \
                 return !o.hidden && o.dataset.status === {}",
                json!(status)
            ),
        )
        .await;
    }

    pub(super) fn purchases_served(&self) -> u64 {
        self.stack
            .gateway
            .served(PURCHASE_ROUTE.0, PURCHASE_ROUTE.1)
    }

    /// An HTTP call of the API as a test client (not through the page).
    pub(super) async fn api(
        &self,
        method: &str,
        path: &str,
        user: &str,
        admin: bool,
        body: &str,
    ) -> (u16, Value) {
        let token = self.stack.gateway.tokens().mint(user, admin, 600).unwrap();
        let auth = format!("Bearer {token}");
        self.stack
            .request(
                method,
                path,
                &[
                    ("authorization", &auth),
                    ("content-type", "application/json"),
                ],
                body,
            )
            .await
    }

    /// A sale made by the admin API: `stock` units, `limit` per buyer, open
    /// from `start_ms` for an hour.
    pub(super) async fn sale(&self, prefix: &str, stock: u32, limit: u32, start_ms: i64) -> String {
        self.sale_with(prefix, stock, limit, start_ms, json!({}))
            .await
    }

    /// Creates a sale through the admin API (201 asserted): `stock` units,
    /// `limit` per buyer, open from `start_ms` for an hour, a 120 s payment
    /// window, and `extra` fields of the body. Its id, and the API's answer.
    async fn create_sale(
        &self,
        prefix: &str,
        stock: u32,
        limit: u32,
        start_ms: i64,
        extra: Value,
    ) -> (String, Value) {
        let id = unique(prefix);
        let mut body = json!({
            "name": format!("Browser test: {prefix}"),
            "totalStock": stock,
            "startAt": clock::rfc3339_ms(start_ms),
            "endAt": clock::rfc3339_ms(start_ms + 3_600_000),
            "perUserLimit": limit,
            "paymentWindowSeconds": 120,
        });
        for (key, value) in extra.as_object().into_iter().flatten() {
            body[key] = value.clone();
        }
        // A 503 is the API's "try again shortly" (the sales table busy on
        // the loaded machine): the console sends the same PUT again, and so
        // does this; a first send that did land answers 200, the same sale.
        let answer = std::sync::Mutex::new((0, Value::Null));
        let sent = eventually(std::time::Duration::from_secs(60), || async {
            let reply = self
                .api(
                    "PUT",
                    &format!("/admin/sales/{id}"),
                    "browser-admin",
                    true,
                    &body.to_string(),
                )
                .await;
            let busy = reply.0 == 503;
            *answer.lock().unwrap() = reply;
            !busy
        })
        .await;
        let (status, reply) = answer.into_inner().unwrap();
        assert!(sent, "the sales table stayed busy: {reply}");
        assert!(status == 201 || status == 200, "{status} {reply}");
        (id, reply)
    }

    /// [`sale`](Self::sale) with more fields of the admin API's body.
    pub(super) async fn sale_with(
        &self,
        prefix: &str,
        stock: u32,
        limit: u32,
        start_ms: i64,
        extra: Value,
    ) -> String {
        let (id, reply) = self
            .create_sale(prefix, stock, limit, start_ms, extra)
            .await;
        // Prewarm waits while the orders queue holds messages (of any
        // sale: an earlier scenario's), as it would in AWS; ask again until
        // the sale is in Redis.
        if reply["prewarm"]["outcome"] != "LOADED" {
            let path = format!("/admin/sales/{id}/prewarm");
            let loaded = eventually(STEP, || async {
                let (_, reply) = self.api("POST", &path, "browser-admin", true, "").await;
                reply["outcome"] == "LOADED" || reply["outcome"] == "REFRESHED"
            })
            .await;
            assert!(loaded, "sale {id} was not loaded into Redis");
        }
        id
    }

    pub(super) async fn redis(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.stack.config.redis_url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// Units each buyer holds in Redis, and reservations per buyer.
    pub(super) async fn held(&self, sale: &str) -> (HashMap<String, i64>, HashMap<String, usize>) {
        let keys = SaleKeys::new(&SaleId::parse(sale).unwrap());
        let mut redis = self.redis().await;
        let buyers: HashMap<String, i64> = redis.hgetall(&keys.buyers).await.unwrap();
        let resv: HashMap<String, String> = redis.hgetall(&keys.resv).await.unwrap();
        let mut per_user = HashMap::new();
        for raw in resv.values() {
            let r: StoredReservation = serde_json::from_str(raw).unwrap();
            *per_user.entry(r.user_id).or_default() += 1;
        }
        (buyers, per_user)
    }

    /// The order's row in the orders table, if written.
    pub(super) async fn order_row(
        &self,
        order_id: &str,
    ) -> Option<seckill_shared::domain::orders::Order> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let sdk = seckill_shared::adapters::aws::sdk_config(
            seckill_shared::adapters::aws::Caller::Tool,
            Duration::from_secs(10),
        )
        .await;
        let item = seckill_shared::adapters::aws::dynamodb(&sdk)
            .get_item()
            .table_name(&self.stack.config.orders_table)
            .key("orderId", AttributeValue::S(order_id.into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item?;
        Some(seckill_shared::adapters::dynamo::orders::order_from_item(&item).unwrap())
    }
}

// ------------------------------------------------- the buyer page's states

/// A Chrome DevTools command, sent through chromedriver's
/// `goog/cdp/execute` (what WebDriver itself cannot do: a time zone).
#[derive(Debug)]
struct DevTools {
    cmd: &'static str,
    params: Value,
}

impl fantoccini::wd::WebDriverCompatibleCommand for DevTools {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        let body = json!({"cmd": self.cmd, "params": self.params});
        (http::Method::POST, Some(body.to_string()))
    }
}

impl Ui {
    /// Requests the gateway has routed to `method path` (a route's path,
    /// e.g. `/sales/{saleId}/challenge`), whatever their answer.
    pub(super) fn served(&self, method: &str, path: &str) -> u64 {
        self.stack.gateway.served(method, path)
    }

    /// The admin API, as the operator (no body).
    pub(super) async fn admin(&self, method: &str, path: &str) -> (u16, Value) {
        self.api(method, path, "browser-admin", true, "").await
    }

    /// The browser's time zone, as a buyer in `zone` has it (an IANA name;
    /// `""` gives the machine's back). For this tab, until changed.
    pub(super) async fn time_zone(&self, zone: &str) {
        self.c
            .issue_cmd(DevTools {
                cmd: "Emulation.setTimezoneOverride",
                params: json!({ "timezoneId": zone }),
            })
            .await
            .unwrap_or_else(|e| panic!("no time zone {zone:?} for the browser: {e}"));
    }

    /// The payment window of a `PENDING_PAYMENT` order, moved to close at
    /// `at_ms`: what its row says when that much of a window is left. The
    /// shortest window a sale may have is 60 s; this is how a scenario
    /// sees it close in seconds. The API (EXPIRED from `expiresAt` on) and
    /// the release job (the expiry index) read the same attribute.
    pub(super) async fn close_window_at(&self, order_id: &str, at_ms: i64) {
        use aws_sdk_dynamodb::types::AttributeValue;
        let sdk = seckill_shared::adapters::aws::sdk_config(
            seckill_shared::adapters::aws::Caller::Tool,
            Duration::from_secs(10),
        )
        .await;
        seckill_shared::adapters::aws::dynamodb(&sdk)
            .update_item()
            .table_name(&self.stack.config.orders_table)
            .key("orderId", AttributeValue::S(order_id.into()))
            .update_expression("SET expiresAt = :at")
            .condition_expression("#s = :pending")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":at", AttributeValue::S(clock::rfc3339_ms(at_ms)))
            .expression_attribute_values(":pending", AttributeValue::S("PENDING_PAYMENT".into()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("order {order_id}: window not moved: {e:?}"));
    }

    /// What the sale card and the buy section say together: the pill, the
    /// page's sale state, the countdown's label and value, whether the buy
    /// button is off, and why.
    pub(super) async fn sale_line(&self) -> SaleLine {
        let v = self
            .js("const t = (id) => document.getElementById(id).textContent.trim(); \
                 return [t('sale-status'), document.getElementById('sale-status').dataset.state || '', \
                   t('countdown-label'), t('countdown'), document.getElementById('buy-button').disabled, \
                   t('buy-hint')]")
            .await;
        let text = |i: usize| v[i].as_str().unwrap_or_default().to_owned();
        SaleLine {
            pill: text(0),
            state: text(1),
            label: text(2),
            countdown: text(3),
            buy_off: v[4] == json!(true),
            hint: text(5),
        }
    }

    /// A sale that opens at `start_ms`, too far ahead to be loaded into
    /// Redis yet (prewarm answers NOT_DUE): the page shows it as upcoming.
    pub(super) async fn upcoming_sale(&self, prefix: &str, start_ms: i64) -> String {
        self.create_sale(prefix, 5, 1, start_ms, json!({})).await.0
    }

    /// Until the page's sale status (its pill) says `pill`.
    pub(super) async fn until_pill(&self, pill: &str) {
        self.until(
            &format!("the pill says {pill}"),
            &format!(
                "return document.getElementById('sale-status').textContent === {}",
                json!(pill)
            ),
        )
        .await;
    }
}

/// The buyer page's status line, as [`Ui::sale_line`] reads it.
#[derive(Debug)]
pub(super) struct SaleLine {
    pub(super) pill: String,
    pub(super) state: String,
    pub(super) label: String,
    pub(super) countdown: String,
    pub(super) buy_off: bool,
    pub(super) hint: String,
}

// -------------------------------------------------------------- console

/// What the console shows of a sale's figures, for a step to compare
/// whole: every one of them, so a figure left over from another sale shows.
pub(super) const CONSOLE_FIGURES: &str = "const t = (id) => document.getElementById(id).textContent.trim(); \
     return {stock: t('stock-remaining'), total: t('stock-total'), pill: t('stock-status'), \
       visible: t('queue-visible'), dlq: t('queue-dlq'), name: t('set-name'), \
       statuses: document.querySelectorAll('[data-status]').length, \
       outcomes: document.querySelectorAll('[data-outcome]').length, \
       report: t('report-summary'), updated: t('updated')}";

impl Ui {
    /// Opens the operator console (on `sale`, else the configured one) and
    /// signs in with the form's default name, `ops`.
    pub(super) async fn console(&self, sale: Option<&str>) {
        let path = sale.map_or_else(|| "/ops".to_owned(), |s| format!("/ops?sale={s}"));
        self.open(&path).await;
        self.until(
            "console sign-in",
            "return !document.getElementById('local-signin').hidden",
        )
        .await;
        self.click("#local-signin button[type=submit]").await;
        self.until(
            "console signed in",
            "return document.getElementById('who-name').textContent === 'ops'",
        )
        .await;
    }

    /// Until the element `css` shows exactly `want` (trimmed).
    pub(super) async fn until_text(&self, css: &str, want: &str) {
        self.until(
            &format!("{css} shows {want}"),
            &format!(
                "const e = document.querySelector({}); return !!e && e.textContent.trim() === {}",
                json!(css),
                json!(want)
            ),
        )
        .await;
    }

    /// Until the element `css` holds `want` in its text.
    pub(super) async fn until_contains(&self, css: &str, want: &str) {
        self.until(
            &format!("{css} says {want}"),
            &format!(
                "const e = document.querySelector({}); return !!e && e.textContent.includes({})",
                json!(css),
                json!(want)
            ),
        )
        .await;
    }

    /// Types `value` into the field `css`, emptied first, as a person would.
    pub(super) async fn fill(&self, css: &str, value: &str) {
        let input = self.c.find(Locator::Css(css)).await.unwrap();
        input.clear().await.unwrap();
        if !value.is_empty() {
            input.send_keys(value).await.unwrap();
        }
    }

    /// Sets the `datetime-local` field `css` to the instant `ms` as the
    /// browser's own time zone writes it (what an operator picks there).
    /// A whole minute reads back without its seconds (`…T10:20`), which is
    /// the same time.
    pub(super) async fn set_time(&self, css: &str, ms: i64) {
        let set = self
            .c
            .execute(
                "const d = new Date(arguments[1]); const p = (n) => String(n).padStart(2, '0'); \
                 const v = d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + \
                   p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds()); \
                 const e = document.querySelector(arguments[0]); e.value = v; \
                 e.dispatchEvent(new Event('input', {bubbles: true})); \
                 return e.value === v || (d.getSeconds() === 0 && e.value === v.slice(0, 16))",
                vec![json!(css), json!(ms)],
            )
            .await
            .unwrap();
        assert_eq!(set, json!(true), "{css} did not take the time {ms}");
    }

    /// Answers the open question of the box `prefix` (`confirm`,
    /// `dlq-confirm`): Yes, or Cancel.
    pub(super) async fn answer(&self, prefix: &str, yes: bool) {
        self.until(
            &format!("the question in #{prefix}"),
            &format!("return !document.getElementById({}).hidden", json!(prefix)),
        )
        .await;
        self.click(&format!("#{prefix}-{}", if yes { "yes" } else { "no" }))
            .await;
    }

    /// An admin route read as the test's own operator.
    pub(super) async fn admin_get(&self, path: &str) -> (u16, Value) {
        self.api("GET", path, "browser-admin", true, "").await
    }

    /// A purchase of `quantity` units by `buyer`, through the API.
    pub(super) async fn buy(&self, sale: &str, buyer: &str, quantity: u32) -> (u16, Value) {
        self.api(
            "POST",
            &format!("/sales/{sale}/purchase"),
            buyer,
            false,
            &json!({ "quantity": quantity }).to_string(),
        )
        .await
    }

    /// Until the order is written (no longer `QUEUED`); its view.
    pub(super) async fn written(&self, order_id: &str) -> Value {
        let path = format!("/admin/orders/{order_id}");
        let done = eventually(STEP, || async {
            let (status, order) = self.admin_get(&path).await;
            status == 200 && order["status"] != "QUEUED"
        })
        .await;
        assert!(done, "order {order_id} was not written");
        self.admin_get(&path).await.1
    }
}
