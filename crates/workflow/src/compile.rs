//! From a loaded workflow to a [`Plan`].

use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::diagnostic::Diagnostic;
use crate::load::MAX_FILE_BYTES;
use crate::loader::Loader;
use crate::plan::{ContractWarning, Group, Plan, PlanStage};
use crate::schema::{OutputMode, Stage, Workflow};
use crate::template;
use crate::validate::Graph;
use crate::when::{self, When};

/// Inputs to compilation besides the workflow.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The built-in `work_dir` parameter (`<current directory>/out`), if any.
    pub work_dir: Option<String>,
    /// `--params key=value` overrides, in order.
    pub params: Vec<(String, String)>,
    /// Refuse a `params` name the workflow neither declares nor refers to
    /// (a typo on the command line). Off for parameters that were accepted
    /// before: a recorded run's, which its resume compiles with again.
    pub reject_unknown_params: bool,
}

/// Resolves parameters: `work_dir`, then trigger params, then overrides.
pub fn resolve_params(workflow: &Workflow, options: &Options) -> IndexMap<String, String> {
    let mut params = IndexMap::new();
    if let Some(work_dir) = &options.work_dir {
        params.insert("work_dir".to_owned(), work_dir.clone());
    }
    for (name, param) in &workflow.trigger.params {
        if let Some(default) = &param.default {
            params.insert(name.clone(), default.clone());
        }
    }
    for (name, value) in &options.params {
        params.insert(name.clone(), value.clone());
    }
    params
}

