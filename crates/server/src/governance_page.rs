//! A run's governance, as `baton state summary --run RUN --format json`
//! prints it: `GET /api/runs/{run}/governance`, and a section of the run's
//! page that shows its fields; a task's page shows its own the same way.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use baton_engine::governance::{self, Identity, Scope, ScopeKind};
use serde_json::Value;

use crate::app::App;
use crate::error::{ApiError, chain};
use crate::extract::Params;
use crate::html::escape;
use crate::openapi::schemas::{ErrorBody, Governance};

/// The summary of the run's governance ledger.
pub(crate) async fn summary(app: &App, run: &str) -> Result<Value, ApiError> {
    // The run must exist: its ledger alone says nothing of a typo.
    app.store.run(run).await?;
    let scope = Scope {
        kind: ScopeKind::Run,
        key: run.to_owned(),
    };
    of_scope(app, &scope).await
}

/// The summary of a run's or a task's governance ledger.
pub(crate) async fn of_scope(app: &App, scope: &Scope) -> Result<Value, ApiError> {
    // Who reads changes nothing in a ledger with events, which names its
    // owner; an empty one is shown as the server's.
    let reader = Identity {
        profile: "person:serve".to_owned(),
        model: None,
        session: "serve".to_owned(),
    };
    let report = governance::load(&app.store, scope, &reader)
        .await
        .map_err(|error| {
            ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, chain(&error))
        })?;
    Ok(governance::summary(scope, &report))
}

/// `GET /api/runs/{run}/governance`.
#[utoipa::path(get, path = "/api/runs/{run}/governance", tag = "runs", security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id")),
    responses(
        (status = 200, description = "The summary of the run's governance ledger", body = Governance),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn api(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Json<Value>, ApiError> {
    summary(&app, &run).await.map(Json)
}

/// The summary's fields, one row each; values other than text as JSON.
/// Folded unless `open`.
pub(crate) fn section(summary: &Value, open: bool) -> String {
    let mut html = format!(
        "<details class=\"governance\"{}><summary>Governance</summary><table class=\"facts\"><tbody>",
        if open { " open" } else { "" }
    );
    for (key, value) in summary.as_object().into_iter().flatten() {
        let shown = match value {
            Value::String(text) => escape(text),
            Value::Null => "-".to_owned(),
            other => escape(&other.to_string()),
        };
        let _ = write!(html, "<tr><th>{}</th><td>{shown}</td></tr>", escape(key));
    }
    html.push_str("</tbody></table></details>");
    html
}
