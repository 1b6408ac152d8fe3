//! The routes, and the layers every one passes.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};

use crate::{App, auth, guard, html};

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(home))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/assets/style.css", get(style))
        .route("/assets/live.js", get(script))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::guard,
        ))
        .with_state(app)
}

async fn home() -> impl IntoResponse {
    html::page("runs", "<h1>runs</h1>")
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../assets/style.css"),
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../assets/live.js"),
    )
}
