//! `GET /api/openapi.json`: the OpenAPI document of the JSON API, built
//! from the handlers' `#[utoipa::path]` annotations and the shapes in
//! [`schemas`]. A test below fails when a route of the router under
//! `/api/` is missing from it; schemathesis checks the server's answers
//! against it (`crates/cli/tests/cli/contract.rs`).

pub(crate) mod schemas;

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, RefOr, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi, PartialSchema};

use crate::{
    api, decisions, events, governance_page, queue_page, runs_page, task_board, task_page,
};

/// The name of the bearer-token scheme (the annotations spell it out: `utoipa` takes a literal there).
const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "baton serve",
        description = "The JSON API of `baton serve`: runs, their status, logs, gates, \
                       verification and governance, tasks, and the job queue, in the shapes the \
                       CLI prints with `--format json`. Every `POST` needs a person's token \
                       (`baton token create --name NAME`); reading needs one only when the \
                       server is bound beyond loopback."
    ),
    paths(
        document,
        runs_page::api,
        task_board::list,
        task_page::status,
        task_page::governance,
        api::status,
        api::log,
        events::events,
        governance_page::api,
        api::gates,
        api::gate,
        api::edit_items,
        decisions::approve,
        decisions::reject,
        decisions::push_back,
        api::verify,
        api::cancel,
        queue_page::jobs,
        api::job,
    ),
    // Path and query parameters' own types are not collected by themselves.
    components(schemas(schemas::JobStatus, schemas::RunStatusName)),
    modifiers(&Guarded),
    tags(
        (name = "runs", description = "Runs, their status, logs and events"),
        (name = "gates", description = "Human gates: reading, editing and deciding"),
        (name = "queue", description = "The durable job queue"),
        (name = "tasks", description = "Task folders: their phases and governance"),
    )
)]
struct ApiDoc;

/// The document, as JSON text, built once.
static TEXT: LazyLock<String> = LazyLock::new(|| {
    ApiDoc::openapi().to_json().unwrap_or_else(|error| {
        format!(r#"{{"error": "the document did not serialise: {error}"}}"#)
    })
});

/// `GET /api/openapi.json`.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "runs",
    security((), ("bearer" = [])),
    responses((status = 200, description = "This document (OpenAPI 3.1)", body = Object)),
)]
pub(crate) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], TEXT.as_str())
}

/// What every route answers because of the guard in front of it
/// (`guard`, `auth`), and the bearer-token scheme.
struct Guarded;

impl Modify for Guarded {
    fn modify(&self, document: &mut Document) {
        let components = document.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A person's token, from `baton token create`"))
                    .build(),
            ),
        );
        let shared = [
            (
                "401",
                "No token where one is needed (every POST; every request beyond loopback), \
                 or one that is not valid",
            ),
            (
                "403",
                "A `Host` that does not name this server, or a POST whose `Origin` is not its own",
            ),
            ("503", "The store is unavailable"),
        ];
        for item in document.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.post];
            for operation in operations.into_iter().flatten() {
                for (status, description) in shared {
                    operation
                        .responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| error_response(description));
                }
            }
        }
    }
}

/// A response carrying `{"error": "..."}`.
pub(crate) fn error_response(description: &str) -> RefOr<Response> {
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(schemas::ErrorBody::schema()))
                    .build(),
            )
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_route_of_the_router_is_in_the_document() {
        let document = ApiDoc::openapi();
        let routes: Vec<&str> = crate::routes::api_routes()
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        assert!(routes.len() > 10, "the API's routes are listed");
        for path in &routes {
            assert!(path.starts_with("/api/"), "{path}");
            assert!(
                document.paths.paths.contains_key(*path),
                "{path} is routed but not in the OpenAPI document: annotate its handler \
                 with #[utoipa::path] and list it in ApiDoc"
            );
        }
        for path in document.paths.paths.keys() {
            assert!(
                routes.contains(&path.as_str()),
                "{path} is in the document but not routed"
            );
        }
    }

    #[test]
    fn writing_needs_the_bearer_token_and_reading_may_carry_it() {
        let value = serde_json::to_value(ApiDoc::openapi()).unwrap();
        assert_eq!(value["openapi"], "3.1.0");
        assert_eq!(
            value["components"]["securitySchemes"][BEARER]["scheme"],
            "bearer"
        );
        for (path, item) in value["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let security = operation["security"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{method} {path} says whether it needs a token"));
                let optional = security
                    .iter()
                    .any(|requirement| requirement == &serde_json::json!({}));
                assert_eq!(optional, method == "get", "{method} {path}: {security:?}");
                for status in ["401", "403", "503"] {
                    assert!(
                        operation["responses"][status].is_object(),
                        "{method} {path} answers {status}"
                    );
                }
            }
        }
    }
}
