//! Hostile input through the real binary: every case must end in a clear
//! error (exit code 1) or a correct plan (exit code 0) within the time budget
//! and under a 256 MiB address-space limit, never in a crash, a signal or an
//! internal error (exit code 101).
//!
//! The limit is set with `ulimit -v` in a `bash` that then `exec`s baton, so
//! an allocation past it fails inside baton, which aborts with a signal that
//! the exit-code check catches. The library's own hostile tests
//! (`crates/workflow/tests/hostile.rs`) check the diagnostics in more detail;
//! these check the whole process: reading from disk, rendering, memory.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use baton_test_support::layered::{
    LAYERS, WIDTH, name as layered_name, workflow as layered_workflow,
};
use baton_test_support::{Run, run};
use serde_json::Value;

/// The address-space limit for baton, in KiB (256 MiB).
const MEMORY_LIMIT_KIB: u64 = 256 * 1024;

/// How long one run may take. The test binary and baton are built with the
/// same profile; debug builds are ten to fifty times slower, so there the
/// bound only catches hangs, while release builds must meet the real budget
/// of one second (less the few milliseconds `bash` takes to start).
const TIME_LIMIT: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(10)
} else {
    Duration::from_secs(1)
};

/// A finished, limited run of baton and how long it took.
struct Limited {
    run: Run,
    elapsed: Duration,
}

/// Runs `baton ARGS` in `dir` under an address-space limit of `limit_kib`.
fn baton_limited(dir: &Path, limit_kib: u64, args: &[&str]) -> Limited {
    // `$0` and `$@` are baton and its arguments, so nothing is quoted into
    // the script, and `exec` leaves no shell between the test and baton.
    let script = format!("ulimit -v {limit_kib} && exec \"$0\" \"$@\"");
    let mut command = vec!["-c", script.as_str(), env!("CARGO_BIN_EXE_baton")];
    command.extend_from_slice(args);
    let start = Instant::now();
    let run = run(Path::new("bash"), dir, &command);
    Limited {
        run,
        elapsed: start.elapsed(),
    }
}

/// Asserts that a run ended by itself with `code`, in time.
fn assert_finished(what: &str, limited: &Limited, code: i32) {
    assert_eq!(
        limited.run.code,
        code,
        "{what}: exit code {} (-1 is a signal, 101 a panic), expected {code}\nstderr:\n{}",
        limited.run.code,
        limited.run.stderr.chars().take(4_000).collect::<String>()
    );
    assert!(
        limited.elapsed < TIME_LIMIT,
        "{what} took {:?}, more than {TIME_LIMIT:?}",
        limited.elapsed
    );
}

/// Compiles `file` twice under the 256 MiB limit, once for people and once
/// as JSON, and checks that both fail with exactly one error with `code`
/// whose message contains every string in `message_parts`.
fn assert_compile_error(dir: &Path, file: &str, code: &str, message_parts: &[&str]) {
    assert_compile_error_within(dir, file, MEMORY_LIMIT_KIB, code, message_parts);
}

/// [`assert_compile_error`] under another memory limit.
fn assert_compile_error_within(
    dir: &Path,
    file: &str,
    limit_kib: u64,
    code: &str,
    message_parts: &[&str],
) {
    // The human rendering reads the snippet around the error, which must not
    // become the expensive part for a huge or oddly shaped file.
    let human = baton_limited(dir, limit_kib, &["compile", file]);
    assert_finished(&format!("baton compile {file}"), &human, 1);
    assert!(
        human.run.stderr.contains(&format!("baton::{code}")),
        "baton compile {file}: no `baton::{code}` in\n{}",
        human.run.stderr
    );

    let json = baton_limited(dir, limit_kib, &["compile", file, "--format", "json"]);
    assert_finished(&format!("baton compile {file} --format json"), &json, 1);
    let report: Value = serde_json::from_str(&json.run.stderr)
        .unwrap_or_else(|error| panic!("stderr is not JSON ({error}):\n{}", json.run.stderr));
    let diagnostics = report["diagnostics"]
        .as_array()
        .expect("a diagnostics list");
    assert_eq!(diagnostics.len(), 1, "{file}: {diagnostics:#?}");
    assert_eq!(
        diagnostics[0]["code"], code,
        "{file}: {:#?}",
        diagnostics[0]
    );
    let message = diagnostics[0]["message"].as_str().expect("a message");
    for part in message_parts {
        assert!(message.contains(part), "{file}: no {part:?} in {message:?}");
    }
}

