//! `baton serve`: the dashboard and JSON API (`baton_server`), until
//! SIGINT or SIGTERM.

use super::errors::chain;
use super::runtime::{block_on, open_store};
use crate::args::serve::ServeArgs;
use crate::{exit_code, output};

/// Binds, prints the URL (one line, so a script can read the port), and
/// serves until told to stop.
pub(crate) fn run(args: &ServeArgs) -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        let bound = match baton_server::bind(&args.bind).await {
            Ok(bound) => bound,
            Err(error) => {
                output::stderr_line(&format!("error: cannot listen on {}: {error}", args.bind));
                return exit_code::USAGE;
            }
        };
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
        match bound.serve(store, options, stopped()).await {
            Ok(()) => exit_code::SUCCESS,
            Err(error) => {
                output::stderr_line(&format!("error: the server stopped: {}", chain(&error)));
                exit_code::USAGE
            }
        }
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
