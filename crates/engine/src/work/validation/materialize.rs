//! The stage a validation unit runs: an agent stage of its own (name,
//! role, access, one output, a description baton renders) cut from the
//! validated stage, so it runs, is verified and is logged like any stage.

use baton_store::UnitRow;
use baton_workflow::node::Span;
use baton_workflow::schema::{Access, Executor, Isolation, Kind, Spanned};

use super::findings;
use super::prompts::{self, Round, Subject};
use super::sources::{Sources, sources};
use super::unit::{CHALLENGER, CHECK_CORRECTION, CORRECTION, EVIDENCE, Spec, VALIDATOR};
use crate::attempt::Continuation;
use crate::work::context::{Context, Materialized, unit_stage_name};

/// The role of a correction when the producing stage has no agent of its
/// own (an inline script).
const CORRECTION_ROLE: &str = "correction";

/// The stage to run for a validation unit (or the correction of failed
/// output checks).
pub(crate) fn materialize(context: &Context<'_>, unit: &UnitRow) -> Result<Materialized, String> {
    let spec: Spec = serde_json::from_str(&unit.spec)
        .map_err(|error| format!("unit {} has a damaged spec: {error}", unit.key))?;
    if unit.kind == CHECK_CORRECTION {
        // The stage corrects its own outputs.
        let sources = Sources {
            stages: vec![context.stage],
            producer: context.stage,
        };
        let subject = Subject {
            stage: context.stage.name(),
            producers: vec![context.stage.name()],
            files: &spec.files,
            task: &context.stage.description,
        };
        let description =
            prompts::correction(&subject, Round::Checks, &spec.findings, &spec.output);
        let mut materialized = build(
            context,
            unit,
            &sources,
            correction_role(&sources),
            Access::ReadWrite,
            description,
            &spec.output,
        );
        materialized.continues = continuation(context, &sources, &spec, &subject, Round::Checks);
        return Ok(materialized);
    }
    let Some(validation) = &context.stage.spec.validation else {
        return Err(format!(
            "unit {} belongs to validation, but the stage has none",
            unit.key
        ));
    };
    let sources = sources(context);
    let producers: Vec<&str> = sources.stages.iter().map(|stage| stage.name()).collect();
    let subject = Subject {
        stage: context.stage.name(),
        producers,
        files: &spec.files,
        task: &sources.producer.description,
    };
    let (role, access, description) = match unit.kind.as_str() {
        VALIDATOR => (
            VALIDATOR.to_owned(),
            Access::ReadOnly,
            prompts::validator(validation, &subject, spec.target.as_ref(), &spec.output),
        ),
        CHALLENGER => {
            let target = spec
                .target
                .as_ref()
                .ok_or_else(|| format!("unit {} names no unit to challenge", unit.key))?;
            (
                CHALLENGER.to_owned(),
                Access::ReadOnly,
                prompts::challenger(validation, &subject, target, &spec.output),
            )
        }
        EVIDENCE => {
            let file = spec
                .challenges
                .as_deref()
                .ok_or_else(|| format!("unit {} names no challenges file", unit.key))?;
            let challenges = findings::read_json(context.workspace, file)?;
            let text = serde_json::to_string_pretty(&challenges).expect("plain data");
            (
                EVIDENCE.to_owned(),
                Access::ReadOnly,
                prompts::evidence(validation, &subject, file, &text, &spec.output),
            )
        }
        CORRECTION => (
            correction_role(&sources),
            Access::ReadWrite,
            prompts::correction(
                &subject,
                Round::Validation(unit.cycle),
                &spec.findings,
                &spec.output,
            ),
        ),
        other => return Err(format!("unknown unit kind '{other}'")),
    };
    let mut materialized = build(
        context,
        unit,
        &sources,
        role,
        access,
        description,
        &spec.output,
    );
    if unit.kind == CORRECTION {
        let round = Round::Validation(unit.cycle);
        materialized.continues = continuation(context, &sources, &spec, &subject, round);
    }
    Ok(materialized)
}

/// The session a correction may continue, with what to send it: the
/// findings alone, in the place and with the access the session had.
fn continuation(
    context: &Context<'_>,
    sources: &Sources<'_>,
    spec: &Spec,
    subject: &Subject<'_>,
    round: Round,
) -> Option<Continuation> {
    let log = spec.continues.as_ref()?;
    Some(Continuation {
        log: context.workspace.join(log),
        access: sources.producer.spec.agent.access,
        task: prompts::continued_correction(subject, round, &spec.findings, &spec.output),
    })
}

/// A correction runs an agent of the producing stage's role; a scripted
/// inline stage has none, so role `correction` is used.
fn correction_role(sources: &Sources<'_>) -> String {
    let declared = &sources.producer.spec.agent.role;
    if declared == "inline" {
        CORRECTION_ROLE.to_owned()
    } else {
        declared.clone()
    }
}

/// The unit's stage: an agent stage cut from the validated stage.
fn build(
    context: &Context<'_>,
    unit: &UnitRow,
    sources: &Sources<'_>,
    role: String,
    access: Access,
    description: String,
    output: &str,
) -> Materialized {
    let correcting = unit.kind == CORRECTION || unit.kind == CHECK_CORRECTION;
    let mut stage = context.stage.clone();
    let spec = std::sync::Arc::make_mut(&mut stage.spec);
    let name = unit_stage_name(context.stage.name(), unit);
    let spanned = |value: String| Spanned::new(value, Span::default());
    spec.name = spanned(name);
    spec.kind = if correcting {
        Kind::Execute
    } else {
        Kind::Validate
    };
    spec.executor = Executor::Agent;
    spec.script = None;
    spec.agent.role = role;
    spec.agent.access = access;
    spec.agent.isolation = Isolation::WorkDir;
    if correcting {
        // The producer's own agent settings, as it did the work.
        spec.agent
            .model
            .clone_from(&sources.producer.spec.agent.model);
        spec.agent
            .tools
            .clone_from(&sources.producer.spec.agent.tools);
    } else {
        spec.agent.model = None;
        spec.agent.tools = Vec::new();
    }
    spec.description = spanned(description.clone());
    stage.description = description;
    spec.reads_from = sources
        .stages
        .iter()
        .filter(|source| source.index != context.stage.index)
        .map(|source| spanned(source.name().to_owned()))
        .collect();
    stage.reads_from = sources
        .stages
        .iter()
        .map(|source| source.index)
        .filter(|&index| index != context.stage.index)
        .collect();
    spec.writes_to = vec![spanned(output.to_owned())];
    spec.outputs = Vec::new();
    spec.validation = None;
    spec.validates_output = Vec::new();
    spec.fan_out = None;
    spec.human_gate = false;
    spec.when = None;
    stage.when = None;
    stage.cli_commands = Vec::new();
    stage.template = None;
    stage.guide = None;
    Materialized {
        stage,
        values: Vec::new(),
        env: Vec::new(),
        defer_checks: false,
        continues: None,
    }
}
