//! The shapes of the JSON API's answers, for its OpenAPI document. Each
//! mirrors a value `baton_engine::view` builds as JSON (what the CLI prints
//! with `--format json`); these types only describe those values and are
//! never built. A field listed is always present (`null` where its type
//! says so); a large shape (a run's status, its governance) lists the
//! fields a script reads and allows the rest.

#![allow(
    dead_code,
    reason = "the types describe JSON built elsewhere; nothing constructs them"
)]

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::ToSchema;

/// Why a request failed.
#[derive(ToSchema)]
pub(crate) struct ErrorBody {
    error: String,
}

/// A run as `baton runs --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct RunSummary {
    run_id: String,
    workflow: String,
    /// `running`, `succeeded`, `failed`, `cancelled`, …
    status: String,
    /// When it started, in UTC.
    started_at: String,
    #[schema(required = true)]
    finished_at: Option<String>,
    #[schema(required = true)]
    duration_ms: Option<i64>,
    /// `total`, then how many of its stages have each status.
    stages: BTreeMap<String, i64>,
    /// Dollars its agents reported, when any did.
    #[schema(required = true)]
    cost_usd: Option<f64>,
    /// The run it is a sub-run of.
    #[schema(required = true)]
    parent: Option<String>,
}

/// A run's status, as a filter names it.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum RunStatusName {
    Pending,
    Running,
    AwaitingHuman,
    Success,
    Failed,
    Cancelled,
    Rejected,
}

/// One server-sent event of `GET /api/runs/{run}/events`.
#[derive(ToSchema)]
pub(crate) struct StatusEvent {
    /// `status` (the whole object; always the first) or `delta` (the
    /// same object with only the stages that changed).
    event: String,
    /// The run's status, as `GET /api/runs/{run}` answers it (whole, or
    /// with the changed stages only), as JSON text.
    data: String,
}

/// A run as `baton status RUN --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct RunStatus {
    run_id: String,
    workflow: String,
    status: String,
    workspace: String,
    started_at: String,
    #[schema(required = true)]
    finished_at: Option<String>,
    #[schema(required = true)]
    error: Option<String>,
    /// Recorded as running with no process driving it.
    driver_gone: bool,
    gates: Vec<RunGate>,
    /// Each with its units, findings, cost, retries and sub-run when it has them.
    stages: Vec<StageStatus>,
}

/// A gate in a run's status.
#[derive(ToSchema)]
pub(crate) struct RunGate {
    stage: String,
    status: GateState,
    #[schema(required = true)]
    decided_by: Option<String>,
    #[schema(required = true)]
    decided_at: Option<String>,
    #[schema(required = true)]
    comment: Option<String>,
}

/// A stage in a run's status.
#[derive(ToSchema)]
pub(crate) struct StageStatus {
    index: i64,
    stage: String,
    /// `pending`, `running`, `succeeded`, `failed`, `skipped`, …
    status: String,
    #[schema(required = true)]
    duration_ms: Option<i64>,
    attempts: i64,
    #[schema(required = true)]
    error: Option<String>,
    #[schema(required = true)]
    note: Option<String>,
}

/// Where a gate stands.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum GateState {
    Awaiting,
    Approved,
    Rejected,
    PushedBack,
    Stale,
}

/// A gate as `baton gate list RUN --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct Gate {
    run_id: String,
    run_status: String,
    stage: String,
    index: i64,
    attempt: i64,
    status: GateState,
    /// The hash of its outputs now.
    sha256: String,
    /// The current decision, or the latest one when it is stale.
    #[schema(required = true)]
    decision: Option<String>,
    #[schema(required = true)]
    decided_by: Option<String>,
    #[schema(required = true)]
    decided_at: Option<String>,
    #[schema(required = true)]
    comment: Option<String>,
}

