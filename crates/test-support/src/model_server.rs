//! A fake model server that the real agent CLIs can talk to, so tests can
//! run Claude Code, Codex, Gemini CLI and opencode with no hosted model.
//!
//! One listener on 127.0.0.1 speaks, on the paths each CLI calls:
//!
//! | protocol | paths | client |
//! |---|---|---|
//! | Anthropic Messages | `POST /v1/messages` (event stream or JSON), `/v1/messages/count_tokens` | Claude Code (`ANTHROPIC_BASE_URL`) |
//! | OpenAI Responses | `POST /v1/responses` | Codex (a `[model_providers.X]` with `wire_api = "responses"`) |
//! | OpenAI Chat Completions | `POST /v1/chat/completions` | opencode (an `@ai-sdk/openai-compatible` provider), baton's `openai-chat` |
//! | Gemini | `POST /v1beta/models/{m}:streamGenerateContent`, `:generateContent`, `:countTokens` | Gemini CLI (`GOOGLE_GEMINI_BASE_URL`) |
//!
//! and lists one model at `GET /v1/models`, `/models` and `/v1beta/models`.
//! Every answer reports the same usage: 1234 input tokens (100 of them
//! cached) and 56 output tokens.
//!
//! # What the fake model does
//!
//! It plays a script read from the conversation's user and system text:
//! the `FAKE: write <path>`, `FAKE: shell <command>`, `FAKE: read <path>`
//! and `FAKE: call <tool> <json-args>` lines in order (a call names any
//! tool the CLI offers, such as an MCP server's `mcp__baton__report_progress`), then a write of every `- /absolute/path` line under
//! `## Files to write` (baton's prompts list a stage's files there). Each
//! answer is one call of a tool the CLI offers, with the argument names
//! its schema declares: write with `Write` (Claude Code), `write_file`
//! (Gemini CLI), `write` (opencode), or Codex's `apply_patch` or shell;
//! run commands with `Bash`, `run_shell_command`, `bash`, `exec_command`
//! or `shell`; read with `Read`, `read_file`, `read`. The tool calls
//! already in the conversation tell which action is next; when all are
//! done the answer is the text `Done.`. Writing a file that exists starts
//! with a read of it (Claude Code and opencode refuse to overwrite a file
//! the session has not read). Relative paths are relative to the working
//! directory the CLI's context names. A written file holds
//! [`fake_content`] of its path as the prompt spells it. An action no
//! offered tool can do is skipped (Gemini CLI offers no shell outside
//! `--approval-mode yolo`).
//!
//! Requests that offer no tools (titles, summaries) get a short text;
//! Gemini CLI's side calls that want JSON get an object filling their
//! schema; baton's structured `openai-chat` requests (`response_format`)
//! get `{"files": [{"path", "content"}], "summary"}` for the files the
//! prompt asks for.
//!
//! [`ModelServer::write_wrong_first`] makes the first write of a file
//! hold [`WRONG_CONTENT`] instead, so that a stage's output checks fail and
//! its correction (which writes the file again) passes them.
//!
//! # Failures on demand
//!
//! [`ModelServer::set_mode`] and [`ModelServer::fail_next`] make the model
//! calls (not listings or token counts) fail as a [`Mode`] says.
//!
//! Every request is kept ([`ModelServer::requests`]) and, when
//! `$BATON_FAKE_MODEL_LOG` names a file (or [`Options::log`] does),
//! appended to it as a JSON line.

mod answer;
mod anthropic;
mod chat;
mod conversation;
mod gemini;
mod http;
mod responses;
mod routes;
mod script;
mod shared;
mod tools;

use std::collections::HashMap;
use std::fs::File;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

pub use script::{WRONG_CONTENT, fake_content};
pub use shared::{Mode, Request};

use shared::{Shared, State};

/// How to start a server.
#[derive(Debug, Clone)]
pub struct Options {
    /// The port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// A file to append every request to, as JSON lines. Defaults to
    /// `$BATON_FAKE_MODEL_LOG` when set.
    pub log: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            port: 0,
            log: std::env::var_os("BATON_FAKE_MODEL_LOG").map(PathBuf::from),
        }
    }
}

/// A running fake model server; it stops accepting when dropped.
#[derive(Debug)]
pub struct ModelServer {
    port: u16,
    shared: Arc<Shared>,
}

impl ModelServer {
    /// Starts a server on a free port.
    ///
    /// # Panics
    ///
    /// When no local port can be bound.
    pub fn start() -> ModelServer {
        ModelServer::start_with(Options::default())
    }

    /// Starts a server as `options` say.
    ///
    /// # Panics
    ///
    /// When the port cannot be bound or the log file cannot be opened.
    pub fn start_with(options: Options) -> ModelServer {
        let listener = TcpListener::bind(("127.0.0.1", options.port))
            .unwrap_or_else(|error| panic!("bind 127.0.0.1:{}: {error}", options.port));
        let port = listener.local_addr().expect("a bound address").port();
        let log = options.log.map(|path| {
            let open = File::options().create(true).append(true).open(&path);
            open.unwrap_or_else(|error| panic!("open {}: {error}", path.display()))
        });
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            stopped: AtomicBool::new(false),
            log: Mutex::new(log),
            connections: Mutex::new(HashMap::new()),
        });
        let accepting = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("fake-model-accept".to_owned())
            .spawn(move || routes::accept(&listener, &accepting))
            .expect("start the accept thread");
        ModelServer { port, shared }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Answers the model calls from now on as `mode` says.
    pub fn set_mode(&self, mode: Mode) {
        self.shared.state().mode = mode;
    }

    /// Makes the next `count` model calls fail as `mode` says; the ones
    /// after are answered as [`ModelServer::set_mode`] says.
    pub fn fail_next(&self, count: usize, mode: Mode) {
        self.fail_after(0, count, mode);
    }

    /// Answers the next `ok` model calls as [`ModelServer::set_mode`] says,
    /// then makes `count` fail as `mode` says: a failure in the middle of
    /// an agent's work.
    pub fn fail_after(&self, ok: usize, count: usize, mode: Mode) {
        let mut state = self.shared.state();
        state.passes = ok;
        state.failures = count;
        state.failure = mode;
    }

    /// Makes the next write of a file whose absolute path ends with
    /// `suffix` hold [`WRONG_CONTENT`]; the writes after it are right.
    pub fn write_wrong_first(&self, suffix: &str) {
        self.shared.state().wrong_first.push(suffix.to_owned());
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.state().requests.clone()
    }

    /// The prompt of every model call so far: the first user text of the
    /// conversation, leaving out the context blocks a CLI wraps in tags of
    /// its own (`<system-reminder>`, `<environment_context>`, …), byte for
    /// byte as it arrived. Side calls count too (an opencode title request
    /// holds the prompt as its second user message, so it shows its own
    /// first one).
    pub fn user_prompts(&self) -> Vec<String> {
        self.shared.state().prompts.clone()
    }

    /// Writes every request so far to `path`, one JSON line each.
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write_log(&self, path: &Path) -> std::io::Result<()> {
        let mut lines = String::new();
        for request in self.requests() {
            lines.push_str(&request.to_json().to_string());
            lines.push('\n');
        }
        std::fs::write(path, lines)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        let connections = self.shared.connections.lock();
        for stream in connections.unwrap_or_else(PoisonError::into_inner).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Wakes the accept loop so that it sees the flag and ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
