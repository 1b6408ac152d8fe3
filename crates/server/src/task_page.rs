//! One task: `GET /tasks/{name}`, its status as `baton task status NAME`
//! shows it, the files of its folder, its follow-ups and sub-tasks, and
//! its governance as `baton state summary --task NAME` gives it;
//! `GET /api/tasks/{name}`, the object `baton task status NAME --format
//! json` prints; and `GET /api/tasks/{name}/governance`, the summary.
//!
//! A name is checked before any path is made of it (`tasks::check_name`:
//! lowercase letters, digits and `-`), so no request reads outside
//! `tasks/`; a task folder that is a symbolic link is not followed.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use baton_engine::governance::{Scope, ScopeKind};
use baton_engine::tasks::{self, Record, Tasks};
use baton_engine::view::tasks::describe;
use baton_engine::workspace::utc;
use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::extract::Params;
use crate::governance_page;
use crate::html::{PageError, escape, page};
use crate::openapi::schemas::{ErrorBody, Governance, TaskStatus};
use crate::pages::cell;
use crate::task_board::{blocking, came_from, kind_name, project_tasks, task_link};

/// The folder of an active task, refused when it is a symbolic link (it
/// could lead anywhere; `task list` does not show one either).
fn folder(tasks: &Tasks, name: &str) -> Result<std::path::PathBuf, ApiError> {
    let dir = tasks.active(name)?;
    match std::fs::symlink_metadata(&dir) {
        Ok(metadata) if metadata.is_dir() => Ok(dir),
        _ => Err(tasks::Error::NotFound(name.to_owned()).into()),
    }
}

/// `GET /api/tasks/{name}`.
#[utoipa::path(get, path = "/api/tasks/{name}", tag = "tasks", security((), ("bearer" = [])),
    params(("name" = String, Path, description = "An active task's name (its folder under `tasks/`)")),
    responses(
        (status = 200, description = "The task's phase and what comes next", body = TaskStatus),
        (status = 400, description = "A name no task can have", body = ErrorBody),
        (status = 404, description = "No such active task", body = ErrorBody),
    ))]
pub(crate) async fn status(
    State(app): State<Arc<App>>,
    Params(name): Params<String>,
) -> Result<Json<Value>, ApiError> {
    let tasks = project_tasks(&app)?;
    blocking(move || {
        folder(&tasks, &name)?;
        Ok(describe(&tasks, &name)?)
    })
    .await
    .map(Json)
}

/// `GET /api/tasks/{name}/governance`: what `baton state summary --task
/// NAME --format json` prints.
#[utoipa::path(get, path = "/api/tasks/{name}/governance", tag = "tasks", security((), ("bearer" = [])),
    params(("name" = String, Path, description = "A task's name, active or archived")),
    responses(
        (status = 200, description = "The summary of the task's governance ledger", body = Governance),
        (status = 400, description = "A name no task can have", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
    ))]
pub(crate) async fn governance(
    State(app): State<Arc<App>>,
    Params(name): Params<String>,
) -> Result<Json<Value>, ApiError> {
    // The name must be a task's; its ledger alone says nothing of a typo.
    let tasks = project_tasks(&app)?;
    let key = name.clone();
    blocking(move || match tasks.anywhere(&key) {
        Some(_) => Ok(()),
        None => {
            tasks::check_name(&key)?;
            Err(tasks::Error::NotFound(key).into())
        }
    })
    .await?;
    let scope = Scope {
        kind: ScopeKind::Task,
        key: name,
    };
    governance_page::of_scope(&app, &scope).await.map(Json)
}

/// A file of the task's folder, as the page lists it.
struct Artifact {
    name: String,
    /// `None` for what is not a plain file (a directory, a link).
    size: Option<u64>,
    modified_ms: Option<i64>,
    counts: bool,
}

/// A task that came from this one.
struct FollowUp {
    name: String,
    kind: String,
    archived: bool,
}

/// What the page is drawn from.
struct Facts {
    status: Value,
    record: Record,
    artifacts: Vec<Artifact>,
    follow_ups: Vec<FollowUp>,
}

fn read_facts(tasks: &Tasks, name: &str) -> Result<Facts, ApiError> {
    let dir = folder(tasks, name)?;
    let status = describe(tasks, name)?;
    let record = tasks::read_record(&dir)?;
    let counted = tasks::status(&dir)?.counted;
    Ok(Facts {
        status,
        record,
        artifacts: artifacts(&dir, &counted)?,
        follow_ups: follow_ups(tasks, name),
    })
}

/// The entries of the folder, by name; links are named, never followed.
fn artifacts(dir: &Path, counted: &[&str]) -> Result<Vec<Artifact>, ApiError> {
    let entries = std::fs::read_dir(dir).map_err(|error| {
        ApiError::from(tasks::Error::Io {
            path: dir.to_path_buf(),
            source: error,
        })
    })?;
    let mut files: Vec<Artifact> = entries
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let metadata = entry.metadata().ok().filter(std::fs::Metadata::is_file);
            Artifact {
                counts: counted.contains(&name.as_str()),
                size: metadata.as_ref().map(std::fs::Metadata::len),
                modified_ms: metadata
                    .and_then(|metadata| metadata.modified().ok())
                    .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
                    .and_then(|since| i64::try_from(since.as_millis()).ok()),
                name,
            }
        })
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// The tasks, active or archived, whose record names `name` as their
/// origin or parent. A task whose record cannot be read is left out.
fn follow_ups(tasks: &Tasks, name: &str) -> Vec<FollowUp> {
    let mut found = Vec::new();
    for archived in [false, true] {
        let root = tasks.root_of(archived);
        for other in tasks.names(archived).unwrap_or_default() {
            let Ok(record) = tasks::read_record(&root.join(&other)) else {
                continue;
            };
            if came_from(&record).is_some_and(|(_, from)| from == name) {
                found.push(FollowUp {
                    name: other,
                    kind: kind_name(record.kind),
                    archived,
                });
            }
        }
    }
    found
}

