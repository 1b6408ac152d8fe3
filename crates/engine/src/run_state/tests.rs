//! The machine driven step by step, without any I/O.

use super::*;
use baton_workflow::MemoryLoader;

const HEADER: &str = "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

fn stage(name: &str, extra: &str) -> String {
    format!(
        "  - {{name: {name}, kind: execute, description: d, executor: inline, script: 'true'{extra}}}\n"
    )
}

/// A run of `stages` with `params`, nothing recorded yet.
fn run(stages: &[String], params: &[(&str, &str)]) -> RunState {
    let yaml = format!("{HEADER}{}", stages.concat());
    let loader = MemoryLoader::new().with("w.yaml", &yaml);
    let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
    let plan = baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
    let rows: Vec<StageRow> = plan
        .stages
        .iter()
        .map(|stage| row(stage, "pending", 0))
        .collect();
    let params = params
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    RunState::new(Arc::new(plan), params, &rows, Gates::default())
}

fn row(stage: &PlanStage, status: &str, attempts: i64) -> StageRow {
    StageRow {
        index: i64::try_from(stage.index).expect("index"),
        name: stage.name().to_owned(),
        status: status.to_owned(),
        attempts,
        started_at: None,
        finished_at: None,
        error: None,
        note: None,
    }
}

fn index(run: &RunState, name: &str) -> usize {
    run.plan.stage(name).expect("stage").index
}

fn poll(run: &mut RunState) -> Vec<Action> {
    run.apply(Event::Poll { free: 8, now: 0 })
}

fn finish(run: &mut RunState, name: &str, success: bool) {
    let index = index(run, name);
    let error = (!success).then(|| format!("{name} broke"));
    run.apply(Event::Finished {
        index,
        success,
        error,
    });
}

/// The names of the stages started by `actions`.
fn started(run: &RunState, actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|action| match action {
            Action::Start { index, attempt: 1 } => run.plan.stages[*index].name().to_owned(),
            other => panic!("expected a first start, got {other:?}"),
        })
        .collect()
}

#[test]
fn a_diamond_starts_each_stage_once_its_dependencies_are_done() {
    let mut run = run(
        &[
            stage("a", ""),
            stage("b", ", depends_on: [a]"),
            stage("c", ", depends_on: [a]"),
            stage("d", ", depends_on: [b, c]"),
        ],
        &[],
    );
    let actions = poll(&mut run);
    assert_eq!(started(&run, &actions), ["a"]);
    assert_eq!(poll(&mut run), [], "nothing more while a runs");
    finish(&mut run, "a", true);
    let actions = poll(&mut run);
    assert_eq!(started(&run, &actions), ["b", "c"]);
    finish(&mut run, "b", true);
    assert_eq!(poll(&mut run), [], "d waits for c");
    finish(&mut run, "c", true);
    let actions = poll(&mut run);
    assert_eq!(started(&run, &actions), ["d"]);
    finish(&mut run, "d", true);
    assert_eq!(poll(&mut run), [Action::End(End::Succeeded)]);
}

#[test]
fn a_false_when_skips_the_stage_and_its_dependants_still_run() {
    let mut run = run(
        &[
            stage("a", ", when: '\"{mode}\" contains \"full\"'"),
            stage("b", ", depends_on: [a]"),
        ],
        &[("mode", "quick")],
    );
    let a = index(&run, "a");
    assert_eq!(
        poll(&mut run),
        [Action::Skip {
            index: a,
            note: "skipped: when \"{mode}\" contains \"full\" (\"quick\" contains \"full\")"
                .to_owned()
        }]
    );
    let actions = poll(&mut run);
    assert_eq!(
        started(&run, &actions),
        ["b"],
        "a skipped stage counts as done"
    );
    finish(&mut run, "b", true);
    assert_eq!(poll(&mut run), [Action::End(End::Succeeded)]);
}

