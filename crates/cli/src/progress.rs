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
        let dumb = std::env::var_os("TERM").is_some_and(|term| term == "dumb");
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
            let mut state = live
                .state
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            for name in names {
                state.fit(name);
            }
        }
    }

    /// Shows one event, its texts on one printable line each.
    pub(crate) fn report(&self, event: Progress) {
        let event = printable(event);
        match self {
            Reporter::Plain(start) => output::stderr_line(&plain_line(start.elapsed(), event)),
            Reporter::Live(live) => live.report(event),
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
    }
}

/// The plain line of an event, `elapsed` after the drive started. Scripts
/// and tests read these: keep them byte for byte.
fn plain_line(elapsed: Duration, event: Progress) -> String {
    let elapsed = elapsed.as_secs_f64();
    match event {
        Progress::Started { stage, attempt } if attempt > 1 => {
            format!("[{elapsed:7.2}s] start   {stage} (attempt {attempt})")
        }
        Progress::Started { stage, .. } => format!("[{elapsed:7.2}s] start   {stage}"),
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
            let detail = error.map(|error| format!(" — {error}")).unwrap_or_default();
            format!("[{elapsed:7.2}s] {mark} {stage} ({duration_ms} ms){detail}")
        }
        Progress::Note(note) => format!("[{elapsed:7.2}s] note    {note}"),
    }
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
    /// The running stages, by name.
    running: BTreeMap<String, ProgressBar>,
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
            self.running.len()
        )
    }

    /// Widens the name column for `stage`; the running lines follow.
    fn fit(&mut self, stage: &str) {
        let width = console::measure_text_width(stage).clamp(MIN_NAME_WIDTH, MAX_NAME_WIDTH);
        if width > self.name_width {
            self.name_width = width;
            for (name, bar) in &self.running {
                bar.set_prefix(pad(name, width));
            }
        }
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

    fn report(&self, event: Progress) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.finished {
            return;
        }
        state.reported = true;
        match event {
            Progress::Started { stage, attempt } => {
                state.fit(&stage);
                let bar = self.multi.insert_before(
                    &self.summary,
                    ProgressBar::new_spinner()
                        .with_style(self.stage_style.clone())
                        .with_prefix(pad(&stage, state.name_width))
                        .with_message(format!("attempt {attempt}")),
                );
                bar.enable_steady_tick(TICK);
                if let Some(previous) = state.running.insert(stage, bar) {
                    self.remove(&previous);
                }
            }
            Progress::Finished {
                stage,
                status,
                duration_ms,
                error,
            } => {
                state.fit(&stage);
                let attempt = state.running.remove(&stage).map(|bar| {
                    let attempt = bar.message();
                    self.remove(&bar);
                    attempt
                });
                let (mark, style, detail) = match status.as_str() {
                    "success" => {
                        state.done += 1;
                        ("ok", &self.styles.ok, &self.styles.dim)
                    }
                    "skipped" => {
                        state.skipped += 1;
                        ("skipped", &self.styles.skipped, &self.styles.dim)
                    }
                    _ => {
                        state.failed += 1;
                        ("FAILED", &self.styles.failed, &self.styles.error)
                    }
                };
                let mut line = format!(
                    "{} {}  {}",
                    style.apply_to(format!("{mark:<7}")),
                    pad(&stage, state.name_width),
                    self.styles.dim.apply_to(human(Duration::from_millis(
                        u64::try_from(duration_ms).unwrap_or(0)
                    ))),
                );
                if let Some(attempt) = attempt.filter(|attempt| attempt != "attempt 1") {
                    line.push_str(&format!("  {}", self.styles.dim.apply_to(attempt)));
                }
                if let Some(error) = error {
                    line.push_str(&format!("  {}", detail.apply_to(error)));
                }
                let _ = self.multi.println(line);
            }
            Progress::Note(note) => {
                let _ = self.multi.println(format!(
                    "{} {note}",
                    self.styles.note.apply_to(format!("{:<7}", "note"))
                ));
            }
        }
        self.summary.set_message(state.counts());
    }

    fn remove(&self, bar: &ProgressBar) {
        bar.finish_and_clear();
        self.multi.remove(bar);
    }

    fn finish(&self) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.finished {
            return;
        }
        state.finished = true;
        for bar in std::mem::take(&mut state.running).into_values() {
            self.remove(&bar);
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
            plain_line(at, Progress::Note("hello".into())),
            "[   1.23s] note    hello"
        );
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
        live.report(Progress::Started {
            stage: "a".into(),
            attempt: 1,
        });
        live.report(Progress::Started {
            stage: "a-much-longer-stage-name".into(),
            attempt: 2,
        });
        {
            let state = live.state.lock().expect("lock");
            assert_eq!(state.running.len(), 2);
            assert_eq!(state.name_width, "a-much-longer-stage-name".len());
            assert_eq!(
                state.running["a"].prefix(),
                format!("{:<24}", "a"),
                "running lines follow a wider name column"
            );
        }
        live.report(Progress::Finished {
            stage: "a".into(),
            status: "success".into(),
            duration_ms: 10,
            error: None,
        });
        live.report(Progress::Finished {
            stage: "never-started".into(),
            status: "skipped".into(),
            duration_ms: 0,
            error: None,
        });
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
        live.report(Progress::Finished {
            stage: "a-much-longer-stage-name".into(),
            status: "failed".into(),
            duration_ms: 10,
            error: Some("boom".into()),
        });
        live.finish();
        assert_eq!(
            live.summary.message(),
            "1 done · 0 failed · 1 skipped · 0 running"
        );
    }
}
