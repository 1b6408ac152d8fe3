//! `baton mcp`: baton's MCP server on stdin and stdout
//! (`baton_server::mcp`), until the client closes the session.

use super::errors::chain;
use super::runtime::{block_on_exit, open_store};
use crate::{exit_code, settings};

/// Serves one MCP session on stdio.
pub(crate) fn run() -> u8 {
    block_on_exit(async {
        let store = open_store().await?;
        let served = baton_server::mcp::serve_stdio(store, settings::mcp_context()).await;
        super::or_exit(served.map_err(|error| chain(&error)), exit_code::USAGE)?;
        Ok(exit_code::SUCCESS)
    })
}
