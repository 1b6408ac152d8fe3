//! Who is asking: a person's token, sent as `Authorization: Bearer …` by
//! scripts or kept by a browser in an `HttpOnly`, `SameSite=Strict` cookie
//! after `POST /login`.
//!
//! Writing (every `POST`) needs a person, whose name is recorded as who
//! decided. Reading needs one too when the server is bound beyond
//! loopback; on loopback only this machine's users reach it. The login
//! page and the assets are open to all: they show nothing recorded.

use std::sync::Arc;

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::app::App;
use crate::error::ApiError;
use crate::{html, tokens};

/// The cookie a browser keeps the token in.
const COOKIE: &str = "baton_token";

/// The person a request's token belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Person(pub(crate) String);

/// Whether a path is open to everyone.
fn open(path: &str) -> bool {
    path == "/login" || path.starts_with("/assets/")
}

/// Whether a path is the MCP endpoint's.
fn mcp(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/")
}

/// The person behind a request, `None` when it carries no token and
/// needs none; an error when it needs one or carries one that is not
/// (or no longer) valid.
pub(crate) async fn person(
    app: &App,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<Option<Person>, Response> {
    if open(path) {
        return Ok(None);
    }
    // `/mcp` asks and reads through `POST` too: its tools that change
    // state ask for the person themselves (`mcp`).
    let writes = !matches!(*method, Method::GET | Method::HEAD) && !mcp(path);
    let needed = !app.loopback || writes;
    let refuse = |message: &str| {
        if path.starts_with("/api/") || mcp(path) {
            ApiError::new(StatusCode::UNAUTHORIZED, message).into_response()
        } else {
            login_page(StatusCode::UNAUTHORIZED, message)
        }
    };
    let Some(token) = credential(headers) else {
        return if needed {
            Err(refuse(
                "a token is needed: `Authorization: Bearer TOKEN`, or log in (`baton token create --name NAME` makes one)",
            ))
        } else {
            Ok(None)
        };
    };
    match tokens::owner(&app.store, token).await {
        Ok(Some(name)) => Ok(Some(Person(name))),
        Ok(None) => Err(refuse("the token is not valid (revoked, or never made)")),
        Err(error) => Err(ApiError::store(&error).into_response()),
    }
}

/// The token a request carries: its bearer token, else its cookie.
fn credential(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        return value
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(str::trim);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The login form, with why it is shown.
pub(crate) fn login_page(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<h1>Log in</h1><p>{}</p>\
         <form class=\"login\" method=\"post\" action=\"/login\">\
         <label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\" required></label> \
         <button type=\"submit\">Log in</button></form>\
         <p>A token is made with <code>baton token create --name NAME</code>.</p>",
        html::escape(message)
    );
    (status, html::page("log in", &body)).into_response()
}

/// `GET /login`.
pub(crate) async fn login_form() -> Response {
    login_page(
        StatusCode::OK,
        "Paste your token to decide gates from this browser.",
    )
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct Login {
    token: String,
}

/// `POST /login`: a valid token becomes the browser's cookie.
pub(crate) async fn login(State(app): State<Arc<App>>, Form(login): Form<Login>) -> Response {
    let token = login.token.trim();
    match tokens::owner(&app.store, token).await {
        Ok(Some(_)) => {
            // Only printable ASCII reaches here: the token matched one made
            // by `tokens::create`.
            let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Ok(None) => login_page(
            StatusCode::UNAUTHORIZED,
            "That token is not valid (revoked, or never made).",
        ),
        Err(error) => ApiError::store(&error).into_response(),
    }
}

/// `POST /logout`: the browser forgets its cookie.
pub(crate) async fn logout() -> Response {
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/login"),
            (
                header::SET_COOKIE,
                "baton_token=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
            ),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn app(loopback: bool) -> (tempfile::TempDir, App) {
        let dir = tempfile::tempdir().unwrap();
        let store = baton_store::Store::open_sqlite(&dir.path().join("baton.db"))
            .await
            .unwrap();
        let app = App {
            store,
            hosts: crate::hosts::Hosts::new("127.0.0.1", 7777, &[]),
            loopback,
            stopping: tokio::sync::watch::channel(false).1,
            watchers: crate::app::Watchers::default(),
            tasks: None,
        };
        (dir, app)
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
        );
        headers
    }

    /// The status of the refusal, or `None` with the person let through.
    async fn asked(
        app: &App,
        method: Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Option<String>, StatusCode> {
        person(app, &method, path, headers)
            .await
            .map(|person| person.map(|Person(name)| name))
            .map_err(|refused| refused.status())
    }

    #[tokio::test]
    async fn on_loopback_reading_is_open_and_writing_needs_a_person() {
        let (_dir, app) = app(true).await;
        let token = tokens::create(&app.store, "alice", 1_000).await.unwrap();
        let none = HeaderMap::new();
        assert_eq!(asked(&app, Method::GET, "/api/runs", &none).await, Ok(None));
        assert_eq!(
            asked(&app, Method::POST, "/api/runs/r/gates/g/approve", &none).await,
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            asked(
                &app,
                Method::POST,
                "/api/runs/r/gates/g/approve",
                &bearer(&token)
            )
            .await,
            Ok(Some("alice".to_owned()))
        );
        assert_eq!(
            asked(&app, Method::GET, "/", &bearer("baton_00")).await,
            Err(StatusCode::UNAUTHORIZED),
            "a token that is not one is refused, even where none is needed"
        );
    }

    #[tokio::test]
    async fn beyond_loopback_every_request_needs_a_person_but_the_login() {
        let (_dir, app) = app(false).await;
        let token = tokens::create(&app.store, "alice", 1_000).await.unwrap();
        let none = HeaderMap::new();
        for path in ["/", "/api/runs", "/runs/r", "/api/runs/r/events"] {
            assert_eq!(
                asked(&app, Method::GET, path, &none).await,
                Err(StatusCode::UNAUTHORIZED),
                "{path}"
            );
            assert_eq!(
                asked(&app, Method::GET, path, &bearer(&token)).await,
                Ok(Some("alice".to_owned())),
                "{path}"
            );
        }
        for path in ["/login", "/assets/style.css", "/assets/live.js"] {
            assert_eq!(
                asked(&app, Method::GET, path, &none).await,
                Ok(None),
                "{path}"
            );
        }
        assert_eq!(asked(&app, Method::POST, "/login", &none).await, Ok(None));
    }

    #[tokio::test]
    async fn mcp_reads_through_post_without_a_token_on_loopback_only() {
        let (_dir, near) = app(true).await;
        let none = HeaderMap::new();
        assert_eq!(asked(&near, Method::POST, "/mcp", &none).await, Ok(None));
        assert_eq!(
            asked(&near, Method::POST, "/mcp", &bearer("baton_00")).await,
            Err(StatusCode::UNAUTHORIZED),
            "a forged token is refused before any tool runs"
        );
        assert_eq!(
            asked(&near, Method::POST, "/mcpx", &none).await,
            Err(StatusCode::UNAUTHORIZED),
            "only /mcp itself"
        );
        let (_dir, far) = app(false).await;
        assert_eq!(
            asked(&far, Method::POST, "/mcp", &none).await,
            Err(StatusCode::UNAUTHORIZED)
        );
    }

    #[test]
    fn the_bearer_token_comes_first_then_the_cookie() {
        let mut headers = HeaderMap::new();
        assert_eq!(credential(&headers), None);
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; baton_token=baton_c00k1e; other=1"),
        );
        assert_eq!(credential(&headers), Some("baton_c00k1e"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer baton_b3ar3r"),
        );
        assert_eq!(credential(&headers), Some("baton_b3ar3r"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic x"));
        assert_eq!(credential(&headers), None, "a wrong scheme is no token");
    }
}
