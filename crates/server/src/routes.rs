//! The routes, and the layers every one passes.

use std::sync::Arc;

use axum::Router;
use axum::extract::RawQuery;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, get, post};

use crate::app::App;
use crate::error::ApiError;
use crate::{
    api, auth, decisions, events, gate_page, governance_page, guard, html, mcp, openapi, pages,
    queue_page, runs_page, stage_page, task_board, task_page,
};

/// The JSON API: every route under `/api/`, and only these. Each is in the
/// OpenAPI document (`openapi`, which tests it).
pub(crate) fn api_routes() -> Vec<(&'static str, MethodRouter<Arc<App>>)> {
    vec![
        ("/api/openapi.json", get(openapi::document)),
        ("/api/queue", get(queue_page::jobs)),
        ("/api/queue/{id}", get(api::job)),
        ("/api/runs", get(runs_page::api)),
        ("/api/tasks", get(task_board::list)),
        ("/api/tasks/{name}", get(task_page::status)),
        ("/api/tasks/{name}/governance", get(task_page::governance)),
        ("/api/runs/{run}", get(api::status)),
        ("/api/runs/{run}/stages/{stage}/log", get(api::log)),
        ("/api/runs/{run}/events", get(events::events)),
        ("/api/runs/{run}/governance", get(governance_page::api)),
        ("/api/runs/{run}/gates", get(api::gates)),
        ("/api/runs/{run}/gates/{stage}", get(api::gate)),
        ("/api/runs/{run}/gates/{stage}/items", post(api::edit_items)),
        (
            "/api/runs/{run}/gates/{stage}/approve",
            post(decisions::approve),
        ),
        (
            "/api/runs/{run}/gates/{stage}/reject",
            post(decisions::reject),
        ),
        (
            "/api/runs/{run}/gates/{stage}/push-back",
            post(decisions::push_back),
        ),
        ("/api/runs/{run}/verify", get(api::verify)),
        ("/api/runs/{run}/cancel", post(api::cancel)),
    ]
}

pub(crate) fn router(app: Arc<App>) -> Router {
    let mut router = Router::new();
    for (path, route) in api_routes() {
        router = router.route(path, route);
    }
    router
        .route("/", get(runs_page::page_of_runs))
        .route("/tasks", get(task_board::board))
        .route("/tasks/{name}", get(task_page::task))
        .route("/runs/{run}", get(pages::run))
        .route("/runs/{run}/plan", get(pages::plan))
        .route("/runs/{run}/gates/{stage}", post(pages::decide))
        .route(
            "/runs/{run}/gates/{stage}/items",
            post(gate_page::edit_items),
        )
        .route("/runs/{run}/stages/{stage}", get(stage_page::stage))
        .route("/queue", get(queue_page::page_of_jobs))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/assets/style.css", get(style))
        .route("/assets/live.js", get(script))
        .nest_service("/mcp", mcp::http_service(app.store.clone()))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::guard,
        ))
        .with_state(app)
}

async fn style(RawQuery(query): RawQuery) -> impl IntoResponse {
    asset(&html::STYLE, query)
}

async fn script(RawQuery(query): RawQuery) -> impl IntoResponse {
    asset(&html::SCRIPT, query)
}

/// An asset, kept by browsers for good when asked for at the address pages
/// link (its text's digest), else looked at again each time.
fn asset(asset: &'static html::Asset, query: Option<String>) -> impl IntoResponse {
    let cache = if query.as_deref() == Some(asset.version()) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    (
        [
            (header::CONTENT_TYPE, asset.content_type),
            (header::CACHE_CONTROL, cache),
        ],
        asset.text,
    )
}

/// Anything else: JSON under `/api/`, a page elsewhere.
async fn not_found(uri: axum::http::Uri) -> axum::response::Response {
    let message = format!("nothing at {}", uri.path());
    if uri.path().starts_with("/api/") {
        ApiError::new(StatusCode::NOT_FOUND, message).into_response()
    } else {
        let body = format!("<h1>Not found</h1><p>{}</p>", html::escape(&message));
        (StatusCode::NOT_FOUND, html::page("not found", &body)).into_response()
    }
}
