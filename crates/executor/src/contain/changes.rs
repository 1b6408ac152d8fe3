//! What a contained agent changed: the entries of the overlay's upper
//! layer, compared with the real tree beneath.
//!
//! The upper layer holds every file the agent wrote (copied up whole), every
//! directory it created or wrote into, and a whiteout (a character device
//! 0:0) for every name it deleted. A directory that exists beneath is only a
//! parent of a change; a file rewritten with the same bytes and mode (a
//! tool that opens files for writing out of habit) is no change.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};

/// Paths (relative to the tree) that differ between `upper` and `lower`,
/// sorted: a new directory ends with `/`, a deleted name is marked so.
pub(super) fn list(upper: &OwnedFd, lower: &OwnedFd) -> Vec<String> {
    let mut changed = Vec::new();
    walk(upper.as_fd(), lower.as_fd(), Path::new(""), &mut changed);
    changed.sort();
    changed
}

fn walk(upper: BorrowedFd<'_>, lower: BorrowedFd<'_>, directory: &Path, out: &mut Vec<String>) {
    let here = if directory.as_os_str().is_empty() {
        Path::new(".")
    } else {
        directory
    };
    let Ok(fd) = openat(
        upper,
        here,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        out.push(format!("{}/", directory.display()));
        return;
    };
    let Ok(mut entries) = Dir::from_fd(fd) else {
        return;
    };
    let names: Vec<PathBuf> = entries
        .iter()
        .filter_map(Result::ok)
        .map(|entry| PathBuf::from(entry.file_name().to_string_lossy().into_owned()))
        .filter(|name| name != Path::new(".") && name != Path::new(".."))
        .collect();
    for name in names {
        let path = directory.join(&name);
        let Ok(stat) = fstatat(upper, &path, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        let beneath = fstatat(lower, &path, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        let shown = path.display().to_string();
        match kind(&stat) {
            SFlag::S_IFCHR if stat.st_rdev == 0 => out.push(format!("{shown} (deleted)")),
            SFlag::S_IFDIR => {
                if beneath.is_none_or(|beneath| kind(&beneath) != SFlag::S_IFDIR) {
                    out.push(format!("{shown}/"));
                }
                walk(upper, lower, &path, out);
            }
            SFlag::S_IFREG
                if beneath
                    .is_some_and(|beneath| same_file(upper, lower, &path, &stat, &beneath)) => {}
            SFlag::S_IFLNK
                if beneath.is_some_and(|beneath| kind(&beneath) == SFlag::S_IFLNK)
                    && readlinkat(upper, &path).ok() == readlinkat(lower, &path).ok() => {}
            _ => out.push(shown),
        }
    }
}

fn kind(stat: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits())
}

/// Whether a copied-up regular file still equals the one beneath.
fn same_file(
    upper: BorrowedFd<'_>,
    lower: BorrowedFd<'_>,
    path: &Path,
    stat: &FileStat,
    beneath: &FileStat,
) -> bool {
    if kind(beneath) != SFlag::S_IFREG
        || stat.st_mode != beneath.st_mode
        || stat.st_size != beneath.st_size
    {
        return false;
    }
    let read = |directory: BorrowedFd<'_>| -> Option<Vec<u8>> {
        let fd = openat(
            directory,
            path,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    };
    matches!((read(upper), read(lower)), (Some(a), Some(b)) if a == b)
}