/// A fresh directory holding the given files.
fn directory(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, bytes) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().expect("files sit in a directory"))
            .expect("creating a directory");
        fs::write(&path, bytes).expect("writing a hostile file");
    }
    dir
}

/// The top of a valid workflow, up to and including `stages:`.
const HEADER: &str =
    "name: hostile\nversion: \"1\"\ndescription: d\ntrigger:\n  source: manual\nstages:\n";

/// One stage as a block-sequence item under `stages:`.
fn stage(name: &str, depends_on: &[&str]) -> String {
    format!(
        "  - name: {name}\n    kind: gather\n    description: d {name}\n    agent: {{role: researcher}}\n    depends_on: [{}]\n",
        depends_on.join(", ")
    )
}

/// A fragment with one stage named `root` and the given includes.
fn fragment(includes: &[(&str, &str)]) -> String {
    let mut text = String::from("fragment: true\nstages:\n");
    text.push_str(&stage("root", &[]));
    if !includes.is_empty() {
        text.push_str("include:\n");
        for (path, prefix) in includes {
            writeln!(text, "  - {{path: {path}, prefix: {prefix}}}").expect("writing to a String");
        }
    }
    text
}

/// A workflow with one stage that includes `path`.
fn including(path: &str) -> String {
    format!(
        "{HEADER}{}include:\n  - {{path: {path}, prefix: top}}\n",
        stage("start", &[])
    )
}

/// The limit really applies: without this check every other case here would
/// pass just as well with no limit at all.
#[test]
fn the_memory_limit_is_in_force() {
    let dir = directory(&[]);
    let script = format!("ulimit -v {MEMORY_LIMIT_KIB} && exec cat /proc/self/limits");
    let limits = run(Path::new("bash"), dir.path(), &["-c", &script]);
    assert_eq!(limits.code, 0, "{}", limits.stderr);
    let line = limits
        .stdout
        .lines()
        .find(|line| line.starts_with("Max address space"))
        .expect("/proc/self/limits lists the address space");
    let bytes = (MEMORY_LIMIT_KIB * 1024).to_string();
    assert_eq!(
        line.split_whitespace()
            .filter(|field| *field == bytes)
            .count(),
        2,
        "soft and hard limits: {line}"
    );
}

/// "Billion laughs": nine levels of ten aliases would expand to 10^9 strings.
#[test]
fn alias_bomb() {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let items = vec![format!("*a{}", level - 1); 10].join(", ");
        writeln!(text, "a{level}: &a{level} [{items}]").expect("writing to a String");
    }
    text.push_str(HEADER);
    text.push_str(&stage("one", &[]));
    let dir = directory(&[("bomb.yaml", text.as_bytes())]);

    assert_compile_error(dir.path(), "bomb.yaml", "yaml::syntax", &["invalid YAML: "]);
}

/// A 100 MB file of comment lines is refused by its size. The limit here is
/// 64 MiB, so reading the file whole would fail: the error must come from
/// the size alone.
#[test]
fn hundred_megabyte_file() {
    let mut text = String::with_capacity(100 * 1024 * 1024 + 1024);
    text.push_str(HEADER);
    text.push_str(&stage("one", &[]));
    let comment = format!("# {}\n", "x".repeat(97));
    while text.len() < 100 * 1024 * 1024 {
        text.push_str(&comment);
    }
    let dir = directory(&[("huge.yaml", text.as_bytes())]);
    drop(text);

    assert_compile_error_within(
        dir.path(),
        "huge.yaml",
        64 * 1024,
        "file::too-large",
        &["huge.yaml is larger than 33554432 bytes"],
    );
}

