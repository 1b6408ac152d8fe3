//! Reads one YAML file into [`crate::schema`] types.
//!
//! The checks run in the reference engine's order
//! and stop at the first error, so the error a user sees for a broken file is
//! the one the reference would report, worded the same, but pointing at the
//! line and column. baton is stricter where the reference accepts input by
//! accident: a string where a list belongs, `"false"` where a boolean belongs,
//! or a mapping where a parameter value belongs is an error, not a coercion.
//! Unknown keys are warnings with a "did you mean" hint.

use std::sync::Arc;

use indexmap::IndexMap;

mod stage;
mod typed;

use crate::diagnostic::{Diagnostic, SourceFile, line_column};
use crate::node::{self, Node, Span, Value};
use crate::schema::{Include, Param, Spanned, Stage, Trigger, Workflow};

/// The largest workflow file baton reads. Real workflows are a few kilobytes
/// and a 10 000-stage workflow is about 2 MB; the bound keeps a stray 100 MB
/// file from costing seconds and hundreds of megabytes before it is rejected.
pub const MAX_FILE_BYTES: usize = 32 * 1024 * 1024;

/// What a YAML file turned out to be.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per file read, moved once into the load; a box would only add an allocation"
)]
pub enum Document {
    /// A runnable workflow.
    Workflow(Workflow),
    /// A fragment (`fragment: true`), usable only through `include`.
    Fragment(Fragment),
}

/// A fragment file: stages to be included by a workflow.
#[derive(Debug, Clone)]
pub struct Fragment {
    /// The file.
    pub file: Arc<SourceFile>,
    /// `stages`.
    pub stages: Vec<Arc<Stage>>,
    /// `include` (fragments may include other fragments).
    pub includes: Vec<Include>,
}

/// Reads a file as a workflow or, when it says `fragment: true`, a fragment.
///
/// # Errors
///
/// The first problem found, in the reference engine's check order.
pub fn document(
    file: &Arc<SourceFile>,
    warnings: &mut Vec<Diagnostic>,
) -> Result<Document, Diagnostic> {
    let mut root = parse_root(file)?;
    let mut reader = Reader { file, warnings };
    if let Some(flag) = root.get("fragment")
        && reader.flag(flag, "'fragment'", "<global>", "fragment")?
    {
        return reader.fragment_body(&mut root).map(Document::Fragment);
    }
    reader.workflow(&mut root).map(Document::Workflow)
}

/// The code of the error for an included file without `fragment: true`.
pub const NOT_A_FRAGMENT: &str = "include::not-a-fragment";

/// Reads a file that an `include` entry names; it must be a fragment.
///
/// # Errors
///
/// The first problem found, including a file without `fragment: true`.
pub fn fragment(
    file: &Arc<SourceFile>,
    warnings: &mut Vec<Diagnostic>,
) -> Result<Fragment, Diagnostic> {
    let mut root = parse_root(file)?;
    let mut reader = Reader { file, warnings };
    let is_fragment = match root.get("fragment") {
        Some(flag) => reader.flag(flag, "'fragment'", "<global>", "fragment")?,
        None => false,
    };
    if !is_fragment {
        return Err(Diagnostic::error(
            NOT_A_FRAGMENT,
            "fragment YAML must declare 'fragment: true' at the top level",
        )
        .at(file, Span::default())
        .with_help(
            "add `fragment: true` to the included file, or include a file that is a fragment",
        ));
    }
    reader.fragment_body(&mut root)
}

