//! `baton status RUN --watch`: follows a run until it stops — it ends, waits
//! at a gate, or its driver is gone. On a terminal the status table is
//! redrawn in place; otherwise (a pipe, a log, `--format json`) each change
//! of a stage is one line, so the output reads well after the fact.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use baton_store::{StageRow, Store};
use serde_json::json;

use super::run_ref;
use super::runtime::block_on_exit;
use super::summary::Summary;
use crate::args::{Format, StatusArgs};
use crate::{exit_code, output};

/// How a watched run stopped.
enum Stopped {
    /// It ended: `success`, `failed`, `rejected` or `cancelled`.
    Ended(String),
    /// It waits at a human gate.
    AtGate,
    /// Nobody drives it any more.
    DriverGone,
}

/// `baton status RUN --watch`.
pub(crate) fn watch(args: &StatusArgs) -> u8 {
    let format = args.run.format.format();
    let redraw = format == Format::Table && std::io::stdout().is_terminal();
    block_on_exit(async {
        let (store, run_id) = run_ref::open_with_run(&args.run.run).await?;
        let mut lines = Lines::default();
        let stopped = loop {
            let stopped = stopped(&store, &run_id).await?;
            if redraw {
                let text = super::status_report::render(&store, &run_id, format).await?;
                draw(&text, &run_id, args.interval);
            } else if let Ok(stages) = store.stages(&run_id).await {
                lines.print_changes(&stages, format);
            }
            if let Some(stopped) = stopped {
                break stopped;
            }
            tokio::time::sleep(args.interval).await;
        };
        let summary = Summary::read(&store, &run_id).await;
        Ok(conclude(&run_id, &stopped, summary.as_ref(), format))
    })
}

/// Whether the run has stopped, and how.
async fn stopped(store: &Store, run_id: &str) -> Result<Option<Stopped>, u8> {
    let run = super::or_exit(store.run(run_id).await, exit_code::STORE_UNAVAILABLE)?;
    Ok(match run.status.as_str() {
        "success" | "failed" | "rejected" | "cancelled" => Some(Stopped::Ended(run.status)),
        "awaiting_human" => Some(Stopped::AtGate),
        _ if baton_engine::driver_gone(store, run_id)
            .await
            .unwrap_or(false) =>
        {
            Some(Stopped::DriverGone)
        }
        _ => None,
    })
}

/// Redraws the whole screen: the status table and how it is watched.
fn draw(text: &str, run_id: &str, interval: Duration) {
    let mut out = std::io::stdout().lock();
    // Home and clear, then the table (its control characters already
    // stripped by the renderer's cells).
    let _ = write!(
        out,
        "\u{1b}[H\u{1b}[2J{}\nwatching run {run_id} every {} ms; Ctrl-C stops watching (not the run)\n",
        output::printable(text),
        interval.as_millis()
    );
    let _ = out.flush();
}

/// The last status printed for each stage, off a terminal.
#[derive(Default)]
struct Lines {
    seen: HashMap<i64, String>,
}

impl Lines {
    /// One line per stage whose status changed since the last look (every
    /// stage, the first time).
    fn print_changes(&mut self, stages: &[StageRow], format: Format) {
        for stage in stages {
            if self.seen.get(&stage.index) == Some(&stage.status) {
                continue;
            }
            self.seen.insert(stage.index, stage.status.clone());
            let detail = stage.error.as_ref().or(stage.note.as_ref());
            if format == Format::Table {
                output::stdout(&format!(
                    "{} {:<14} {}{}\n",
                    baton_engine::workspace::utc(baton_engine::clock::now_ms()),
                    stage.status,
                    stage.name,
                    detail.map(|text| format!(" — {text}")).unwrap_or_default()
                ));
            } else {
                output::stdout(&format!(
                    "{}\n",
                    json!({"stage": stage.name, "status": stage.status, "detail": detail})
                ));
            }
        }
    }
}

/// Says how the run stopped and what to do next; the exit code follows.
fn conclude(run_id: &str, stopped: &Stopped, summary: Option<&Summary>, format: Format) -> u8 {
    let (status, code, next) = match stopped {
        Stopped::Ended(status) if status == "success" => (
            status.as_str(),
            exit_code::SUCCESS,
            format!("`baton status {run_id}` shows every stage"),
        ),
        Stopped::Ended(status) => (
            status.as_str(),
            exit_code::RUN_FAILED,
            format!("`baton logs {run_id}` shows the output"),
        ),
        Stopped::AtGate => (
            "awaiting_human",
            exit_code::SUCCESS,
            format!(
                "`baton gate list {run_id}` shows the gate to decide; then `baton resume {run_id}`"
            ),
        ),
        Stopped::DriverGone => (
            "driver gone",
            exit_code::RUN_FAILED,
            format!("nothing drives the run any more: `baton resume {run_id}` continues it"),
        ),
    };
    if format == Format::Table {
        let counts = summary.map(|summary| format!(": {}", summary.line()));
        output::stderr_line(&format!(
            "run {run_id} {status}{}\n{next}",
            counts.unwrap_or_default()
        ));
    } else {
        output::stdout(&format!(
            "{}\n",
            json!({"run_id": run_id, "status": status, "summary": summary.map(Summary::json)})
        ));
    }
    code
}
