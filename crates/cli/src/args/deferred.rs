//! Building only the subcommand that was asked for.
//!
//! clap's derive builds every subcommand's arguments before it reads the
//! first word of the command line: for baton's two dozen commands that is a
//! noticeable part of a short command's start, paid on every start (and
//! by a run's quick stages on its critical path). Wrapping
//! a subcommand's arguments in [`Deferred`] hands clap a function to build
//! them with instead ([`clap::Command::defer`]), called only when that
//! subcommand is parsed or its help shown; names, about texts and examples
//! stay in the tree, so `baton --help` lists everything as before.

use std::ops::Deref;

use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};

/// A subcommand's arguments (or nested subcommands), built on first use.
#[derive(Debug)]
pub(crate) struct Deferred<T>(pub(crate) T);

impl<T> Deref for Deferred<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: Args> Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }

    fn augment_args(cmd: Command) -> Command {
        cmd.defer(|cmd| keeping_about(cmd, T::augment_args))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        cmd.defer(|cmd| keeping_about(cmd, T::augment_args_for_update))
    }
}

impl<T: Subcommand> Subcommand for Deferred<T> {
    fn augment_subcommands(cmd: Command) -> Command {
        cmd.defer(|cmd| keeping_about(cmd, T::augment_subcommands))
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        cmd.defer(|cmd| keeping_about(cmd, T::augment_subcommands_for_update))
    }

    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}

/// Adds the arguments with `augment`, keeping the about texts the command
/// had: the derive sets an arguments struct's (or a subcommand enum's) own
/// doc comment as the about text when it adds what it holds, and the
/// subcommand's doc comment, set after that without deferral, must still win.
fn keeping_about(cmd: Command, augment: fn(Command) -> Command) -> Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let cmd = augment(cmd);
    let cmd = match about {
        Some(about) => cmd.about(about),
        None => cmd.about(None::<&'static str>),
    };
    match long_about {
        Some(long_about) => cmd.long_about(long_about),
        None => cmd.long_about(None::<&'static str>),
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::args::Cli;

    #[test]
    fn the_whole_tree_still_builds_and_validates() {
        // Building recursively runs every deferred function and clap's
        // consistency checks on what they add.
        Cli::command().debug_assert();
    }

    #[test]
    fn a_subcommand_keeps_its_own_about_text_over_its_arguments_struct() {
        let mut cli = Cli::command();
        cli.build();
        let about = |name: &str| {
            let sub = cli.find_subcommand(name).expect("subcommand exists");
            sub.get_about().map(ToString::to_string).unwrap_or_default()
        };
        for (name, start) in [
            ("run", "Run a workflow"),
            ("parse", "Parse a workflow"),
            ("gate", "Human gates"),
        ] {
            assert!(about(name).starts_with(start), "{name}: {}", about(name));
        }
        let gate = cli.find_subcommand("gate").unwrap();
        assert!(gate.find_subcommand("approve").is_some());
        let run = cli.find_subcommand("run").unwrap();
        assert!(
            run.get_arguments()
                .any(|arg| arg.get_long() == Some("max-parallel"))
        );
    }

    #[test]
    fn a_subcommand_s_arguments_wait_until_it_is_built() {
        // What the deferral is for: the tree clap starts from holds each
        // subcommand's name and about text, not its arguments.
        let cli = Cli::command();
        let run = cli.find_subcommand("run").expect("run is listed");
        assert_eq!(run.get_arguments().count(), 0);
        assert!(run.get_about().is_some());
        let gate = cli.find_subcommand("gate").expect("gate is listed");
        assert_eq!(gate.get_subcommands().count(), 0);
    }

    #[test]
    fn parsing_one_command_fills_in_its_arguments() {
        let cli = Cli::try_parse_from(["baton", "run", "wf.yaml", "--max-parallel", "3"]).unwrap();
        let crate::args::Command::Run(args) = cli.command else {
            panic!("parsed as another command");
        };
        assert_eq!(args.max_parallel, 3);
    }
}
