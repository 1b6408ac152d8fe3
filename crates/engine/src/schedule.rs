//! Which stages may start now: a pure function of the plan and the stage
//! statuses, tested step by step without any I/O.
//!
//! Scheduling is dependency-driven, not group by group: a stage is ready as
//! soon as every stage it depends on is done (succeeded, skipped, or failed
//! while optional) and every human gate in an earlier group is approved.

use std::collections::BTreeSet;

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

/// The stages' states, with what the scheduler asks of them on every step
/// kept up to date as they change: how many run, how many are done, which
/// required stages failed, and the ready set — the pending stages whose
/// dependencies are all done, found by counting each stage's unfinished
/// dependencies down as they finish. A step then costs about the stages it
/// starts, not one look at every stage, which on a large run was a good
/// share of all its CPU: a chain's ready stage was found by looking at
/// every pending stage after it.
#[derive(Debug, Clone)]
pub struct States {
    states: Vec<State>,
    required: Vec<bool>,
    /// Human-gate stages, by index.
    gates: Vec<usize>,
    running: usize,
    terminal: usize,
    failed_required: BTreeSet<usize>,
    /// The stages that depend on each stage.
    dependants: Vec<Vec<usize>>,
    /// How many of each stage's dependencies are not done.
    unfinished: Vec<usize>,
    /// Pending stages with no unfinished dependency, in index order.
    ready: BTreeSet<usize>,
    /// The stages that edit the checkout itself ([`edits_checkout`]).
    edits: Vec<bool>,
    /// How many of those run.
    editing: usize,
}

/// Whether a stage's agent changes the user's checkout in place: a
/// read-write agent without a worktree of its own. Two at once would edit
/// the same files under each other, so they run one at a time.
pub fn edits_checkout(stage: &baton_workflow::plan::PlanStage) -> bool {
    use baton_workflow::schema::{Access, Executor, Isolation};
    let spec = &stage.spec;
    !spec.runs_script()
        && spec.executor != Executor::WorkerQueue
        && spec.sub_workflow.is_none()
        && spec.agent.access == Access::ReadWrite
        && spec.agent.isolation != Isolation::Worktree
}

impl States {
    /// The states of `plan`'s stages, in index order.
    pub fn new(plan: &Plan, states: impl IntoIterator<Item = State>) -> States {
        let count = plan.stages.len();
        let mut dependants = vec![Vec::new(); count];
        for stage in &plan.stages {
            for &dependency in &stage.depends_on {
                dependants[dependency].push(stage.index);
            }
        }
        let mut out = States {
            states: vec![State::Pending; count],
            required: plan
                .stages
                .iter()
                .map(|stage| stage.spec.required)
                .collect(),
            gates: plan
                .stages
                .iter()
                .filter(|stage| stage.spec.human_gate)
                .map(|stage| stage.index)
                .collect(),
            running: 0,
            terminal: 0,
            failed_required: BTreeSet::new(),
            dependants,
            unfinished: plan
                .stages
                .iter()
                .map(|stage| stage.depends_on.len())
                .collect(),
            ready: plan
                .stages
                .iter()
                .filter(|stage| stage.depends_on.is_empty())
                .map(|stage| stage.index)
                .collect(),
            edits: plan.stages.iter().map(edits_checkout).collect(),
            editing: 0,
        };
        for (index, state) in states.into_iter().enumerate().take(count) {
            out.set(index, state);
        }
        out
    }

    /// Sets stage `index` to `state`.
    pub fn set(&mut self, index: usize, state: State) {
        let old = std::mem::replace(&mut self.states[index], state);
        self.count(index, old, false);
        self.count(index, state, true);
        if old.is_terminal() != state.is_terminal() {
            for position in 0..self.dependants[index].len() {
                let dependant = self.dependants[index][position];
                if state.is_terminal() {
                    self.unfinished[dependant] -= 1;
                } else {
                    self.unfinished[dependant] += 1;
                }
                self.place(dependant);
            }
        }
        self.place(index);
    }

