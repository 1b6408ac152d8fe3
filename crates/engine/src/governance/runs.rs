//! Workflow runs and governance: the rule that a validator may not run
//! under the identity that produced what it validates, checked before a run
//! starts, and the run's ledger (scope `run`, key = run id), written as
//! `Transition::LedgerAppended` in the same commit as the results it
//! describes — stage outputs as edits with their hashes, each validation
//! cycle as a validation of the validated stages' files with its blocking
//! findings as a review, a correction as repairs of those findings plus its
//! edits, and the next cycle as their re-review.
//!
//! Identity is the agent profile a stage's role resolves to in `baton.toml`
//! (plus the model: the stage's own, else the role's), with
//! `<run>/<stage>` as the session. Script stages have no agent identity.

use baton_executor::profile::{Config, SelfReview};
use baton_lifecycle::governance::Identity;
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::{Executor, Kind, Strategy};

use crate::work;

mod cycle;
mod ledger;
pub(crate) use ledger::RunLedger;

/// The identity the engine records the run's own entries under.
pub(crate) const ENGINE: &str = "baton";

/// A validator that would share the producer's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfReviewConflict {
    /// The stage with `validation:`.
    pub stage: String,
    /// The stage whose work it validates.
    pub producer: String,
    /// The producer's role and the validator's role.
    pub roles: (String, String),
    /// The identity both resolve to.
    pub identity: Identity,
}

impl SelfReviewConflict {
    /// What a person reads: the conflict and exactly how to resolve it.
    pub fn message(&self) -> String {
        let (producer_role, validator_role) = &self.roles;
        let model = self
            .identity
            .model
            .as_deref()
            .map_or_else(String::new, |m| format!(" (model {m})"));
        format!(
            "stage `{}` would validate the work of `{}` under the identity that produced it: roles `{producer_role}` and `{validator_role}` both resolve to profile `{}`{model}. \
             Give the {validator_role} a profile of its own in baton.toml, e.g.\n  [agents.{validator_role}]\n  profile = \"<another profile>\"\n\
             or allow it knowingly (recorded as a waiver in the run's ledger):\n  [governance]\n  self_review = \"allow\"",
            self.stage, self.producer, self.identity.profile
        )
    }
}

/// The identity a stage's `role` runs under, or `None` for a script or a
/// role with no profile (which fails on its own when it runs).
pub(super) fn resolve(
    config: &Config,
    role: &str,
    model: Option<&str>,
    session: String,
) -> Option<Identity> {
    let agent = config.agent(role).ok()?;
    Some(Identity {
        profile: agent.profile_name.to_owned(),
        model: model.or(agent.model).map(str::to_owned),
        session,
    })
}

/// A stage's own identity (the producer of its outputs).
pub(crate) fn stage_identity(run_id: &str, stage: &PlanStage, config: Option<&Config>) -> Identity {
    let session = format!("{run_id}/{}", stage.name());
    let spec = &stage.spec;
    let scripted = spec.runs_script();
    let role = spec.agent_role();
    config
        .filter(|_| !scripted && spec.executor != Executor::WorkerQueue)
        .and_then(|config| resolve(config, role, spec.agent.model.as_deref(), session.clone()))
        .unwrap_or(Identity {
            profile: if scripted { "script" } else { role }.to_owned(),
            model: None,
            session,
        })
}

/// The stages `stage`'s validation judges: for a `kind: validate` stage its
/// non-gate dependencies (the first produced the work), else itself.
pub(super) fn validated<'p>(plan: &'p Plan, stage: &'p PlanStage) -> Vec<&'p PlanStage> {
    if stage.spec.kind == Kind::Validate {
        let upstream: Vec<&PlanStage> = stage
            .depends_on
            .iter()
            .filter_map(|&index| plan.stages.get(index))
            .filter(|upstream| !upstream.spec.human_gate)
            .collect();
        if !upstream.is_empty() {
            return upstream;
        }
    }
    vec![stage]
}

/// The roles whose units judge a stage's work.
pub(crate) fn validator_roles(strategy: Strategy) -> &'static [&'static str] {
    match strategy {
        Strategy::Adversarial => &[work::validation::CHALLENGER, work::validation::EVIDENCE],
        _ => &[work::validation::VALIDATOR],
    }
}

