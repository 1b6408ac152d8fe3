//! The accept loop, one thread per connection, and which protocol answers
//! which path; failures are injected here, for the model calls only.

use std::io::{self, BufReader};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::answer::Answer;
use super::conversation::Conversation;
use super::http::{self, HttpRequest};
use super::shared::{Mode, Request, Shared};
use super::{anthropic, chat, gemini, responses};

/// Accepts connections until the server is dropped. The connection
/// threads are detached: a hanging one never holds up the test.
pub(super) fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    for stream in listener.incoming() {
        if shared.stopped() {
            return;
        }
        let Ok(stream) = stream else { continue };
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        if let Ok(copy) = stream.try_clone() {
            let connections = shared.connections.lock();
            connections
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id, copy);
        }
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name("fake-model-connection".to_owned())
            .spawn(move || {
                let _ = serve(&stream, &shared);
                let connections = shared.connections.lock();
                connections
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
            });
    }
}

/// Answers the requests on one connection until either side closes it.
fn serve(stream: &TcpStream, shared: &Shared) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut writer = stream;
    while let Some(request) = http::read_request(&mut reader, &mut writer)? {
        if shared.stopped() || !answer(&request, shared, stream)? || request.close {
            break;
        }
    }
    Ok(())
}

/// The protocol of a model call.
#[derive(Debug, Clone, Copy)]
enum Protocol {
    Anthropic,
    Responses,
    Chat,
    Gemini { stream: bool, sse: bool },
}

enum Route {
    Model(Protocol),
    /// A fixed answer: listings, token counts, unknown paths.
    Fixed(u16, Value),
}

fn route(request: &HttpRequest) -> Route {
    let path = request.path();
    let get = matches!(request.method.as_str(), "GET" | "HEAD");
    let model = json!({"id": "fake-model", "object": "model", "type": "model",
                       "display_name": "Fake model", "owned_by": "fake", "created": 0});
    match path {
        // Claude Code checks that the base URL answers.
        "/" if get => Route::Fixed(200, json!({"name": "baton fake model server"})),
        "/v1/models" | "/models" if get => Route::Fixed(
            200,
            json!({"object": "list", "data": [model], "has_more": false,
                   "first_id": "fake-model", "last_id": "fake-model"}),
        ),
        "/v1beta/models" if get => {
            Route::Fixed(200, json!({"models": [{"name": "models/fake-model"}]}))
        }
        _ if get && path.starts_with("/v1beta/models/") => {
            Route::Fixed(200, json!({"name": "models/fake-model"}))
        }
        _ if get => not_found(request),
        _ if path.ends_with("/messages/count_tokens") => {
            Route::Fixed(200, json!({"input_tokens": 42}))
        }
        _ if path.ends_with(":countTokens") => Route::Fixed(200, json!({"totalTokens": 42})),
        _ if path.ends_with("/messages") => Route::Model(Protocol::Anthropic),
        _ if path.ends_with("/responses") => Route::Model(Protocol::Responses),
        _ if path.ends_with("/chat/completions") => Route::Model(Protocol::Chat),
        _ if path.ends_with(":streamGenerateContent") => Route::Model(Protocol::Gemini {
            stream: true,
            sse: request.target.contains("alt=sse"),
        }),
        _ if path.ends_with(":generateContent") => Route::Model(Protocol::Gemini {
            stream: false,
            sse: false,
        }),
        _ => not_found(request),
    }
}

fn not_found(request: &HttpRequest) -> Route {
    let message = format!(
        "fake model server: no route {} {}",
        request.method,
        request.path()
    );
    Route::Fixed(
        404,
        json!({"error": {"message": message, "type": "not_found"}}),
    )
}

/// Answers one request; `false` when the connection must close after it.
fn answer(request: &HttpRequest, shared: &Shared, stream: &TcpStream) -> io::Result<bool> {
    let body = parse_body(&request.body);
    let protocol = match route(request) {
        Route::Fixed(status, answer) => {
            shared.record(record(request, body, None), None);
            let mut writer = stream;
            if request.method == "HEAD" {
                http::write_response(&mut writer, status, &[], b"", request.close)?;
            } else {
                http::write_json(&mut writer, status, &[], &answer, request.close)?;
            }
            return Ok(true);
        }
        Route::Model(protocol) => protocol,
    };
    let mut conversation = conversation(protocol, &body);
    conversation.wrong_first = shared.state().wrong_first.clone();
    let mode = shared.take_mode();
    let prompt = conversation.prompt.clone();
    shared.record(record(request, body.clone(), Some(mode)), prompt);
    let mut writer = stream;
    match mode {
        Mode::Ok => {
            let answer = reply(protocol, &body, &conversation);
            let wrote_wrong = conversation.wrote_wrong.take();
            shared
                .state()
                .wrong_first
                .retain(|suffix| !wrote_wrong.contains(suffix));
            match answer {
                Answer::Json(answer) => {
                    http::write_json(&mut writer, 200, &[], &answer, request.close)?;
                }
                Answer::Stream(events) => {
                    http::write_sse(&mut writer, &events)?;
                    return Ok(false);
                }
            }
        }
        Mode::Status(status) => {
            // A rate limit asks for a second; every error also asks for
            // 50 ms in `retry-after-ms`, which only opencode reads (it has
            // no setting for its retries), so its failing tests stay short.
            let mut retry = vec![("retry-after-ms", "50".to_owned())];
            if status == 429 {
                retry.push(("retry-after", "1".to_owned()));
            }
            let error = error(protocol, status);
            http::write_json(&mut writer, status, &retry, &error, request.close)?;
        }
        Mode::Garbage => {
            let headers = [("content-type", "application/json".to_owned())];
            http::write_response(
                &mut writer,
                200,
                &headers,
                b"this is not json",
                request.close,
            )?;
        }
        Mode::Hang => {
            while !shared.stopped() {
                std::thread::sleep(Duration::from_millis(20));
            }
            return Ok(false);
        }
        Mode::Drop => {
            let _ = stream.shutdown(Shutdown::Both);
            return Ok(false);
        }
    }
    Ok(true)
}

fn parse_body(body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn record(request: &HttpRequest, body: Value, mode: Option<Mode>) -> Request {
    Request {
        method: request.method.clone(),
        path: request.target.clone(),
        headers: request.headers.clone(),
        body,
        mode,
        time: std::time::SystemTime::now(),
    }
}

fn conversation(protocol: Protocol, body: &Value) -> Conversation {
    match protocol {
        Protocol::Anthropic => anthropic::conversation(body),
        Protocol::Responses => responses::conversation(body),
        Protocol::Chat => chat::conversation(body),
        Protocol::Gemini { .. } => gemini::conversation(body),
    }
}

fn reply(protocol: Protocol, body: &Value, conversation: &Conversation) -> Answer {
    match protocol {
        Protocol::Anthropic => anthropic::answer(body, conversation),
        Protocol::Responses => responses::answer(body, conversation),
        Protocol::Chat => chat::answer(body, conversation),
        Protocol::Gemini { stream, sse } => gemini::answer(body, conversation, stream, sse),
    }
}

fn error(protocol: Protocol, status: u16) -> Value {
    let message = match status {
        429 => "fake rate limit exceeded".to_owned(),
        500 => "fake internal server error".to_owned(),
        529 => "fake overloaded".to_owned(),
        _ => format!("fake error {status}"),
    };
    match protocol {
        Protocol::Anthropic => anthropic::error(status, &message),
        Protocol::Responses | Protocol::Chat => chat::error(status, &message),
        Protocol::Gemini { .. } => gemini::error(status, &message),
    }
}
