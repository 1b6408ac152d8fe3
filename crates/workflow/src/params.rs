//! Which parameters a workflow knows: those it declares under
//! `trigger.params`, the built-in `work_dir`, and every `{name}` its texts
//! refer to (real workflows read parameters they never declare, given with
//! `--params` when they run). A parameter given from outside that is none
//! of these is a typo, and is refused with the nearest known name.

use std::collections::HashSet;

use crate::diagnostic::{self, Diagnostic, GLOBAL};
use crate::schema::Workflow;
use crate::template;

/// The parameter every workflow has: `<current directory>/out`.
pub const WORK_DIR: &str = "work_dir";

/// Calls `visit` with every text of `workflow` in which `{placeholders}`
/// are filled: `workspace_dir`, and each stage's description, script,
/// `when`, `writes_to`, fan-out script, output fields, output-check paths,
/// validation criteria and `sub_workflow_params` values.
pub fn each_text<'w>(workflow: &'w Workflow, mut visit: impl FnMut(&'w str)) {
    if let Some(dir) = &workflow.workspace_dir {
        visit(dir);
    }
    for stage in &workflow.stages {
        visit(&stage.description.value);
        for text in stage
            .script
            .iter()
            .chain(stage.when.iter())
            .chain(stage.writes_to.iter())
            .chain(
                stage
                    .fan_out
                    .iter()
                    .filter_map(|fan_out| fan_out.script.as_ref()),
            )
            .chain(stage.sub_workflow_params.values())
        {
            visit(&text.value);
        }
        for output in &stage.outputs {
            for text in [&output.subcommand, &output.query, &output.flags]
                .into_iter()
                .flatten()
            {
                visit(text);
            }
        }
        for check in &stage.validates_output {
            visit(&check.path.value);
        }
        if let Some(validation) = &stage.validation {
            for criterion in &validation.criteria {
                visit(criterion);
            }
        }
    }
}

/// Every parameter name `workflow` knows, declared ones first; `extra`
/// are further texts it fills (its templates and writing guides).
pub fn known<'w>(workflow: &'w Workflow, extra: &[&'w str]) -> Vec<&'w str> {
    let mut names: Vec<&str> = workflow.trigger.params.keys().map(String::as_str).collect();
    names.push(WORK_DIR);
    let mut seen: HashSet<&str> = names.iter().copied().collect();
    let mut add = |text: &'w str| {
        for name in template::placeholders(text, |_| true) {
            if seen.insert(name) {
                names.push(name);
            }
        }
    };
    each_text(workflow, &mut add);
    for text in extra {
        add(text);
    }
    names
}

/// An error for each of `given` that `workflow` does not know, with the
/// nearest known name when one is near.
pub fn unknown(workflow: &Workflow, given: &[(String, String)], extra: &[&str]) -> Vec<Diagnostic> {
    let known = known(workflow, extra);
    let declared: Vec<&str> = workflow.trigger.params.keys().map(String::as_str).collect();
    let mut errors = Vec::new();
    let mut reported: HashSet<&str> = HashSet::new();
    for (name, _) in given {
        if known.contains(&name.as_str()) || !reported.insert(name) {
            continue;
        }
        let listed = if declared.is_empty() {
            "it declares none under `trigger.params`".to_owned()
        } else {
            format!("it declares {}", declared.join(", "))
        };
        let help = match diagnostic::suggest(name, &known) {
            Some(near) => format!("did you mean `{near}`? ({listed})"),
            None => format!(
                "drop it, or declare `{name}` under `trigger.params` and refer to it as `{{{name}}}` ({listed})"
            ),
        };
        errors.push(
            Diagnostic::error(
                "compile::unknown-param",
                format!(
                    "unknown parameter '{name}' (given with --params): workflow '{}' neither declares it nor refers to it",
                    workflow.name
                ),
            )
            .for_field(GLOBAL, "trigger.params")
            .with_help(help),
        );
    }
    errors
}

#[cfg(test)]
mod tests {
    use crate::MemoryLoader;
    use crate::compile::Options;

    const WORKFLOW: &str = "name: t\nversion: '1'\ndescription: d\ntrigger:\n  source: manual\n  params:\n    pr_number: '1'\nstages:\n  - name: a\n    kind: execute\n    description: size {pr_size}\n    executor: inline\n    script: echo \"{pr_number}\"\n";

    /// The errors of compiling [`WORKFLOW`] with `params` given.
    fn errors(params: &[&str], reject: bool) -> Vec<String> {
        let loader = MemoryLoader::new().with("wf.yaml", WORKFLOW);
        let loaded = crate::load("wf.yaml", &loader).expect("loads");
        let options = Options {
            work_dir: None,
            params: params
                .iter()
                .map(|name| ((*name).to_owned(), "x".to_owned()))
                .collect(),
            reject_unknown_params: reject,
        };
        match crate::compile(&loaded, &options, &loader) {
            Ok(_) => Vec::new(),
            Err(failure) => failure
                .errors
                .iter()
                .map(|error| {
                    format!(
                        "{} | {}",
                        error.message,
                        error.help.as_deref().unwrap_or("")
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn declared_referred_and_built_in_params_are_known() {
        assert_eq!(
            errors(&["pr_number", "pr_size", "work_dir"], true),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_unknown_param_gets_the_nearest_name_once() {
        assert_eq!(
            errors(&["pr_numbr", "pr_numbr", "zzz"], true),
            [
                "unknown parameter 'pr_numbr' (given with --params): workflow 't' neither declares it nor refers to it | did you mean `pr_number`? (it declares pr_number)",
                "unknown parameter 'zzz' (given with --params): workflow 't' neither declares it nor refers to it | drop it, or declare `zzz` under `trigger.params` and refer to it as `{zzz}` (it declares pr_number)",
            ]
        );
    }

    #[test]
    fn unknown_params_pass_when_not_rejected() {
        assert_eq!(errors(&["zzz"], false), Vec::<String>::new());
    }
}
