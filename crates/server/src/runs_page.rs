//! The runs: `GET /` (newest first, with a form that filters them) and
//! `GET /api/runs` (the array `baton runs --format json` prints, with the
//! same filters).

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_engine::view::{self, RUN_STATUSES, RunFilter};
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::html::{escape, page};
use crate::pages::{cell, duration, encode, error_page, status_span};

/// The filters as a query string carries them: `baton runs`'s flags. An
/// empty field (a form's blank input) filters nothing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunsQuery {
    status: Option<String>,
    workflow: Option<String>,
    since: Option<String>,
    limit: Option<String>,
}

impl RunsQuery {
    fn filter(&self) -> Result<RunFilter, ApiError> {
        let given = |field: &Option<String>| {
            field
                .as_deref()
                .map(str::trim)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let bad = |message: String| ApiError::new(StatusCode::BAD_REQUEST, message);
        let status = given(&self.status);
        if let Some(status) = status.as_deref().filter(|s| !RUN_STATUSES.contains(s)) {
            return Err(bad(format!(
                "no run status '{status}': {}",
                RUN_STATUSES.join(", ")
            )));
        }
        let since = given(&self.since)
            .map(|text| baton_engine::cutoff::parse(&text))
            .transpose()
            .map_err(|error| bad(format!("`since`: {error}")))?;
        let limit = given(&self.limit)
            .map(|text| text.parse::<usize>())
            .transpose()
            .map_err(|_| bad("`limit` is a number of runs, 0 or more".to_owned()))?;
        Ok(RunFilter {
            status,
            workflow: given(&self.workflow),
            since,
            limit,
        })
    }
}

/// The runs the filter keeps, oldest first, as `baton runs --format json`.
async fn runs_json(app: &App, query: &RunsQuery) -> Result<Vec<Value>, ApiError> {
    let filter = query.filter()?;
    let (runs, tallies) = tokio::try_join!(app.store.runs(), app.store.run_tallies())
        .map_err(|error| ApiError::store(&error))?;
    let kept = view::select_runs(&runs, &filter, baton_engine::clock::now_ms());
    Ok(view::runs_json(&kept, &tallies))
}

/// `GET /api/runs?status=&workflow=&since=&limit=`: the runs, oldest first.
pub(crate) async fn api(
    State(app): State<Arc<App>>,
    Query(query): Query<RunsQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    runs_json(&app, &query).await.map(Json)
}

/// `GET /`: the runs the form's filters keep, newest first.
pub(crate) async fn page_of_runs(
    State(app): State<Arc<App>>,
    Query(query): Query<RunsQuery>,
) -> Response {
    let runs = match runs_json(&app, &query).await {
        Ok(runs) => runs,
        Err(error) => return error_page(&error),
    };
    let mut body = String::from("<h1>Runs</h1>");
    body.push_str(&form(&query));
    if runs.is_empty() {
        let filtered = query
            .filter()
            .is_ok_and(|filter| filter != RunFilter::default());
        body.push_str(if filtered {
            "<p>No run matches these filters.</p>"
        } else {
            "<p>No runs yet; start one with <code>baton run WORKFLOW</code>.</p>"
        });
        return page("runs", &body).into_response();
    }
    body.push_str(
        "<table><thead><tr><th>run</th><th>status</th><th>workflow</th><th>started</th>\
         <th>duration</th><th>stages</th><th>cost</th></tr></thead><tbody>",
    );
    for run in runs.iter().rev() {
        row(&mut body, run);
    }
    body.push_str("</tbody></table>");
    page("runs", &body).into_response()
}

/// One run's row.
fn row(body: &mut String, run: &Value) {
    let counts = run["stages"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(status, _)| *status != "total")
        .map(|(status, count)| format!("{} {}", cell(count), escape(status)))
        .collect::<Vec<_>>()
        .join(", ");
    let cost = run["cost_usd"]
        .as_f64()
        .map_or_else(|| "-".to_owned(), |usd| format!("${usd:.4}"));
    let id = run["run_id"].as_str().unwrap_or_default();
    let _ = write!(
        body,
        "<tr><td><a class=\"mono\" href=\"/runs/{link}\">{id}</a></td><td>{}</td><td>{}</td>\
         <td>{}</td><td>{}</td><td>{counts}</td><td>{cost}</td></tr>",
        status_span(run["status"].as_str().unwrap_or_default()),
        cell(&run["workflow"]),
        cell(&run["started_at"]),
        duration(&run["duration_ms"]),
        id = escape(id),
        link = escape(&encode(id)),
    );
}

/// The filter form, holding the filters the page shows.
fn form(query: &RunsQuery) -> String {
    let value = |field: &Option<String>| escape(field.as_deref().unwrap_or_default());
    let mut options = String::from("<option value=\"\">any</option>");
    for status in RUN_STATUSES {
        let selected = if query.status.as_deref() == Some(status) {
            " selected"
        } else {
            ""
        };
        let _ = write!(options, "<option{selected}>{status}</option>");
    }
    format!(
        "<form class=\"filters\" method=\"get\" action=\"/\">\
         <label>status <select name=\"status\">{options}</select></label> \
         <label>workflow <input name=\"workflow\" value=\"{}\"></label> \
         <label>since <input name=\"since\" value=\"{}\" placeholder=\"7d or 2026-12-01\"></label> \
         <label>most recent <input name=\"limit\" value=\"{}\" size=\"5\"></label> \
         <button>Filter</button></form>",
        value(&query.workflow),
        value(&query.since),
        value(&query.limit),
    )
}
