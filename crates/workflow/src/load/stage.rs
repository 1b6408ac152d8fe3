//! Reading one stage and its nested mappings, in the reference engine's
//! check order.

use std::sync::Arc;

use indexmap::IndexMap;

use super::{
    AGENT_KEYS, CHECK_KEYS, FAN_OUT_KEYS, INPUT_MAPPING_KEYS, OUTPUT_KEYS, RULE_KEYS, Reader,
    STAGE_KEYS, VALIDATION_KEYS, describe, is_workspace_relative,
};
use crate::diagnostic::{Diagnostic, suggest};
use crate::node::{Node, Value};
use crate::schema::{
    Access, Agent, Check, DEFAULT_MAX_REVISIONS, DomainRule, Executor, FanOut, FanOutMode,
    Isolation, Kind, Output, OutputCheck, OutputMode, RuleCategory, RuleSeverity, Spanned, Stage,
    Strategy, Validation,
};

impl Reader<'_> {
    /// Reads the stages, dropping each one's YAML tree once it is read: a
    /// large workflow's tree and its stages are not held whole at once.
    pub(super) fn stage_list(
        &mut self,
        node: Node,
        empty_message: &str,
    ) -> Result<Vec<Arc<Stage>>, Diagnostic> {
        let items = match node.value {
            Value::Seq(items) if !items.is_empty() => items,
            _ => {
                return Err(self
                    .error("schema::stages", empty_message, node.span)
                    .with_help(
                        "`stages:` takes a list of stage mappings, each starting with `- name: …`",
                    ));
            }
        };
        // Sized up front: a collected `Result` grows by doubling, and while
        // it grows the old and the new copy of every stage coexist.
        let mut stages = Vec::with_capacity(items.len());
        for item in items {
            stages.push(Arc::new(self.stage(&item)?));
        }
        Ok(stages)
    }
    #[expect(
        clippy::too_many_lines,
        reason = "one check after another, in the reference engine's order"
    )]
    pub(super) fn stage(&mut self, node: &Node) -> Result<Stage, Diagnostic> {
        self.mapping(node, "stage entry must be a mapping")?;
        for key in ["name", "kind", "description"] {
            self.present(node, key, format!("stage missing required key '{key}'"))
                .map_err(|error| error.with_label("this stage"))?;
        }
        let name = self.required_string(node, "name", "stage 'name'", "<global>")?;
        let stage_name = name.value.clone();
        let owner = format!("stage '{stage_name}'");
        self.unknown_keys(node, STAGE_KEYS, &owner, &stage_name);

        let executor = match node.get("executor").filter(|value| !value.is_null()) {
            None => Executor::Agent,
            Some(value) => self.keyword(value, Executor::from_name, Executor::NAMES, || {
                format!("stage '{stage_name}' has invalid executor")
            })?,
        };
        let script = self.script(node, &stage_name)?;
        if executor == Executor::WorkerQueue
            && script
                .as_ref()
                .is_none_or(|script| script.value.trim().is_empty())
        {
            return Err(self.error(
                "schema::missing-key",
                format!(
                    "stage '{stage_name}' has executor='worker_queue' but missing/empty 'script'"
                ),
                node.span,
            ));
        }
        let agent_node = node.get("agent").filter(|agent| !agent.is_null());
        if agent_node.is_none() && executor != Executor::Inline {
            return Err(self
                .error(
                    "schema::missing-key",
                    "stage missing required key 'agent'",
                    node.span,
                )
                .with_label(format!("stage '{stage_name}'"))
                .with_help("add `agent: {role: …}`, or `executor: inline` with a `script:`"));
        }
        let kind_node = node.get("kind").expect("checked above");
        let kind = self.keyword(kind_node, Kind::from_name, Kind::NAMES, || {
            format!("stage '{stage_name}' has invalid kind")
        })?;
        let agent = match agent_node {
            Some(agent_node) => self.agent(agent_node, &stage_name)?,
            None => Agent::inline(),
        };
        let outputs = self.outputs(node, &stage_name)?;
        let validation = match node.get("validation").filter(|value| !value.is_null()) {
            Some(value) => Some(self.validation(value, &stage_name)?),
            None => None,
        };
        let fan_out = match node.get("fan_out").filter(|value| !value.is_null()) {
            Some(value) => Some(self.fan_out(value, &stage_name)?),
            None => None,
        };
        let sub_workflow = self
            .optional_string(
                node,
                "sub_workflow",
                &format!("stage '{stage_name}' 'sub_workflow'"),
                &stage_name,
            )?
            .map(|spanned| spanned.value)
            .filter(|path| !path.trim().is_empty());
        if kind == Kind::SubWorkflow && sub_workflow.is_none() {
            return Err(self.error(
                "schema::missing-key",
                format!("stage '{stage_name}' has kind='sub-workflow' but missing or empty 'sub_workflow' path"),
                node.span,
            ));
        }
        let sub_workflow_span = node
            .entry("sub_workflow")
            .map(|(key, _)| key.span)
            .unwrap_or_default();
        let sub_workflow_params = self.sub_workflow_params(node, &stage_name, kind)?;
        if kind != Kind::SubWorkflow && sub_workflow.is_some() {
            let (key, _) = node.entry("sub_workflow").expect("present");
            return Err(self.error(
                "schema::sub-workflow",
                format!(
                    "stage '{stage_name}' sets 'sub_workflow' but kind='{kind}' (only allowed on kind='sub-workflow' stages)"
                ),
                key.span,
            ));
        }
        let validates_output = self.validates_output(node, &stage_name)?;

        let description = self.required_string(
            node,
            "description",
            &format!("stage '{stage_name}' 'description'"),
            &stage_name,
        )?;
        let depends_on = self.name_list(node, "depends_on", &owner, &stage_name)?;
        let reads_from = self.name_list(node, "reads_from", &owner, &stage_name)?;
        let writes_to = self.name_list(node, "writes_to", &owner, &stage_name)?;
        let human_gate = match node.get("human_gate") {
            Some(value) => self.flag(
                value,
                &format!("stage '{stage_name}' 'human_gate'"),
                &stage_name,
                "human_gate",
            )?,
            None => false,
        };
        let required = match node.get("required") {
            Some(value) if !value.is_null() => self.flag(
                value,
                &format!("stage '{stage_name}' 'required'"),
                &stage_name,
                "required",
            )?,
            _ => true,
        };
        let when = self.optional_string(node, "when", &format!("{owner} 'when'"), &stage_name)?;

        Ok(Stage {
            file: Arc::clone(self.file),
            span: node.span,
            name,
            kind,
            description,
            agent,
            executor,
            script,
            depends_on,
            depends_on_file: Arc::clone(self.file),
            reads_from,
            reads_from_file: Arc::clone(self.file),
            writes_to,
            outputs,
            validation,
            human_gate,
            required,
            fan_out,
            when,
            sub_workflow,
            sub_workflow_span,
            sub_workflow_params,
            validates_output,
            include_prefix: None,
        })
    }
    /// `sub_workflow_params`: a mapping of param name to a single value
    /// (numbers and booleans are taken as their text), only on
    /// `kind: sub-workflow` stages.
    fn sub_workflow_params(
        &mut self,
        node: &Node,
        stage_name: &str,
        kind: Kind,
    ) -> Result<IndexMap<String, Spanned<String>>, Diagnostic> {
        let mut params = IndexMap::new();
        let Some((key, value)) = node
            .entry("sub_workflow_params")
            .filter(|(_, value)| !value.is_null())
        else {
            return Ok(params);
        };
        if kind != Kind::SubWorkflow {
            return Err(self
                .error(
                    "schema::sub-workflow",
                    format!(
                        "stage '{stage_name}' sets 'sub_workflow_params' but kind='{kind}' (only allowed on kind='sub-workflow' stages)"
                    ),
                    key.span,
                )
                .for_field(stage_name, "sub_workflow_params"));
        }
        let Some(entries) = value.as_map() else {
            return Err(self
                .error(
                    "schema::type",
                    format!(
                        "stage '{stage_name}' 'sub_workflow_params' must be a mapping, got {}",
                        value.value.python_type()
                    ),
                    value.span,
                )
                .for_field(stage_name, "sub_workflow_params")
                .with_help("write one `name: value` line per param of the child workflow"));
        };
        for (name, param) in entries {
            if matches!(param.value, Value::Seq(_) | Value::Map(_)) {
                return Err(self
                    .error(
                        "schema::type",
                        format!(
                            "stage '{stage_name}' sub_workflow_params '{}' must be a single value, got {}",
                            name.python_str(),
                            param.value.python_type()
                        ),
                        param.span,
                    )
                    .for_field(stage_name, "sub_workflow_params"));
            }
            params.insert(
                name.python_str(),
                Spanned::new(param.python_str(), param.span),
            );
        }
        Ok(params)
    }
    pub(super) fn script(
        &self,
        node: &Node,
        stage_name: &str,
    ) -> Result<Option<Spanned<String>>, Diagnostic> {
        let script = self.optional_string(
            node,
            "script",
            &format!("stage '{stage_name}' 'script'"),
            stage_name,
        )?;
        let run = self.optional_string(
            node,
            "run",
            &format!("stage '{stage_name}' 'run'"),
            stage_name,
        )?;
        match (script, run) {
            (Some(_), Some(run)) => Err(self
                .error(
                    "schema::conflict",
                    format!("stage '{stage_name}' sets both 'script' and 'run'"),
                    run.span,
                )
                .for_field(stage_name, "run")
                .with_help("`run:` is another name for `script:`; keep one of them")),
            (script, run) => Ok(script.or(run)),
        }
    }
    pub(super) fn agent(&mut self, node: &Node, stage_name: &str) -> Result<Agent, Diagnostic> {
        self.mapping(node, "'agent' must be a mapping")
            .map_err(|error| error.with_help("write `agent: {role: researcher}`"))?;
        self.unknown_keys(
            node,
            AGENT_KEYS,
            &format!("the agent of stage '{stage_name}'"),
            stage_name,
        );
        self.present(node, "role", "agent missing required key 'role'")?;
        let role = self.required_string(node, "role", "agent 'role'", stage_name)?;
        let tools = match node.get("tools") {
            Some(tools) if tools.is_truthy() && tools.as_seq().is_none() => {
                return Err(self
                    .error(
                        "schema::type",
                        format!(
                            "agent 'tools' must be a list, got {}",
                            tools.value.python_type()
                        ),
                        tools.span,
                    )
                    .for_field(stage_name, "agent.tools")
                    .with_help("write `tools: [Read, Write]`"));
            }
            _ => self.name_list(node, "tools", "agent", stage_name)?,
        };
        let access = match node.get("access").filter(|value| !value.is_null()) {
            None => Access::ReadOnly,
            Some(value) => self.keyword(value, Access::from_name, Access::NAMES, || {
                "agent has invalid access".to_owned()
            })?,
        };
        let isolation = self.isolation(node, "agent has invalid isolation")?;
        let model = self
            .optional_string(node, "model", "agent 'model'", stage_name)?
            .map(|spanned| spanned.value);
        Ok(Agent {
            role: role.value,
            model,
            tools: tools.into_iter().map(|tool| tool.value).collect(),
            access,
            isolation,
        })
    }
    pub(super) fn isolation(&self, node: &Node, message: &str) -> Result<Isolation, Diagnostic> {
        match node.get("isolation").filter(|value| !value.is_null()) {
            None => Ok(Isolation::WorkDir),
            Some(value) => self.keyword(value, Isolation::from_name, Isolation::NAMES, || {
                message.to_owned()
            }),
        }
    }
    pub(super) fn outputs(
        &mut self,
        node: &Node,
        stage_name: &str,
    ) -> Result<Vec<Output>, Diagnostic> {
        let Some(list) = node.get("outputs").filter(|value| !value.is_null()) else {
            return Ok(Vec::new());
        };
        let items = self.list(
            list,
            &format!("stage '{stage_name}' 'outputs'"),
            stage_name,
            "outputs",
        )?;
        let mut outputs = Vec::with_capacity(items.len());
        for item in items {
            self.mapping(item, "output entry must be a mapping")?;
            self.present(item, "name", "output missing required key 'name'")?;
            let name = self
                .required_string(item, "name", "output 'name'", stage_name)?
                .value;
            self.unknown_keys(item, OUTPUT_KEYS, &format!("output '{name}'"), stage_name);
            let mode_node = self.present(
                item,
                "mode",
                format!("output '{name}' missing required key 'mode'"),
            )?;
            let mode = self.keyword(mode_node, OutputMode::from_name, OutputMode::NAMES, || {
                format!("output '{name}' has invalid mode")
            })?;
            let (mut subcommand, mut query, mut flags) = (None, None, None);
            if let Some(mapping) = item.get("input_mapping").filter(|value| !value.is_null()) {
                let got = mapping.value.python_type();
                let message =
                    format!("output '{name}' 'input_mapping' must be a mapping, got {got}");
                self.mapping(mapping, message)?;
                self.unknown_keys(
                    mapping,
                    INPUT_MAPPING_KEYS,
                    &format!("the input_mapping of output '{name}'"),
                    stage_name,
                );
                let text = |key: &str| {
                    mapping
                        .get(key)
                        .filter(|value| !value.is_null())
                        .map(Node::python_str)
                };
                subcommand = text("subcommand");
                query = text("query");
                flags = text("flags");
            }
            let text = |reader: &Self, key: &str| {
                reader
                    .optional_string(item, key, &format!("output '{name}' '{key}'"), stage_name)
                    .map(|value| value.map(|spanned| spanned.value))
            };
            outputs.push(Output {
                description: text(self, "description")?,
                skill: text(self, "skill")?,
                template_ref: text(self, "template_ref")?,
                writing_guide_ref: text(self, "writing_guide_ref")?,
                name,
                mode,
                subcommand,
                query,
                flags,
            });
        }
        Ok(outputs)
    }
    pub(super) fn validation(
        &mut self,
        node: &Node,
        stage_name: &str,
    ) -> Result<Validation, Diagnostic> {
        self.mapping(node, "'validation' must be a mapping")?;
        self.unknown_keys(
            node,
            VALIDATION_KEYS,
            &format!("the validation of stage '{stage_name}'"),
            stage_name,
        );
        let strategy_node = self.present(
            node,
            "strategy",
            "validation missing required key 'strategy'",
        )?;
        let strategy = self.keyword(strategy_node, Strategy::from_name, Strategy::NAMES, || {
            "validation has invalid strategy".to_owned()
        })?;
        let mut domain_rules = Vec::new();
        if let Some(rules) = node.get("domain_rules").filter(|value| !value.is_null()) {
            for rule in self.list(
                rules,
                "validation 'domain_rules'",
                stage_name,
                "validation.domain_rules",
            )? {
                domain_rules.push(self.domain_rule(rule, stage_name)?);
            }
        }
        let criteria = match node.get("criteria").filter(|value| !value.is_null()) {
            None => Vec::new(),
            Some(criteria) => {
                let items = self.list(
                    criteria,
                    "validation 'criteria'",
                    stage_name,
                    "validation.criteria",
                )?;
                let mut texts = Vec::with_capacity(items.len());
                for item in items {
                    texts.push(self.criterion(item, stage_name)?);
                }
                texts
            }
        };
        let max_revisions = match node.get("max_revisions").filter(|value| !value.is_null()) {
            None => DEFAULT_MAX_REVISIONS,
            Some(value) => match value.value {
                Value::Int(number) if (0..=1000).contains(&number) => {
                    u32::try_from(number).expect("in range")
                }
                _ => {
                    return Err(self
                        .error(
                            "schema::type",
                            format!(
                                "validation 'max_revisions' must be a whole number from 0 to 1000, got {}",
                                describe(value)
                            ),
                            value.span,
                        )
                        .for_field(stage_name, "validation.max_revisions")
                        .with_help("`max_revisions` is the number of correction cycles; 0 halts at the first critical finding"));
                }
            },
        };
        Ok(Validation {
            strategy,
            criteria,
            domain_rules,
            max_revisions,
        })
    }
    pub(super) fn domain_rule(
        &mut self,
        node: &Node,
        stage_name: &str,
    ) -> Result<DomainRule, Diagnostic> {
        self.mapping(node, "domain_rule entry must be a mapping")?;
        for key in ["id", "description"] {
            self.present(
                node,
                key,
                format!("domain_rule missing required key '{key}'"),
            )?;
        }
        let id = node.get("id").expect("checked above").python_str();
        self.unknown_keys(node, RULE_KEYS, &format!("domain rule '{id}'"), stage_name);
        let severity = match node.get("severity").filter(|value| !value.is_null()) {
            None => RuleSeverity::Minor,
            Some(value) => {
                self.keyword(value, RuleSeverity::from_name, RuleSeverity::NAMES, || {
                    format!("domain_rule '{id}' has invalid severity")
                })?
            }
        };
        let category = match node.get("category").filter(|value| !value.is_null()) {
            None => RuleCategory::Accuracy,
            Some(value) => {
                self.keyword(value, RuleCategory::from_name, RuleCategory::NAMES, || {
                    format!("domain_rule '{id}' has invalid category")
                })?
            }
        };
        let description = self
            .required_string(node, "description", "domain_rule 'description'", stage_name)?
            .value;
        let source_cmd = self
            .optional_string(node, "source_cmd", "domain_rule 'source_cmd'", stage_name)?
            .map(|spanned| spanned.value);
        Ok(DomainRule {
            id,
            description,
            severity,
            category,
            source_cmd,
        })
    }
    pub(super) fn fan_out(&mut self, node: &Node, stage_name: &str) -> Result<FanOut, Diagnostic> {
        self.mapping(
            node,
            format!("stage '{stage_name}' fan_out must be a mapping"),
        )?;
        self.unknown_keys(
            node,
            FAN_OUT_KEYS,
            &format!("the fan_out of stage '{stage_name}'"),
            stage_name,
        );
        for key in ["source", "field", "key"] {
            let message = format!("stage '{stage_name}' fan_out missing required key '{key}'");
            self.present(node, key, message)?;
        }
        let mode = match node.get("mode").filter(|value| !value.is_null()) {
            None => FanOutMode::Agent,
            Some(value) => self.keyword(value, FanOutMode::from_name, FanOutMode::NAMES, || {
                format!("stage '{stage_name}' fan_out has invalid mode")
            })?,
        };
        let context = format!("stage '{stage_name}' fan_out");
        let source =
            self.required_string(node, "source", &format!("{context} 'source'"), stage_name)?;
        let field = self
            .required_string(node, "field", &format!("{context} 'field'"), stage_name)?
            .value;
        let key = self
            .required_string(node, "key", &format!("{context} 'key'"), stage_name)?
            .value;
        let script =
            self.optional_string(node, "script", &format!("{context} 'script'"), stage_name)?;
        let isolation = self.isolation(node, &format!("{context} has invalid isolation"))?;
        let max_parallel = match node.get("max_parallel").filter(|value| !value.is_null()) {
            None => None,
            Some(value) => match value.value {
                Value::Int(number) if (1..=100_000).contains(&number) => {
                    Some(u32::try_from(number).expect("in range"))
                }
                _ => {
                    return Err(self
                        .error(
                            "schema::type",
                            format!(
                                "{context} 'max_parallel' must be a whole number from 1 to 100000, got {}",
                                describe(value)
                            ),
                            value.span,
                        )
                        .for_field(stage_name, "fan_out.max_parallel")
                        .with_help("`max_parallel` bounds how many children of this fan-out run at once; leave it out to use the run's --max-parallel"));
                }
            },
        };
        Ok(FanOut {
            source,
            field,
            key,
            mode,
            script,
            isolation,
            max_parallel,
        })
    }
    pub(super) fn validates_output(
        &mut self,
        node: &Node,
        stage_name: &str,
    ) -> Result<Vec<OutputCheck>, Diagnostic> {
        let Some(list) = node
            .get("validates_output")
            .filter(|value| !value.is_null())
        else {
            return Ok(Vec::new());
        };
        let Some(entries) = list.as_seq() else {
            return Err(self.error(
                "schema::type",
                format!(
                    "stage '{stage_name}' 'validates_output' must be a list, got {}",
                    list.value.python_type()
                ),
                list.span,
            ));
        };
        let mut checks_out = Vec::with_capacity(entries.len());
        for entry in entries {
            let message = format!("stage '{stage_name}' validates_output entry must be a mapping");
            self.mapping(entry, message)?;
            self.unknown_keys(
                entry,
                CHECK_KEYS,
                &format!("a validates_output entry of stage '{stage_name}'"),
                stage_name,
            );
            let message =
                format!("stage '{stage_name}' validates_output entry missing required key 'path'");
            let path_node = self.present(entry, "path", message)?;
            let path_text = path_node.python_str();
            if !is_workspace_relative(&path_text) {
                return Err(self
                    .error(
                        "schema::path",
                        format!(
                            "stage '{stage_name}' validates_output path must be a non-empty workspace-relative path with no absolute components or '..' segments, got '{path_text}'"
                        ),
                        path_node.span,
                    )
                    .for_field(stage_name, "validates_output"));
            }
            let mut checks = Vec::new();
            if let Some(check_list) = entry.get("checks").filter(|value| !value.is_null()) {
                let Some(items) = check_list.as_seq() else {
                    return Err(self.error(
                        "schema::type",
                        format!(
                            "stage '{stage_name}' validates_output 'checks' must be a list, got {}",
                            check_list.value.python_type()
                        ),
                        check_list.span,
                    ));
                };
                for item in items {
                    let name = item.python_str();
                    let check = Check::parse(&name);
                    if let Check::Unknown(unknown) = &check {
                        let mut warning = Diagnostic::warning(
                            "check::unknown",
                            format!("stage '{stage_name}' validates_output has unrecognised check name '{unknown}'"),
                        )
                        .at(self.file, item.span)
                        .for_field(stage_name, "validates_output")
                        .with_label("unknown check");
                        let hint = match suggest(unknown, Check::NAMES) {
                            Some(near) => format!("did you mean `{near}`? "),
                            None => String::new(),
                        };
                        warning = warning.with_help(format!(
                            "{hint}known checks: {}; a stage with an unknown check fails when it runs",
                            Check::NAMES.join(", ")
                        ));
                        self.warnings.push(warning);
                    }
                    checks.push(Spanned::new(check, item.span));
                }
            }
            checks_out.push(OutputCheck {
                path: Spanned::new(path_text, path_node.span),
                checks,
            });
        }
        Ok(checks_out)
    }
    /// A criterion is text. An unquoted criterion containing `: ` is read by
    /// YAML as a one-entry mapping (a real workflow has `- No new "noqa: F401"
    /// lines`); it is turned back into the text the author wrote, with a
    /// warning to quote it.
    pub(super) fn criterion(
        &mut self,
        node: &Node,
        stage_name: &str,
    ) -> Result<String, Diagnostic> {
        match &node.value {
            Value::Map(entries)
                if entries.len() == 1
                    && entries[0].1.as_map().is_none()
                    && entries[0].1.as_seq().is_none() =>
            {
                let (key, value) = &entries[0];
                let text = format!("{}: {}", key.python_str(), value.python_str());
                self.warnings.push(
                    Diagnostic::warning(
                        "schema::criterion-mapping",
                        format!("a validation criterion of stage '{stage_name}' reads as a mapping because it contains ': '"),
                    )
                    .at(self.file, node.span)
                    .for_field(stage_name, "validation.criteria")
                    .with_label("YAML reads this as `key: value`")
                    .with_help(format!("quote the criterion: - \"{}\"", text.replace('"', "\\\""))),
                );
                Ok(text)
            }
            Value::Seq(_) | Value::Map(_) => Err(self
                .error(
                    "schema::type",
                    format!(
                        "validation 'criteria' items must be text, got {}",
                        node.value.python_type()
                    ),
                    node.span,
                )
                .for_field(stage_name, "validation.criteria")),
            _ => Ok(node.python_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnostic::SourceFile;
    use crate::load::{Document, document};

    #[test]
    fn the_stage_list_holds_no_spare_room() {
        let stages = (0..3)
            .map(|i| {
                format!("  - {{name: s{i}, kind: gather, description: d, agent: {{role: r}}}}\n")
            })
            .collect::<String>();
        let text = format!(
            "name: w\nversion: '1'\ndescription: d\ntrigger: {{source: manual}}\nstages:\n{stages}"
        );
        let file = SourceFile::new("w.yaml", text);
        let workflow = match document(&file, &mut Vec::new()) {
            Ok(Document::Workflow(workflow)) => workflow,
            Ok(Document::Fragment(_)) => panic!("not a fragment"),
            Err(error) => panic!("{}", error.message),
        };
        assert_eq!(workflow.stages.len(), 3);
        assert_eq!(workflow.stages.capacity(), 3);
    }
}
