//! `baton completions SHELL`: a completion script generated from the same
//! argument definitions the binary parses with, so it never falls behind.

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs};
use crate::{exit_code, output};

/// Prints the script for the shell asked for.
pub(crate) fn run(args: &CompletionsArgs) -> u8 {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "baton", &mut script);
    output::stdout(&String::from_utf8_lossy(&script));
    exit_code::SUCCESS
}
