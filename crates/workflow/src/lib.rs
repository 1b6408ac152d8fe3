//! baton's workflow language: model, parser, include expansion, linter and
//! compiler.
//!
//! The pipeline is `load` (YAML → [`schema`] types, checked in the reference
//! engine's order) → [`include`] (fragments expanded) → [`validate`] (names,
//! references, cycles, `reads_from` ancestry) → [`compile`] (groups, indices,
//! parameters, `when` forms, templates) → [`Plan`]. [`lint`] runs the same
//! pipeline and adds its rules.
//!
//! This crate is pure: it reads files only through a [`Loader`], starts no
//! threads, and never reads the clock or the environment. Every problem is a
//! [`Diagnostic`] with a file, line and column.

#![forbid(unsafe_code)]

pub mod compile;
pub mod diagnostic;
#[doc(hidden)]
pub mod fuzz;
pub mod include;
pub mod lint;
pub mod load;
pub mod loader;
pub mod node;
pub mod params;
pub mod plan;
pub mod schema;
mod span;
pub mod subworkflow;
pub mod template;
pub mod validate;
pub mod when;

use std::sync::Arc;

pub use diagnostic::{Diagnostic, Severity, SourceFile};
pub use loader::{Loader, MemoryLoader};
pub use plan::Plan;

use load::Document;
use schema::Workflow;
use validate::Graph;

/// A workflow read, expanded and checked, ready to compile.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The workflow with its fragments' stages appended.
    pub workflow: Workflow,
    /// Its dependency edges.
    pub graph: Graph,
    /// Every file read: the workflow first, then each fragment.
    pub files: Vec<Arc<SourceFile>>,
    /// Warnings (unknown keys, unknown checks, ignored include params).
    pub warnings: Vec<Diagnostic>,
}

/// Why a workflow could not be used, with the warnings found on the way.
#[derive(Debug, Clone)]
pub struct Failure {
    /// At least one error.
    pub errors: Vec<Diagnostic>,
    /// Warnings found before the errors.
    pub warnings: Vec<Diagnostic>,
}

impl Failure {
    fn new(errors: Vec<Diagnostic>, warnings: Vec<Diagnostic>) -> Self {
        Failure { errors, warnings }
    }
}

/// Reads a workflow file, expands its includes and checks its graph.
///
/// # Errors
///
/// The file is missing, unreadable, not a workflow (a fragment gets its own
/// message), or breaks a rule of the format.
pub fn load(path: &str, loader: &dyn Loader) -> Result<Loaded, Failure> {
    let file =
        loader::read_source(loader, path).map_err(|error| Failure::new(vec![error], Vec::new()))?;
    let mut warnings = Vec::new();
    match load::document(&file, &mut warnings) {
        Err(error) => Err(Failure::new(vec![error], warnings)),
        Ok(Document::Fragment(_)) => Err(Failure::new(
            vec![
                Diagnostic::error(
                    "fragment",
                    format!("{path} is a fragment (`fragment: true`), not a workflow: it cannot be compiled or run on its own"),
                )
                .at(&file, node_span_of_fragment_flag(&file))
                .with_label("declared here")
                .with_help(format!(
                    "include it from a workflow:\n  include:\n    - path: {path}\n      prefix: my-prefix      # stage names become my-prefix-<name>\n      depends_on: [stage-it-runs-after]\n`baton lint {path}` checks the fragment itself"
                )),
            ],
            warnings,
        )),
        Ok(Document::Workflow(workflow)) => {
            let mut loaded = expand(workflow, &file, loader)?;
            warnings.append(&mut loaded.warnings);
            loaded.warnings = warnings;
            Ok(loaded)
        }
    }
}

/// Expands includes of an already-read workflow and checks the graph.
pub(crate) fn expand(
    mut workflow: Workflow,
    file: &Arc<SourceFile>,
    loader: &dyn Loader,
) -> Result<Loaded, Failure> {
    let mut warnings = Vec::new();
    let mut files = vec![Arc::clone(file)];
    let stages = std::mem::take(&mut workflow.stages);
    let includes = std::mem::take(&mut workflow.includes);
    workflow.stages = include::expand(stages, &includes, file, loader, &mut files, &mut warnings)
        .map_err(|error| Failure::new(vec![error], warnings.clone()))?;
    workflow.includes = includes;
    let graph = validate::check(&workflow.stages)
        .map_err(|errors| Failure::new(errors, warnings.clone()))?;
    Ok(Loaded {
        workflow,
        graph,
        files,
        warnings,
    })
}

/// Compiles a loaded workflow.
///
/// # Errors
///
/// Compile-time problems: an unsupported or unevaluable `when`, a missing
/// template or writing guide; a `sub_workflow` reference that is missing,
/// fails to load or comes back to a workflow already in its chain.
pub fn compile(
    loaded: &Loaded,
    options: &compile::Options,
    loader: &dyn Loader,
) -> Result<Plan, Failure> {
    let plan = compile::compile(&loaded.workflow, &loaded.graph, options, loader)
        .map_err(|errors| Failure::new(errors, loaded.warnings.clone()))?;
    if let Some(file) = loaded.files.first() {
        subworkflow::check(&file.path, &loaded.workflow.stages, loader)
            .map_err(|errors| Failure::new(errors, loaded.warnings.clone()))?;
    }
    Ok(plan)
}

fn node_span_of_fragment_flag(file: &SourceFile) -> node::Span {
    node::parse(&file.text)
        .ok()
        .and_then(|root| root.entry("fragment").map(|(key, _)| key.span))
        .unwrap_or_default()
}
