//! `baton compile FILE [--strict] [--params k=v] [--format …]`.

use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use serde::Serialize;

use crate::args::{CompileArgs, CompileFormat};
use crate::commands::graph;
use crate::{exit_code, output, report};

pub(crate) fn run(args: &CompileArgs) -> Result<u8, u8> {
    let format = if args.json {
        CompileFormat::Json
    } else {
        args.format
    };
    let as_json = format == CompileFormat::Json;
    let options = super::compile_options(&args.params)?;
    let loader = super::loader();
    let compiled = baton_workflow::load(&args.file, &loader).and_then(|loaded| {
        baton_workflow::compile(&loaded, &options, &loader).map(|plan| {
            let warnings = [loaded.warnings, plan.warnings.clone()].concat();
            (plan, warnings)
        })
    });
    let (plan, warnings) = match compiled {
        Ok(compiled) => compiled,
        Err(failure) => {
            report::emit(&[failure.warnings, failure.errors].concat(), as_json);
            return Ok(exit_code::INVALID_WORKFLOW);
        }
    };
    if args.strict && !warnings.is_empty() {
        let errors: Vec<_> = warnings
            .into_iter()
            .map(|mut warning| {
                warning.severity = baton_workflow::Severity::Error;
                warning
            })
            .collect();
        report::emit(&errors, as_json);
        output::stderr_line("error: warnings are errors under --strict");
        return Ok(exit_code::INVALID_WORKFLOW);
    }
    report::emit(&warnings, as_json);
    for warning in &plan.contract_warnings {
        output::stderr_line(&format!("contract warning: {}", warning.message));
    }
    let text = match format {
        CompileFormat::Json => {
            output::write_json(&plan_view(&plan));
            return Ok(exit_code::SUCCESS);
        }
        CompileFormat::Yaml => output::yaml(&plan_view(&plan)),
        CompileFormat::Table => table(&plan),
        CompileFormat::Mermaid => graph::mermaid(&plan),
        CompileFormat::Dot => graph::dot(&plan),
    };
    output::stdout(&text);
    Ok(exit_code::SUCCESS)
}

/// The plan as JSON: the reference engine's keys, in its order, then
/// `version`, `params` and `stages` with everything a consumer needs without
/// reading the YAML. Borrowed views serialised straight to stdout keep a
/// 10 000-stage plan from being copied into a JSON tree first.
#[derive(Serialize)]
struct PlanView<'a> {
    name: &'a str,
    total_stages: usize,
    total_groups: usize,
    max_parallelism: usize,
    compiled_at: String,
    contract_warnings: usize,
    groups: Vec<GroupView>,
    resolutions: Vec<ResolutionView<'a>>,
    contract_warnings_detail: Vec<WarningView<'a>>,
    version: &'a str,
    params: &'a indexmap::IndexMap<String, String>,
    stages: Vec<StageView<'a>>,
}

#[derive(Serialize)]
struct GroupView {
    group: usize,
    stages: String,
    parallelism: usize,
}

/// One stage's resolution: the reference's four fields, then what an
/// orchestrator needs to dispatch the stage without reading `stages`.
#[derive(Serialize)]
struct ResolutionView<'a> {
    stage: &'a str,
    template_resolved: bool,
    guide_resolved: bool,
    cli_commands: usize,
    index: usize,
    kind: &'static str,
    executor: &'static str,
    human_gate: bool,
    sub_workflow: Option<&'a str>,
    agent_role: &'a str,
    agent_model: Option<&'a str>,
    agent_isolation: &'static str,
}

#[derive(Serialize)]
struct WarningView<'a> {
    stage: &'a str,
    upstream: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct StageView<'a> {
    index: usize,
    name: &'a str,
    group: usize,
    level: usize,
    kind: &'static str,
    executor: &'static str,
    agent: Agent<'a>,
    description: &'a str,
    depends_on: Vec<&'a str>,
    reads_from: Vec<&'a str>,
    writes_to: Vec<&'a str>,
    script: Option<&'a str>,
    when: Option<&'a str>,
    fan_out: Option<FanOutView<'a>>,
    validation: Option<ValidationView<'a>>,
    human_gate: bool,
    required: bool,
    validates_output: Vec<CheckView<'a>>,
    sub_workflow: Option<&'a str>,
    outputs: Vec<OutputView<'a>>,
    cli_commands: &'a [String],
    include_prefix: Option<&'a str>,
}

#[derive(Serialize)]
struct FanOutView<'a> {
    source: &'a str,
    field: &'a str,
    key: &'a str,
    mode: &'static str,
    script: Option<&'a str>,
    isolation: &'static str,
}

