//! The built-in workflow that carries out a task's phases on the engine.
//!
//! It is generated from the phases still to run (an artifact present and
//! fresh is never dispatched again): one agent stage per phase, whose role
//! is the phase's role (`researcher`, `implementer`, … — `baton.toml` maps
//! roles to agent profiles) and whose one output is the phase's artifact.
//! The file is written to `.baton/tasks/<task>/workflow.yaml` and run like
//! any other, so it gets the store, logs and resume.
//!
//! The run's workspace is `.baton/tasks/<task>/<run id>/`, and its
//! `outputs/` directory is a link to the task folder: an agent writing
//! `outputs/SPEC.md` writes `tasks/<task>/SPEC.md`, and the engine checks
//! and records exactly that file.

use std::path::{Path, PathBuf};

use baton_engine::tasks::{Error, Record, Result, TASKS_DIR, TaskKind, io};
use baton_lifecycle::phase::Phase;
use serde_json::{Value, json};

/// Where the task's workflow and run workspaces live, relative to the
/// project.
pub(crate) fn state_dir(task: &str) -> PathBuf {
    Path::new(".baton").join("tasks").join(task)
}

/// The workflow file, relative to the project.
pub(crate) fn workflow_path(task: &str) -> PathBuf {
    state_dir(task).join("workflow.yaml")
}

/// The workflow running `phases` for the task, as a value (YAML's data
/// model; the file is written as YAML).
pub(crate) fn workflow(task: &str, record: &Record, phases: &[Phase], project: &Path) -> Value {
    let mut stages = Vec::new();
    for (n, &phase) in phases.iter().enumerate() {
        let earlier: Vec<&str> = phases[..n].iter().map(|phase| phase.slug()).collect();
        let mut stage = json!({
            "name": phase.slug(),
            "kind": kind(phase),
            "description": description(task, record, phase, project),
            // Every phase writes its artifact into the task folder, a
            // folder of the repository, and the implementation changes the
            // project: the phases may write the repository.
            "agent": {"role": phase.role(), "access": "read-write"},
            "writes_to": [phase.artifact().expect("a phase that runs writes an artifact")],
        });
        if let Some(previous) = earlier.last() {
            stage["depends_on"] = json!([previous]);
            // Every earlier artifact of this run is inlined into the prompt.
            stage["reads_from"] = json!(earlier);
        }
        stages.push(stage);
    }
    json!({
        "name": format!("task-{task}"),
        "version": "1",
        "description": format!("The phases of task {task}, run by `baton task run`."),
        "trigger": {"source": "manual"},
        "stages": stages,
    })
}

/// Writes the workflow file and returns its path relative to the project.
pub(crate) fn write(project: &Path, task: &str, workflow: &Value) -> Result<String> {
    let relative = workflow_path(task);
    let path = project.join(&relative);
    let parent = path.parent().expect("the path has a parent");
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let text = serde_saphyr::to_string(workflow).map_err(|error| Error::Content {
        path: path.clone(),
        message: error.to_string(),
    })?;
    std::fs::write(&path, text).map_err(io(&path))?;
    Ok(relative.to_string_lossy().into_owned())
}

/// Makes the run's `outputs/` the task folder (a relative link, so the
/// project may move). The engine creates `outputs/` as an empty directory;
/// it is replaced once, before the first stage runs.
pub(crate) fn link_outputs(workspace: &Path, task: &str) -> Result<()> {
    let outputs = workspace.join("outputs");
    match std::fs::symlink_metadata(&outputs) {
        Ok(metadata) if metadata.file_type().is_symlink() => return Ok(()),
        Ok(_) => std::fs::remove_dir(&outputs).map_err(io(&outputs))?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io(&outputs)(error)),
    }
    // workspace = <project>/.baton/tasks/<task>/<run id>
    let target = Path::new("../../../..").join(TASKS_DIR).join(task);
    std::os::unix::fs::symlink(&target, &outputs).map_err(io(&outputs))
}

fn kind(phase: Phase) -> &'static str {
    match phase {
        Phase::Research | Phase::BugFind | Phase::Adversarial | Phase::DocReview => "gather",
        Phase::Implementation => "execute",
        _ => "propose",
    }
}

/// The stage's description: the task, where its folder is, and what the
/// phase asks for.
fn description(task: &str, record: &Record, phase: Phase, project: &Path) -> String {
    let artifact = phase.artifact().unwrap_or_default();
    let mut text = format!(
        "Task `{task}`: {}\n\nYou are the {} of this task, in its {} phase. The project is {}. The task folder is this workspace's `outputs/` directory (the project's `tasks/{task}/`): read what it holds and write `{artifact}` there.\n\n",
        one_line(&record.description),
        phase.role(),
        phase.name(),
        project.display()
    );
    text.push_str(match phase {
        Phase::Research => "Study the task and the repository. Write SPEC.md: the goal, the scope, the constraints and the acceptance criteria.",
        Phase::Decomposition => "Split the task into sub-tasks a person can follow. Write DECOMPOSITION.md with one unindented list line per sub-task: `- short name: what it does`.",
        Phase::Design => "Write DESIGN.md: how the change is made, the parts it touches and the alternatives rejected.",
        Phase::TestDesign => "Write TEST_PLAN.md: the tests that show the acceptance criteria hold, including failure cases.",
        Phase::Implementation => "Make the change in the project. Write IMPLEMENTATION.md: what changed, where, and how it was checked.",
        Phase::BugFind => "Look for bugs in the implementation. Write BUG_REPORT.md with one `- title: details` line per bug (or `- none`).",
        Phase::Adversarial => "Attack the implementation: hostile input, edge cases, concurrency, what the bug report missed. Write ADVERSARIAL_BUG_REPORT.md in the same form.",
        Phase::DocReview => "Check that the documentation matches the implementation. Write DOC_REVIEW.md with what is wrong or missing.",
        Phase::Referee => "Weigh the reports and decide. Write VERDICT.md: a line `PASS`, `FAIL` or `NEEDS_REVIEW`, then `## Findings` (one `- issue: details` line per finding that must be fixed), `## Remaining Issues` and `## Tasks for Review / Tie-Breaks` (one line each).",
        Phase::New => "",
    });
    let follow_up = matches!(record.kind, TaskKind::Fix | TaskKind::Review);
    if let (true, Phase::Implementation, Some(source)) = (follow_up, phase, &record.source) {
        text.push_str(&format!(
            "\n\nThis task follows up task `{}`. First read its reports, copied here: BUG_REPORT.md and ADVERSARIAL_BUG_REPORT.md. Then address: {}",
            record.origin.as_deref().unwrap_or("?"),
            one_line(source)
        ));
    }
    if let (TaskKind::Tiebreak, Phase::Research, Some(source)) =
        (record.kind, phase, &record.source)
    {
        text.push_str(&format!(
            "\n\nThe reviewers of task `{}` disagree: {}. SPEC.md holds its old specification; rewrite it with the question settled.",
            record.origin.as_deref().unwrap_or("?"),
            one_line(source)
        ));
    }
    text
}

/// Multi-line text on one line: the stage description is a template whose
/// lines should not be read as prompt directives by accident.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