fn parse_root(file: &Arc<SourceFile>) -> Result<Node, Diagnostic> {
    if file.text.len() > MAX_FILE_BYTES {
        return Err(Diagnostic::error(
            "file::too-large",
            format!(
                "workflow file is {} bytes; baton reads workflow files of at most {} bytes",
                file.text.len(),
                MAX_FILE_BYTES
            ),
        )
        .with_help("split the workflow into fragments with `include`"));
    }
    // A byte order mark starting the file is dropped when it is read; the
    // parser skips one anywhere else too, and then counts columns without
    // it, so places after it would not match their snippets. None belongs
    // inside a workflow.
    if let Some(offset) = file.text.find('\u{feff}') {
        let (line, column) = line_column(&file.text, offset);
        return Err(Diagnostic::error(
            "yaml::byte-order-mark",
            format!("a byte order mark (U+FEFF) inside the file, on line {line}"),
        )
        .at(
            file,
            Span {
                offset,
                len: '\u{feff}'.len_utf8(),
                line,
                column,
            },
        )
        .with_label("an invisible U+FEFF here")
        .with_help("delete it: a byte order mark may only start a file"));
    }
    let root = node::parse(&file.text).map_err(|error| {
        let diagnostic =
            Diagnostic::error("yaml::syntax", format!("invalid YAML: {}", error.message));
        match error.span {
            Some(span) => diagnostic.at(file, span),
            None => diagnostic,
        }
    })?;
    if root.as_map().is_none() {
        return Err(
            Diagnostic::error("schema::top-level", "expected a YAML mapping at top level")
                .at(file, root.span)
                .with_label(format!("this is {}", root.value.kind_name())),
        );
    }
    Ok(root)
}

const TOP_KEYS: &[&str] = &[
    "name",
    "version",
    "description",
    "trigger",
    "stages",
    "include",
    "workspace_dir",
    "budget_usd",
    "metadata",
    "fragment",
];
const TRIGGER_KEYS: &[&str] = &["source", "params"];
const PARAM_KEYS: &[&str] = &["default", "description"];
const STAGE_KEYS: &[&str] = &[
    "name",
    "kind",
    "description",
    "agent",
    "executor",
    "script",
    "run",
    "depends_on",
    "reads_from",
    "writes_to",
    "outputs",
    "validation",
    "human_gate",
    "required",
    "fan_out",
    "when",
    "sub_workflow",
    "sub_workflow_params",
    "validates_output",
];
const AGENT_KEYS: &[&str] = &["role", "model", "tools", "access", "isolation"];
const OUTPUT_KEYS: &[&str] = &[
    "name",
    "mode",
    "description",
    "skill",
    "input_mapping",
    "template_ref",
    "writing_guide_ref",
    "example_ref",
    "schema",
    "when",
];
const INPUT_MAPPING_KEYS: &[&str] = &["subcommand", "query", "flags"];
const VALIDATION_KEYS: &[&str] = &["strategy", "criteria", "domain_rules", "max_revisions"];
const RULE_KEYS: &[&str] = &["id", "description", "severity", "category", "source_cmd"];
const FAN_OUT_KEYS: &[&str] = &[
    "source",
    "field",
    "key",
    "mode",
    "script",
    "output_schema",
    "isolation",
    "max_parallel",
];
const CHECK_KEYS: &[&str] = &["path", "checks"];
const INCLUDE_KEYS: &[&str] = &["path", "prefix", "depends_on", "reads_from", "params"];

struct Reader<'a> {
    file: &'a Arc<SourceFile>,
    warnings: &'a mut Vec<Diagnostic>,
}