#[test]
fn a_true_when_runs_the_stage_and_an_unknown_parameter_fails_it() {
    let mut run = run(
        &[
            stage("a", ", when: '\"{mode}\" contains \"full\"'"),
            stage("b", ", when: '\"{nope}\" contains \"x\"'"),
        ],
        &[("mode", "full")],
    );
    let (a, b) = (index(&run, "a"), index(&run, "b"));
    let error = "'when' refers to '{nope}', which has no value; pass --params nope=…";
    assert_eq!(
        poll(&mut run),
        [
            Action::Start {
                index: a,
                attempt: 1
            },
            Action::Fail {
                index: b,
                attempt: 1,
                error: error.to_owned()
            }
        ]
    );
    assert_eq!(poll(&mut run), [], "a still runs");
    finish(&mut run, "a", true);
    assert_eq!(
        poll(&mut run),
        [Action::End(End::Failed {
            index: b,
            error: format!("required stage 'b' failed: {error}")
        })]
    );
}

#[test]
fn an_interrupted_attempt_runs_again_under_the_next_number() {
    let yaml = format!(
        "{HEADER}{}{}",
        stage("a", ""),
        stage("b", ", depends_on: [a]")
    );
    let loader = MemoryLoader::new().with("w.yaml", &yaml);
    let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
    let plan = baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles");
    // As recorded after two attempts of a: the second one cut short.
    let rows = vec![
        row(&plan.stages[0], "pending", 2),
        row(&plan.stages[1], "pending", 0),
    ];
    let mut run = RunState::new(Arc::new(plan), IndexMap::new(), &rows, Gates::default());
    assert_eq!(
        poll(&mut run),
        [Action::Start {
            index: 0,
            attempt: 3
        }]
    );
    // Set back to pending (here by a push-back; a halted composite stage
    // the same way): the next attempt has the next number.
    run.apply(Event::PushedBack { index: 0 });
    assert_eq!(run.attempt(0), 3);
    assert_eq!(
        poll(&mut run),
        [Action::Start {
            index: 0,
            attempt: 4
        }]
    );
    finish(&mut run, "a", true);
    assert_eq!(
        poll(&mut run),
        [Action::Start {
            index: 1,
            attempt: 1
        }]
    );
}

#[test]
fn a_cancel_stops_new_starts_and_ends_the_run_once_nothing_runs() {
    let mut run = run(
        &[
            stage("a", ""),
            stage("b", ""),
            stage("c", ", depends_on: [a]"),
        ],
        &[],
    );
    let actions = poll(&mut run);
    assert_eq!(started(&run, &actions), ["a", "b"]);
    run.apply(Event::CancelRequested);
    assert!(run.halting());
    finish(&mut run, "a", true);
    assert_eq!(poll(&mut run), [], "c does not start; b still runs");
    assert_eq!(run.end(), None);
    finish(&mut run, "b", false);
    assert_eq!(poll(&mut run), [Action::End(End::Cancelled)]);
    assert_eq!(End::Cancelled.status(), "cancelled");
}

#[test]
fn a_required_failure_ends_the_run_once_running_stages_finish() {
    let mut run = run(
        &[
            stage("a", ""),
            stage("b", ""),
            stage("opt", ", required: false"),
            stage("c", ", depends_on: [a]"),
        ],
        &[],
    );
    poll(&mut run);
    finish(&mut run, "opt", false);
    assert!(!run.halting(), "an optional failure does not halt");
    finish(&mut run, "a", false);
    assert!(run.halting());
    assert_eq!(poll(&mut run), [], "b still runs");
    finish(&mut run, "b", true);
    let end = End::Failed {
        index: 0,
        error: "required stage 'a' failed: a broke".to_owned(),
    };
    assert_eq!(run.end(), Some(end.clone()));
    assert_eq!(poll(&mut run), [Action::End(end.clone())]);
    assert_eq!(
        (end.status(), end.error().as_deref()),
        ("failed", Some("required stage 'a' failed: a broke"))
    );
}