#[test]
fn ten_thousand_deep_nesting() {
    let depth = 10_000;
    let base = format!("{HEADER}{}metadata:\n  a:", stage("one", &[]));
    let sequences = format!("{base} {}x{}\n", "[".repeat(depth), "]".repeat(depth));
    let mappings = format!("{base} {}x{}\n", "{a: ".repeat(depth), "}".repeat(depth));
    let blocks = format!("{base}\n    {}x\n", "- ".repeat(depth));
    // Block mappings need one more space of indentation per level, so 2 000
    // levels (2 MB) stand in for 10 000 (50 MB, over the file size limit).
    let mut indented = base.clone();
    for level in 0..2_000 {
        indented.push('\n');
        indented.push_str(&" ".repeat(level + 3));
        indented.push_str("a:");
    }
    indented.push_str(" x\n");
    let dir = directory(&[
        ("sequences.yaml", sequences.as_bytes()),
        ("mappings.yaml", mappings.as_bytes()),
        ("blocks.yaml", blocks.as_bytes()),
        ("indented.yaml", indented.as_bytes()),
    ]);

    for file in [
        "sequences.yaml",
        "mappings.yaml",
        "blocks.yaml",
        "indented.yaml",
    ] {
        assert_compile_error(
            dir.path(),
            file,
            "yaml::syntax",
            &["invalid YAML: ", "depth"],
        );
    }
}

#[test]
fn ten_thousand_layered_stages() {
    let dir = directory(&[("layered.yaml", layered_workflow().as_bytes())]);

    let limited = baton_limited(
        dir.path(),
        MEMORY_LIMIT_KIB,
        &["compile", "layered.yaml", "--format", "json"],
    );

    assert_finished("baton compile layered.yaml", &limited, 0);
    let plan: Value = serde_json::from_str(&limited.run.stdout).expect("the plan is JSON");
    assert_eq!(plan["total_stages"], LAYERS * WIDTH);
    assert_eq!(plan["total_groups"], LAYERS);
    assert_eq!(plan["max_parallelism"], WIDTH);
    let groups = plan["groups"].as_array().expect("a list of groups");
    assert_eq!(groups.len(), LAYERS);
    for (layer, group) in groups.iter().enumerate() {
        let names: Vec<String> = (0..WIDTH).map(|index| layered_name(layer, index)).collect();
        assert_eq!(group["group"], layer);
        assert_eq!(group["stages"], names.join(", "), "group {layer}");
    }
    let stages = plan["stages"].as_array().expect("a list of stages");
    assert_eq!(stages.len(), LAYERS * WIDTH);
    for (index, stage) in stages.iter().enumerate() {
        let (layer, slot) = (index / WIDTH, index % WIDTH);
        assert_eq!(stage["index"], index);
        assert_eq!(stage["name"], layered_name(layer, slot));
        assert_eq!(stage["group"], layer);
        if layer > 0 {
            let expected = [
                layered_name(layer - 1, slot),
                layered_name(layer - 1, (slot + 1) % WIDTH),
            ];
            assert_eq!(stage["depends_on"], serde_json::json!(expected), "{index}");
        }
    }
}

#[test]
fn include_cycles() {
    let one = fragment(&[("frags/two.yaml", "two")]);
    let two = fragment(&[("frags/one.yaml", "back")]);
    let itself = fragment(&[("frags/self.yaml", "again")]);
    let dir = directory(&[
        ("pair.yaml", including("frags/one.yaml").as_bytes()),
        ("frags/one.yaml", one.as_bytes()),
        ("frags/two.yaml", two.as_bytes()),
        ("self.yaml", including("frags/self.yaml").as_bytes()),
        ("frags/self.yaml", itself.as_bytes()),
    ]);

    assert_compile_error(
        dir.path(),
        "pair.yaml",
        "include::cycle",
        &["(cycle: frags/one.yaml -> frags/two.yaml -> frags/one.yaml)"],
    );
    assert_compile_error(
        dir.path(),
        "self.yaml",
        "include::cycle",
        &["(cycle: frags/self.yaml -> frags/self.yaml)"],
    );
}

#[test]
fn non_utf8_bytes() {
    let dir = directory(&[(
        "latin1.yaml",
        b"name: hostile\nversion: \"1\"\ndescription: caf\xe9 latin-1\n",
    )]);

    assert_compile_error(
        dir.path(),
        "latin1.yaml",
        "file::encoding",
        &["latin1.yaml is not valid UTF-8 (invalid byte at offset 43, line 3)"],
    );
}

#[test]
fn duplicate_keys() {
    let top = format!("{HEADER}{}name: again\n", stage("one", &[]));
    let nested = format!("{HEADER}{}    kind: review\n", stage("one", &[]));
    let dir = directory(&[
        ("top.yaml", top.as_bytes()),
        ("nested.yaml", nested.as_bytes()),
    ]);

    assert_compile_error(
        dir.path(),
        "top.yaml",
        "yaml::syntax",
        &["duplicate", "'name'"],
    );
    assert_compile_error(
        dir.path(),
        "nested.yaml",
        "yaml::syntax",
        &["duplicate", "'kind'"],
    );
}