impl Reader<'_> {
    fn workflow(&mut self, root: &mut Node) -> Result<Workflow, Diagnostic> {
        self.unknown_keys(root, TOP_KEYS, "the workflow", "<global>");
        for key in ["name", "version", "description", "trigger", "stages"] {
            self.present(root, key, format!("missing required key '{key}'"))
                .map_err(|error| {
                    let help = format!("add a top-level `{key}:`");
                    error.with_label("in this mapping").with_help(help)
                })?;
        }
        let name = self.required_string(root, "name", "'name'", "<global>")?;
        let version = self.version(root.get("version").expect("checked above"))?;
        let description = self.required_string(root, "description", "'description'", "<global>")?;
        let trigger = self.trigger(root.get("trigger").expect("checked above"))?;
        let stages_node = root.take("stages").expect("checked above");
        let stages = self.stage_list(stages_node, "'stages' must be a non-empty list")?;
        let includes = self.includes(root)?;
        let workspace_dir = self
            .optional_string(root, "workspace_dir", "'workspace_dir'", "<global>")?
            .map(|spanned| spanned.value);
        let budget_usd = self.budget(root)?;
        if let Some(metadata) = root.get("metadata").filter(|value| !value.is_null()) {
            let got = metadata.value.python_type();
            self.mapping(metadata, format!("'metadata' must be a mapping, got {got}"))?;
        }
        Ok(Workflow {
            file: Arc::clone(self.file),
            name: name.value,
            version,
            description: description.value,
            trigger,
            stages,
            includes,
            workspace_dir,
            budget_usd,
        })
    }
    /// `budget_usd`: a positive number of dollars, or absent.
    fn budget(&self, root: &Node) -> Result<Option<f64>, Diagnostic> {
        let Some(node) = root.get("budget_usd").filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let usd = match node.value {
            Value::Int(number) => Some(number as f64),
            Value::Float(number) => Some(number),
            _ => None,
        };
        match usd {
            Some(usd) if usd.is_finite() && usd > 0.0 => Ok(Some(usd)),
            _ => Err(self
                .error(
                    "schema::type",
                    format!(
                        "'budget_usd' must be a positive number of dollars, got {}",
                        describe(node)
                    ),
                    node.span,
                )
                .for_field("<global>", "budget_usd")
                .with_help("write `budget_usd: 2.50`, or leave it out for a run without a budget")),
        }
    }
    fn fragment_body(&mut self, root: &mut Node) -> Result<Fragment, Diagnostic> {
        self.unknown_keys(root, TOP_KEYS, "the fragment", "<global>");
        let Some(stages_node) = root.take("stages").filter(|node| !node.is_null()) else {
            return Err(self.error(
                "schema::missing-key",
                "fragment missing required key 'stages'",
                root.span,
            ));
        };
        let stages = self.stage_list(stages_node, "fragment 'stages' must be a non-empty list")?;
        let includes = self.includes(root)?;
        Ok(Fragment {
            file: Arc::clone(self.file),
            stages,
            includes,
        })
    }
    fn version(&self, node: &Node) -> Result<String, Diagnostic> {
        match &node.value {
            Value::Str(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                Ok(node.python_str())
            }
            other => Err(self
                .error(
                    "schema::type",
                    format!(
                        "'version' must be a string or a number, got {}",
                        other.python_type()
                    ),
                    node.span,
                )
                .for_field("<global>", "version")),
        }
    }
    fn trigger(&mut self, node: &Node) -> Result<Trigger, Diagnostic> {
        self.mapping(node, "'trigger' must be a mapping")?;
        self.unknown_keys(node, TRIGGER_KEYS, "'trigger'", "<global>");
        let Some(source) = node.get("source") else {
            return Err(self
                .error(
                    "schema::missing-key",
                    "trigger missing required key 'source'",
                    node.span,
                )
                .with_help("add `source: manual` under `trigger:`"));
        };
        let mut params = IndexMap::new();
        if let Some(params_node) = node.get("params").filter(|params| !params.is_null()) {
            let Some(entries) = params_node.as_map() else {
                return Err(self.error(
                    "schema::type",
                    format!(
                        "trigger 'params' must be a mapping, got {}",
                        params_node.value.python_type()
                    ),
                    params_node.span,
                ));
            };
            for (key, value) in entries {
                let name = key.python_str();
                let param = self.param(&name, key.span, value)?;
                params.insert(name, param);
            }
        }
        Ok(Trigger {
            source: source.python_str(),
            params,
        })
    }
    fn param(&mut self, name: &str, span: Span, value: &Node) -> Result<Param, Diagnostic> {
        let scalar = |node: &Node| match node.value {
            Value::Seq(_) | Value::Map(_) => None,
            _ => Some(node.python_str()),
        };
        if value.as_map().is_some() {
            self.unknown_keys(
                value,
                PARAM_KEYS,
                &format!("parameter '{name}'"),
                "<global>",
            );
            let default = match value.get("default") {
                None => None,
                Some(default) => Some(scalar(default).ok_or_else(|| {
                    self.error(
                        "schema::type",
                        format!(
                            "parameter '{name}' default must be a single value, got {}",
                            default.value.python_type()
                        ),
                        default.span,
                    )
                })?),
            };
            let description = self
                .optional_string(
                    value,
                    "description",
                    &format!("parameter '{name}' 'description'"),
                    "<global>",
                )?
                .map(|spanned| spanned.value);
            return Ok(Param {
                default,
                description,
                span,
            });
        }
        let default = scalar(value).ok_or_else(|| {
            self.error(
                "schema::type",
                format!("parameter '{name}' must be a single value or {{default: …, description: …}}, got {}", value.value.python_type()),
                value.span,
            )
        })?;
        Ok(Param {
            default: Some(default),
            description: None,
            span,
        })
    }
    fn includes(&mut self, root: &Node) -> Result<Vec<Include>, Diagnostic> {
        let Some(list) = root.get("include").filter(|value| !value.is_null()) else {
            return Ok(Vec::new());
        };
        let Some(entries) = list.as_seq() else {
            return Err(self.error(
                "schema::type",
                format!("'include' must be a list, got {}", list.value.python_type()),
                list.span,
            ));
        };
        let mut includes = Vec::with_capacity(entries.len());
        for entry in entries {
            let got = entry.value.python_type();
            self.mapping(
                entry,
                format!("'include' entry must be a mapping, got {got}"),
            )
            .map_err(|error| {
                error.with_help("write `include: [{path: workflows/shared/x.yaml}]`")
            })?;
            let path_node =
                self.present(entry, "path", "include entry missing required key 'path'")?;
            let path = Spanned::new(path_node.python_str(), path_node.span);
            self.unknown_keys(
                entry,
                INCLUDE_KEYS,
                &format!("include '{}'", path.value),
                "<global>",
            );
            let context = format!("include '{}'", path.value);
            for field in ["depends_on", "reads_from"] {
                if let Some(value) = entry.get(field).filter(|value| !value.is_null())
                    && value.as_seq().is_none()
                {
                    return Err(self.error(
                        "schema::type",
                        format!(
                            "{context} '{field}' must be a list, got {}",
                            value.value.python_type()
                        ),
                        value.span,
                    ));
                }
            }
            if let Some(params) = entry.get("params").filter(|value| !value.is_null()) {
                let got = params.value.python_type();
                self.mapping(
                    params,
                    format!("{context} 'params' must be a mapping, got {got}"),
                )?;
                self.warnings.push(
                    Diagnostic::warning(
                        "include::params-ignored",
                        format!("{context} sets 'params', which has no effect"),
                    )
                    .at(self.file, params.span)
                    .for_field("<global>", "include.params")
                    .with_help("fragment descriptions are filled from the including workflow's trigger params"),
                );
            }
            let prefix = self
                .optional_string(entry, "prefix", &format!("{context} 'prefix'"), "<global>")?
                .map(|spanned| spanned.value);
            includes.push(Include {
                prefix,
                depends_on: self.name_list(entry, "depends_on", &context, "<global>")?,
                reads_from: self.name_list(entry, "reads_from", &context, "<global>")?,
                path,
                span: entry.span,
            });
        }
        Ok(includes)
    }
}

fn describe(node: &Node) -> String {
    match &node.value {
        Value::Str(text) => format!("the string '{text}'"),
        Value::Null => "null".to_owned(),
        other => format!("{} ({})", other.kind_name(), node.python_str()),
    }
}

/// Whether a path is non-empty, relative and free of `..` segments.
pub fn is_workspace_relative(path: &str) -> bool {
    let absolute = path.starts_with(['/', '\\']) || path.as_bytes().get(1) == Some(&b':');
    let climbs = path.split(['/', '\\']).any(|segment| segment == "..");
    !path.trim().is_empty() && !absolute && !climbs
}
