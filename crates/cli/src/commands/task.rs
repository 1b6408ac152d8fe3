//! `baton task new|list|status|next|archive`; `task run` is in `task_run.rs`.

use baton_engine::view::tasks::{describe, next_step};
use baton_lifecycle::next;
use baton_lifecycle::phase::Phase;
use baton_lifecycle::verdict::kebab;
use serde_json::{Value, json};

use super::errors::task_error;
use crate::args::Format;
use crate::args::task::{ListArgs, NameArgs, NewArgs, StatusArgs, TaskCommand};
use crate::tasks::{self, Record, Tasks, follow, workflow};
use crate::{exit_code, output};

/// Dispatches `baton task …`.
pub(crate) fn run(command: &TaskCommand) -> u8 {
    let done = match command {
        TaskCommand::New(args) => new(args),
        TaskCommand::List(args) => list(args),
        TaskCommand::Status(args) => status(args),
        TaskCommand::Next(args) => next_phase(args),
        TaskCommand::Run(args) => return super::task_run::run(args),
        TaskCommand::Archive(args) => archive(args),
    };
    done.unwrap_or_else(|error| task_error(&error))
}

fn project() -> Tasks {
    Tasks::new(&super::project_dir())
}

fn new(args: &NewArgs) -> Result<u8, tasks::Error> {
    let tasks = project();
    let base = kebab(&args.description);
    if base.is_empty() {
        output::stderr_line(
            "error: the description has no letters or digits to name the task folder with",
        );
        return Ok(exit_code::USAGE);
    }
    let name = baton_lifecycle::verdict::unique_name(&base, |name| tasks.taken(name));
    let record = Record {
        description: args.description.clone(),
        created_at: tasks::now_utc(),
        decompose: args.decompose,
        design: args.design || args.test_plan,
        test_plan: args.test_plan,
        ..Record::default()
    };
    follow::create_task(&tasks, &name, &record)?;
    let format = args.format.format();
    let path = format!("{}/{name}", tasks::TASKS_DIR);
    output::json_or_text(format, &json!({"task": name, "path": path}), || {
        format!("{path}\n")
    });
    if format != Format::Json {
        output::stderr_line(&format!(
            "created task {name}; `baton task run {name}` runs its phases"
        ));
    }
    Ok(exit_code::SUCCESS)
}

fn list(args: &ListArgs) -> Result<u8, tasks::Error> {
    let tasks = project();
    let rows = baton_engine::view::tasks::list(&tasks, args.archived)?;
    output::print(args.format.format(), &rows, || {
        if rows.is_empty() {
            output::stderr_line(if args.archived {
                "no archived tasks in tasks/archive/"
            } else {
                "no active tasks in tasks/; `baton task new \"<description>\"` creates one"
            });
            return String::new();
        }
        output::table_of(&["TASK", "PHASE", "KIND", "DESCRIPTION"], &rows, |row| {
            ["task", "phase", "kind", "description"]
                .iter()
                .map(|key| row[key].as_str().unwrap_or_default().to_owned())
                .collect()
        })
    });
    Ok(exit_code::SUCCESS)
}