    /// Puts stage `index` in the ready set or out of it.
    fn place(&mut self, index: usize) {
        if self.states[index] == State::Pending && self.unfinished[index] == 0 {
            self.ready.insert(index);
        } else {
            self.ready.remove(&index);
        }
    }

    fn count(&mut self, index: usize, state: State, add: bool) {
        let change = |tally: &mut usize| {
            if add {
                *tally += 1;
            } else {
                *tally -= 1;
            }
        };
        if state == State::Running {
            change(&mut self.running);
            if self.edits[index] {
                change(&mut self.editing);
            }
        }
        if state.is_terminal() {
            change(&mut self.terminal);
        }
        if state == State::Failed && self.required[index] {
            if add {
                self.failed_required.insert(index);
            } else {
                self.failed_required.remove(&index);
            }
        }
    }

    /// How many stages run.
    pub fn running(&self) -> usize {
        self.running
    }

    /// The first required stage that failed, if any: the run halts.
    pub fn required_failure(&self) -> Option<usize> {
        self.failed_required.first().copied()
    }
}

impl std::ops::Index<usize> for States {
    type Output = State;

    fn index(&self, index: usize) -> &State {
        &self.states[index]
    }
}

/// Decides what happens next.
///
/// `approved(index)` says whether a human gate stage has been approved.
/// `free_slots` bounds how many stages may start now.
pub fn next(
    plan: &Plan,
    states: &mut States,
    approved: impl Fn(usize) -> bool,
    free_slots: usize,
) -> Next {
    let running = states.running();
    if let Some(failed) = states.required_failure() {
        return if running > 0 {
            Next::Wait
        } else {
            Next::Failed(failed)
        };
    }
    // The first group holding a gate that succeeded but is not approved
    // blocks every later group.
    let blocking_gate = states
        .gates
        .iter()
        .map(|&index| &plan.stages[index])
        .filter(|stage| states[stage.index] == State::Success && !approved(stage.index))
        .min_by_key(|stage| stage.group)
        .map(|stage| (stage.index, stage.group));
    // One stage at a time edits the checkout.
    let mut editing = states.editing > 0;
    let ready: Vec<usize> = states
        .ready
        .iter()
        .copied()
        .filter(|&index| blocking_gate.is_none_or(|(_, group)| plan.stages[index].group <= group))
        .filter(|&index| !states.edits[index] || !std::mem::replace(&mut editing, true))
        .take(free_slots)
        .collect();
    if !ready.is_empty() {
        return Next::Start(ready);
    }
    if running > 0 {
        return Next::Wait;
    }
    if let Some((gate, _)) = blocking_gate {
        return Next::AwaitingGate(gate);
    }
    if states.terminal == states.states.len() {
        Next::Succeeded
    } else {
        // Pending stages that can never start: a dependency is pending but
        // unreachable. Cannot happen with a valid plan; report as a wait so
        // the caller's invariant check names it.
        Next::Wait
    }
}

