//! The stage a validation unit runs: an agent stage of its own (name,
//! role, access, one output, a description baton renders) cut from the
//! validated stage, so it runs, is verified and is logged like any stage.

use baton_store::UnitRow;
use baton_workflow::node::Span;
use baton_workflow::schema::{Access, Executor, Isolation, Kind, Spanned};

use super::prompts::{self, Subject};
use super::{CHALLENGER, CORRECTION, EVIDENCE, Spec, VALIDATOR, findings, sources};
use crate::work::{Context, Materialized};

/// The role of a correction when the producing stage has no agent of its
/// own (an inline script).
const CORRECTION_ROLE: &str = "correction";

/// The stage to run for a validation unit.
pub(crate) fn materialize(context: &Context<'_>, unit: &UnitRow) -> Result<Materialized, String> {
    let Some(validation) = &context.stage.spec.validation else {
        return Err(format!(
            "unit {} belongs to validation, but the stage has none",
            unit.key
        ));
    };
    let spec: Spec = serde_json::from_str(&unit.spec)
        .map_err(|error| format!("unit {} has a damaged spec: {error}", unit.key))?;
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
        CORRECTION => {
            let declared = &sources.producer.spec.agent.role;
            let role = if declared == "inline" {
                CORRECTION_ROLE.to_owned()
            } else {
                declared.clone()
            };
            (
                role,
                Access::ReadWrite,
                prompts::correction(&subject, unit.cycle, &spec.findings, &spec.output),
            )
        }
        other => return Err(format!("unknown unit kind '{other}'")),
    };
    let mut stage = context.stage.clone();
    let name = super::super::unit_stage_name(context.stage.name(), unit);
    let spanned = |value: String| Spanned::new(value, Span::default());
    stage.spec.name = spanned(name);
    stage.spec.kind = if unit.kind == CORRECTION {
        Kind::Execute
    } else {
        Kind::Validate
    };
    stage.spec.executor = Executor::Agent;
    stage.spec.script = None;
    stage.spec.agent.role = role;
    stage.spec.agent.access = access;
    stage.spec.agent.isolation = Isolation::WorkDir;
    if unit.kind == CORRECTION {
        // The producer's own agent settings, as it did the work.
        stage
            .spec
            .agent
            .model
            .clone_from(&sources.producer.spec.agent.model);
        stage
            .spec
            .agent
            .tools
            .clone_from(&sources.producer.spec.agent.tools);
    } else {
        stage.spec.agent.model = None;
        stage.spec.agent.tools = Vec::new();
    }
    stage.spec.description = spanned(description.clone());
    stage.description = description;
    stage.spec.reads_from = sources
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
    stage.spec.writes_to = vec![spanned(spec.output.clone())];
    stage.spec.outputs = Vec::new();
    stage.spec.validation = None;
    stage.spec.validates_output = Vec::new();
    stage.spec.fan_out = None;
    stage.spec.human_gate = false;
    stage.spec.when = None;
    stage.when = None;
    stage.cli_commands = Vec::new();
    stage.template = None;
    stage.guide = None;
    Ok(Materialized {
        stage,
        values: Vec::new(),
        env: Vec::new(),
    })
}
