//! `baton gate list|show|approve|reject|drop|edit|add`: a thin adapter over
//! `baton_engine::gate`.

use baton_engine::gate::{self, Decision, GateEdit, GateView};
use baton_engine::view::gates::{status_json, view_json};
use baton_engine::workspace::utc;

use super::errors::chain;
use super::run_ref;
use super::runtime::{block_on_exit, open_store};
use crate::args::{Format, GateCommand, GateDecideArgs, GateRef};
use crate::{exit_code, output};

/// Runs a `baton gate` subcommand.
pub(crate) fn run(command: &GateCommand) -> u8 {
    match command {
        GateCommand::List(args) => list(args.run.as_deref(), args.format.format()),
        GateCommand::Show(args) => show(args),
        GateCommand::Approve(args) => decide(args, Decision::Approve),
        GateCommand::Reject(args) => decide(args, Decision::Reject),
        GateCommand::PushBack(args) => decide(args, Decision::PushBack),
        GateCommand::Drop(args) => {
            edit(&args.gate, GateEdit::Drop(args.n), args.as_name.as_deref())
        }
        GateCommand::Edit(args) => match args.assignment.split_once('=') {
            Some((field, value)) if !field.is_empty() => edit(
                &args.gate,
                GateEdit::Edit {
                    n: args.n,
                    field: field.to_owned(),
                    value: value.to_owned(),
                },
                args.as_name.as_deref(),
            ),
            _ => {
                output::stderr_line(&format!(
                    "error: expected FIELD=VALUE, got '{}'\nhint: for example `baton gate edit {} {} {} priority=high`",
                    args.assignment, args.gate.run, args.gate.stage, args.n
                ));
                exit_code::USAGE
            }
        },
        GateCommand::Add(args) => edit(
            &args.gate,
            GateEdit::Add(args.text.clone()),
            args.as_name.as_deref(),
        ),
    }
}

/// Prints a gate error and picks its exit code.
fn failure(error: &gate::Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    match error {
        gate::Error::Store(baton_store::Error::NoSuchRun(_)) => {
            output::stderr_line("hint: `baton runs` lists the recorded runs");
            exit_code::INVALID_WORKFLOW
        }
        gate::Error::Store(_) => exit_code::STORE_UNAVAILABLE,
        gate::Error::AlreadyDecided { .. }
        | gate::Error::Changed { .. }
        | gate::Error::RanPastGate { .. } => exit_code::REFUSED,
        gate::Error::Edit { .. } | gate::Error::NotEditable { .. } => {
            output::stderr_line("hint: `baton gate show RUN STAGE` numbers the items");
            exit_code::USAGE
        }
        _ => exit_code::USAGE,
    }
}

/// The person deciding: `--as`, else the user running baton.
async fn decider(as_name: Option<&str>) -> String {
    match as_name {
        Some(name) => name.to_owned(),
        None => crate::settings::person(&super::project_dir()).await,
    }
}

fn list(run: Option<&str>, format: Format) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let run = match run {
            Some(reference) => Some(run_ref::resolve(&store, reference).await?),
            None => None,
        };
        let gates = gate::list(&store, run.as_deref())
            .await
            .map_err(|error| failure(&error))?;
        let value: Vec<_> = gates.iter().map(status_json).collect();
        output::print(format, &value, || {
            if gates.is_empty() {
                output::stderr_line("No gate is waiting or decided.");
            }
            let header = [
                "run_id",
                "stage",
                "status",
                "decided_by",
                "decided_at",
                "comment",
            ];
            output::table_of(&header, &gates, |status| {
                let decision = status.decision.as_ref();
                vec![
                    status.run_id.clone(),
                    status.stage.clone(),
                    status.state.as_str().to_owned(),
                    decision
                        .map(|row| row.decided_by.clone())
                        .unwrap_or_default(),
                    decision.map(|row| utc(row.decided_at)).unwrap_or_default(),
                    decision
                        .and_then(|row| row.comment.clone())
                        .unwrap_or_default(),
                ]
            })
        });
        Ok(exit_code::SUCCESS)
    })
}

/// The outputs for people: a JSON list as numbered items, anything else as it is.
fn view_text(view: &GateView) -> String {
    let status = &view.status;
    let mut text = format!(
        "run: {}\ngate: {}\nstatus: {}\n",
        status.run_id,
        status.stage,
        status.state.as_str()
    );
    if let Some(row) = &status.decision {
        text.push_str(&format!(
            "decision: {} by {} at {}{}\n",
            row.decision.replace('_', " "),
            row.decided_by,
            utc(row.decided_at),
            row.comment
                .as_ref()
                .map(|comment| format!(": {comment}"))
                .unwrap_or_default()
        ));
    }
    for output in &view.outputs {
        text.push_str(&format!("\n── {} ──\n", output.path));
        match (&output.list, &output.content) {
            (Some((gate::ListKind::Json, items)), _) => text.push_str(&numbered(items, "")),
            (Some((gate::ListKind::Markdown, items)), Some(content)) => {
                text.push_str(content);
                text.push_str("\nitems:\n");
                text.push_str(&numbered(items, "  "));
            }
            (_, Some(content)) => {
                text.push_str(content);
                if !content.ends_with('\n') {
                    text.push('\n');
                }
            }
            (_, None) => text.push_str("(missing)\n"),
        }
    }
    text.push_str(&changes_text(view));
    text
}

