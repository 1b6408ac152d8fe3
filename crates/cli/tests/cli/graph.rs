//! Mermaid and DOT output.
