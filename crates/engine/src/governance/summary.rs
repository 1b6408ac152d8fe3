//! The `workflow_state_summary` object of docs/governance.md, built from a folded
//! ledger. Its shape is pinned by `docs/schemas/workflow-state-summary.schema.json`.

use baton_lifecycle::governance::{FindingStatus, Identity, Stage};
use serde_json::{Value, json};

use super::codec::Entry;
use super::{Report, Scope, ScopeKind, stage_name};

fn who(identity: &Identity) -> Value {
    json!({"profile": identity.profile, "model": identity.model, "session": identity.session})
}

/// The summary of `report` for `scope`.
pub fn summary(scope: &Scope, report: &Report) -> Value {
    let state = &report.state;
    let last = report.entries.last();
    let last_violation = last.and_then(|l| report.violations.iter().find(|v| v.seq == l.seq));
    let reviews = reviews(report);
    let validations: Vec<Value> = state
        .validations()
        .iter()
        .map(|v| json!({"seq": v.seq, "command": v.command, "exit_code": v.exit_code, "covered": v.covered}))
        .collect();
    let coupling = coupling(report);
    let findings: Vec<Value> = state
        .findings()
        .iter()
        .enumerate()
        .map(|(n, (text, status))| {
            let status = match status {
                FindingStatus::Open => "open",
                FindingStatus::Repaired => "repaired_awaiting_rereview",
                FindingStatus::Resolved => "resolved",
            };
            json!({"finding": n, "text": text, "status": status})
        })
        .collect();
    let blockers: Vec<String> = state
        .closure_blockers()
        .into_iter()
        .map(|(_, refusal)| refusal.reason)
        .collect();
    let blocked_commands: Vec<Value> = state
        .blocked_commands()
        .into_iter()
        .map(|(command, code)| json!({"command": command, "exit_code": code}))
        .collect();
    let blocked: Vec<Value> = state
        .blocked_paths()
        .into_iter()
        .map(|(path, command, code)| json!({"path": path, "command": command, "exit_code": code}))
        .collect();
    let (mode, observes, cannot) = mode(scope.kind);
    json!({
        "mode_selected": {
            "scope_kind": scope.kind.as_str(),
            "scope_key": scope.key,
            "mode": mode,
        },
        "boundaries_inspected": {
            "clarified": state.clarified(),
            "inspected": state.inspected(),
            "validation_intent": state.validation_intent(),
        },
        "workflow_state": {
            "stage": stage_name(state.stage()),
            "next_stages": report.next_stages().iter().map(|s| stage_name(*s)).collect::<Vec<_>>(),
            "events": report.entries.len(),
            "owner": who(state.owner()),
        },
        "transition_decision": {
            "last_event_seq": last.map(|l| l.seq),
            "last_event_kind": last.map(|l| l.entry.encode().0),
            "decision": state.transition_word(last_violation.is_some()).as_str(),
            "allowed": last_violation.is_none(),
            "reason": last_violation.map(|v| v.reason.clone()),
            "violations": report.violations.iter().map(|v| json!({"seq": v.seq, "rule": v.rule, "reason": v.reason})).collect::<Vec<_>>(),
        },
        "owner_review_map": {
            "owner": who(state.owner()),
            "independently_reviewed": state.independently_reviewed(),
            "reviews": reviews,
            "waivers": report.waivers.iter().map(|(rule, reason, seq)| json!({"seq": seq, "rule": rule, "reason": reason})).collect::<Vec<_>>(),
        },
        "validation_freshness": {
            "status": report.freshness.word(),
            "claimed": report.freshness.claimed,
            "fresh": report.freshness.stale.is_none(),
            "edits": report.freshness.edits,
            "reason": report.freshness.stale,
            "validations": validations,
        },
        "repair_rereview_ledger": {
            "findings": findings,
            "awaiting_rereview": report.unresolved().iter().filter(|f| f.2 == FindingStatus::Repaired).count(),
        },
        "tool_permission_adapter_limits": {
            "observes": observes,
            "cannot_observe": cannot,
            "blocked_paths": blocked,
            "blocked_commands": blocked_commands,
        },
        "trajectory_validation_coupling": coupling,
        "closure_decision": {
            "closed": state.stage() == Stage::Closed,
            "decision": state.closure_word().as_str(),
            "may_close": blockers.is_empty(),
            "blockers": blockers,
            "closure": report.closure.as_ref().map(|c| json!({
                "proven": c.proven, "not_proven": c.not_proven,
                "residual_risk": c.residual_risk, "next_owner": c.next_owner,
            })),
        },
        "evidence_limits": [
            "order is the ledger's sequence; recorded times are informational",
            "a validation without declared coverage is taken to cover every path",
            "content hashes are taken when an edit is recorded, not re-checked later",
            "the ledger holds what was recorded; actions outside it are unknown",
        ],
        "residual_risk": {
            "stated": report.closure.as_ref().map(|c| c.residual_risk.clone()),
            "open": report.check().into_iter().map(|(rule, why)| format!("{rule}: {why}")).collect::<Vec<_>>(),
        },
    })
}

/// The reviews and re-reviews in the ledger, each with whether its
/// reviewer is independent of the owner.
fn reviews(report: &Report) -> Vec<Value> {
    let state = &report.state;
    report
        .entries
        .iter()
        .filter_map(|r| match &r.entry {
            Entry::Reviewed { reviewer, findings } => {
                let reviewer = Identity::from(reviewer);
                Some(json!({
                    "seq": r.seq, "kind": "review", "reviewer": who(&reviewer),
                    "independent": !state.owner().same_owner(&reviewer), "findings": findings,
                }))
            }
            Entry::ReReviewed {
                reviewer,
                finding,
                resolved,
            } => {
                let reviewer = Identity::from(reviewer);
                Some(json!({
                    "seq": r.seq, "kind": "re_review", "reviewer": who(&reviewer),
                    "independent": !state.owner().same_owner(&reviewer),
                    "finding": finding, "resolved": resolved,
                }))
            }
            _ => None,
        })
        .collect()
}

/// For each edited path: its last edit and the validation that covers it
/// since, if any.
fn coupling(report: &Report) -> Vec<Value> {
    let state = &report.state;
    state
        .last_edits()
        .iter()
        .map(|(path, &edited)| {
            let latest = state
                .validations()
                .iter()
                .rev()
                .find(|v| v.seq > edited && v.covers(path));
            json!({
                "path": path,
                "last_edit_seq": edited,
                "validated_by_seq": latest.map(|v| v.seq),
                "passed": latest.is_some_and(|v| v.exit_code == 0),
            })
        })
        .collect()
}

/// The mode, what baton sees in it, and what it cannot see.
fn mode(kind: ScopeKind) -> (&'static str, Vec<&'static str>, Vec<&'static str>) {
    match kind {
        ScopeKind::Run => (
            "workflow_run",
            vec![
                "stage outputs with content hashes",
                "validation units and their findings",
                "the agent profile and model of each stage",
            ],
            vec![
                "what an agent read",
                "edits an agent made outside its declared outputs",
            ],
        ),
        ScopeKind::Task => (
            "task_lifecycle",
            vec!["events recorded with baton state record"],
            vec!["anything not recorded"],
        ),
        ScopeKind::Session => (
            "agent_session",
            vec![
                "Edit, Write and MultiEdit tool calls with content hashes",
                "Read, Grep and Glob tool calls",
                "Bash commands matching the test patterns, with exit codes when the tool reports them",
            ],
            vec![
                "edits made by shell commands",
                "tests run under other command names",
                "whether a test really covers a path",
            ],
        ),
    }
}
