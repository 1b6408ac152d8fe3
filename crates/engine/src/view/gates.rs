//! A gate as `baton gate list|show --format json` prints it and the API
//! answers it.

use serde_json::{Value, json};

use crate::gate::{GateStatus, GateView};
use crate::workspace::utc;

/// One gate's state and decision.
pub fn status_json(status: &GateStatus) -> Value {
    let decision = status.decision.as_ref();
    json!({
        "run_id": status.run_id,
        "run_status": status.run_status,
        "stage": status.stage,
        "index": status.index,
        "attempt": status.attempt,
        "status": status.state.as_str(),
        "sha256": status.sha256,
        "decision": decision.map(|row| row.decision.clone()),
        "decided_by": decision.map(|row| row.decided_by.clone()),
        "decided_at": decision.map(|row| utc(row.decided_at)),
        "comment": decision.and_then(|row| row.comment.clone()),
    })
}

/// A gate with its outputs, their contents, the list a gate edit changes,
/// and how each differs from what the gate's latest decision was made on
/// (`since_decision` names that decision; both `null` before the first).
pub fn view_json(view: &GateView) -> Value {
    let mut value = status_json(&view.status);
    value["outputs"] = view
        .outputs
        .iter()
        .map(|output| {
            json!({
                "path": output.path,
                "content": output.content,
                "list": output.list.as_ref().map(|(kind, items)| json!({"kind": kind.as_str(), "items": items})),
                "diff": output.diff.as_ref().map(|diff| json!({
                    "change": diff.change.as_str(),
                    "unified": diff.unified,
                    "truncated": diff.truncated,
                })),
            })
        })
        .collect();
    value["since_decision"] = view.since.as_ref().map_or(Value::Null, |since| {
        let row = &since.decision;
        json!({
            "decision": row.decision,
            "decided_by": row.decided_by,
            "decided_at": utc(row.decided_at),
            "attempt": row.attempt,
            "outputs_kept": since.kept,
        })
    });
    value
}

/// What `baton verify --format json` prints.
pub fn verification_json(verification: &crate::verify::Verification) -> Value {
    json!({
        "run_id": verification.run_id,
        "status": verification.status,
        "workspace": verification.workspace,
        "intact": verification.intact(),
        "outputs": verification.outputs,
        "rerun": verification.rerun,
    })
}

/// What `baton gate drop|edit|add --format json` prints: the list now.
pub fn edited_json(run_id: &str, stage: &str, edited: &crate::gate::Edited) -> Value {
    json!({
        "run_id": run_id,
        "stage": stage,
        "path": edited.path,
        "kind": edited.kind.as_str(),
        "items": edited.items,
        "sha256": edited.sha256,
    })
}
