//! `GET /api/runs/{run}/events`: server-sent events carrying the run's
//! status object (as `GET /api/runs/{run}` answers it) each time it
//! changes: event `status` with the whole object first, then event
//! `delta` with what changed since the event before (see `delta`). A
//! follower that fell behind, or whose list of stages changed, gets a
//! whole `status` again; a reconnecting one starts with one.
//!
//! The store is polled: runs are driven by other processes, possibly on
//! other machines, and the store is the one place all of them write. One
//! watcher per run reads it every 250 ms while anybody follows the run and
//! hands each change to every follower, so fifty open pages cost the store
//! what one does; an event is sent only when the status object differs
//! from the last one, so a run sends at most one every 250 ms however
//! fast its stages change, and the last read (the run's end) is always
//! sent.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use baton_engine::view::Status;
use futures_util::Stream;
use tokio::sync::watch;

use crate::app::{App, Latest, Version};
use crate::delta::Previous;
use crate::error::ApiError;
use crate::extract::Params;
use crate::openapi::schemas::{self, ErrorBody};

/// How often the store is read for changes.
const POLL: Duration = Duration::from_millis(250);

/// The stream: the status at once, then each change, until the server
/// stops or the run is deleted.
#[utoipa::path(get, path = "/api/runs/{run}/events", tag = "runs", security((), ("bearer" = [])),
    params(("run" = String, Path, description = "The run's full id")),
    responses(
        (status = 200, description = "Server-sent events: `status`, carrying the object \
            `GET /api/runs/{run}` answers with, at once and each time it changes",
         body = schemas::StatusEvent,
         content_type = "text/event-stream"),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // An unknown run is a 404, not an empty stream.
    if !app.store.has_run(&run).await? {
        return Err(baton_store::Error::NoSuchRun(run).into());
    }
    let mut latest = follow(&app, &run);
    // The current status counts as a change for a new follower.
    latest.mark_changed();
    // The number of the last version sent, to know whether its delta is
    // the next.
    let stream = futures_util::stream::unfold((latest, None), |(mut latest, sent)| async move {
        loop {
            latest.changed().await.ok()?;
            let Some(version) = latest.borrow_and_update().clone() else {
                continue;
            };
            let event = match &version.delta {
                Some(delta) if sent.is_some_and(|sent: u64| sent + 1 == version.number) => {
                    Event::default().event("delta").data(delta)
                }
                _ => Event::default().event("status").data(&version.whole),
            };
            return Some((Ok(event), (latest, Some(version.number))));
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A follower of `run`'s status: its watcher's, started if it has none.
fn follow(app: &Arc<App>, run: &str) -> watch::Receiver<Option<Arc<Version>>> {
    let mut watchers = app.watchers.lock().expect("not poisoned");
    if let Some(latest) = watchers.get(run) {
        return latest.subscribe();
    }
    let latest = Arc::new(watch::channel(None).0);
    let follower = latest.subscribe();
    watchers.insert(run.to_owned(), Arc::clone(&latest));
    tokio::spawn(watch_run(Arc::clone(app), run.to_owned(), latest));
    follower
}

/// Reads `run`'s status every [`POLL`] while anybody follows it, sending
/// each change; ends when the last follower leaves, the run is deleted or
/// the server stops.
async fn watch_run(app: Arc<App>, run: String, latest: Arc<Latest>) {
    let mut stopping = app.stopping.clone();
    let mut previous = Previous::default();
    let mut number = 0;
    loop {
        if *stopping.borrow() || (latest.is_closed() && unwatch(&app, &run, &latest, false)) {
            break;
        }
        match Status::read(&app.store, &run).await {
            Ok(status) => {
                if let Some(change) = previous.next(status.json()) {
                    number += 1;
                    latest.send_replace(Some(Arc::new(Version {
                        number,
                        whole: change.whole,
                        delta: change.delta,
                    })));
                }
            }
            Err(baton_store::Error::NoSuchRun(_)) => break,
            // A store that stumbles is read again at the next poll.
            Err(_) => {}
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = stopping.changed() => {}
            () = latest.closed() => {}
        }
    }
    unwatch(&app, &run, &latest, true);
}

/// Takes the watcher off the list — only when nobody follows any more,
/// checked under the list's lock so a follower arriving meanwhile is not
/// left with a watcher that stopped, unless `anyway`. Returns whether it did.
fn unwatch(app: &App, run: &str, latest: &Arc<Latest>, anyway: bool) -> bool {
    let mut watchers = app.watchers.lock().expect("not poisoned");
    if !anyway && !latest.is_closed() {
        return false;
    }
    if watchers
        .get(run)
        .is_some_and(|listed| Arc::ptr_eq(listed, latest))
    {
        watchers.remove(run);
    }
    true
}
