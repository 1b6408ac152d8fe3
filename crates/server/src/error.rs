//! Errors as the API answers them: a status code and `{"error": "..."}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A request that failed, and why, for the person or script that sent it.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

/// A store that failed, for `?`: as [`ApiError::store`] says.
impl From<baton_store::Error> for ApiError {
    fn from(error: baton_store::Error) -> Self {
        ApiError::store(&error)
    }
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// A store that failed: unknown runs are 404, the rest 503.
    pub(crate) fn store(error: &baton_store::Error) -> ApiError {
        let status = match error {
            baton_store::Error::NoSuchRun(_) | baton_store::Error::NoSuchJob(_) => {
                StatusCode::NOT_FOUND
            }
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, chain(error))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(json!({"error": self.message}))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// An error and its sources on one line.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
