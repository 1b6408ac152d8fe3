//! A stage's contract as data: the same facts its rendered prompt lists
//! (files to write, output checks, validation, inputs), with the paths of
//! the prompt and dispatch files baton wrote for the attempt.

use std::path::Path;

use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use serde_json::{Value, json};

use crate::prompt::{check_path, files_to_write, later_checks};
use crate::workspace::output_path;

/// The contract of `stage` of run `run_id`, whose workspace is `workspace`.
pub(super) fn contract(plan: &Plan, stage: &PlanStage, workspace: &Path, run_id: &str) -> Value {
    let spec = &stage.spec;
    let checks: Vec<Value> = spec
        .validates_output
        .iter()
        .map(|entry| {
            json!({
                "path": workspace.join(check_path(stage, &entry.path.value)),
                "checks": entry.checks.iter().map(|check| check.value.to_string()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let validation = spec.validation.as_ref().map(|validation| {
        json!({
            "strategy": validation.strategy.to_string(),
            "criteria": validation.criteria,
            "domain_rules": validation.domain_rules.iter().map(|rule| json!({
                "id": rule.id,
                "severity": rule.severity.to_string(),
                "description": rule.description,
            })).collect::<Vec<_>>(),
            "max_revisions": validation.max_revisions,
        })
    });
    let upstream: Vec<Value> = stage
        .reads_from
        .iter()
        .map(|&index| &plan.stages[index])
        .map(|upstream| {
            let outputs: Vec<Value> = upstream
                .spec
                .writes_to
                .iter()
                .map(|declared| {
                    let path = workspace.join(output_path(&declared.value));
                    json!({"path": path, "exists": path.is_file()})
                })
                .collect();
            json!({"stage": upstream.name(), "outputs": outputs})
        })
        .collect();
    let prompt = crate::workspace::dispatch_file(workspace, stage, "prompt.md");
    json!({
        "run_id": run_id,
        "workflow": plan.name,
        "stage": stage.name(),
        "kind": spec.kind.as_str(),
        "workspace": workspace,
        "files_to_write": files_to_write(stage, workspace),
        "output_checks": checks,
        "checks_by_later_stages": later_checks(plan, stage, workspace),
        "validation": validation,
        "upstream": upstream,
        "prompt_path": prompt,
        "prompt_written": prompt.is_file(),
        "dispatch_path": crate::workspace::dispatch_file(workspace, stage, "json"),
    })
}