#[test]
fn a_gate_waits_for_its_decision_and_a_rejection_ends_the_run() {
    let stages = [
        stage("gate", ", human_gate: true"),
        stage("after", ", depends_on: [gate]"),
    ];
    let mut run = run(&stages, &[]);
    poll(&mut run);
    finish(&mut run, "gate", true);
    let waiting = End::AwaitingGate { index: 0 };
    assert_eq!(poll(&mut run), [Action::End(waiting.clone())]);
    assert_eq!(
        (waiting.status(), waiting.gate()),
        ("awaiting_human", Some(0))
    );
    run.apply(Event::GatesRead(Gates {
        approved: vec![0],
        ..Gates::default()
    }));
    let actions = poll(&mut run);
    assert_eq!(started(&run, &actions), ["after"]);

    let mut rejected = self::run(&stages, &[]);
    poll(&mut rejected);
    finish(&mut rejected, "gate", true);
    rejected.apply(Event::GatesRead(Gates {
        rejected: Some((0, "no".to_owned(), "ann".to_owned())),
        ..Gates::default()
    }));
    let end = End::Rejected {
        index: 0,
        error: "gate 'gate' rejected by ann: no".to_owned(),
    };
    assert_eq!(poll(&mut rejected), [Action::End(end)]);

    // Pushed back: the gate's stage runs again under its next attempt,
    // and the run waits at the gate again after it.
    let mut pushed = self::run(&stages, &[]);
    poll(&mut pushed);
    finish(&mut pushed, "gate", true);
    assert_eq!(poll(&mut pushed), [Action::End(waiting.clone())]);
    pushed.apply(Event::PushedBack { index: 0 });
    assert_eq!(
        poll(&mut pushed),
        [Action::Start {
            index: 0,
            attempt: 2
        }]
    );
    finish(&mut pushed, "gate", true);
    assert_eq!(poll(&mut pushed), [Action::End(waiting)]);
}

/// `s` writes the items; `b` fans out over them, `max_parallel` at once.
fn fan_out(max_parallel: usize) -> Vec<String> {
    vec![
        stage("s", ""),
        stage(
            "b",
            &format!(
                ", depends_on: [s], fan_out: {{source: s, field: items, key: id, max_parallel: {max_parallel}}}"
            ),
        ),
    ]
}

fn planned(keys: &[&str]) -> Vec<NewUnit> {
    (keys.iter().enumerate())
        .map(|(ordinal, key)| NewUnit {
            key: (*key).to_owned(),
            ordinal: i64::try_from(ordinal).expect("ordinal"),
            kind: crate::work::ITEM.to_owned(),
            cycle: 0,
            label: format!("b[{key}]"),
            spec: "{}".to_owned(),
        })
        .collect()
}

fn start_unit(index: usize, key: &str, attempt: i64) -> Action {
    Action::StartUnit {
        index,
        key: key.to_owned(),
        attempt,
    }
}

fn unit_finished(run: &mut RunState, key: &str, status: &str) {
    let index = index(run, "b");
    let end = UnitEnd {
        status: status.to_owned(),
        at: 0,
        exit_code: Some(0),
        error: None,
        artifacts: "[]".to_owned(),
    };
    let key = key.to_owned();
    run.apply(Event::UnitFinished { index, key, end });
}

/// A unit of `b` (stage 1) as the store records it.
fn unit_row(key: &str, ordinal: i64, status: &str) -> UnitRow {
    let mut row = composite::pending(1, planned(&[key]).remove(0));
    row.ordinal = ordinal;
    status.clone_into(&mut row.status);
    row
}

#[test]
fn a_composite_stage_steps_then_starts_its_units_within_its_cap_and_the_free_slots() {
    let mut run = run(&fan_out(2), &[]);
    poll(&mut run);
    finish(&mut run, "s", true);
    // Started, it has no units yet: its first step plans them.
    assert_eq!(
        poll(&mut run),
        [
            Action::Start {
                index: 1,
                attempt: 1
            },
            Action::Step { index: 1 }
        ]
    );
    let units = planned(&["x", "y", "z"]);
    run.apply(Event::UnitsPlanned { index: 1, units });
    // One free slot: one unit; then its cap, two, whatever is free.
    assert_eq!(
        run.apply(Event::Poll { free: 1, now: 5 }),
        [start_unit(1, "x", 1)]
    );
    assert_eq!(poll(&mut run), [start_unit(1, "y", 1)]);
    assert_eq!(poll(&mut run), []);
    let started = run.composite(1).and_then(|c| c.unit("x")).expect("x");
    assert_eq!(
        (started.status.as_str(), started.started_at),
        ("running", Some(5))
    );
    unit_finished(&mut run, "x", "success");
    assert_eq!(poll(&mut run), [start_unit(1, "z", 1)]);
    unit_finished(&mut run, "y", "success");
    assert_eq!(poll(&mut run), []);
    // All finished: the next step is the driver's to take.
    unit_finished(&mut run, "z", "failed");
    assert_eq!(poll(&mut run), [Action::Step { index: 1 }]);
    let z = run.composite(1).and_then(|c| c.unit("z")).expect("z");
    assert_eq!(z.status, "failed");
    finish(&mut run, "b", true);
    assert!(run.composite(1).is_none());
    assert_eq!(poll(&mut run), [Action::End(End::Succeeded)]);
}

