//! `baton task run`: runs a task's remaining phases as a built-in workflow
//! on the engine, then acts on its verdict (docs/tasks.md).
//!
//! Each round reads the task folder again: a recorded run that has not
//! succeeded is driven (resumed) first; a decomposed task waits for its
//! sub-tasks; otherwise the phases still to run become a new run. With no
//! phase left the verdict decides, needing no agent profile at all.

use std::path::Path;

use baton_engine::RunRequest;
use baton_engine::external::DriverMode;
use baton_lifecycle::next::{self, Mode};
use baton_lifecycle::phase::Phase;
use baton_lifecycle::verdict::{self, Verdict};
use baton_store::Store;
use serde_json::json;

mod failure;
mod ledger;
mod resume;

use failure::Failure;

use super::errors::{engine_error, task_error};
use super::runtime::{block_on, open_store};
use crate::args::Format;
use crate::args::task::RunArgs;
use crate::tasks::{self, Handled, Planned, Record, Tasks, follow, workflow};
use crate::{exit_code, output};

/// More rounds than any task needs (a run per round, at most one per
/// phase group); a bound so a phase whose artifact never counts cannot
/// loop.
const MAX_ROUNDS: usize = 12;

/// How a `task run` ended.
enum End {
    /// The verdict was acted on: follow-ups created, the task archived if
    /// it passed.
    Done {
        /// Follow-up tasks created by this run.
        created: Vec<String>,
        /// Follow-up tasks an earlier run of the same verdict created.
        existing: Vec<String>,
        archived_as: Option<String>,
    },
    /// A person must decide; nothing was created.
    Decide { reason: String },
    /// The task waits for these sub-tasks.
    Waiting { subs: Vec<String> },
    /// A sub-task that did not pass: its parent's verdict names the work.
    ForParent { parent: String },
}

/// `baton task run`.
pub(crate) fn run(args: &RunArgs) -> u8 {
    let project = super::project_dir();
    let tasks = Tasks::new(&project);
    let mode = if args.autopilot {
        Mode::Autopilot
    } else {
        Mode::Manual
    };
    let format = args.format.format();
    block_on(async {
        let mut store = None;
        match drive_task(&tasks, &args.name, mode, format, &mut store).await {
            Ok(end) => report(&args.name, &end, format),
            Err(Failure::Code(code)) => code,
            Err(Failure::Task(error)) => task_error(&error),
        }
    })
}

async fn store_of(store: &mut Option<Store>) -> Result<&Store, Failure> {
    if store.is_none() {
        *store = Some(open_store().await.map_err(Failure::Code)?);
    }
    Ok(store.as_ref().expect("opened above"))
}

