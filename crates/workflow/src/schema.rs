//! The workflow format as written: one type per YAML mapping, no rules.
//!
//! [`crate::load`] fills these from a [`crate::node::Node`] tree, checking
//! types as it goes; [`crate::include`] expands fragments; and
//! [`crate::compile`] turns the result into a [`crate::plan::Plan`]. Values
//! that later checks point at carry their [`Span`].

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::diagnostic::{Location, SourceFile};
use crate::node::Span;

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// Pairs a value with its place.
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

impl<T: fmt::Display> fmt::Display for Spanned<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(formatter)
    }
}

/// A workflow file (or a fragment) after loading.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// The file it was read from.
    pub file: Arc<SourceFile>,
    /// `name`.
    pub name: String,
    /// `version`, stringified as the reference engine does (`1.0` → `"1.0"`).
    pub version: String,
    /// `description`.
    pub description: String,
    /// `trigger`.
    pub trigger: Trigger,
    /// `stages`, after include expansion once [`crate::include`] has run.
    pub stages: Vec<Arc<Stage>>,
    /// `include`.
    pub includes: Vec<Include>,
    /// `workspace_dir`, a template whose parent directory is the workspace base.
    pub workspace_dir: Option<String>,
    /// `budget_usd`: no agent stage starts once the run spent this many
    /// dollars (`--budget` on the command line overrides it).
    pub budget_usd: Option<f64>,
}

/// `trigger`.
#[derive(Debug, Clone, Default)]
pub struct Trigger {
    /// `source`, a label (never interpreted).
    pub source: String,
    /// `params`, in file order.
    pub params: IndexMap<String, Param>,
}

/// A trigger parameter: a plain value or `{default: …, description: …}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The default value as text (`None` when a typed param has no default).
    pub default: Option<String>,
    /// `description` of a typed param.
    pub description: Option<String>,
    /// Where the parameter's name is written.
    pub span: Span,
}

/// One stage.
#[derive(Debug, Clone)]
pub struct Stage {
    /// The file the stage was written in (a fragment for included stages).
    pub file: Arc<SourceFile>,
    /// Where the stage's mapping starts.
    pub span: Span,
    /// `name` (prefixed for included stages).
    pub name: Spanned<String>,
    /// `kind`.
    pub kind: Kind,
    /// `description`.
    pub description: Spanned<String>,
    /// `agent` (role `inline` for inline stages without one).
    pub agent: Agent,
    /// `executor`.
    pub executor: Executor,
    /// `script` (or its alias `run`): shell text for inline and queue stages.
    pub script: Option<Spanned<String>>,
    /// `depends_on`.
    pub depends_on: Vec<Spanned<String>>,
    /// The file `depends_on`'s spans point into: [`Stage::file`], or the
    /// including file when an `include` entry gave a fragment's root stage
    /// its dependencies.
    pub depends_on_file: Arc<SourceFile>,
    /// `reads_from`.
    pub reads_from: Vec<Spanned<String>>,
    /// The file `reads_from`'s spans point into (as for `depends_on`).
    pub reads_from_file: Arc<SourceFile>,
    /// `writes_to`.
    pub writes_to: Vec<Spanned<String>>,
    /// `outputs`.
    pub outputs: Vec<Output>,
    /// `validation`.
    pub validation: Option<Validation>,
    /// `human_gate`.
    pub human_gate: bool,
    /// `required`.
    pub required: bool,
    /// `fan_out`.
    pub fan_out: Option<FanOut>,
    /// `when`.
    pub when: Option<Spanned<String>>,
    /// `sub_workflow`: the child workflow's path as written (resolved like an
    /// include path, relative to the file this stage is written in).
    pub sub_workflow: Option<String>,
    /// Where the `sub_workflow` key is written, for diagnostics about the
    /// reference (a missing file, a cycle); the default span when absent.
    pub sub_workflow_span: Span,
    /// `sub_workflow_params` (a baton extension): the child run's params,
    /// in file order. Values may use the parent's `{params}`.
    pub sub_workflow_params: IndexMap<String, Spanned<String>>,
    /// `validates_output`.
    pub validates_output: Vec<OutputCheck>,
    /// The include prefix this stage was injected with (`None` for the
    /// workflow's own stages, `Some("")` for `prefix: ""`).
    pub include_prefix: Option<String>,
}

impl Stage {
    /// Where a span of this stage's file is.
    pub fn location(&self, span: Span) -> Location {
        Location::new(&self.file, span)
    }

    /// Whether the stage runs a shell script of its own (an inline stage
    /// with a `script`) rather than an agent.
    pub fn runs_script(&self) -> bool {
        self.executor == Executor::Inline && self.script.is_some()
    }

