//! Compile-time benchmarks: every runnable workflow of the reference corpus
//! (read from `$BATON_COMPAT_DIR` or `../shared/compat`) and a generated
//! 10 000-stage layered workflow.
//!
//! Run with `cargo bench -p baton-workflow`.

#![allow(missing_docs, clippy::print_stderr, reason = "a benchmark binary")]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use baton_workflow::compile::Options;
use baton_workflow::{Loader, MemoryLoader};
use criterion::{Criterion, criterion_group, criterion_main};

/// Loads every corpus file into memory once, so the benchmark measures
/// parsing and compiling, not the disk.
fn corpus() -> Option<(MemoryLoader, Vec<String>)> {
    let dir = std::env::var_os("BATON_COMPAT_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/compat"),
        PathBuf::from,
    );
    if !dir.join("workflows").is_dir() {
        return None;
    }
    let mut loader = MemoryLoader::new();
    let mut runnable = Vec::new();
    let mut stack = vec![dir.join("workflows")];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "yaml")
            {
                let relative = path.strip_prefix(&dir).ok()?.to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&path).ok()?;
                if !text.lines().any(|line| line.starts_with("fragment:")) {
                    runnable.push(relative.clone());
                }
                loader = loader.with(&relative, &text);
            }
        }
    }
    runnable.sort();
    Some((loader, runnable))
}

/// 100 layers of 100 inline stages, each depending on two of the layer before.
fn layered(layers: usize, width: usize) -> String {
    let mut text = String::from(
        "name: layered\nversion: \"1\"\ndescription: d\ntrigger:\n  source: manual\nstages:\n",
    );
    for layer in 0..layers {
        for index in 0..width {
            let _ = write!(
                text,
                "  - name: s{layer:03}-{index:03}\n    kind: execute\n    executor: inline\n    script: \"true\"\n    description: stage\n"
            );
            if layer > 0 {
                let _ = writeln!(
                    text,
                    "    depends_on: [s{:03}-{index:03}, s{:03}-{:03}]",
                    layer - 1,
                    layer - 1,
                    (index + 1) % width
                );
            }
        }
    }
    text
}

fn compile_one(path: &str, loader: &dyn Loader) -> usize {
    let loaded = baton_workflow::load(path, loader).expect("the workflow loads");
    let plan = baton_workflow::compile(&loaded, &Options::default(), loader)
        .expect("the workflow compiles");
    plan.stages.len()
}

fn benchmarks(criterion: &mut Criterion) {
    match corpus() {
        Some((loader, runnable)) => {
            criterion.bench_function("compile every corpus workflow (30)", |bench| {
                bench.iter(|| {
                    runnable
                        .iter()
                        .map(|path| compile_one(path, &loader))
                        .sum::<usize>()
                });
            });
        }
        None => eprintln!("compat corpus not found: skipping the corpus benchmark"),
    }
    let loader = MemoryLoader::new().with("layered.yaml", &layered(100, 100));
    let mut group = criterion.benchmark_group("large");
    group.sample_size(10);
    group.bench_function("compile a 10 000-stage layered workflow", |bench| {
        bench.iter(|| compile_one("layered.yaml", &loader));
    });
    group.finish();
}

criterion_group!(benches, benchmarks);
criterion_main!(benches);
