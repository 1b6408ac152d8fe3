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
/// What is written is redacted ([`crate::redact`]) first.
///
/// Read errors end the stream (the child's end is gone). A write error (a
/// full disk) stops writing but not reading: the child must never block on
/// a full pipe because baton's log broke. Bytes that are not written mark
/// the stream truncated.
pub(crate) async fn drain(
    mut pipe: impl AsyncRead + Unpin,
    mut log: Log,
    activity: Arc<Activity>,
    mut lines: crate::redact::Lines,
) {
    let mut first = [0_u8; FIRST_READ_BYTES];
    let mut buffer: Vec<u8> = Vec::new();
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
        log.stats.bytes.fetch_add(read as u64, Ordering::Relaxed);
        activity.record(read as u64);
        if log.full() {
            log.drop_bytes(read);
        } else {
            log.write(&lines.feed(chunk)).await;
        }
        if grow {
            buffer = vec![0_u8; READ_BUFFER_BYTES];
        }
    }
    if !log.full() {
        log.write(&lines.finish()).await;
    }
    log.close().await;
}

/// A stream's log file, written up to its cap.
pub(crate) struct Log {
    path: std::path::PathBuf,
    cap: u64,
    file: Option<tokio::fs::File>,
    written: u64,
    dropped: u64,
    broken: bool,
    stats: Arc<StreamStats>,
    tail: Option<Arc<Mutex<Tail>>>,
}

impl Log {
    /// The log at `path`, not yet created; `tail` (if any) keeps the end of
    /// what is written.
    pub(crate) fn new(
        path: std::path::PathBuf,
        cap: u64,
        stats: Arc<StreamStats>,
        tail: Option<Arc<Mutex<Tail>>>,
    ) -> Log {
        Log {
            path,
            cap,
            file: None,
            written: 0,
            dropped: 0,
            broken: false,
            stats,
            tail,
        }
    }

    /// Nothing more can be written: the cap is reached or the file broke.
    fn full(&self) -> bool {
        self.written >= self.cap || self.broken
    }

    fn drop_bytes(&mut self, count: usize) {
        self.dropped += count as u64;
        self.stats.truncated.store(true, Ordering::Relaxed);
    }

    /// Writes what fits under the cap, opening the file at the first byte.
    async fn write(&mut self, ready: &[u8]) {
        if ready.is_empty() {
            return;
        }
        if let Some(tail) = &self.tail {
            tail.lock()
                .expect("tail lock is never poisoned")
                .push(ready);
        }
        let keep = usize::try_from(self.cap.saturating_sub(self.written))
            .unwrap_or(usize::MAX)
            .min(ready.len());
        if keep < ready.len() {
            self.drop_bytes(ready.len() - keep);
        }
        if self.file.is_none() {
            match open_log(&self.path).await {
                Ok(file) => self.file = Some(file),
                Err(_) => {
                    self.broken = true;
                    self.drop_bytes(ready.len());
                    return;
                }
            }
        }
        let file = self.file.as_mut().expect("opened above");
        if file.write_all(&ready[..keep]).await.is_ok() {
            self.written += keep as u64;
        } else {
            self.broken = true;
            self.drop_bytes(keep);
        }
    }

    async fn close(self) {
        let Some(mut file) = self.file else {
            return;
        };
        // A log that stops at the cap says so, in the file itself: a reader
        // must not take its last line for the stream's.
        if self.dropped > 0 && !self.broken {
            let mark = format!(
                "\n[baton: this log stops at {} bytes; {} more were not kept]\n",
                self.written, self.dropped
            );
            let _ = file.write_all(mark.as_bytes()).await;
        }
        if file.flush().await.is_err() {
            self.stats.truncated.store(true, Ordering::Relaxed);
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
