//! One attempt of a stage as the coordinator hands it out and hears back
//! from it: what the attempt needs ([`Attempt`]), what it reports
//! ([`Report`]) and how it ended ([`Finished`]), and what every process of
//! an attempt is given (its environment, its idempotency key, its script's
//! values).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_executor::Started;
use baton_executor::profile::Config;
use baton_store::Transition;
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use baton_workflow::schema::Access;

use crate::retries::Retry;
use crate::schedule::as_i64;

/// Resolved parameter values by name.
pub(crate) type Params = std::collections::HashMap<String, String>;

/// Limits applied to every stage process.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock bound per attempt.
    pub wall: Duration,
    /// Bound on silence (no output).
    pub idle: Option<Duration>,
    /// Bytes kept per log file.
    pub log_cap: u64,
    /// Total output past which the process is killed.
    pub kill_after_bytes: Option<u64>,
    /// SIGTERM-to-SIGKILL grace.
    pub kill_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(60 * 60),
            idle: None,
            log_cap: 16 * 1024 * 1024,
            kill_after_bytes: Some(1024 * 1024 * 1024),
            kill_grace: Duration::from_secs(10),
        }
    }
}

/// Everything an attempt needs.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) run_id: String,
    pub(crate) index: usize,
    pub(crate) attempt: i64,
    pub(crate) workspace: PathBuf,
    pub(crate) project_dir: PathBuf,
    pub(crate) params: Params,
    pub(crate) limits: Limits,
    /// The plan, for prompts that list upstream outputs.
    pub(crate) plan: Arc<Plan>,
    /// Agent profiles from `baton.toml`, if any.
    pub(crate) agents: Option<Arc<Config>>,
    /// The helper that contains read-only agents, where the machine can.
    pub(crate) contain_helper: Option<PathBuf>,
    /// The run's slots of agent profiles with `max_concurrent`.
    pub(crate) slots: Arc<Slots>,
    /// The previous attempt was cut short by a crash: a queue job it left
    /// is this attempt's (see `queued.rs`).
    pub(crate) adopt_job: bool,
    /// The unit of the stage this attempt runs (a fan-out child, a
    /// validator), or `None` for the stage itself.
    pub(crate) unit: Option<String>,
    /// Environment variables of the unit (a fan-out child's item).
    pub(crate) env: Vec<(String, String)>,
    /// The `validates_output` checks are left to the stage's program (which
    /// gives failures a correction round), not judged here.
    pub(crate) defer_checks: bool,
    /// The store, for stages run as queue jobs (`executor: worker_queue`).
    pub(crate) store: baton_store::Store,
    /// The agent session this attempt may continue (a correction's).
    pub(crate) continues: Option<Continuation>,
    /// A stage whose branch failed to merge is finished by merging the
    /// branch as it is now, without its agent (`--accept-merge`).
    pub(crate) accept_merge: bool,
    /// The push-back at its gate this attempt answers: its comment goes
    /// into the agent's prompt.
    pub(crate) push_back: Option<baton_store::GateDecisionRow>,
}

impl Attempt {
    /// What `{name}` stands for in the stage's templates: `workspace` (as
    /// the text `workspace`) or a parameter or fan-out item value.
    pub(crate) fn template_value<'a>(&'a self, name: &str, workspace: &'a str) -> Option<&'a str> {
        if name == "workspace" {
            Some(workspace)
        } else {
            self.params.get(name).map(String::as_str)
        }
    }
}

/// A session an attempt may continue, as its unit's program planned it.
#[derive(Debug, Clone)]
pub(crate) struct Continuation {
    /// The stdout log of the attempt that ran the session, where its id is.
    pub(crate) log: PathBuf,
    /// The access that attempt had.
    pub(crate) access: Access,
    /// What to ask in the session: only what is new (`{workspace}` is the
    /// run's workspace).
    pub(crate) task: String,
}

