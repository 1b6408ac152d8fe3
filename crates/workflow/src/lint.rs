//! `baton lint`: the reference engine's rules and
//! baton's own.
//!
//! Reference rules: include targets exist (L1), the file parses (L2),
//! undeclared `{variables}` in descriptions (L3, with the reference's exact
//! exemptions), and a queue fan-out needs a script (L4). The reference's L5
//! (inline stages cannot fan out) is not a rule here: baton runs an inline
//! fan-out's script once per item.
//!
//! baton's rules: everything `compile` would reject, unknown keys and checks,
//! placeholders left unquoted in shell scripts, `writes_to` paths that leave
//! the workspace, read-only agents given editing tools, inline stages
//! without a script, and parameters nothing refers to.

use std::collections::HashSet;

use crate::compile::{self, Layout};
use crate::diagnostic::{Diagnostic, GLOBAL};
use crate::load::{self, Document};
use crate::loader::{Loader, read_source};
use crate::schema::{Access, Executor, FanOutMode, Stage, Workflow};
use crate::template;
use crate::{Loaded, include};

/// What `lint` found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The file as given.
    pub file: String,
    /// No errors.
    pub valid: bool,
    /// Errors.
    pub errors: Vec<Diagnostic>,
    /// Warnings.
    pub warnings: Vec<Diagnostic>,
    /// Number of stages after include expansion (0 when the file does not parse).
    pub stages: usize,
    /// Number of dependency levels.
    pub dag_depth: usize,
    /// Whether the file is a fragment.
    pub fragment: bool,
}

/// Lints a workflow or fragment file. Never fails: problems are the report.
pub fn lint(path: &str, loader: &dyn Loader, options: &compile::Options, strict: bool) -> Report {
    let mut report = Report {
        file: path.to_owned(),
        valid: true,
        errors: Vec::new(),
        warnings: Vec::new(),
        stages: 0,
        dag_depth: 0,
        fragment: false,
    };
    run(path, loader, options, &mut report);
    // Global warnings first, then stage warnings in the order found (stable).
    report
        .warnings
        .sort_by_key(|warning| u8::from(warning.stage != GLOBAL));
    if strict {
        for mut warning in report.warnings.drain(..) {
            warning.severity = crate::diagnostic::Severity::Error;
            report.errors.push(warning);
        }
    }
    report.valid = report.errors.is_empty();
    report
}

fn run(path: &str, loader: &dyn Loader, options: &compile::Options, report: &mut Report) {
    let file = match read_source(loader, path) {
        Ok(file) => file,
        Err(error) => return report.errors.push(error),
    };
    let mut warnings = Vec::new();
    let document = load::document(&file, &mut warnings);
    report.warnings.append(&mut warnings);
    let document = match document {
        Ok(document) => document,
        Err(error) => return report.errors.push(error),
    };
    let (own_stages, includes) = match document {
        Document::Fragment(fragment) => {
            report.fragment = true;
            report.stages = fragment.stages.len();
            report.dag_depth = fragment_depth(&fragment.stages);
            return;
        }
        Document::Workflow(workflow) => {
            let includes = workflow.includes.clone();
            (workflow, includes)
        }
    };
    // L1: include targets exist, before anything is expanded.
    let mut missing = false;
    for entry in &includes {
        let resolved = include::resolve(&entry.path.value, &file.path, loader);
        if !loader.exists(std::path::Path::new(&resolved)) {
            missing = true;
            report.errors.push(
                Diagnostic::error(
                    "include::missing",
                    format!(
                        "fragment file not found: {resolved} (referenced as '{}')",
                        entry.path.value
                    ),
                )
                .at(&file, entry.path.span)
                .for_field(GLOBAL, "include"),
            );
        }
    }
    if missing {
        return;
    }
    // L2: the full parse, then everything compile checks.
    let loaded = match crate::expand(own_stages, &file, loader) {
        Ok(loaded) => loaded,
        Err(failure) => {
            report.errors.extend(failure.errors);
            report.warnings.extend(failure.warnings);
            return;
        }
    };
    report.warnings.extend(loaded.warnings.iter().cloned());
    report.stages = loaded.workflow.stages.len();
    let plan = match compile::compile(&loaded.workflow, &loaded.graph, options, loader) {
        Ok(plan) => plan,
        Err(errors) => {
            report.errors.extend(errors);
            return;
        }
    };
    report.dag_depth = plan.levels;
    report.warnings.extend(plan.warnings.iter().cloned());
    // As compiling does: a missing or cyclic sub-workflow would only show
    // up in the middle of a run.
    if let Err(errors) = crate::subworkflow::check(&file.path, &loaded.workflow.stages, loader) {
        report.errors.extend(errors);
        return;
    }
    rules(&loaded, report);
}