/// A gate with its outputs, as `baton gate show RUN STAGE --format json`
/// prints it: the fields of [`Gate`], and `outputs`.
#[derive(ToSchema)]
pub(crate) struct GateView {
    run_id: String,
    run_status: String,
    stage: String,
    index: i64,
    attempt: i64,
    status: GateState,
    sha256: String,
    #[schema(required = true)]
    decision: Option<String>,
    #[schema(required = true)]
    decided_by: Option<String>,
    #[schema(required = true)]
    decided_at: Option<String>,
    #[schema(required = true)]
    comment: Option<String>,
    outputs: Vec<GateOutput>,
}

/// One declared output of a gate.
#[derive(ToSchema)]
pub(crate) struct GateOutput {
    /// Relative to the run's workspace.
    path: String,
    /// Its text; `null` when it is missing.
    #[schema(required = true)]
    content: Option<String>,
    /// The list a gate edit changes, when the output holds one.
    #[schema(required = true)]
    list: Option<GateList>,
}

/// An editable list in a gate's output.
#[derive(ToSchema)]
pub(crate) struct GateList {
    kind: ListKind,
    items: Vec<String>,
}

/// How an output holds its list.
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
pub(crate) enum ListKind {
    Json,
    Markdown,
}

/// A gate's list after an edit, as `baton gate drop|edit|add --format json`
/// prints it.
#[derive(ToSchema)]
pub(crate) struct Edited {
    run_id: String,
    stage: String,
    path: String,
    kind: ListKind,
    items: Vec<String>,
    /// The output's new hash.
    sha256: String,
}

/// A decision as `baton gate approve --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct Decided {
    run_id: String,
    stage: String,
    /// `approved`, `rejected` or `pushed_back`.
    decision: String,
    decided_by: String,
    decided_at: String,
    #[schema(required = true)]
    comment: Option<String>,
    /// The attempt of the gate's stage decided on.
    attempt: i64,
    /// The hash of the outputs decided on.
    sha256: String,
}

/// A run's recorded outputs checked against its workspace, as
/// `baton verify RUN --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct Verification {
    run_id: String,
    status: String,
    workspace: String,
    /// Every output is as recorded.
    intact: bool,
    outputs: Vec<VerifiedOutput>,
    /// The stages `baton resume` would run again.
    rerun: Vec<Rerun>,
}

/// A recorded output as it is now.
#[derive(ToSchema)]
pub(crate) struct VerifiedOutput {
    stage: String,
    path: String,
    state: OutputState,
}

/// How a recorded output compares with its record.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum OutputState {
    Intact,
    Changed,
    Deleted,
}

/// A stage a resume would run again, and why.
#[derive(ToSchema)]
pub(crate) struct Rerun {
    stage: String,
    why: String,
}

/// What `baton cancel RUN` says.
#[derive(ToSchema)]
pub(crate) struct Cancelled {
    run_id: String,
    message: String,
}

/// A job's status.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum JobStatus {
    Available,
    Running,
    Failed,
    Succeeded,
    Error,
}

/// A job as `baton queue show ID --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct Job {
    id: i64,
    queue: String,
    kind: String,
    status: JobStatus,
    priority: i64,
    attempts: i64,
    max_attempts: i64,
    deferrals: i64,
    #[schema(required = true)]
    not_before: Option<String>,
    #[schema(required = true)]
    lease_owner: Option<String>,
    lease_epoch: i64,
    #[schema(required = true)]
    lease_until: Option<String>,
    #[schema(required = true)]
    idempotency_key: Option<String>,
    #[schema(required = true)]
    created_at: Option<String>,
    #[schema(required = true)]
    started_at: Option<String>,
    #[schema(required = true)]
    finished_at: Option<String>,
    /// As JSON when it is, else as text.
    payload: Value,
    #[schema(required = true)]
    result: Option<Value>,
    #[schema(required = true)]
    error: Option<String>,
}

/// A task as `baton task list --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct TaskSummary {
    task: String,
    /// Its phase, from the artifacts its folder holds; `?` when they
    /// cannot be read.
    phase: String,
    /// `task`, `fix`, `review`, `tiebreak` or `sub-task`.
    kind: String,
    description: String,
    archived: bool,
}

