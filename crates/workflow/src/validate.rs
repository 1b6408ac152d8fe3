//! Checks on the whole, include-expanded stage list, in the reference
//! engine's order: unique names, known references, no dependency cycle, and every
//! `reads_from` entry a transitive `depends_on` ancestor. Then baton's own:
//! every name that becomes a path baton writes stays inside the run's
//! workspace (stage names are file names of logs and prompts; `writes_to`
//! paths are where outputs land).
//!
//! The steps run in that order; within the first step that finds problems,
//! all of them are reported, in stage order, so the first one is the error
//! the reference engine would print.

use std::collections::HashMap;
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, suggest};
use crate::schema::Stage;

/// Stage names and dependency edges by position in the stage list.
#[derive(Debug, Clone)]
pub struct Graph {
    /// For each stage, the positions of the stages it depends on (deduplicated, in written order).
    pub dependencies: Vec<Vec<usize>>,
}

/// Runs the checks.
///
/// # Errors
///
/// Every problem of the first step that finds any.
pub fn check(stages: &[Arc<Stage>]) -> Result<Graph, Vec<Diagnostic>> {
    let positions = unique_names(stages)?;
    let dependencies = references(stages, &positions)?;
    no_cycle(stages, &dependencies)?;
    reads_are_ancestors(stages, &positions, &dependencies)?;
    paths_stay_in_workspace(stages)?;
    Ok(Graph { dependencies })
}

fn unique_names(stages: &[Arc<Stage>]) -> Result<HashMap<&str, usize>, Vec<Diagnostic>> {
    let mut positions = HashMap::with_capacity(stages.len());
    let mut errors = Vec::new();
    for (position, stage) in stages.iter().enumerate() {
        if let Some(first) = positions.insert(stage.name.value.as_str(), position) {
            positions.insert(stage.name.value.as_str(), first);
            let first_stage = &stages[first];
            errors.push(
                Diagnostic::error(
                    "graph::duplicate",
                    format!("duplicate stage name '{}'", stage.name.value),
                )
                .at(&stage.file, stage.name.span)
                .for_field(&stage.name.value, "name")
                .with_label("second stage with this name")
                .with_help(format!(
                    "the first is at {}:{}:{}{}",
                    first_stage.file.path,
                    first_stage.name.span.line,
                    first_stage.name.span.column,
                    if stage.include_prefix.is_some() {
                        "; a fragment included twice needs a different `prefix` each time"
                    } else {
                        ""
                    }
                )),
            );
        }
    }
    found(errors, positions)
}

fn references(
    stages: &[Arc<Stage>],
    positions: &HashMap<&str, usize>,
) -> Result<Vec<Vec<usize>>, Vec<Diagnostic>> {
    let names: Vec<&str> = stages
        .iter()
        .map(|stage| stage.name.value.as_str())
        .collect();
    let mut errors = Vec::new();
    let mut dependencies = Vec::with_capacity(stages.len());
    for stage in stages {
        let mut edges = Vec::with_capacity(stage.depends_on.len());
        for (field, list, file) in [
            ("depends_on", &stage.depends_on, &stage.depends_on_file),
            ("reads_from", &stage.reads_from, &stage.reads_from_file),
        ] {
            for reference in list {
                match positions.get(reference.value.as_str()) {
                    Some(&position) => {
                        if field == "depends_on" && !edges.contains(&position) {
                            edges.push(position);
                        }
                    }
                    None => {
                        let mut error = Diagnostic::error(
                            "graph::unknown-stage",
                            format!(
                                "stage '{}' {field} unknown stage '{}'",
                                stage.name.value, reference.value
                            ),
                        )
                        .at(file, reference.span)
                        .for_field(&stage.name.value, field)
                        .with_label("no stage has this name");
                        if let Some(near) = suggest(&reference.value, &names) {
                            error = error.with_help(format!("did you mean `{near}`?"));
                        }
                        errors.push(error);
                    }
                }
            }
        }
        dependencies.push(edges);
    }
    found(errors, dependencies)
}

