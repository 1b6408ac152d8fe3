//! `baton gate list|show|approve|reject|drop|edit|add`: a thin adapter over
//! `baton_engine::gate`.

use baton_engine::gate::{self, Decision, GateEdit, GateStatus, GateView};
use serde_json::{Value, json};

use super::errors::chain;
use super::run_ref;
use super::runtime::{block_on, open_store};
use crate::args::{Format, GateCommand, GateDecideArgs, GateRef};
use crate::{exit_code, output};

fn utc(ms: i64) -> String {
    baton_engine::workspace::utc(ms)
}

/// Runs a `baton gate` subcommand.
pub(crate) fn run(command: &GateCommand) -> u8 {
    match command {
        GateCommand::List(args) => list(args.run.as_deref(), args.format.format()),
        GateCommand::Show(args) => show(args),
        GateCommand::Approve(args) => decide(args, Decision::Approve),
        GateCommand::Reject(args) => decide(args, Decision::Reject),
        GateCommand::Drop(args) => edit(&args.gate, GateEdit::Drop(args.n)),
        GateCommand::Edit(args) => match args.assignment.split_once('=') {
            Some((field, value)) if !field.is_empty() => edit(
                &args.gate,
                GateEdit::Edit {
                    n: args.n,
                    field: field.to_owned(),
                    value: value.to_owned(),
                },
            ),
            _ => {
                output::stderr_line(&format!(
                    "error: expected FIELD=VALUE, got '{}'\nhint: for example `baton gate edit {} {} {} priority=high`",
                    args.assignment, args.gate.run, args.gate.stage, args.n
                ));
                exit_code::USAGE
            }
        },
        GateCommand::Add(args) => edit(&args.gate, GateEdit::Add(args.text.clone())),
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
        gate::Error::AlreadyDecided { .. } | gate::Error::Changed { .. } => exit_code::REFUSED,
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

fn status_json(status: &GateStatus) -> Value {
    baton_engine::view::gate_json(status)
}

fn list(run: Option<&str>, format: Format) -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        let run = match run {
            Some(reference) => match run_ref::resolve(&store, reference).await {
                Ok(run_id) => Some(run_id),
                Err(code) => return code,
            },
            None => None,
        };
        let gates = match gate::list(&store, run.as_deref()).await {
            Ok(gates) => gates,
            Err(error) => return failure(&error),
        };
        let text = match format {
            Format::Json => output::json(&gates.iter().map(status_json).collect::<Vec<_>>()),
            Format::Yaml => output::yaml(&gates.iter().map(status_json).collect::<Vec<_>>()),
            Format::Table => {
                if gates.is_empty() {
                    output::stderr_line("No gate is waiting or decided.");
                }
                let rows: Vec<Vec<String>> = gates
                    .iter()
                    .map(|status| {
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
                    .collect();
                output::table(
                    &[
                        "run_id",
                        "stage",
                        "status",
                        "decided_by",
                        "decided_at",
                        "comment",
                    ],
                    &rows,
                )
            }
        };
        output::stdout(&text);
        exit_code::SUCCESS
    })
}

fn view_json(view: &GateView) -> Value {
    let mut value = status_json(&view.status);
    value["outputs"] = view
        .outputs
        .iter()
        .map(|output| {
            json!({
                "path": output.path,
                "content": output.content,
                "list": output.list.as_ref().map(|(kind, items)| json!({"kind": kind.as_str(), "items": items})),
            })
        })
        .collect();
    value
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
            row.decision,
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
            (Some((gate::ListKind::Json, items)), _) => {
                for (number, item) in items.iter().enumerate() {
                    text.push_str(&format!("{}. {item}\n", number + 1));
                }
            }
            (Some((gate::ListKind::Markdown, items)), Some(content)) => {
                text.push_str(content);
                text.push_str("\nitems:\n");
                for (number, item) in items.iter().enumerate() {
                    text.push_str(&format!("  {}. {item}\n", number + 1));
                }
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
    text
}

fn show(args: &GateRef) -> u8 {
    block_on(async {
        let (store, run_id) = match run_ref::open_with_run(&args.run).await {
            Ok(found) => found,
            Err(code) => return code,
        };
        let view = match gate::show(&store, &run_id, &args.stage).await {
            Ok(view) => view,
            Err(error) => return failure(&error),
        };
        match args.format.format() {
            Format::Json => output::stdout(&output::json(&view_json(&view))),
            Format::Yaml => output::stdout(&output::yaml(&view_json(&view))),
            Format::Table => {
                output::stdout(&view_text(&view));
                let (run, stage) = (&run_id, &args.stage);
                output::stderr_line(&format!(
                    "decide: `baton gate approve {run} {stage}` or `baton gate reject {run} {stage} --comment …`\nedit: `baton gate drop|edit|add {run} {stage} …` (items numbered from 1)"
                ));
            }
        }
        exit_code::SUCCESS
    })
}

fn decide(args: &GateDecideArgs, decision: Decision) -> u8 {
    let gate_ref = &args.gate;
    block_on(async {
        let by = decider(args.as_name.as_deref()).await;
        let (store, run_id) = match run_ref::open_with_run(&gate_ref.run).await {
            Ok(found) => found,
            Err(code) => return code,
        };
        let decided = gate::decide(
            &store,
            &run_id,
            &gate_ref.stage,
            decision,
            &by,
            args.comment.clone(),
        )
        .await;
        let row = match decided {
            Ok(row) => row,
            Err(error) => return failure(&error),
        };
        let (run, stage) = (&run_id, &gate_ref.stage);
        if gate_ref.format.format() == Format::Json {
            output::stdout(&output::json(&baton_engine::view::decision_json(
                run, stage, &row,
            )));
        } else {
            output::stdout(&format!("{run} {stage} {}\n", row.decision));
        }
        // How the run goes on depends on who drives it.
        let external = store
            .run(run)
            .await
            .is_ok_and(|row| baton_engine::external::is_external(&row));
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
        }
        exit_code::SUCCESS
    })
}

fn edit(gate_ref: &GateRef, change: GateEdit) -> u8 {
    block_on(async {
        let (store, run_id) = match run_ref::open_with_run(&gate_ref.run).await {
            Ok(found) => found,
            Err(code) => return code,
        };
        let edited = match gate::edit(&store, &run_id, &gate_ref.stage, &change).await {
            Ok(edited) => edited,
            Err(error) => return failure(&error),
        };
        let (run, stage) = (&run_id, &gate_ref.stage);
        if gate_ref.format.format() == Format::Json {
            output::stdout(&output::json(&json!({
                "run_id": run,
                "stage": stage,
                "path": edited.path,
                "kind": edited.kind.as_str(),
                "items": edited.items,
                "sha256": edited.sha256,
            })));
        } else {
            let mut text = String::new();
            for (number, item) in edited.items.iter().enumerate() {
                text.push_str(&format!("{}. {item}\n", number + 1));
            }
            output::stdout(&text);
            output::stderr_line(&format!(
                "rewrote {} ({} items); a decision taken before this edit no longer counts: `baton gate approve {run} {stage}` approves this version",
                edited.path,
                edited.items.len()
            ));
        }
        exit_code::SUCCESS
    })
}
