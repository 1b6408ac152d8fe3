//! Conformance with the reference engine's corpus and goldens.
//!
//! Reads `../shared/compat` (or `$BATON_COMPAT_DIR`), runs baton from that
//! directory exactly as the goldens were produced, and compares: compile
//! groups, indices, resolutions and contract warnings for every runnable
//! workflow; fragment recognition; parse and lint results; the listing; and
//! every edge case of `cases/_results.json`. The cases where baton behaves
//! differently on purpose are listed in [`DIFFERENCES`], and each must be
//! explained, by id, in `docs/compat.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_test_support::{compat_dir, workspace_root};
use serde_json::Value;

use crate::baton;

/// Edge cases where baton deliberately differs, per command: (case id,
/// command, why). Keep in sync with `docs/compat.md`.
const DIFFERENCES: &[(&str, &str, &str)] = &[
    (
        "s17-depends-on-string",
        "parse",
        "a string where a list belongs is an error, not a list of characters",
    ),
    ("s17-depends-on-string", "compile", "same"),
    ("s17-depends-on-string", "lint", "same"),
    (
        "s18-required-string",
        "parse",
        "a quoted \"false\" where a boolean belongs is an error, not truthy",
    ),
    ("s18-required-string", "compile", "same"),
    ("s18-required-string", "lint", "same"),
    (
        "s09g-max-revisions-string",
        "parse",
        "max_revisions must be a whole number",
    ),
    ("s09g-max-revisions-string", "compile", "same"),
    ("s09g-max-revisions-string", "lint", "same"),
    (
        "c01-when-bad",
        "lint",
        "lint reports what compile rejects: an unsupported when",
    ),
    ("c01b-when-equals", "lint", "same"),
    (
        "c03-template-missing",
        "lint",
        "lint reports what compile rejects: a missing template",
    ),
    (
        "l03-inline-fanout",
        "lint",
        "an inline fan-out runs its script once per item; not an error",
    ),
];

fn differs(case: &str, command: &str) -> bool {
    DIFFERENCES
        .iter()
        .any(|(id, which, _)| *id == case && *which == command)
}

fn corpus() -> Option<PathBuf> {
    compat_dir()
}

fn json(text: &str, what: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("{what}: not JSON ({error}):\n{text}"))
}

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    json(&text, &path.display().to_string())
}

/// Every YAML file of the corpus, relative to the compat dir, and whether it
/// is a fragment (it has a `validate-fragment` golden).
fn corpus_files(dir: &Path) -> Vec<(String, bool)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("corpus directory is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "yaml")
            {
                out.push(path.strip_prefix(root).expect("below root").to_path_buf());
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &dir.join("workflows"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path.to_string_lossy().into_owned();
            let is_fragment = golden(dir, &relative, "validate-fragment.json").exists();
            (relative, is_fragment)
        })
        .collect()
}

fn stem(file: &str) -> &str {
    file.strip_prefix("workflows/")
        .and_then(|rest| rest.strip_suffix(".yaml"))
        .expect("a corpus path")
}

fn golden(dir: &Path, file: &str, label: &str) -> PathBuf {
    dir.join("goldens").join(format!("{}.{label}", stem(file)))
}

/// The first error message of a failed baton command (JSON diagnostics on stderr).
fn first_error(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|line| line.starts_with("{\"diagnostics\""))
        .unwrap_or_else(|| panic!("no JSON diagnostics in:\n{stderr}"));
    let value = json(line, "diagnostics");
    value["diagnostics"]
        .as_array()
        .expect("list")
        .iter()
        .find(|diagnostic| diagnostic["severity"] == "error")
        .and_then(|diagnostic| diagnostic["message"].as_str())
        .expect("an error")
        .to_owned()
}

/// The reference message without its `Error: Parse error: <path>: ` prefix.
fn reference_message(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|line| line.starts_with("Error: "))
        .unwrap_or(stderr)
        .trim_end();
    let message = line.strip_prefix("Error: ").unwrap_or(line);
    if let Some(rest) = message.strip_prefix("Compile error: ") {
        return rest.to_owned();
    }
    let message = message.strip_prefix("Parse error: ").unwrap_or(message);
    message
        .split_once(".yaml: ")
        .map_or(message, |(_, rest)| rest)
        .to_owned()
}

fn messages_match(case: &str, ours: &str, reference: &str, root: &Path) -> bool {
    let reference = reference.replace("<ROOT>", &root.to_string_lossy());
    match case {
        // The YAML parsers word syntax errors differently; the kind matches.
        "t02-bad-yaml" => {
            ours.starts_with("invalid YAML: ") && reference.starts_with("invalid YAML: ")
        }
        _ => ours == reference,
    }
}

