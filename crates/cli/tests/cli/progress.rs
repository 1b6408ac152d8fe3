//! Progress of `baton run` / `resume`: plain timestamped lines when stderr
//! is not a terminal (or with `--format json`), and the live display on a
//! terminal — a pseudo-terminal made by util-linux `script`.

use std::process::Command;

use crate::project::{HEADER, Project, run_id, stage};

/// Required `b` fails the first time and succeeds when retried.
fn flaky_chain() -> String {
    format!(
        "{HEADER}{}{}{}",
        stage("a", "true", ""),
        stage(
            "b",
            "test -f \"$BATON_PROJECT_DIR/flag\" || { touch \"$BATON_PROJECT_DIR/flag\"; exit 3; }",
            "    depends_on: [a]\n"
        ),
        stage("c", "true", "    depends_on: [b]\n"),
    )
}

/// A progress line with its timestamp and durations replaced by `T` and
/// `N`, after checking their format: `[   1.23s] ok      a (12 ms)`.
fn normalise(line: &str) -> String {
    let Some(rest) = line.strip_prefix('[') else {
        return summary_duration(line);
    };
    let (stamp, rest) = rest.split_once("s] ").expect("a timestamp");
    assert_eq!(stamp.len(), 7, "timestamps are 7 wide: {line:?}");
    let seconds: f64 = stamp.trim().parse().expect("seconds");
    assert!((0.0..60.0).contains(&seconds), "{line:?}");
    let mut text = format!("[T] {rest}");
    if let Some(open) = text.find(" (")
        && let Some(close) = text[open..].find(" ms)")
    {
        let digits = &text[open + 2..open + close];
        if digits.chars().all(|c| c.is_ascii_digit()) && !digits.is_empty() {
            text.replace_range(open + 2..open + close, "N");
        }
    }
    text
}

/// The end-of-run summary with its duration replaced by `D`:
/// `run ID: 1 succeeded in 1.2s; outputs in …`.
fn summary_duration(line: &str) -> String {
    let (Some(start), Some(end)) = (line.find(" in "), line.find("; outputs in ")) else {
        return line.to_owned();
    };
    if !line.starts_with("run ") || start > end {
        return line.to_owned();
    }
    format!("{} in D{}", &line[..start], &line[end..])
}

#[test]
fn off_a_terminal_progress_is_the_plain_timestamped_lines() {
    let project = Project::new();
    project.write("wf.yaml", &flaky_chain());
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let id = run_id(&run);
    let workspace = project.path().join(".baton/runs").join(&id);
    let lines: Vec<String> = run.stderr.lines().map(normalise).collect();
    assert_eq!(
        lines,
        vec![
            format!("run {id} — workspace {}", workspace.display()),
            "[T] start   a".to_owned(),
            "[T] ok      a (N ms)".to_owned(),
            "[T] start   b".to_owned(),
            "[T] FAILED  b (N ms) — exited with code 3".to_owned(),
            format!("run {id}: 1 succeeded, 1 failed, 1 pending in D; outputs in {}", workspace.display()),
            "Workflow did not complete successfully: status=failed (required stage 'b' failed: exited with code 3)".to_owned(),
            format!("hint: `baton logs {id}` shows the output; `baton resume {id}` runs the failed stages again"),
        ],
        "{}",
        run.stderr
    );

    // Plain format too: only the JSON result differs, on stdout.
    let resume = project.baton(&["resume", &id]);
    assert_eq!(resume.code, 0, "{}", resume.stderr);
    assert_eq!(resume.stdout, format!("{id} success\n"));
    let lines: Vec<String> = resume.stderr.lines().map(normalise).collect();
    assert_eq!(
        lines,
        vec![
            "[T] start   b (attempt 2)".to_owned(),
            "[T] ok      b (N ms)".to_owned(),
            "[T] start   c".to_owned(),
            "[T] ok      c (N ms)".to_owned(),
            format!(
                "run {id} succeeded: 3 succeeded in D; outputs in {}",
                workspace.display()
            ),
            format!("`baton status {id}` shows every stage"),
        ],
        "{}",
        resume.stderr
    );
    assert!(!resume.stderr.contains('\u{1b}'), "no escape codes");
}

/// A stage with output checks runs as units; its main unit is the stage's
/// own work and gets no lines of its own.
#[test]
fn a_checked_stage_is_one_start_and_one_end() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}",
            stage(
                "a",
                "echo '{}' > outputs/a.json",
                "    writes_to: [a.json]\n    validates_output: [{path: outputs/a.json, checks: [is_json]}]\n"
            )
        ),
    );
    let run = project.baton(&["run", "wf.yaml", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run_id(&run);
    let workspace = project
        .path()
        .join(".baton/runs")
        .join(&id)
        .display()
        .to_string();
    let lines: Vec<String> = run.stderr.lines().map(normalise).collect();
    assert_eq!(
        lines,
        vec![
            format!(
                "run {id} — workspace {}",
                project.path().join(".baton/runs").join(&id).display()
            ),
            "[T] start   a".to_owned(),
            "[T] ok      a (N ms)".to_owned(),
            format!("run {id} succeeded: 1 succeeded in D; outputs in {workspace}"),
            format!("`baton status {id}` shows every stage"),
        ],
        "{}",
        run.stderr
    );
}

/// Runs `baton ARGS` in `project` on a `COLUMNS`×40 pseudo-terminal (stdout and
/// stderr both) and returns its exit code and everything it wrote there.
fn on_a_terminal(project: &Project, args: &[&str], colour: bool) -> (i32, String) {
    let mut line = format!(
        "stty cols {COLUMNS} rows 40 2>/dev/null; exec '{}'",
        env!("CARGO_BIN_EXE_baton")
    );
    for arg in args {
        assert!(!arg.contains('\''), "{arg}");
        line.push_str(&format!(" '{arg}'"));
    }
    #[expect(
        clippy::disallowed_methods,
        reason = "script(1) gives baton a pseudo-terminal"
    )]
    let mut command = Command::new("script");
    command
        .args(["-qec", &line, "/dev/null"])
        .current_dir(project.path())
        .env("TERM", "xterm-256color")
        .env("SHELL", "/bin/sh")
        .env_remove("BATON_DATABASE_URL")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    if colour {
        command.env_remove("NO_COLOR");
    } else {
        command.env("NO_COLOR", "1");
    }
    let output = command.output().unwrap_or_else(|error| {
        panic!("script(1) from util-linux is needed to test the terminal display: {error}")
    });
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code().unwrap_or(-1), text)
}

