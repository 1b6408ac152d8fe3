//! The failpoint sweep: a crash at every store write, then `baton resume`,
//! must end where an undisturbed run ends.
//!
//! The workflow is small but has a bit of everything: a chain, a human
//! gate, a fan-out over the gate's list, a stage validated and corrected by
//! agents (the stand-in agent, contained as read-only validators are), and
//! a last stage that reads the others' outputs; with many rounds, also an
//! agent isolated in a git worktree whose work is merged back.
//!
//! Its undisturbed run is three commands — `run` (to the gate), `gate
//! approve`, `resume` — each run once with `BATON_FAILPOINT=store-write:count`
//! to count its writes. Then, for each command and every N, a fresh project
//! runs the commands before it, runs it with the process aborted just
//! before its Nth write commits (`store-write:N`) or just after
//! (`store-written:N`), and drives the run to its end as a person would:
//! `baton run` again if the run was never recorded, else `baton resume`
//! (whatever the run's status says), then the approval again if the crash
//! lost it, and `baton resume` until it ends. Every command but the armed
//! one must succeed, and the run must end as the undisturbed one: the same
//! run and stage statuses, units, findings, recorded output hashes, gate
//! decisions, governance ledger, project branch (one merge, no more), and
//! every file of the workspace (outputs, findings, result envelopes,
//! dispatch files; run ids, paths and times aside); nothing recorded as
//! done before the crash executed again, every unit executed, at most once
//! more than the crash cut short; no process of the run left alive.
//!
//! How many writes a command makes depends on timing (results that arrive
//! together share a commit). N goes up to the undisturbed command's count,
//! and a command that ends before its Nth write (it then says how many it
//! made) ends the sweep of that command early. `BATON_SWEEP_ROUNDS=R`
//! (`scripts/soak`) repeats the sweep R times, each going on past the
//! undisturbed count until the command ends before its point, so that the
//! commits a slower or faster run splits or merges are cut too.
//!
//! On SQLite always; on PostgreSQL when `BATON_TEST_DATABASE_URL` is set (a
//! failure, not a skip, unless `BATON_TEST_SKIP` lists `postgres`).

mod ending;
mod project;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use baton_test_support::Run;

use ending::{Ending, differences, ending};
use project::Project;

/// Where the sweep runs, and on which workflow (see `project::workflow`).
#[derive(Debug, Clone, Copy)]
struct Setup<'a> {
    /// The PostgreSQL database, else a SQLite file per project.
    postgres: Option<&'a str>,
    /// With a stage isolated in a git worktree.
    isolated: bool,
}

/// The commands of an undisturbed run, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Run,
    Approve,
    Resume,
}

const STEPS: [Step; 3] = [Step::Run, Step::Approve, Step::Resume];

/// What the store recorded as done when the process died: stages that
/// succeeded (`stage/-`) and units that did (`stage/key`).
fn done(project: &Project) -> BTreeSet<String> {
    let Some(run_id) = project.run_id() else {
        return BTreeSet::new();
    };
    project
        .read(async |store| {
            let stages = store.stages(&run_id).await.expect("stages");
            let units = store.units(&run_id).await.expect("units");
            let name = |index: i64| stages[usize::try_from(index).expect("index")].name.clone();
            stages
                .iter()
                .filter(|stage| stage.status == "success")
                .map(|stage| format!("{}/-", stage.name))
                .chain(
                    units
                        .iter()
                        .filter(|unit| unit.status == "success")
                        .map(|unit| format!("{}/{}", name(unit.index), unit.key)),
                )
                .collect()
        })
        .expect("a store")
}

/// Executions by `stage/unit` (the idempotency key without run and attempt).
fn executions(lines: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in lines {
        let key = line.split_whitespace().nth(3).expect("an idempotency key");
        let (_run, rest) = key.split_once('/').expect("run/stage/unit/attempt");
        let (unit, _attempt) = rest.rsplit_once('/').expect("stage/unit/attempt");
        *counts.entry(unit.to_owned()).or_default() += 1;
    }
    counts
}

