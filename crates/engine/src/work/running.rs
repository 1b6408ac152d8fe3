//! The coordinator's view of a composite stage while it runs: its units,
//! which of them wait for a slot, and how many run.

use std::collections::{HashMap, VecDeque};

use baton_store::{NewUnit, UnitRow};

/// A composite stage in progress.
#[derive(Debug)]
pub(crate) struct Composite {
    /// The stage's units, in ordinal order.
    pub(crate) units: Vec<UnitRow>,
    positions: HashMap<String, usize>,
    waiting: VecDeque<usize>,
    /// Units running now.
    pub(crate) running: usize,
    /// How many may run at once.
    cap: usize,
    /// When the stage's attempt started (ms).
    pub(crate) started_at: i64,
}

impl Composite {
    /// A stage starting (again) with the units it already has; unfinished
    /// ones wait for a slot.
    pub(crate) fn new(mut units: Vec<UnitRow>, cap: usize, started_at: i64) -> Composite {
        units.sort_by_key(|unit| unit.ordinal);
        let mut composite = Composite {
            positions: HashMap::with_capacity(units.len()),
            units: Vec::with_capacity(units.len()),
            waiting: VecDeque::new(),
            running: 0,
            cap: cap.max(1),
            started_at,
        };
        for unit in units {
            composite.push(unit);
        }
        composite
    }

    fn push(&mut self, mut unit: UnitRow) {
        if self.positions.contains_key(&unit.key) {
            return;
        }
        let position = self.units.len();
        if unit.status != "success" && unit.status != "failed" {
            unit.status = "pending".to_owned();
            self.waiting.push_back(position);
        }
        self.positions.insert(unit.key.clone(), position);
        self.units.push(unit);
    }

    /// Adds newly planned units (keys the stage has already are ignored).
    pub(crate) fn add(&mut self, index: i64, units: Vec<NewUnit>) {
        for unit in units {
            self.push(UnitRow {
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
            });
        }
    }

    /// Every unit has finished.
    pub(crate) fn idle(&self) -> bool {
        self.waiting.is_empty() && self.running == 0
    }

    /// The next unit to start, if the stage's cap allows one more.
    pub(crate) fn take(&mut self) -> Option<usize> {
        if self.running >= self.cap {
            return None;
        }
        let position = self.waiting.pop_front()?;
        self.running += 1;
        Some(position)
    }

    /// Where the unit with `key` is.
    pub(crate) fn position(&self, key: &str) -> Option<usize> {
        self.positions.get(key).copied()
    }
}
