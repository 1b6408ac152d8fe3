//! `POST /api/runs/{run}/gates/{stage}/approve`, `…/reject` and
//! `…/push-back`: a decision on a gate as the token's person, recorded
//! before the answer, which is the decision as `baton gate approve
//! --format json` prints it. Each is its own route, so the document can
//! say that only a push-back needs a comment.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use baton_engine::gate::{self, Decision};
use baton_engine::view;
use serde_json::Value;

use crate::api::gate_error;
use crate::app::App;
use crate::auth::Person;
use crate::error::ApiError;
use crate::extract::Params;
use crate::openapi::schemas::{self, ErrorBody};

/// The request a decision is made by.
type Asked = (
    State<Arc<App>>,
    axum::Extension<Option<Person>>,
    Params<(String, String)>,
);

/// `…/approve`: the run goes on past the gate.
#[utoipa::path(post, path = "/api/runs/{run}/gates/{stage}/approve", tag = "gates",
    security(("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id"),
        ("stage" = String, Path, description = "The gate's stage")),
    request_body(content = Option<schemas::DecisionBody>, description = "A comment, optional"),
    responses(
        (status = 200, description = "The decision, recorded", body = schemas::Decided),
        (status = 400, description = "A body that is not a JSON object, or a comment that is not a string", body = ErrorBody),
        (status = 404, description = "No such run, or no gate of that name in it", body = ErrorBody),
        (status = 409, description = "The gate does not wait for a decision (not run yet, already decided, the run ended)", body = ErrorBody),
    ))]
pub(crate) async fn approve(
    State(app): State<Arc<App>>,
    person: axum::Extension<Option<Person>>,
    params: Params<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    decide((State(app), person, params), Decision::Approve, &body).await
}

/// `…/reject`: the run ends at the gate.
#[utoipa::path(post, path = "/api/runs/{run}/gates/{stage}/reject", tag = "gates",
    security(("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id"),
        ("stage" = String, Path, description = "The gate's stage")),
    request_body(content = Option<schemas::DecisionBody>, description = "A comment, optional"),
    responses(
        (status = 200, description = "The decision, recorded", body = schemas::Decided),
        (status = 400, description = "A body that is not a JSON object, or a comment that is not a string", body = ErrorBody),
        (status = 404, description = "No such run, or no gate of that name in it", body = ErrorBody),
        (status = 409, description = "The gate does not wait for a decision (not run yet, already decided, the run ended)", body = ErrorBody),
    ))]
pub(crate) async fn reject(
    State(app): State<Arc<App>>,
    person: axum::Extension<Option<Person>>,
    params: Params<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    decide((State(app), person, params), Decision::Reject, &body).await
}

/// `…/push-back`: the gate's stage runs again with the comment in its
/// prompt.
#[utoipa::path(post, path = "/api/runs/{run}/gates/{stage}/push-back", tag = "gates",
    security(("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id"),
        ("stage" = String, Path, description = "The gate's stage")),
    request_body(content = schemas::PushBackBody, description = "What to change"),
    responses(
        (status = 200, description = "The decision, recorded", body = schemas::Decided),
        (status = 400, description = "A body that is not a JSON object, or no comment", body = ErrorBody),
        (status = 404, description = "No such run, or no gate of that name in it", body = ErrorBody),
        (status = 409, description = "The gate does not wait for a decision (not run yet, already decided, the run ended), or a stage after it ran on its outputs", body = ErrorBody),
    ))]
pub(crate) async fn push_back(
    State(app): State<Arc<App>>,
    person: axum::Extension<Option<Person>>,
    params: Params<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    decide((State(app), person, params), Decision::PushBack, &body).await
}

async fn decide(
    (State(app), axum::Extension(person), Params((run, stage))): Asked,
    decision: Decision,
    body: &[u8],
) -> Result<Json<Value>, ApiError> {
    let comment = comment(body)?;
    let row = record(&app, person.as_ref(), &run, &stage, decision, comment).await?;
    Ok(Json(view::decision_json(&run, &stage, &row)))
}

/// A decision's comment: from `{"comment": "..."}`; none from an empty
/// body, `null`, or an object without one.
fn comment(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not JSON: {error}"),
        )
    })?;
    let comment = match &value {
        Value::Null => None,
        Value::Object(object) => object.get("comment"),
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                r#"the body is {"comment": "..."}"#,
            ));
        }
    };
    match comment {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(comment)) => Ok(Some(comment.clone())),
        Some(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "`comment` must be a string",
        )),
    }
}

/// Records a decision through the one function `baton gate` uses, as the
/// person whose token the request carries.
pub(crate) async fn record(
    app: &App,
    person: Option<&Person>,
    run: &str,
    stage: &str,
    decision: Decision,
    comment: Option<String>,
) -> Result<baton_store::GateDecisionRow, ApiError> {
    // The guard lets no POST through without a person; this is the
    // handler's own check that it never records a decision by nobody.
    let Some(Person(by)) = person else {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "a token is needed"));
    };
    gate::decide(&app.store, run, stage, decision, by, comment)
        .await
        .map_err(|error| gate_error(&error))
}
