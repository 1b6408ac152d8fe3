//! The compiled plan: what the engine runs and what `baton compile` prints.

use indexmap::IndexMap;

use crate::diagnostic::Diagnostic;
use crate::schema::Stage;
use crate::when::When;

/// A compiled workflow.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `name`.
    pub name: String,
    /// `version`.
    pub version: String,
    /// `description`.
    pub description: String,
    /// `workspace_dir`, unrendered.
    pub workspace_dir: Option<String>,
    /// `budget_usd`, in dollars.
    pub budget_usd: Option<f64>,
    /// Resolved parameters: `work_dir`, then trigger params, then overrides.
    pub params: IndexMap<String, String>,
    /// Stages in index order.
    pub stages: Vec<PlanStage>,
    /// Groups in order.
    pub groups: Vec<Group>,
    /// Number of BFS levels (waves).
    pub levels: usize,
    /// `reads_from` entries whose upstream declares no `writes_to`.
    pub contract_warnings: Vec<ContractWarning>,
    /// Compile-time warnings (a `when` parameter without a value).
    pub warnings: Vec<Diagnostic>,
}

impl Plan {
    /// The largest group.
    pub fn max_parallelism(&self) -> usize {
        self.groups
            .iter()
            .map(|group| group.stages.len())
            .max()
            .unwrap_or(0)
    }

    /// Looks a stage up by name.
    pub fn stage(&self, name: &str) -> Option<&PlanStage> {
        self.stages
            .iter()
            .find(|stage| stage.spec.name.value == name)
    }
}

/// One group: stages of one wave, or a single human-gated stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Stage indices, sorted by name.
    pub stages: Vec<usize>,
    /// Whether this is a gated stage's own group.
    pub gate: bool,
}

/// A stage with its place in the plan and its compile-time resolution.
#[derive(Debug, Clone)]
pub struct PlanStage {
    /// Position in index order; `NNN` in file names.
    pub index: usize,
    /// The group it belongs to.
    pub group: usize,
    /// Its BFS wave (length of its longest dependency chain).
    pub level: usize,
    /// The stage as written (after include expansion).
    pub spec: std::sync::Arc<Stage>,
    /// The description with parameters substituted.
    pub description: String,
    /// Indices of the stages it depends on.
    pub depends_on: Vec<usize>,
    /// Indices of the stages it reads from.
    pub reads_from: Vec<usize>,
    /// The parsed `when` condition.
    pub when: Option<When>,
    /// Commands built from `mode: invoke` outputs, parameters substituted.
    pub cli_commands: Vec<String>,
    /// Text of the last output's `template_ref`.
    pub template: Option<String>,
    /// Text of the last output's `writing_guide_ref`.
    pub guide: Option<String>,
}

impl PlanStage {
    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.spec.name.value
    }

    /// `NNN-name`, the stem of the stage's result and dispatch files.
    pub fn file_stem(&self) -> String {
        format!("{:03}-{}", self.index, self.spec.name.value)
    }
}

/// A `reads_from` whose upstream declares no `writes_to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractWarning {
    /// The reading stage.
    pub stage: String,
    /// The upstream stage.
    pub upstream: String,
    /// The reference engine's wording.
    pub message: String,
}
