//! Whether a run's agents can start here, checked before anything runs: a
//! role with no profile, or a profile whose program is not installed, is
//! found before the stages ahead of it have spent their time.

use std::ffi::OsStr;
use std::path::Path;

use baton_executor::profile::{Agent, CheckResult, Config, Kind, Profile};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Executor;

/// One agent the run will start: which stage, for what, under which role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    /// The stage.
    pub stage: String,
    /// `agent` or `validator` (what the agent does there).
    pub duty: &'static str,
    /// The role `baton.toml` maps to a profile.
    pub role: String,
}

/// Every role the plan's stages certainly run agents under (their own
/// work, their validators), in stage order, once per stage and role.
pub fn needed(plan: &Plan) -> Vec<Needed> {
    let mut out: Vec<Needed> = Vec::new();
    for stage in &plan.stages {
        let mut add = |duty: &'static str, role: &str| {
            let wanted = Needed {
                stage: stage.name().to_owned(),
                duty,
                role: role.to_owned(),
            };
            if !out
                .iter()
                .any(|seen| seen.stage == wanted.stage && seen.role == wanted.role)
            {
                out.push(wanted);
            }
        };
        let own_role = agent_role(stage);
        if let Some(role) = &own_role {
            add("agent", role);
        }
        if let Some(validation) = &stage.spec.validation {
            for role in crate::governance::validator_roles(validation.strategy) {
                add("validator", role);
            }
        }
        // A correction runs only when checks or validators find fault: a
        // run is not refused for it.
    }
    out
}

/// The role a stage's own work runs under, when an agent does it.
pub(crate) fn agent_role(stage: &PlanStage) -> Option<String> {
    let spec = &stage.spec;
    let no_agent =
        spec.sub_workflow.is_some() || spec.executor == Executor::WorkerQueue || spec.runs_script();
    (!no_agent).then(|| spec.agent_role().to_owned())
}

/// What keeps the plan's agents from starting here, one line each: a role
/// without a profile, a profile whose program is not on `path`.
pub fn problems(
    plan: &Plan,
    config: Option<&Config>,
    path: Option<&OsStr>,
    cwd: &Path,
) -> Vec<String> {
    judge(plan, config, |agent| {
        if agent.profile.kind == Kind::OpenaiChat {
            return None;
        }
        let program = agent.profile.program.as_deref().unwrap_or_default();
        baton_executor::find_program(program, path, cwd).is_none().then(|| {
            format!(
                "with profile `{}`, whose program `{program}` is not installed here (`baton agents check` lists what is)",
                agent.profile_name
            )
        })
    })
    .problems
}

/// The agents of the plan whose spending a run with a budget could not
/// count, one line each: their profile reports no dollars and `[pricing]`
/// has no price for their model. Such a run is refused before it starts.
pub fn uncounted(plan: &Plan, config: Option<&Config>) -> Vec<String> {
    let Some(config) = config else {
        return Vec::new();
    };
    judge(plan, Some(config), |agent| {
        let model = agent.model.or(agent.profile.model.as_deref());
        let priced = model.is_some_and(|model| config.pricing.contains_key(model));
        let reported = baton_executor::profile::reports_cost(agent.profile.output.as_ref());
        (!reported && !priced).then(|| {
            format!(
                "with profile `{}`, which reports no dollars, and [pricing] has no price for {}: a run with a budget cannot count what it spends; add a price to [pricing] in baton.toml",
                agent.profile_name,
                model.map_or_else(|| "its model (none is set)".to_owned(), |model| format!("`{model}`"))
            )
        })
    })
    .problems
}

/// Every profile the plan's agents resolve to, once each, in stage order:
/// what [`checked`] needs the results of.
pub fn profiles<'c>(plan: &Plan, config: &'c Config) -> Vec<(&'c String, &'c Profile)> {
    let mut out: Vec<(&String, &Profile)> = Vec::new();
    for needed in needed(plan) {
        let Ok(agent) = config.agent(&needed.role) else {
            continue;
        };
        if !out.iter().any(|(name, _)| *name == agent.profile_name)
            && let Some(entry) = config.profiles.get_key_value(agent.profile_name)
        {
            out.push(entry);
        }
    }
    out
}

