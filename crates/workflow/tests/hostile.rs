//! Hostile input: files built to exhaust time, memory or the stack.
//!
//! Each case asserts the exact outcome (the diagnostic code and the words a
//! user needs, or a correct plan) and that it arrives quickly. The time bound
//! is generous in debug builds, where only a hang should trip it; the real
//! release-build figures are measured through the binary (see the CLI's
//! `hostile` tests and the `compile` benchmark).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use baton_test_support::layered::{
    LAYERS, WIDTH, name as layered_name, workflow as layered_workflow,
};
use baton_workflow::compile::Options;
use baton_workflow::load::MAX_FILE_BYTES;
use baton_workflow::node::MAX_DEPTH;
use baton_workflow::{Diagnostic, Loader, MemoryLoader, Plan};

/// How long one hostile case may take. Debug builds are ten to fifty times
/// slower than release ones, so the debug bound only catches hangs and
/// runaway work; release builds must meet the real one-second budget.
const TIME_LIMIT: Duration = if cfg!(debug_assertions) {
    Duration::from_secs(10)
} else {
    Duration::from_secs(1)
};

/// Runs `work`, failing the test when it takes longer than [`TIME_LIMIT`].
fn timed<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let result = work();
    let elapsed = start.elapsed();
    assert!(
        elapsed < TIME_LIMIT,
        "{what} took {elapsed:?}, more than {TIME_LIMIT:?}"
    );
    result
}

/// Loads and compiles `path`, expecting exactly one error, and returns it.
fn single_error(path: &str, loader: &dyn Loader) -> Diagnostic {
    let failure = match baton_workflow::load(path, loader) {
        Ok(loaded) => match baton_workflow::compile(&loaded, &Options::default(), loader) {
            Ok(plan) => panic!(
                "{path} compiled to {} stages; an error was expected",
                plan.stages.len()
            ),
            Err(failure) => failure,
        },
        Err(failure) => failure,
    };
    assert_eq!(
        failure.errors.len(),
        1,
        "expected one error, got {:#?}",
        failure.errors
    );
    failure
        .errors
        .into_iter()
        .next()
        .expect("length checked above")
}

/// Loads and compiles `path`, expecting success.
fn plan(path: &str, loader: &dyn Loader) -> Plan {
    let loaded = baton_workflow::load(path, loader)
        .unwrap_or_else(|failure| panic!("{path} did not load: {:#?}", failure.errors));
    baton_workflow::compile(&loaded, &Options::default(), loader)
        .unwrap_or_else(|failure| panic!("{path} did not compile: {:#?}", failure.errors))
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

// --- 1. alias bomb -------------------------------------------------------

/// "Billion laughs": nine levels of ten aliases each would expand to 10^9
/// strings. Fewer than 100 aliases are written, so the alias count limit
/// alone would not catch it; the event budget must count replayed events.
#[test]
fn alias_bomb_is_a_syntax_error() {
    let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..=9 {
        let previous = level - 1;
        let items = vec![format!("*a{previous}"); 10].join(", ");
        writeln!(text, "a{level}: &a{level} [{items}]").expect("writing to a String");
    }
    text.push_str(HEADER);
    text.push_str(&stage("one", &[]));
    let loader = MemoryLoader::new().with("bomb.yaml", &text);

    let error = timed("the alias bomb", || single_error("bomb.yaml", &loader));

    assert_eq!(error.code, "yaml::syntax");
    assert!(
        error.message.starts_with("invalid YAML: "),
        "{}",
        error.message
    );
    assert_budget_message(&error);
    assert_eq!(error.file(), Some("bomb.yaml"));
}

/// One anchor aliased many more times than any real workflow would: the
/// alias count limit stops it before the nodes are replayed.
#[test]
fn too_many_aliases_are_a_syntax_error() {
    let mut text = String::from("x: &x [a, b, c]\nmany:\n");
    for _ in 0..5_000 {
        text.push_str("  - *x\n");
    }
    text.push_str(HEADER);
    text.push_str(&stage("one", &[]));
    let loader = MemoryLoader::new().with("aliases.yaml", &text);

    let error = timed("5 000 aliases", || single_error("aliases.yaml", &loader));

    assert_eq!(error.code, "yaml::syntax");
    assert_budget_message(&error);
}

/// Asserts that a YAML error says a parser limit was exceeded, whatever the
/// exact wording of the limit.
fn assert_budget_message(error: &Diagnostic) {
    let message = error.message.to_lowercase();
    assert!(
        ["budget", "limit", "too many", "too large", "too complex"]
            .iter()
            .any(|word| message.contains(word)),
        "not a limit: {}",
        error.message
    );
}

// --- 2. a 100 MB file ----------------------------------------------------

/// A loader that refuses files over the limit it is given, like the file
/// system loader, and records the limits it was asked for so the test can
/// show the library never asked for more than [`MAX_FILE_BYTES`].
struct SizeOnlyLoader {
    size: usize,
    limits: RefCell<Vec<usize>>,
}

impl Loader for SizeOnlyLoader {
    fn read(&self, _path: &Path, limit: usize) -> io::Result<Vec<u8>> {
        self.limits.borrow_mut().push(limit);
        if self.size > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "file too large",
            ));
        }
        panic!("a {} byte file must never be read whole", self.size);
    }

    fn exists(&self, _path: &Path) -> bool {
        true
    }

    fn root(&self) -> &Path {
        Path::new("/work")
    }
}

