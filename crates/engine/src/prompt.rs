//! The prompt baton gives an agent, and the dispatch file it is written to
//! before the agent starts, as the reference engine lays it out.
//!
//! baton renders the prompt itself: the description with parameters and
//! `{workspace}` filled in (a single pass; everything else byte for byte),
//! the upstream stages' outputs listed and, below a size limit, inlined, the
//! files to write, the validation criteria, and the completion contract.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use baton_executor::redact::Redactor;
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Kind;
use serde_json::{Value, json};

use crate::workspace::output_path;

/// Upstream outputs up to this size are inlined into the prompt.
pub const INLINE_LIMIT: u64 = 32 * 1024;

/// What a push-back at the stage's gate adds to its next prompt.
pub fn pushed_back(decision: &baton_store::GateDecisionRow) -> String {
    let comment: String = decision
        .comment
        .as_deref()
        .unwrap_or_default()
        .lines()
        .map(|line| format!("> {line}\n"))
        .collect();
    format!(
        "\n## Pushed back at the gate\n\n{} reviewed this stage's previous outputs at its human gate and sent them back with this comment:\n\n{comment}\nRevise the outputs to answer it. The gate waits for a decision on the revised outputs.\n",
        decision.decided_by
    )
}

/// Renders the prompt for `stage`.
pub fn render(plan: &Plan, stage: &PlanStage, workspace: &Path) -> String {
    let workspace_text = workspace.to_string_lossy();
    // Parameters were filled in at compile time; `{workspace}` is known now.
    let description = baton_workflow::template::render(&stage.description, |name| {
        if name == "workspace" {
            Some(workspace_text.as_ref())
        } else {
            None
        }
    });
    let mut prompt = String::new();
    let _ = writeln!(
        prompt,
        "You are the `{}` stage ({}) of the workflow `{}`, run by baton.",
        stage.name(),
        stage.spec.kind,
        plan.name
    );
    let _ = writeln!(
        prompt,
        "Work only from the files of this workspace and the output of commands you run: {workspace_text}"
    );
    if stage.spec.kind != Kind::Publish {
        let _ = writeln!(
            prompt,
            "Do not create anything outside the workspace and the repository (no pull requests, messages or other external side effects): only publish stages may."
        );
    }
    let _ = writeln!(prompt, "\n## Task\n\n{}", description.trim_end());

    if !stage.reads_from.is_empty() {
        let _ = writeln!(prompt, "\n## Inputs\n");
        for &upstream in &stage.reads_from {
            let upstream = &plan.stages[upstream];
            for declared in &upstream.spec.writes_to {
                let relative = output_path(&declared.value);
                let path = workspace.join(&relative);
                let _ = writeln!(
                    prompt,
                    "### {} (from stage `{}`)\n",
                    path.display(),
                    upstream.name()
                );
                match std::fs::metadata(&path) {
                    Ok(metadata) if metadata.len() <= INLINE_LIMIT => {
                        let text = std::fs::read_to_string(&path).unwrap_or_default();
                        let _ = writeln!(prompt, "```\n{}\n```\n", text.trim_end());
                    }
                    Ok(metadata) => {
                        let _ = writeln!(prompt, "({} bytes; read the file)\n", metadata.len());
                    }
                    Err(_) => {
                        let _ = writeln!(
                            prompt,
                            "(not present: the upstream stage wrote nothing here)\n"
                        );
                    }
                }
            }
        }
    }

    if let Some(validation) = &stage.spec.validation {
        let _ = writeln!(prompt, "\n## Validation ({})\n", validation.strategy);
        for criterion in &validation.criteria {
            let _ = writeln!(prompt, "- {criterion}");
        }
        for rule in &validation.domain_rules {
            let _ = writeln!(
                prompt,
                "- [{}] {}: {}",
                rule.severity, rule.id, rule.description
            );
        }
    }

    let files = files_to_write(stage, workspace);
    section(&mut prompt, "Files to write", &files);
    if !stage.spec.validates_output.is_empty() {
        let _ = writeln!(prompt, "\n## Output checks\n");
        for entry in &stage.spec.validates_output {
            let path = workspace.join(check_path(stage, &entry.path.value));
            let checks: Vec<String> = entry
                .checks
                .iter()
                .map(|check| check.value.to_string())
                .collect();
            let _ = writeln!(prompt, "- {}: {}", path.display(), checks.join(", "));
        }
    }
    let later = later_checks(plan, stage, workspace);
    section(
        &mut prompt,
        "Checks later stages make on these files",
        &later,
    );
    let sources = fan_out_sources(plan, stage, workspace);
    section(&mut prompt, "Fan-out source", &sources);
    completion(&mut prompt, stage);
    prompt
}