/// Depth-first search from each stage in file order; the first stage that is
/// re-entered names the cycle, as in the reference engine. Iterative, so a
/// 10 000-stage chain does not exhaust the stack.
fn no_cycle(stages: &[Arc<Stage>], dependencies: &[Vec<usize>]) -> Result<(), Vec<Diagnostic>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut marks = vec![Mark::New; stages.len()];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for start in 0..stages.len() {
        if marks[start] != Mark::New {
            continue;
        }
        marks[start] = Mark::Open;
        path.push((start, 0));
        while let Some(&mut (stage, ref mut next)) = path.last_mut() {
            if let Some(&dependency) = dependencies[stage].get(*next) {
                *next += 1;
                match marks[dependency] {
                    Mark::New => {
                        marks[dependency] = Mark::Open;
                        path.push((dependency, 0));
                    }
                    Mark::Open => {
                        let from = path
                            .iter()
                            .position(|(open, _)| *open == dependency)
                            .unwrap_or(0);
                        let mut cycle: Vec<&str> = path[from..]
                            .iter()
                            .map(|(open, _)| stages[*open].name.value.as_str())
                            .collect();
                        cycle.push(&stages[dependency].name.value);
                        // The search walks from a stage to its dependencies;
                        // people read cycles in the order work flows, from
                        // dependency to dependant.
                        cycle.reverse();
                        let culprit = &stages[dependency];
                        return Err(vec![
                            Diagnostic::error(
                                "graph::cycle",
                                format!(
                                    "dependency cycle detected involving stage '{}'",
                                    culprit.name.value
                                ),
                            )
                            .at(&culprit.file, culprit.name.span)
                            .for_field(&culprit.name.value, "depends_on")
                            .with_label("part of a cycle")
                            .with_help(format!("the cycle: {}", cycle.join(" -> "))),
                        ]);
                    }
                    Mark::Done => {}
                }
            } else {
                marks[stage] = Mark::Done;
                path.pop();
            }
        }
    }
    Ok(())
}

fn reads_are_ancestors(
    stages: &[Arc<Stage>],
    positions: &HashMap<&str, usize>,
    dependencies: &[Vec<usize>],
) -> Result<(), Vec<Diagnostic>> {
    // One stamp per query instead of clearing `seen` keeps each query linear
    // in the ancestors it actually visits.
    let mut seen = vec![0_usize; stages.len()];
    let mut query = 0;
    let mut stack = Vec::new();
    let mut errors = Vec::new();
    for (position, stage) in stages.iter().enumerate() {
        for reference in &stage.reads_from {
            let target = positions[reference.value.as_str()];
            query += 1;
            stack.clear();
            stack.extend_from_slice(&dependencies[position]);
            let mut found = false;
            while let Some(current) = stack.pop() {
                if current == target {
                    found = true;
                    break;
                }
                if seen[current] != query {
                    seen[current] = query;
                    stack.extend_from_slice(&dependencies[current]);
                }
            }
            if !found {
                errors.push(
                    Diagnostic::error(
                        "graph::reads-not-ancestor",
                        format!(
                            "stage '{name}' reads_from '{read}' but '{read}' is not a transitive dependency (via depends_on). Add '{read}' to the depends_on chain to ensure ordering.",
                            name = stage.name.value,
                            read = reference.value
                        ),
                    )
                    .at(&stage.reads_from_file, reference.span)
                    .for_field(&stage.name.value, "reads_from")
                    .with_label("not an ancestor of this stage"),
                );
            }
        }
    }
    found(errors, ())
}

/// Stage names without path separators or control characters, and
/// `writes_to` paths relative to the workspace and never climbing out of it.
fn paths_stay_in_workspace(stages: &[Arc<Stage>]) -> Result<(), Vec<Diagnostic>> {
    let mut errors = Vec::new();
    for stage in stages {
        let name = &stage.name.value;
        if name.contains('/') || name.chars().any(char::is_control) {
            errors.push(
                Diagnostic::error(
                    "graph::unsafe-name",
                    format!(
                        "stage name '{}' contains a path separator (/) or a control character",
                        name.escape_debug()
                    ),
                )
                .at(&stage.file, stage.name.span)
                .for_field(name, "name")
                .with_label("names become file names of the stage's logs and prompts")
                .with_help("use letters, digits, '-', '_' and '.', e.g. `review-api`"),
            );
        }
        for path in &stage.writes_to {
            if !crate::load::is_workspace_relative(&path.value) {
                errors.push(
                    Diagnostic::error(
                        "graph::writes-outside-workspace",
                        format!(
                            "stage '{name}' writes_to '{}', which is outside the workspace",
                            path.value.escape_debug()
                        ),
                    )
                    .at(&stage.file, path.span)
                    .for_field(name, "writes_to")
                    .with_label("absolute, empty, or leaves the workspace with '..'")
                    .with_help(
                        "writes_to paths are relative to the run's workspace, e.g. `outputs/report.md`",
                    ),
                );
            }
        }
    }
    found(errors, ())
}

/// `value` when nothing was found wrong, else every error found.
fn found<T>(errors: Vec<Diagnostic>, value: T) -> Result<T, Vec<Diagnostic>> {
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}
