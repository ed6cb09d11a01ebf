//! The pages of the local stack: the buyer page (`GET /`), the operator
//! console (`GET /ops`), their assets (`GET /assets/<file>`), the pages'
//! configuration (`GET /config.js`) and the local sign-in (`POST
//! /local/token`).
//!
//! The files under `web/` are compiled in, so `seckill-local up` serves them
//! from any working directory and an asset is served only if it is in
//! [`ASSETS`]: a path is looked up by its exact name, never joined to a
//! directory, so `..` has nothing to climb. On AWS the same files sit in the
//! pages bucket and tokens come from Cognito; none of these routes is in
//! `template.yaml` (the gateway lists them apart, see
//! [`crate::gateway::LOCAL_ROUTES`]).

use crate::token::TokenSettings;
use lambda_http::{Body, Response};
use seckill_shared::domain::UserId;
use seckill_shared::error::ApiError;
use seckill_shared::{clock, http};
use serde::Deserialize;
use std::collections::HashMap;

/// What a local-only route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// `web/index.html`.
    Buyer,
    /// `web/ops.html`.
    Dashboard,
    /// One of [`ASSETS`], by the `file` path parameter.
    Asset,
    /// `window.SECKILL_CONFIG = {...}`.
    Config,
    /// `POST /local/token`.
    Token,
}

/// Scripts, styles, images and connections from this origin only, and no
/// inline script or style: the pages hold tokens, so an injected script must
/// have nowhere to run. The pages style through classes only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     worker-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A file of `web/assets/`.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

const BUYER_PAGE: &str = include_str!("../../web/index.html");
const DASHBOARD_PAGE: &str = include_str!("../../web/ops.html");

/// One of `web/assets/`, compiled in.
macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_bytes!(concat!("../../web/assets/", $name)),
        }
    };
}

/// Every file `GET /assets/<file>` serves; anything else is `404`. The
/// pages' scripts are ES modules that import one another by relative path
/// (`./format.js`), so every module either page reaches is listed here, by
/// its one-segment name.
pub const ASSETS: &[Asset] = &[
    asset!("app.css", CSS),
    asset!("ops.css", CSS),
    asset!("favicon.svg", SVG),
    // Shared by both pages: the API client and ids, sign-in, the DOM
    // helpers, storage, and every formatting helper.
    asset!("api.js", JS),
    asset!("auth.js", JS),
    asset!("dom.js", JS),
    asset!("store.js", JS),
    asset!("format.js", JS),
    // The buyer page: its entry point, its state and hooks, what it derives
    // from them, then one module per feature.
    asset!("buyer.js", JS),
    asset!("buyer-state.js", JS),
    asset!("buyer-events.js", JS),
    asset!("buyer-derive.js", JS),
    asset!("buyer-messages.js", JS),
    asset!("buyer-sale.js", JS),
    asset!("buyer-signin.js", JS),
    asset!("buyer-gate.js", JS),
    asset!("buyer-purchase.js", JS),
    asset!("buyer-ticket.js", JS),
    asset!("buyer-orders.js", JS),
    asset!("buyer-holdings.js", JS),
    asset!("buyer-waitlist.js", JS),
    asset!("buyer-waitlist-messages.js", JS),
    asset!("buyer-render.js", JS),
    // The gate's proof of work, run as the buyer page's Web Worker (a
    // classic worker script).
    asset!("pow.js", JS),
    // The operator console: its entry point, its state and hooks, then one
    // module per feature.
    asset!("ops.js", JS),
    asset!("ops-state.js", JS),
    asset!("ops-events.js", JS),
    asset!("ops-widgets.js", JS),
    asset!("ops-signin.js", JS),
    asset!("ops-sales.js", JS),
    asset!("ops-live.js", JS),
    asset!("ops-settings.js", JS),
    asset!("ops-reports.js", JS),
    asset!("ops-waitlist.js", JS),
    asset!("ops-commands.js", JS),
    asset!("ops-editor.js", JS),
    asset!("ops-lookup.js", JS),
    asset!("ops-dlq.js", JS),
    asset!("ops-chart.js", JS),
];

/// How long a token from `POST /local/token` lives: a sale and its payment
/// window fit in it, as with `seckill-local token`'s default.
pub const LOCAL_TOKEN_TTL_SECS: i64 = 3_600;

