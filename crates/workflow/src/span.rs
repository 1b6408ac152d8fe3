//! Places in a workflow file's text, shared by the YAML tree and the
//! diagnostics that point into it.

/// Where a node sits in its source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Byte offset of the first byte.
    pub offset: usize,
    /// Length in bytes (zero when unknown).
    pub len: usize,
    /// One-based line.
    pub line: u32,
    /// One-based column.
    pub column: u32,
}

impl Span {
    pub(crate) fn from_location(location: serde_saphyr::Location) -> Self {
        let span = location.span();
        let offset = span.byte_offset().unwrap_or(0);
        let len = span.byte_len().unwrap_or(0);
        Span {
            offset: usize::try_from(offset).unwrap_or(usize::MAX),
            len: usize::try_from(len).unwrap_or(0),
            line: u32::try_from(location.line()).unwrap_or(u32::MAX),
            column: u32::try_from(location.column()).unwrap_or(u32::MAX),
        }
    }
}