/// A stage's index as the store keeps it.
pub(crate) fn as_i64(index: usize) -> i64 {
    i64::try_from(index).unwrap_or(i64::MAX)
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
    fn agents_that_edit_the_checkout_run_one_at_a_time() {
        let agent = |name: &str, access: &str, isolation: &str| {
            format!(
                "  - {{name: {name}, kind: execute, description: d, executor: agent, agent: {{role: r, access: {access}{isolation}}}}}\n"
            )
        };
        let plan = plan(&format!(
            "{HEADER}{}{}{}{}{}",
            agent("edit1", "read-write", ""),
            agent("edit2", "read-write", ""),
            agent("read", "read-only", ""),
            agent("isolated", "read-write", ", isolation: worktree"),
            stage("shell", ""),
        ));
        let mut states = States::new(&plan, vec![State::Pending; 5]);
        assert_eq!(
            next(&plan, &mut states, |_| false, 8),
            Next::Start(vec![0, 2, 3, 4]),
            "the second editor waits"
        );
        for index in [0, 2, 3, 4] {
            states.set(index, State::Running);
        }
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Wait);
        states.set(0, State::Success);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![1]));
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
        let mut states = States::new(&plan, vec![State::Pending; 3]);
        assert_eq!(
            next(&plan, &mut states, |_| false, 8),
            Next::Start(vec![0, 1])
        );
        states.set(0, State::Running);
        states.set(1, State::Running);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Wait);
        states.set(0, State::Success);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![2]));
        states.set(2, State::Success);
        states.set(1, State::Success);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Succeeded);
    }

    #[test]
    fn tallies_follow_every_change() {
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("b", ", required: false"),
            stage("c", "")
        ));
        let mut states = States::new(&plan, vec![State::Pending; 3]);
        assert_eq!(
            next(&plan, &mut states, |_| false, 8),
            Next::Start(vec![0, 1, 2])
        );
        for index in 0..3 {
            states.set(index, State::Running);
        }
        assert_eq!(states.running(), 3);
        states.set(1, State::Failed);
        assert_eq!(states.required_failure(), None, "b is optional");
        states.set(0, State::Failed);
        assert_eq!(states.required_failure(), Some(0));
        assert_eq!(
            next(&plan, &mut states, |_| false, 8),
            Next::Wait,
            "c still runs"
        );
        states.set(2, State::Success);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Failed(0));
        // A stage set back to pending (a retry) is ready again, and its
        // dependants wait for it again.
        states.set(0, State::Pending);
        assert_eq!(states.required_failure(), None);
        assert_eq!(states.running(), 0);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![0]));
        states.set(0, State::Success);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Succeeded);
    }

    #[test]
    fn a_stage_set_back_to_pending_holds_its_dependants_again() {
        let plan = plan(&format!(
            "{HEADER}{}{}",
            stage("a", ""),
            stage("b", ", depends_on: [a]")
        ));
        let mut states = States::new(&plan, vec![State::Success, State::Pending]);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![1]));
        states.set(0, State::Pending);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![0]));
        states.set(0, State::Running);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Wait);
        states.set(0, State::Skipped);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![1]));
    }

    #[test]
    fn slots_bound_concurrency() {
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("b", ""),
            stage("c", "")
        ));
        let mut states = States::new(&plan, vec![State::Pending; 3]);
        assert_eq!(
            next(&plan, &mut states, |_| false, 2),
            Next::Start(vec![0, 1])
        );
    }

    #[test]
    fn required_failure_halts_after_running_stages_finish() {
        let plan = plan(&format!(
            "{HEADER}{}{}{}",
            stage("a", ""),
            stage("b", ""),
            stage("c", ", depends_on: [a]")
        ));
        let mut states = States::new(&plan, vec![State::Failed, State::Running, State::Pending]);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Wait);
        let mut states = States::new(&plan, vec![State::Failed, State::Success, State::Pending]);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Failed(0));
    }

    #[test]
    fn optional_failure_lets_dependants_run() {
        let plan = plan(&format!(
            "{HEADER}{}{}",
            stage("a", ", required: false"),
            stage("b", ", depends_on: [a]")
        ));
        let mut states = States::new(&plan, vec![State::Failed, State::Pending]);
        assert_eq!(next(&plan, &mut states, |_| false, 8), Next::Start(vec![1]));
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
        let mut states = States::new(&plan, vec![State::Pending; 3]);
        states.set(index("a"), State::Success);
        states.set(index("gate"), State::Success);
        states.set(index("after"), State::Success);
        assert_eq!(
            next(&plan, &mut states, |_| false, 8),
            Next::AwaitingGate(index("gate"))
        );
        assert_eq!(next(&plan, &mut states, |_| true, 8), Next::Succeeded);
    }

    #[test]
    fn stages_after_an_unapproved_gate_wait() {
        let plan = plan(&format!(
            "{HEADER}{}{}",
            stage("gate", ", human_gate: true"),
            stage("b", ", depends_on: [gate]")
        ));
        let mut states = States::new(&plan, vec![State::Success, State::Pending]);
        assert_eq!(
            next(&plan, &mut states, |_| false, 8),
            Next::AwaitingGate(0)
        );
        assert_eq!(next(&plan, &mut states, |_| true, 8), Next::Start(vec![1]));
    }
}
