//! A waiting gate on its run's page: the decision form, the gate's list
//! with a form to drop, edit or add an item, and how its outputs differ
//! from what its latest decision was made on. The forms post here and go
//! through `baton_engine::gate`, as `baton gate` and the API do.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Path as Params, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_engine::gate::{self, Change, GateEdit, GateState, GateView, ListKind};
use baton_engine::view::Status;
use baton_engine::workspace::utc;
use serde::Deserialize;

use crate::api;
use crate::app::App;
use crate::auth::Person;
use crate::error::ApiError;
use crate::html::{PageError, encode, escape};

/// A section per gate waiting for a decision (its first, or a new one once
/// its outputs changed after the last): its forms for a person
/// logged in (a link to the login page for anyone else), its list and its
/// changes since the last decision.
pub(crate) async fn sections(app: &App, status: &Status, person: Option<&Person>) -> String {
    let mut html = String::new();
    for state in &status.gates {
        if !waits(state.state) || status.run.status != "awaiting_human" {
            continue;
        }
        let run = escape(&encode(&status.run.run_id));
        let stage = escape(&state.stage);
        let stage_link = escape(&encode(&state.stage));
        let Some(Person(name)) = person else {
            let _ = write!(
                html,
                "<div class=\"gate\"><p>Gate <strong>{stage}</strong> waits for a decision. \
                 <a href=\"/login\">Log in</a> to decide.</p></div>"
            );
            html.push_str(&detail(app, status, &state.stage, None).await);
            continue;
        };
        let _ = write!(
            html,
            "<form class=\"gate\" method=\"post\" action=\"/runs/{run}/gates/{stage_link}\">\
             <p>Gate <strong>{stage}</strong> waits for a decision \
             (<a href=\"/api/runs/{run}/stages/{stage_link}/log\">its log</a>); \
             you decide as {name}.</p>\
             <label>Comment <input name=\"comment\"></label> \
             <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>\
             <button type=\"submit\" name=\"decision\" value=\"push-back\">Push back</button>\
             <button type=\"submit\" name=\"decision\" value=\"reject\">Reject</button></form>",
            name = escape(name),
        );
        let action = format!("/runs/{run}/gates/{stage_link}/items");
        html.push_str(&detail(app, status, &state.stage, Some(&action)).await);
    }
    html
}

/// Whether a gate in `state` waits for a decision: awaiting its first, or
/// stale (decided on outputs that changed since).
pub(crate) fn waits(state: GateState) -> bool {
    matches!(state, GateState::Awaiting | GateState::Stale)
}

/// The gate's list (with its forms when `action` is where they post) and
/// its changes; a gate that cannot be read says why.
async fn detail(app: &App, status: &Status, stage: &str, action: Option<&str>) -> String {
    let view = match gate::show(&app.store, &status.run.run_id, stage).await {
        Ok(view) => view,
        Err(error) => {
            return format!(
                "<p class=\"error\">{}</p>",
                escape(&crate::error::chain(&error))
            );
        }
    };
    let mut html = format!(
        "<div class=\"gate-detail\" data-gate=\"{}\">",
        escape(stage)
    );
    html.push_str(&list(&view, action));
    html.push_str(&changes(&view));
    html.push_str("</div>");
    html
}

/// The editable list, numbered; a *Drop* button per item and the *Edit*
/// and *Add* forms when `action` is given.
fn list(view: &GateView, action: Option<&str>) -> String {
    let Some((output, kind, items)) = view.outputs.iter().find_map(|output| {
        output
            .list
            .as_ref()
            .map(|(kind, items)| (output, *kind, items))
    }) else {
        return String::new();
    };
    let mut html = format!(
        "<h3>List in <code>{}</code> ({} items)</h3><ol class=\"items\">",
        escape(&output.path),
        items.len()
    );
    for (at, item) in items.iter().enumerate() {
        let _ = write!(html, "<li><span class=\"mono\">{}</span>", escape(item));
        if let Some(action) = action {
            let _ = write!(
                html,
                " <form class=\"item\" method=\"post\" action=\"{action}\">\
                 <input type=\"hidden\" name=\"action\" value=\"drop\">\
                 <input type=\"hidden\" name=\"n\" value=\"{}\">\
                 <button type=\"submit\">Drop</button></form>",
                at + 1
            );
        }
        html.push_str("</li>");
    }
    html.push_str("</ol>");
    let Some(action) = action else {
        return html;
    };
    // A markdown item has one field; a JSON item's field is named.
    let field = match kind {
        ListKind::Markdown => "<input type=\"hidden\" name=\"field\" value=\"text\">".to_owned(),
        ListKind::Json => {
            "<label>Field <input name=\"field\" value=\"text\" required></label> ".to_owned()
        }
    };
    let _ = write!(
        html,
        "<form class=\"item-edit\" method=\"post\" action=\"{action}\">\
         <input type=\"hidden\" name=\"action\" value=\"edit\">\
         <label>Item <input name=\"n\" type=\"number\" min=\"1\" required></label> {field}\
         <label>Value <input name=\"value\"></label> <button type=\"submit\">Edit</button></form>\
         <form class=\"item-add\" method=\"post\" action=\"{action}\">\
         <input type=\"hidden\" name=\"action\" value=\"add\">\
         <label>New item <input name=\"text\" required></label> <button type=\"submit\">Add</button></form>"
    );
    html
}

