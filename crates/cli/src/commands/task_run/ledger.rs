//! A task's own governance ledger (scope `task`, key = the task's name),
//! written by `baton task run` from each run of the task that succeeded.
//!
//! The run's ledger records every stage's output as an edit; the task's
//! ledger tells the task's story instead: the task clarified, its folder
//! inspected and the referee's verdict planned as its validation (once,
//! under the implementer's identity: the implementer owns the work), each
//! phase's artifact as an edit by its phase's identity, and the referee's
//! `VERDICT.md` as what it is — a validation (exit 0 for PASS, 1 otherwise)
//! and a review by the referee's identity whose findings are the verdict's
//! findings. A verdict that cannot be read stays an edit; the verdict step
//! reports it.
//!
//! Recording is idempotent: an entry already in the ledger (same kind,
//! evidence and session) is not appended again, so a `task run` killed
//! half-way, or a run resumed after it succeeded, records each fact once.

use std::path::Path;

use baton_engine::governance::{self, Entry, Identity, Recorded, Scope, ScopeKind, Who};
use baton_lifecycle::phase::Phase;
use baton_lifecycle::verdict::{self, Kind};
use baton_store::Store;

use super::failure::Failure;
use crate::commands::errors::governance_error;
use crate::tasks::TASKS_DIR;

/// Records run `run_id` of task `name` (folder `dir`) in the task's ledger.
pub(super) async fn record_run(
    store: &Store,
    project: &Path,
    name: &str,
    dir: &Path,
    run_id: &str,
) -> Result<(), Failure> {
    let scope = Scope {
        kind: ScopeKind::Task,
        key: name.to_owned(),
    };
    let known = read(store, &scope).await?;
    let run = read(
        store,
        &Scope {
            kind: ScopeKind::Run,
            key: run_id.to_owned(),
        },
    )
    .await?;
    let owner = implementer(project, name);
    let mut wanted: Vec<(Entry, Identity)> = Vec::new();
    // The opening, unless the ledger already holds more than (part of) it.
    if known.iter().all(|r| r.identity.session == owner.session) {
        wanted.extend(opening(name).into_iter().map(|e| (e, owner.clone())));
    }
    for recorded in &run {
        wanted.extend(translate(name, dir, recorded));
    }
    let now = baton_engine::clock::now_ms();
    for (entry, identity) in wanted {
        let present = known
            .iter()
            .any(|r| r.entry == entry && r.identity.session == identity.session);
        if !present {
            governance::observe(store, &scope, &entry, &identity, now)
                .await
                .map_err(|error| Failure::Code(governance_error(&error)))?;
        }
    }
    Ok(())
}

async fn read(store: &Store, scope: &Scope) -> Result<Vec<Recorded>, Failure> {
    let rows = store
        .ledger_events(scope.kind.as_str(), &scope.key)
        .await
        .map_err(|error| Failure::Code(governance_error(&error.into())))?;
    governance::decode(&rows)
        .map_err(|why| Failure::Code(governance_error(&governance::Error::Corrupt(why))))
}

/// The identity that owns the task's work: the implementer's profile (and
/// model) in `baton.toml`, the role's name when it resolves to none.
fn implementer(project: &Path, name: &str) -> Identity {
    let role = Phase::Implementation.role();
    let resolved = crate::settings::agent_config(project)
        .ok()
        .and_then(|config| {
            config.agent(role).ok().map(|agent| {
                (
                    agent.profile_name.to_owned(),
                    agent.model.map(str::to_owned),
                )
            })
        });
    let (profile, model) = resolved.unwrap_or_else(|| (role.to_owned(), None));
    Identity {
        profile,
        model,
        session: format!("task/{name}"),
    }
}

fn opening(name: &str) -> [Entry; 3] {
    [
        Entry::Clarified {
            note: Some(format!("task {name}")),
        },
        Entry::Inspected {
            path: format!("{TASKS_DIR}/{name}"),
        },
        Entry::Planned {
            validation_intent: "the referee's verdict (VERDICT.md) on the task's phases".to_owned(),
            validation_claimed: true,
        },
    ]
}

/// What one entry of the run's ledger says in the task's: its edits of the
/// task folder, the verdict as a validation and a review; nothing else.
fn translate(name: &str, dir: &Path, recorded: &Recorded) -> Vec<(Entry, Identity)> {
    let Entry::Edited { path, hash } = &recorded.entry else {
        return Vec::new();
    };
    let Some(artifact) = path.strip_prefix("outputs/") else {
        return Vec::new();
    };
    let who = recorded.identity.clone();
    let in_task = format!("{TASKS_DIR}/{name}/{artifact}");
    let verdict = (Some(artifact) == Phase::Referee.artifact())
        .then(|| std::fs::read_to_string(dir.join(artifact)).ok())
        .flatten()
        .and_then(|text| verdict::parse(&text).ok());
    let Some(verdict) = verdict else {
        let edited = Entry::Edited {
            path: in_task,
            hash: hash.clone(),
        };
        return vec![(edited, who)];
    };
    let word = match verdict.kind {
        Kind::Pass => "PASS",
        Kind::Fail => "FAIL",
        Kind::NeedsReview => "NEEDS_REVIEW",
    };
    let validated = Entry::Validated {
        command: format!("referee verdict {word} ({in_task})"),
        exit_code: i32::from(verdict.kind != Kind::Pass),
        covered: vec![format!("{TASKS_DIR}/{name}")],
    };
    let reviewed = Entry::Reviewed {
        reviewer: Who::from(&who),
        findings: verdict.findings,
    };
    vec![(validated, who.clone()), (reviewed, who)]
}
