//! The JSON API of a run, its gates and a job: the same values `baton
//! status`, `logs`, `gate list|show|drop|edit|add`, `verify`, `cancel` and
//! `queue show` print with `--format json`, built by the same functions
//! (`baton_engine::view`). The runs list is in `runs_page.rs`, gate
//! decisions in `decisions.rs`, tasks in `task_board.rs` and `task_page.rs`.

use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_engine::gate;
use baton_engine::view::{self, Status};
use serde_json::Value;

use crate::app::App;
use crate::auth::Person;
use crate::error::{ApiError, chain};
use crate::extract::Params;
use crate::openapi::schemas::{self, ErrorBody};

/// `GET /api/runs/{run}`: the run as `baton status RUN --format json`.
#[utoipa::path(get, path = "/api/runs/{run}", tag = "runs", security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id")),
    responses(
        (status = 200, description = "The run's status", body = schemas::RunStatus),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn status(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let status = Status::read(&app.store, &run).await?;
    Ok(Json(status.json()))
}

/// `GET /api/runs/{run}/stages/{stage}/log`: the latest attempt's output
/// then its errors, as text; a stage run as units gives each unit's under
/// a line naming it.
#[utoipa::path(get, path = "/api/runs/{run}/stages/{stage}/log", tag = "runs",
    security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id"), ("stage" = String, Path, description = "A stage's name, or a unit's label")),
    responses(
        (status = 200, description = "The latest attempt's output then its errors", body = String,
         content_type = "text/plain"),
        (status = 404, description = "No such run, or no such stage or unit in it", body = ErrorBody),
    ))]
pub(crate) async fn log(
    State(app): State<Arc<App>>,
    Params((run, stage)): Params<(String, String)>,
) -> Result<Response, ApiError> {
    let store = &app.store;
    let (row, stages, units) =
        tokio::try_join!(store.run(&run), store.stages(&run), store.units(&run))?;
    if !stages.iter().any(|row| row.name == stage) && !units.iter().any(|unit| unit.label == stage)
    {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("run {run} has no stage or unit named '{stage}'"),
        ));
    }
    let text = log_text(Path::new(&row.workspace), (&stages, &units), &stage).await;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// The latest attempt's output then its errors; a stage run as units gives
/// each unit's under a line naming it.
pub(crate) async fn log_text(
    workspace: &Path,
    (stages, units): (&[baton_store::StageRow], &[baton_store::UnitRow]),
    stage: &str,
) -> String {
    let sources = view::logs::sources(workspace, stages, units, Some(stage));
    let many = sources.len() > 1;
    let mut text = String::new();
    for source in sources {
        if many {
            text.push_str(&format!(
                "── {} (attempt {}) ──\n",
                source.label, source.attempt
            ));
        }
        for file in [&source.stdout, &source.stderr] {
            if let Ok(bytes) = tokio::fs::read(file).await {
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    text
}

pub(crate) fn gate_error(error: &gate::Error) -> ApiError {
    let status = match error {
        gate::Error::Store(store) => return ApiError::store(store),
        gate::Error::NoSuchStage { .. } | gate::Error::NotAGate { .. } => StatusCode::NOT_FOUND,
        gate::Error::NoComment { .. } => StatusCode::BAD_REQUEST,
        gate::Error::RanPastGate { .. } => StatusCode::CONFLICT,
        gate::Error::NotReady { .. }
        | gate::Error::AlreadyDecided { .. }
        | gate::Error::RunEnded { .. }
        | gate::Error::Changed { .. } => StatusCode::CONFLICT,
        // A well-formed edit the gate's list, as it is now, cannot take.
        gate::Error::Edit { .. } | gate::Error::NotEditable { .. } => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, chain(error))
}

/// `GET /api/runs/{run}/gates`: the run's gates, waiting or decided, as
/// `baton gate list RUN --format json`.
#[utoipa::path(get, path = "/api/runs/{run}/gates", tag = "gates", security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id")),
    responses(
        (status = 200, description = "The run's gates, waiting or decided", body = Vec<schemas::Gate>),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn gates(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let gates = gate::list(&app.store, Some(&run))
        .await
        .map_err(|error| gate_error(&error))?;
    Ok(Json(gates.iter().map(view::gates::status_json).collect()))
}

/// `GET /api/runs/{run}/gates/{stage}`: a gate with its outputs, as
/// `baton gate show RUN STAGE --format json`.
#[utoipa::path(get, path = "/api/runs/{run}/gates/{stage}", tag = "gates",
    security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id"), ("stage" = String, Path, description = "A stage's name")),
    responses(
        (status = 200, description = "The gate with its outputs", body = schemas::GateView),
        (status = 404, description = "No such run, or no gate of that name in it", body = ErrorBody),
    ))]
pub(crate) async fn gate(
    State(app): State<Arc<App>>,
    Params((run, stage)): Params<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let shown = gate::show(&app.store, &run, &stage)
        .await
        .map_err(|error| gate_error(&error))?;
    Ok(Json(view::gates::view_json(&shown)))
}

/// `GET /api/runs/{run}/verify`: the recorded outputs checked against the
/// workspace, as `baton verify RUN --format json`.
#[utoipa::path(get, path = "/api/runs/{run}/verify", tag = "runs", security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id")),
    responses(
        (status = 200, description = "The recorded outputs checked against the workspace", body = schemas::Verification),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run cannot be verified", body = ErrorBody),
    ))]
