//! `baton check WORKFLOW`: everything that would stop a run, found before
//! one starts. The workflow is linted, then every agent its stages and
//! validators need is resolved to a profile and checked as `baton agents
//! check` checks it. `baton run --dry-run` makes the same agent check.

use baton_engine::readiness::{self, Checked};
use baton_executor::profile::{CheckResult, Config};
use baton_workflow::Plan;
use serde::Serialize;

use super::agents_probe::{self, Probed};
use crate::args::Format;
use crate::args::check::CheckArgs;
use crate::report::JsonDiagnostic;
use crate::{exit_code, output, report, settings};

/// One agent the run would start, and whether it can.
#[derive(Debug, Serialize)]
pub(crate) struct AgentRow {
    stage: String,
    duty: &'static str,
    role: String,
    profile: Option<String>,
    ready: bool,
}

#[derive(Serialize)]
struct CheckJson<'a> {
    file: &'a str,
    valid: bool,
    errors: Vec<JsonDiagnostic<'a>>,
    warnings: Vec<JsonDiagnostic<'a>>,
    stages: usize,
    agents: &'a [AgentRow],
    problems: &'a [String],
    notes: &'a [String],
    /// `null` without `--probe`, else as `baton agents check --probe`.
    probe: Option<Vec<serde_json::Value>>,
    ready: bool,
}

pub(crate) fn run(args: &CheckArgs) -> Result<u8, u8> {
    let format = args.format.format();
    let as_json = format == Format::Json;
    let options = super::compile_options(&args.params)?;
    let loader = super::loader();
    let lint = baton_workflow::lint::lint(&args.file, &loader, &options, args.strict);
    let plan = if lint.valid {
        match baton_workflow::load(&args.file, &loader)
            .and_then(|loaded| baton_workflow::compile(&loaded, &options, &loader))
        {
            Ok(plan) => Some(plan),
            Err(failure) => {
                // Linted valid, but not a workflow that can run: a fragment.
                report::emit(&failure.errors, as_json);
                return Ok(exit_code::INVALID_WORKFLOW);
            }
        }
    } else {
        None
    };
    let agents = super::or_usage(settings::project_agents(&super::project_dir()))?;
    let found = plan.as_ref().map_or_else(AgentCheck::default, |plan| {
        check_agents(plan, agents.as_ref())
    });
    let mut checked = found.checked.clone();
    let probed = match (&agents, args.probe) {
        (Some(config), true) if lint.valid && checked.problems.is_empty() => {
            Some(super::or_usage(probe(config, &found, args.timeout))?)
        }
        _ => None,
    };
    if let Some((probed, _)) = &probed {
        for one in probed.iter().filter(|one| !one.ok()) {
            let model = one
                .probe
                .model
                .as_deref()
                .map(|model| format!(", model {model}"))
                .unwrap_or_default();
            checked.problems.push(format!(
                "profile `{}` (role {}{model}) did not answer its probe: {}",
                one.probe.profile,
                one.roles.join(", "),
                one.error().unwrap_or_default()
            ));
        }
    }
    let rows = found.rows;
    if format == Format::Table {
        report::human(&lint.warnings);
        report::human(&lint.errors);
    }
    print_checked(&checked);
    let ready = lint.valid && checked.problems.is_empty();
    let view = CheckJson {
        file: &lint.file,
        valid: lint.valid,
        errors: lint.errors.iter().map(JsonDiagnostic::from).collect(),
        warnings: lint.warnings.iter().map(JsonDiagnostic::from).collect(),
        stages: lint.stages,
        agents: &rows,
        problems: &checked.problems,
        notes: &checked.notes,
        probe: probed.as_ref().map(|(probed, contained)| {
            probed
                .iter()
                .map(|one| agents_probe::probe_json(one, *contained))
                .collect()
        }),
        ready,
    };
    output::print(format, &view, || {
        let mut text = table(&lint, &rows);
        if let Some((probed, contained)) = &probed {
            text.push_str(&agents_probe::table(probed, *contained, args.timeout));
        }
        text
    });
    Ok(if !lint.valid {
        exit_code::INVALID_WORKFLOW
    } else if !checked.problems.is_empty() {
        output::stderr_line(
            "hint: map the roles in baton.toml or install the CLIs (`baton agents check` shows what is installed), then check again",
        );
        exit_code::REFUSED
    } else {
        output::stderr_line(&format!("ready: `baton run {}` would start", args.file));
        exit_code::SUCCESS
    })
}

