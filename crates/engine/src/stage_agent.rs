//! What an agent working inside a stage may ask baton and tell it while it
//! works (through `baton mcp`): its stage's contract, its run's governance
//! state, progress and evidence into the run's ledger.
//!
//! The agent acts as its stage's own identity (the profile its role
//! resolves to in `baton.toml`, session `<run>/<stage>`), the identity the
//! engine records the stage's outputs under. So it may add facts (progress,
//! a command it ran, a file) but never a verdict on its own work: a review
//! or a validation of its stage, or of a stage made by the same identity,
//! is refused before anything is written. Its notes are not governance
//! events: they never move the ledger's stage nor make anyone its owner.

use std::path::{Component, Path, PathBuf};

use baton_lifecycle::governance::Identity;
use baton_store::{RunRow, Store};
use baton_workflow::Plan;
use indexmap::IndexMap;
use serde_json::{Value, json};

use crate::governance::{self, Entry, Recording, Scope, ScopeKind, Who};
use crate::run_options::RunOptions;

mod contract;

/// Why an agent's request was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The ledger could not be read.
    #[error(transparent)]
    Governance(#[from] governance::Error),
    /// The run's workflow no longer compiles.
    #[error("the workflow of run {run_id} does not compile any more: {why}")]
    Workflow {
        /// The run.
        run_id: String,
        /// The engine's error.
        why: String,
    },
    /// The run has no such stage.
    #[error("run {run_id} has no stage named '{stage}'")]
    NoSuchStage {
        /// The run.
        run_id: String,
        /// The name asked for.
        stage: String,
    },
    /// A review or validation of the agent's own work.
    #[error(
        "refused: an agent's session cannot record a {what} of its own stage's work (stage `{stage}`{identity}); an independent validator or a person records that"
    )]
    OwnWork {
        /// `review` or `validation`.
        what: &'static str,
        /// The stage judged.
        stage: String,
        /// Why it is the agent's own, when not the same stage.
        identity: String,
    },
    /// A file given as evidence is not one the stage may name.
    #[error("{0}")]
    BadPath(String),
    /// A text longer than [`MAX_TEXT`].
    #[error(
        "{what} is {len} bytes long: at most {MAX_TEXT} are recorded; say it shorter, or record the file that holds it"
    )]
    TooLong {
        /// Which text.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// The ledger's rules refused the record.
    #[error("refused ({rule}): {reason}")]
    Refused {
        /// The rule.
        rule: &'static str,
        /// Why.
        reason: String,
    },
}

/// The longest message, command, note or finding an agent may record: a
/// ledger row is read whole by every fold of the run's ledger.
pub const MAX_TEXT: usize = 16 * 1024;

/// `text` as the ledger keeps it: within [`MAX_TEXT`], with the secrets
/// this process knows of (and text shaped like a key) redacted, as logs are.
fn kept(what: &'static str, text: &str) -> Result<String, Error> {
    if text.len() > MAX_TEXT {
        return Err(Error::TooLong {
            what,
            len: text.len(),
        });
    }
    Ok(baton_executor::redact::Redactor::global()
        .redact(text)
        .into_owned())
}

fn kept_opt(what: &'static str, text: Option<String>) -> Result<Option<String>, Error> {
    text.map(|text| kept(what, &text)).transpose()
}

/// What an agent records as evidence.
#[derive(Debug, Clone)]
pub enum Evidence {
    /// A command it ran and how it ended.
    Command {
        /// The command line.
        command: String,
        /// Its exit code.
        exit_code: i32,
        /// What it printed, or a note on it.
        note: Option<String>,
    },
    /// A file (relative to the project or the workspace, or absolute inside
    /// either), recorded with its SHA-256.
    File {
        /// The path as given.
        path: String,
        /// Why it is evidence.
        note: Option<String>,
    },
    /// A review of `stage`'s work.
    Review {
        /// The stage reviewed.
        stage: String,
        /// Its findings.
        findings: Vec<String>,
    },
    /// A validation of `stage`'s work: a command that checks it.
    Validation {
        /// The stage validated.
        stage: String,
        /// The command.
        command: String,
        /// Its exit code.
        exit_code: i32,
    },
}

/// An agent's stage of a run, opened for its requests.
#[derive(Debug)]
pub struct StageAgent {
    run: RunRow,
    plan: Plan,
    index: usize,
    project_dir: PathBuf,
    config: Option<baton_executor::profile::Config>,
    identity: Identity,
}