fn fragment_depth(stages: &[std::sync::Arc<Stage>]) -> usize {
    let names: std::collections::HashMap<&str, usize> = stages
        .iter()
        .enumerate()
        .map(|(position, stage)| (stage.name.value.as_str(), position))
        .collect();
    let mut blocked = vec![false; stages.len()];
    let dependencies: Vec<Vec<usize>> = stages
        .iter()
        .enumerate()
        .map(|(position, stage)| {
            let mut edges = Vec::new();
            for name in &stage.depends_on {
                match names.get(name.value.as_str()) {
                    Some(&dependency) if !edges.contains(&dependency) => edges.push(dependency),
                    Some(_) => {}
                    None => blocked[position] = true,
                }
            }
            edges
        })
        .collect();
    Layout::with_external(stages, &dependencies, &blocked).levels
}

fn rules(loaded: &Loaded, report: &mut Report) {
    let workflow = &loaded.workflow;
    for stage in &workflow.stages {
        undeclared_variables(workflow, stage, report);
        queue_fan_out_script(stage, report);
        unquoted_script_placeholders(workflow, stage, report);
        evaluated_placeholders(workflow, stage, report);
        read_only_editing_tools(stage, report);
        inline_without_script(stage, report);
    }
    unreferenced_params(workflow, report);
}

fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_lowercase() || first == '_')
        && characters.all(|character| {
            character.is_ascii_lowercase() || character.is_ascii_digit() || character == '_'
        })
}

/// L3, exactly as the reference: lowercase identifiers only, `{{…}}`
/// ignored, `workspace` and the stage's own fan-out key exempt, stages
/// injected with a non-empty include prefix not checked. `work_dir` is
/// flagged as in the reference, although it is always defined at run time.
fn undeclared_variables(workflow: &Workflow, stage: &Stage, report: &mut Report) {
    if stage
        .include_prefix
        .as_deref()
        .is_some_and(|prefix| !prefix.is_empty())
    {
        return;
    }
    let description = &stage.description.value;
    let fan_out_key = stage.fan_out.as_ref().map(|fan_out| fan_out.key.as_str());
    let mut seen = HashSet::new();
    for name in single_brace_placeholders(description) {
        if !is_identifier(name)
            || workflow.trigger.params.contains_key(name)
            || name == "workspace"
            || Some(name) == fan_out_key
            || !seen.insert(name)
        {
            continue;
        }
        report.warnings.push(
            Diagnostic::warning(
                "lint::undeclared-variable",
                format!("references undeclared variable '{{{name}}}' (not in trigger.params)"),
            )
            .at(&stage.file, stage.description.span)
            .for_field(&stage.name.value, "description")
            .with_help(format!(
                "declare `{name}` under `trigger.params`, or pass `--params {name}=…` when running"
            )),
        );
    }
}

/// `{name}` occurrences that are not part of `{{…}}`.
fn single_brace_placeholders(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut position = 0;
    while let Some(offset) = text[position..].find('{') {
        let open = position + offset;
        position = open + 1;
        if open > 0 && bytes[open - 1] == b'{' {
            continue;
        }
        let Some(length) = text[open + 1..].find(['{', '}']) else {
            break;
        };
        let close = open + 1 + length;
        if bytes[close] != b'}' || bytes.get(close + 1) == Some(&b'}') {
            continue;
        }
        found.push(&text[open + 1..close]);
    }
    found
}

/// L4.
fn queue_fan_out_script(stage: &Stage, report: &mut Report) {
    let Some(fan_out) = &stage.fan_out else {
        return;
    };
    if fan_out.mode == FanOutMode::WorkerQueue
        && fan_out
            .script
            .as_ref()
            .is_none_or(|script| script.value.trim().is_empty())
    {
        report.errors.push(
            Diagnostic::error(
                "lint::queue-fan-out-script",
                format!(
                    "fan_out.mode='worker_queue' requires a non-empty 'script' field — provide a shell command template with {{{}}} substituted per item",
                    fan_out.key
                ),
            )
            .at(&stage.file, fan_out.source.span)
            .for_field(&stage.name.value, "fan_out.script"),
        );
    }
}

