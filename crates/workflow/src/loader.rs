//! How the pure compiler reads files: through a [`Loader`].
//!
//! The CLI reads the file system through its own loader; tests use
//! [`MemoryLoader`]. This crate does no I/O of its own. Paths
//! are given as the user wrote them (relative to the loader's root, the
//! current directory) so that messages show them the same way.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::load::MAX_FILE_BYTES;

/// What a [`Loader`] returns, inside an [`io::Error`], for a path that is
/// not a regular file (a FIFO, a device, a `/proc` file): such a file is
/// never read, so that its content cannot end up quoted in an error.
#[derive(Debug, thiserror::Error)]
#[error("not a regular file")]
pub struct NotRegularFile;

impl NotRegularFile {
    /// The error a loader returns.
    pub fn error() -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, NotRegularFile)
    }
}

/// Reads workflow, fragment and template files.
pub trait Loader {
    /// Reads a whole file; relative paths are relative to [`Loader::root`].
    ///
    /// # Errors
    ///
    /// Any I/O error, `FileTooLarge` when the file exceeds `limit` bytes, or
    /// [`NotRegularFile::error`] when it is not a regular file.
    fn read(&self, path: &Path, limit: usize) -> io::Result<Vec<u8>>;

    /// Whether something other than a directory exists at the path (what
    /// is not a regular file is then refused by [`Loader::read`]).
    fn exists(&self, path: &Path) -> bool;

    /// The directory relative paths start from (the current directory).
    fn root(&self) -> &Path;
}

/// Files held in memory, for tests.
#[derive(Debug, Clone, Default)]
pub struct MemoryLoader {
    files: BTreeMap<PathBuf, Vec<u8>>,
    root: PathBuf,
}

impl MemoryLoader {
    /// An empty set of files rooted at `/work`.
    pub fn new() -> Self {
        MemoryLoader {
            files: BTreeMap::new(),
            root: PathBuf::from("/work"),
        }
    }

    /// Adds a file.
    #[must_use]
    pub fn with(mut self, path: &str, text: &str) -> Self {
        self.files
            .insert(PathBuf::from(path), text.as_bytes().to_vec());
        self
    }

    /// Adds a file with arbitrary bytes.
    #[must_use]
    pub fn with_bytes(mut self, path: &str, bytes: &[u8]) -> Self {
        self.files.insert(PathBuf::from(path), bytes.to_vec());
        self
    }
}

impl Loader for MemoryLoader {
    fn read(&self, path: &Path, limit: usize) -> io::Result<Vec<u8>> {
        let bytes = self
            .files
            .get(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not found"))?;
        if bytes.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "file too large",
            ));
        }
        Ok(bytes.clone())
    }

    fn exists(&self, path: &Path) -> bool {
        self.files.contains_key(path)
    }

    fn root(&self) -> &Path {
        &self.root
    }
}

/// Reads a workflow or fragment file into a [`SourceFile`].
///
/// # Errors
///
/// A diagnostic naming the file when it is missing, unreadable, too large or
/// not UTF-8.
pub fn read_source(loader: &dyn Loader, path: &str) -> Result<Arc<SourceFile>, Diagnostic> {
    let bytes = loader.read(Path::new(path), MAX_FILE_BYTES).map_err(|error| match error.kind() {
        io::ErrorKind::NotFound => Diagnostic::error("file::not-found", format!("workflow file not found: {path}"))
            .with_help("check the path; `baton list` shows the workflows under the current directory"),
        io::ErrorKind::FileTooLarge => Diagnostic::error(
            "file::too-large",
            format!("{path} is larger than {MAX_FILE_BYTES} bytes, the most baton reads for a workflow file"),
        )
        .with_help("split the workflow into fragments with `include`"),
        _ if error.get_ref().is_some_and(|inner| inner.is::<NotRegularFile>()) => Diagnostic::error(
            "file::not-regular",
            format!("{path} is not a regular file"),
        )
        .with_help("workflows, fragments and templates must be regular files; baton does not read devices, pipes, or /proc, /sys and /dev files"),
        _ => Diagnostic::error("file::unreadable", format!("cannot read {path}: {error}")),
    })?;
    match String::from_utf8(bytes) {
        Ok(mut text) => {
            // The parser skips byte order marks at the start and counts
            // columns after them; without them, every place is where the
            // parser says.
            let marks = text.len() - text.trim_start_matches('\u{feff}').len();
            text.drain(..marks);
            Ok(SourceFile::new(path, text))
        }
        Err(error) => {
            let offset = error.utf8_error().valid_up_to();
            let bytes = error.into_bytes();
            let line = bytes[..offset]
                .iter()
                .filter(|byte| **byte == b'\n')
                .count()
                + 1;
            Err(Diagnostic::error(
                "file::encoding",
                format!("{path} is not valid UTF-8 (invalid byte at offset {offset}, line {line})"),
            )
            .with_help("save the workflow as UTF-8"))
        }
    }
}

/// `path` with `.` dropped and each `..` taking off the component before
/// it, without asking the file system: one file gets one name however a
/// workflow or a command line spells it.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte order mark is not part of the text: places in the file are
    /// counted, by the parser and by snippets alike, from after it. One
    /// further in is refused where it is.
    #[test]
    fn a_byte_order_mark_is_left_out() {
        let loader = MemoryLoader::new().with("w.yaml", "\u{feff}\u{feff}[a]\n");
        let file = read_source(&loader, "w.yaml").expect("UTF-8");
        assert_eq!(file.text, "[a]\n");
        let mut warnings = Vec::new();
        let error = crate::load::document(&file, &mut warnings).expect_err("not a mapping");
        let span = error.location.expect("a place").span;
        assert_eq!(
            (span.line, span.column),
            crate::diagnostic::line_column(&file.text, span.offset)
        );
        let loader = MemoryLoader::new().with("w.yaml", "#\n\u{feff}+\n");
        let file = read_source(&loader, "w.yaml").expect("UTF-8");
        let error = crate::load::document(&file, &mut warnings).expect_err("a mark inside");
        assert_eq!(error.code, "yaml::byte-order-mark");
        assert_eq!(error.line_column(), Some((2, 1)));
    }
}
