//! A stand-in OpenAI-compatible server for tests of `openai-chat` profiles.
//!
//! Standard library only: a `TcpListener` on 127.0.0.1 and one thread that
//! answers one connection at a time (`Connection: close`). `GET /v1/models`
//! lists one model; `POST /v1/chat/completions` answers as told by
//! [`Reply`]. Every request body is kept for the test to inspect.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server answers chat completions.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A structured answer writing these `(path, content)` files, with
    /// usage of 55 prompt and 7 completion tokens.
    Files(Vec<(String, String)>),
    /// An error status with an OpenAI-style `{"error": {"message"}}` body.
    Error(u16, String),
    /// A 200 whose body is not JSON.
    Garbage,
    /// Waits this long before answering with no files.
    Slow(Duration),
}

/// A running stand-in server; it lives until the test process ends.
#[derive(Debug)]
pub struct FakeOpenAi {
    /// `http://127.0.0.1:<port>/v1`, the profile's `base_url`.
    pub base_url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeOpenAi {
    /// Starts a server answering with `reply`.
    ///
    /// # Panics
    ///
    /// When no local port can be bound.
    pub fn start(reply: Reply) -> FakeOpenAi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
        let port = listener.local_addr().expect("local address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &reply, &seen);
            }
        });
        FakeOpenAi {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            requests,
        }
    }

    /// The bodies of the chat requests received so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }
}

fn serve(stream: TcpStream, reply: &Reply, seen: &Mutex<Vec<String>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let (status, text) = match path {
        "/v1/models" => (
            200,
            r#"{"object":"list","data":[{"id":"fake-model","object":"model"}]}"#.to_owned(),
        ),
        "/v1/chat/completions" => {
            if let Ok(mut seen) = seen.lock() {
                seen.push(String::from_utf8_lossy(&body).into_owned());
            }
            chat(reply)
        }
        _ => (404, r#"{"error":{"message":"no such route"}}"#.to_owned()),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )?;
    stream.flush()
}

fn chat(reply: &Reply) -> (u16, String) {
    match reply {
        Reply::Files(files) => (200, completion(files)),
        Reply::Error(status, message) => (
            *status,
            format!(
                r#"{{"error":{{"message":{},"type":"server_error"}}}}"#,
                quote(message)
            ),
        ),
        Reply::Garbage => (200, "<html>definitely not json".to_owned()),
        Reply::Slow(delay) => {
            std::thread::sleep(*delay);
            (200, completion(&[]))
        }
    }
}

fn completion(files: &[(String, String)]) -> String {
    let files: Vec<String> = files
        .iter()
        .map(|(path, content)| {
            format!(r#"{{"path":{},"content":{}}}"#, quote(path), quote(content))
        })
        .collect();
    let answer = format!(
        r#"{{"files":[{}],"summary":"wrote the files"}}"#,
        files.join(",")
    );
    format!(
        r#"{{"id":"chatcmpl-fake","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":{}}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":55,"completion_tokens":7,"total_tokens":62}}}}"#,
        quote(&answer)
    )
}

/// A JSON string literal.
fn quote(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}
