//! Which stages may start now: a pure function of the plan and the stage
//! statuses, tested step by step without any I/O.
//!
//! Scheduling is dependency-driven, not group by group: a stage is ready as
//! soon as every stage it depends on is done (succeeded, skipped, or failed
//! while optional) and every human gate in an earlier group is approved.

use baton_workflow::Plan;

/// The state of one stage, as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not started.
    Pending,
    /// An attempt is running.
    Running,
    /// Succeeded.
    Success,
    /// Failed.
    Failed,
    /// Skipped (a false `when`).
    Skipped,
}

impl State {
    /// Parses the store's status text; unknown text counts as pending.
    pub fn from_status(status: &str) -> State {
        match status {
            "running" => State::Running,
            "success" | "awaiting_human" => State::Success,
            "failed" => State::Failed,
            "skipped" => State::Skipped,
            _ => State::Pending,
        }
    }

    /// Whether the stage will not run (again) in this run.
    pub fn is_terminal(self) -> bool {
        matches!(self, State::Success | State::Failed | State::Skipped)
    }
}

/// What the run as a whole should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Start these stages (indices), then wait for results.
    Start(Vec<usize>),
    /// Nothing can start; wait for running stages.
    Wait,
    /// Every stage is done and no required stage failed.
    Succeeded,
    /// A required stage failed; nothing more will start.
    Failed(usize),
    /// The run waits for a person to decide on this gate.
    AwaitingGate(usize),
}

/// The first required stage that failed, if any: the run halts.
pub fn required_failure(plan: &Plan, states: &[State]) -> Option<usize> {
    plan.stages
        .iter()
        .find(|stage| stage.spec.required && states[stage.index] == State::Failed)
        .map(|stage| stage.index)
}

/// Decides the next step. `approved(i)` says whether gate stage `i` has been
/// approved; `free_slots` bounds how many stages may start.
pub fn next(
    plan: &Plan,
    states: &[State],
    approved: impl Fn(usize) -> bool,
    free_slots: usize,
) -> Next {
    let running = states
        .iter()
        .filter(|state| **state == State::Running)
        .count();
    if let Some(failed) = required_failure(plan, states) {
        return if running > 0 {
            Next::Wait
        } else {
            Next::Failed(failed)
        };
    }
    // The first group holding a gate that succeeded but is not approved
    // blocks every later group.
    let blocking_gate = plan
        .stages
        .iter()
        .filter(|stage| {
            stage.spec.human_gate && states[stage.index] == State::Success && !approved(stage.index)
        })
        .min_by_key(|stage| stage.group)
        .map(|stage| (stage.index, stage.group));
    let mut ready = Vec::new();
    for stage in &plan.stages {
        if ready.len() >= free_slots {
            break;
        }
        if states[stage.index] != State::Pending {
            continue;
        }
        if blocking_gate.is_some_and(|(_, group)| stage.group > group) {
            continue;
        }
        let dependencies_done = stage
            .depends_on
            .iter()
            .all(|&dependency| states[dependency].is_terminal());
        if dependencies_done {
            ready.push(stage.index);
        }
    }
    if !ready.is_empty() {
        return Next::Start(ready);
    }
    if running > 0 {
        return Next::Wait;
    }
    if let Some((gate, _)) = blocking_gate {
        return Next::AwaitingGate(gate);
    }
    if states.iter().all(|state| state.is_terminal()) {
        Next::Succeeded
    } else {
        // Pending stages that can never start: a dependency is pending but
        // unreachable. Cannot happen with a valid plan; report as a wait so
        // the caller's invariant check names it.
        Next::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_workflow::MemoryLoader;

    fn plan(yaml: &str) -> Plan {
        let loader = MemoryLoader::new().with("w.yaml", yaml);
        let loaded = baton_workflow::load("w.yaml", &loader).expect("loads");
        baton_workflow::compile(&loaded, &Default::default(), &loader).expect("compiles")
    }

    const HEADER: &str =
        "name: t\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";

    fn stage(name: &str, extra: &str) -> String {
        format!(
            "  - {{name: {name}, kind: execute, description: d, executor: inline, script: 'true'{extra}}}\n"
        )
    }

    #[test]
    fn starts_by_dependency_not_by_group() {
        // a and b start together; c waits only for a, so it starts while b runs.
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("b", ""),
            stage("c", ", depends_on: [a]")
        ));
        let mut states = vec![State::Pending; 3];
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Start(vec![0, 1]));
        states[0] = State::Running;
        states[1] = State::Running;
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Wait);
        states[0] = State::Success;
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Start(vec![2]));
        states[2] = State::Success;
        states[1] = State::Success;
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Succeeded);
    }

    #[test]
    fn slots_bound_concurrency() {
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("b", ""),
            stage("c", "")
        ));
        let states = vec![State::Pending; 3];
        assert_eq!(next(&plan, &states, |_| false, 2), Next::Start(vec![0, 1]));
    }

    #[test]
    fn required_failure_halts_after_running_stages_finish() {
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("b", ""),
            stage("c", ", depends_on: [a]")
        ));
        let states = vec![State::Failed, State::Running, State::Pending];
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Wait);
        let states = vec![State::Failed, State::Success, State::Pending];
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Failed(0));
    }

    #[test]
    fn optional_failure_lets_dependants_run() {
        let plan = plan(&format!(
            "{HEADER}{}{}",
            stage("a", ", required: false"),
            stage("b", ", depends_on: [a]")
        ));
        let states = vec![State::Failed, State::Pending];
        assert_eq!(next(&plan, &states, |_| false, 8), Next::Start(vec![1]));
    }

    #[test]
    fn a_gate_blocks_later_groups_until_approved() {
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("gate", ", human_gate: true, depends_on: [a]"),
            stage("after", ", depends_on: [a]")
        ));
        // Groups: [a], [after], [gate]? No: gate and after share a wave; the
        // gate's own group comes after the wave's normal group.
        let index = |name: &str| plan.stage(name).expect("stage").index;
        let mut states = vec![State::Pending; 3];
        states[index("a")] = State::Success;
        states[index("gate")] = State::Success;
        states[index("after")] = State::Success;
        assert_eq!(
            next(&plan, &states, |_| false, 8),
            Next::AwaitingGate(index("gate"))
        );
        assert_eq!(next(&plan, &states, |_| true, 8), Next::Succeeded);
    }

    #[test]
    fn stages_after_an_unapproved_gate_wait() {
        let plan = plan(&format!(
            "{HEADER}{}{}",
            stage("gate", ", human_gate: true"),
            stage("b", ", depends_on: [gate]")
        ));
        let states = vec![State::Success, State::Pending];
        assert_eq!(next(&plan, &states, |_| false, 8), Next::AwaitingGate(0));
        assert_eq!(next(&plan, &states, |_| true, 8), Next::Start(vec![1]));
    }
}
