//! Every shipped example compiles and lints without a single warning.

use std::path::{Path, PathBuf};

use baton_test_support::workspace_root;

use crate::baton;

fn examples(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("examples directory is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            examples(&path, found);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "yaml")
        {
            found.push(path);
        }
    }
}

#[test]
fn every_example_compiles_and_lints_cleanly() {
    let root = workspace_root();
    let mut found = Vec::new();
    examples(&root.join("examples"), &mut found);
    assert!(!found.is_empty(), "examples/ holds at least the quickstart");
    for path in found {
        let relative = path
            .strip_prefix(&root)
            .expect("below the root")
            .to_string_lossy()
            .into_owned();
        let compile = baton(&root, &["compile", &relative, "--json"]);
        assert_eq!(compile.code, 0, "{relative}: {}", compile.stderr);
        let lint = baton(&root, &["lint", &relative, "--strict"]);
        assert_eq!(
            lint.code, 0,
            "{relative} has lint warnings:\n{}",
            lint.stderr
        );
    }
}