/// Every validator that would run under its producer's identity.
pub fn self_reviews(plan: &Plan, config: &Config) -> Vec<SelfReviewConflict> {
    let mut out = Vec::new();
    for stage in &plan.stages {
        let Some(validation) = &stage.spec.validation else {
            continue;
        };
        let producer = validated(plan, stage)[0];
        let spec = &producer.spec;
        if spec.runs_script() {
            continue;
        }
        let producer_role = spec.agent_role();
        let Some(made_by) = resolve(
            config,
            producer_role,
            spec.agent.model.as_deref(),
            String::new(),
        ) else {
            continue;
        };
        for role in validator_roles(validation.strategy) {
            if let Some(judge) = resolve(config, role, None, String::new())
                && made_by.same_owner(&judge)
            {
                out.push(SelfReviewConflict {
                    stage: stage.name().to_owned(),
                    producer: producer.name().to_owned(),
                    roles: (producer_role.to_owned(), (*role).to_owned()),
                    identity: made_by.clone(),
                });
            }
        }
    }
    out
}

/// What a run's drive checks before it starts: `Err(message)` when a
/// validator would review its own work and `baton.toml` does not allow it,
/// else the conflicts allowed (to record as waivers).
pub fn preflight(plan: &Plan, config: Option<&Config>) -> Result<Vec<SelfReviewConflict>, String> {
    let Some(config) = config else {
        return Ok(Vec::new());
    };
    let conflicts = self_reviews(plan, config);
    match (conflicts.first(), config.governance.self_review) {
        (Some(conflict), SelfReview::Refuse) => Err(conflict.message()),
        _ => Ok(conflicts),
    }
}

#[cfg(test)]
mod tests {
    use baton_workflow::MemoryLoader;

    use super::*;

    fn plan(stages: &str) -> Plan {
        let yaml = format!(
            "name: t\nversion: '1'\ndescription: d\ntrigger: {{source: manual}}\nstages:\n{stages}"
        );
        let loader = MemoryLoader::new().with("w.yaml", &yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles")
    }

    fn config(agents: &str) -> Config {
        let profiles = "[profiles.a]\nprogram = \"a\"\n[profiles.b]\nprogram = \"b\"\n";
        Config::from_toml(&format!("{profiles}{agents}")).expect("config")
    }

    const AGENT: &str = "  - {name: draft, kind: propose, description: d, agent: {role: writer}, writes_to: [d.md], validation: {strategy: VALIDATION}}\n";
    const SCRIPT: &str = "  - {name: draft, kind: execute, description: d, executor: inline, script: 'true', writes_to: [d.md], validation: {strategy: unit}}\n";

    /// (stages, baton.toml agents, conflicting roles)
    #[test]
    fn self_reviews_by_profile_and_model() {
        let unit = AGENT.replace("VALIDATION", "unit");
        let adversarial = AGENT.replace("VALIDATION", "adversarial");
        let cases: &[(&str, &str, &[&str])] = &[
            // One profile for everything: the validator is the writer.
            (&unit, "[agents.default]\nprofile = \"a\"\n", &["validator"]),
            // A profile of its own: independent.
            (
                &unit,
                "[agents.default]\nprofile = \"a\"\n[agents.validator]\nprofile = \"b\"\n",
                &[],
            ),
            // Another profile on the same model is not a second opinion.
            (
                &unit,
                "[agents.writer]\nprofile = \"a\"\nmodel = \"m\"\n[agents.validator]\nprofile = \"b\"\nmodel = \"m\"\n",
                &["validator"],
            ),
            // Adversarial: challengers and evidence gatherers both judge.
            (
                &adversarial,
                "[agents.default]\nprofile = \"a\"\n[agents.evidence]\nprofile = \"b\"\n",
                &["challenger"],
            ),
            // A script has no agent identity to share.
            (SCRIPT, "[agents.default]\nprofile = \"a\"\n", &[]),
            // A role without a profile fails on its own when it runs.
            (&unit, "[agents.validator]\nprofile = \"a\"\n", &[]),
        ];
        for (stages, agents, expected) in cases {
            let found: Vec<String> = self_reviews(&plan(stages), &config(agents))
                .into_iter()
                .map(|c| c.roles.1)
                .collect();
            assert_eq!(found, *expected, "{agents}");
        }
        let refused = preflight(
            &plan(&unit),
            Some(&config("[agents.default]\nprofile = \"a\"\n")),
        );
        let message = refused.expect_err("refused by default");
        assert!(
            message.contains("roles `writer` and `validator` both resolve to profile `a`"),
            "{message}"
        );
        let allowed =
            config("[agents.default]\nprofile = \"a\"\n[governance]\nself_review = \"allow\"\n");
        assert_eq!(
            preflight(&plan(&unit), Some(&allowed)).map(|c| c.len()),
            Ok(1)
        );
    }
}