impl StageAgent {
    /// Opens `stage` of run `run_id`: its plan compiled again from the
    /// workflow (as the run's process did), its identity from the project's
    /// `baton.toml`.
    ///
    /// # Errors
    ///
    /// No such run or stage, or the workflow no longer compiles.
    pub async fn open(store: &Store, run_id: &str, stage: &str) -> Result<StageAgent, Error> {
        let run = store.run(run_id).await?;
        let options: Option<RunOptions> = serde_json::from_str(&run.options).ok();
        let project_dir = options.map_or_else(|| PathBuf::from("."), |o| o.project_dir);
        let params: IndexMap<String, String> =
            serde_json::from_str(&run.params).unwrap_or_default();
        let run_options = RunOptions {
            project_dir: project_dir.clone(),
            max_parallel: 1,
            driver: crate::run_options::DriverMode::Builtin,
            budget_usd: None,
        };
        // The contract is the workflow as it is now: an agent reads it while
        // its stage runs, when the files are the ones the run started from.
        let plan = crate::create::recompile(&run, &run_options, &params, true).map_err(|e| {
            Error::Workflow {
                run_id: run.run_id.clone(),
                why: e.to_string(),
            }
        })?;
        let Some(index) = plan.stages.iter().position(|s| s.name() == stage) else {
            return Err(Error::NoSuchStage {
                run_id: run.run_id.clone(),
                stage: stage.to_owned(),
            });
        };
        let config = std::fs::read_to_string(project_dir.join("baton.toml"))
            .ok()
            .and_then(|text| baton_executor::profile::Config::from_toml(&text).ok());
        let identity =
            governance::stage_identity(&run.run_id, &plan.stages[index], config.as_ref());
        Ok(StageAgent {
            run,
            plan,
            index,
            project_dir,
            config,
            identity,
        })
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The stage's name.
    pub fn stage(&self) -> &str {
        self.plan.stages[self.index].name()
    }

    /// Who the agent acts as.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    fn workspace(&self) -> &Path {
        Path::new(&self.run.workspace)
    }

    fn scope(&self) -> Scope {
        Scope {
            kind: ScopeKind::Run,
            key: self.run.run_id.clone(),
        }
    }

    /// The stage's contract: what to write, what is checked, what it reads
    /// and where its prompt is.
    pub fn contract(&self) -> Value {
        contract::contract(
            &self.plan,
            &self.plan.stages[self.index],
            self.workspace(),
            &self.run.run_id,
        )
    }

    /// Records `message` as the stage's progress in the run's ledger.
    ///
    /// # Errors
    ///
    /// The store fails.
    pub async fn progress(&self, store: &Store, message: &str, now: i64) -> Result<i64, Error> {
        let entry = Entry::Progress {
            stage: self.stage().to_owned(),
            message: kept("the message", message)?,
        };
        Ok(governance::observe(store, &self.scope(), &entry, &self.identity, now).await?)
    }

    /// Records `evidence` in the run's ledger as the stage's own session;
    /// a review or validation of the agent's own work is refused first.
    ///
    /// # Errors
    ///
    /// [`Error::OwnWork`], a file that is not the project's or the
    /// workspace's, a refusal of the ledger's rules, or the store fails.
    pub async fn evidence(
        &self,
        store: &Store,
        evidence: Evidence,
        now: i64,
    ) -> Result<(i64, Entry), Error> {
        let stage = self.stage().to_owned();
        let entry = match evidence {
            Evidence::Command {
                command,
                exit_code,
                note,
            } => Entry::Evidence {
                stage,
                command: Some(kept("the command", &command)?),
                exit_code: Some(exit_code),
                path: None,
                sha256: None,
                note: kept_opt("the note", note)?,
            },
            Evidence::File { path, note } => {
                let (path, sha256) = self.hashed(&path)?;
                Entry::Evidence {
                    stage,
                    command: None,
                    exit_code: None,
                    path: Some(path),
                    sha256: Some(sha256),
                    note: kept_opt("the note", note)?,
                }
            }
            Evidence::Review { stage, findings } => {
                self.judged(&stage, "review")?;
                Entry::Reviewed {
                    reviewer: Who::from(&self.identity),
                    findings: findings
                        .iter()
                        .map(|finding| kept("a finding", finding))
                        .collect::<Result<_, _>>()?,
                }
            }
            Evidence::Validation {
                stage,
                command,
                exit_code,
            } => {
                let covered = self.judged(&stage, "validation")?;
                Entry::Validated {
                    command: kept("the command", &command)?,
                    exit_code,
                    covered,
                }
            }
        };
        let scope = self.scope();
        let seq = if entry.event().is_some() {
            match governance::record(store, &scope, &entry, &self.identity, now).await? {
                Recording::Appended(seq) => seq,
                Recording::Refused(refusal) => {
                    return Err(Error::Refused {
                        rule: governance::rule_name(refusal.kind),
                        reason: refusal.reason,
                    });
                }
            }
        } else {
            governance::observe(store, &scope, &entry, &self.identity, now).await?
        };
        Ok((seq, entry))
    }

