//! `baton lint FILE [--strict]`.

use serde::Serialize;

use crate::args::LintArgs;
use crate::report::JsonDiagnostic;
use crate::{exit_code, output, report};

#[derive(Serialize)]
struct LintJson<'a> {
    file: &'a str,
    valid: bool,
    errors: Vec<JsonDiagnostic<'a>>,
    warnings: Vec<JsonDiagnostic<'a>>,
    stages: usize,
    dag_depth: usize,
    fragment: bool,
}

pub(crate) fn run(args: &LintArgs) -> Result<u8, u8> {
    let options = super::compile_options(&args.params)?;
    let loader = super::loader();
    let lint = baton_workflow::lint::lint(&args.file, &loader, &options, args.strict);
    let view = LintJson {
        file: &lint.file,
        valid: lint.valid,
        errors: lint.errors.iter().map(JsonDiagnostic::from).collect(),
        warnings: lint.warnings.iter().map(JsonDiagnostic::from).collect(),
        stages: lint.stages,
        dag_depth: lint.dag_depth,
        fragment: lint.fragment,
    };
    output::print(args.format.format(), &view, || {
        report::human(&lint.warnings);
        report::human(&lint.errors);
        let what = if lint.fragment {
            "fragment"
        } else {
            "workflow"
        };
        let verdict = if lint.valid { "valid" } else { "invalid" };
        format!(
            "{}: {verdict} {what}, {} stages, {} levels, {} errors, {} warnings\n",
            lint.file,
            lint.stages,
            lint.dag_depth,
            lint.errors.len(),
            lint.warnings.len()
        )
    });
    Ok(if lint.valid {
        exit_code::SUCCESS
    } else {
        exit_code::INVALID_WORKFLOW
    })
}

/// `--strict` for a command that runs the workflow: the lint's warnings
/// are errors. `Some(exit code)`, after printing every one, when there are
/// any (or errors); `None` when the workflow is clean.
pub(crate) fn strict_refusal(
    file: &str,
    options: &baton_workflow::compile::Options,
    as_json: bool,
) -> Option<u8> {
    let lint = baton_workflow::lint::lint(file, &super::loader(), options, true);
    if lint.valid {
        return None;
    }
    report::emit(&lint.errors, as_json);
    output::stderr_line(
        "error: warnings are errors under --strict: nothing was recorded or run (fix them, or run without --strict)",
    );
    Some(exit_code::INVALID_WORKFLOW)
}
