//! `GET /runs/{run}/stages/{stage}`: one stage in full — its state, cost
//! and tokens, the outputs it declared, the prompt its agent was given,
//! the validation findings by cycle and severity, and the tail of its log,
//! which `live.js` follows while the stage runs. Everything shown comes
//! from a workflow or an agent, so all of it is escaped, and a declared
//! output that leads outside the workspace is named, not read.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as Params, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_engine::view::Status;
use baton_store::FindingRow;
use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::html::{PageError, escape, page};
use crate::pages::{cell, duration, encode, status_span};

/// At most this much of an output, a prompt or a log is shown.
const SHOWN_BYTES: usize = 64 * 1024;

pub(crate) async fn stage(
    State(app): State<Arc<App>>,
    Params((run, stage)): Params<(String, String)>,
) -> Result<Response, PageError> {
    let (status, findings, units) = tokio::try_join!(
        Status::read(&app.store, &run),
        app.store.findings(&run),
        app.store.units(&run)
    )?;
    let json = status.json();
    let Some(entry) = json["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| entry["stage"] == stage.as_str())
    else {
        let missing = format!("run {run} has no stage named '{stage}'");
        return Err(ApiError::new(StatusCode::NOT_FOUND, missing).into());
    };
    let workspace = Path::new(&status.run.workspace);
    let index = entry["index"].as_i64().unwrap_or(-1);
    let plan: Value = serde_json::from_str(&status.run.plan).unwrap_or_default();
    let detail = &plan["stage_details"][stage.as_str()];
    let (run_link, stage_link) = (escape(&encode(&run)), escape(&encode(&stage)));
    let mut body = format!(
        "<div id=\"run\" data-run=\"{run_id}\" data-waiting=\"{waiting}\"><p><a class=\"mono\" href=\"/runs/{run_link}\">{run_id}</a></p>\
         <h1>{name}</h1><table class=\"facts\"><tbody>\
         <tr><th>status</th><td data-stage-status=\"{name}\">{}</td></tr>\
         <tr><th>duration</th><td data-stage-duration=\"{name}\">{}</td></tr>\
         <tr><th>attempts</th><td>{}</td></tr><tr><th>cost</th><td>{}</td></tr>\
         <tr><th>tokens</th><td>{}</td></tr><tr><th>error</th><td class=\"error\">{}</td></tr>\
         <tr><th>note</th><td>{}</td></tr></tbody></table>",
        status_span(entry["status"].as_str().unwrap_or_default()),
        duration(&entry["duration_ms"]),
        cell(&entry["attempts"]),
        cell(&entry["cost_usd"]),
        cell(&entry["tokens"]),
        cell(&entry["error"]),
        cell(&entry["note"]),
        run_id = escape(&status.run.run_id),
        name = escape(&stage),
        waiting = escape(&crate::pages::waiting(&status)),
    );
    body.push_str(&outputs(workspace, detail));
    body.push_str(&prompt(workspace, index, &stage));
    body.push_str(&findings_html(&findings, index));
    let log_url = format!("/api/runs/{run_link}/stages/{stage_link}/log");
    let _ = write!(
        body,
        "<h2>Log</h2><p><a href=\"{log_url}\">the whole log</a></p>\
         <pre id=\"stage-log\" data-log=\"{log_url}\" data-stage=\"{}\">{}</pre></div>",
        escape(&stage),
        escape(&log_tail(workspace, (&status.stages, &units), &stage).await)
    );
    Ok(page(&stage, &body).into_response())
}

/// The stage's declared outputs, each as it is now.
fn outputs(workspace: &Path, detail: &Value) -> String {
    let mut html = String::from("<h2>Outputs</h2>");
    let declared: Vec<&str> = detail["writes_to"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if declared.is_empty() {
        html.push_str("<p>None declared.</p>");
    }
    for relative in declared {
        let path = baton_engine::workspace::output_path(relative);
        let shown = if let Some(outside) = baton_engine::workspace::escapes(workspace, &path) {
            format!(
                "<p class=\"error\">leads outside the workspace, to {}: not shown</p>",
                escape(&outside.to_string_lossy())
            )
        } else {
            match read_capped(&workspace.join(&path)) {
                Some(text) => format!("<pre>{}</pre>", escape(&text)),
                None => "<p>not written (or a directory)</p>".to_owned(),
            }
        };
        let _ = write!(html, "<h3 class=\"mono\">{}</h3>{shown}", escape(&path));
    }
    html
}

/// The prompt baton rendered for the stage's agent, if it has one.
fn prompt(workspace: &Path, index: i64, stage: &str) -> String {
    let file = workspace
        .join("dispatch")
        .join(format!("{index:03}-{stage}.prompt.md"));
    match read_capped(&file) {
        Some(text) => format!(
            "<details><summary>The prompt</summary><pre>{}</pre></details>",
            escape(&text)
        ),
        None => String::new(),
    }
}

/// The findings of the stage's validation, cycle by cycle, the most severe first.
fn findings_html(findings: &[FindingRow], index: i64) -> String {
    let mut mine: Vec<&FindingRow> = findings.iter().filter(|row| row.index == index).collect();
    if mine.is_empty() {
        return String::new();
    }
    let rank = |severity: &str| match severity {
        "critical" => 0,
        "minor" => 1,
        _ => 2,
    };
    mine.sort_by_key(|row| (row.cycle, rank(&row.severity), row.position));
    let mut html = String::from(
        "<h2>Findings</h2><table><thead><tr><th>cycle</th><th>severity</th><th>status</th>\
         <th>id</th><th>claim</th><th>expected</th><th>actual</th><th>fix</th></tr></thead><tbody>",
    );
    for row in mine {
        let _ = write!(
            html,
            "<tr class=\"finding finding-{severity}\"><td>{}</td><td>{severity}</td><td>{}</td>\
             <td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            row.cycle,
            escape(&row.status),
            escape(&row.id),
            escape(&row.claim),
            escape(&row.expected),
            escape(&row.actual),
            escape(&row.fix),
            severity = escape(&row.severity),
        );
    }
    html.push_str("</tbody></table>");
    html
}

/// The end of the stage's log, as `GET …/log` gives it whole.
async fn log_tail(
    workspace: &Path,
    rows: (&[baton_store::StageRow], &[baton_store::UnitRow]),
    stage: &str,
) -> String {
    let text = crate::api::log_text(workspace, rows, stage).await;
    text[text.ceil_char_boundary(text.len().saturating_sub(SHOWN_BYTES))..].to_owned()
}

/// A file's text, lossy, cut at [`SHOWN_BYTES`]; `None` when it cannot be read.
fn read_capped(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(SHOWN_BYTES as u64).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}
