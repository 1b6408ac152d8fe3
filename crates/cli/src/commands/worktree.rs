//! `baton worktree list|prune`: the branches and worktrees of isolated
//! stages (`isolation: worktree`).

use super::errors::chain;
use super::runtime::{block_on_exit, open_store};
use crate::args::worktree::{WorktreeArgs, WorktreeCommand};
use crate::{exit_code, output};

/// Runs a `baton worktree` subcommand.
pub(crate) fn run(command: &WorktreeCommand) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let project = super::project_dir();
        let (WorktreeCommand::List(args) | WorktreeCommand::Prune(args)) = command;
        let run = match &args.run {
            Some(reference) => Some(super::run_ref::resolve(&store, reference).await?),
            None => None,
        };
        let failed = |error| failed(&error);
        match command {
            WorktreeCommand::List(args) => {
                let entries = baton_engine::list_worktrees(&store, &project, run.as_deref()).await;
                list(&entries.map_err(failed)?, args);
            }
            WorktreeCommand::Prune(args) => {
                let pruned = baton_engine::prune_worktrees(&store, &project, run.as_deref()).await;
                prune(&pruned.map_err(failed)?, args);
            }
        }
        Ok(exit_code::SUCCESS)
    })
}

fn failed(error: &baton_engine::AdminError) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    match error {
        baton_engine::AdminError::Store(_) => exit_code::STORE_UNAVAILABLE,
        _ => exit_code::INVALID_WORKFLOW,
    }
}

fn list(entries: &[baton_engine::WorktreeEntry], args: &WorktreeArgs) {
    output::print(args.format.format(), entries, || {
        if entries.is_empty() {
            output::stderr_line("No baton branches here");
        }
        let header = ["BRANCH", "MERGED", "TARGET", "RUN", "WORKTREE"];
        output::table_of(&header, entries, |entry| {
            vec![
                entry.branch.clone(),
                if entry.merged { "merged" } else { "not merged" }.to_owned(),
                entry.target.clone().unwrap_or_else(|| "-".to_owned()),
                entry.run_status.clone().unwrap_or_else(|| "-".to_owned()),
                entry
                    .worktree
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |path| path.display().to_string()),
            ]
        })
    });
}

fn prune(pruned: &baton_engine::Pruned, args: &WorktreeArgs) {
    output::print(args.format.format(), pruned, || {
        let mut lines = Vec::new();
        for path in &pruned.removed_worktrees {
            lines.push(format!("removed worktree {}", path.display()));
        }
        for branch in &pruned.deleted_branches {
            lines.push(format!("deleted branch {branch}"));
        }
        for (branch, why) in &pruned.kept {
            lines.push(format!("kept {branch}: {why}"));
        }
        if lines.is_empty() {
            lines.push("nothing to prune".to_owned());
        }
        format!("{}\n", lines.join("\n"))
    });
}