/// An active task as `baton task status NAME --format json` prints it.
#[derive(ToSchema)]
pub(crate) struct TaskStatus {
    task: String,
    phase: String,
    /// The artifacts that show the phase.
    signal: Vec<String>,
    /// What `baton task run` does next.
    next_phase: String,
    why: String,
}

/// A run's governance, as `baton state summary --run RUN --format json`
/// prints it (its other sections are allowed, not listed).
#[derive(ToSchema)]
pub(crate) struct Governance {
    mode_selected: GovernanceMode,
    closure_decision: Closure,
    /// What the ledger cannot show.
    evidence_limits: Vec<String>,
}

/// Which ledger the summary reads.
#[derive(ToSchema)]
pub(crate) struct GovernanceMode {
    scope_kind: String,
    scope_key: String,
    mode: String,
}

/// Whether the work may close.
#[derive(ToSchema)]
pub(crate) struct Closure {
    closed: bool,
    decision: String,
    may_close: bool,
    blockers: Vec<String>,
}

/// An approval's or a rejection's body: a comment recorded with it.
#[derive(ToSchema)]
pub(crate) struct DecisionBody {
    comment: Option<String>,
}

/// A push-back's body: what to change, which the stage's agent is given.
#[derive(ToSchema)]
pub(crate) struct PushBackBody {
    #[schema(pattern = r"\S")]
    comment: String,
}

/// An edit of a gate's list: one of `{"drop": N}`,
/// `{"edit": {"n": N, "field": "…", "value": "…"}}` or `{"add": "…"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum ItemEdit {
    Drop(DropItem),
    Edit(EditItem),
    Add(AddItem),
}

/// Drops item `drop` (from 1).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DropItem {
    #[schema(minimum = 1, maximum = 9_007_199_254_740_992_u64)]
    #[serde(deserialize_with = "whole")]
    pub(crate) drop: usize,
}

/// Sets a field of an item.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditItem {
    pub(crate) edit: EditFields,
}

/// Item `n` (from 1), the field to set and its new value.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct EditFields {
    #[schema(minimum = 1, maximum = 9_007_199_254_740_992_u64)]
    #[serde(deserialize_with = "whole")]
    pub(crate) n: usize,
    pub(crate) field: String,
    pub(crate) value: String,
}

/// Adds an item.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddItem {
    pub(crate) add: String,
}

/// The largest whole number a JSON number written as a float holds exactly
/// (2^53): the documented maximum of an item number.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// An item number as JSON Schema counts integers: `3` and `3.0` alike.
fn whole<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "only a whole number within usize's range is cast"
    )]
    let integral = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|float| float.fract() == 0.0 && (0.0..=EXACT).contains(float))
            .map(|float| float as u64)
    });
    integral
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| D::Error::custom("an item number is a whole number from 1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(body: &str) -> Option<ItemEdit> {
        serde_json::from_str(body).ok()
    }

    #[test]
    fn an_item_edit_is_one_of_three_objects_with_whole_item_numbers() {
        assert!(matches!(
            parsed(r#"{"drop": 2}"#),
            Some(ItemEdit::Drop(DropItem { drop: 2 }))
        ));
        assert!(matches!(
            parsed(r#"{"drop": 2.0}"#),
            Some(ItemEdit::Drop(DropItem { drop: 2 }))
        ));
        assert!(matches!(parsed(r#"{"add": "x"}"#), Some(ItemEdit::Add(_))));
        let edit = parsed(r#"{"edit": {"n": 1, "field": "f", "value": "v"}}"#);
        assert!(matches!(
            edit,
            Some(ItemEdit::Edit(EditItem {
                edit: EditFields { n: 1, .. }
            }))
        ));
        for refused in [
            r#"{"drop": 2.5}"#,
            r#"{"drop": -1}"#,
            r#"{"drop": 1e300}"#,
            r#"{"drop": "1"}"#,
            r#"{"drop": 1, "add": "x"}"#,
            r#"{"add": 3}"#,
            r#"[]"#,
            r#"{}"#,
        ] {
            assert!(parsed(refused).is_none(), "{refused}");
        }
    }
}
