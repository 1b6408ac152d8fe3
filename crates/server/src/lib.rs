//! baton's HTTP server, `baton serve`: a JSON API and server-rendered
//! pages over the store, for people watching and deciding on runs from a
//! browser and for scripts.
//!
//! It binds loopback unless told otherwise. Every request passes
//! [`guard`] first: the `Host` header must name this server (a page on
//! another site that resolves its own name to 127.0.0.1 cannot read
//! anything), a `POST` carrying an `Origin` must come from this server's
//! own pages, and every response carries headers that forbid inline
//! script, framing and sniffing. Stage names, item keys, findings and
//! errors come from workflows and agents, so every string a page shows
//! goes through [`html::escape`].
//!
//! Not here: printing and exit codes (baton-cli), SQL (baton-store),
//! deciding gates (baton-engine's `gate`, which the API calls).

#![forbid(unsafe_code)]

mod api;
mod app;
mod auth;
mod dag;
mod decisions;
mod delta;
mod error;
mod events;
mod extract;
mod gate_page;
mod governance_page;
mod guard;
mod hosts;
mod html;
pub mod mcp;
mod openapi;
mod pages;
mod queue_page;
mod routes;
mod runs_page;
mod stage_page;
mod task_board;
mod task_page;
pub mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;

use app::App;
pub use error::chain;

use baton_store::Store;
use tokio::net::TcpListener;

/// What a server needs besides its listener.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Host names, besides loopback's and the one bound, that requests may
    /// name in their `Host` header (the machine's name when bound to a
    /// wildcard address).
    pub allow_hosts: Vec<String>,
    /// The project directory whose `tasks/` the task board shows (the one
    /// holding the store's `.baton/`); without one the board says so.
    pub project: Option<std::path::PathBuf>,
}

/// A listener bound and not yet serving.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    address: SocketAddr,
    /// The host part of what was asked for (`127.0.0.1`, `localhost`,
    /// `0.0.0.0`, a machine's name), as requests may name it.
    name: String,
}

/// Binds `bind` (`HOST:PORT`; port 0 picks a free one).
///
/// # Errors
///
/// The address does not resolve or cannot be bound.
pub async fn bind(bind: &str) -> std::io::Result<Bound> {
    let listener = TcpListener::bind(bind).await?;
    let address = listener.local_addr()?;
    let name = bind
        .rsplit_once(':')
        .map_or(bind, |(host, _)| host)
        .to_owned();
    Ok(Bound {
        listener,
        address,
        name,
    })
}

impl Bound {
    /// The address the listener is bound to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The URL to open: the address bound, or loopback's of the same
    /// family when bound to a wildcard.
    pub fn url(&self) -> String {
        let port = self.address.port();
        match self.address.ip() {
            ip if !ip.is_unspecified() => format!("http://{}/", self.address),
            std::net::IpAddr::V4(_) => format!("http://127.0.0.1:{port}/"),
            std::net::IpAddr::V6(_) => format!("http://[::1]:{port}/"),
        }
    }

    /// Serves until `shutdown` resolves; requests under way are finished.
    ///
    /// # Errors
    ///
    /// Accepting connections failed.
    pub async fn serve(
        self,
        store: Store,
        options: Options,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let app = Arc::new(App {
            store,
            hosts: hosts::Hosts::new(&self.name, self.address.port(), &options.allow_hosts),
            loopback: self.address.ip().is_loopback(),
            stopping: stopping.clone(),
            watchers: crate::app::Watchers::default(),
            tasks: options
                .project
                .as_deref()
                .map(baton_engine::tasks::Tasks::new),
        });
        // Event streams never end by themselves: they are told to, or a
        // graceful shutdown would wait for every open page to close.
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop.send(true);
        });
        let mut stopped = stopping;
        axum::serve(self.listener, routes::router(app))
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
            .await
    }
}
