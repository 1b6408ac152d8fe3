//! `baton token create|list|revoke`: people's tokens for `baton serve`,
//! a thin adapter over `baton_server::tokens`.

use baton_engine::workspace::utc;
use baton_server::tokens::{self, Error};
use serde_json::json;

use super::errors::chain;
use super::runtime::{block_on_exit, open_store};
use crate::args::serve::TokenCommand;
use crate::{exit_code, output};

/// Runs a `baton token` subcommand.
pub(crate) fn run(command: &TokenCommand) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let failure = |error: Error| failure(&error);
        match command {
            TokenCommand::Create(args) => {
                let now = baton_engine::clock::now_ms();
                let token = tokens::create(&store, &args.name, now)
                    .await
                    .map_err(failure)?;
                output::stdout(&format!("{token}\n"));
                output::stderr_line(&format!(
                    "token for {} made; it is shown this once (only its hash is kept): send it as `Authorization: Bearer TOKEN`, or paste it at /login",
                    args.name
                ));
            }
            TokenCommand::List(format) => {
                let rows = tokens::list(&store).await.map_err(failure)?;
                let value: Vec<_> = rows
                    .iter()
                    .map(|row| json!({"name": row.name, "created_at": utc(row.created_at)}))
                    .collect();
                output::print(format.format(), &value, || {
                    if rows.is_empty() {
                        output::stderr_line(
                            "No tokens yet; `baton token create --name NAME` makes one",
                        );
                    }
                    output::table_of(&["name", "created_at"], &rows, |row| {
                        vec![row.name.clone(), utc(row.created_at)]
                    })
                });
            }
            TokenCommand::Revoke(args) => {
                tokens::revoke(&store, &args.name).await.map_err(failure)?;
                output::stderr_line(&format!("revoked the token of {}", args.name));
            }
        }
        Ok(exit_code::SUCCESS)
    })
}

/// Prints a token error and picks its exit code.
fn failure(error: &Error) -> u8 {
    output::stderr_line(&format!("error: {}", chain(error)));
    match error {
        Error::Store(_) | Error::Random(_) => exit_code::STORE_UNAVAILABLE,
        Error::Exists(_) => exit_code::REFUSED,
        Error::NoSuchName(_) | Error::BadName(_) => exit_code::USAGE,
    }
}