/// The library asks the loader for at most [`MAX_FILE_BYTES`], so a 100 MB
/// file is refused by its size, before a byte of it is read.
#[test]
fn hundred_megabyte_file_is_refused_by_size() {
    let loader = SizeOnlyLoader {
        size: 100 * 1024 * 1024,
        limits: RefCell::new(Vec::new()),
    };

    let error = timed("a 100 MB file", || single_error("huge.yaml", &loader));

    assert_eq!(error.code, "file::too-large");
    assert_eq!(
        error.message,
        format!(
            "huge.yaml is larger than {MAX_FILE_BYTES} bytes, the most baton reads for a workflow file"
        )
    );
    assert_eq!(*loader.limits.borrow(), vec![MAX_FILE_BYTES]);
}

/// The same through [`MemoryLoader`], with a real 100 MB description.
#[test]
fn hundred_megabyte_description_is_too_large() {
    let mut text = String::with_capacity(100 * 1024 * 1024 + 1024);
    text.push_str(HEADER.replace("description: d\n", "description: ").as_str());
    text.push_str(&"x".repeat(100 * 1024 * 1024));
    let loader = MemoryLoader::new().with("huge.yaml", &text);
    drop(text);

    let error = timed("a 100 MB description", || {
        single_error("huge.yaml", &loader)
    });

    assert_eq!(error.code, "file::too-large");
    assert!(
        error.message.contains("huge.yaml is larger than"),
        "{}",
        error.message
    );
}

/// A loader that ignores the limit still cannot make the parser read an
/// oversized text: the parser checks the size itself.
#[test]
fn oversized_text_from_a_careless_loader_is_refused() {
    struct CarelessLoader(Vec<u8>);
    impl Loader for CarelessLoader {
        fn read(&self, _path: &Path, _limit: usize) -> io::Result<Vec<u8>> {
            Ok(self.0.clone())
        }
        fn exists(&self, _path: &Path) -> bool {
            true
        }
        fn root(&self) -> &Path {
            Path::new("/work")
        }
    }
    let mut text = String::from("# ");
    text.push_str(&"#".repeat(MAX_FILE_BYTES));
    let size = text.len();
    let loader = CarelessLoader(text.into_bytes());

    let error = timed("an oversized text", || {
        single_error("careless.yaml", &loader)
    });

    assert_eq!(error.code, "file::too-large");
    assert_eq!(
        error.message,
        format!(
            "workflow file is {size} bytes; baton reads workflow files of at most {MAX_FILE_BYTES} bytes"
        )
    );
}

// --- 3. deep nesting -----------------------------------------------------

/// The stack of a thread spawned without a size, such as a test thread:
/// 2 MiB. The library must be safe there, not only on an 8 MiB main thread.
const SMALL_STACK: usize = 2 * 1024 * 1024;