/// Each output against what the latest decision was made on.
fn changes(view: &GateView) -> String {
    let Some(since) = &view.since else {
        return "<h3>Changes</h3><p>None to show: the gate waits for its first decision.</p>"
            .to_owned();
    };
    let row = &since.decision;
    let mut html = format!(
        "<h3>Changes since the last decision</h3><p>{} by {} at {} (attempt {}).</p>",
        escape(&row.decision.replace('_', " ")),
        escape(&row.decided_by),
        escape(&utc(row.decided_at)),
        row.attempt
    );
    for output in &view.outputs {
        let Some(diff) = &output.diff else { continue };
        let path = escape(&output.path);
        let Some(unified) = &diff.unified else {
            let said = match diff.change {
                Change::NotKept => "changed; its content at the decision was not kept",
                change => change.as_str(),
            };
            let _ = write!(html, "<p><code>{path}</code>: {said}</p>");
            continue;
        };
        let _ = write!(
            html,
            "<p><code>{path}</code>: {}{}</p><pre class=\"diff\">",
            diff.change.as_str(),
            if diff.truncated {
                " (only its start is compared)"
            } else {
                ""
            }
        );
        for line in unified.lines() {
            let class = match line.as_bytes().first() {
                Some(b'+') => "add",
                Some(b'-') => "del",
                Some(b'@') => "hunk",
                _ => "same",
            };
            let _ = writeln!(html, "<span class=\"{class}\">{}</span>", escape(line));
        }
        html.push_str("</pre>");
    }
    html
}

/// The item forms' fields: `action` is `drop`, `edit` or `add`.
#[derive(Debug, Deserialize)]
pub(crate) struct ItemForm {
    action: String,
    #[serde(default)]
    n: String,
    #[serde(default)]
    field: String,
    #[serde(default)]
    value: String,
    #[serde(default)]
    text: String,
}

impl ItemForm {
    fn change(self) -> Result<GateEdit, ApiError> {
        let bad = |message: &str| ApiError::new(StatusCode::BAD_REQUEST, message);
        let n = || {
            self.n
                .trim()
                .parse::<usize>()
                .map_err(|_| bad("the item is a number from 1"))
        };
        match self.action.as_str() {
            "drop" => Ok(GateEdit::Drop(n()?)),
            "edit" if self.field.trim().is_empty() => Err(bad("an edit names a field")),
            "edit" => Ok(GateEdit::Edit {
                n: n()?,
                field: self.field.trim().to_owned(),
                value: self.value,
            }),
            "add" if self.text.trim().is_empty() => Err(bad("an added item has text")),
            "add" => Ok(GateEdit::Add(self.text)),
            _ => Err(bad("the action is drop, edit or add")),
        }
    }
}

/// `POST /runs/{run}/gates/{stage}/items`: the edit, as the person logged
/// in, then back to the run.
pub(crate) async fn edit_items(
    State(app): State<Arc<App>>,
    axum::Extension(person): axum::Extension<Option<Person>>,
    Params((run, stage)): Params<(String, String)>,
    Form(form): Form<ItemForm>,
) -> Result<Response, PageError> {
    api::edit_as(&app, person.as_ref(), &run, &stage, &form.change()?).await?;
    let back = format!("/runs/{}", encode(&run));
    Ok((StatusCode::SEE_OTHER, [(header::LOCATION, back)]).into_response())
}
