//! A run as a pure state machine, shared by both drivers: the coordinator
//! ([`crate::drive`]) and the driver protocol (`baton next`).
//!
//! [`RunState`] is built from the plan and the stage rows (and gate
//! decisions) the store holds; a driver feeds it [`Event`]s — a look for
//! work, a stage's end, an interrupted attempt, gate decisions read, a
//! cancel request, a unit's end, the units a composite stage planned — and
//! carries out the [`Action`]s it answers with: start an attempt or a unit,
//! skip a stage, fail a stage whose `when` cannot be evaluated, take a
//! composite stage's next step, interrupt one while the run halts, end the
//! run. It owns readiness (through [`States`]), `when`, attempt numbers (a
//! stage set back to pending runs again under the next number), the units
//! of composite stages (which wait, which are out, how many may be out at
//! once: [`Composite`]), cancel and the decision how the run ends. It does
//! no I/O, reads no clock (a poll says what time it is) and knows nothing of
//! the store, so it is tested step by step without any
//! (`run_state/tests.rs`).
//!
//! What stays with each driver is how it carries the actions out: records
//! them, writes skip sentinels and envelopes, spawns attempts (or hands
//! them to an orchestrator), and a composite stage's program (`work`),
//! which reads the files its units wrote.

pub(crate) mod composite;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use baton_store::{NewUnit, StageRow, Transition, UnitRow};
use baton_workflow::Plan;
use baton_workflow::plan::PlanStage;
use indexmap::IndexMap;

use crate::schedule::{self, Next, State, States};
use crate::work;
pub(crate) use composite::{Composite, UnitEnd};

/// Something that happened to the run.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// The driver looks for what may start, with `free` slots, at `now`.
    Poll { free: usize, now: i64 },
    /// A stage's attempt ended.
    Finished {
        index: usize,
        success: bool,
        error: Option<String>,
    },
    /// The gates' decisions as read now.
    GatesRead(Gates),
    /// A gate's stage was pushed back: it is pending again, to run anew.
    PushedBack { index: usize },
    /// An attempt spent this much, as its agent reported or its tokens
    /// priced it.
    Spent { usd: f64 },
    /// A cancel was requested: nothing more starts.
    CancelRequested,
    /// A composite stage's next step planned these units.
    UnitsPlanned { index: usize, units: Vec<NewUnit> },
    /// A unit's attempt ended.
    UnitFinished {
        index: usize,
        key: String,
        end: UnitEnd,
    },
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Start attempt `attempt` of stage `index`.
    Start { index: usize, attempt: i64 },
    /// Skip the stage: its `when` is false (`note` says why).
    Skip { index: usize, note: String },
    /// Fail attempt `attempt` of the stage without running it.
    Fail {
        index: usize,
        attempt: i64,
        error: String,
    },
    /// Start attempt `attempt` of unit `key` of composite stage `index`.
    StartUnit {
        index: usize,
        key: String,
        attempt: i64,
    },
    /// Every unit of composite stage `index` has finished: the driver takes
    /// its next step (`work::advance`) and answers with `UnitsPlanned` or
    /// `Finished`.
    Step { index: usize },
    /// The run halts and composite stage `index` has no unit out: attempt
    /// `attempt` stops, the stage is pending again, its finished units kept.
    Interrupt { index: usize, attempt: i64 },
    /// The run ends (or waits at a gate) as `End` says.
    End(End),
}