/// A list's items a line each, numbered from 1 as `gate drop|edit` take them.
fn numbered(items: &[String], indent: &str) -> String {
    items
        .iter()
        .enumerate()
        .map(|(number, item)| format!("{indent}{}. {item}\n", number + 1))
        .collect()
}

/// How each output differs from what the latest decision was made on.
fn changes_text(view: &GateView) -> String {
    let Some(since) = &view.since else {
        return "\nchanges: none to show, the gate waits for its first decision\n".to_owned();
    };
    let row = &since.decision;
    let mut text = format!(
        "\nchanges since the {} by {} at {} (attempt {}):\n",
        row.decision.replace('_', " "),
        row.decided_by,
        utc(row.decided_at),
        row.attempt
    );
    for output in &view.outputs {
        let Some(diff) = &output.diff else { continue };
        match (&diff.unified, diff.change) {
            (Some(unified), _) => {
                text.push_str(&format!(
                    "── {} ({}) ──\n{unified}",
                    output.path,
                    diff.change.as_str()
                ));
                if diff.truncated {
                    text.push_str("(only the start of the output is compared)\n");
                }
            }
            (None, gate::Change::NotKept) => text.push_str(&format!(
                "{}: changed (its content at the decision was not kept)\n",
                output.path
            )),
            (None, change) => text.push_str(&format!("{}: {}\n", output.path, change.as_str())),
        }
    }
    text
}

fn show(args: &GateRef) -> u8 {
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run).await?;
        let view = gate::show(&store, &run_id, &args.stage)
            .await
            .map_err(|error| failure(&error))?;
        let format = args.format.format();
        output::print(format, &view_json(&view), || view_text(&view));
        if format == Format::Table {
            let (run, stage) = (&run_id, &args.stage);
            output::stderr_line(&format!(
                "decide: `baton gate approve {run} {stage}`, `baton gate push-back {run} {stage} --comment …` or `baton gate reject {run} {stage} --comment …`\nedit: `baton gate drop|edit|add {run} {stage} …` (items numbered from 1)"
            ));
        }
        Ok(exit_code::SUCCESS)
    })
}

fn decide(args: &GateDecideArgs, decision: Decision) -> u8 {
    let gate_ref = &args.gate;
    block_on_exit(async {
        let by = decider(args.as_name.as_deref()).await;
        let (store, run_id) = run_ref::open_with_run(&gate_ref.run).await?;
        let comment = args.comment.clone();
        let row = gate::decide(&store, &run_id, &gate_ref.stage, decision, &by, comment)
            .await
            .map_err(|error| failure(&error))?;
        let (run, stage) = (&run_id, &gate_ref.stage);
        let value = baton_engine::view::decision_json(run, stage, &row);
        output::json_or_text(gate_ref.format.format(), &value, || {
            format!("{run} {stage} {}\n", row.decision)
        });
        // How the run goes on depends on who drives it.
        let row = store.run(run).await;
        let external = row.as_ref().is_ok_and(baton_engine::external::is_external);
        // A push-back nobody drives sets the run back to pending at once.
        let driven = row.is_ok_and(|row| row.status != "pending");
        match decision {
            Decision::Approve if external => output::stderr_line(&format!(
                "approved gate '{stage}' of run {run} as {by}; the run is driven externally: `baton next {run}` hands out the stages after the gate"
            )),
            Decision::Approve => output::stderr_line(&format!(
                "approved gate '{stage}' of run {run} as {by}; `baton resume {run}` continues the run (a `baton run --wait-gates` waiting at the gate continues by itself)"
            )),
            Decision::Reject => output::stderr_line(&format!(
                "rejected gate '{stage}' of run {run} as {by}: the run ends with status rejected"
            )),
            Decision::PushBack if external => output::stderr_line(&format!(
                "pushed back gate '{stage}' of run {run} as {by}; `baton next {run}` hands '{stage}' out again with your comment in its prompt"
            )),
            Decision::PushBack if driven => output::stderr_line(&format!(
                "pushed back gate '{stage}' of run {run} as {by}; the run waiting at the gate runs '{stage}' again with your comment in its prompt"
            )),
            Decision::PushBack => output::stderr_line(&format!(
                "pushed back gate '{stage}' of run {run} as {by}; `baton resume {run}` runs '{stage}' again with your comment in its prompt"
            )),
        }
        Ok(exit_code::SUCCESS)
    })
}

fn edit(gate_ref: &GateRef, change: GateEdit, as_name: Option<&str>) -> u8 {
    block_on_exit(async {
        let by = decider(as_name).await;
        let (store, run_id) = run_ref::open_with_run(&gate_ref.run).await?;
        let edited = gate::edit(&store, &run_id, &gate_ref.stage, &change, &by)
            .await
            .map_err(|error| failure(&error))?;
        let (run, stage) = (&run_id, &gate_ref.stage);
        let format = gate_ref.format.format();
        let value = baton_engine::view::gates::edited_json(run, stage, &edited);
        output::json_or_text(format, &value, || numbered(&edited.items, ""));
        if format != Format::Json {
            output::stderr_line(&format!(
                "rewrote {} ({} items); a decision taken before this edit no longer counts: `baton gate approve {run} {stage}` approves this version",
                edited.path,
                edited.items.len()
            ));
        }
        Ok(exit_code::SUCCESS)
    })
}