#[derive(Serialize)]
struct ValidationView<'a> {
    strategy: &'static str,
    criteria: &'a [String],
    max_revisions: u32,
    domain_rules: Vec<RuleView<'a>>,
}

#[derive(Serialize)]
struct RuleView<'a> {
    id: &'a str,
    description: &'a str,
    severity: &'static str,
    category: &'static str,
    source_cmd: Option<&'a str>,
}

#[derive(Serialize)]
struct CheckView<'a> {
    path: &'a str,
    checks: Vec<String>,
}

#[derive(Serialize)]
struct OutputView<'a> {
    name: &'a str,
    mode: &'static str,
}

#[derive(Serialize)]
struct Agent<'a> {
    role: &'a str,
    model: Option<&'a str>,
    tools: &'a [String],
    access: &'static str,
    isolation: &'static str,
}

fn plan_view(plan: &Plan) -> PlanView<'_> {
    PlanView {
        name: &plan.name,
        total_stages: plan.stages.len(),
        total_groups: plan.groups.len(),
        max_parallelism: plan.max_parallelism(),
        compiled_at: baton_engine::workspace::utc(baton_engine::clock::now_ms()),
        contract_warnings: plan.contract_warnings.len(),
        groups: plan
            .groups
            .iter()
            .enumerate()
            .map(|(number, group)| GroupView {
                group: number,
                stages: names(plan, &group.stages).join(", "),
                parallelism: group.stages.len(),
            })
            .collect(),
        resolutions: plan.stages.iter().map(resolution_view).collect(),
        contract_warnings_detail: plan
            .contract_warnings
            .iter()
            .map(|warning| WarningView {
                stage: &warning.stage,
                upstream: &warning.upstream,
                message: &warning.message,
            })
            .collect(),
        version: &plan.version,
        params: &plan.params,
        stages: plan
            .stages
            .iter()
            .map(|stage| stage_view(plan, stage))
            .collect(),
    }
}

fn resolution_view(stage: &PlanStage) -> ResolutionView<'_> {
    let spec = &stage.spec;
    ResolutionView {
        stage: stage.name(),
        template_resolved: stage.template.is_some(),
        guide_resolved: stage.guide.is_some(),
        cli_commands: stage.cli_commands.len(),
        index: stage.index,
        kind: spec.kind.as_str(),
        executor: spec.executor.as_str(),
        human_gate: spec.human_gate,
        sub_workflow: spec.sub_workflow.as_deref(),
        agent_role: &spec.agent.role,
        agent_model: spec.agent.model.as_deref(),
        agent_isolation: spec.agent.isolation.as_str(),
    }
}

fn names<'a>(plan: &'a Plan, indices: &[usize]) -> Vec<&'a str> {
    indices
        .iter()
        .map(|&index| plan.stages[index].name())
        .collect()
}

fn stage_view<'a>(plan: &'a Plan, stage: &'a PlanStage) -> StageView<'a> {
    let spec = &stage.spec;
    StageView {
        index: stage.index,
        name: stage.name(),
        group: stage.group,
        level: stage.level,
        kind: spec.kind.as_str(),
        executor: spec.executor.as_str(),
        agent: Agent {
            role: &spec.agent.role,
            model: spec.agent.model.as_deref(),
            tools: &spec.agent.tools,
            access: spec.agent.access.as_str(),
            isolation: spec.agent.isolation.as_str(),
        },
        description: &stage.description,
        depends_on: names(plan, &stage.depends_on),
        reads_from: names(plan, &stage.reads_from),
        writes_to: spec
            .writes_to
            .iter()
            .map(|path| path.value.as_str())
            .collect(),
        script: spec.script.as_ref().map(|script| script.value.as_str()),
        when: spec.when.as_ref().map(|when| when.value.trim()),
        fan_out: spec.fan_out.as_ref().map(|fan_out| FanOutView {
            source: &fan_out.source.value,
            field: &fan_out.field,
            key: &fan_out.key,
            mode: fan_out.mode.as_str(),
            script: fan_out.script.as_ref().map(|script| script.value.as_str()),
            isolation: fan_out.isolation.as_str(),
        }),
        validation: spec.validation.as_ref().map(|validation| ValidationView {
            strategy: validation.strategy.as_str(),
            criteria: &validation.criteria,
            max_revisions: validation.max_revisions,
            domain_rules: validation
                .domain_rules
                .iter()
                .map(|rule| RuleView {
                    id: &rule.id,
                    description: &rule.description,
                    severity: rule.severity.as_str(),
                    category: rule.category.as_str(),
                    source_cmd: rule.source_cmd.as_deref(),
                })
                .collect(),
        }),
        human_gate: spec.human_gate,
        required: spec.required,
        validates_output: spec
            .validates_output
            .iter()
            .map(|check| CheckView {
                path: &check.path.value,
                checks: check
                    .checks
                    .iter()
                    .map(|check| check.value.to_string())
                    .collect(),
            })
            .collect(),
        sub_workflow: spec.sub_workflow.as_deref(),
        outputs: spec
            .outputs
            .iter()
            .map(|output| OutputView {
                name: &output.name,
                mode: output.mode.as_str(),
            })
            .collect(),
        cli_commands: &stage.cli_commands,
        include_prefix: spec.include_prefix.as_deref(),
    }
}

