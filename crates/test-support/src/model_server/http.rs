//! Just enough HTTP/1.1 for the agent CLIs: requests with a
//! `Content-Length` or a chunked body on keep-alive connections, JSON
//! answers that keep the connection open, and event streams that close it
//! (the end of the stream is the end of the connection, as the reference
//! servers do when they stream without chunked encoding).

use std::io::{self, BufRead, Write};

use serde_json::Value;

/// One request as read off the wire.
#[derive(Debug)]
pub(super) struct HttpRequest {
    pub(super) method: String,
    /// The request target: the path and its query.
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
    /// The client asked to close the connection after this answer.
    pub(super) close: bool,
}

impl HttpRequest {
    /// The target without its query.
    pub(super) fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// The first header of that name (case-insensitive).
pub(super) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Reads the next request; `None` when the client closed the connection
/// between requests.
pub(super) fn read_request(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
) -> io::Result<Option<HttpRequest>> {
    let mut request_line = String::new();
    // Tolerate the blank lines some clients leave between requests.
    while request_line.trim().is_empty() {
        request_line.clear();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(None);
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("/").to_owned();
    let version = parts.next().unwrap_or("HTTP/1.1").to_owned();
    let headers = read_headers(reader)?;
    if header(&headers, "expect").is_some_and(|value| value.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let chunked = header(&headers, "transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked(reader)?
    } else {
        let length = header(&headers, "content-length")
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let connection = header(&headers, "connection").map(str::to_ascii_lowercase);
    let close = match connection.as_deref() {
        Some(value) if value.contains("close") => true,
        Some(value) if value.contains("keep-alive") => false,
        _ => version == "HTTP/1.0",
    };
    Ok(Some(HttpRequest {
        method,
        target,
        headers,
        body,
        close,
    }))
}

fn read_headers(reader: &mut impl BufRead) -> io::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            return Ok(headers);
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
}

/// One line without its line ending; an early end of input is an error.
fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    if reader.read_until(b'\n', &mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let text = String::from_utf8_lossy(&line);
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

/// A `Transfer-Encoding: chunked` body: hex sizes, chunks, then trailers.
fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(reader)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            while !read_line(reader)?.is_empty() {}
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        read_line(reader)?;
    }
}

/// Writes a complete answer with a `Content-Length`.
pub(super) fn write_response(
    writer: &mut impl Write,
    status: u16,
    headers: &[(&str, String)],
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let connection = if close { "close" } else { "keep-alive" };
    head.push_str(&format!(
        "content-length: {}\r\nconnection: {connection}\r\n\r\n",
        body.len()
    ));
    writer.write_all(head.as_bytes())?;
    writer.write_all(body)?;
    writer.flush()
}

/// Writes a JSON answer.
pub(super) fn write_json(
    writer: &mut impl Write,
    status: u16,
    extra_headers: &[(&str, String)],
    body: &Value,
    close: bool,
) -> io::Result<()> {
    let mut headers = vec![("content-type", "application/json".to_owned())];
    headers.extend(extra_headers.iter().cloned());
    write_response(writer, status, &headers, body.to_string().as_bytes(), close)
}

/// Writes a whole event stream; the caller then closes the connection.
pub(super) fn write_sse(writer: &mut impl Write, events: &Sse) -> io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                cache-control: no-cache\r\nconnection: close\r\n\r\n";
    writer.write_all(head.as_bytes())?;
    writer.write_all(events.0.as_bytes())?;
    writer.flush()
}

/// Server-sent events, built up one at a time.
#[derive(Debug, Default)]
pub(super) struct Sse(String);

impl Sse {
    /// Adds an event: `event: <name>` when named, then its data line.
    pub(super) fn event(&mut self, name: Option<&str>, data: &Value) {
        if let Some(name) = name {
            self.0.push_str(&format!("event: {name}\n"));
        }
        self.data(&data.to_string());
    }

    /// Adds an unnamed event with literal data (`[DONE]`).
    pub(super) fn data(&mut self, data: &str) {
        self.0.push_str(&format!("data: {data}\n\n"));
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(wire: &str) -> HttpRequest {
        let mut reader = io::BufReader::new(wire.as_bytes());
        read_request(&mut reader, &mut Vec::new())
            .expect("a request")
            .expect("not at the end")
    }

    #[test]
    fn reads_a_chunked_body() {
        let request = parse(
            "POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
             4\r\n{\"a\"\r\n3;ext=1\r\n:1}\r\n0\r\n\r\n",
        );
        assert_eq!(request.body, b"{\"a\":1}");
        assert!(!request.close);
    }

    #[test]
    fn http_1_0_closes_unless_kept_alive() {
        assert!(parse("GET / HTTP/1.0\r\n\r\n").close);
        assert!(!parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").close);
        assert!(parse("GET /x?y HTTP/1.1\r\nConnection: close\r\n\r\n").close);
        assert_eq!(parse("GET /x?y HTTP/1.1\r\n\r\n").path(), "/x");
    }
}
