//! `baton parse FILE`.

use serde::Serialize;

use crate::args::{FileArgs, Format};
use crate::{exit_code, output, report};

#[derive(Serialize)]
struct Parsed<'a> {
    name: &'a str,
    version: &'a str,
    description: &'a str,
    trigger_source: &'a str,
    stage_count: usize,
    stages: Vec<StageRow<'a>>,
}

#[derive(Serialize)]
struct StageRow<'a> {
    name: &'a str,
    kind: &'a str,
    agent_role: &'a str,
    depends_on: String,
    required: bool,
}

pub(crate) fn run(args: &FileArgs) -> u8 {
    let format = args.format.format();
    let as_json = format == Format::Json;
    let loader = super::loader();
    let loaded = match baton_workflow::load(&args.file, &loader) {
        Ok(loaded) => loaded,
        Err(failure) => {
            report::emit(&[failure.warnings, failure.errors].concat(), as_json);
            return exit_code::INVALID_WORKFLOW;
        }
    };
    report::emit(&loaded.warnings, as_json);
    let workflow = &loaded.workflow;
    let parsed = Parsed {
        name: &workflow.name,
        version: &workflow.version,
        description: &workflow.description,
        trigger_source: &workflow.trigger.source,
        stage_count: workflow.stages.len(),
        stages: workflow
            .stages
            .iter()
            .map(|stage| StageRow {
                name: &stage.name.value,
                kind: stage.kind.as_str(),
                agent_role: &stage.agent.role,
                depends_on: if stage.depends_on.is_empty() {
                    "-".to_owned()
                } else {
                    stage
                        .depends_on
                        .iter()
                        .map(|name| name.value.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
                required: stage.required,
            })
            .collect(),
    };
    output::print(format, &parsed, || table(&parsed));
    exit_code::SUCCESS
}

fn table(parsed: &Parsed<'_>) -> String {
    let mut text = format!(
        "name: {}\nversion: {}\ndescription: {}\ntrigger_source: {}\nstage_count: {}\n\n",
        parsed.name,
        parsed.version,
        parsed.description.trim_end(),
        parsed.trigger_source,
        parsed.stage_count
    );
    let header = ["name", "kind", "agent_role", "depends_on", "required"];
    text.push_str(&output::table_of(&header, &parsed.stages, |row| {
        vec![
            row.name.to_owned(),
            row.kind.to_owned(),
            row.agent_role.to_owned(),
            row.depends_on.clone(),
            row.required.to_string(),
        ]
    }));
    text
}
