//! Draining a child's stdout and stderr with bounded memory.
//!
//! A pipe that nobody reads fills up (64 KiB on Linux) and blocks the child,
//! which then looks hung; reading everything into a `Vec` takes memory
//! without bound. Each stream is therefore read by its
//! own task through one fixed buffer, written to its log file up to a cap,
//! and counted and dropped past it. Memory per stream is the read buffer,
//! the file's write buffer and, for stderr, a 4 KiB tail for error messages,
//! whatever the child emits.
//!
//! The readers also feed the supervisor: the time of the last byte (for the
//! idle timeout) and the total byte count (for the output hard cap).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// Size of each read once a stream has shown it has more to say. Matches the
/// default pipe capacity, so one read usually empties the pipe.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Size of the reads before that, into a buffer on the reader's own stack.
/// Most stages print nothing or a few lines: their streams end without the
/// large buffer being allocated (and zeroed) at all.
const FIRST_READ_BYTES: usize = 512;

/// What one reader has seen so far; shared so the supervisor can read it
/// even when it gives up waiting for a reader.
#[derive(Debug, Default)]
pub(crate) struct StreamStats {
    pub(crate) bytes: AtomicU64,
    pub(crate) truncated: AtomicBool,
}

/// Activity across both streams, for the idle timeout and the hard cap.
#[derive(Debug)]
pub(crate) struct Activity {
    origin: Instant,
    last_byte_nanos: AtomicU64,
    total_bytes: AtomicU64,
    kill_after_bytes: Option<u64>,
    /// Notified once the total passes `kill_after_bytes`. `Notify` keeps a
    /// permit, so a flood that happens before the supervisor waits is not
    /// missed.
    pub(crate) flood: Notify,
}

impl Activity {
    pub(crate) fn new(origin: Instant, kill_after_bytes: Option<u64>) -> Activity {
        Activity {
            origin,
            last_byte_nanos: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            kill_after_bytes,
            flood: Notify::new(),
        }
    }

    /// When the last byte arrived (the start, if none has).
    pub(crate) fn last_byte_at(&self) -> Instant {
        self.origin + std::time::Duration::from_nanos(self.last_byte_nanos.load(Ordering::Relaxed))
    }

    fn record(&self, bytes: u64) {
        let nanos = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_byte_nanos.store(nanos, Ordering::Relaxed);
        let total = self.total_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.kill_after_bytes.is_some_and(|limit| total > limit) {
            self.flood.notify_one();
        }
    }
}

/// The last bytes of a stream, kept for error messages.
#[derive(Debug)]
pub(crate) struct Tail {
    bytes: VecDeque<u8>,
    capacity: usize,
}

impl Tail {
    pub(crate) fn new(capacity: usize) -> Tail {
        Tail {
            bytes: VecDeque::new(),
            capacity,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        let chunk = &chunk[chunk.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    /// The tail as text. A multi-byte character cut at the front is dropped
    /// rather than shown as a replacement character.
    pub(crate) fn to_string_lossy(&self) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let start = bytes
            .iter()
            .take(3)
            .take_while(|byte| (**byte & 0b1100_0000) == 0b1000_0000)
            .count();
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

/// Reads `pipe` to its end, writing at most `cap` bytes to the log file at
/// `log`, which is created (with its directory) only when the first byte
/// arrives: most stages of a large workflow print nothing, and creating two
/// empty files per stage is most of what their bookkeeping would cost.
///
/// Read errors end the stream (the child's end is gone). A write error (a
/// full disk) stops writing but not reading: the child must never block on
/// a full pipe because baton's log broke. Bytes that are not written mark
/// the stream truncated.
pub(crate) async fn drain(
    mut pipe: impl AsyncRead + Unpin,
    log_path: std::path::PathBuf,
    cap: u64,
    stats: Arc<StreamStats>,
    activity: Arc<Activity>,
    tail: Option<Arc<Mutex<Tail>>>,
) {
    let mut first = [0_u8; FIRST_READ_BYTES];
    let mut buffer: Vec<u8> = Vec::new();
    let mut written: u64 = 0;
    let mut log_broken = false;
    let mut log: Option<tokio::fs::File> = None;
    loop {
        let target: &mut [u8] = if buffer.is_empty() {
            &mut first
        } else {
            &mut buffer
        };
        let read = match pipe.read(target).await {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // A full small read: the stream has more to say.
        let grow = buffer.is_empty() && read == FIRST_READ_BYTES;
        let chunk = if buffer.is_empty() {
            &first[..read]
        } else {
            &buffer[..read]
        };
        let read = read as u64;
        stats.bytes.fetch_add(read, Ordering::Relaxed);
        activity.record(read);
        if let Some(tail) = &tail {
            tail.lock()
                .expect("tail lock is never poisoned")
                .push(chunk);
        }
        let keep = cap.saturating_sub(written).min(read);
        if keep < read || log_broken {
            stats.truncated.store(true, Ordering::Relaxed);
        }
        if keep > 0 && !log_broken && log.is_none() {
            match open_log(&log_path).await {
                Ok(file) => log = Some(file),
                Err(_) => {
                    log_broken = true;
                    stats.truncated.store(true, Ordering::Relaxed);
                }
            }
        }
        if let (true, false, Some(file)) = (keep > 0, log_broken, log.as_mut()) {
            let keep_len = usize::try_from(keep).expect("keep <= read, which is a usize");
            if file.write_all(&chunk[..keep_len]).await.is_ok() {
                written += keep;
            } else {
                log_broken = true;
                stats.truncated.store(true, Ordering::Relaxed);
            }
        }
        if grow {
            buffer = vec![0_u8; READ_BUFFER_BYTES];
        }
    }
    if let Some(mut file) = log {
        // A log that stops at the cap says so, in the file itself: a reader
        // must not take its last line for the stream's.
        let dropped = stats.bytes.load(Ordering::Relaxed).saturating_sub(written);
        if dropped > 0 && !log_broken {
            let mark = format!(
                "\n[baton: this log stops at {written} bytes; {dropped} more were not kept]\n"
            );
            let _ = file.write_all(mark.as_bytes()).await;
        }
        if file.flush().await.is_err() {
            stats.truncated.store(true, Ordering::Relaxed);
        }
    }
}

async fn open_log(path: &std::path::Path) -> std::io::Result<tokio::fs::File> {
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        tokio::fs::create_dir_all(parent).await?;
    }
    // A symlink planted where the log goes (by an earlier stage's agent,
    // which may write its workspace) must not redirect baton's writes.
    tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes() {
        let mut tail = Tail::new(4);
        tail.push(b"ab");
        assert_eq!(tail.to_string_lossy(), "ab");
        tail.push(b"cdef");
        assert_eq!(tail.to_string_lossy(), "cdef");
        tail.push(b"g");
        assert_eq!(tail.to_string_lossy(), "defg");
        tail.push(b"0123456789");
        assert_eq!(tail.to_string_lossy(), "6789");
    }

    #[test]
    fn tail_drops_a_cut_multibyte_character() {
        let mut tail = Tail::new(4);
        tail.push("xé€".as_bytes()); // x, c3 a9, e2 82 ac: the last four are a9 e2 82 ac
        assert_eq!(tail.to_string_lossy(), "€");
    }
}
