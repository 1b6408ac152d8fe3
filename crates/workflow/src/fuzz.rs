//! The checks the fuzz targets run (`fuzz/`), kept here so that the corpus
//! is replayed by an ordinary test on the stable toolchain
//! (`tests/fuzz_corpus.rs`) and the targets stay one line each.
//!
//! Each check panics when an invariant breaks; a panic is what libFuzzer
//! records as a crash. Beyond "no panic", they check that every diagnostic
//! points inside the file it names, at the line and column its offset is
//! on, that a plan is consistently ordered, and that `{name}` rendering
//! round-trips.

use std::collections::HashMap;
use std::sync::Arc;

use crate::compile::Options;
use crate::diagnostic::{Diagnostic, SourceFile};
use crate::loader::MemoryLoader;
use crate::{Failure, Loaded, Plan, template};

/// The name the fuzzed workflow is read under.
pub const WORKFLOW: &str = "fuzz.yaml";

/// Files beside the fuzzed workflow, so that `include`, `template_ref` and
/// `sub_workflow` can name something that exists.
const BESIDE: &[(&str, &str)] = &[
    (
        "fragment.yaml",
        "fragment: true\nstages:\n  - name: f\n    kind: gather\n    description: from a fragment\n    agent: {role: researcher}\n",
    ),
    (
        "child.yaml",
        "name: child\nversion: \"1\"\ndescription: a child workflow\ntrigger: {source: manual, params: {topic: x}}\nstages:\n  - {name: c, kind: gather, description: \"{topic}\", agent: {role: researcher}}\n",
    ),
    ("template.md", "# {title}\n"),
];

/// The loader the checks read through: the input as [`WORKFLOW`], and
/// [`BESIDE`].
pub fn loader(data: &[u8]) -> MemoryLoader {
    BESIDE
        .iter()
        .fold(MemoryLoader::new(), |loader, (path, text)| {
            loader.with(path, text)
        })
        .with_bytes(WORKFLOW, data)
}

/// `load`: YAML bytes → a loaded workflow or located errors.
pub fn load(data: &[u8]) {
    let loader = loader(data);
    let _ = loaded(data, &loader);
}

/// `compile`: YAML bytes → a plan or located errors; the plan is ordered
/// consistently, and compiling is deterministic.
pub fn compile(data: &[u8]) {
    let loader = loader(data);
    let Some(loaded) = loaded(data, &loader) else {
        return;
    };
    let options = options();
    match crate::compile(&loaded, &options, &loader) {
        Err(failure) => check_failure(data, &failure),
        Ok(plan) => {
            check_plan(&plan);
            let again = crate::compile(&loaded, &options, &loader).expect("compiled once already");
            assert_eq!(
                format!("{plan:?}"),
                format!("{again:?}"),
                "compiling twice gave two plans"
            );
        }
    }
}

/// The compile options the checks use: a `work_dir` and no overrides.
pub fn options() -> Options {
    Options {
        work_dir: Some("/fuzz/out".to_owned()),
        params: Vec::new(),
        reject_unknown_params: false,
    }
}

/// Loads the input, checking every diagnostic; `None` when it failed.
pub fn loaded(data: &[u8], loader: &MemoryLoader) -> Option<Loaded> {
    match crate::load(WORKFLOW, loader) {
        Err(failure) => {
            check_failure(data, &failure);
            None
        }
        Ok(loaded) => {
            assert!(
                std::str::from_utf8(data).is_ok(),
                "a file that is not UTF-8 loaded"
            );
            for warning in &loaded.warnings {
                check_diagnostic(warning);
            }
            Some(loaded)
        }
    }
}

fn check_failure(data: &[u8], failure: &Failure) {
    assert!(!failure.errors.is_empty(), "a failure without an error");
    for error in &failure.errors {
        assert!(error.is_error(), "a warning among the errors: {error:?}");
        check_diagnostic(error);
        // A file baton could read as text has its problems located in it.
        if std::str::from_utf8(data).is_ok() {
            assert!(
                error.location.is_some(),
                "error without a location: {error:?}"
            );
        }
    }
    for warning in &failure.warnings {
        check_diagnostic(warning);
    }
}

/// A located diagnostic points inside its file, on character boundaries,
/// at the line and column its offset is on; miette can quote it.
pub fn check_diagnostic(diagnostic: &Diagnostic) {
    let Some(location) = &diagnostic.location else {
        return;
    };
    let text = location.file.text.as_str();
    let span = location.span;
    let end = span.offset.checked_add(span.len);
    assert!(
        end.is_some_and(|end| end <= text.len()),
        "span {span:?} outside {} ({} bytes): {diagnostic:?}",
        location.file.path,
        text.len()
    );
    assert!(
        text.is_char_boundary(span.offset) && text.is_char_boundary(span.offset + span.len),
        "span {span:?} splits a character: {diagnostic:?}"
    );
    if span.line > 0 {
        let (line, column) = line_column(text, span.offset);
        assert_eq!(
            (span.line as usize, span.column as usize),
            (line, column),
            "line and column disagree with offset {}: {diagnostic:?}",
            span.offset
        );
    }
    check_quotable(diagnostic, &location.file);
}