/// The prompt of an attempt that continues its agent's session: `task`
/// (only what is new) with `{workspace}` filled in, where the workspace
/// is, the files to write and the completion contract. The stage's task
/// and inputs are in the session already.
pub fn continued(stage: &PlanStage, workspace: &Path, task: &str) -> String {
    let workspace_text = workspace.to_string_lossy();
    let task = baton_workflow::template::render(task, |name| {
        (name == "workspace").then_some(workspace_text.as_ref())
    });
    let mut prompt = format!(
        "{}\n\nThe run's workspace is still {workspace_text}; work from its files and the output of commands you run, as before.\n",
        task.trim_end()
    );
    let files = files_to_write(stage, workspace);
    section(&mut prompt, "Files to write", &files);
    completion(&mut prompt, stage);
    prompt
}

/// A section of `lines` as a list under `title`; nothing without lines.
fn section(prompt: &mut String, title: &str, lines: &[String]) {
    if !lines.is_empty() {
        let _ = writeln!(prompt, "\n## {title}\n");
        for line in lines {
            let _ = writeln!(prompt, "- {line}");
        }
    }
}

fn completion(prompt: &mut String, stage: &PlanStage) {
    let _ = writeln!(
        prompt,
        "\n## Completion\n\nWhen every file above is written, stop. baton checks that each exists, was written by you in this attempt{}, then records the stage as done.",
        if stage.spec.validates_output.is_empty() {
            ""
        } else {
            " and passes its output checks"
        }
    );
}

/// The `validates_output` checks other stages declare on this stage's
/// files, as `<path>: check, check`: a producer that knows them writes what
/// its consumers accept.
pub(crate) fn later_checks(plan: &Plan, stage: &PlanStage, workspace: &Path) -> Vec<String> {
    let own = crate::workspace::declared_outputs(stage);
    let mut lines = Vec::new();
    for other in plan
        .stages
        .iter()
        .filter(|other| other.name() != stage.name())
    {
        for entry in &other.spec.validates_output {
            let path = check_path(other, &entry.path.value);
            if own.contains(&path) {
                let checks: Vec<String> = entry
                    .checks
                    .iter()
                    .map(|check| check.value.to_string())
                    .collect();
                lines.push(format!(
                    "{}: {}",
                    workspace.join(&path).display(),
                    checks.join(", ")
                ));
            }
        }
    }
    lines
}

/// What the stages that fan out over `stage`'s output need of it, one line
/// per fan-out: the file, the list's field and the key of each item.
fn fan_out_sources(plan: &Plan, stage: &PlanStage, workspace: &Path) -> Vec<String> {
    let Some(first) = stage.spec.writes_to.first() else {
        return Vec::new();
    };
    let path = workspace.join(output_path(&first.value));
    plan.stages
        .iter()
        .filter_map(|other| {
            let fan_out = other.spec.fan_out.as_ref()?;
            (fan_out.source.value == stage.name()).then(|| {
                format!(
                    "{}: a JSON object with a list at `{}`; stage `{}` runs once per item, keyed by the item's `{}` (unique per item; a plain string or number is its own key)",
                    path.display(),
                    fan_out.field,
                    other.name(),
                    fan_out.key
                )
            })
        })
        .collect()
}

