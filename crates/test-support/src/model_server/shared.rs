//! What the server and its connection threads share: how model calls are
//! answered ([`Mode`]) and every [`Request`] received.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use super::http;

/// How the model calls are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// As the script says.
    Ok,
    /// An error status with the protocol's own error body; 429 comes with
    /// `retry-after: 1`.
    Status(u16),
    /// The request is read and never answered (until the server is
    /// dropped).
    Hang,
    /// A 200 whose body is not JSON.
    Garbage,
    /// The connection is closed without an answer.
    Drop,
}

impl std::str::FromStr for Mode {
    type Err = String;

    /// `ok`, `hang`, `garbage`, `drop`, or an HTTP status such as `429`.
    fn from_str(text: &str) -> Result<Mode, String> {
        match text {
            "ok" => Ok(Mode::Ok),
            "hang" => Ok(Mode::Hang),
            "garbage" => Ok(Mode::Garbage),
            "drop" => Ok(Mode::Drop),
            status => status.parse().map(Mode::Status).map_err(|_| {
                format!("unknown mode {status:?}: ok, hang, garbage, drop or a status")
            }),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Ok => formatter.write_str("ok"),
            Mode::Status(status) => write!(formatter, "{status}"),
            Mode::Hang => formatter.write_str("hang"),
            Mode::Garbage => formatter.write_str("garbage"),
            Mode::Drop => formatter.write_str("drop"),
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target: path and query.
    pub path: String,
    /// The headers as sent.
    pub headers: Vec<(String, String)>,
    /// The body as JSON; a body that is not JSON is kept as a string, an
    /// empty one is `null`.
    pub body: Value,
    /// How a model call was answered; `None` for the other routes.
    pub mode: Option<Mode>,
    /// When it arrived (to read a client's retry delays).
    pub time: std::time::SystemTime,
}

impl Request {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        http::header(&self.headers, name)
    }

    pub(super) fn to_json(&self) -> Value {
        let headers: serde_json::Map<String, Value> = self
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), json!(value)))
            .collect();
        let time = self.time.duration_since(std::time::UNIX_EPOCH);
        json!({
            "time": time.map(|since| since.as_secs_f64()).unwrap_or(0.0),
            "method": self.method, "path": self.path, "headers": headers,
            "mode": self.mode.map(|mode| mode.to_string()), "body": self.body,
        })
    }
}

/// What the connection threads share with the server.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) stopped: AtomicBool,
    pub(super) log: Mutex<Option<File>>,
    /// The open connections, to close them when the server is dropped.
    pub(super) connections: Mutex<HashMap<u64, TcpStream>>,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) mode: Mode,
    /// Calls answered as `mode` says before the failures start.
    pub(super) passes: usize,
    pub(super) failures: usize,
    pub(super) failure: Mode,
    pub(super) requests: Vec<Request>,
    pub(super) prompts: Vec<String>,
    pub(super) wrong_first: Vec<String>,
}

impl Default for State {
    fn default() -> State {
        State {
            mode: Mode::Ok,
            passes: 0,
            failures: 0,
            failure: Mode::Ok,
            requests: Vec::new(),
            prompts: Vec::new(),
            wrong_first: Vec::new(),
        }
    }
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// The mode for the model call being answered now.
    pub(super) fn take_mode(&self) -> Mode {
        let mut state = self.state();
        if state.failures > 0 && state.passes > 0 {
            state.passes -= 1;
            state.mode
        } else if state.failures > 0 {
            state.failures -= 1;
            state.failure
        } else {
            state.mode
        }
    }

    pub(super) fn record(&self, request: Request, prompt: Option<String>) {
        if let Some(log) = self
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            let _ = writeln!(log, "{}", request.to_json());
        }
        let mut state = self.state();
        state.requests.push(request);
        state.prompts.extend(prompt);
    }
}
