//! Progress of a driven run (`run`, `resume`, `rerun`) on stderr.
//!
//! The engine reports through a `&(dyn Fn(Progress) + Sync)` callback;
//! [`Reporter::report`] is that callback. On a terminal it keeps a live
//! display: one line per running stage (name, attempt, elapsed time) above a
//! summary line (counts and total time), and a permanent line for every
//! stage that ends. Anywhere else — stderr redirected, `TERM=dumb`,
//! `--format json` — it prints the plain timestamped lines scripts and tests
//! read, unchanged.
//!
//! A sub-workflow stage's child run shows its own stages under the stage,
//! indented two spaces a level and named by the path of stages that leads
//! to them (`mid/prepare`, `mid/leaf/write`); only the run's own stages
//! count in the summary line.
//!
//! Colour follows console's detection for stderr: off under `NO_COLOR`, when
//! `CLICOLOR=0`, or when stderr is not a terminal; `CLICOLOR_FORCE` forces it.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use baton_engine::Progress;
use console::Style;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::args::Format;
use crate::output;

/// How often the spinners and elapsed times are redrawn.
const TICK: Duration = Duration::from_millis(100);

/// Stage names are padded to at least this width so the columns line up.
const MIN_NAME_WIDTH: usize = 12;

/// Names longer than this are not padded further: they overflow instead.
const MAX_NAME_WIDTH: usize = 40;

/// Shows a run's progress; [`Reporter::report`] is the engine's callback.
pub(crate) enum Reporter {
    /// Timestamped lines, one per event.
    Plain(Instant),
    /// The live display.
    Live(Box<Live>),
}

impl Reporter {
    /// The live display when stderr is a capable terminal and the output is
    /// not JSON; plain lines otherwise.
    pub(crate) fn new(format: Format) -> Reporter {
        let dumb = crate::settings::terminal_is_dumb();
        if format != Format::Json && !dumb && std::io::stderr().is_terminal() {
            Reporter::Live(Box::new(Live::new(ProgressDrawTarget::stderr())))
        } else {
            Reporter::Plain(Instant::now())
        }
    }

    /// Whether this is the live display.
    pub(crate) fn is_live(&self) -> bool {
        matches!(self, Reporter::Live(_))
    }

