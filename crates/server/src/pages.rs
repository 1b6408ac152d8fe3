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
use crate::extract::Filters;
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

/// The rows of the stages table one page shows: a bigger run's table is
/// paged, so following a run of thousands of stages costs the browser
/// what following a hundred does.
const ROWS: usize = 100;

/// The most stages whose plan is drawn on the run's page; a bigger plan
/// is drawn on a page of its own (`/runs/{run}/plan`), for whoever wants it.
const DRAWN_HERE: usize = 100;

/// `GET /runs/{run}?from=N`: which stages the table starts at.
#[derive(Debug, Deserialize)]
pub(crate) struct RunPage {
    #[serde(default)]
    from: usize,
}

/// `GET /runs/{run}`: the run, its gates with their forms, how many of its
/// stages stand where, its DAG and its stages; `live.js` keeps the states
/// current.
pub(crate) async fn run(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params(run): Params<String>,
    query: Result<Filters<RunPage>, ApiError>,
) -> Result<Response, PageError> {
    let Filters(RunPage { from }) = query?;
    let status = Status::read(&app.store, &run).await?;
    if from > 0 && from >= status.stages.len() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "this run has {} stages: `from` counts from 0 and must be below that",
                status.stages.len()
            ),
        )
        .into());
    }
    let json = status.json();
    let mut body = heading(&status, &json);
    body.push_str(&gate_page::sections(&app, &status, person.as_ref()).await);
    body.push_str(&counts(&status));
    if status.stages.len() <= DRAWN_HERE {
        body.push_str(&graph(&status));
    } else {
        let _ = write!(
            body,
            "<h2>Plan</h2><p class=\"note\">{} stages: <a href=\"/runs/{}/plan\">the plan\'s drawing</a> \
             has a page of its own.</p>",
            status.stages.len(),
            escape(&encode(&status.run.run_id)),
        );
    }
    body.push_str(&stages(&json, from));
    // The ledger is a second read; a page without it is still worth showing.
    if let Ok(summary) = governance_page::summary(&app, &status.run.run_id).await {
        body.push_str(&governance_page::section(&summary, false));
    }
    body.push_str("</div>");
    Ok(page(&status.run.run_id, &body).into_response())
}

/// `GET /runs/{run}/plan`: the run's DAG alone, its states kept current.
pub(crate) async fn plan(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Response, PageError> {
    let status = Status::read(&app.store, &run).await?;
    let json = status.json();
    let mut body = heading(&status, &json);
    let _ = write!(
        body,
        "<p><a href=\"/runs/{}\">the run's page</a></p>",
        escape(&encode(&status.run.run_id))
    );
    body.push_str(&graph(&status));
    body.push_str("</div>");
    Ok(page(&format!("{} plan", status.run.run_id), &body).into_response())
}

/// The run's id, workflow, status and times, opening the element
/// `live.js` follows (the caller closes it).
fn heading(status: &Status, json: &Value) -> String {
    let id = escape(&status.run.run_id);
    format!(
        "<div id=\"run\" data-run=\"{id}\" data-waiting=\"{}\"><h1 class=\"mono\">{id}</h1>\
         <p>workflow {} · <span data-run-status>{}</span> · started {} · finished <span data-run-finished>{}</span></p>\
         <p class=\"error\" data-run-error{}>{}</p>",
        escape(&waiting(status)),
        escape(&status.run.workflow),
        status_span(&status.run.status),
        cell(&json["started_at"]),
        cell(&json["finished_at"]),
        if status.run.error.is_some() {
            ""
        } else {
            " hidden"
        },
        escape(status.run.error.as_deref().unwrap_or_default()),
    )
}

/// The gates waiting, and whether the run waits at one, as this page was
/// drawn, in the words `live.js` compares each event's with: when they
/// differ, the gate forms differ, and the page is drawn anew (a change
/// between drawing and subscribing included). Any other change, the run's
/// end included, is shown in place.
pub(crate) fn waiting(status: &Status) -> String {
    let gates: Vec<&str> = status
        .gates
        .iter()
        .filter(|gate| gate_page::waits(gate.state))
        .map(|gate| gate.stage.as_str())
        .collect();
    format!(
        "{}|{}",
        gates.join("\n"),
        status.run.status == "awaiting_human"
    )
}

/// How many stages stand in each state, most telling first, in the words
/// `live.js` writes them again at each event: `3 stages: 1 running, 2 pending`.
fn counts(status: &Status) -> String {
    let mut counted: Vec<(&str, usize)> = Vec::new();
    for stage in &status.stages {
        match counted.iter_mut().find(|(name, _)| *name == stage.status) {
            Some((_, count)) => *count += 1,
            None => counted.push((&stage.status, 1)),
        }
    }
    let rank = |name: &str| {
        COUNTED
            .iter()
            .position(|known| *known == name)
            .unwrap_or(COUNTED.len())
    };
    counted.sort_by_key(|(name, _)| rank(name));
    let parts: Vec<String> = counted
        .iter()
        .map(|(name, count)| format!("{count} {}", escape(name)))
        .collect();
    let total = status.stages.len();
    format!(
        "<p data-run-counts=\"{}\">{total} {}: {}</p>",
        COUNTED.join(" "),
        if total == 1 { "stage" } else { "stages" },
        parts.join(", ")
    )
}

/// The order in which the counts name the states.
const COUNTED: [&str; 8] = [
    "running",
    "awaiting_human",
    "failed",
    "rejected",
    "cancelled",
    "pending",
    "success",
    "skipped",
];

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

/// The stages table from stage `from` on, [`ROWS`] of them, with links to
/// the rows before and after; each status cell names its stage for `live.js`.
fn stages(json: &Value, from: usize) -> String {
    let all = json["stages"].as_array().map_or(&[][..], Vec::as_slice);
    let run = escape(&encode(json["run_id"].as_str().unwrap_or_default()));
    let mut html = String::from("<h2>Stages</h2>");
    if all.len() > ROWS {
        html.push_str(&pager(&run, from, all.len()));
    }
    html.push_str(
        "<table><thead><tr><th>#</th><th>stage</th><th>status</th>\
         <th>duration</th><th>attempts</th><th>detail</th></tr></thead><tbody>",
    );
    for stage in all.iter().skip(from).take(ROWS) {
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
            link = escape(&encode(name)),
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// `stages 101–200 of 1000 · previous · next`, the links only where
/// there are rows to go to.
fn pager(run: &str, from: usize, total: usize) -> String {
    let to = (from + ROWS).min(total);
    let mut html = format!("<p class=\"pager\">stages {}–{to} of {total}", from + 1);
    if from > 0 {
        let _ = write!(
            html,
            " · <a href=\"/runs/{run}?from={}\">previous {ROWS}</a>",
            from.saturating_sub(ROWS)
        );
    }
    if to < total {
        let _ = write!(html, " · <a href=\"/runs/{run}?from={to}\">next {ROWS}</a>");
    }
    html.push_str("</p>");
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