    /// The role the stage's agent runs under: `inline` for every inline
    /// stage, whatever its `agent.role` says.
    pub fn agent_role(&self) -> &str {
        if self.executor == Executor::Inline {
            "inline"
        } else {
            &self.agent.role
        }
    }
}

macro_rules! keyword_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$variant_meta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant),+
        }

        impl $name {
            /// Every accepted spelling, in the order error messages list them.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The spelling used in YAML.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// Parses the YAML spelling.
            pub fn from_name(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(self.as_str())
            }
        }
    };
}

keyword_enum! {
    /// `stage.kind`.
    Kind {
        /// Collects information.
        Gather = "gather",
        /// Proposes a change or a plan.
        Propose = "propose",
        /// Carries out work.
        Execute = "execute",
        /// Checks another stage's output.
        Validate = "validate",
        /// The only kind allowed external side effects.
        Publish = "publish",
        /// Runs another workflow.
        SubWorkflow = "sub-workflow",
    }
}

keyword_enum! {
    /// `stage.executor`.
    Executor {
        /// An agent profile runs the stage.
        Agent = "agent",
        /// The stage becomes a job on the durable queue.
        WorkerQueue = "worker_queue",
        /// baton runs the stage's script itself.
        Inline = "inline",
    }
}

keyword_enum! {
    /// `agent.access`.
    Access {
        /// May read the repository; writes only its declared outputs.
        ReadOnly = "read-only",
        /// May change the repository.
        ReadWrite = "read-write",
    }
}

keyword_enum! {
    /// `agent.isolation` and `fan_out.isolation`.
    Isolation {
        /// Runs in the shared workspace (the reference's `work-dir`).
        WorkDir = "work-dir",
        /// Runs in a git worktree of its own.
        Worktree = "worktree",
    }
}

keyword_enum! {
    /// `outputs[].mode`.
    OutputMode {
        /// Runs a CLI.
        Invoke = "invoke",
        /// An agent writes it.
        Generate = "generate",
        /// An agent fills a template.
        Template = "template",
    }
}

keyword_enum! {
    /// `validation.strategy`.
    Strategy {
        /// One validator per unit of output.
        Unit = "unit",
        /// One validator over all units.
        CrossUnit = "cross_unit",
        /// Challengers, then evidence gatherers, then corrections.
        Adversarial = "adversarial",
        /// One fact-checker.
        FactCheck = "fact_check",
        /// One validator with goal-driven criteria.
        Deliverable = "deliverable",
    }
}

keyword_enum! {
    /// `domain_rules[].severity`.
    RuleSeverity {
        /// Blocks acceptance.
        Critical = "critical",
        /// Worth fixing.
        Minor = "minor",
        /// For information.
        Info = "info",
    }
}

keyword_enum! {
    /// `domain_rules[].category`.
    RuleCategory {
        /// Facts are right.
        Accuracy = "accuracy",
        /// Parts agree.
        Consistency = "consistency",
        /// Nothing is missing.
        Completeness = "completeness",
        /// Form.
        Style = "style",
        /// References resolve.
        CrossReference = "cross_reference",
        /// Terraform.
        Terraform = "terraform",
        /// PagerDuty.
        Pagerduty = "pagerduty",
        /// Metrics.
        Metrics = "metrics",
        /// Incidents.
        Incidents = "incidents",
    }
}

keyword_enum! {
    /// `fan_out.mode`.
    FanOutMode {
        /// One agent (or script run) per item.
        Agent = "agent",
        /// One queue job per item.
        WorkerQueue = "worker_queue",
    }
}

/// `agent`.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    /// `role`: maps to an agent profile.
    pub role: String,
    /// `model`.
    pub model: Option<String>,
    /// `tools` (empty means all tools).
    pub tools: Vec<String>,
    /// `access`.
    pub access: Access,
    /// `isolation`.
    pub isolation: Isolation,
}

impl Agent {
    /// The agent of an inline stage that declares none.
    pub fn inline() -> Self {
        Agent {
            role: "inline".to_owned(),
            model: None,
            tools: Vec::new(),
            access: Access::ReadOnly,
            isolation: Isolation::WorkDir,
        }
    }
}

/// `outputs[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// `name`.
    pub name: String,
    /// `mode`.
    pub mode: OutputMode,
    /// `description`.
    pub description: Option<String>,
    /// `skill`: the CLI an invoke output runs.
    pub skill: Option<String>,
    /// `input_mapping.subcommand`.
    pub subcommand: Option<String>,
    /// `input_mapping.query`.
    pub query: Option<String>,
    /// `input_mapping.flags`.
    pub flags: Option<String>,
    /// `template_ref`.
    pub template_ref: Option<String>,
    /// `writing_guide_ref`.
    pub writing_guide_ref: Option<String>,
}

