//! Reads workflow files from the file system for the pure compiler.

use std::io;
use std::path::{Path, PathBuf};

use baton_workflow::Loader;

/// Reads from the file system, relative to a root directory.
#[derive(Debug, Clone)]
pub struct FsLoader {
    root: PathBuf,
}

impl FsLoader {
    /// A loader rooted at `root` (normally the current directory).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsLoader { root: root.into() }
    }

    fn full(&self, path: &Path) -> PathBuf {
        self.root.join(path)
    }
}

impl Loader for FsLoader {
    fn read(&self, path: &Path, limit: usize) -> io::Result<Vec<u8>> {
        use std::io::Read;

        let file = std::fs::File::open(self.full(path))?;
        let metadata = file.metadata()?;
        if metadata.is_dir() {
            return Err(io::Error::other("is a directory"));
        }
        if metadata.len() > limit as u64 {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "file too large",
            ));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
        // Read one byte past the limit so a file that grows after the size
        // check is still caught.
        file.take(limit as u64 + 1).read_to_end(&mut bytes)?;
        if bytes.len() > limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "file too large",
            ));
        }
        Ok(bytes)
    }

    fn exists(&self, path: &Path) -> bool {
        self.full(path).is_file()
    }

    fn root(&self) -> &Path {
        &self.root
    }
}
