//! Child runs of `kind: sub-workflow` stages, as `baton status` and
//! `baton runs` show them.
//!
//! A child run records its parent in its options JSON (`parent_run`,
//! `parent_stage`); the links are read from there rather than derived from
//! ids, so a listing never names a run that does not exist.

use std::collections::HashMap;

use baton_store::RunRow;
use serde_json::json;

/// The parent of a run, if it is a child run: `(parent_run, parent_stage)`.
pub fn parent_of(run: &RunRow) -> Option<(String, String)> {
    let options: serde_json::Value = serde_json::from_str(&run.options).ok()?;
    let parent = options.get("parent_run")?.as_str()?.to_owned();
    let stage = options
        .get("parent_stage")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some((parent, stage))
}

/// Every child run in the store, by parent run and stage.
#[derive(Debug, Default)]
pub struct SubRuns {
    children: HashMap<(String, String), RunRow>,
}

impl SubRuns {
    /// Reads the child runs' parent links. A failure to read shows no children:
    /// they are extra detail.
    pub async fn read(store: &baton_store::Store) -> SubRuns {
        let runs = store.child_runs().await.unwrap_or_default();
        SubRuns {
            children: runs
                .into_iter()
                .filter_map(|run| parent_of(&run).map(|key| (key, run)))
                .collect(),
        }
    }

    /// The child run of a parent's stage.
    pub fn child(&self, parent: &str, stage: &str) -> Option<&RunRow> {
        self.children.get(&(parent.to_owned(), stage.to_owned()))
    }

    /// The child runs of a run, whichever stage started them.
    pub fn children_of<'a>(&'a self, parent: &'a str) -> impl Iterator<Item = &'a RunRow> {
        self.children
            .iter()
            .filter(move |((of, _), _)| of == parent)
            .map(|(_, run)| run)
    }

    /// Adds `sub_run: {run_id, status}` to a stage's JSON entry.
    pub fn describe_json(&self, parent: &str, stage: &str, entry: &mut serde_json::Value) {
        if let Some(child) = self.child(parent, stage) {
            entry["sub_run"] = json!({"run_id": child.run_id, "status": child.status});
        }
    }

    /// Indented table rows for the child run of a parent's stage and,
    /// below it, the child's own children, each naming the run and its
    /// status. `columns` is the width of the table.
    pub fn rows(&self, parent: &str, stage: &str, columns: usize) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        self.push_rows(parent, stage, 1, columns, &mut rows);
        rows
    }

    fn push_rows(
        &self,
        parent: &str,
        stage: &str,
        depth: usize,
        columns: usize,
        rows: &mut Vec<Vec<String>>,
    ) {
        // Depth is bounded by the compiler's nesting limit; the guard keeps
        // a corrupted store from looping.
        let Some(child) = self.child(parent, stage).filter(|_| depth <= 32) else {
            return;
        };
        let mut row = vec![String::new(); columns];
        row[1] = format!("{}└ sub-run {}", "  ".repeat(depth), child.run_id);
        row[2].clone_from(&child.status);
        if let Some(error) = &child.error {
            row[columns - 1].clone_from(error);
        }
        rows.push(row);
        let mut stages: Vec<&(String, String)> = self
            .children
            .keys()
            .filter(|(grandparent, _)| *grandparent == child.run_id)
            .collect();
        stages.sort();
        for (_, grandchild_stage) in stages {
            self.push_rows(&child.run_id, grandchild_stage, depth + 1, columns, rows);
        }
    }
}
