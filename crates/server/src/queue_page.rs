//! The durable job queue, as a person and a script see it: `GET /queue`
//! (how many jobs each status holds, by queue, then the jobs of each
//! status with their worker's lease) and `GET /api/queue` (the array
//! `baton queue list --format json` prints, with its filters).

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_engine::view::queue::{STATUSES, job_json};
use baton_store::JobFilter;
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::extract::Filters;
use crate::html::{PageError, escape, page};
use crate::openapi::schemas::{ErrorBody, Job, JobStatus};
use crate::pages::{cell, status_span};

/// Jobs one page of the API answers at most, and its default.
const MOST: i64 = 10_000;
const DEFAULT: i64 = 500;
/// Jobs of one status the page shows.
const SHOWN: i64 = 100;

/// `GET /api/queue`'s filters, as `baton queue list` takes them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filter {
    status: Option<String>,
    queue: Option<String>,
    limit: Option<i64>,
    /// Only jobs with a greater id (the last id of a page lists the next).
    after: Option<i64>,
}

/// `GET /api/queue?status=&queue=&limit=&after=`: jobs, oldest first.
#[utoipa::path(get, path = "/api/queue", tag = "queue", security((), ("bearer" = [])),
    params(
        ("status" = Option<JobStatus>, Query, description = "Only jobs of this status"),
        ("queue" = Option<String>, Query, description = "Only jobs of this queue"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 10_000,
         description = "At most this many jobs (default 500)"),
        ("after" = Option<i64>, Query, description = "Only jobs with a greater id: the last id of one page lists the next"),
    ),
    responses(
        (status = 200, description = "The jobs, oldest first", body = Vec<Job>),
        (status = 400, description = "An unknown status or filter, or a limit out of range", body = ErrorBody),
    ))]
pub(crate) async fn jobs(
    State(app): State<Arc<App>>,
    Filters(filter): Filters<Filter>,
) -> Result<Json<Vec<Value>>, ApiError> {
    if let Some(status) = filter
        .status
        .as_deref()
        .filter(|status| !STATUSES.contains(status))
    {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("no job status '{status}': {}", STATUSES.join(", ")),
        ));
    }
    let limit = filter.limit.unwrap_or(DEFAULT);
    if !(1..=MOST).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`limit` is from 1 to {MOST}"),
        ));
    }
    let jobs = app
        .store
        .jobs(&JobFilter {
            status: filter.status,
            queue: filter.queue,
            limit: Some(limit),
            after: filter.after,
        })
        .await?;
    Ok(Json(jobs.iter().map(job_json).collect()))
}

/// `GET /queue`: the counts by queue and status, then each status's jobs.
pub(crate) async fn page_of_jobs(State(app): State<Arc<App>>) -> Result<Response, PageError> {
    let counts = app.store.job_counts().await?;
    let mut body = String::from("<h1>Queue</h1>");
    if counts.is_empty() {
        body.push_str(
            "<p>No jobs. Stages with <code>executor: worker_queue</code> and \
             <code>baton queue enqueue</code> add them; <code>baton worker</code> works them.</p>",
        );
        return Ok(page("queue", &body).into_response());
    }
    body.push_str("<table><thead><tr><th>queue</th>");
    for status in STATUSES {
        let _ = write!(body, "<th>{status}</th>");
    }
    body.push_str("</tr></thead><tbody>");
    let mut queues: Vec<&str> = counts.iter().map(|(queue, _, _)| queue.as_str()).collect();
    queues.dedup();
    for queue in queues {
        let _ = write!(body, "<tr><td>{}</td>", escape(queue));
        for status in STATUSES {
            let count = counts
                .iter()
                .find(|(q, s, _)| q == queue && s == status)
                .map_or(0, |(_, _, count)| *count);
            let _ = write!(body, "<td data-count=\"{status}\">{count}</td>");
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table>");
    for status in STATUSES {
        body.push_str(&status_table(&app, status).await?);
    }
    Ok(page("queue", &body).into_response())
}

/// The first jobs of one status, with their lease.
async fn status_table(app: &App, status: &str) -> Result<String, ApiError> {
    let filter = JobFilter {
        status: Some(status.to_owned()),
        limit: Some(SHOWN),
        ..JobFilter::default()
    };
    let jobs = app.store.jobs(&filter).await?;
    if jobs.is_empty() {
        return Ok(String::new());
    }
    let mut html = format!(
        "<h2>{}</h2><table><thead><tr><th>id</th><th>queue</th><th>kind</th><th>attempts</th>\
         <th>worker</th><th>lease until</th><th>created</th><th>error</th></tr></thead><tbody>",
        status_span(status)
    );
    for job in &jobs {
        let json = job_json(job);
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"error\">{}</td></tr>",
            job.id,
            escape(&job.queue),
            escape(&job.kind),
            job.attempts,
            job.max_attempts,
            cell(&json["lease_owner"]),
            cell(&json["lease_until"]),
            cell(&json["created_at"]),
            cell(&json["error"]),
        );
    }
    html.push_str("</tbody></table>");
    Ok(html)
}
