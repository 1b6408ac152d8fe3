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
use crate::extract::Filters;
use crate::html::{PageError, escape, page};
use crate::openapi::schemas::{ErrorBody, RunStatusName, RunSummary};
use crate::pages::{cell, duration, encode, status_span};

/// The filters as a query string carries them: `baton runs`'s flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunsQuery {
    status: Option<String>,
    workflow: Option<String>,
    since: Option<String>,
    limit: Option<String>,
}

/// The largest `limit` taken (the document says so too).
const MOST: usize = 1_000_000_000;

impl RunsQuery {
    /// The page's form sends every field, the blank ones too: those
    /// filter nothing there (the API takes a blank as the value it is).
    fn without_blanks(self) -> RunsQuery {
        let given = |field: Option<String>| field.filter(|text| !text.trim().is_empty());
        RunsQuery {
            status: given(self.status),
            workflow: given(self.workflow),
            since: given(self.since),
            limit: given(self.limit),
        }
    }

    fn filter(&self) -> Result<RunFilter, ApiError> {
        let bad = |message: String| ApiError::new(StatusCode::BAD_REQUEST, message);
        if let Some(status) = self.status.as_deref().filter(|s| !RUN_STATUSES.contains(s)) {
            return Err(bad(format!(
                "no run status '{status}': {}",
                RUN_STATUSES.join(", ")
            )));
        }
        let since = self
            .since
            .as_deref()
            .map(baton_engine::cutoff::parse)
            .transpose()
            .map_err(|error| bad(format!("`since`: {error}")))?;
        let limit = self
            .limit
            .as_deref()
            .map(|text| text.trim().parse::<usize>().ok().filter(|n| *n <= MOST))
            .map(|limit| {
                limit.ok_or_else(|| bad(format!("`limit` is a number of runs, 0 to {MOST}")))
            })
            .transpose()?;
        Ok(RunFilter {
            status: self.status.clone(),
            workflow: self.workflow.clone(),
            since,
            limit,
        })
    }
}

/// The runs the filter keeps, oldest first, as `baton runs --format json`.
async fn runs_json(app: &App, query: &RunsQuery) -> Result<Vec<Value>, ApiError> {
    let filter = query.filter()?;
    let (runs, tallies) = tokio::try_join!(app.store.runs(), app.store.run_tallies())?;
    let kept = view::select_runs(&runs, &filter, baton_engine::clock::now_ms());
    Ok(view::runs_json(&kept, &tallies))
}

/// `GET /api/runs?status=&workflow=&since=&limit=`: the runs, oldest first.
/// The document's pattern for `since` takes an age, or a date of any
/// month's first 28 days or of the days after them the month has: 29
/// February, taken too, is left out, as a pattern cannot tell leap years.
#[utoipa::path(get, path = "/api/runs", tag = "runs", security((), ("bearer" = [])),
    params(
        ("status" = Option<RunStatusName>, Query, description = "Only runs with this status"),
        ("workflow" = Option<String>, Query, description = "Only runs of the workflow with this name"),
        ("since" = Option<String>, Query, pattern = "^([0-9]{1,9}[smhdw]|[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31))$",
         description = "Only runs started since then: an age (7d, 12h, 30m, 2w) or a UTC date (2026-12-01; also 2026-12-01T08:30:00Z)"),
        ("limit" = Option<u32>, Query, minimum = 0, maximum = 1_000_000_000, description = "Only the most recent this many runs of those the other filters keep"),
    ),
    responses(
        (status = 200, description = "The runs the filters keep, oldest first", body = Vec<RunSummary>),
        (status = 400, description = "A filter that is not one", body = ErrorBody),
    ))]
pub(crate) async fn api(
    State(app): State<Arc<App>>,
    Filters(query): Filters<RunsQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    runs_json(&app, &query).await.map(Json)
}

/// `GET /`: the runs the form's filters keep, newest first.
pub(crate) async fn page_of_runs(
    State(app): State<Arc<App>>,
    Query(query): Query<RunsQuery>,
) -> Result<Response, PageError> {
    let query = query.without_blanks();
    let runs = runs_json(&app, &query).await?;
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
        return Ok(page("runs", &body).into_response());
    }
    body.push_str(
        "<table><thead><tr><th>run</th><th>status</th><th>workflow</th><th>started</th>\
         <th>duration</th><th>stages</th><th>cost</th></tr></thead><tbody>",
    );
    for run in runs.iter().rev() {
        row(&mut body, run);
    }
    body.push_str("</tbody></table>");
    Ok(page("runs", &body).into_response())
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