/// Select Graphic Rendition (colour) sequences: `ESC [ digits/; m`.
fn colour_codes(text: &str) -> usize {
    text.match_indices("\u{1b}[")
        .filter(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == ';'))
                .unwrap_or(rest.len());
            rest[end..].starts_with('m')
        })
        .count()
}

/// Columns of the pseudo-terminal.
const COLUMNS: usize = 120;

/// What a terminal shows, line by line (trimmed, blank lines dropped): the
/// text without escape sequences, split at line feeds and carriage returns
/// (the display redraws lines in place) and every `COLUMNS` characters
/// (the display fills each line to the terminal's width instead of ending
/// it).
fn screen_lines(text: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split(['\n', '\r'])
        .flat_map(|segment| {
            let chars: Vec<char> = segment.chars().collect();
            chars
                .chunks(COLUMNS)
                .map(|line| line.iter().collect::<String>().trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn a_terminal_gets_the_live_display() {
    let project = Project::new();
    project.write(
        "wf.yaml",
        &format!(
            "{HEADER}{}{}{}",
            stage("slowish", "sleep 0.8", ""),
            stage(
                "broken",
                "echo boom >&2\nexit 3",
                "    depends_on: [slowish]\n    required: false\n"
            ),
            stage("after", "true", "    depends_on: [broken]\n"),
        ),
    );
    let (code, text) = on_a_terminal(&project, &["run", "wf.yaml"], true);
    assert_eq!(code, 0, "{text}");
    let lines = screen_lines(&text);
    let has = |prefix: &str, also: &str| {
        lines
            .iter()
            .any(|line| line.starts_with(prefix) && line.contains(also))
    };
    // Lines are redrawn in place: cursor up / clear line.
    assert!(text.contains("\u{1b}[2K"), "{text:?}");
    assert!(colour_codes(&text) > 0, "colour without NO_COLOR: {text:?}");
    // A running stage: spinner, name, attempt, live elapsed time.
    assert!(
        lines
            .iter()
            .any(|line| line.contains("slowish") && line.contains("attempt 1")),
        "{lines:#?}"
    );
    // A summary line counting while the run goes on …
    assert!(
        has("0 done · 0 failed · 0 skipped · 1 running · ", "s"),
        "{lines:#?}"
    );
    // … permanent lines for finished stages …
    assert!(has("ok      slowish", "s"), "{lines:#?}");
    assert!(
        has("FAILED  broken", "exited with code 3: boom"),
        "{lines:#?}"
    );
    assert!(has("ok      after", "ms"), "{lines:#?}");
    // … and the final summary, then the result.
    let summary = lines
        .iter()
        .rposition(|line| line.starts_with("2 done · 1 failed · 0 skipped · 0 running · "))
        .unwrap_or_else(|| panic!("a final summary: {lines:#?}"));
    let succeeded = lines
        .iter()
        .position(|line| line.contains(" succeeded: 2 succeeded, 1 failed in "))
        .expect("the closing message");
    assert!(summary < succeeded, "{lines:#?}");
    assert!(
        !lines.iter().any(|line| line.contains("] start   ")),
        "no plain lines on a terminal: {lines:#?}"
    );

    // NO_COLOR: the same display without colour.
    let (code, text) = on_a_terminal(&project, &["run", "wf.yaml"], false);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("\u{1b}[2K"), "{text:?}");
    assert_eq!(colour_codes(&text), 0, "NO_COLOR: {text:?}");
    assert!(
        screen_lines(&text)
            .iter()
            .any(|line| line.starts_with("FAILED  broken")),
        "{text:?}"
    );
}

#[test]
fn a_retry_on_a_terminal_shows_its_attempt_and_json_keeps_plain_lines() {
    let project = Project::new();
    project.write("wf.yaml", &flaky_chain());
    // --format json on a terminal: plain lines, no display.
    let (code, text) = on_a_terminal(&project, &["run", "wf.yaml", "--format", "json"], false);
    assert_eq!(code, 2, "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    let lines: Vec<String> = text
        .lines()
        .map(|line| normalise(line.trim_end()))
        .collect();
    assert!(lines.contains(&"[T] start   a".to_owned()), "{lines:#?}");
    assert!(
        lines.contains(&"[T] FAILED  b (N ms) — exited with code 3".to_owned()),
        "{lines:#?}"
    );
    let id = project.run_ids().pop().expect("the run");

    let (code, text) = on_a_terminal(&project, &["resume", &id], false);
    assert_eq!(code, 0, "{text}");
    let lines = screen_lines(&text);
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("ok      b") && line.ends_with("attempt 2")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("2 done · 0 failed · 0 skipped · 0 running · ")),
        "{lines:#?}"
    );
}
