//! `baton serve`: the dashboard and JSON API (`baton_server`), until
//! SIGINT or SIGTERM.

use super::errors::chain;
use super::runtime::{block_on_exit, open_store};
use crate::args::serve::ServeArgs;
use crate::{exit_code, output};

/// Binds, prints the URL (one line, so a script can read the port), and
/// serves until told to stop.
pub(crate) fn run(args: &ServeArgs) -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let bound = baton_server::bind(&args.bind).await;
        let listening = bound.map_err(|error| format!("cannot listen on {}: {error}", args.bind));
        let bound = super::or_exit(listening, exit_code::USAGE)?;
        output::stdout(&format!("listening on {}\n", bound.url()));
        if !bound.address().ip().is_loopback() {
            output::stderr_line(
                "note: bound beyond loopback: every request needs a token (`baton token create --name NAME`)",
            );
        }
        let options = baton_server::Options {
            allow_hosts: args.allow_hosts.clone(),
            project: Some(super::project_dir()),
        };
        let served = bound.serve(store, options, stopped()).await;
        let served = served.map_err(|error| format!("the server stopped: {}", chain(&error)));
        super::or_exit(served, exit_code::USAGE)?;
        Ok(exit_code::SUCCESS)
    })
}

/// Resolves at SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = interrupt.recv() => {}
    }
}