impl Action {
    /// The stage it begins (starts, skips or fails), if any.
    pub(crate) fn stage(&self) -> Option<usize> {
        match self {
            Action::Start { index, .. }
            | Action::Skip { index, .. }
            | Action::Fail { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// What the store records for it (an end, and a step's outcome, are
    /// recorded by its driver).
    pub(crate) fn transition(&self, at: i64) -> Option<Transition> {
        match self {
            Action::StartUnit { index, key, .. } => {
                return Some(Transition::UnitStarted {
                    index: schedule::as_i64(*index),
                    key: key.clone(),
                    at,
                });
            }
            Action::Interrupt { index, attempt } => {
                return Some(Transition::AttemptInterrupted {
                    index: schedule::as_i64(*index),
                    attempt: *attempt,
                    at,
                });
            }
            _ => {}
        }
        let index = schedule::as_i64(self.stage()?);
        Some(match self {
            Action::Start { attempt, .. } => Transition::AttemptStarted {
                index,
                attempt: *attempt,
                at,
            },
            Action::Skip { note, .. } => Transition::StageSkipped {
                index,
                at,
                note: note.clone(),
            },
            Action::Fail { attempt, error, .. } => Transition::AttemptFinished {
                index,
                attempt: *attempt,
                status: "failed".to_owned(),
                at,
                exit_code: None,
                error: Some(error.clone()),
                artifacts: Vec::new(),
            },
            _ => return None,
        })
    }
}

/// How a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Every stage is done and no required one failed.
    Succeeded,
    /// A required stage failed; `error` is the run's.
    Failed { index: usize, error: String },
    /// The run waits for a decision on this gate.
    AwaitingGate { index: usize },
    /// A gate was rejected; `error` is the run's.
    Rejected { index: usize, error: String },
    /// A cancel was requested and nothing runs any more.
    Cancelled,
}

impl End {
    /// The run's status.
    pub(crate) fn status(&self) -> &'static str {
        match self {
            End::Succeeded => "success",
            End::Failed { .. } => "failed",
            End::AwaitingGate { .. } => "awaiting_human",
            End::Rejected { .. } => "rejected",
            End::Cancelled => "cancelled",
        }
    }

    /// The run's error.
    pub(crate) fn error(&self) -> Option<String> {
        match self {
            End::Failed { error, .. } | End::Rejected { error, .. } => Some(error.clone()),
            End::Cancelled => Some("cancelled".to_owned()),
            End::Succeeded | End::AwaitingGate { .. } => None,
        }
    }

    /// The gate it waits at or was rejected at.
    pub(crate) fn gate(&self) -> Option<usize> {
        match self {
            End::AwaitingGate { index } | End::Rejected { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// A run's scheduling state.
#[derive(Debug, Clone)]
pub(crate) struct RunState {
    plan: Arc<Plan>,
    params: IndexMap<String, String>,
    states: States,
    /// Attempts started so far, by stage.
    attempts: Vec<i64>,
    /// Why stages failed, by stage.
    errors: HashMap<usize, String>,
    gates: Gates,
    cancelled: bool,
    budget: Option<Budget>,
    /// Composite stages in progress, by stage.
    composites: BTreeMap<usize, Composite>,
    /// Units the store holds for stages not in progress: a composite stage
    /// that starts (again) takes up its own.
    recorded_units: HashMap<usize, Vec<UnitRow>>,
    /// How many units of a composite stage may be out at once where its
    /// workflow says nothing.
    unit_slots: usize,
}

/// A run's budget and what it spent so far, in dollars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Budget {
    pub(crate) limit: f64,
    pub(crate) spent: f64,
}

impl RunState {
    /// The run as `rows` (one per stage, in index order) and `gates` record it.
    pub(crate) fn new(
        plan: Arc<Plan>,
        params: IndexMap<String, String>,
        rows: &[StageRow],
        gates: Gates,
    ) -> RunState {
        let states = States::new(
            &plan,
            rows.iter().map(|row| State::from_status(&row.status)),
        );
        RunState {
            attempts: rows.iter().map(|row| row.attempts).collect(),
            errors: rows
                .iter()
                .enumerate()
                .filter_map(|(index, row)| Some((index, row.error.clone()?)))
                .collect(),
            plan,
            params,
            states,
            gates,
            cancelled: false,
            budget: None,
            composites: BTreeMap::new(),
            recorded_units: HashMap::new(),
            unit_slots: usize::MAX,
        }
    }

    /// The units the store holds (`units`); a composite stage runs at most
    /// `unit_slots` at once where its workflow sets no limit.
    pub(crate) fn with_units(mut self, units: Vec<UnitRow>, unit_slots: usize) -> RunState {
        for unit in units {
            if let Ok(index) = usize::try_from(unit.index) {
                self.recorded_units.entry(index).or_default().push(unit);
            }
        }
        self.unit_slots = unit_slots;
        self
    }

    /// Composite stages `rows` record as running go on with their units,
    /// those `out` says are out counting as running (the driver protocol,
    /// whose orchestrator holds them between calls).
    pub(crate) fn resume_composites(&mut self, rows: &[StageRow], out: impl Fn(&UnitRow) -> bool) {
        for (index, row) in rows.iter().enumerate() {
            if row.status == "running" && work::is_composite(&self.plan.stages[index]) {
                let started_at = row.started_at.unwrap_or_default();
                self.take_up(index, started_at, &out);
            }
        }
    }

    /// Composite stage `index` in progress, with the units recorded for it.
    fn take_up(&mut self, index: usize, started_at: i64, out: impl Fn(&UnitRow) -> bool) {
        let stage = &self.plan.stages[index];
        // Items that edit the checkout in place run one at a time.
        let cap = if schedule::edits_checkout(stage) {
            1
        } else {
            stage
                .spec
                .fan_out
                .as_ref()
                .and_then(|fan_out| fan_out.max_parallel)
                .map_or(self.unit_slots, |cap| {
                    usize::try_from(cap).unwrap_or(usize::MAX)
                })
        };
        let units = self.recorded_units.remove(&index).unwrap_or_default();
        let composite = Composite::new(units, cap, started_at, out);
        self.composites.insert(index, composite);
    }

    /// The gates' decisions it was given last.
    pub(crate) fn gates(&self) -> &Gates {
        &self.gates
    }

    /// Composite stage `index` in progress, if it is.
    pub(crate) fn composite(&self, index: usize) -> Option<&Composite> {
        self.composites.get(&index)
    }

    /// From now on no agent stage starts once `budget.spent` reaches
    /// `budget.limit`.
    pub(crate) fn set_budget(&mut self, budget: Budget) {
        self.budget = Some(budget);
    }

    /// Takes in `event`; returns what to do.
    pub(crate) fn apply(&mut self, event: Event) -> Vec<Action> {
        match event {
            Event::Poll { free, now } => self.poll(free, now),
            Event::Finished {
                index,
                success,
                error,
            } => {
                self.composites.remove(&index);
                self.states.set(
                    index,
                    if success {
                        State::Success
                    } else {
                        State::Failed
                    },
                );
                match error {
                    Some(error) => self.errors.insert(index, error),
                    None => self.errors.remove(&index),
                };
                Vec::new()
            }
            Event::PushedBack { index } => {
                self.states.set(index, State::Pending);
                Vec::new()
            }
            Event::GatesRead(gates) => {
                self.gates = gates;
                Vec::new()
            }
            Event::CancelRequested => {
                self.cancelled = true;
                Vec::new()
            }
            Event::Spent { usd } => {
                if let Some(budget) = &mut self.budget {
                    budget.spent += usd;
                }
                Vec::new()
            }
            Event::UnitsPlanned { index, units } => {
                if let Some(composite) = self.composites.get_mut(&index) {
                    composite.add(schedule::as_i64(index), units);
                }
                Vec::new()
            }
            Event::UnitFinished { index, key, end } => {
                if let Some(composite) = self.composites.get_mut(&index) {
                    composite.finish(&key, end);
                }
                Vec::new()
            }
        }
    }

    /// Whether nothing new may start: a cancel was requested or a
    /// required stage failed. Running composite stages stop starting units.
    pub(crate) fn halting(&self) -> bool {
        self.cancelled || self.states.required_failure().is_some()
    }

    /// Whether the run stops, starting nothing more: a cancel was
    /// requested or a gate rejected.
    pub(crate) fn stopping(&self) -> bool {
        self.cancelled || self.gates.rejected.is_some()
    }

    /// Whether a cancel was requested.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled
    }

    /// The attempt stage `index` is at (its latest started).
    pub(crate) fn attempt(&self, index: usize) -> i64 {
        self.attempts[index]
    }

    /// How the run ends as it stands, starting nothing; `None` while it goes
    /// on (stages run or may start).
    pub(crate) fn end(&mut self) -> Option<End> {
        if let Some(end) = self.stopped() {
            return end;
        }
        let next = schedule::next(
            &self.plan,
            &mut self.states,
            |index| self.gates.approved(index),
            usize::MAX,
        );
        self.ended(next)
    }

    /// The end a cancel or a rejection decides: `Some(None)` while the
    /// cancelled run still has stages running.
    fn stopped(&self) -> Option<Option<End>> {
        if self.cancelled {
            return Some((self.states.running() == 0).then_some(End::Cancelled));
        }
        let (index, comment, by) = self.gates.rejected()?;
        let error = rejection_error(self.plan.stages[index].name(), &by, &comment);
        Some(Some(End::Rejected { index, error }))
    }

    /// What may start with `free` slots: the units of composite stages in
    /// progress first (finishing started work before starting new work),
    /// then ready stages (and the units of composite ones among them), then
    /// the next step of every composite stage whose units have all
    /// finished. While the run halts, composite stages with
    /// no unit out are interrupted instead and nothing starts.
    fn poll(&mut self, mut free: usize, now: i64) -> Vec<Action> {
        let mut actions = Vec::new();
        let halting = self.halting();
        if halting {
            self.interrupt_quiet(&mut actions);
        }
        if let Some(end) = self.stopped() {
            actions.extend(end.map(Action::End));
            return actions;
        }
        if !halting {
            self.start_units(&mut free, now, &mut actions);
        }
        let next = schedule::next(
            &self.plan,
            &mut self.states,
            |index| self.gates.approved(index),
            free,
        );
        match next {
            Next::Start(ready) => {
                for index in ready {
                    let action = self.start(index, now);
                    if matches!(action, Action::Start { .. })
                        && !self.composites.contains_key(&index)
                    {
                        free = free.saturating_sub(1);
                    }
                    actions.push(action);
                }
            }
            other => actions.extend(self.ended(other).map(Action::End)),
        }
        if !halting {
            // A composite stage starting again takes up its unfinished units.
            self.start_units(&mut free, now, &mut actions);
            let idle = self.composites.iter().filter(|(_, c)| c.idle());
            actions.extend(idle.map(|(&index, _)| Action::Step { index }));
        }
        actions
    }

    /// Starts waiting units of composite stages in progress while slots
    /// are free.
    fn start_units(&mut self, free: &mut usize, now: i64, actions: &mut Vec<Action>) {
        for (&index, composite) in &mut self.composites {
            while *free > 0 {
                let Some(unit) = composite.take(now) else {
                    break;
                };
                *free -= 1;
                actions.push(Action::StartUnit {
                    index,
                    key: unit.key.clone(),
                    attempt: unit.attempts,
                });
            }
        }
    }

    /// Halting: composite stages with no unit out go back to pending.
    fn interrupt_quiet(&mut self, actions: &mut Vec<Action>) {
        let quiet: Vec<usize> = (self.composites.iter())
            .filter(|(_, composite)| composite.quiet())
            .map(|(&index, _)| index)
            .collect();
        for index in quiet {
            self.composites.remove(&index);
            self.states.set(index, State::Pending);
            let attempt = self.attempts[index];
            actions.push(Action::Interrupt { index, attempt });
        }
    }

    fn ended(&self, next: Next) -> Option<End> {
        match next {
            Next::Start(_) | Next::Wait => None,
            Next::Succeeded => Some(End::Succeeded),
            Next::Failed(index) => Some(End::Failed {
                index,
                error: format!(
                    "required stage '{}' failed: {}",
                    self.plan.stages[index].name(),
                    self.errors.get(&index).map_or("", String::as_str)
                ),
            }),
            Next::AwaitingGate(index) => Some(End::AwaitingGate { index }),
        }
    }

    /// A ready stage: decided by its `when`, else started (unless it runs
    /// agents and the budget is spent).
    fn start(&mut self, index: usize, now: i64) -> Action {
        let stage = &self.plan.stages[index];
        let composite = work::is_composite(stage);
        let when = match (decide_when(stage, &self.params), self.spent_out(stage)) {
            (When::Run, Some(error)) => When::Unknown(error),
            (when, _) => when,
        };
        match when {
            When::Run => {
                self.attempts[index] += 1;
                self.states.set(index, State::Running);
                if composite {
                    self.take_up(index, now, |_| false);
                }
                Action::Start {
                    index,
                    attempt: self.attempts[index],
                }
            }
            When::Skip(note) => {
                self.states.set(index, State::Skipped);
                Action::Skip { index, note }
            }
            When::Unknown(error) => {
                self.attempts[index] += 1;
                self.errors.insert(index, error.clone());
                self.states.set(index, State::Failed);
                Action::Fail {
                    index,
                    attempt: self.attempts[index],
                    error,
                }
            }
        }
    }
}

impl RunState {
    /// Why `stage` may not start: it runs agents, and the budget is spent.
    fn spent_out(&self, stage: &PlanStage) -> Option<String> {
        let budget = self.budget?;
        let agents =
            crate::readiness::agent_role(stage).is_some() || stage.spec.validation.is_some();
        (agents && budget.spent >= budget.limit).then(|| {
            format!(
                "the run's budget of ${:.2} is spent (${:.4} so far): no agent stage starts; `baton resume RUN --budget USD` continues with a larger one",
                budget.limit, budget.spent
            )
        })
    }
}

/// The gates' decisions as a driver read them (`Gates::load`, in `gate`):
/// which are approved for their current attempt and artifact, the first
/// rejected one, and the pushed-back ones. Kept here, with the rejection's
/// error, so the machine names nothing that reads the store.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gates {
    /// The approved gates, by index.
    pub(crate) approved: Vec<usize>,
    /// The first rejected gate: (index, comment, who).
    pub(crate) rejected: Option<(usize, String, String)>,
    /// Gates pushed back on their current attempt and artifact, whose
    /// stage has yet to be set back to pending.
    pub(crate) pushed_back: Vec<usize>,
    /// The latest push-back of each gate, whatever its stage did since:
    /// the attempt after the one pushed back gets its comment.
    pub(crate) push_backs: HashMap<usize, baton_store::GateDecisionRow>,
}

impl Gates {
    /// Whether gate `index` is approved for its current attempt and artifact.
    pub(crate) fn approved(&self, index: usize) -> bool {
        self.approved.contains(&index)
    }

    /// The first rejected gate: (index, comment, who).
    pub(crate) fn rejected(&self) -> Option<(usize, String, String)> {
        self.rejected.clone()
    }

    /// The push-back attempt `attempt` of gate `index` answers: the one
    /// made on the attempt before.
    pub(crate) fn push_back_for(
        &self,
        index: usize,
        attempt: i64,
    ) -> Option<&baton_store::GateDecisionRow> {
        self.push_backs
            .get(&index)
            .filter(|decision| decision.attempt + 1 == attempt)
    }
}

/// The run's error after a rejection.
pub(crate) fn rejection_error(stage: &str, by: &str, comment: &str) -> String {
    let comment = if comment.is_empty() {
        "(no comment)"
    } else {
        comment
    };
    format!("gate '{stage}' rejected by {by}: {comment}")
}

/// What a stage's `when` decides.
enum When {
    Run,
    /// False: skipped, with the note that says why.
    Skip(String),
    /// It names a parameter without a value: the error.
    Unknown(String),
}

fn decide_when(stage: &PlanStage, params: &IndexMap<String, String>) -> When {
    let Some(when) = &stage.when else {
        return When::Run;
    };
    let lookup = |name: &str| params.get(name).map(String::as_str);
    if let Some(unknown) = when
        .placeholders()
        .into_iter()
        .find(|name| !params.contains_key(*name))
    {
        return When::Unknown(format!(
            "'when' refers to '{{{unknown}}}', which has no value; pass --params {unknown}=…"
        ));
    }
    if when.evaluate(lookup) {
        return When::Run;
    }
    // The note: the condition as written and, when it names parameters, as
    // evaluated.
    let written = stage
        .spec
        .when
        .as_ref()
        .map(|when| when.value.trim())
        .unwrap_or_default();
    let evaluated = baton_workflow::template::render(written, lookup);
    When::Skip(if evaluated == written {
        format!("skipped: when {written}")
    } else {
        format!("skipped: when {written} ({evaluated})")
    })
}

#[cfg(test)]
mod tests;