/// What `config.js` tells the pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSettings {
    /// The sale the pages show unless the URL names another (`?sale=`):
    /// `SECKILL_DEMO_SALE`, else `demo`.
    pub sale_id: String,
    /// `SECKILL_LOGIN_URL`: sign in through this hosted UI (implicit grant,
    /// the token back in the URL fragment) as the pages do on AWS, instead
    /// of the local form. Its tokens must be ones this gateway accepts.
    pub login_url: Option<String>,
}

impl Default for PageSettings {
    fn default() -> Self {
        Self {
            sale_id: "demo".into(),
            login_url: None,
        }
    }
}

impl PageSettings {
    /// The demo sale of the local stack, or `demo` when it is skipped.
    pub fn for_demo_sale(demo_sale: &str) -> Self {
        if demo_sale.is_empty() {
            Self::default()
        } else {
            Self {
                sale_id: demo_sale.to_owned(),
                login_url: None,
            }
        }
    }

    /// The same pages signing in through `login_url` (when given).
    pub fn with_login_url(mut self, login_url: Option<String>) -> Self {
        self.login_url = login_url;
        self
    }

    /// The body of `GET /config.js`. The API is this same origin (`apiBase`
    /// empty) and sign-in is `POST /local/token` (`auth: local`), or the
    /// hosted UI at `login_url` (`auth: cognito`, the shape the pages
    /// bucket on AWS gets).
    pub fn config_js(&self) -> String {
        let config = match &self.login_url {
            None => serde_json::json!({
                "apiBase": "",
                "auth": "local",
                "saleId": self.sale_id,
            }),
            Some(login_url) => serde_json::json!({
                "apiBase": "",
                "auth": "cognito",
                "saleId": self.sale_id,
                "loginUrl": login_url,
            }),
        };
        format!("window.SECKILL_CONFIG = {config};\n")
    }
}

/// The answer of a local-only route. `params` are the route's path
/// parameters; `body` the request body.
pub fn serve(
    page: Page,
    params: &HashMap<String, String>,
    body: &[u8],
    tokens: &TokenSettings,
    settings: &PageSettings,
) -> Response<Body> {
    match page {
        Page::Buyer => file(HTML, Body::Text(BUYER_PAGE.to_owned())),
        Page::Dashboard => file(HTML, Body::Text(DASHBOARD_PAGE.to_owned())),
        Page::Config => file(JS, Body::Text(settings.config_js())),
        Page::Asset => {
            let name = params.get("file").map(String::as_str).unwrap_or_default();
            match ASSETS.iter().find(|asset| asset.name == name) {
                Some(asset) => file(asset.content_type, Body::Binary(asset.body.to_vec())),
                None => http::error(&ApiError::RouteNotFound),
            }
        }
        Page::Token => match local_token(body, tokens) {
            Ok(response) => response,
            Err(err) => http::error(&err),
        },
    }
}