/// A run's slots of the agent profiles that set `max_concurrent`, by
/// profile name: an attempt holds one while its agent runs.
#[derive(Debug, Default)]
pub(crate) struct Slots(std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>);

impl Slots {
    /// The slots of `profile`, when it limits how many of its agents run at once.
    pub(crate) fn of(&self, profile: &str) -> Option<&Arc<tokio::sync::Semaphore>> {
        self.0.get(profile)
    }

    pub(crate) fn new(agents: Option<&Config>) -> Slots {
        Slots(
            agents
                .into_iter()
                .flat_map(|config| &config.profiles)
                .filter_map(|(name, profile)| {
                    let limit = profile.max_concurrent?;
                    Some((
                        name.clone(),
                        Arc::new(tokio::sync::Semaphore::new(limit.max(1))),
                    ))
                })
                .collect(),
        )
    }
}

/// What an attempt reports to the coordinator.
#[derive(Debug)]
pub(crate) enum Report {
    /// The process runs.
    Started {
        index: usize,
        unit: Option<String>,
        attempt: i64,
        started: Started,
    },
    /// The attempt is over (boxed: it is much larger than the others).
    Finished(Box<Finished>),
    /// Something about the attempt worth showing: a wait for a free slot
    /// of its profile.
    Note { note: String },
    /// The agent reported a failure that may pass, and the attempt runs
    /// again after a wait: shown, and recorded so `baton status` says why.
    Retry(Retry),
    /// An event of the child run a sub-workflow attempt drives, for the
    /// parent's progress.
    SubRun {
        index: usize,
        unit: Option<String>,
        event: crate::progress::Progress,
    },
}

/// The verified end of an attempt.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) index: usize,
    pub(crate) unit: Option<String>,
    pub(crate) attempt: i64,
    pub(crate) success: bool,
    pub(crate) exit_code: Option<i64>,
    pub(crate) error: Option<String>,
    /// (path, sha256, bytes) of every declared output.
    pub(crate) artifacts: Vec<(String, String, i64)>,
    pub(crate) cancelled: bool,
    /// Tokens and cost read from an agent's output, if any.
    pub(crate) usage: Option<baton_executor::profile::Usage>,
    /// The agent session the attempt continued, if it did.
    pub(crate) resumed: Option<String>,
}

impl Finished {
    /// The end of `attempt` before anything is known: failed, nothing
    /// recorded; each way of running an attempt fills in what happened.
    pub(crate) fn unsettled(attempt: &Attempt) -> Self {
        Finished {
            index: attempt.index,
            unit: attempt.unit.clone(),
            attempt: attempt.attempt,
            success: false,
            exit_code: None,
            error: None,
            artifacts: Vec::new(),
            cancelled: false,
            usage: None,
            resumed: None,
        }
    }

    /// The end of a stage's attempt that ran no process of its own (a
    /// composite stage's, once its units have all finished).
    pub(crate) fn ended(
        index: usize,
        attempt: i64,
        (success, error): (bool, Option<String>),
        artifacts: Vec<(String, String, i64)>,
    ) -> Self {
        Finished {
            index,
            unit: None,
            attempt,
            success,
            exit_code: None,
            error,
            artifacts,
            cancelled: false,
            usage: None,
            resumed: None,
        }
    }

    /// `success` or `failed`, as recorded and shown.
    pub(crate) fn status(&self) -> &'static str {
        if self.success { "success" } else { "failed" }
    }

    /// The result as the store records it, whichever driver ran it: the
    /// end of the stage's attempt, or of its unit.
    pub(crate) fn transition(&self, at: i64) -> Transition {
        let (index, status) = (as_i64(self.index), self.status().to_owned());
        let (exit_code, error, artifacts) =
            (self.exit_code, self.error.clone(), self.artifacts.clone());
        match &self.unit {
            Some(key) => Transition::UnitFinished {
                index,
                key: key.clone(),
                status,
                at,
                exit_code,
                error,
                artifacts,
            },
            None => Transition::AttemptFinished {
                index,
                attempt: self.attempt,
                status,
                at,
                exit_code,
                error,
                artifacts,
            },
        }
    }
}

