//! A composite stage while it runs: its units, which of them wait for a
//! slot, and how many are out.

use std::collections::{HashMap, VecDeque};

use baton_store::{NewUnit, UnitRow};

/// A composite stage in progress.
#[derive(Debug, Clone)]
pub(crate) struct Composite {
    /// The stage's units, in ordinal order.
    pub(crate) units: Vec<UnitRow>,
    positions: HashMap<String, usize>,
    waiting: VecDeque<usize>,
    /// Units out now (running, or handed to an orchestrator).
    running: usize,
    /// How many may be out at once.
    cap: usize,
    /// When the stage's attempt started (ms).
    pub(crate) started_at: i64,
}

/// How a unit's attempt ended, as its driver recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnitEnd {
    pub(crate) status: String,
    pub(crate) at: i64,
    pub(crate) exit_code: Option<i64>,
    pub(crate) error: Option<String>,
    /// The outputs it recorded, as JSON.
    pub(crate) artifacts: String,
}

impl Composite {
    /// A stage starting (or found running) with the units it already has:
    /// those `out` says are still out count as running, the other
    /// unfinished ones wait for a slot.
    pub(crate) fn new(
        mut units: Vec<UnitRow>,
        cap: usize,
        started_at: i64,
        out: impl Fn(&UnitRow) -> bool,
    ) -> Composite {
        units.sort_by_key(|unit| unit.ordinal);
        let mut composite = Composite {
            positions: HashMap::with_capacity(units.len()),
            units: Vec::with_capacity(units.len()),
            waiting: VecDeque::new(),
            running: 0,
            cap: cap.max(1),
            started_at,
        };
        for mut unit in units {
            if composite.positions.contains_key(&unit.key) {
                continue;
            }
            let finished = unit.status == "success" || unit.status == "failed";
            if !finished && out(&unit) {
                composite.running += 1;
            } else if !finished {
                "pending".clone_into(&mut unit.status);
                composite.waiting.push_back(composite.units.len());
            }
            composite
                .positions
                .insert(unit.key.clone(), composite.units.len());
            composite.units.push(unit);
        }
        composite
    }

    /// Adds newly planned units (keys the stage has already are ignored).
    pub(crate) fn add(&mut self, index: i64, units: Vec<NewUnit>) {
        for unit in units {
            if self.positions.contains_key(&unit.key) {
                continue;
            }
            let position = self.units.len();
            self.positions.insert(unit.key.clone(), position);
            self.waiting.push_back(position);
            self.units.push(pending(index, unit));
        }
    }

    /// Every unit has finished.
    pub(crate) fn idle(&self) -> bool {
        self.waiting.is_empty() && self.running == 0
    }

    /// No unit is out.
    pub(crate) fn quiet(&self) -> bool {
        self.running == 0
    }

    /// Starts the next waiting unit at `now`, if the stage's cap allows one
    /// more; returns it.
    pub(crate) fn take(&mut self, now: i64) -> Option<&UnitRow> {
        if self.running >= self.cap {
            return None;
        }
        let position = self.waiting.pop_front()?;
        self.running += 1;
        let unit = &mut self.units[position];
        "running".clone_into(&mut unit.status);
        unit.attempts += 1;
        unit.started_at = Some(now);
        Some(unit)
    }

    /// The unit with `key`.
    pub(crate) fn unit(&self, key: &str) -> Option<&UnitRow> {
        self.units.get(*self.positions.get(key)?)
    }

    /// Records the end of the unit with `key`.
    pub(crate) fn finish(&mut self, key: &str, end: UnitEnd) {
        self.running = self.running.saturating_sub(1);
        let Some(&position) = self.positions.get(key) else {
            return;
        };
        let unit = &mut self.units[position];
        unit.status = end.status;
        unit.finished_at = Some(end.at);
        unit.exit_code = end.exit_code;
        unit.error = end.error;
        unit.artifacts = end.artifacts;
    }
}

/// A unit just planned, as the store records it: pending, never tried.
pub(crate) fn pending(index: i64, unit: NewUnit) -> UnitRow {
    UnitRow {
        index,
        key: unit.key,
        ordinal: unit.ordinal,
        kind: unit.kind,
        cycle: unit.cycle,
        label: unit.label,
        spec: unit.spec,
        status: "pending".to_owned(),
        attempts: 0,
        started_at: None,
        finished_at: None,
        exit_code: None,
        error: None,
        artifacts: "[]".to_owned(),
    }
}