fn file(content_type: &'static str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    let pairs = [
        ("content-type", content_type),
        // Always revalidate: a page and its scripts change together, and a
        // stale script against a new page is a confusing bug to chase.
        ("cache-control", "no-cache"),
        ("content-security-policy", CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
    ];
    for (name, value) in pairs {
        headers.insert(name, lambda_http::http::HeaderValue::from_static(value));
    }
    response
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenRequest {
    user: String,
    #[serde(default)]
    admin: bool,
}

/// `POST /local/token {"user", "admin"}`: a token the gateway accepts, for
/// whoever asks. That is the point of the local stack (anyone at the
/// keyboard is every user) and why this route exists nowhere else.
fn local_token(body: &[u8], tokens: &TokenSettings) -> Result<Response<Body>, ApiError> {
    if body.len() > http::MAX_BODY_BYTES {
        return Err(ApiError::InvalidRequest(format!(
            "body is larger than {} bytes",
            http::MAX_BODY_BYTES
        )));
    }
    let request: TokenRequest = serde_json::from_slice(body).map_err(|_| {
        ApiError::InvalidRequest(r#"body must be {"user": "<user id>", "admin": false}"#.into())
    })?;
    let user = UserId::parse(&request.user).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let (token, expires_secs) = tokens
        .mint_until(user.as_str(), request.admin, LOCAL_TOKEN_TTL_SECS)
        .map_err(|err| {
            tracing::error!(%err, "could not mint a local token");
            ApiError::Internal
        })?;
    let mut response = http::json(
        200,
        &serde_json::json!({
            "token": token,
            "userId": user.as_str(),
            "expiresAt": clock::rfc3339_ms(expires_secs * 1000),
        }),
    );
    // A credential: never kept by a cache.
    response.headers_mut().insert(
        "cache-control",
        lambda_http::http::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> TokenSettings {
        TokenSettings {
            secret: "s3cret".into(),
            issuer: "iss".into(),
            audience: "aud".into(),
        }
    }

    fn get(page: Page, file: Option<&str>) -> Response<Body> {
        let params = file
            .map(|f| HashMap::from([("file".to_owned(), f.to_owned())]))
            .unwrap_or_default();
        serve(page, &params, b"", &tokens(), &PageSettings::default())
    }

    fn header<'a>(response: &'a Response<Body>, name: &str) -> &'a str {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn body_json(response: &Response<Body>) -> serde_json::Value {
        match response.body() {
            Body::Text(text) => serde_json::from_str(text).unwrap(),
            other => panic!("not a text body: {other:?}"),
        }
    }

    #[test]
    fn pages_and_assets_carry_their_type_and_the_policy() {
        let mut cases = vec![
            (get(Page::Buyer, None), HTML),
            (get(Page::Dashboard, None), HTML),
            (get(Page::Config, None), JS),
            (get(Page::Asset, Some("app.css")), CSS),
            (get(Page::Asset, Some("buyer.js")), JS),
            (get(Page::Asset, Some("ops.js")), JS),
            (get(Page::Asset, Some("ops.css")), CSS),
            (get(Page::Asset, Some("format.js")), JS),
            (get(Page::Asset, Some("pow.js")), JS),
            (get(Page::Asset, Some("favicon.svg")), SVG),
        ];
        // Every asset by its extension: a module served as anything but
        // JavaScript is refused by the browser.
        for asset in ASSETS {
            let content_type = match asset.name.rsplit('.').next() {
                Some("js") => JS,
                Some("css") => CSS,
                Some("svg") => SVG,
                other => panic!("{}: no content type for {other:?}", asset.name),
            };
            cases.push((get(Page::Asset, Some(asset.name)), content_type));
        }
        for (response, content_type) in &cases {
            assert_eq!(response.status(), 200);
            assert_eq!(header(response, "content-type"), *content_type);
            assert_eq!(header(response, "cache-control"), "no-cache");
            assert_eq!(header(response, "x-content-type-options"), "nosniff");
            let csp = header(response, "content-security-policy");
            assert!(csp.contains("default-src 'self'"), "{csp}");
            assert!(csp.contains("script-src 'self';"), "{csp}");
            // The buyer page's proof of work runs in a Web Worker.
            assert!(csp.contains("worker-src 'self';"), "{csp}");
            assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
        }
    }

    #[test]
    fn every_asset_a_page_links_is_served_and_no_page_has_inline_script() {
        for page in [BUYER_PAGE, DASHBOARD_PAGE] {
            for link in page.split("/assets/").skip(1) {
                let name: String = link
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
                    .collect();
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "a page links /assets/{name}, which is not in ASSETS"
                );
            }
            // Every <script> has a src: the policy would block an inline one.
            for tag in page.split("<script").skip(1) {
                let open = tag.split('>').next().unwrap_or_default();
                assert!(open.contains("src="), "inline <script{open}>");
            }
            assert!(!page.contains("style=\""), "inline style attribute");
            // No `onclick="..."` and the like: handlers are inline script.
            for rest in page.split(" on").skip(1) {
                let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
                assert!(
                    name.is_empty() || !rest[name.len()..].starts_with('='),
                    "inline event handler on{name}="
                );
            }
        }
    }

    /// The names a script loads: its `import ... from "./x.js"` and
    /// `import "./x.js"`, and `new Worker("/assets/x.js")`.
    fn loads_of(script: &str) -> Vec<String> {
        let mut names = Vec::new();
        for prefix in ["from \"./", "import \"./", "Worker(\"/assets/"] {
            for rest in script.split(prefix).skip(1) {
                names.push(rest.split('"').next().unwrap_or_default().to_owned());
            }
        }
        names
    }

    #[test]
    fn every_module_a_script_imports_is_served_and_every_file_is_listed() {
        let mut loaded = std::collections::BTreeSet::new();
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let script = std::str::from_utf8(asset.body).unwrap();
            for name in loads_of(script) {
                assert!(
                    ASSETS.iter().any(|a| a.name == name),
                    "{} loads ./{name}, which is not in ASSETS",
                    asset.name
                );
                loaded.insert(name);
            }
        }
        // Each page's entry point loads the rest: no module is left out.
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let entry = ["buyer.js", "ops.js"].contains(&asset.name);
            assert!(
                entry || loaded.contains(asset.name),
                "nothing loads {}",
                asset.name
            );
        }
        // And every file of web/assets/ is served: a new module cannot be
        // forgotten here.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../web/assets");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "web/assets/{name} is not in ASSETS"
            );
        }
    }

    #[test]
    fn unknown_assets_and_climbing_paths_are_not_found() {
        for name in [
            "nope.js",
            "../index.html",
            "..%2Fops.html",
            "",
            "APP.CSS",
            "app.css/",
            "../../Cargo.toml",
        ] {
            let response = get(Page::Asset, Some(name));
            assert_eq!(response.status(), 404, "{name}");
            assert_eq!(body_json(&response)["code"], "NOT_FOUND");
        }
        assert_eq!(get(Page::Asset, None).status(), 404);
    }

    fn config_of(settings: &PageSettings) -> serde_json::Value {
        let js = settings.config_js();
        let json = js
            .strip_prefix("window.SECKILL_CONFIG = ")
            .and_then(|s| s.trim_end().strip_suffix(';'))
            .unwrap();
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn config_names_the_sale_and_local_auth() {
        assert_eq!(
            config_of(&PageSettings::for_demo_sale("launch-1")),
            serde_json::json!({"apiBase": "", "auth": "local", "saleId": "launch-1"})
        );
        assert_eq!(PageSettings::for_demo_sale("").sale_id, "demo");
        let hosted = PageSettings::for_demo_sale("launch-1").with_login_url(Some(
            "https://id.example/oauth2/authorize?client_id=c".into(),
        ));
        assert_eq!(
            config_of(&hosted),
            serde_json::json!({"apiBase": "", "auth": "cognito", "saleId": "launch-1",
                "loginUrl": "https://id.example/oauth2/authorize?client_id=c"})
        );
    }

    #[test]
    fn the_token_route_mints_what_the_gateway_accepts() {
        for admin in [false, true] {
            let body = serde_json::json!({"user": "alice_1", "admin": admin}).to_string();
            let response = serve(
                Page::Token,
                &HashMap::new(),
                body.as_bytes(),
                &tokens(),
                &PageSettings::default(),
            );
            assert_eq!(response.status(), 200);
            assert_eq!(header(&response, "cache-control"), "no-store");
            let reply = body_json(&response);
            assert_eq!(reply["userId"], "alice_1");
            let claims = tokens().verify(reply["token"].as_str().unwrap()).unwrap();
            assert_eq!(claims["sub"], "alice_1");
            assert_eq!(claims["scope"].contains("seckill/admin"), admin);
            let exp: i64 = claims["exp"].parse().unwrap();
            assert_eq!(reply["expiresAt"], clock::rfc3339_ms(exp * 1000));
            let ttl = exp - clock::now_ms() / 1000;
            assert!((LOCAL_TOKEN_TTL_SECS - 5..=LOCAL_TOKEN_TTL_SECS).contains(&ttl));
        }
        // `admin` may be left out: a buyer.
        let response = serve(
            Page::Token,
            &HashMap::new(),
            br#"{"user": "bob"}"#,
            &tokens(),
            &PageSettings::default(),
        );
        assert_eq!(response.status(), 200);
    }

    #[test]
    fn the_token_route_refuses_bad_users_and_bodies() {
        // A user id is any sub of 1 to 255 bytes without control characters
        // ("a b", "a{b}" and "ünï" are ones): these are not.
        let long = format!(r#"{{"user": "{}"}}"#, "a".repeat(256));
        let huge = format!(r#"{{"user": "{}"}}"#, "a".repeat(5000));
        for body in [
            r#"{"user": ""}"#,
            r#"{"user": "a\nb"}"#,
            r#"{"user": "a\u0000"}"#,
            long.as_str(),
            huge.as_str(),
            r#"{"user": 7}"#,
            r#"{"user": "a", "admin": "yes"}"#,
            r#"{"user": "a", "scope": "seckill/admin"}"#,
            r#"{}"#,
            "",
            "not json",
        ] {
            let response = serve(
                Page::Token,
                &HashMap::new(),
                body.as_bytes(),
                &tokens(),
                &PageSettings::default(),
            );
            assert_eq!(response.status(), 400, "{body}");
            assert_eq!(body_json(&response)["code"], "INVALID_REQUEST", "{body}");
        }
    }
}
