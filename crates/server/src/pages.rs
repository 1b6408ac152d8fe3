//! The pages: the runs list and a run's view, built from the same values
//! the API answers with, every recorded string escaped.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Path as Params, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_engine::gate::Decision;
use baton_engine::view::Status;
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::auth::Person;
use crate::error::ApiError;
pub(crate) use crate::html::encode;
use crate::html::{PageError, escape, page};
use crate::{dag, decisions, gate_page, governance_page};

/// A cell of a JSON value: strings as they are, null as `-`.
pub(crate) fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(text) => escape(text),
        other => escape(&other.to_string()),
    }
}

/// `1.2 s`, `3 min 4 s`.
pub(crate) fn duration(value: &Value) -> String {
    let Some(ms) = value.as_i64() else {
        return "-".to_owned();
    };
    let seconds = ms / 1000;
    if seconds < 60 {
        format!("{}.{} s", seconds, (ms % 1000) / 100)
    } else if seconds < 3600 {
        format!("{} min {} s", seconds / 60, seconds % 60)
    } else {
        format!("{} h {} min", seconds / 3600, (seconds % 3600) / 60)
    }
}

pub(crate) fn status_span(status: &str) -> String {
    let status = escape(status);
    format!("<span class=\"status status-{status}\">{status}</span>")
}

/// `GET /runs/{run}`: the run, its gates with their forms, its DAG and
/// its stages; `live.js` keeps the states current.
pub(crate) async fn run(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params(run): Params<String>,
) -> Result<Response, PageError> {
    let status = Status::read(&app.store, &run).await?;
    let json = status.json();
    let id = escape(&status.run.run_id);
    let mut body = format!(
        "<div id=\"run\" data-run=\"{id}\" data-waiting=\"{}\"><h1 class=\"mono\">{id}</h1><p>workflow {} · \
         <span data-run-status>{}</span> · started {} · finished {}</p>",
        escape(&waiting(&status)),
        escape(&status.run.workflow),
        status_span(&status.run.status),
        cell(&json["started_at"]),
        cell(&json["finished_at"]),
    );
    if let Some(error) = &status.run.error {
        let _ = write!(body, "<p class=\"error\">{}</p>", escape(error));
    }
    body.push_str(&gate_page::sections(&app, &status, person.as_ref()).await);
    body.push_str(&graph(&status));
    body.push_str(&stages(&json));
    // The ledger is a second read; a page without it is still worth showing.
    if let Ok(summary) = governance_page::summary(&app, &status.run.run_id).await {
        body.push_str(&governance_page::section(&summary, false));
    }
    body.push_str("</div>");
    Ok(page(&status.run.run_id, &body).into_response())
}

/// The gates waiting and the run's status as this page was drawn, in the
/// words `live.js` compares each event's with: when they differ, the page
/// is drawn anew (a change between drawing and subscribing included).
pub(crate) fn waiting(status: &Status) -> String {
    let gates: Vec<&str> = status
        .gates
        .iter()
        .filter(|gate| gate_page::waits(gate.state))
        .map(|gate| gate.stage.as_str())
        .collect();
    format!("{}|{}", gates.join("\n"), status.run.status)
}

fn graph(status: &Status) -> String {
    let plan: Value = serde_json::from_str(&status.run.plan).unwrap_or_default();
    let mut dependencies = dag::dependencies(&plan);
    let nodes: Vec<dag::Node<'_>> = status
        .stages
        .iter()
        .map(|stage| dag::Node {
            name: &stage.name,
            status: &stage.status,
            depends_on: dependencies.remove(stage.name.as_str()).unwrap_or_default(),
        })
        .collect();
    format!("<h2>Plan</h2>{}", dag::drawing(&nodes))
}

/// The stages table; each status cell names its stage for `live.js`.
fn stages(json: &Value) -> String {
    let mut html = String::from(
        "<h2>Stages</h2><table><thead><tr><th>#</th><th>stage</th><th>status</th>\
         <th>duration</th><th>attempts</th><th>detail</th></tr></thead><tbody>",
    );
    for stage in json["stages"].as_array().into_iter().flatten() {
        let name = stage["stage"].as_str().unwrap_or_default();
        let detail = [&stage["error"], &stage["note"]]
            .into_iter()
            .filter(|value| !value.is_null())
            .map(cell)
            .collect::<Vec<_>>()
            .join("; ");
        let _ = write!(
            html,
            "<tr><td>{}</td><td><a href=\"/runs/{run}/stages/{link}\">{name}</a></td><td data-stage-status=\"{name}\">{}</td>\
             <td data-stage-duration=\"{name}\">{}</td><td>{}</td><td class=\"error\">{detail}</td></tr>",
            cell(&stage["index"]),
            status_span(stage["status"].as_str().unwrap_or_default()),
            duration(&stage["duration_ms"]),
            cell(&stage["attempts"]),
            name = escape(name),
            run = escape(&encode(json["run_id"].as_str().unwrap_or_default())),
            link = escape(&encode(name)),
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// The gate form's fields.
#[derive(Debug, Deserialize)]
pub(crate) struct GateForm {
    decision: String,
    #[serde(default)]
    comment: String,
}

/// `POST /runs/{run}/gates/{stage}`: the decision, then back to the run.
pub(crate) async fn decide(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params((run, stage)): Params<(String, String)>,
    Form(form): Form<GateForm>,
) -> Result<Response, PageError> {
    let Some(decision) = Decision::from_name(&form.decision) else {
        let message = "the decision is approve, reject or push-back";
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message).into());
    };
    let comment = Some(form.comment.trim().to_owned()).filter(|comment| !comment.is_empty());
    decisions::record(&app, person.as_ref(), &run, &stage, decision, comment).await?;
    let back = format!("/runs/{}", encode(&run));
    Ok((StatusCode::SEE_OTHER, [(header::LOCATION, back)]).into_response())
}
