//! The project's tasks (docs/tasks.md) as a person and a script see them:
//! `GET /tasks`, a board with one column per phase and a card per active
//! task, and `GET /api/tasks`, the array `baton task list --format json`
//! prints. Everything read from a task's files is escaped on the page.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_engine::tasks::{self, Record, TaskKind, Tasks};
use baton_engine::view::tasks::{describe, list as list_json};
use baton_lifecycle::phase::{Phase, TABLE};
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::error::ApiError;
use crate::extract::Filters;
use crate::html::{PageError, escape, page};
use crate::openapi::schemas::{ErrorBody, TaskSummary};
use crate::pages::encode;

/// The phases a task reaches only when it asked for them: their columns
/// are drawn only while a task is in them.
const OPTIONAL: [Phase; 3] = [Phase::Decomposition, Phase::Design, Phase::TestDesign];

/// A task error as the API answers it: a name that is not a task's is
/// 400, a task that is not active 404, an unreadable file 500.
impl From<tasks::Error> for ApiError {
    fn from(error: tasks::Error) -> Self {
        let status = match &error {
            tasks::Error::BadName(_) => StatusCode::BAD_REQUEST,
            tasks::Error::NotFound(_) | tasks::Error::Archived(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, error.to_string())
    }
}

/// The project's tasks, or 404 when the server was given no project.
pub(crate) fn project_tasks(app: &App) -> Result<Tasks, ApiError> {
    app.tasks.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "this server was started without a project: it has no tasks",
        )
    })
}

/// Runs a read of task folders off the async workers: it touches the disk.
pub(crate) async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(read).await.map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("reading the task folders failed: {error}"),
        )
    })?
}

/// `GET /api/tasks`'s filter, as `baton task list` takes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filter {
    /// The archived tasks instead of the active ones.
    #[serde(default)]
    archived: bool,
}

/// `GET /api/tasks?archived=`: the tasks, by name.
#[utoipa::path(get, path = "/api/tasks", tag = "tasks", security((), ("bearer" = [])),
    params(("archived" = Option<bool>, Query, description = "The archived tasks instead of the active ones")),
    responses(
        (status = 200, description = "The tasks, by name", body = Vec<TaskSummary>),
        (status = 400, description = "A query that is not `archived=true|false`", body = ErrorBody),
        (status = 404, description = "The server was started without a project", body = ErrorBody),
    ))]
pub(crate) async fn list(
    State(app): State<Arc<App>>,
    Filters(filter): Filters<Filter>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let tasks = project_tasks(&app)?;
    blocking(move || Ok(list_json(&tasks, filter.archived)?))
        .await
        .map(Json)
}

/// One card: what the board shows of a task.
struct Card {
    name: String,
    record: Record,
    /// What `task status` says of it.
    status: Value,
}

/// What the board is drawn from: the cards, the tasks whose files could
/// not be read (with why), and how many tasks are archived.
struct Board {
    cards: Vec<Card>,
    unreadable: Vec<(String, String)>,
    archived: usize,
}

fn read_board(tasks: &Tasks) -> Result<Board, ApiError> {
    let names = tasks.names(false)?;
    let mut board = Board {
        cards: Vec::new(),
        unreadable: Vec::new(),
        archived: tasks.names(true).map_or(0, |names| names.len()),
    };
    for name in names {
        let card = describe(tasks, &name).and_then(|status| {
            let record = tasks::read_record(&tasks.root().join(&name))?;
            Ok((status, record))
        });
        match card {
            Ok((status, record)) => board.cards.push(Card {
                name,
                record,
                status,
            }),
            Err(error) => board.unreadable.push((name, error.to_string())),
        }
    }
    Ok(board)
}

/// `GET /tasks`: a column per phase, in the table's order, each active
/// task a card in its phase's column.
pub(crate) async fn board(State(app): State<Arc<App>>) -> Result<Response, PageError> {
    let tasks = project_tasks(&app)?;
    let board = blocking(move || read_board(&tasks)).await?;
    let mut body = String::from("<h1>Tasks</h1>");
    if board.cards.is_empty() && board.unreadable.is_empty() {
        body.push_str(
            "<p>No active tasks in <code>tasks/</code>; \
             <code>baton task new \"DESCRIPTION\"</code> creates one.</p>",
        );
    } else {
        body.push_str(&columns(&board.cards));
    }
    for (name, why) in &board.unreadable {
        let _ = write!(
            body,
            "<p class=\"error\">{}: {}</p>",
            escape(name),
            escape(why)
        );
    }
    if board.archived > 0 {
        let _ = write!(
            body,
            "<p>{} archived in <code>tasks/archive/</code> \
             (<a href=\"/api/tasks?archived=true\">the list</a>).</p>",
            board.archived
        );
    }
    Ok(page("tasks", &body).into_response())
}

/// The columns: every phase of the table but the optional ones no task
/// is in.
fn columns(cards: &[Card]) -> String {
    let mut html = String::from("<div class=\"board\">");
    for row in TABLE {
        let here: Vec<&Card> = cards
            .iter()
            .filter(|card| card.status["phase"] == row.name)
            .collect();
        if here.is_empty() && OPTIONAL.contains(&row.phase) {
            continue;
        }
        let name = escape(row.name);
        let _ = write!(
            html,
            "<section class=\"column\" data-phase=\"{name}\"><h2>{name} <span class=\"count\">{}</span></h2>",
            here.len()
        );
        for card in here {
            html.push_str(&card_html(card));
        }
        html.push_str("</section>");
    }
    html.push_str("</div>");
    html
}

/// The name of a task's kind as `task.json` spells it.
pub(crate) fn kind_name(kind: TaskKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A link to a task's page.
pub(crate) fn task_link(name: &str, class: &str) -> String {
    format!(
        "<a class=\"{class}\" href=\"/tasks/{}\">{}</a>",
        escape(&encode(name)),
        escape(name)
    )
}

/// The task a follow-up or sub-task came from, and the word for how.
pub(crate) fn came_from(record: &Record) -> Option<(&'static str, &str)> {
    match (record.kind, &record.origin, &record.parent) {
        (TaskKind::SubTask, _, Some(parent)) => Some(("parent", parent)),
        (_, Some(origin), _) => Some(("origin", origin)),
        (_, _, Some(parent)) => Some(("parent", parent)),
        _ => None,
    }
}

/// A task's card: its name, kind and description, the artifacts that
/// signal its phase, its next step, and where it came from.
fn card_html(card: &Card) -> String {
    let signal: Vec<&str> = card.status["signal"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let signal = if signal.is_empty() {
        "empty folder".to_owned()
    } else {
        signal.join(" + ")
    };
    let kind = kind_name(card.record.kind);
    let mut html = format!(
        "<article class=\"card kind-{kind}\" data-task=\"{name}\">{link} <span class=\"kind\">{kind}</span>\
         <p class=\"description\">{description}</p>\
         <p class=\"signal\">signal: <code>{signal}</code></p>\
         <p class=\"next\">next: {next}</p>",
        kind = escape(&kind),
        name = escape(&card.name),
        link = task_link(&card.name, "task"),
        description = escape(&card.record.description),
        signal = escape(&signal),
        next = escape(card.status["next_phase"].as_str().unwrap_or_default()),
    );
    if let Some((how, from)) = came_from(&card.record) {
        let _ = write!(
            html,
            "<p class=\"from\">{how}: {}</p>",
            task_link(from, how)
        );
    }
    html.push_str("</article>");
    html
}
