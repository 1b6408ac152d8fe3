//! The check the `prompt` fuzz target runs (`fuzz/`), kept here so that
//! the corpus is replayed by an ordinary test on the stable toolchain
//! (`tests/fuzz_corpus.rs`).
//!
//! The input is a workflow; every stage of its plan gets its prompt and
//! dispatch file rendered. Beyond "no panic": every file a prompt names is
//! inside the workspace, `{workspace}` is filled in, the prompt has its
//! sections, and the dispatch file survives a JSON round trip.

use std::path::{Component, Path};

use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;

use crate::prompt;
use crate::workspace::output_path;

/// A workspace that does not exist, so no upstream output is found and
/// nothing on the machine is read into a prompt.
const WORKSPACE: &str = "/nonexistent/baton-fuzz/workspace";

/// Loads and compiles the input (see `baton_workflow::fuzz`) and renders
/// every stage's prompt and dispatch file.
pub fn prompt(data: &[u8]) {
    let loader = baton_workflow::fuzz::loader(data);
    let Some(loaded) = baton_workflow::fuzz::loaded(data, &loader) else {
        return;
    };
    let options = baton_workflow::fuzz::options();
    let Ok(plan) = baton_workflow::compile(&loaded, &options, &loader) else {
        return;
    };
    let workspace = Path::new(WORKSPACE);
    for stage in &plan.stages {
        let rendered = prompt::render(&plan, stage, workspace);
        check_prompt(&plan, stage, &rendered);
        let dispatch = prompt::dispatch(&plan, stage, workspace, &rendered);
        let text = serde_json::to_string(&dispatch).expect("a JSON value serializes");
        let back: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|error| panic!("{error}: {text}"));
        assert_eq!(back, dispatch, "the dispatch file read back differs");
        assert_eq!(back["prompt"].as_str(), Some(rendered.as_str()));
    }
}

fn check_prompt(plan: &Plan, stage: &PlanStage, rendered: &str) {
    let workspace = Path::new(WORKSPACE);
    assert!(
        rendered.starts_with(&format!("You are the `{}` stage", stage.name())),
        "{rendered}"
    );
    // `{workspace}` is the only placeholder left at run time, and holds no
    // brace: filling it in is a plain replacement.
    let task = stage.description.replace("{workspace}", WORKSPACE);
    assert!(
        rendered.contains(&format!("\n## Task\n\n{}\n", task.trim_end())),
        "the task is not the description with {{workspace}} filled in: {rendered}"
    );
    assert!(
        rendered.ends_with("then records the stage as done.\n"),
        "no completion section: {rendered}"
    );
    let mut named: Vec<String> = prompt::files_to_write(stage, workspace);
    for entry in &stage.spec.validates_output {
        let path = prompt::check_path(stage, &entry.path.value);
        named.push(workspace.join(path).to_string_lossy().into_owned());
    }
    for &upstream in &stage.reads_from {
        for declared in &plan.stages[upstream].spec.writes_to {
            let path = workspace.join(output_path(&declared.value));
            named.push(path.to_string_lossy().into_owned());
        }
    }
    for path in &named {
        let path = Path::new(path);
        assert!(
            path.starts_with(workspace)
                && !path
                    .components()
                    .any(|component| component == Component::ParentDir),
            "stage {} names {} outside the workspace",
            stage.name(),
            path.display()
        );
    }
}