/// `GET /tasks/{name}`.
pub(crate) async fn task(
    State(app): State<Arc<App>>,
    Params(name): Params<String>,
) -> Result<Response, PageError> {
    let tasks = project_tasks(&app)?;
    let key = name.clone();
    let facts = blocking(move || read_facts(&tasks, &key)).await?;
    let mut body = header(&name, &facts);
    body.push_str(&artifacts_table(&facts.artifacts));
    body.push_str(&follow_ups_list(&facts.follow_ups));
    let scope = Scope {
        kind: ScopeKind::Task,
        key: name.clone(),
    };
    // The ledger is a second read; a page without it is still worth showing.
    match governance_page::of_scope(&app, &scope).await {
        Ok(summary) => body.push_str(&governance_page::section(&summary, true)),
        Err(error) => {
            let _ = write!(
                body,
                "<p class=\"error\">the governance ledger: {}</p>",
                escape(&error.message)
            );
        }
    }
    Ok(page(&name, &body).into_response())
}

/// The name, description, kind and origin, then the status as `task
/// status` prints it.
fn header(name: &str, facts: &Facts) -> String {
    let record = &facts.record;
    let mut html = format!(
        "<h1 class=\"mono\">{}</h1><p class=\"description\">{}</p><p>{} · created {}",
        escape(name),
        escape(&record.description),
        escape(&kind_name(record.kind)),
        escape(if record.created_at.is_empty() {
            "-"
        } else {
            &record.created_at
        }),
    );
    if let Some((how, from)) = came_from(record) {
        let _ = write!(html, " · {how}: {}", task_link(from, how));
    }
    if let Some(run) = &record.run_id {
        let _ = write!(
            html,
            " · run <a class=\"mono\" href=\"/runs/{}\">{}</a>",
            escape(&crate::pages::encode(run)),
            escape(run)
        );
    }
    html.push_str("</p><table class=\"facts\"><tbody>");
    let status = &facts.status;
    let signal = status["signal"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" + ")
        })
        .filter(|joined| !joined.is_empty())
        .unwrap_or_else(|| "-".to_owned());
    for (label, value) in [
        ("phase", cell(&status["phase"])),
        ("signal", escape(&signal)),
        ("next", cell(&status["next_phase"])),
        ("why", cell(&status["why"])),
    ] {
        let _ = write!(
            html,
            "<tr><th>{label}</th><td data-status=\"{label}\">{value}</td></tr>"
        );
    }
    html.push_str("</tbody></table>");
    html
}

fn artifacts_table(files: &[Artifact]) -> String {
    let mut html = String::from("<h2>Files</h2>");
    if files.is_empty() {
        html.push_str("<p>The folder is empty.</p>");
        return html;
    }
    html.push_str(
        "<table class=\"artifacts\"><thead><tr><th>file</th><th>bytes</th><th>modified</th>\
         <th>counts</th></tr></thead><tbody>",
    );
    for file in files {
        let _ = write!(
            html,
            "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&file.name),
            file.size
                .map_or_else(|| "-".to_owned(), |size| size.to_string()),
            file.modified_ms.map_or_else(|| "-".to_owned(), utc),
            if file.counts { "yes" } else { "" },
        );
    }
    html.push_str("</tbody></table>");
    html
}

fn follow_ups_list(follow_ups: &[FollowUp]) -> String {
    let mut html = String::from("<h2>Follow-ups and sub-tasks</h2>");
    if follow_ups.is_empty() {
        html.push_str("<p>None.</p>");
        return html;
    }
    html.push_str("<ul class=\"follow-ups\">");
    for task in follow_ups {
        let shown = if task.archived {
            format!(
                "<span class=\"mono\">{}</span> (archived)",
                escape(&task.name)
            )
        } else {
            task_link(&task.name, "follow-up")
        };
        let _ = write!(
            html,
            "<li>{shown} <span class=\"kind\">{}</span></li>",
            escape(&task.kind)
        );
    }
    html.push_str("</ul>");
    html
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    #[test]
    fn names_that_could_leave_tasks_are_refused_before_any_path_is_made() {
        let dir = tempfile::tempdir().expect("temp dir");
        let tasks = Tasks::new(dir.path());
        for name in ["..", "../etc", "a/b", "archive", "", ".hidden", "A"] {
            let error = folder(&tasks, name).expect_err(name);
            assert_eq!(error.status, StatusCode::BAD_REQUEST, "{name}");
        }
        assert_eq!(
            folder(&tasks, "absent").expect_err("absent").status,
            StatusCode::NOT_FOUND
        );
        // A task folder that is a link is not followed.
        std::fs::create_dir_all(tasks.root()).expect("tasks/");
        let outside = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(outside.path(), tasks.root().join("linked")).expect("link");
        assert_eq!(
            folder(&tasks, "linked").expect_err("linked").status,
            StatusCode::NOT_FOUND
        );
        std::fs::create_dir(tasks.root().join("real")).expect("real");
        assert!(folder(&tasks, "real").is_ok());
    }
}