async fn drive_task(
    tasks: &Tasks,
    name: &str,
    mode: Mode,
    format: Format,
    store: &mut Option<Store>,
) -> Result<End, Failure> {
    let dir = tasks.active(name)?;
    let _lock = tasks::lock(&tasks.project, name)?;
    let mut last: Option<Phase> = None;
    for _ in 0..MAX_ROUNDS {
        let mut record = tasks::read_record(&dir)?;
        if let Some(run_id) = record.run_id.clone() {
            let finished =
                resume::resume(name, &dir, &run_id, format, store_of(store).await?).await?;
            if finished {
                let project = &tasks.project;
                ledger::record_run(store_of(store).await?, project, name, &dir, &run_id).await?;
                // A tie-break's Research ran in it (a run starts there
                // while the spec is the copy), even if it wrote the same text.
                record.spec_copy_sha256 = None;
            }
            record.run_id = None;
            tasks::write_record(&dir, &record)?;
            continue;
        }
        let status = tasks::status(&dir)?;
        if status.counted.contains(&"DECOMPOSITION.md") {
            let subs = follow::ensure_sub_tasks(tasks, name, &dir)?;
            let waiting = tasks::unsettled(tasks, &subs)?;
            if !waiting.is_empty() && mode == Mode::Manual {
                return Ok(End::Waiting { subs: waiting });
            }
            if !waiting.is_empty() {
                // Autopilot runs the sub-tasks itself, then the parent
                // continues; their verdicts are weighed at the parent's.
                for sub in &waiting {
                    output::stderr_line(&format!("task {name}: autopilot runs sub-task {sub}"));
                    match Box::pin(drive_task(tasks, sub, mode, format, store)).await? {
                        End::Done { .. } | End::ForParent { .. } => {}
                        End::Decide { reason } => {
                            return Ok(End::Decide {
                                reason: format!("sub-task {sub}: {reason}"),
                            });
                        }
                        End::Waiting { subs } => return Ok(End::Waiting { subs }),
                    }
                }
                continue;
            }
        }
        let redo = tasks::redo_research(&dir, &record)?;
        let phases = next::phases(&status, record.optional(), redo);
        let Some(&first) = phases.first() else {
            return decide(tasks, name, &dir, &record, mode);
        };
        if last == Some(first) {
            // The phase's run succeeded, yet its artifact does not count.
            return Err(Failure::Task(tasks::Error::Content {
                path: dir.join(first.artifact().unwrap_or_default()),
                message: format!(
                    "the {} phase ran but its artifact does not count: {}",
                    first.name(),
                    status.why
                ),
            }));
        }
        last = Some(first);
        let project = &tasks.project;
        let value = workflow::workflow(name, &record, &phases, project);
        let path = workflow::write(project, name, &value)?;
        let request = RunRequest {
            workflow_path: path,
            params: Vec::new(),
            base_dir: Some(workflow::state_dir(name)),
            max_parallel: 1,
            project_dir: project.clone(),
            budget_usd: None,
        };
        if phases.contains(&Phase::Referee) {
            check_self_review(name, project)?;
        }
        let created =
            baton_engine::create_run(store_of(store).await?, &request, DriverMode::Builtin)
                .await
                .map_err(|error| Failure::Code(engine_error(&error, format == Format::Json)))?;
        // Recorded before anything runs: a `task run` killed from here on
        // resumes this run instead of starting another.
        record.run_id = Some(created.run_id.clone());
        tasks::write_record(&dir, &record)?;
        let phases: Vec<&str> = phases.iter().map(|phase| phase.name()).collect();
        output::stderr_line(&format!(
            "task {name}: run {} — {}",
            created.run_id,
            phases.join(" → ")
        ));
    }
    Err(Failure::Task(tasks::Error::Content {
        path: dir,
        message: format!("the task did not settle after {MAX_ROUNDS} runs"),
    }))
}

/// Refuses to start a run with a Referee phase when the referee would
/// judge under the implementer's identity (profile, and model when set):
/// the verdict would be the implementer's review of its own work — the rule
/// workflow validators follow too. `[governance] self_review = "allow"` in
/// baton.toml lets it run, with a note.
fn check_self_review(name: &str, project: &Path) -> Result<(), Failure> {
    let Ok(config) = crate::settings::agent_config(project) else {
        // No usable configuration: the run itself reports that.
        return Ok(());
    };
    let identity = |role: &str| {
        config.agent(role).ok().map(|agent| {
            (
                agent.profile_name.to_owned(),
                agent.model.map(str::to_owned),
            )
        })
    };
    let Some(same) = identity(Phase::Implementation.role())
        .filter(|implementer| identity(Phase::Referee.role()).as_ref() == Some(implementer))
    else {
        return Ok(());
    };
    if config.governance.self_review == baton_executor::profile::SelfReview::Allow {
        output::stderr_line(&format!(
            "note: task {name}: the referee runs under the implementer's agent profile `{}` (allowed by [governance] self_review)",
            same.0
        ));
        return Ok(());
    }
    output::stderr_line(&format!(
        "error: task {name}: the referee would judge the implementation under the implementer's own agent profile `{}`; give the referee another profile in baton.toml ([agents.referee] profile = \"…\"), or allow it with [governance] self_review = \"allow\"",
        same.0
    ));
    Err(Failure::Code(exit_code::REFUSED))
}

/// Reads a `VERDICT.md`; an unreadable one is an error naming the file.
fn read_verdict(dir: &Path) -> Result<(Verdict, String), Failure> {
    let path = dir.join("VERDICT.md");
    let text = std::fs::read_to_string(&path).map_err(tasks::io(&path))?;
    let verdict = verdict::parse(&text).map_err(|error| tasks::Error::Content {
        path: path.clone(),
        message: error.to_string(),
    })?;
    Ok((verdict, text))
}

