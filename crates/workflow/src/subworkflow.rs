//! Sub-workflow references, checked at compile time.
//!
//! A `kind: sub-workflow` stage runs another workflow file as a child run.
//! The child is only read when the stage starts, so a missing file or a
//! cycle (`a.yaml -> b.yaml -> a.yaml`, which would create child runs until
//! the disk fills) would otherwise show up in the middle of a run. Compiling
//! a workflow therefore follows every reference, recursively, through the
//! same [`Loader`] and with the same path rule as includes, and reports the
//! first problem at the `sub_workflow` key that leads to it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::Diagnostic;
use crate::include;
use crate::loader::Loader;
use crate::schema::Stage;

/// How deeply sub-workflows may nest. A chain this long is almost surely a
/// cycle written with differently spelled paths; the bound keeps the check
/// (and the runs) finite either way.
pub const MAX_SUB_WORKFLOW_DEPTH: usize = 16;

/// Resolves a stage's `sub_workflow` path: absolute as is, else relative to
/// the current directory if that file exists, else relative to the file the
/// stage is written in — the include rule, so both kinds of reference read
/// the same way. The engine uses this too when it starts the child run.
pub fn resolve(stage: &Stage, loader: &dyn Loader) -> Option<String> {
    let path = stage.sub_workflow.as_deref()?;
    Some(include::resolve(path, &stage.file.path, loader))
}

/// Follows the `sub_workflow` references of `stages` (written in the
/// workflow at `path`) recursively.
///
/// # Errors
///
/// A referenced file that is missing or fails to load, a chain of
/// references that comes back to a file already in it (the message names
/// the whole chain), or nesting deeper than [`MAX_SUB_WORKFLOW_DEPTH`].
pub fn check(
    path: &str,
    stages: &[Arc<Stage>],
    loader: &dyn Loader,
) -> Result<(), Vec<Diagnostic>> {
    let mut walker = Walker {
        loader,
        chain: vec![(key(path, loader), path.to_owned())],
        done: HashSet::new(),
    };
    walker.walk(stages)
}

struct Walker<'a> {
    loader: &'a dyn Loader,
    /// The files being checked, outermost first: (comparison key, path as
    /// shown).
    chain: Vec<(PathBuf, String)>,
    /// Files whose references were all checked already: a workflow used by
    /// several stages is read once.
    done: HashSet<PathBuf>,
}

impl Walker<'_> {
    fn walk(&mut self, stages: &[Arc<Stage>]) -> Result<(), Vec<Diagnostic>> {
        for stage in stages {
            let Some(resolved) = resolve(stage, self.loader) else {
                continue;
            };
            let located = |diagnostic: Diagnostic| {
                diagnostic
                    .at(&stage.file, stage.sub_workflow_span)
                    .for_field(&stage.name.value, "sub_workflow")
            };
            if !self.loader.exists(Path::new(&resolved)) {
                return Err(vec![located(Diagnostic::error(
                    "sub-workflow::missing",
                    format!(
                        "stage '{}' references missing sub-workflow file: {resolved}",
                        stage.name.value
                    ),
                ))
                .with_label("no such file")
                .with_help(format!(
                    "sub_workflow paths are tried relative to the current directory first, then to the directory of {}",
                    stage.file.path
                ))]);
            }
            let key = key(&resolved, self.loader);
            if self.chain.iter().any(|(seen, _)| *seen == key) {
                let cycle = self
                    .chain
                    .iter()
                    .map(|(_, shown)| shown.as_str())
                    .chain(std::iter::once(resolved.as_str()))
                    .collect::<Vec<_>>()
                    .join(" -> ");
                return Err(vec![
                    located(Diagnostic::error(
                        "sub-workflow::cycle",
                        format!("sub-workflow cycle: {cycle}"),
                    ))
                    .with_label("runs a workflow that is already running above it")
                    .with_help("a workflow cannot run itself, directly or through other workflows"),
                ]);
            }
            if self.done.contains(&key) {
                continue;
            }
            if self.chain.len() > MAX_SUB_WORKFLOW_DEPTH {
                return Err(vec![located(Diagnostic::error(
                    "sub-workflow::depth",
                    format!(
                        "sub-workflows are nested more than {MAX_SUB_WORKFLOW_DEPTH} levels deep"
                    ),
                ))]);
            }
            let loaded = crate::load(&resolved, self.loader).map_err(|failure| {
                failure
                    .errors
                    .into_iter()
                    .map(|error| {
                        if error.location.is_none() {
                            located(error)
                        } else {
                            error
                        }
                    })
                    .collect::<Vec<_>>()
            })?;
            self.chain.push((key.clone(), resolved));
            self.walk(&loaded.workflow.stages)?;
            self.chain.pop();
            self.done.insert(key);
        }
        Ok(())
    }
}

/// The path a file is compared by: absolute (against the loader's root)
/// and lexically normalised, so `./b.yaml` and `sub/../b.yaml` are the same
/// file.
fn key(path: &str, loader: &dyn Loader) -> PathBuf {
    crate::loader::normalize(&loader.root().join(path))
}