fn table(plan: &Plan) -> String {
    let mut text = format!(
        "name: {}\ntotal_stages: {}\ntotal_groups: {}\nmax_parallelism: {}\ncontract_warnings: {}\n\n",
        plan.name,
        plan.stages.len(),
        plan.groups.len(),
        plan.max_parallelism(),
        plan.contract_warnings.len()
    );
    let header = [
        "group",
        "index",
        "stage",
        "kind",
        "run by",
        "depends_on",
        "notes",
    ];
    text.push_str(&output::table_of(&header, &plan.stages, |stage| {
        let spec = &stage.spec;
        let mut notes = Vec::new();
        if spec.human_gate {
            notes.push("gate".to_owned());
        }
        if !spec.required {
            notes.push("optional".to_owned());
        }
        if let Some(fan_out) = &spec.fan_out {
            notes.push(format!(
                "fan-out over {}.{} by {{{}}}",
                fan_out.source.value, fan_out.field, fan_out.key
            ));
        }
        if let Some(validation) = &spec.validation {
            notes.push(format!(
                "validation {} (max {} revisions)",
                validation.strategy, validation.max_revisions
            ));
        }
        if spec.when.is_some() {
            notes.push("when".to_owned());
        }
        vec![
            stage.group.to_string(),
            format!("{:03}", stage.index),
            stage.name().to_owned(),
            spec.kind.as_str().to_owned(),
            run_by(spec),
            names(plan, &stage.depends_on).join(", "),
            notes.join("; "),
        ]
    }));
    text
}

/// Who or what carries a stage out, for the table's `run by` column:
/// `agent:ROLE` (the role baton.toml maps to an agent CLI), `script`,
/// `queue` (a job for `baton worker`), or `workflow:PATH` (a child run).
/// An inline stage without a script is handed to the `inline` role; a
/// queue fan-out's items are queue jobs, whatever the stage's executor.
fn run_by(spec: &baton_workflow::schema::Stage) -> String {
    use baton_workflow::schema::{Executor, FanOutMode};
    if let Some(path) = &spec.sub_workflow {
        return format!("workflow:{path}");
    }
    let queue_fan_out = spec
        .fan_out
        .as_ref()
        .is_some_and(|fan_out| fan_out.mode == FanOutMode::WorkerQueue);
    match spec.executor {
        Executor::WorkerQueue => "queue".to_owned(),
        _ if queue_fan_out => "queue".to_owned(),
        Executor::Inline if spec.script.is_some() => "script".to_owned(),
        Executor::Inline => "agent:inline".to_owned(),
        Executor::Agent => format!("agent:{}", spec.agent.role),
    }
}

/// `baton run --dry-run`: the plan, and nothing recorded or run.
pub(crate) fn dry_run(
    file: &str,
    options: &baton_workflow::compile::Options,
    as_json: bool,
) -> Result<u8, u8> {
    let loader = super::project_loader();
    let compiled = baton_workflow::load(&super::workflow_file(file), &loader).and_then(|loaded| {
        baton_workflow::compile(&loaded, options, &loader).map(|plan| (plan, loaded.warnings))
    });
    let (plan, warnings) = match compiled {
        Ok(compiled) => compiled,
        Err(failure) => {
            report::emit(&[failure.warnings, failure.errors].concat(), as_json);
            return Ok(exit_code::INVALID_WORKFLOW);
        }
    };
    report::emit(&warnings, as_json);
    if as_json {
        output::write_json(&plan_view(&plan));
    } else {
        output::stdout(&table(&plan));
    }
    // What `run` checks before it records anything, and more: each
    // profile's CLI is asked for its version, as `baton check` does.
    let agents = super::or_usage(crate::settings::project_agents(&super::project_dir()))?;
    let checked = super::check::check_agents(&plan, agents.as_ref()).checked;
    super::check::print_checked(&checked);
    output::stderr_line("dry run: nothing was recorded or run");
    Ok(if checked.problems.is_empty() {
        exit_code::SUCCESS
    } else {
        exit_code::REFUSED
    })
}
