//! Reads workflow files from the file system for the pure compiler.

use std::io;
use std::path::{Path, PathBuf};

use baton_workflow::Loader;
use baton_workflow::loader::NotRegularFile;

/// File systems whose files are views of the kernel, a process or a
/// device: `/proc/self/environ` says it is a regular file, yet holds every
/// secret of the environment.
const SPECIAL_TREES: &[&str] = &["/proc", "/sys", "/dev"];

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

        let full = self.full(path);
        // Checked before opening: opening a FIFO would wait for a writer.
        refuse_special(&full)?;
        let file = std::fs::File::open(&full)?;
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Err(NotRegularFile::error());
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
        self.full(path)
            .metadata()
            .is_ok_and(|metadata| !metadata.is_dir())
    }

    fn root(&self) -> &Path {
        &self.root
    }
}

/// Refuses what is not a regular file, or lies in a [`SPECIAL_TREES`]
/// (through symbolic links too), without opening it.
fn refuse_special(path: &Path) -> io::Result<()> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(NotRegularFile::error());
    }
    let real = std::fs::canonicalize(path)?;
    if SPECIAL_TREES.iter().any(|tree| real.starts_with(tree)) {
        return Err(NotRegularFile::error());
    }
    Ok(())
}