/// Acts on the verdict of a task at Referee.
fn decide(
    tasks: &Tasks,
    name: &str,
    dir: &Path,
    record: &Record,
    mode: Mode,
) -> Result<End, Failure> {
    let (own, mut digest_input) = read_verdict(dir)?;
    let mut subs: Vec<(String, Verdict)> = Vec::new();
    for sub in &record.sub_tasks {
        let sub_dir = tasks
            .anywhere(&sub.name)
            .ok_or_else(|| tasks::Error::NotFound(sub.name.clone()))?;
        let (verdict, text) = read_verdict(&sub_dir)?;
        digest_input.push_str(&text);
        subs.push((sub.short.clone(), verdict));
    }
    let pairs: Vec<(&str, &Verdict)> = subs.iter().map(|(n, v)| (n.as_str(), v)).collect();
    let is_sub = record.parent.is_some();
    let decision = next::decide(name, &own, &pairs, mode, is_sub, |n| tasks.taken(n));
    // A verdict already acted on keeps the names chosen then (they are
    // taken now, and would otherwise get new suffixes), in either mode.
    let sha = baton_engine::create::sha256_hex(digest_input.as_bytes());
    let handled = record
        .handled
        .as_ref()
        .filter(|handled| handled.verdicts_sha256 == sha);
    if let (Some(reason), None) = (decision.pause, handled) {
        return Ok(End::Decide { reason });
    }
    if is_sub && !decision.archive {
        return Ok(End::ForParent {
            parent: record.parent.clone().unwrap_or_default(),
        });
    }
    let planned: Vec<Planned> = match handled {
        Some(handled) => handled.follow_ups.clone(),
        None => {
            let planned: Vec<Planned> = decision
                .create
                .iter()
                .map(|follow| Planned::of(name, follow, &record.sub_tasks))
                .collect();
            let mut record = record.clone();
            record.handled = Some(Handled {
                verdicts_sha256: sha,
                follow_ups: planned.clone(),
            });
            tasks::write_record(dir, &record)?;
            planned
        }
    };
    let (mut created, mut existing) = (Vec::new(), Vec::new());
    for follow_up in planned {
        if follow::create_follow_up(tasks, name, &follow_up)? {
            created.push(follow_up.name);
        } else {
            existing.push(follow_up.name);
        }
    }
    let archived_as = if decision.archive {
        Some(tasks.archive(name)?)
    } else {
        None
    };
    Ok(End::Done {
        created,
        existing,
        archived_as,
    })
}

fn report(name: &str, end: &End, format: Format) -> u8 {
    let (value, text, code) = match end {
        End::Done {
            created,
            existing,
            archived_as,
        } => {
            let mut text = String::new();
            for task in created {
                text.push_str(&format!("created tasks/{task}\n"));
            }
            for task in existing {
                text.push_str(&format!(
                    "tasks/{task} exists already (an earlier run of this verdict created it)\n"
                ));
            }
            if let Some(to) = archived_as {
                text.push_str(&format!("{name} passed: archived as tasks/archive/{to}\n"));
            } else if !created.is_empty() || !existing.is_empty() {
                text.push_str(&format!(
                    "`baton task run <name>` runs each; {name} stays active with its verdict\n"
                ));
            }
            (
                json!({"task": name, "outcome": if archived_as.is_some() { "archived" } else { "follow-ups" }, "created": created, "existing": existing, "archived_as": archived_as}),
                text,
                exit_code::SUCCESS,
            )
        }
        End::Decide { reason } => (
            json!({"task": name, "outcome": "decide", "reason": reason, "created": []}),
            format!(
                "task {name} paused: {reason}\nhint: read tasks/{name}/VERDICT.md; `baton task run {name}` without --autopilot creates the follow-up tasks\n"
            ),
            exit_code::TASK_DECIDE,
        ),
        End::Waiting { subs } => (
            json!({"task": name, "outcome": "waiting", "waiting_for": subs}),
            format!(
                "task {name} waits for its sub-tasks: {}\nhint: `baton task run <sub-task>` for each, then `baton task run {name}` again\n",
                subs.join(", ")
            ),
            exit_code::TASK_WAITING,
        ),
        End::ForParent { parent } => (
            json!({"task": name, "outcome": "for-parent", "parent": parent}),
            format!(
                "task {name} did not pass; it is a sub-task of {parent}, whose verdict creates its follow-ups (`baton task run {parent}`)\n"
            ),
            exit_code::SUCCESS,
        ),
    };
    output::json_or_text(format, &value, || text);
    code
}
