//! What every request passes before its handler: the `Host` check, the
//! `Origin` check on writes, who is asking ([`auth`]), and the headers
//! every response carries.
//!
//! A browser sends any site's requests to 127.0.0.1 if that site's name
//! resolves there (DNS rebinding), but with the site's own name in `Host`:
//! answering only requests that name this server keeps such a page from
//! reading the dashboard. A form on another site can still `POST` here
//! with the person's cookie unless the cookie is `SameSite=Strict` (it is)
//! and the `Origin` is checked (it is, when sent).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::app::App;
use crate::auth;
use crate::error::ApiError;

/// The checks, then the handler, then the headers.
pub(crate) async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let mut response = match check(&app, request.method(), request.headers()) {
        Ok(()) => {
            let (method, path) = (request.method().clone(), request.uri().path().to_owned());
            match auth::person(&app, &method, &path, request.headers()).await {
                Ok(person) => {
                    let mut request = request;
                    request.extensions_mut().insert(person);
                    next.run(request).await
                }
                Err(refused) => refused,
            }
        }
        Err(error) => error.into_response(),
    };
    secure(response.headers_mut());
    response
}

fn check(app: &App, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if !app.hosts.allows(host) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!("this server does not answer for host '{host}'"),
        ));
    }
    if !matches!(*method, Method::GET | Method::HEAD)
        && let Some(origin) = headers.get(header::ORIGIN)
    {
        // The host passed the check above, so this is the server's own
        // origin as the browser names it.
        let own = format!("http://{host}");
        if origin.to_str().ok().map(str::to_ascii_lowercase) != Some(own.to_ascii_lowercase()) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "a request from another site's page is refused",
            ));
        }
    }
    Ok(())
}

/// Headers every response carries: no script but this server's files, no
/// framing, no guessing of content types, no referrer leaving for another
/// site.
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; \
             object-src 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` with the
    // page's own forms, which the `Origin` check above must refuse, so no
    // one could log in or decide from a page. `same-origin` still keeps
    // the referrer from every other site.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}