/// A stage's shell scripts, by field.
fn scripts(stage: &Stage) -> [(&'static str, Option<&crate::schema::Spanned<String>>); 2] {
    [
        ("script", stage.script.as_ref()),
        (
            "fan_out.script",
            stage
                .fan_out
                .as_ref()
                .and_then(|fan_out| fan_out.script.as_ref()),
        ),
    ]
}

fn unquoted_script_placeholders(workflow: &Workflow, stage: &Stage, report: &mut Report) {
    let fan_out_key = stage.fan_out.as_ref().map(|fan_out| fan_out.key.as_str());
    for (field, script) in scripts(stage) {
        let Some(script) = script else { continue };
        for name in unquoted_placeholders(&script.value) {
            if Some(name) != fan_out_key && !workflow.trigger.params.contains_key(name) {
                continue;
            }
            report.warnings.push(
                Diagnostic::warning(
                    "lint::unquoted-placeholder",
                    format!("'{{{name}}}' is substituted into a shell script without quotes"),
                )
                .at(&stage.file, script.span)
                .for_field(&stage.name.value, field)
                .with_help(format!(
                    "write \"{{{name}}}\": baton quotes substituted values itself, but engines that splice them raw would let a value such as `x; rm -rf ~` run as code"
                )),
            );
        }
    }
}

/// Placeholders where bash evaluates what they hold: arithmetic (the value
/// must be an integer, or the stage fails before bash starts) and `eval`,
/// `bash -c`, `sh -c`, `source` (the value runs as code, whatever quoting).
fn evaluated_placeholders(workflow: &Workflow, stage: &Stage, report: &mut Report) {
    let fan_out_key = stage.fan_out.as_ref().map(|fan_out| fan_out.key.as_str());
    for (field, script) in scripts(stage) {
        let Some(script) = script else { continue };
        for line in script.value.lines() {
            for name in placeholders_in(line) {
                if Some(name) != fan_out_key && !workflow.trigger.params.contains_key(name) {
                    continue;
                }
                let (code, message, help) = if evaluates_code(line) {
                    (
                        "lint::placeholder-in-eval",
                        format!("'{{{name}}}' is substituted where the shell runs text as code"),
                        "its value runs as a command, however it is quoted: pass data, not code (e.g. as an argument to a script)",
                    )
                } else if is_arithmetic(line, name) {
                    (
                        "lint::placeholder-in-arithmetic",
                        format!("'{{{name}}}' is substituted where bash evaluates arithmetic"),
                        "bash would evaluate any expression in the value, so it must be an integer: any other value fails the stage before bash starts",
                    )
                } else {
                    continue;
                };
                report.warnings.push(
                    Diagnostic::warning(code, message)
                        .at(&stage.file, script.span)
                        .for_field(&stage.name.value, field)
                        .with_help(help),
                );
            }
        }
    }
}

/// The `{name}`s in a line of script.
fn placeholders_in(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_identifier(&after[..close]) => {
                found.push(&after[..close]);
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    found
}

/// A line whose command runs text as code.
fn evaluates_code(line: &str) -> bool {
    line.split([';', '&', '|', '(', '`']).any(|command| {
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            ["eval", ..] | ["source", ..] | [".", ..] => true,
            [shell, "-c", ..] => matches!(*shell, "bash" | "sh" | "zsh" | "dash"),
            _ => false,
        }
    })
}

/// Whether `{name}` sits in arithmetic on this line.
fn is_arithmetic(line: &str, name: &str) -> bool {
    let placeholder = format!("{{{name}}}");
    let Some(at) = line.find(&placeholder) else {
        return false;
    };
    let before = &line[..at];
    let opened = before.matches("((").count() > before.matches("))").count();
    let subscript = before.ends_with('[')
        && before[..before.len() - 1].ends_with(|c: char| c.is_alphanumeric() || c == '_');
    let first = line.split_whitespace().next().unwrap_or_default();
    let numeric_test = line.contains("[[")
        && ["-eq", "-ne", "-lt", "-le", "-gt", "-ge"]
            .iter()
            .any(|operator| line.split_whitespace().any(|word| word == *operator));
    opened || subscript || first == "let" || numeric_test
}

/// Placeholders outside single and double quotes, in the shell's sense.
fn unquoted_placeholders(script: &str) -> Vec<&str> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut quote = Quote::None;
    let mut found = Vec::new();
    let bytes = script.as_bytes();
    let mut position = 0;
    while position < bytes.len() {
        match (bytes[position], &quote) {
            (b'\\', Quote::None | Quote::Double) => position += 1,
            (b'\'', Quote::None) => quote = Quote::Single,
            (b'\'', Quote::Single) | (b'"', Quote::Double) => quote = Quote::None,
            (b'"', Quote::None) => quote = Quote::Double,
            (b'{', Quote::None) => {
                if let Some(length) = script[position + 1..].find(['{', '}', ' ', '\n']) {
                    let close = position + 1 + length;
                    if bytes[close] == b'}' && is_identifier(&script[position + 1..close]) {
                        found.push(&script[position + 1..close]);
                    }
                }
            }
            _ => {}
        }
        position += 1;
    }
    found
}

