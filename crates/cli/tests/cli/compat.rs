//! Conformance with the reference corpus.
