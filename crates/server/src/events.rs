//! `GET /api/runs/{run}/events`: server-sent events carrying the run's
//! status object (as `GET /api/runs/{run}` answers it) each time it
//! changes.
//!
//! The store is polled: runs are driven by other processes, possibly on
//! other machines, and the store is the one place all of them write. A
//! poll every 250 ms is cheap next to a person's attention, and an event
//! is sent only when the status object differs from the last one sent.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as Params, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use baton_engine::view::Status;
use futures_util::Stream;

use crate::app::App;
use crate::error::ApiError;

/// How often the store is read for changes.
const POLL: Duration = Duration::from_millis(250);

/// The stream: the status at once, then each change, until the server
/// stops or the run is deleted.
pub(crate) async fn events(
    State(app): State<Arc<App>>,
    Params(run): Params<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // An unknown run is a 404, not an empty stream.
    app.store
        .run(&run)
        .await
        .map_err(|error| ApiError::store(&error))?;
    let stopping = app.stopping.clone();
    let state = (app, run, String::new(), stopping, true);
    let stream =
        futures_util::stream::unfold(state, |(app, run, last, mut stopping, first)| async move {
            let mut first = first;
            loop {
                if !first {
                    tokio::select! {
                        () = tokio::time::sleep(POLL) => {}
                        _ = stopping.changed() => return None,
                    }
                }
                first = false;
                if *stopping.borrow() {
                    return None;
                }
                match Status::read(&app.store, &run).await {
                    Ok(status) => {
                        let text = status.json().to_string();
                        if text != last {
                            let event = Event::default().event("status").data(&text);
                            return Some((Ok(event), (app, run, text, stopping, false)));
                        }
                    }
                    Err(baton_store::Error::NoSuchRun(_)) => return None,
                    // A store that stumbles is read again at the next poll.
                    Err(_) => {}
                }
            }
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