#[test]
fn a_halting_run_interrupts_a_composite_stage_once_no_unit_is_out_and_keeps_its_units() {
    let mut stages = fan_out(4);
    stages.push(stage("c", ""));
    let mut run = run(&stages, &[]);
    let (b, c) = (index(&run, "b"), index(&run, "c"));
    let first = poll(&mut run);
    assert_eq!(started(&run, &first), ["c", "s"]);
    finish(&mut run, "s", true);
    poll(&mut run);
    run.apply(Event::UnitsPlanned {
        index: b,
        units: planned(&["x", "y"]),
    });
    assert_eq!(
        poll(&mut run),
        [start_unit(b, "x", 1), start_unit(b, "y", 1)]
    );
    // A required stage fails: no unit starts any more, and the stage
    // stops once its units out have come back.
    finish(&mut run, "c", false);
    unit_finished(&mut run, "x", "success");
    assert_eq!(poll(&mut run), []);
    unit_finished(&mut run, "y", "success");
    let failed = End::Failed {
        index: c,
        error: "required stage 'c' failed: c broke".to_owned(),
    };
    assert_eq!(
        poll(&mut run),
        [
            Action::Interrupt {
                index: b,
                attempt: 1
            },
            Action::End(failed)
        ]
    );
    assert_eq!(
        Action::Interrupt {
            index: b,
            attempt: 1
        }
        .transition(7),
        Some(Transition::AttemptInterrupted {
            index: schedule::as_i64(b),
            attempt: 1,
            at: 7
        })
    );

    // Resumed as the store then holds it: the stage starts again under
    // its next attempt with its finished units, so it steps at once; an
    // unfinished one would wait for a slot.
    let plan = Arc::clone(&run.plan);
    let mut rows: Vec<StageRow> = (plan.stages.iter())
        .map(|stage| row(stage, "success", 1))
        .collect();
    rows[b] = row(&plan.stages[b], "pending", 1);
    let mut units = vec![unit_row("x", 0, "success"), unit_row("y", 1, "running")];
    for unit in &mut units {
        unit.index = schedule::as_i64(b);
    }
    let mut resumed =
        RunState::new(plan, IndexMap::new(), &rows, Gates::default()).with_units(units, 8);
    assert_eq!(
        poll(&mut resumed),
        [
            Action::Start {
                index: b,
                attempt: 2
            },
            start_unit(b, "y", 1)
        ]
    );
}

#[test]
fn units_out_with_an_orchestrator_count_against_the_cap_until_they_come_back() {
    let run = run(&fan_out(1), &[]);
    let plan = Arc::clone(&run.plan);
    let mut rows: Vec<StageRow> = (plan.stages.iter())
        .map(|stage| row(stage, "success", 1))
        .collect();
    rows[1] = row(&plan.stages[1], "running", 1);
    let units = vec![unit_row("x", 0, "running"), unit_row("y", 1, "pending")];
    let mut run =
        RunState::new(plan, IndexMap::new(), &rows, Gates::default()).with_units(units, usize::MAX);
    run.resume_composites(&rows, |unit| unit.status == "running");
    assert_eq!(poll(&mut run), []);
    unit_finished(&mut run, "x", "success");
    assert_eq!(poll(&mut run), [start_unit(1, "y", 1)]);
}
