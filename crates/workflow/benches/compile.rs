//! Compile-time benchmarks: every runnable workflow of the reference corpus,
//! read from disk as `baton compile` reads it, and a generated 10 000-stage
//! layered workflow held in memory.
//!
//! Run with `cargo bench -p baton-workflow`. The corpus is
//! `$BATON_COMPAT_DIR`, else `../shared/compat` next to the checkout; when it
//! is missing its benchmarks are skipped with a message.

#![allow(
    missing_docs,
    clippy::print_stderr,
    reason = "a benchmark binary, which says on stderr why it skips"
)]

use std::fs::File;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_test_support::layered::{LAYERS, WIDTH, workflow as layered_workflow};
use baton_workflow::compile::Options;
use baton_workflow::{Loader, MemoryLoader};
use criterion::{Criterion, criterion_group, criterion_main};

/// Reads files from disk relative to a root, the way the CLI's loader does:
/// a file over the limit is refused by its size before it is read.
struct DiskLoader {
    root: PathBuf,
}

impl Loader for DiskLoader {
    fn read(&self, path: &Path, limit: usize) -> io::Result<Vec<u8>> {
        let file = File::open(self.root.join(path))?;
        let size = file.metadata()?.len();
        if size > limit as u64 {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "file too large",
            ));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
        if bytes.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "file too large",
            ));
        }
        Ok(bytes)
    }

    fn exists(&self, path: &Path) -> bool {
        self.root.join(path).is_file()
    }

    fn root(&self) -> &Path {
        &self.root
    }
}

/// The reference corpus directory, if it is there.
fn compat_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("BATON_COMPAT_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/compat"),
        PathBuf::from,
    );
    dir.join("workflows").is_dir().then_some(dir)
}

/// Every `.yaml` file under `dir`, as paths relative to `root`.
fn yaml_files(root: &Path, dir: &Path, found: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            yaml_files(root, &path, found);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "yaml")
        {
            let relative = path.strip_prefix(root).expect("found under the root");
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}

/// Loads and compiles one workflow; returns its number of stages so the
/// work cannot be optimised away.
fn compile(path: &str, loader: &dyn Loader) -> usize {
    let loaded = baton_workflow::load(path, loader)
        .unwrap_or_else(|failure| panic!("{path} does not load: {:?}", failure.errors));
    let plan = baton_workflow::compile(&loaded, &Options::default(), loader)
        .unwrap_or_else(|failure| panic!("{path} does not compile: {:?}", failure.errors));
    plan.stages.len()
}

/// The corpus's runnable workflows: every file except fragments, which
/// cannot be compiled on their own. A runnable workflow that fails stops the
/// benchmark, since its time would be meaningless.
fn runnable(loader: &DiskLoader) -> Vec<String> {
    let mut files = Vec::new();
    yaml_files(&loader.root, &loader.root.join("workflows"), &mut files);
    files.sort();
    files.retain(|path| match baton_workflow::load(path, loader) {
        Ok(_) => true,
        Err(failure) if failure.errors.iter().any(|error| error.code == "fragment") => false,
        Err(failure) => panic!("{path} does not load: {:?}", failure.errors),
    });
    files
}

fn corpus(criterion: &mut Criterion) {
    let Some(root) = compat_dir() else {
        eprintln!(
            "the compat corpus is missing (set BATON_COMPAT_DIR): skipping the corpus benchmarks"
        );
        return;
    };
    let loader = DiskLoader { root };
    let workflows = runnable(&loader);
    let mut group = criterion.benchmark_group("corpus");
    // A hundred samples of the whole corpus take about six seconds.
    group.measurement_time(Duration::from_secs(8));
    group.bench_function(
        format!("load+compile all {} runnable workflows", workflows.len()),
        |bench| {
            bench.iter(|| {
                workflows
                    .iter()
                    .map(|path| compile(path, &loader))
                    .sum::<usize>()
            });
        },
    );
    let review = "workflows/code/review-and-fix.yaml";
    if workflows.iter().any(|path| path == review) {
        group.bench_function("load+compile code/review-and-fix", |bench| {
            bench.iter(|| compile(review, &loader));
        });
    }
    group.finish();
}

fn large(criterion: &mut Criterion) {
    let loader = MemoryLoader::new().with("layered.yaml", &layered_workflow());
    assert_eq!(compile("layered.yaml", &loader), LAYERS * WIDTH);
    let mut group = criterion.benchmark_group("large");
    // One iteration takes well over a hundred milliseconds: ten samples in
    // ten seconds keep the run short without criterion asking for more time.
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("load+compile 10 000 layered stages", |bench| {
        bench.iter(|| compile("layered.yaml", &loader));
    });
    group.finish();
}

criterion_group!(benches, corpus, large);
criterion_main!(benches);