/// The one-based line and column (in characters) of a byte offset, lines
/// ending as YAML ends them: at `\n`, `\r\n` or a `\r` alone.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let mut line = 1;
    let mut line_start = 0;
    for (at, byte) in bytes[..offset].iter().enumerate() {
        if *byte == b'\n' || (*byte == b'\r' && bytes.get(at + 1) != Some(&b'\n')) {
            line += 1;
            line_start = at + 1;
        }
    }
    (line, text[line_start..offset].chars().count() + 1)
}

/// What miette asks of a diagnostic to show it: its labels, and the
/// snippet of each with and without context.
fn check_quotable(diagnostic: &Diagnostic, file: &Arc<SourceFile>) {
    use miette::SourceCode as _;
    let labels: Vec<_> = miette::Diagnostic::labels(diagnostic)
        .map(Iterator::collect)
        .unwrap_or_default();
    for label in labels {
        assert!(
            label.offset() + label.len() <= file.text.len(),
            "label {label:?} outside the file: {diagnostic:?}"
        );
        for context in [0, 1] {
            let contents = file
                .read_span(label.inner(), context, context)
                .unwrap_or_else(|error| panic!("no snippet ({error}) for {diagnostic:?}"));
            assert!(std::str::from_utf8(contents.data()).is_ok());
        }
    }
}

/// Every stage is in exactly one group, after the groups of the stages it
/// depends on, at a deeper level; it reads only from its ancestors.
pub fn check_plan(plan: &Plan) {
    let count = plan.stages.len();
    let mut group_of = vec![None; count];
    for (number, group) in plan.groups.iter().enumerate() {
        assert!(!group.stages.is_empty(), "empty group {number}");
        assert!(
            !group.gate || group.stages.len() == 1,
            "a gate group of many"
        );
        for &index in &group.stages {
            assert!(
                index < count,
                "group {number} names stage {index} of {count}"
            );
            assert!(
                group_of[index].replace(number).is_none(),
                "stage {index} in two groups"
            );
        }
        let names: Vec<&str> = group
            .stages
            .iter()
            .map(|&i| plan.stages[i].name())
            .collect();
        assert!(
            names.is_sorted(),
            "group {number} not sorted by name: {names:?}"
        );
    }
    let mut ancestors: Vec<Vec<bool>> = Vec::with_capacity(count);
    for (index, stage) in plan.stages.iter().enumerate() {
        assert_eq!(stage.index, index, "stage {} out of place", stage.name());
        assert_eq!(group_of[index], Some(stage.group), "stage {index}'s group");
        assert!(stage.level < plan.levels.max(1), "level past the last");
        let mut mine = vec![false; count];
        for &dependency in &stage.depends_on {
            assert!(dependency < index, "stage {index} depends on a later stage");
            let upstream = &plan.stages[dependency];
            assert!(
                upstream.level < stage.level,
                "a dependency at the same level"
            );
            assert!(
                upstream.group < stage.group,
                "a dependency in a later group"
            );
            mine[dependency] = true;
            for (slot, is) in mine.iter_mut().zip(&ancestors[dependency]) {
                *slot |= *is;
            }
        }
        for &upstream in &stage.reads_from {
            assert!(mine[upstream], "stage {index} reads from a non-ancestor");
        }
        ancestors.push(mine);
    }
}

/// `placeholders` (the workflow half): a `{name}` renderer round trip.
/// Each name's value is a marker the text does not hold followed by the
/// placeholder itself (values are never rendered again); putting `{name}`
/// back for each value gives the text again, and there are exactly as many
/// values as placeholders [`template::placeholders`] lists.
pub fn template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    assert_eq!(
        template::render(&text, |_| None),
        text,
        "nothing known changed the text"
    );
    if text.chars().any(|c| c >= MARKERS) {
        return;
    }
    let known = |name: &str| !name.contains(' ') && name.len() <= 128;
    let names = template::placeholders(&text, known);
    let mut values: HashMap<&str, String> = HashMap::new();
    for name in &names {
        let number = u32::try_from(values.len()).unwrap_or(u32::MAX);
        let Some(marker) = char::from_u32(u32::from(MARKERS) + number) else {
            return;
        };
        values
            .entry(name)
            .or_insert_with(|| format!("{marker}{{{name}}}"));
    }
    let rendered = template::render(&text, |name| {
        values.get(name).filter(|_| known(name)).map(String::as_str)
    });
    let count = rendered.chars().filter(|c| *c >= MARKERS).count();
    assert_eq!(count, names.len(), "rendered {rendered:?}");
    let mut back = rendered.into_owned();
    for (name, value) in &values {
        back = back.replace(value.as_str(), &format!("{{{name}}}"));
    }
    assert_eq!(back, text, "putting the placeholders back");
}

/// The first of the characters [`template`] uses as markers (a private-use
/// plane, so a text rarely holds one).
const MARKERS: char = '\u{F0000}';