fn status(args: &StatusArgs) -> Result<u8, tasks::Error> {
    let tasks = project();
    let names = match &args.name {
        Some(name) => vec![name.clone()],
        None => tasks.names(false)?,
    };
    let values = names
        .iter()
        .map(|name| describe(&tasks, name))
        .collect::<Result<Vec<_>, _>>()?;
    let single = args.name.is_some();
    match args.format.format() {
        Format::Json if single => output::write_json(&values[0]),
        Format::Json => output::write_json(&values),
        Format::Yaml => output::stdout(&output::yaml(&values)),
        Format::Table if values.is_empty() => output::stderr_line(
            "no active tasks in tasks/; `baton task new \"<description>\"` creates one",
        ),
        Format::Table => {
            let mut text = String::new();
            for value in &values {
                let signal: Vec<&str> = value["signal"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                text.push_str(&format!(
                    "{}\n  phase:  {}\n  signal: {}\n  next:   {}\n  why:    {}\n",
                    value["task"].as_str().unwrap_or_default(),
                    value["phase"].as_str().unwrap_or_default(),
                    if signal.is_empty() {
                        "-".to_owned()
                    } else {
                        signal.join(" + ")
                    },
                    value["next_phase"].as_str().unwrap_or_default(),
                    value["why"].as_str().unwrap_or_default(),
                ));
            }
            output::stdout(&text);
        }
    }
    Ok(exit_code::SUCCESS)
}

fn next_phase(args: &NameArgs) -> Result<u8, tasks::Error> {
    let tasks = project();
    let project_dir = super::project_dir();
    let dir = tasks.active(&args.name)?;
    let record = tasks::read_record(&dir)?;
    let status = tasks::status(&dir)?;
    let redo = tasks::redo_research(&dir, &record)?;
    let phases = next::phases(&status, record.optional(), redo);
    let step = next_step(&tasks, &status, &record, redo)?;
    // No agent runs next: sub-tasks to wait for, or a verdict to act on.
    let Some(&phase) = phases.first().filter(|phase| phase.name() == step) else {
        let value = json!({"task": args.name, "phase": status.phase.name(), "next_phase": null, "step": step, "role": null, "artifact": null, "prompt": null});
        output::json_or_text(args.format.format(), &value, || {
            format!(
                "{} is at {}: no agent runs next; next: {step} (`baton task run {}`)\n",
                args.name,
                status.phase.name(),
                args.name
            )
        });
        return Ok(exit_code::SUCCESS);
    };
    let prompt = match prompt_for(&project_dir, &args.name, &record, phase) {
        Ok(prompt) => prompt,
        Err(message) => {
            output::stderr_line(&format!("error: {message}"));
            return Ok(exit_code::INVALID_WORKFLOW);
        }
    };
    let value = json!({
        "task": args.name,
        "phase": status.phase.name(),
        "next_phase": phase.name(),
        "role": phase.role(),
        "artifact": phase.artifact(),
        "prompt": prompt,
    });
    output::json_or_text(args.format.format(), &value, || {
        format!(
            "next phase: {} (role {}, writes {})\n\n{prompt}",
            phase.name(),
            phase.role(),
            phase.artifact().unwrap_or_default()
        )
    });
    Ok(exit_code::SUCCESS)
}

/// The prompt the phase's agent would get, rendered by the engine from the
/// one-stage workflow of that phase. The workspace shown is where the next
/// run's would be; its run id is not known before the run is created.
fn prompt_for(
    project: &std::path::Path,
    task: &str,
    record: &Record,
    phase: Phase,
) -> Result<String, String> {
    let value = workflow::workflow(task, record, &[phase], project);
    let text = serde_saphyr::to_string(&value).map_err(|error| error.to_string())?;
    let loader = baton_workflow::loader::MemoryLoader::new().with("task.yaml", &text);
    let loaded = baton_workflow::load("task.yaml", &loader)
        .map_err(|failure| format!("the task workflow does not load: {:?}", failure.errors))?;
    let plan = baton_workflow::compile(
        &loaded,
        &baton_workflow::compile::Options::default(),
        &loader,
    )
    .map_err(|failure| format!("the task workflow does not compile: {:?}", failure.errors))?;
    let workspace = project.join(workflow::state_dir(task)).join("<next run>");
    Ok(baton_engine::prompt::render(
        &plan,
        &plan.stages[0],
        &workspace,
    ))
}

fn archive(args: &NameArgs) -> Result<u8, tasks::Error> {
    let tasks = project();
    // Not while a `task run` works on it.
    tasks::check_name(&args.name)?;
    let _lock = tasks::lock(&tasks.project, &args.name)?;
    let target = tasks.archive(&args.name)?;
    let archived_as = format!("{}/{}/{target}", tasks::TASKS_DIR, tasks::ARCHIVE_DIR);
    let value = json!({"task": args.name, "archived_as": archived_as});
    output::json_or_text(args.format.format(), &value, || format!("{archived_as}\n"));
    Ok(exit_code::SUCCESS)
}