pub(crate) async fn verify(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let verification = baton_engine::verify::verify(&app.store, &run)
        .await
        .map_err(|error| engine_error(&error))?;
    Ok(Json(view::gates::verification_json(&verification)))
}

/// `POST /api/runs/{run}/cancel`: as `baton cancel RUN`, answered with
/// what it says.
#[utoipa::path(post, path = "/api/runs/{run}/cancel", tag = "runs", security(("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id")),
    responses(
        (status = 200, description = "What `baton cancel RUN` says", body = schemas::Cancelled),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run cannot be cancelled", body = ErrorBody),
    ))]
pub(crate) async fn cancel(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params(run): Params<String>,
) -> Result<Json<Value>, ApiError> {
    if person.is_none() {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "a token is needed"));
    }
    let message = baton_engine::cancel(&app.store, &run)
        .await
        .map_err(|error| engine_error(&error))?;
    Ok(Json(
        serde_json::json!({ "run_id": run, "message": message }),
    ))
}

/// `GET /api/queue/{id}`: one job, as `baton queue show ID --format json`.
#[utoipa::path(get, path = "/api/queue/{id}", tag = "queue", security((), ("bearer" = [])),
    params(("id" = i64, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = schemas::Job),
        (status = 400, description = "An id that is not a number", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    ))]
pub(crate) async fn job(
    State(app): State<Arc<App>>,
    Params(id): Params<i64>,
) -> Result<Json<Value>, ApiError> {
    let job = app.store.job(id).await?;
    Ok(Json(view::queue::job_json(&job)))
}

fn engine_error(error: &baton_engine::Error) -> ApiError {
    match error {
        baton_engine::Error::Store(store) => ApiError::store(store),
        other => ApiError::new(StatusCode::CONFLICT, chain(other)),
    }
}

/// `POST /api/runs/{run}/gates/{stage}/items` with `{"drop": N}`,
/// `{"edit": {"n": N, "field": "…", "value": "…"}}` or `{"add": "…"}`: an
/// edit of the gate's list, as `baton gate drop|edit|add` makes it, answered
/// with the list as it is now.
#[utoipa::path(post, path = "/api/runs/{run}/gates/{stage}/items", tag = "gates",
    security(("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id"), ("stage" = String, Path, description = "A stage's name")),
    request_body = schemas::ItemEdit,
    responses(
        (status = 200, description = "The list as it is now", body = schemas::Edited),
        (status = 400, description = "A body that is not an edit", body = ErrorBody),
        (status = 404, description = "No such run, or no gate of that name in it", body = ErrorBody),
        (status = 409, description = "An edit the list as it is cannot take (no such item, no such field, no list), or a gate that does not wait for a decision", body = ErrorBody),
    ))]
pub(crate) async fn edit_items(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params((run, stage)): Params<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let change = item_edit(&body).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            r#"the body is {"drop": N}, {"edit": {"n": N, "field": "…", "value": "…"}} or {"add": "…"}"#,
        )
    })?;
    let edited = edit_as(&app, person.as_ref(), &run, &stage, &change).await?;
    Ok(Json(view::gates::edited_json(&run, &stage, &edited)))
}

/// Edits a gate's list through the one function `baton gate drop|edit|add`
/// uses, as the person whose token the request carries.
pub(crate) async fn edit_as(
    app: &App,
    person: Option<&Person>,
    run: &str,
    stage: &str,
    change: &gate::GateEdit,
) -> Result<gate::Edited, ApiError> {
    // As for decisions: never an edit by nobody, whatever the guard let by.
    let Some(Person(by)) = person else {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "a token is needed"));
    };
    gate::edit(&app.store, run, stage, change, by)
        .await
        .map_err(|error| gate_error(&error))
}

fn item_edit(body: &[u8]) -> Option<gate::GateEdit> {
    Some(match serde_json::from_slice(body).ok()? {
        schemas::ItemEdit::Drop(item) => gate::GateEdit::Drop(item.drop),
        schemas::ItemEdit::Add(item) => gate::GateEdit::Add(item.add),
        schemas::ItemEdit::Edit(item) => gate::GateEdit::Edit {
            n: item.edit.n,
            field: item.edit.field,
            value: item.edit.value,
        },
    })
}
