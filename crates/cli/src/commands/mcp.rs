//! `baton mcp`: baton's MCP server on stdin and stdout
//! (`baton_server::mcp`), until the client closes the session.

use super::errors::chain;
use super::runtime::{block_on, open_store};
use crate::{exit_code, output, settings};

/// Serves one MCP session on stdio.
pub(crate) fn run() -> u8 {
    block_on(async {
        let store = match open_store().await {
            Ok(store) => store,
            Err(code) => return code,
        };
        match baton_server::mcp::serve_stdio(store, settings::mcp_context()).await {
            Ok(()) => exit_code::SUCCESS,
            Err(error) => {
                output::stderr_line(&format!("error: {}", chain(&error)));
                exit_code::USAGE
            }
        }
    })
}
