//! Path parameters and query strings as the handlers take them, refused
//! as the API refuses everything: a status and `{"error": "..."}` (axum's
//! own extractors answer in plain text).

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A route's path parameters.
#[derive(Debug)]
pub(crate) struct Params<T>(pub(crate) T);

/// A request's query string.
#[derive(Debug)]
pub(crate) struct Filters<T>(pub(crate) T);

impl<S, T> FromRequestParts<S> for Params<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Params(value))
            .map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))
    }
}

impl<S, T> FromRequestParts<S> for Filters<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| Filters(value))
            .map_err(|rejection| ApiError::new(rejection.status(), rejection.body_text()))
    }
}
