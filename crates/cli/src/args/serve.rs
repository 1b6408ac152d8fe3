//! `baton serve` and `baton token …` arguments.

use clap::{Args, Subcommand};

use super::format::FormatArgs;

/// `baton serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on; port 0 picks a free one. Anything but a
    /// loopback address makes every request need a token.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:7777")]
    pub(crate) bind: String,
    /// Another host name requests may be addressed to (the machine's name,
    /// when bound to 0.0.0.0); repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allow_hosts: Vec<String>,
}

/// `baton token …`.
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Create a person's token and print it, once: only its hash is kept.
    #[command(after_help = "Examples:\n  baton token create --name alice")]
    Create(TokenCreateArgs),
    /// List the tokens: whose they are and when they were made.
    #[command(after_help = "Examples:\n  baton token list\n  baton token list --format json")]
    List(FormatArgs),
    /// Revoke a person's token: requests carrying it are refused from now on.
    #[command(after_help = "Examples:\n  baton token revoke alice")]
    Revoke(TokenRevokeArgs),
}

/// `baton token create`.
#[derive(Debug, Args)]
pub(crate) struct TokenCreateArgs {
    /// Whose token it is: what the server records as who decided.
    #[arg(long)]
    pub(crate) name: String,
}

/// `baton token revoke`.
#[derive(Debug, Args)]
pub(crate) struct TokenRevokeArgs {
    /// The name the token was created with.
    pub(crate) name: String,
}