/// Fragment `level` includes fragment `level - 1` ten times, six levels
/// deep: more than a million stages if expanded.
#[test]
fn include_bomb() {
    let prefixes = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"];
    let mut files = vec![
        ("bomb.yaml".to_owned(), including("bomb/f6.yaml")),
        ("bomb/f0.yaml".to_owned(), fragment(&[])),
    ];
    for level in 1..=6 {
        let inner = format!("bomb/f{}.yaml", level - 1);
        let includes: Vec<(&str, &str)> = prefixes
            .iter()
            .map(|prefix| (inner.as_str(), *prefix))
            .collect();
        files.push((format!("bomb/f{level}.yaml"), fragment(&includes)));
    }
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_bytes()))
        .collect();
    let dir = directory(&files);

    assert_compile_error(
        dir.path(),
        "bomb.yaml",
        "include::too-many-stages",
        &["expand", "more than", "stages"],
    );
}

/// Fragments that stay under the stage limit one level at a time but hold a
/// million stages together: `b5` expands to 44 445 stages, and each of 24
/// fragments `d{k}` includes `b5` and then `d{k-1}`, holding `b5`'s stages
/// while the next level expands.
#[test]
fn nested_include_bomb() {
    let prefixes = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"];
    let mut files = vec![
        ("chain.yaml".to_owned(), including("chain/d24.yaml")),
        ("chain/b0.yaml".to_owned(), fragment(&[])),
        (
            "chain/d0.yaml".to_owned(),
            fragment(&[("chain/b5.yaml", "b")]),
        ),
    ];
    for level in 1..=5 {
        let inner = format!("chain/b{}.yaml", level - 1);
        let copies = if level == 5 { 4 } else { 10 };
        let includes: Vec<(&str, &str)> = prefixes[..copies]
            .iter()
            .map(|prefix| (inner.as_str(), *prefix))
            .collect();
        files.push((format!("chain/b{level}.yaml"), fragment(&includes)));
    }
    for level in 1..=24 {
        let previous = format!("chain/d{}.yaml", level - 1);
        files.push((
            format!("chain/d{level}.yaml"),
            fragment(&[("chain/b5.yaml", "b"), (previous.as_str(), "d")]),
        ));
    }
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_bytes()))
        .collect();
    let dir = directory(&files);

    assert_compile_error(
        dir.path(),
        "chain.yaml",
        "include::too-many-stages",
        &["expand", "more than", "stages"],
    );
}

/// A fragment whose one stage has a 4 MB description, included a hundred
/// times: every file is far below the 32 MiB file limit, but the expanded
/// workflow holds 400 MB of descriptions. baton must refuse it, or compile
/// it without copying the text a hundred times.
#[test]
fn include_of_a_fat_fragment() {
    let fat = format!(
        "fragment: true\nstages:\n  - name: fat\n    kind: gather\n    description: {}\n    agent: {{role: researcher}}\n",
        "x".repeat(4 * 1024 * 1024)
    );
    let prefixes: Vec<String> = (0..100).map(|number| format!("p{number}")).collect();
    let includes: Vec<(&str, &str)> = prefixes
        .iter()
        .map(|prefix| ("fat/one.yaml", prefix.as_str()))
        .collect();
    let dir = directory(&[
        ("fat.yaml", including("fat/many.yaml").as_bytes()),
        ("fat/many.yaml", fragment(&includes).as_bytes()),
        ("fat/one.yaml", fat.as_bytes()),
    ]);

    let limited = baton_limited(
        dir.path(),
        MEMORY_LIMIT_KIB,
        &["compile", "fat.yaml", "--format", "json"],
    );

    assert!(
        [0, 1].contains(&limited.run.code),
        "exit code {} (-1 is a signal)\nstderr:\n{}",
        limited.run.code,
        limited.run.stderr.chars().take(2_000).collect::<String>()
    );
    assert!(
        limited.elapsed < TIME_LIMIT,
        "took {:?}, more than {TIME_LIMIT:?}",
        limited.elapsed
    );
}