    /// Sizes the name column for these stages up front, so that every line
    /// of the run lines up.
    pub(crate) fn fit_names<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        if let Reporter::Live(live) = self {
            let mut state = live.state();
            for name in names {
                state.fit(name);
            }
        }
    }

    /// Shows one event, its texts on one printable line each.
    pub(crate) fn report(&self, event: Progress) {
        let (depth, event) = flattened(printable(event));
        match self {
            Reporter::Plain(start) => {
                output::stderr_line(&plain_line(start.elapsed(), depth, event));
            }
            Reporter::Live(live) => live.report(depth, event),
        }
    }

    /// Ends the live display (the summary line stays) so that what is
    /// printed next lands below it. Idempotent; dropping does it too.
    pub(crate) fn finish(&self) {
        if let Reporter::Live(live) = self {
            live.finish();
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The most characters of a stage's name (with its fan-out key) and of an
/// error or note that a progress line shows.
const NAME_CHARS: usize = 120;
const TEXT_CHARS: usize = 2_000;

/// The event with its stage name, error and note made printable on one
/// line, of a readable length: they come from the workflow, from items and
/// from agents.
fn printable(event: Progress) -> Progress {
    let name = |stage: &str| output::clipped(&output::one_line(stage), NAME_CHARS);
    let text = |text: &str| output::clipped(&output::one_line(text), TEXT_CHARS);
    match event {
        Progress::Started { stage, attempt } => Progress::Started {
            stage: name(&stage),
            attempt,
        },
        Progress::Finished {
            stage,
            status,
            duration_ms,
            error,
        } => Progress::Finished {
            stage: name(&stage),
            status,
            duration_ms,
            error: error.as_deref().map(text),
        },
        Progress::Note(note) => Progress::Note(text(&note)),
        // Shown as a note: what a person does about it is in the notice.
        Progress::AwaitingGate { stage } => {
            Progress::Note(format!("waiting at gate '{}' for a decision", name(&stage)))
        }
        Progress::SubRun { stage, event } => Progress::SubRun {
            stage: name(&stage),
            event: Box::new(printable(*event)),
        },
    }
}

/// A sub-run's event as how deep its run is (0 for the run's own) and the
/// event itself, its stage named by the path of stages down to it and its
/// note led by that path.
fn flattened(event: Progress) -> (usize, Progress) {
    let Progress::SubRun {
        stage: parent,
        event,
    } = event
    else {
        return (0, event);
    };
    let (depth, event) = flattened(*event);
    let event = match event {
        Progress::Started { stage, attempt } => Progress::Started {
            stage: format!("{parent}/{stage}"),
            attempt,
        },
        Progress::Finished {
            stage,
            status,
            duration_ms,
            error,
        } => Progress::Finished {
            stage: format!("{parent}/{stage}"),
            status,
            duration_ms,
            error,
        },
        Progress::Note(note) if depth == 0 => Progress::Note(format!("{parent}: {note}")),
        Progress::Note(note) => Progress::Note(format!("{parent}/{note}")),
        // `printable` turned gates into notes; `flattened` above left no sub-run.
        other @ (Progress::AwaitingGate { .. } | Progress::SubRun { .. }) => other,
    };
    (depth + 1, event)
}

/// The indentation of a sub-run's lines, `depth` levels down.
fn indent(depth: usize) -> String {
    "  ".repeat(depth)
}

/// The plain line of an event `depth` sub-runs down, `elapsed` after the
/// drive started. Scripts and tests read these: keep them byte for byte.
/// Written into one string: a run prints one or two a stage.
fn plain_line(elapsed: Duration, depth: usize, event: Progress) -> String {
    use std::fmt::Write as _;
    let mut line = String::with_capacity(80);
    let secs = elapsed.as_secs_f64();
    let _ = write!(line, "[{secs:7.2}s] {:indent$}", "", indent = 2 * depth);
    let _ = match event {
        Progress::Started { stage, attempt } if attempt > 1 => {
            write!(line, "start   {stage} (attempt {attempt})")
        }
        Progress::Started { stage, .. } => write!(line, "start   {stage}"),
        Progress::Finished {
            stage,
            status,
            duration_ms,
            error,
        } => {
            let mark = match status.as_str() {
                "success" => "ok     ",
                "skipped" => "skipped",
                _ => "FAILED ",
            };
            let _ = write!(line, "{mark} {stage} ({duration_ms} ms)");
            match error {
                Some(error) => write!(line, " — {error}"),
                None => Ok(()),
            }
        }
        Progress::Note(note) => write!(line, "note    {note}"),
        Progress::AwaitingGate { stage } => {
            write!(line, "note    waiting at gate '{stage}' for a decision")
        }
        sub @ Progress::SubRun { .. } => {
            let (below, event) = flattened(sub);
            return plain_line(elapsed, depth + below, event);
        }
    };
    line
}

/// A duration for people: `850 ms`, `12.3s`, `4m05s`, `1h02m`.
pub(crate) fn human(duration: Duration) -> String {
    let ms = duration.as_millis();
    let secs = duration.as_secs();
    if ms < 1000 {
        format!("{ms} ms")
    } else if secs < 60 {
        format!("{:.1}s", duration.as_secs_f64())
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    }
}

/// [`human`] of a recorded number of milliseconds.
pub(crate) fn human_ms(ms: i64) -> String {
    human(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// The `{elapsed_human}` template key: a bar's elapsed time, in tenths.
fn elapsed_key(state: &ProgressState, out: &mut dyn std::fmt::Write) {
    let elapsed = state.elapsed();
    let text = if elapsed.as_secs() < 60 {
        format!("{:.1}s", elapsed.as_secs_f64())
    } else {
        human(elapsed)
    };
    let _ = out.write_str(&text);
}

/// Styles of the permanent lines; each checks stderr's colour support.
struct Styles {
    ok: Style,
    failed: Style,
    error: Style,
    skipped: Style,
    note: Style,
    dim: Style,
}

impl Styles {
    fn new() -> Styles {
        let style = || Style::new().for_stderr();
        Styles {
            ok: style().green(),
            failed: style().red().bold(),
            error: style().red(),
            skipped: style().yellow(),
            note: style().cyan(),
            dim: style().dim(),
        }
    }
}

/// The live display: stage lines above a summary line.
pub(crate) struct Live {
    multi: MultiProgress,
    summary: ProgressBar,
    stage_style: ProgressStyle,
    styles: Styles,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The running stages, by name (a sub-run's by its path).
    running: BTreeMap<String, Running>,
    /// The run's own stages that ended, by how.
    done: usize,
    failed: usize,
    skipped: usize,
    /// The width stage names are padded to.
    name_width: usize,
    /// Whether any event arrived.
    reported: bool,
    finished: bool,
}

impl State {
    fn counts(&self) -> String {
        format!(
            "{} done · {} failed · {} skipped · {} running",
            self.done,
            self.failed,
            self.skipped,
            self.running
                .values()
                .filter(|running| running.depth == 0)
                .count()
        )
    }

    /// Widens the name column for `stage`; the running lines follow.
    fn fit(&mut self, stage: &str) {
        let width = console::measure_text_width(stage).clamp(MIN_NAME_WIDTH, MAX_NAME_WIDTH);
        if width > self.name_width {
            self.name_width = width;
            for (name, running) in &self.running {
                running.bar.set_prefix(running.prefix(name, width));
            }
        }
    }
}

/// A running stage's line, `depth` sub-runs down.
struct Running {
    depth: usize,
    bar: ProgressBar,
}

impl Running {
    fn prefix(&self, name: &str, width: usize) -> String {
        format!("{}{}", indent(self.depth), pad(name, width))
    }
}

fn pad(text: &str, width: usize) -> String {
    console::pad_str(text, width, console::Alignment::Left, None).into_owned()
}

impl Live {
    fn new(target: ProgressDrawTarget) -> Live {
        let multi = MultiProgress::with_draw_target(target);
        let summary_style = ProgressStyle::with_template("{msg} · {elapsed_human}")
            .expect("a valid template")
            .with_key("elapsed_human", elapsed_key);
        let summary = multi.add(ProgressBar::new_spinner().with_style(summary_style));
        let state = State {
            name_width: MIN_NAME_WIDTH,
            ..State::default()
        };
        summary.set_message(state.counts());
        summary.enable_steady_tick(TICK);
        let stage_style =
            ProgressStyle::with_template("{spinner:.cyan} {prefix:.bold}  {msg}  {elapsed_human}")
                .expect("a valid template")
                .with_key("elapsed_human", elapsed_key);
        Live {
            multi,
            summary,
            stage_style,
            styles: Styles::new(),
            state: Mutex::new(state),
        }
    }

    /// The display's state; a reporter that panicked leaves it usable.
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn report(&self, depth: usize, event: Progress) {
        let mut state = self.state();
        if state.finished {
            return;
        }
        state.reported = true;
        match event {
            Progress::Started { stage, attempt } => {
                state.fit(&stage);
                let bar = ProgressBar::new_spinner()
                    .with_style(self.stage_style.clone())
                    .with_message(format!("attempt {attempt}"));
                let running = Running { depth, bar };
                running
                    .bar
                    .set_prefix(running.prefix(&stage, state.name_width));
                self.multi.insert_before(&self.summary, running.bar.clone());
                running.bar.enable_steady_tick(TICK);
                if let Some(previous) = state.running.insert(stage, running) {
                    self.remove(&previous.bar);
                }
            }
            Progress::Finished {
                stage,
                status,
                duration_ms,
                error,
            } => {
                state.fit(&stage);
                let attempt = state.running.remove(&stage).map(|running| {
                    let attempt = running.bar.message();
                    self.remove(&running.bar);
                    attempt
                });
                let (mark, style, detail, count) = match status.as_str() {
                    "success" => ("ok", &self.styles.ok, &self.styles.dim, &mut state.done),
                    "skipped" => (
                        "skipped",
                        &self.styles.skipped,
                        &self.styles.dim,
                        &mut state.skipped,
                    ),
                    _ => (
                        "FAILED",
                        &self.styles.failed,
                        &self.styles.error,
                        &mut state.failed,
                    ),
                };
                if depth == 0 {
                    *count += 1;
                }
                let mut line = format!(
                    "{}{} {}  {}",
                    indent(depth),
                    style.apply_to(format!("{mark:<7}")),
                    pad(&stage, state.name_width),
                    self.styles.dim.apply_to(human_ms(duration_ms)),
                );
                if let Some(attempt) = attempt.filter(|attempt| attempt != "attempt 1") {
                    line.push_str(&format!("  {}", self.styles.dim.apply_to(attempt)));
                }
                if let Some(error) = error {
                    line.push_str(&format!("  {}", detail.apply_to(error)));
                }
                let _ = self.multi.println(line);
            }
            Progress::Note(note) => self.note(depth, &note),
            Progress::AwaitingGate { stage } => {
                self.note(depth, &format!("waiting at gate '{stage}' for a decision"));
            }
            sub @ Progress::SubRun { .. } => {
                drop(state);
                let (below, event) = flattened(sub);
                self.report(depth + below, event);
                return;
            }
        }
        self.summary.set_message(state.counts());
    }

    fn note(&self, depth: usize, note: &str) {
        let _ = self.multi.println(format!(
            "{}{} {note}",
            indent(depth),
            self.styles.note.apply_to(format!("{:<7}", "note"))
        ));
    }

    fn remove(&self, bar: &ProgressBar) {
        bar.finish_and_clear();
        self.multi.remove(bar);
    }

    fn finish(&self) {
        let mut state = self.state();
        if state.finished {
            return;
        }
        state.finished = true;
        for running in std::mem::take(&mut state.running).into_values() {
            self.remove(&running.bar);
        }
        self.summary.set_message(state.counts());
        if state.reported {
            // The summary stays as the last line of the display.
            self.summary.finish();
        } else {
            // Nothing ran (a refused or finished run): no summary of nothing.
            self.summary.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_keep_their_format() {
        let at = Duration::from_millis(1234);
        assert_eq!(
            plain_line(
                at,
                0,
                Progress::Started {
                    stage: "a".into(),
                    attempt: 1
                }
            ),
            "[   1.23s] start   a"
        );
        assert_eq!(
            plain_line(
                at,
                0,
                Progress::Started {
                    stage: "a".into(),
                    attempt: 2
                }
            ),
            "[   1.23s] start   a (attempt 2)"
        );
        assert_eq!(
            plain_line(
                at,
                0,
                Progress::Finished {
                    stage: "a".into(),
                    status: "failed".into(),
                    duration_ms: 12,
                    error: Some("exited with code 3".into()),
                }
            ),
            "[   1.23s] FAILED  a (12 ms) — exited with code 3"
        );
        assert_eq!(
            plain_line(
                at,
                0,
                Progress::Finished {
                    stage: "b".into(),
                    status: "success".into(),
                    duration_ms: 5,
                    error: None,
                }
            ),
            "[   1.23s] ok      b (5 ms)"
        );
        assert_eq!(
            plain_line(
                at,
                0,
                Progress::Finished {
                    stage: "c".into(),
                    status: "skipped".into(),
                    duration_ms: 0,
                    error: None,
                }
            ),
            "[   1.23s] skipped c (0 ms)"
        );
        assert_eq!(
            plain_line(at, 0, Progress::Note("hello".into())),
            "[   1.23s] note    hello"
        );
    }

    /// `top` runs `mid`, whose stage `leaf` runs a child in turn.
    fn nested(stage: &str, event: Progress) -> Progress {
        Progress::SubRun {
            stage: "mid".into(),
            event: Box::new(Progress::SubRun {
                stage: stage.into(),
                event: Box::new(event),
            }),
        }
    }

    #[test]
    fn sub_run_lines_are_indented_and_named_by_their_path() {
        let at = Duration::from_millis(1234);
        let line = |event| {
            let (depth, event) = flattened(printable(event));
            plain_line(at, depth, event)
        };
        assert_eq!(
            line(Progress::SubRun {
                stage: "mid".into(),
                event: Box::new(Progress::Started {
                    stage: "prepare".into(),
                    attempt: 2
                }),
            }),
            "[   1.23s]   start   mid/prepare (attempt 2)"
        );
        assert_eq!(
            line(nested(
                "leaf",
                Progress::Finished {
                    stage: "write".into(),
                    status: "failed".into(),
                    duration_ms: 7,
                    error: Some("exited with code 1".into()),
                }
            )),
            "[   1.23s]     FAILED  mid/leaf/write (7 ms) — exited with code 1"
        );
        assert_eq!(
            line(nested("leaf", Progress::Note("hello".into()))),
            "[   1.23s]     note    mid/leaf: hello"
        );
        // An unflattened event reads the same.
        assert_eq!(
            plain_line(at, 0, nested("leaf", Progress::Note("hello".into()))),
            "[   1.23s]     note    mid/leaf: hello"
        );
    }

    #[test]
    fn the_live_display_counts_only_the_runs_own_stages() {
        let live = Live::new(ProgressDrawTarget::hidden());
        let report = |event| {
            let (depth, event) = flattened(event);
            live.report(depth, event);
        };
        report(Progress::Started {
            stage: "mid".into(),
            attempt: 1,
        });
        report(nested(
            "leaf",
            Progress::Started {
                stage: "write".into(),
                attempt: 1,
            },
        ));
        {
            let state = live.state.lock().expect("lock");
            assert_eq!(
                state.running["mid/leaf/write"].bar.prefix(),
                format!("    {:<14}", "mid/leaf/write")
            );
        }
        assert_eq!(
            live.summary.message(),
            "0 done · 0 failed · 0 skipped · 1 running"
        );
        report(nested(
            "leaf",
            Progress::Finished {
                stage: "write".into(),
                status: "success".into(),
                duration_ms: 3,
                error: None,
            },
        ));
        report(Progress::Finished {
            stage: "mid".into(),
            status: "success".into(),
            duration_ms: 9,
            error: None,
        });
        assert_eq!(
            live.summary.message(),
            "1 done · 0 failed · 0 skipped · 0 running"
        );
        live.finish();
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human(Duration::from_millis(850)), "850 ms");
        assert_eq!(human(Duration::from_millis(12_345)), "12.3s");
        assert_eq!(human(Duration::from_secs(245)), "4m05s");
        assert_eq!(human(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn a_drive_that_reports_nothing_leaves_no_summary() {
        let live = Live::new(ProgressDrawTarget::hidden());
        live.finish();
        assert!(live.summary.is_finished());
        assert!(!live.state.lock().expect("lock").reported);
    }

    #[test]
    fn the_live_display_counts_and_ends_cleanly() {
        let live = Live::new(ProgressDrawTarget::hidden());
        live.report(
            0,
            Progress::Started {
                stage: "a".into(),
                attempt: 1,
            },
        );
        live.report(
            0,
            Progress::Started {
                stage: "a-much-longer-stage-name".into(),
                attempt: 2,
            },
        );
        {
            let state = live.state.lock().expect("lock");
            assert_eq!(state.running.len(), 2);
            assert_eq!(state.name_width, "a-much-longer-stage-name".len());
            assert_eq!(
                state.running["a"].bar.prefix(),
                format!("{:<24}", "a"),
                "running lines follow a wider name column"
            );
        }
        live.report(
            0,
            Progress::Finished {
                stage: "a".into(),
                status: "success".into(),
                duration_ms: 10,
                error: None,
            },
        );
        live.report(
            0,
            Progress::Finished {
                stage: "never-started".into(),
                status: "skipped".into(),
                duration_ms: 0,
                error: None,
            },
        );
        assert_eq!(
            live.summary.message(),
            "1 done · 0 failed · 1 skipped · 1 running"
        );
        live.finish();
        assert_eq!(
            live.summary.message(),
            "1 done · 0 failed · 1 skipped · 0 running"
        );
        assert!(live.summary.is_finished());
        // Events after the end change nothing; finishing twice is harmless.
        live.report(
            0,
            Progress::Finished {
                stage: "a-much-longer-stage-name".into(),
                status: "failed".into(),
                duration_ms: 10,
                error: Some("boom".into()),
            },
        );
        live.finish();
        assert_eq!(
            live.summary.message(),
            "1 done · 0 failed · 1 skipped · 0 running"
        );
    }
}