#[test]
fn runnable_workflows_compile_to_the_golden_plans() {
    let Some(dir) = corpus() else { return };
    let mut checked = 0;
    for (file, fragment) in corpus_files(&dir) {
        if fragment {
            continue;
        }
        let run = baton(&dir, &["compile", &file, "--format", "json"]);
        assert_eq!(run.code, 0, "{file}: compile failed:\n{}", run.stderr);
        let ours = json(&run.stdout, &file);
        let expected = read_json(&golden(&dir, &file, "compile.json"));
        for key in [
            "name",
            "total_stages",
            "total_groups",
            "max_parallelism",
            "contract_warnings",
            "groups",
            "contract_warnings_detail",
        ] {
            assert_eq!(
                ours[key], expected[key],
                "{file}: `{key}` differs from the golden"
            );
        }
        resolutions_extend_the_golden(&file, &ours, &expected);
        // Contract warnings also go to stderr, one line each, as in the reference.
        let golden_stderr = golden(&dir, &file, "compile.stderr.txt");
        if golden_stderr.exists() {
            for line in std::fs::read_to_string(&golden_stderr)
                .expect("readable")
                .lines()
            {
                assert!(run.stderr.contains(line), "{file}: stderr lacks `{line}`");
            }
        }
        // Indices: the reference's dispatch files are named NNN-<stage>.json.
        let dispatch = dir.join("goldens/dispatch").join(stem(&file));
        let mut indices = BTreeMap::new();
        for entry in std::fs::read_dir(&dispatch)
            .unwrap_or_else(|error| panic!("{}: {error}", dispatch.display()))
        {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let (index, stage) = name
                .strip_suffix(".json")
                .and_then(|name| name.split_once('-'))
                .expect("NNN-name.json");
            indices.insert(stage.to_owned(), index.parse::<u64>().expect("number"));
            resolution_matches_the_dispatch(&file, &ours, &read_json(&path));
        }
        let stages = ours["stages"].as_array().expect("stages");
        assert_eq!(stages.len(), indices.len(), "{file}: stage count");
        for stage in stages {
            let name = stage["name"].as_str().expect("name");
            assert_eq!(
                stage["index"].as_u64(),
                indices.get(name).copied(),
                "{file}: index of {name}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 30, "the corpus has 30 runnable workflows");
}

/// The reference's four fields of every resolution, in the reference's
/// order, each equal to the golden's; then baton's fields, equal to what
/// `stages` says of the same stage.
fn resolutions_extend_the_golden(file: &str, ours: &Value, expected: &Value) {
    const REFERENCE: [&str; 4] = [
        "stage",
        "template_resolved",
        "guide_resolved",
        "cli_commands",
    ];
    const ADDED: [&str; 8] = [
        "index",
        "kind",
        "executor",
        "human_gate",
        "sub_workflow",
        "agent_role",
        "agent_model",
        "agent_isolation",
    ];
    let resolutions = ours["resolutions"].as_array().expect("resolutions");
    let golden = expected["resolutions"]
        .as_array()
        .expect("golden resolutions");
    assert_eq!(resolutions.len(), golden.len(), "{file}: resolution count");
    let stages = ours["stages"].as_array().expect("stages");
    for ((resolution, reference), stage) in resolutions.iter().zip(golden).zip(stages) {
        let keys: Vec<&str> = resolution
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [REFERENCE.as_slice(), ADDED.as_slice()].concat(),
            "{file}: keys of {resolution}"
        );
        for key in REFERENCE {
            assert_eq!(
                resolution[key], reference[key],
                "{file}: resolution `{key}` of {} differs from the golden",
                reference["stage"]
            );
        }
        let name = &resolution["stage"];
        assert_eq!(
            &stage["name"], name,
            "{file}: resolutions follow the stages"
        );
        for (key, planned) in [
            ("index", &stage["index"]),
            ("kind", &stage["kind"]),
            ("executor", &stage["executor"]),
            ("human_gate", &stage["human_gate"]),
            ("sub_workflow", &stage["sub_workflow"]),
            ("agent_role", &stage["agent"]["role"]),
            ("agent_model", &stage["agent"]["model"]),
            ("agent_isolation", &stage["agent"]["isolation"]),
        ] {
            assert_eq!(
                &resolution[key], planned,
                "{file}: resolution `{key}` of {name} disagrees with the plan"
            );
        }
    }
}

/// What the reference's dispatch file of a stage says of it (index, kind,
/// role, model, sub-workflow) its resolution says too.
fn resolution_matches_the_dispatch(file: &str, ours: &Value, dispatch: &Value) {
    let name = &dispatch["stage_name"];
    let resolution = ours["resolutions"]
        .as_array()
        .expect("resolutions")
        .iter()
        .find(|resolution| &resolution["stage"] == name)
        .unwrap_or_else(|| panic!("{file}: no resolution for {name}"));
    for (key, reference) in [
        ("index", "stage_index"),
        ("kind", "kind"),
        ("agent_role", "agent_type"),
        ("agent_model", "model"),
        ("sub_workflow", "sub_workflow"),
    ] {
        assert_eq!(
            resolution[key], dispatch[reference],
            "{file}: resolution `{key}` of {name} differs from the reference's dispatch `{reference}`"
        );
    }
}

#[test]
fn fragments_are_recognised_as_fragments() {
    let Some(dir) = corpus() else { return };
    let mut checked = 0;
    for (file, fragment) in corpus_files(&dir) {
        if !fragment {
            continue;
        }
        let run = baton(&dir, &["compile", &file]);
        assert_eq!(run.code, 1, "{file}: a fragment must not compile");
        assert!(
            run.stderr.contains("is a fragment"),
            "{file}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("include:"),
            "{file}: the hint shows how to include it"
        );
        let lint = baton(&dir, &["lint", &file, "--format", "json"]);
        assert_eq!(lint.code, 0, "{file}: {}", lint.stderr);
        let ours = json(&lint.stdout, &file);
        let expected = read_json(&golden(&dir, &file, "lint-json.json"));
        assert_eq!(ours["fragment"], true, "{file}");
        for key in ["valid", "stages", "dag_depth"] {
            assert_eq!(ours[key], expected[key], "{file}: lint `{key}`");
        }
        checked += 1;
    }
    assert_eq!(checked, 15, "the corpus has 15 fragments");
}

#[test]
fn parse_matches_the_goldens() {
    let Some(dir) = corpus() else { return };
    for (file, fragment) in corpus_files(&dir) {
        if fragment {
            continue;
        }
        let run = baton(&dir, &["parse", &file, "--json"]);
        assert_eq!(run.code, 0, "{file}: {}", run.stderr);
        assert_eq!(
            json(&run.stdout, &file),
            read_json(&golden(&dir, &file, "parse.json")),
            "{file}"
        );
    }
}

/// Lint finds every warning the reference finds (per stage, as a multiset:
/// the reference's order within a stage is Python set order) and agrees on
/// validity, stage count and depth.
#[test]
fn lint_finds_the_reference_warnings() {
    let Some(dir) = corpus() else { return };
    for (file, fragment) in corpus_files(&dir) {
        if fragment {
            continue;
        }
        let run = baton(&dir, &["lint", &file, "--format", "json"]);
        let ours = json(&run.stdout, &file);
        let expected = read_json(&golden(&dir, &file, "lint-json.json"));
        for key in ["valid", "stages", "dag_depth"] {
            assert_eq!(
                ours[key], expected[key],
                "{file}: lint `{key}`\n{}",
                run.stdout
            );
        }
        let key = |finding: &Value| {
            format!(
                "{}|{}|{}",
                finding["stage"], finding["field"], finding["message"]
            )
        };
        let ours_found: Vec<String> = ours["warnings"]
            .as_array()
            .expect("list")
            .iter()
            .map(key)
            .collect();
        for warning in expected["warnings"].as_array().expect("list") {
            assert!(
                ours_found.contains(&key(warning)),
                "{file}: missing reference warning {warning}"
            );
        }
    }
}

#[test]
fn list_shows_every_golden_row() {
    let Some(dir) = corpus() else { return };
    let run = baton(&dir, &["list", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ours = json(&run.stdout, "list");
    let rows = ours.as_array().expect("rows");
    let expected = read_json(&dir.join("goldens/list.json"));
    for golden_row in expected.as_array().expect("rows") {
        let file = golden_row["file"].as_str().expect("file");
        let row = rows
            .iter()
            .find(|row| row["file"] == file)
            .unwrap_or_else(|| panic!("list lacks {file}"));
        assert_eq!(row["kind"], "workflow", "{file}");
        for key in ["name", "version", "stages"] {
            assert_eq!(row[key], golden_row[key], "{file}: `{key}`");
        }
        assert_eq!(
            row["description"].as_str(),
            golden_row["description"].as_str().map(str::trim_end),
            "{file}"
        );
    }
    // baton also lists what the reference skips (files under shared/), marked.
    let fragments = rows.iter().filter(|row| row["kind"] == "fragment").count();
    assert_eq!(fragments, 15);
    assert_eq!(rows.len(), 45);
}

#[test]
fn edge_cases_behave_as_the_reference_or_as_documented() {
    let Some(dir) = corpus() else { return };
    let results = read_json(&dir.join("cases/_results.json"));
    let cases = results.as_object().expect("cases by id");
    assert_eq!(cases.len(), 89);
    // c04 resolves README.md and CONTRIBUTING.md against the current
    // directory; it runs in a scratch directory holding both.
    let scratch = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(scratch.path().join("cases")).expect("mkdir");
    std::fs::copy(
        dir.join("cases/c04-template-ok.yaml"),
        scratch.path().join("cases/c04-template-ok.yaml"),
    )
    .expect("copy");
    std::fs::write(scratch.path().join("README.md"), "# template\n").expect("write");
    std::fs::write(scratch.path().join("CONTRIBUTING.md"), "# guide\n").expect("write");

    let mut failures = Vec::new();
    let mut compared = 0;
    for (case, expected) in cases {
        let file = format!("cases/{case}.yaml");
        let cwd: &Path = if case == "c04-template-ok" {
            scratch.path()
        } else {
            &dir
        };
        for command in ["parse", "compile", "lint"] {
            if differs(case, command) {
                continue;
            }
            compared += 1;
            let reference = &expected[command];
            let run = baton(cwd, &[command, &file, "--format", "json"]);
            let reference_code = reference["rc"].as_i64().expect("rc");
            if i64::from(run.code) != reference_code {
                failures.push(format!(
                    "{case} {command}: exit {} (reference {reference_code})\n{}",
                    run.code, run.stderr
                ));
                continue;
            }
            let theirs_stdout = reference["stdout"].as_str().expect("stdout");
            match command {
                "lint" => {
                    let ours = json(&run.stdout, case);
                    let theirs = json(theirs_stdout, case);
                    if ours["valid"] != theirs["valid"] {
                        failures.push(format!(
                            "{case} lint: valid {} (reference {})",
                            ours["valid"], theirs["valid"]
                        ));
                    }
                    for kind in ["errors", "warnings"] {
                        for finding in theirs[kind].as_array().expect("list") {
                            let message =
                                reference_message(finding["message"].as_str().expect("message"));
                            let found = ours[kind].as_array().expect("list").iter().any(|mine| {
                                mine["message"]
                                    .as_str()
                                    .is_some_and(|mine| messages_match(case, mine, &message, &dir))
                            });
                            if !found {
                                failures.push(format!(
                                    "{case} lint: no {kind} entry `{message}` in {}",
                                    ours[kind]
                                ));
                            }
                        }
                    }
                }
                _ if reference_code != 0 => {
                    let theirs = reference_message(reference["stderr"].as_str().expect("stderr"));
                    let ours = first_error(&run.stderr);
                    if !messages_match(case, &ours, &theirs, cwd) {
                        failures.push(format!(
                            "{case} {command}: message\n  ours:      {ours}\n  reference: {theirs}"
                        ));
                    }
                }
                "compile" => {
                    let ours = json(&run.stdout, case);
                    let theirs = json(theirs_stdout, case);
                    for key in ["groups", "contract_warnings_detail"] {
                        if ours[key] != theirs[key] {
                            failures.push(format!(
                                "{case} compile: `{key}` {} (reference {})",
                                ours[key], theirs[key]
                            ));
                        }
                    }
                    resolutions_extend_the_golden(case, &ours, &theirs);
                }
                _ => {
                    let ours = json(&run.stdout, case);
                    let theirs = json(theirs_stdout, case);
                    if ours != theirs {
                        failures.push(format!("{case} parse: {ours} (reference {theirs})"));
                    }
                }
            }
        }
    }
    assert_eq!(compared, 89 * 3 - DIFFERENCES.len());
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A deliberate difference is only deliberate if it is explained.
#[test]
fn every_difference_is_documented() {
    let compat_doc = std::fs::read_to_string(workspace_root().join("docs/compat.md"))
        .expect("docs/compat.md exists");
    for (case, _, _) in DIFFERENCES {
        assert!(
            compat_doc.contains(case),
            "docs/compat.md does not explain {case}"
        );
    }
}