/// What [`check_agents`] found.
#[derive(Default)]
pub(crate) struct AgentCheck<'c> {
    /// One row per agent the run would start.
    pub(crate) rows: Vec<AgentRow>,
    /// What keeps them from starting, and notes.
    pub(crate) checked: Checked,
    /// Each profile's check, by name.
    pub(crate) results: Vec<(&'c String, CheckResult)>,
}

/// Checks every agent the plan needs: its role's profile, that profile's
/// `--version` (or endpoint), side by side as `baton agents check` runs
/// them. Warnings (tools a profile cannot pass) are printed here.
pub(crate) fn check_agents<'c>(plan: &Plan, agents: Option<&'c Config>) -> AgentCheck<'c> {
    for warning in readiness::warnings(plan, agents) {
        output::stderr_line(&format!("warning: {warning}"));
    }
    let results: Vec<(&String, CheckResult)> = agents
        .map(|config| super::agents::check_profiles(readiness::profiles(plan, config).into_iter()))
        .unwrap_or_default()
        .into_iter()
        .map(|(name, _, result)| (name, result))
        .collect();
    let by_name: Vec<(&str, &CheckResult)> = results
        .iter()
        .map(|(name, result)| (name.as_str(), result))
        .collect();
    let checked = readiness::checked(plan, agents, &by_name);
    let rows = readiness::needed(plan)
        .into_iter()
        .map(|needed| {
            let profile = agents
                .and_then(|config| config.agent(&needed.role).ok())
                .map(|agent| agent.profile_name.to_owned());
            let ready = profile.as_deref().is_some_and(|name| {
                by_name
                    .iter()
                    .any(|(profile, result)| *profile == name && result.available)
            });
            AgentRow {
                stage: needed.stage,
                duty: needed.duty,
                role: needed.role,
                profile,
                ready,
            }
        })
        .collect();
    AgentCheck {
        rows,
        checked,
        results,
    }
}

/// What keeps the agents from starting, as errors, and the notes, on stderr.
pub(crate) fn print_checked(checked: &Checked) {
    for problem in &checked.problems {
        output::stderr_line(&format!("error: {problem}"));
    }
    for note in &checked.notes {
        output::stderr_line(&format!("note: {note}"));
    }
}

/// `--probe`: each profile the workflow's roles resolve to, asked for a
/// one-word answer as `baton agents check --probe` asks it (once per model
/// the roles ask for). Run only when every agent can start.
fn probe(
    config: &Config,
    found: &AgentCheck<'_>,
    timeout: std::time::Duration,
) -> Result<(Vec<Probed>, bool), String> {
    let mut names: Vec<String> = Vec::new();
    for (name, _) in &found.results {
        if !names.contains(name) {
            names.push((*name).clone());
        }
    }
    let targets = agents_probe::targets(config, &names);
    agents_probe::run(config, targets, &found.results, timeout)
}

fn table(lint: &baton_workflow::lint::Report, rows: &[AgentRow]) -> String {
    let verdict = if lint.valid { "valid" } else { "invalid" };
    let mut text = format!(
        "{}: {verdict} workflow, {} stages, {} errors, {} warnings\n",
        lint.file,
        lint.stages,
        lint.errors.len(),
        lint.warnings.len()
    );
    if !lint.valid {
        return text;
    }
    if rows.is_empty() {
        text.push_str("agents: none (no stage runs an agent)\n");
        return text;
    }
    let header = ["stage", "runs", "role", "profile", "ready"];
    text.push_str(&output::table_of(&header, rows, |row| {
        vec![
            row.stage.clone(),
            row.duty.to_owned(),
            row.role.clone(),
            row.profile.clone().unwrap_or_else(|| "-".to_owned()),
            if row.ready { "yes" } else { "no" }.to_owned(),
        ]
    }));
    text
}