#[cfg(test)]
mod tests {
    use crate::compile::Options;
    use crate::loader::MemoryLoader;

    fn workflow(name: &str, stages: &str) -> String {
        format!(
            "name: {name}\nversion: \"1\"\ndescription: test\ntrigger:\n  source: manual\nstages:\n{stages}"
        )
    }

    fn sub(name: &str, path: &str) -> String {
        format!(
            "  - name: {name}\n    kind: sub-workflow\n    description: run {path}\n    agent: {{role: orchestrator}}\n    sub_workflow: {path}\n"
        )
    }

    fn compile_errors(loader: &MemoryLoader, path: &str) -> Vec<String> {
        let loaded = crate::load(path, loader).expect("loads");
        match crate::compile(&loaded, &Options::default(), loader) {
            Ok(_) => Vec::new(),
            Err(failure) => failure.errors.iter().map(|e| e.message.clone()).collect(),
        }
    }

    #[test]
    fn a_cycle_between_two_files_names_both() {
        let loader = MemoryLoader::new()
            .with("a.yaml", &workflow("a", &sub("call-b", "b.yaml")))
            .with("b.yaml", &workflow("b", &sub("call-a", "a.yaml")));
        let errors = compile_errors(&loader, "a.yaml");
        assert_eq!(
            errors,
            vec!["sub-workflow cycle: a.yaml -> b.yaml -> a.yaml".to_owned()]
        );
    }

    #[test]
    fn a_cycle_is_located_at_the_sub_workflow_key() {
        let loader = MemoryLoader::new().with("a.yaml", &workflow("a", &sub("self", "a.yaml")));
        let loaded = crate::load("a.yaml", &loader).expect("loads");
        let failure = crate::compile(&loaded, &Options::default(), &loader).expect_err("cycle");
        let location = failure.errors[0].location.as_ref().expect("located");
        assert_eq!(location.file.path, "a.yaml");
        assert_eq!(location.span.line, 11);
        assert_eq!(failure.errors[0].code, "sub-workflow::cycle");
    }

    #[test]
    fn a_deep_chain_without_cycle_compiles() {
        let loader = MemoryLoader::new()
            .with("a.yaml", &workflow("a", &sub("b", "nested/b.yaml")))
            .with("nested/b.yaml", &workflow("b", &sub("c", "c.yaml")))
            .with(
                "nested/c.yaml",
                &workflow(
                    "c",
                    "  - name: leaf\n    kind: execute\n    description: leaf\n    executor: inline\n    script: \"true\"\n",
                ),
            );
        assert!(compile_errors(&loader, "a.yaml").is_empty());
    }

    #[test]
    fn a_missing_child_is_an_error() {
        let loader = MemoryLoader::new().with("a.yaml", &workflow("a", &sub("x", "gone.yaml")));
        let errors = compile_errors(&loader, "a.yaml");
        assert_eq!(
            errors,
            vec!["stage 'x' references missing sub-workflow file: gone.yaml".to_owned()]
        );
    }

    #[test]
    fn sub_workflow_params_are_read_in_order_and_checked() {
        let params = "    sub_workflow_params:\n      topic: \"{topic} more\"\n      count: 3\n";
        let loader = MemoryLoader::new()
            .with(
                "a.yaml",
                &workflow("a", &format!("{}{params}", sub("call", "b.yaml"))),
            )
            .with(
                "b.yaml",
                &workflow(
                    "b",
                    "  - name: leaf\n    kind: execute\n    description: leaf\n    executor: inline\n    script: \"true\"\n",
                ),
            );
        let loaded = crate::load("a.yaml", &loader).expect("loads");
        let read: Vec<(&str, &str)> = loaded.workflow.stages[0]
            .sub_workflow_params
            .iter()
            .map(|(name, value)| (name.as_str(), value.value.as_str()))
            .collect();
        assert_eq!(read, vec![("topic", "{topic} more"), ("count", "3")]);

        let on_other_kind = MemoryLoader::new().with(
            "c.yaml",
            &workflow(
                "c",
                &format!(
                    "  - name: leaf\n    kind: execute\n    description: leaf\n    executor: inline\n    script: \"true\"\n{params}"
                ),
            ),
        );
        let failure = crate::load("c.yaml", &on_other_kind).expect_err("refused");
        assert_eq!(failure.errors[0].code, "schema::sub-workflow");
        assert_eq!(
            failure.errors[0]
                .location
                .as_ref()
                .expect("located")
                .span
                .line,
            12
        );

        let nested = MemoryLoader::new().with(
            "d.yaml",
            &workflow(
                "d",
                &format!(
                    "{}    sub_workflow_params:\n      topic: [a, b]\n",
                    sub("call", "d.yaml")
                ),
            ),
        );
        let failure = crate::load("d.yaml", &nested).expect_err("refused");
        assert_eq!(
            failure.errors[0].message,
            "stage 'call' sub_workflow_params 'topic' must be a single value, got list"
        );
    }
}
