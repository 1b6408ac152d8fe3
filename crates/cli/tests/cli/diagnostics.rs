//! Diagnostics snapshots: what people see on stderr when a workflow is
//! broken (`baton compile`) or merely suspicious (`baton lint`).
//!
//! Every case is one file, so adding a case means adding a file:
//!
//! - `fixtures/invalid/*.yaml` must make `baton compile` fail with exit
//!   code 1. A file whose name starts with `strict-` holds something that is
//!   only a warning, so it is compiled with `--strict`; it must compile
//!   without the flag, or the case would not be testing `--strict` at all.
//!   Fragments that the cases include live in `fixtures/invalid/fragments/`,
//!   which the glob does not descend into.
//! - `fixtures/warnings/*.yaml` must pass `baton lint` (exit code 0) with at
//!   least one warning.
//!
//! baton runs in `fixtures/` with the path given relative to it, so the
//! snippet headers (`[invalid/x.yaml:line:col]`) hold no machine paths and
//! the snapshots are the same on every machine.

use std::path::{Path, PathBuf};

use baton_test_support::Run;

/// The directory baton runs in, and the root of the relative fixture paths.
fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Cases whose diagnostic has no source snippet. An encoding error is
/// reported before the text exists as a string, so baton only names the line
/// in the message. The list is checked both ways, so a case that gains a
/// snippet must be removed from it.
const WITHOUT_SNIPPET: &[&str] = &["non-utf8.yaml"];

/// The fixture's file name, which is also the snapshot suffix insta chose.
fn file_name(path: &Path) -> &str {
    path.file_name()
        .and_then(|name| name.to_str())
        .expect("fixture names are UTF-8")
}

/// The command as a reader would type it, shown at the top of the snapshot.
fn command_line(args: &[&str]) -> String {
    format!("$ baton {}", args.join(" "))
}

/// Checks what every human-readable diagnostic must have: a snippet header
/// pointing into the fixture (or a fragment next to it) by a relative path,
/// and no absolute path of the machine that ran the test.
fn assert_points_into_fixtures(name: &str, run: &Run) {
    let has_snippet = run.stderr.contains("╭─[invalid/") || run.stderr.contains("╭─[warnings/");
    assert_eq!(
        has_snippet,
        !WITHOUT_SNIPPET.contains(&name),
        "{name}: snippet header expected to be {}:\n{}",
        if has_snippet { "absent" } else { "present" },
        run.stderr
    );
    let machine_path = fixtures_dir();
    assert!(
        !run.stderr.contains(&*machine_path.to_string_lossy()),
        "{name}: stderr leaks an absolute path:\n{}",
        run.stderr
    );
}

#[test]
fn compile_errors() {
    insta::glob!("../fixtures", "invalid/*.yaml", |path| {
        let name = file_name(path);
        let relative = format!("invalid/{name}");
        let strict = name.starts_with("strict-");
        let mut args = vec!["compile"];
        if strict {
            args.push("--strict");
        }
        args.push(&relative);
        let run = crate::baton(&fixtures_dir(), &args);

        let snapshot = format!(
            "{}\nexit code: {}\n--- stderr\n{}",
            command_line(&args),
            run.code,
            run.stderr
        );
        insta::assert_snapshot!(snapshot);
        assert_eq!(run.code, 1, "{name}: an invalid workflow must exit with 1");
        assert!(
            run.stdout.is_empty(),
            "{name}: a failed compile prints no plan:\n{}",
            run.stdout
        );
        assert!(
            run.stderr.contains("× "),
            "{name}: no error marker in:\n{}",
            run.stderr
        );
        assert_points_into_fixtures(name, &run);
        if strict {
            let lenient = crate::baton(&fixtures_dir(), &["compile", &relative]);
            assert_eq!(
                lenient.code, 0,
                "{name}: a strict- case must compile without --strict:\n{}",
                lenient.stderr
            );
        }
    });
}

#[test]
fn lint_warnings() {
    insta::glob!("../fixtures", "warnings/*.yaml", |path| {
        let name = file_name(path);
        let relative = format!("warnings/{name}");
        let args = ["lint", relative.as_str()];
        let run = crate::baton(&fixtures_dir(), &args);

        let snapshot = format!(
            "{}\nexit code: {}\n--- stderr\n{}--- stdout\n{}",
            command_line(&args),
            run.code,
            run.stderr,
            run.stdout
        );
        insta::assert_snapshot!(snapshot);
        assert_eq!(run.code, 0, "{name}: warnings alone must not fail lint");
        assert!(
            run.stderr.contains("⚠ "),
            "{name}: no warning marker in:\n{}",
            run.stderr
        );
        assert!(
            !run.stderr.contains("× "),
            "{name}: unexpected error in:\n{}",
            run.stderr
        );
        assert_points_into_fixtures(name, &run);
    });
}

/// Many warnings in one file, each shown with its own place and snippet:
/// snippets are read from the middle of a large file, so a line counted
/// from the wrong place shows the wrong line.
#[test]
fn lint_shows_every_one_of_many_warnings_at_its_own_line() {
    const STAGES: usize = 1_500;
    const HEADER: &str =
        "name: many\nversion: '1'\ndescription: d\ntrigger: {source: manual}\nstages:\n";
    let stage = |i: usize| {
        format!(
            "  - {{name: s{i}, kind: gather, description: 'read {{v{i}}}', agent: {{role: researcher}}}}"
        )
    };
    let lines: Vec<String> = (0..STAGES).map(stage).collect();
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(
        dir.path().join("w.yaml"),
        format!("{HEADER}{}\n", lines.join("\n")),
    )
    .expect("write the workflow");

    let run = crate::baton(dir.path(), &["lint", "w.yaml"]);

    assert_eq!(run.code, 0, "{}", run.stderr);
    let blocks: Vec<&str> = run
        .stderr
        .split("baton::lint::undeclared-variable")
        .skip(1)
        .collect();
    assert_eq!(blocks.len(), STAGES);
    let first_stage_line = HEADER.lines().count() + 1;
    for (i, block) in blocks.iter().enumerate() {
        let line = first_stage_line + i;
        let column = lines[i].find('\'').expect("a quoted description") + 1;
        assert!(
            block.contains(&format!("references undeclared variable '{{v{i}}}'"))
                && block.contains(&format!("╭─[w.yaml:{line}:{column}]"))
                && block.contains(&format!("{line} │ {}\n", lines[i])),
            "warning {i} is not shown at line {line}:\n{block}"
        );
        // A snippet quotes its own line only (never a neighbour's).
        if i > 0 {
            assert!(!block.contains(&format!("{} │ ", line - 1)), "{block}");
        }
    }
    assert!(
        run.stdout.contains(&format!("{STAGES} warnings")),
        "{}",
        run.stdout
    );
}
