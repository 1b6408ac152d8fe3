//! `baton agents …`.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::format::FormatArgs;

/// `baton agents …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AgentsCommand {
    /// Run each profile's version probe and report which are installed and
    /// which lack their credentials; with `--probe`, also ask each one for a
    /// one-word answer, as a stage would run it. Exits 3 when a profile a
    /// role is mapped to in baton.toml cannot run here (or a probe fails).
    #[command(after_help = "\
With --probe, each profile probed runs as a read-only stage would: the same \
arguments, environment and permissions, in the project directory (contained, \
so nothing it writes reaches the repository; where containment is not \
available, in an empty temporary directory instead), asked to \"Reply with \
the single word OK.\". An `openai-chat` profile gets one chat request. The \
probes run at the same time; each reports ok with its latency and tokens, or \
the CLI's own error. Without PROFILE, the profiles baton.toml maps a role to \
are probed, once per model the roles ask for.

Examples:
  baton agents check
  baton agents check --format json
  baton agents check --probe
  baton agents check --probe claude codex --timeout 30s
  baton agents check --probe --format json")]
    Check(AgentsCheckArgs),
}

/// `baton agents check`.
#[derive(Debug, Args)]
pub(crate) struct AgentsCheckArgs {
    /// Only these profiles (default: every profile). With --probe, the
    /// profiles to probe (default: those baton.toml maps a role to).
    #[arg(value_name = "PROFILE")]
    pub(crate) profiles: Vec<String>,
    /// Send each profile a one-word request, run as a stage would run it,
    /// and report ok, latency and tokens, or the CLI's own error.
    #[arg(long)]
    pub(crate) probe: bool,
    /// How long each probe may take (90s, 2m, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration, requires = "probe")]
    pub(crate) timeout: Duration,
    #[command(flatten)]
    pub(crate) format: FormatArgs,
}

pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    match baton_executor::profile::parse_duration(text) {
        Some(duration) if !duration.is_zero() => Ok(duration),
        Some(_) => Err("the timeout must be longer than zero".to_owned()),
        None => Err(format!(
            "`{text}` is not a duration: write a number with a unit, such as 90s, 2m or 500ms"
        )),
    }
}