/// Compiles a loaded, validated workflow.
///
/// # Errors
///
/// Every compile-time problem (`when` forms, missing templates), in index order.
pub fn compile(
    workflow: &Workflow,
    graph: &Graph,
    options: &Options,
    loader: &dyn Loader,
) -> Result<Plan, Vec<Diagnostic>> {
    let params = resolve_params(workflow, options);
    let lookup = |name: &str| params.get(name).map(String::as_str);
    let layout = Layout::of(&workflow.stages, &graph.dependencies);

    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut stages = Vec::with_capacity(workflow.stages.len());
    for (index, &position) in layout.order.iter().enumerate() {
        let spec = &workflow.stages[position];
        let when = match &spec.when {
            None => None,
            Some(expression) => match check_when(spec, &expression.value, &params, &mut warnings) {
                Ok(when) => Some(when),
                Err(error) => {
                    errors.push(*error);
                    None
                }
            },
        };
        let mut template = None;
        let mut guide = None;
        let mut cli_commands = Vec::new();
        for output in &spec.outputs {
            if let Some(reference) = &output.template_ref {
                match read_text(loader, reference) {
                    Some(text) => template = Some(text),
                    None => errors.push(missing_file(spec, "template", reference, loader)),
                }
            }
            if let Some(reference) = &output.writing_guide_ref {
                match read_text(loader, reference) {
                    Some(text) => guide = Some(text),
                    None => errors.push(missing_file(spec, "writing guide", reference, loader)),
                }
            }
            if output.mode == OutputMode::Invoke
                && let Some(skill) = &output.skill
            {
                let command = invoke_command(
                    skill,
                    output.subcommand.as_deref(),
                    output.query.as_deref(),
                    output.flags.as_deref(),
                );
                cli_commands.push(template::render(&command, lookup).into_owned());
            }
        }
        stages.push(PlanStage {
            index,
            group: layout.group_of[position],
            level: layout.level_of[position],
            description: template::render(&spec.description.value, lookup).into_owned(),
            depends_on: graph.dependencies[position]
                .iter()
                .map(|&dependency| layout.index_of[dependency])
                .collect(),
            reads_from: Vec::new(),
            spec: Arc::clone(spec),
            when,
            cli_commands,
            template,
            guide,
        });
    }
    if options.reject_unknown_params {
        let filled: Vec<&str> = stages
            .iter()
            .flat_map(|stage| stage.template.iter().chain(stage.guide.iter()))
            .map(String::as_str)
            .collect();
        errors.extend(crate::params::unknown(workflow, &options.params, &filled));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let index_of_name: std::collections::HashMap<&str, usize> = stages
        .iter()
        .map(|stage| (stage.spec.name.value.as_str(), stage.index))
        .collect();
    let reads: Vec<Vec<usize>> = stages
        .iter()
        .map(|stage| {
            stage
                .spec
                .reads_from
                .iter()
                .map(|name| index_of_name[name.value.as_str()])
                .collect()
        })
        .collect();
    for (stage, reads) in stages.iter_mut().zip(reads) {
        stage.reads_from = reads;
    }

    Ok(Plan {
        name: workflow.name.clone(),
        version: workflow.version.clone(),
        description: workflow.description.clone(),
        workspace_dir: workflow.workspace_dir.clone(),
        budget_usd: workflow.budget_usd,
        contract_warnings: contract_warnings(&workflow.stages),
        params,
        stages,
        groups: layout.groups,
        levels: layout.levels,
        warnings,
    })
}

fn check_when(
    stage: &Stage,
    expression: &str,
    params: &IndexMap<String, String>,
    warnings: &mut Vec<Diagnostic>,
) -> Result<When, Box<Diagnostic>> {
    let span = stage
        .when
        .as_ref()
        .map(|when| when.span)
        .unwrap_or_default();
    let name = &stage.name.value;
    let Some(when) = When::parse(expression) else {
        return Err(Box::new(
            Diagnostic::error(
                "compile::when",
                format!(
                    "Stage '{name}': unsupported 'when' expression '{}' — supported forms: {}",
                    expression.trim(),
                    when::FORMS
                ),
            )
            .at(&stage.file, span)
            .for_field(name, "when")
            .with_label("not a supported condition")
            .with_help("write `when: '\"{param}\" contains \"value\"'` or `'\"{param}\" does not contain \"value\"'`"),
        ));
    };
    // A parameter without a value may still be given with `--params` when
    // the workflow runs (real workflows rely on it), so this is a warning
    // here; the engine refuses to evaluate a condition that still lacks it.
    for unknown in when
        .placeholders()
        .into_iter()
        .filter(|placeholder| !params.contains_key(*placeholder))
    {
        warnings.push(
            Diagnostic::warning(
                "compile::when-param",
                format!("Stage '{name}': 'when' refers to '{{{unknown}}}', which has no value yet"),
            )
            .at(&stage.file, span)
            .for_field(name, "when")
            .with_label("no value for this parameter")
            .with_help(format!(
                "pass `--params {unknown}=…` when running, or declare it under `trigger.params`"
            )),
        );
    }
    Ok(when)
}

fn read_text(loader: &dyn Loader, reference: &str) -> Option<String> {
    let bytes = loader.read(Path::new(reference), MAX_FILE_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn missing_file(stage: &Stage, what: &str, reference: &str, loader: &dyn Loader) -> Diagnostic {
    let full = loader.root().join(reference);
    Diagnostic::error(
        "compile::missing-file",
        format!(
            "Stage '{}': {what} not found at {}",
            stage.name.value,
            full.display()
        ),
    )
    .at(&stage.file, stage.span)
    .for_field(&stage.name.value, "outputs")
    .with_help("template and guide paths are relative to the current directory")
}

/// Builds the command of a `mode: invoke` output.
pub fn invoke_command(
    skill: &str,
    subcommand: Option<&str>,
    query: Option<&str>,
    flags: Option<&str>,
) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(5);
    if skill.starts_with('/') || skill.starts_with("./") {
        parts.push(skill.to_owned());
    } else {
        parts.push(format!("./bin/{skill}"));
    }
    if let Some(subcommand) = subcommand {
        parts.push(subcommand.to_owned());
    }
    let query = query.filter(|query| !query.is_empty());
    let flags = flags.filter(|flags| !flags.is_empty());
    if skill != "docs" && skill != "llm" && (query.is_some() || flags.is_some()) {
        parts.push("--".to_owned());
    }
    if let Some(query) = query {
        parts.push(format!("'{query}'"));
    }
    if let Some(flags) = flags {
        parts.push(flags.to_owned());
    }
    parts.join(" ")
}

fn contract_warnings(stages: &[Arc<Stage>]) -> Vec<ContractWarning> {
    let writes: std::collections::HashMap<&str, bool> = stages
        .iter()
        .map(|stage| (stage.name.value.as_str(), !stage.writes_to.is_empty()))
        .collect();
    let mut warnings = Vec::new();
    for stage in stages {
        for upstream in &stage.reads_from {
            if writes.get(upstream.value.as_str()) == Some(&false) {
                warnings.push(ContractWarning {
                    stage: stage.name.value.clone(),
                    upstream: upstream.value.clone(),
                    message: format!(
                        "stage '{}' reads_from '{}' but '{}' declares no writes_to outputs",
                        stage.name.value, upstream.value, upstream.value
                    ),
                });
            }
        }
    }
    warnings
}

/// Groups, levels and indices.
pub struct Layout {
    /// Stage positions in index order.
    pub order: Vec<usize>,
    /// Index of each position.
    pub index_of: Vec<usize>,
    /// Group of each position.
    pub group_of: Vec<usize>,
    /// Level of each position (`usize::MAX` for a stage never placed).
    pub level_of: Vec<usize>,
    /// The groups, holding indices.
    pub groups: Vec<Group>,
    /// Number of levels.
    pub levels: usize,
}

impl Layout {
    /// Levels stages breadth-first over `dependencies` (positions). A stage
    /// with a dependency outside the list (a fragment's reference to its
    /// parent) is never placed, as in the reference linter's `dag_depth`.
    pub fn of(stages: &[Arc<Stage>], dependencies: &[Vec<usize>]) -> Layout {
        Self::with_external(stages, dependencies, &vec![false; stages.len()])
    }

    /// Like [`Layout::of`], where `blocked[p]` marks stages with a dependency
    /// that cannot be satisfied.
    pub fn with_external(
        stages: &[Arc<Stage>],
        dependencies: &[Vec<usize>],
        blocked: &[bool],
    ) -> Layout {
        let count = stages.len();
        let mut waiting: Vec<usize> = dependencies.iter().map(Vec::len).collect();
        let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); count];
        for (position, edges) in dependencies.iter().enumerate() {
            for &dependency in edges {
                dependants[dependency].push(position);
            }
        }
        let mut level_of = vec![usize::MAX; count];
        let mut wave: Vec<usize> = (0..count)
            .filter(|&position| waiting[position] == 0 && !blocked[position])
            .collect();
        let mut order = Vec::with_capacity(count);
        let mut groups = Vec::new();
        let mut group_of = vec![usize::MAX; count];
        let mut level = 0;
        while !wave.is_empty() {
            wave.sort_unstable_by(|&left, &right| {
                stages[left].name.value.cmp(&stages[right].name.value)
            });
            let (gated, normal): (Vec<usize>, Vec<usize>) = wave
                .iter()
                .partition(|&&position| stages[position].human_gate);
            let mut push_group = |members: &[usize], gate: bool| {
                let mut indices = Vec::with_capacity(members.len());
                for &position in members {
                    group_of[position] = groups.len();
                    indices.push(order.len());
                    order.push(position);
                }
                groups.push(Group {
                    stages: indices,
                    gate,
                });
            };
            if !normal.is_empty() {
                push_group(&normal, false);
            }
            for position in gated {
                push_group(&[position], true);
            }
            let mut next = Vec::new();
            for &position in &wave {
                level_of[position] = level;
                for &dependant in &dependants[position] {
                    waiting[dependant] -= 1;
                    if waiting[dependant] == 0 && !blocked[dependant] {
                        next.push(dependant);
                    }
                }
            }
            wave = next;
            level += 1;
        }
        let mut index_of = vec![usize::MAX; count];
        for (index, &position) in order.iter().enumerate() {
            index_of[position] = index;
        }
        Layout {
            order,
            index_of,
            group_of,
            level_of,
            groups,
            levels: level,
        }
    }
}