/// `validation`.
#[derive(Debug, Clone, PartialEq)]
pub struct Validation {
    /// `strategy`.
    pub strategy: Strategy,
    /// `criteria`.
    pub criteria: Vec<String>,
    /// `domain_rules`.
    pub domain_rules: Vec<DomainRule>,
    /// `max_revisions`: correction cycles allowed (default 2).
    pub max_revisions: u32,
}

/// The default correction-cycle budget.
pub const DEFAULT_MAX_REVISIONS: u32 = 2;

/// `validation.domain_rules[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainRule {
    /// `id`.
    pub id: String,
    /// `description`.
    pub description: String,
    /// `severity`.
    pub severity: RuleSeverity,
    /// `category`.
    pub category: RuleCategory,
    /// `source_cmd`.
    pub source_cmd: Option<String>,
}

/// `fan_out`.
#[derive(Debug, Clone, PartialEq)]
pub struct FanOut {
    /// `source`: the stage whose output holds the items.
    pub source: Spanned<String>,
    /// `field`: dotted path to the item array.
    pub field: String,
    /// `key`: the per-item field, also the placeholder name.
    pub key: String,
    /// `mode`.
    pub mode: FanOutMode,
    /// `script`: per-item shell text for `mode: worker_queue`.
    pub script: Option<Spanned<String>>,
    /// `isolation`.
    pub isolation: Isolation,
    /// `max_parallel` (a baton extension): how many children run at once;
    /// `None` leaves it to the run's `--max-parallel`.
    pub max_parallel: Option<u32>,
}

/// `validates_output[]`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputCheck {
    /// `path`, workspace-relative.
    pub path: Spanned<String>,
    /// `checks`.
    pub checks: Vec<Spanned<Check>>,
}

/// One check of a [`OutputCheck`] (reference §11, plus `exists` and `schema:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The file exists.
    Exists,
    /// The file parses as JSON.
    IsJson,
    /// The top level is an object.
    IsDict,
    /// The top level is an array.
    IsList,
    /// A non-empty object or array.
    NonEmpty,
    /// The top-level object has this key.
    HasKey(String),
    /// Every value of the top-level object is an object with this key.
    ValuesHaveKey(String),
    /// Every item of the top-level array is an object with this key.
    ListItemsHaveKey(String),
    /// The document is valid against this JSON Schema file.
    Schema(String),
    /// A name baton does not know; fails when the stage runs.
    Unknown(String),
}

impl Check {
    /// The names of the checks without an argument, and the prefixes of those with one.
    pub const NAMES: &'static [&'static str] = &[
        "exists",
        "is_json",
        "is_dict",
        "is_list",
        "non_empty",
        "has_key:",
        "values_have_key:",
        "list_items_have_key:",
        "schema:",
    ];

    /// Parses a check name.
    pub fn parse(text: &str) -> Check {
        let with_argument = |prefix: &str| {
            text.strip_prefix(prefix)
                .filter(|argument| !argument.is_empty())
                .map(str::to_owned)
        };
        match text {
            "exists" => Check::Exists,
            "is_json" => Check::IsJson,
            "is_dict" => Check::IsDict,
            "is_list" => Check::IsList,
            "non_empty" => Check::NonEmpty,
            _ => {
                if let Some(key) = with_argument("has_key:") {
                    Check::HasKey(key)
                } else if let Some(key) = with_argument("values_have_key:") {
                    Check::ValuesHaveKey(key)
                } else if let Some(key) = with_argument("list_items_have_key:") {
                    Check::ListItemsHaveKey(key)
                } else if let Some(path) = with_argument("schema:") {
                    Check::Schema(path)
                } else {
                    Check::Unknown(text.to_owned())
                }
            }
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::Exists => formatter.write_str("exists"),
            Check::IsJson => formatter.write_str("is_json"),
            Check::IsDict => formatter.write_str("is_dict"),
            Check::IsList => formatter.write_str("is_list"),
            Check::NonEmpty => formatter.write_str("non_empty"),
            Check::HasKey(key) => write!(formatter, "has_key:{key}"),
            Check::ValuesHaveKey(key) => write!(formatter, "values_have_key:{key}"),
            Check::ListItemsHaveKey(key) => write!(formatter, "list_items_have_key:{key}"),
            Check::Schema(path) => write!(formatter, "schema:{path}"),
            Check::Unknown(name) => formatter.write_str(name),
        }
    }
}

/// `include[]`.
#[derive(Debug, Clone)]
pub struct Include {
    /// `path` as written.
    pub path: Spanned<String>,
    /// `prefix`: `None` means the file stem.
    pub prefix: Option<String>,
    /// `depends_on`: replaces the fragment roots' dependencies.
    pub depends_on: Vec<Spanned<String>>,
    /// `reads_from`: replaces the fragment roots' reads.
    pub reads_from: Vec<Spanned<String>>,
    /// Where the entry is written.
    pub span: Span,
}
