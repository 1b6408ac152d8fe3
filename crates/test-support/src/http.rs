//! A tiny HTTP/1.1 client over a plain `TcpStream`, for testing
//! `baton serve`: one request per connection, every header as given (a
//! wrong `Host` included), the whole answer read back.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names lowercased, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body, decoded from chunks when it came in chunks.
    pub body: String,
}

impl Response {
    /// The first header of that (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON.
    ///
    /// # Panics
    ///
    /// When it is not JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {self:?}"))
    }
}

/// Sends `method path` to `address` (`127.0.0.1:PORT`) with `headers`
/// and `body`; `Host` is `address` unless `headers` names one.
///
/// # Panics
///
/// When the server cannot be reached or its answer is not HTTP.
pub fn request(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut stream = TcpStream::connect(address)
        .unwrap_or_else(|error| panic!("cannot connect to {address}: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    let mut text = format!("{method} {path} HTTP/1.1\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        text.push_str(&format!("Host: {address}\r\n"));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(text.as_bytes()).expect("send the request");
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .expect("read the answer to its end");
    parse(&answer)
}

fn parse(answer: &[u8]) -> Response {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {text:?}"));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = if chunked {
        unchunk(body)
    } else {
        body.to_owned()
    };
    Response {
        status,
        headers,
        body,
    }
}

/// A chunked body's data.
fn unchunk(mut body: &str) -> String {
    let mut data = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        data.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_split_into_status_headers_and_body() {
        let answer = parse(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nX-A: 1\r\n\r\n{\"error\":\"no\"}");
        assert_eq!(answer.status, 401);
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.json()["error"], "no");
        let chunked = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        );
        assert_eq!(chunked.body, "hello world");
    }
}
