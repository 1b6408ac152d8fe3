//! Every subcommand's `--help` shows at least one example: the tree is
//! walked from `baton --help` down, so a subcommand added later is covered
//! without touching this test.

use std::path::Path;

use crate::baton;

/// Every command that has no subcommands of its own, as its words
/// (`gate approve`), walked from `baton --help` down.
pub(crate) fn leaf_commands() -> Vec<String> {
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    let mut leaves = Vec::new();
    while let Some(path) = pending.pop() {
        let children = subcommands(&path);
        if children.is_empty() {
            leaves.push(path.join(" "));
        }
        for child in children {
            let mut child_path = path.clone();
            child_path.push(child);
            pending.push(child_path);
        }
    }
    leaves.sort();
    leaves
}

/// The subcommands `--help` of `path` lists (`help` aside).
fn subcommands(path: &[String]) -> Vec<String> {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let help = baton(Path::new("."), &args);
    assert_eq!(help.code, 0, "{args:?}: {}", help.stderr);
    help.stdout
        .lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommand_s_help_has_an_example() {
    let mut pending: Vec<Vec<String>> = subcommands(&[])
        .into_iter()
        .map(|name| vec![name])
        .collect();
    assert!(
        pending.len() > 20,
        "the walk found the commands: {pending:?}"
    );
    let mut walked = 0;
    let mut without = Vec::new();
    while let Some(path) = pending.pop() {
        walked += 1;
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = baton(Path::new("."), &args);
        assert_eq!(help.code, 0, "{args:?}: {}", help.stderr);
        let has_example = help.stdout.lines().any(|line| line.starts_with("Example"));
        if !has_example {
            without.push(path.join(" "));
        }
        for child in subcommands(&path) {
            let mut child_path = path.clone();
            child_path.push(child);
            pending.push(child_path);
        }
    }
    without.sort();
    assert!(
        without.is_empty(),
        "of {walked} subcommands, these show no example (a line starting `Example`) in --help: {without:?}"
    );
}
