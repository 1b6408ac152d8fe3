//! The JSON API: the same values `baton runs`, `baton status` and
//! `baton gate approve|reject` print with `--format json`, built by the
//! same functions (`baton_engine::view`).

use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path as Params, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_engine::gate::{self, Decision};
use baton_engine::view::{self, Status};
use serde_json::Value;

use crate::app::App;
use crate::auth::Person;
use crate::error::{ApiError, chain};

/// `GET /api/runs/{run}`: the run as `baton status RUN --format json`.
pub(crate) async fn status(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let status = Status::read(&app.store, &run)
        .await
        .map_err(|error| ApiError::store(&error))?;
    Ok(Json(status.json()))
}

/// `GET /api/runs/{run}/stages/{stage}/log`: the latest attempt's output
/// then its errors, as text; a stage run as units gives each unit's under
/// a line naming it.
pub(crate) async fn log(
    State(app): State<Arc<App>>,
    Params((run, stage)): Params<(String, String)>,
) -> Result<Response, ApiError> {
    let store = &app.store;
    let (row, stages, units) =
        tokio::try_join!(store.run(&run), store.stages(&run), store.units(&run))
            .map_err(|error| ApiError::store(&error))?;
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

/// `POST /api/runs/{run}/gates/{stage}/{decision}`, `approve`, `reject`
/// or `push-back`, with a `{"comment": "..."}` (optional but for a
/// push-back): the decision as `baton gate approve --format json` prints
/// it, recorded before the answer.
pub(crate) async fn decide(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params((run, stage, decision)): Params<(String, String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let Some(decision) = Decision::from_name(&decision) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no decision '{decision}': approve, reject or push-back"),
        ));
    };
    let comment = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let value: Value = serde_json::from_slice(&body).map_err(|error| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {error}"),
            )
        })?;
        match value.get("comment") {
            None | Some(Value::Null) => None,
            Some(Value::String(comment)) => Some(comment.clone()),
            Some(_) => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "`comment` must be a string",
                ));
            }
        }
    };
    let row = record(&app, person.as_ref(), &run, &stage, decision, comment).await?;
    Ok(Json(view::decision_json(&run, &stage, &row)))
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

fn gate_error(error: &gate::Error) -> ApiError {
    let status = match error {
        gate::Error::Store(store) => return ApiError::store(store),
        gate::Error::NoSuchStage { .. } | gate::Error::NotAGate { .. } => StatusCode::NOT_FOUND,
        gate::Error::NoComment { .. } => StatusCode::BAD_REQUEST,
        gate::Error::RanPastGate { .. } => StatusCode::CONFLICT,
        gate::Error::NotReady { .. }
        | gate::Error::AlreadyDecided { .. }
        | gate::Error::RunEnded { .. }
        | gate::Error::Changed { .. } => StatusCode::CONFLICT,
        gate::Error::Edit { .. } | gate::Error::NotEditable { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, chain(error))
}

/// `GET /api/runs/{run}/gates`: the run's gates, waiting or decided, as
/// `baton gate list RUN --format json`.
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
pub(crate) async fn job(
    State(app): State<Arc<App>>,
    Params(id): Params<i64>,
) -> Result<Json<Value>, ApiError> {
    let job = app
        .store
        .job(id)
        .await
        .map_err(|error| ApiError::store(&error))?;
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
    let value: Value = serde_json::from_slice(body).ok()?;
    let object = value.as_object().filter(|object| object.len() == 1)?;
    let number = |value: &Value| value.as_u64().and_then(|n| usize::try_from(n).ok());
    if let Some(n) = object.get("drop") {
        return Some(gate::GateEdit::Drop(number(n)?));
    }
    if let Some(text) = object.get("add") {
        return Some(gate::GateEdit::Add(text.as_str()?.to_owned()));
    }
    let edit = object.get("edit")?;
    Some(gate::GateEdit::Edit {
        n: number(edit.get("n")?)?,
        field: edit.get("field")?.as_str()?.to_owned(),
        value: edit.get("value")?.as_str()?.to_owned(),
    })
}
