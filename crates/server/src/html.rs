//! Building pages: the one escaping function every shown string goes
//! through, the frame every page shares, an error as a page, and path
//! segments encoded for links and redirects.

use std::sync::OnceLock;

use axum::response::{Html, IntoResponse, Response};
use baton_engine::create::sha256_hex;

use crate::error::ApiError;

/// Text made safe to place in HTML, as element content or as a quoted
/// attribute value.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// A file every page links.
pub(crate) struct Asset {
    pub(crate) text: &'static str,
    pub(crate) content_type: &'static str,
    version: OnceLock<String>,
}

impl Asset {
    /// `v=<digest of its text>`: pages link `/assets/<file>?v=<digest>`, so
    /// a browser may keep what it fetched for good — a baton serving other
    /// assets links other addresses.
    pub(crate) fn version(&self) -> &str {
        self.version
            .get_or_init(|| format!("v={}", &sha256_hex(self.text.as_bytes())[..16]))
    }
}

pub(crate) static STYLE: Asset = Asset {
    text: include_str!("../assets/style.css"),
    content_type: "text/css; charset=utf-8",
    version: OnceLock::new(),
};

pub(crate) static SCRIPT: Asset = Asset {
    text: include_str!("../assets/live.js"),
    content_type: "text/javascript; charset=utf-8",
    version: OnceLock::new(),
};

/// A whole page: `title` is escaped here, `body` must be built escaped.
pub(crate) fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · baton</title><link rel=\"stylesheet\" href=\"/assets/style.css?{}\">\
         <script src=\"/assets/live.js?{}\" defer></script></head>\
         <body><header><a href=\"/\">baton</a> <a href=\"/queue\">queue</a> <a href=\"/tasks\">tasks</a></header><main>{body}</main></body></html>\n",
        escape(title),
        STYLE.version(),
        SCRIPT.version(),
    ))
}

/// An error a page's handler ends with by `?`, shown as a page: its
/// status and its message, escaped.
pub(crate) struct PageError(ApiError);

impl From<ApiError> for PageError {
    fn from(error: ApiError) -> Self {
        PageError(error)
    }
}

impl From<baton_store::Error> for PageError {
    fn from(error: baton_store::Error) -> Self {
        PageError(error.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let error = self.0;
        let body = format!(
            "<h1>{}</h1><p class=\"error\">{}</p><p><a href=\"/\">All runs</a></p>",
            error.status.as_u16(),
            escape(&error.message)
        );
        (error.status, page("error", &body)).into_response()
    }
}

/// A path segment percent-encoded: run ids are plain, but a redirect
/// never carries what it was not sure of.
pub(crate) fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.') {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            escape(r#"<script>alert('x' & "y")</script>"#),
            "&lt;script&gt;alert(&#39;x&#39; &amp; &quot;y&quot;)&lt;/script&gt;"
        );
        assert_eq!(escape("plain stage-1"), "plain stage-1");
    }
}