impl Finished {
    /// The attempt `attempt` of stage `index` (or its unit) failed with
    /// `error` before any process ran.
    pub(crate) fn before_start(
        index: usize,
        unit: Option<String>,
        attempt: i64,
        error: String,
    ) -> Finished {
        Finished {
            index,
            unit,
            attempt,
            success: false,
            exit_code: None,
            error: Some(error),
            artifacts: Vec::new(),
            cancelled: false,
            usage: None,
            resumed: None,
        }
    }
}

/// The attempt's error without secrets: it is recorded and shown (a
/// process's output is redacted as it is logged; an endpoint's reply or a
/// message built from a value is not).
pub(crate) fn redacted(mut finished: Finished) -> Finished {
    if let Some(error) = &finished.error
        && let std::borrow::Cow::Owned(clean) =
            baton_executor::redact::Redactor::global().redact(error)
    {
        finished.error = Some(clean);
    }
    finished
}

/// The stage's name, with the unit for a fan-out child or a validator
/// (`report[c1:correct]`, as the unit is labelled everywhere; the unit's
/// own stage has a name of its own).
pub(crate) fn unit_label(stage: &PlanStage, attempt: &Attempt) -> String {
    let name = attempt
        .plan
        .stages
        .get(attempt.index)
        .map_or(stage.name(), PlanStage::name);
    match &attempt.unit {
        Some(unit) => format!("{name}[{unit}]"),
        None => name.to_owned(),
    }
}

/// `run/stage/item/attempt`, stable across retries of the same attempt.
pub(crate) fn idempotency_key(attempt: &Attempt) -> String {
    format!(
        "{}/{}/{}/{}",
        attempt.run_id,
        attempt.plan.stages[attempt.index].name(),
        attempt.unit.as_deref().unwrap_or("-"),
        attempt.attempt
    )
}

/// The environment variable that marks every process baton starts for a run.
pub(crate) const RUN_MARKER: &str = "BATON_RUN_ID";

/// Variables every stage process sees (besides the idempotency key, set as
/// the executor's marker).
pub(crate) fn environment(stage: &PlanStage, attempt: &Attempt) -> Vec<(String, String)> {
    let mut env = vec![
        (RUN_MARKER.to_owned(), attempt.run_id.clone()),
        ("BATON_STAGE".to_owned(), stage.name().to_owned()),
        ("BATON_ATTEMPT".to_owned(), attempt.attempt.to_string()),
        (
            "BATON_WORKSPACE".to_owned(),
            attempt.workspace.to_string_lossy().into_owned(),
        ),
        (
            "BATON_PROJECT_DIR".to_owned(),
            attempt.project_dir.to_string_lossy().into_owned(),
        ),
    ];
    if let Some(unit) = &attempt.unit {
        env.push(("BATON_UNIT".to_owned(), unit.clone()));
    }
    // A script answers a push-back at its gate by reading the comment.
    if let Some(decision) = &attempt.push_back {
        let comment = decision.comment.clone().unwrap_or_default();
        env.push(("BATON_PUSH_BACK".to_owned(), comment));
    }
    env.extend(attempt.env.iter().cloned());
    env
}

/// The script with `{workspace}` and every parameter (and fan-out item
/// value) moved into variables it refers to, or why a value cannot go
/// where the script puts it.
pub(crate) fn substitute_script(
    script: &str,
    attempt: &Attempt,
) -> Result<baton_executor::shell::Substituted, String> {
    let workspace_text = attempt.workspace.to_string_lossy().into_owned();
    let lookup = |name: &str| attempt.template_value(name, &workspace_text);
    baton_executor::shell::substitute(script, lookup)
        .map_err(|error| format!("cannot run the script: {error}"))
}