/// How many store writes a command said it made (`store-write:count`, or
/// an armed point it never reached).
fn writes_made(run: &Run) -> u64 {
    run.stderr
        .lines()
        .find_map(|line| line.strip_prefix("baton: store writes: "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no write count in: {}", run.stderr))
}

/// Drives the project's run to its end as a person would after a crash;
/// a command that fails on the way is a difference from an undisturbed run.
fn finish(project: &Project) -> Result<String, String> {
    let mut resumed = false;
    for _ in 0..10 {
        let Some(run_id) = project.run_id() else {
            project.must(&["run", "wf.yaml"])?;
            continue;
        };
        // After a crash comes a resume, whatever the run's status says.
        if !resumed {
            resumed = true;
            project.must(&["resume", &run_id])?;
            continue;
        }
        let (status, decided) = project
            .read(async |store| {
                let run = store.run(&run_id).await.expect("run");
                let gates = store.gate_decisions(&run_id).await.expect("gates");
                (run.status, !gates.is_empty())
            })
            .expect("a store");
        match status.as_str() {
            "success" => return Ok(run_id),
            "awaiting_human" if !decided => {
                project.must(&["gate", "approve", &run_id, "review"])?;
            }
            _ => project.must(&["resume", &run_id])?,
        }
    }
    Err("the run did not end in 10 commands".to_owned())
}

/// The undisturbed run: its ending, each command's write count, and the
/// units it executed (`stage/unit`, each once).
fn undisturbed(setup: Setup<'_>, label: &str) -> (Ending, Vec<u64>, BTreeSet<String>) {
    let project = Project::new(setup, label);
    let mut counts = Vec::new();
    for step in STEPS {
        let run = project.step(step, Some("store-write:count"));
        assert_eq!(run.code, 0, "{step:?}: {}", run.stderr);
        counts.push(writes_made(&run));
    }
    let run_id = project.run_id().expect("the run");
    let ending = ending(&project, &run_id);
    assert_eq!(ending.status.0, "success", "{ending:?}");
    let executed = executions(&project.witnessed());
    assert!(
        executed.values().all(|count| *count == 1),
        "an undisturbed run executes everything once: {executed:?}"
    );
    (ending, counts, executed.into_keys().collect())
}

/// One point: `step` armed with `point`, then the run driven to its end
/// and compared. Returns whether the process died there, and what differed.
fn one_point(
    setup: Setup<'_>,
    label: &str,
    (step, point): (Step, &str),
    (golden, units): (&Ending, &BTreeSet<String>),
) -> (bool, Vec<String>) {
    let project = Project::new(setup, label);
    for before in STEPS.iter().take_while(|earlier| **earlier != step) {
        let run = project.step(*before, None);
        assert_eq!(run.code, 0, "{before:?}: {}", run.stderr);
    }
    let armed = project.step(step, Some(point));
    let crashed = armed.code == -1;
    if !crashed {
        assert_eq!(armed.code, 0, "{step:?} {point}: {}", armed.stderr);
        let number: u64 = point
            .rsplit(':')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("N");
        let made = writes_made(&armed);
        assert!(
            made < number,
            "{step:?} {point} made {made} writes and did not stop"
        );
    }
    let at_crash = done(&project);
    let seen_at_crash = executions(&project.witnessed());
    let run_id = match finish(&project) {
        Ok(run_id) => run_id,
        Err(error) => return (crashed, vec![error]),
    };
    let mut problems = differences(golden, &ending(&project, &run_id));
    let executed = executions(&project.witnessed());
    if executed.keys().collect::<BTreeSet<_>>() != units.iter().collect() {
        problems.push(format!("executed {executed:?}, not the units {units:?}"));
    }
    for (unit, count) in &executed {
        let before = seen_at_crash.get(unit).copied().unwrap_or(0);
        if at_crash.contains(unit) && *count != before {
            problems.push(format!("{unit} was recorded as done, then executed again"));
        }
        if *count > 2 {
            problems.push(format!(
                "{unit} executed {count} times, more than a crash can explain"
            ));
        }
    }
    if baton_test_support::procs::processes_of_run(&run_id) != 0 {
        problems.push("a process of the run survived".to_owned());
    }
    (crashed, problems)
}

/// Every point of every command, each round; fails listing every point
/// whose run ended differently.
fn sweep(postgres: Option<&str>, backend: &str) {
    let rounds: usize = std::env::var("BATON_SWEEP_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1);
    let started = Instant::now();
    // Many rounds (the soak) add a stage isolated in a git worktree, its
    // work merged back: the git work makes each run slower, too slow for
    // the fast tier (bench/README.md).
    let setup = Setup {
        postgres,
        isolated: rounds > 1,
    };
    let (golden, counts, units) = undisturbed(setup, backend);
    let mut points = 0;
    let mut failures = Vec::new();
    for round in 0..rounds {
        let label = format!("{backend}-{round}");
        for (step, undisturbed_writes) in STEPS.into_iter().zip(&counts) {
            for prefix in ["store-write", "store-written"] {
                let mut crashes = 0;
                // One round: the writes the undisturbed command made. Many:
                // on until the command ends without reaching its point.
                let last = if rounds == 1 {
                    *undisturbed_writes
                } else {
                    u64::MAX
                };
                for n in 1..=last {
                    let point = format!("{prefix}:{n}");
                    points += 1;
                    let (crashed, problems) =
                        one_point(setup, &label, (step, &point), (&golden, &units));
                    for problem in problems {
                        failures.push(format!("{step:?} {point}: {problem}"));
                    }
                    if !crashed {
                        break;
                    }
                    crashes += 1;
                }
                assert!(
                    crashes > 0,
                    "{backend}: {step:?} ({undisturbed_writes} writes undisturbed) never reached {prefix}:1"
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{backend}: runs that ended differently from the undisturbed one:\n{}",
        failures.join("\n")
    );
    eprintln!(
        "{backend}: store writes undisturbed: run {}, gate approve {}, resume {}; {points} points over {rounds} round(s) in {:.1} s; every run ended as the undisturbed one",
        counts[0],
        counts[1],
        counts[2],
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_crash_at_every_store_write_then_resume_ends_as_undisturbed_on_sqlite() {
    sweep(None, "sqlite");
}

#[test]
fn a_crash_at_every_store_write_then_resume_ends_as_undisturbed_on_postgres() {
    if let Some(url) = baton_test_support::needs::postgres_url() {
        sweep(Some(&url), "postgres");
    }
}