/// Runs `work` on a thread with a [`SMALL_STACK`]. A stack overflow aborts
/// the whole test binary, which fails the run as loudly as it should.
fn on_small_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(work)
        .expect("spawning a thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A valid workflow with `metadata: {a: VALUE}`: the value sits three
/// levels below the document root.
fn with_metadata(value: &str) -> String {
    format!("{HEADER}{}metadata:\n  a:{value}\n", stage("one", &[]))
}

/// `levels` block mappings nested under each other, one more space of
/// indentation per level, as the value of `a` in [`with_metadata`].
fn indented_mappings(levels: usize) -> String {
    let mut value = String::new();
    for level in 0..levels {
        value.push('\n');
        value.push_str(&" ".repeat(level + 3));
        value.push_str("a:");
    }
    value.push_str(" x");
    value
}

/// Asserts that `text` fails with the depth budget, in time, on a small
/// stack.
fn assert_too_deep(what: &'static str, text: String) {
    let error = on_small_stack(move || {
        let loader = MemoryLoader::new().with("deep.yaml", &text);
        timed(what, || single_error("deep.yaml", &loader))
    });

    assert_eq!(error.code, "yaml::syntax", "{what}: {}", error.message);
    assert!(
        error.message.starts_with("invalid YAML: ") && error.message.contains("depth"),
        "{what}: {}",
        error.message
    );
    assert!(error.line_column().is_some(), "{what}: no place");
}

#[test]
fn deep_flow_sequences_hit_the_depth_budget() {
    let depth = 10_000;
    let value = format!(" {}x{}", "[".repeat(depth), "]".repeat(depth));
    assert_too_deep("10 000 nested flow sequences", with_metadata(&value));
}

#[test]
fn deep_flow_mappings_hit_the_depth_budget() {
    let depth = 10_000;
    let value = format!(" {}x{}", "{a: ".repeat(depth), "}".repeat(depth));
    assert_too_deep("10 000 nested flow mappings", with_metadata(&value));
}

#[test]
fn deep_block_sequences_hit_the_depth_budget() {
    let value = format!("\n    {}x", "- ".repeat(10_000));
    assert_too_deep("10 000 nested block sequences", with_metadata(&value));
}

/// 10 000 indented levels would be a 50 MB file, refused by its size, so
/// 2 000 levels (2 MB) stand in for them.
///
/// Block mappings reach the recursive deserializer without the textual
/// pre-checks in `node::parse`; a debug build spends about 35 KiB of stack per
/// level, so the depth budget must stay low enough for a 2 MiB thread stack.
#[test]
fn deep_block_mappings_hit_the_depth_budget() {
    assert_too_deep(
        "2 000 nested block mappings",
        with_metadata(&indented_mappings(2_000)),
    );
}

/// Nesting right at the budget is accepted. Parsing it is the deepest
/// recursion an accepted file can cause, so it must fit a small stack.
#[test]
fn nesting_at_the_budget_is_accepted_on_a_small_stack() {
    let levels = MAX_DEPTH - 3;
    let flow = format!(" {}x{}", "[".repeat(levels), "]".repeat(levels));
    for (what, text) in [
        ("block mappings", with_metadata(&indented_mappings(levels))),
        ("flow sequences", with_metadata(&flow)),
    ] {
        let stages = on_small_stack(move || {
            let loader = MemoryLoader::new().with("nested.yaml", &text);
            plan("nested.yaml", &loader).stages.len()
        });
        assert_eq!(stages, 1, "{what}");
    }
}

/// Nesting well inside the budget is accepted on a small stack even in a
/// debug build: the limit is not so tight that ordinary structure trips it.
#[test]
fn nesting_within_the_budget_is_accepted_on_a_small_stack() {
    let levels = MAX_DEPTH / 2;
    let stages = on_small_stack(move || {
        let loader =
            MemoryLoader::new().with("nested.yaml", &with_metadata(&indented_mappings(levels)));
        plan("nested.yaml", &loader).stages.len()
    });
    assert_eq!(stages, 1);
}

// --- 4. 10 000 stages ----------------------------------------------------

#[test]
fn ten_thousand_layered_stages_compile_into_sorted_groups() {
    let loader = MemoryLoader::new().with("layered.yaml", &layered_workflow());

    let plan = timed("10 000 layered stages", || plan("layered.yaml", &loader));

    assert_eq!(plan.stages.len(), LAYERS * WIDTH);
    assert_eq!(plan.groups.len(), LAYERS);
    assert_eq!(plan.levels, LAYERS);
    assert_eq!(plan.max_parallelism(), WIDTH);
    for (layer, group) in plan.groups.iter().enumerate() {
        assert!(!group.gate);
        // Each group is one layer, its members in name order, and the
        // indices run through the groups in order.
        let expected_indices: Vec<usize> = (layer * WIDTH..(layer + 1) * WIDTH).collect();
        assert_eq!(group.stages, expected_indices, "group {layer}");
        let names: Vec<&str> = group
            .stages
            .iter()
            .map(|&index| plan.stages[index].name())
            .collect();
        let expected_names: Vec<String> =
            (0..WIDTH).map(|index| layered_name(layer, index)).collect();
        assert_eq!(names, expected_names, "group {layer}");
    }
    for (index, stage) in plan.stages.iter().enumerate() {
        let layer = index / WIDTH;
        let slot = index % WIDTH;
        assert_eq!(stage.index, index);
        assert_eq!(stage.group, layer);
        assert_eq!(stage.level, layer);
        let expected_depends_on = if layer == 0 {
            Vec::new()
        } else {
            vec![
                (layer - 1) * WIDTH + slot,
                (layer - 1) * WIDTH + (slot + 1) % WIDTH,
            ]
        };
        assert_eq!(
            stage.depends_on,
            expected_depends_on,
            "stage {}",
            stage.name()
        );
    }
}

// --- 5. include cycles ---------------------------------------------------

#[test]
fn fragments_including_each_other_are_a_cycle() {
    let main = format!(
        "{HEADER}{}include:\n  - {{path: frags/one.yaml, prefix: one}}\n",
        stage("start", &[])
    );
    let loader = MemoryLoader::new()
        .with("main.yaml", &main)
        .with("frags/one.yaml", &fragment(&[("frags/two.yaml", "two")]))
        .with("frags/two.yaml", &fragment(&[("frags/one.yaml", "back")]));

    let error = timed("a two-fragment cycle", || {
        single_error("main.yaml", &loader)
    });

    assert_eq!(error.code, "include::cycle");
    assert_eq!(
        error.message,
        "circular include detected — 'frags/one.yaml' is already being expanded (cycle: frags/one.yaml -> frags/two.yaml -> frags/one.yaml)"
    );
    // The error points at the include entry that closes the cycle.
    assert_eq!(error.file(), Some("frags/two.yaml"));
}

#[test]
fn a_fragment_including_itself_is_a_cycle() {
    let main = format!(
        "{HEADER}{}include:\n  - {{path: self.yaml, prefix: s}}\n",
        stage("start", &[])
    );
    let loader = MemoryLoader::new()
        .with("main.yaml", &main)
        .with("self.yaml", &fragment(&[("self.yaml", "again")]));

    let error = timed("a self-including fragment", || {
        single_error("main.yaml", &loader)
    });

    assert_eq!(error.code, "include::cycle");
    assert_eq!(
        error.message,
        "circular include detected — 'self.yaml' is already being expanded (cycle: self.yaml -> self.yaml)"
    );
    assert_eq!(error.file(), Some("self.yaml"));
    assert_eq!(error.line_column().map(|(line, _)| line), Some(9));
}

// --- 6. non-UTF-8 bytes --------------------------------------------------

#[test]
fn invalid_utf8_names_offset_and_line() {
    let mut bytes = b"name: hostile\nversion: \"1\"\ndescription: caf".to_vec();
    let offset = bytes.len();
    bytes.extend_from_slice(b"\xe9 latin-1\n");
    let loader = MemoryLoader::new().with_bytes("latin1.yaml", &bytes);

    let error = timed("a latin-1 file", || single_error("latin1.yaml", &loader));

    assert_eq!(error.code, "file::encoding");
    assert_eq!(
        error.message,
        format!("latin1.yaml is not valid UTF-8 (invalid byte at offset {offset}, line 3)")
    );
}

/// A fragment with invalid bytes is reported at the include that names it.
#[test]
fn invalid_utf8_in_a_fragment_points_at_the_include() {
    let main = format!(
        "{HEADER}{}include:\n  - {{path: bad.yaml, prefix: b}}\n",
        stage("start", &[])
    );
    let loader = MemoryLoader::new()
        .with("main.yaml", &main)
        .with_bytes("bad.yaml", b"fragment: true\n\xff\xfe\n");

    let error = timed("a fragment with invalid bytes", || {
        single_error("main.yaml", &loader)
    });

    assert_eq!(error.code, "file::encoding");
    assert_eq!(
        error.message,
        "bad.yaml is not valid UTF-8 (invalid byte at offset 15, line 2)"
    );
    assert_eq!(error.file(), Some("main.yaml"));
    assert_eq!(error.line_column().map(|(line, _)| line), Some(13));
}

// --- 7. duplicate keys ---------------------------------------------------

#[test]
fn duplicate_top_level_key_is_an_error() {
    let text = format!("{HEADER}{}name: again\n", stage("one", &[]));
    let loader = MemoryLoader::new().with("dup.yaml", &text);

    let error = timed("a duplicate top-level key", || {
        single_error("dup.yaml", &loader)
    });

    assert_eq!(error.code, "yaml::syntax");
    assert!(error.message.contains("duplicate"), "{}", error.message);
    assert_eq!(error.line_column().map(|(line, _)| line), Some(12));
}

#[test]
fn duplicate_stage_key_is_an_error() {
    let text = format!("{HEADER}{}    kind: review\n", stage("one", &[]));
    let loader = MemoryLoader::new().with("dup.yaml", &text);

    let error = timed("a duplicate stage key", || {
        single_error("dup.yaml", &loader)
    });

    assert_eq!(error.code, "yaml::syntax");
    assert!(error.message.contains("duplicate"), "{}", error.message);
    assert_eq!(error.line_column().map(|(line, _)| line), Some(12));
}

// --- 8. include bomb -----------------------------------------------------

/// A [`MemoryLoader`] that counts the files read.
struct CountingLoader {
    inner: MemoryLoader,
    reads: RefCell<usize>,
}

impl Loader for CountingLoader {
    fn read(&self, path: &Path, limit: usize) -> io::Result<Vec<u8>> {
        *self.reads.borrow_mut() += 1;
        self.inner.read(path, limit)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn root(&self) -> &Path {
        self.inner.root()
    }
}

/// Fragment `level` includes fragment `level - 1` ten times under ten
/// prefixes, so fragment 6 would expand to more than a million stages. The
/// stage limit must stop the expansion long before it is complete, and each
/// fragment must be read once however often it is included: reading it per
/// include made this bomb cost 111 112 parses (3.3 s in a release build).
#[test]
fn include_bomb_hits_the_stage_limit() {
    let prefixes = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"];
    let mut files = MemoryLoader::new().with("bomb/f0.yaml", &fragment(&[]));
    for level in 1..=6 {
        let inner = format!("bomb/f{}.yaml", level - 1);
        let includes: Vec<(&str, &str)> = prefixes
            .iter()
            .map(|prefix| (inner.as_str(), *prefix))
            .collect();
        files = files.with(&format!("bomb/f{level}.yaml"), &fragment(&includes));
    }
    let main = format!(
        "{HEADER}{}include:\n  - {{path: bomb/f6.yaml, prefix: top}}\n",
        stage("start", &[])
    );
    let loader = CountingLoader {
        inner: files.with("main.yaml", &main),
        reads: RefCell::new(0),
    };

    let error = timed("the include bomb", || single_error("main.yaml", &loader));

    assert_eq!(error.code, "include::too-many-stages");
    assert!(
        error.message.starts_with("the workflow") && error.message.contains("stages"),
        "{}",
        error.message
    );
    // The workflow and its seven fragments.
    assert_eq!(*loader.reads.borrow(), 8);
}

/// The chain of fragments for [`nested_include_bomb_is_bounded_as_a_whole`]:
/// `b5` expands to 44 445 stages (four copies of `b4`, which holds ten copies
/// of `b3`, and so on), under the stage limit on its own. `d0` includes `b5`,
/// and each `d{k}` includes `b5` and then `d{k-1}`, 24 levels deep.
fn nested_bomb_files() -> Vec<(String, String)> {
    let prefixes = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"];
    let mut files = vec![("chain/b0.yaml".to_owned(), fragment(&[]))];
    for level in 1..=5 {
        let inner = format!("chain/b{}.yaml", level - 1);
        let copies = if level == 5 { 4 } else { 10 };
        let includes: Vec<(&str, &str)> = prefixes[..copies]
            .iter()
            .map(|prefix| (inner.as_str(), *prefix))
            .collect();
        files.push((format!("chain/b{level}.yaml"), fragment(&includes)));
    }
    files.push((
        "chain/d0.yaml".to_owned(),
        fragment(&[("chain/b5.yaml", "b")]),
    ));
    for level in 1..=24 {
        let previous = format!("chain/d{}.yaml", level - 1);
        files.push((
            format!("chain/d{level}.yaml"),
            fragment(&[("chain/b5.yaml", "b"), (previous.as_str(), "d")]),
        ));
    }
    files
}

/// Every level of [`nested_bomb_files`] stays under the stage limit on its
/// own, but while `d{k}` waits for `d{k-1}` it already holds 44 445 stages,
/// so 24 levels hold a million stages before any level sees too many. The
/// limit must count every stage held, not only one level's.
#[test]
fn nested_include_bomb_is_bounded_as_a_whole() {
    let mut loader = MemoryLoader::new();
    for (path, text) in nested_bomb_files() {
        loader = loader.with(&path, &text);
    }
    let main = format!(
        "{HEADER}{}include:\n  - {{path: chain/d24.yaml, prefix: top}}\n",
        stage("start", &[])
    );
    let loader = loader.with("main.yaml", &main);

    let error = timed("the nested include bomb", || {
        single_error("main.yaml", &loader)
    });

    assert_eq!(error.code, "include::too-many-stages");
}