    /// The workspace-relative files of `stage` when the agent may judge it,
    /// else why not: its own stage, or one made under its identity.
    fn judged(&self, stage: &str, what: &'static str) -> Result<Vec<String>, Error> {
        let Some(target) = self.plan.stage(stage) else {
            return Err(Error::NoSuchStage {
                run_id: self.run.run_id.clone(),
                stage: stage.to_owned(),
            });
        };
        if target.name() == self.stage() {
            return Err(Error::OwnWork {
                what,
                stage: stage.to_owned(),
                identity: String::new(),
            });
        }
        let maker = governance::stage_identity(&self.run.run_id, target, self.config.as_ref());
        if maker.same_owner(&self.identity) {
            return Err(Error::OwnWork {
                what,
                stage: stage.to_owned(),
                identity: format!(", made under the same identity `{}`", maker.profile),
            });
        }
        Ok(crate::workspace::declared_outputs(target))
    }

    /// `path` made absolute and checked to be inside the project or the
    /// workspace, with its content's SHA-256.
    fn hashed(&self, path: &str) -> Result<(String, String), Error> {
        let given = Path::new(path);
        if given.components().any(|c| c == Component::ParentDir) {
            return Err(Error::BadPath(format!(
                "'{path}' has a `..`: name a file of the project or the run's workspace"
            )));
        }
        let candidates: Vec<PathBuf> = if given.is_absolute() {
            vec![given.to_path_buf()]
        } else {
            vec![self.workspace().join(given), self.project_dir.join(given)]
        };
        let roots = [self.workspace(), self.project_dir.as_path()];
        for candidate in candidates {
            let Ok(real) = candidate.canonicalize() else {
                continue;
            };
            let inside = roots
                .iter()
                .filter_map(|root| root.canonicalize().ok())
                .any(|root| real.starts_with(root));
            if !inside {
                return Err(Error::BadPath(format!(
                    "'{path}' is outside the project and the run's workspace"
                )));
            }
            let bytes = std::fs::read(&real)
                .map_err(|error| Error::BadPath(format!("cannot read '{path}': {error}")))?;
            return Ok((
                real.to_string_lossy().into_owned(),
                crate::create::sha256_hex(&bytes),
            ));
        }
        Err(Error::BadPath(format!(
            "no file '{path}' in the project or the run's workspace"
        )))
    }
}

/// A run's governance summary (`baton state summary --run`), with the
/// entries recorded by or about `stage` when one is named.
///
/// # Errors
///
/// The store fails or a ledger row cannot be read.
pub async fn state(store: &Store, run_id: &str, stage: Option<&str>) -> Result<Value, Error> {
    let scope = Scope {
        kind: ScopeKind::Run,
        key: run_id.to_owned(),
    };
    let engine = Identity {
        profile: governance::ENGINE.to_owned(),
        model: None,
        session: run_id.to_owned(),
    };
    let report = governance::load(store, &scope, &engine).await?;
    let summary = governance::summary(&scope, &report);
    let Some(stage) = stage else {
        return Ok(json!({"run_id": run_id, "summary": summary}));
    };
    let session = format!("{run_id}/{stage}");
    let entries: Vec<Value> = report
        .entries
        .iter()
        .filter(|recorded| {
            recorded.identity.session == session || recorded.entry.stage() == Some(stage)
        })
        .map(|recorded| {
            let (kind, payload) = recorded.entry.encode();
            json!({
                "seq": recorded.seq,
                "kind": kind,
                "payload": serde_json::from_str::<Value>(&payload).unwrap_or(Value::Null),
                "profile": recorded.identity.profile,
                "session": recorded.identity.session,
                "recorded_at": crate::workspace::utc(recorded.recorded_at),
            })
        })
        .collect();
    Ok(json!({
        "run_id": run_id,
        "stage": stage,
        "summary": summary,
        "stage_entries": entries,
    }))
}