/// The workspace-relative file a `validates_output` path names. The same
/// text as a `writes_to` entry means the same file, so it resolves the way
/// `writes_to` does (a bare name lives under `outputs/`); any other path is
/// relative to the workspace root, as in the reference.
pub fn check_path(stage: &PlanStage, path: &str) -> String {
    if stage
        .spec
        .writes_to
        .iter()
        .any(|declared| declared.value == path)
    {
        output_path(path)
    } else {
        path.to_owned()
    }
}

/// Absolute paths of the files the stage must write.
pub fn files_to_write(stage: &PlanStage, workspace: &Path) -> Vec<String> {
    let mut files: Vec<String> = stage
        .spec
        .writes_to
        .iter()
        .map(|declared| {
            workspace
                .join(output_path(&declared.value))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    if files.is_empty() && stage.spec.kind == Kind::Validate {
        for suffix in ["findings.json", "summary.md"] {
            files.push(
                workspace
                    .join(format!("validation/{}-{suffix}", stage.name()))
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    files
}

/// Writes the stage's dispatch file (`dispatch/NNN-name.json`) and its
/// prompt file (`….prompt.md`), or says which could not be written and why.
/// The dispatch file, a record, keeps no secret the prompt was given; the
/// prompt file is what the agent reads.
pub(crate) fn write_dispatch(
    plan: &Plan,
    stage: &PlanStage,
    workspace: &Path,
    prompt: &str,
) -> Result<(), (PathBuf, std::io::Error)> {
    let path = crate::workspace::dispatch_file(workspace, stage, "json");
    let recorded = Redactor::global().redact(prompt);
    crate::workspace::write_json(&path, &dispatch(plan, stage, workspace, &recorded))
        .map_err(|error| (path, error))?;
    let prompt_file = crate::workspace::dispatch_file(workspace, stage, "prompt.md");
    crate::workspace::write_atomic(&prompt_file, prompt.as_bytes())
        .map_err(|error| (prompt_file, error))
}

/// The dispatch file's content.
pub fn dispatch(plan: &Plan, stage: &PlanStage, workspace: &Path, prompt: &str) -> Value {
    let spec = &stage.spec;
    json!({
        "agent_type": spec.agent.role,
        "agent_name": stage.name(),
        "stage_name": stage.name(),
        "stage_index": stage.index,
        "workflow_name": plan.name,
        "model": spec.agent.model,
        "prompt": prompt,
        "workspace_dir": workspace,
        "writes_to": spec.writes_to.iter().map(|path| path.value.as_str()).collect::<Vec<_>>(),
        "reads_from": spec.reads_from.iter().map(|name| name.value.as_str()).collect::<Vec<_>>(),
        "is_validation": spec.kind == Kind::Validate,
        "validation_strategy": spec.validation.as_ref().filter(|_| spec.kind == Kind::Validate).map(|validation| validation.strategy.as_str()),
        "kind": spec.kind.as_str(),
        "sub_workflow": spec.sub_workflow,
        // baton's addition: where the agent works (`work-dir`: the run's
        // workspace; `worktree`: a git worktree of its own).
        "isolation": spec.agent.isolation.as_str(),
    })
}

#[cfg(test)]
mod tests {
    use baton_workflow::MemoryLoader;

    use super::dispatch;

    #[test]
    fn the_dispatch_file_says_where_the_agent_works() {
        let yaml = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:
  - {name: apart, kind: execute, description: d, agent: {role: coder, access: read-write, isolation: worktree}}
  - {name: shared, kind: gather, description: d, agent: {role: researcher}}
";
        let loader = MemoryLoader::new().with("w.yaml", yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        let plan =
            baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
        let workspace = std::path::Path::new("/ws");
        let isolation = |name: &str| {
            let stage = plan.stage(name).expect("stage");
            dispatch(&plan, stage, workspace, "p")["isolation"].clone()
        };
        assert_eq!(isolation("apart"), "worktree");
        assert_eq!(isolation("shared"), "work-dir");
    }
}