/// What [`checked`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// What keeps an agent from starting, naming the stage, role and
    /// profile: the run would fail there.
    pub problems: Vec<String>,
    /// What an agent may still need (credential variables a CLI may not
    /// need when it is logged in through its own files), once per profile.
    pub notes: Vec<String>,
}

/// [`problems`], judged by each profile's full check (`baton agents
/// check`'s `--version` or endpoint request, from `results` by profile
/// name) instead of a look along `PATH`.
pub fn checked(plan: &Plan, config: Option<&Config>, results: &[(&str, &CheckResult)]) -> Checked {
    let result_of = |name: &str| {
        results
            .iter()
            .find(|(profile, _)| *profile == name)
            .map(|(_, result)| *result)
    };
    let mut verdict = judge(plan, config, |agent| {
        let result = result_of(agent.profile_name)?;
        if result.available {
            return None;
        }
        let why = match (&agent.profile.program, &result.program_path) {
            (Some(program), None) if agent.profile.kind == Kind::Cli => format!(
                "whose program `{program}` is not installed here (install it, or map the role to a profile that is: `baton agents check` lists them)"
            ),
            _ => format!(
                "which cannot start here: {}",
                result.detail.as_deref().unwrap_or("its check failed")
            ),
        };
        Some(format!("with profile `{}`, {why}", agent.profile_name))
    });
    if let Some(config) = config {
        for (name, _) in profiles(plan, config) {
            let Some(result) = result_of(name).filter(|result| result.available) else {
                continue;
            };
            if !result.credential_set && !result.missing_credentials.is_empty() {
                verdict.notes.push(format!(
                    "profile `{name}` may need {} set (unless its CLI is logged in through its own files)",
                    result.missing_credentials.join(" or ")
                ));
            }
        }
    }
    verdict
}

/// Each needed agent's problem: no `baton.toml`, no profile for the role,
/// or what `profile_problem` says of the profile it resolves to.
fn judge(
    plan: &Plan,
    config: Option<&Config>,
    profile_problem: impl Fn(&Agent<'_>) -> Option<String>,
) -> Checked {
    let mut checked = Checked::default();
    for needed in needed(plan) {
        let Needed { stage, duty, role } = &needed;
        let Some(config) = config else {
            checked.problems.push(format!(
                "stage `{stage}` runs an agent ({duty}, role `{role}`), and there is no baton.toml: map the role to a profile with [agents.{role}] or [agents.default]"
            ));
            continue;
        };
        let Ok(agent) = config.agent(role) else {
            checked.problems.push(format!(
                "stage `{stage}` runs an agent ({duty}, role `{role}`) that no profile is mapped to: add [agents.{role}] or [agents.default] to baton.toml"
            ));
            continue;
        };
        if let Some(problem) = profile_problem(&agent) {
            checked.problems.push(format!(
                "stage `{stage}` runs an agent ({duty}, role `{role}`) {problem}"
            ));
        }
    }
    checked
}

/// What a run will do other than the workflow says, one line each: a
/// stage's `agent.tools` that its profile cannot pass to the CLI (a profile
/// passes them with an `allowed_tools` option or a `[tools]` rule; without
/// either, or for a tool its rule has no name for, the permissions of the
/// stage's access apply instead).
pub fn warnings(plan: &Plan, config: Option<&Config>) -> Vec<String> {
    let Some(config) = config else {
        return Vec::new();
    };
    plan.stages
        .iter()
        .filter(|stage| !stage.spec.agent.tools.is_empty())
        .filter_map(|stage| {
            let role = agent_role(stage)?;
            let agent = config.agent(&role).ok()?;
            let tools = &stage.spec.agent.tools;
            let profile = agent.profile;
            if profile.options.contains_key("allowed_tools") {
                return None;
            }
            let Some(rule) = &profile.tools else {
                return Some(format!(
                    "stage `{}` lists agent.tools, which profile `{}` cannot pass to its CLI (it has neither an `allowed_tools` option nor a `[tools]` rule): the CLI's permissions for its access apply instead",
                    stage.name(),
                    agent.profile_name
                ));
            };
            let unknown = rule.unknown(tools);
            (!unknown.is_empty()).then(|| {
                format!(
                    "stage `{}` lists agent.tools that profile `{}` has no equivalent for ({}): its CLI neither offers nor refuses them by name, and the CLI's permissions for its access apply to them",
                    stage.name(),
                    agent.profile_name,
                    unknown.join(", ")
                )
            })
        })
        .collect()
}