/// `Write` is not on the list: read-only stages still write their own
/// declared outputs. The editing tools change files that already exist.
const EDITING_TOOLS: &[&str] = &["Edit", "MultiEdit", "NotebookEdit"];

fn read_only_editing_tools(stage: &Stage, report: &mut Report) {
    if stage.agent.access != Access::ReadOnly {
        return;
    }
    let editing: Vec<&str> = stage
        .agent
        .tools
        .iter()
        .map(String::as_str)
        .filter(|tool| EDITING_TOOLS.contains(tool))
        .collect();
    if editing.is_empty() {
        return;
    }
    report.warnings.push(
        Diagnostic::warning(
            "lint::read-only-editor",
            format!(
                "stage '{}' has a read-only agent with editing tools ({})",
                stage.name.value,
                editing.join(", ")
            ),
        )
        .at(&stage.file, stage.name.span)
        .for_field(&stage.name.value, "agent.tools")
        .with_help("set `access: read-write` if the stage changes code, or drop the editing tools"),
    );
}

fn inline_without_script(stage: &Stage, report: &mut Report) {
    if stage.executor == Executor::Inline && stage.script.is_none() && stage.fan_out.is_none() {
        report.warnings.push(
            Diagnostic::warning(
                "lint::inline-without-script",
                format!("inline stage '{}' has no script", stage.name.value),
            )
            .at(&stage.file, stage.name.span)
            .for_field(&stage.name.value, "script")
            .with_help("it is dispatched to the `inline` agent profile, which carries out the description; add `script:` to run a command instead"),
        );
    }
}

fn unreferenced_params(workflow: &Workflow, report: &mut Report) {
    let mut used: HashSet<&str> = HashSet::new();
    crate::params::each_text(workflow, |text| {
        for name in template::placeholders(text, |_| true) {
            if let Some((key, _)) = workflow.trigger.params.get_key_value(name) {
                used.insert(key.as_str());
            }
        }
    });
    for (name, param) in &workflow.trigger.params {
        if !used.contains(name.as_str()) {
            report.warnings.push(
                Diagnostic::warning(
                    "lint::unused-param",
                    format!("parameter '{name}' is never used"),
                )
                .at(&workflow.file, param.span)
                .for_field(GLOBAL, "trigger.params")
                .with_help(format!(
                    "refer to it as `{{{name}}}` in a description or script, or remove it"
                )),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_single_brace_placeholders() {
        let found = single_brace_placeholders("ok {declared} {{double}} {Upper} {a.b} {x}");
        assert_eq!(found, vec!["declared", "Upper", "a.b", "x"]);
    }

    #[test]
    fn finds_unquoted_placeholders_only() {
        assert_eq!(
            unquoted_placeholders("ls {domain}/ \"{domain}\" '{domain}' \\{x}"),
            vec!["domain"]
        );
        assert_eq!(unquoted_placeholders("echo \"a {b}\" {c}"), vec!["c"]);
    }

    #[test]
    fn finds_placeholders_that_bash_evaluates() {
        let yaml = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual, params: {n: {type: string}, c: {type: string}, s: {type: string}}}\nstages:\n  - name: a\n    kind: execute\n    description: d\n    executor: inline\n    script: |\n      echo $(( {n} + 1 ))\n      eval \"{c}\"\n      echo \"{s}\"\n";
        let loader = crate::MemoryLoader::new().with("w.yaml", yaml);
        let report = lint("w.yaml", &loader, &Default::default(), false);
        let codes: Vec<(&str, &str)> = report
            .warnings
            .iter()
            .filter(|warning| warning.code.starts_with("lint::placeholder-in"))
            .map(|warning| (warning.code, warning.message.as_str()))
            .collect();
        assert_eq!(
            codes,
            vec![
                (
                    "lint::placeholder-in-arithmetic",
                    "'{n}' is substituted where bash evaluates arithmetic"
                ),
                (
                    "lint::placeholder-in-eval",
                    "'{c}' is substituted where the shell runs text as code"
                ),
            ],
            "{:?}",
            report.warnings
        );
    }
}
