//! What the store does with SQLite's write-ahead log: copies it into the
//! database once per process, and leaves it for the next process at exit.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Db;

impl Db {
    /// Copies the write-ahead log into the database once per process, after
    /// its first commit that does not end a drive.
    ///
    /// The process that opens a store after every connection has closed
    /// reads the whole log back, page by page, to index it: up to the 1 000
    /// pages SQLite lets it reach before its own checkpoint, many runs'
    /// commits. Copied here, in the middle of a drive while its processes
    /// run, the log the next process finds holds only what was written
    /// after this point. The price is the next commit starting the log
    /// over, one more fsync; at exit the copy would cost two fsyncs on the
    /// way out. A checkpoint that cannot finish (a reader holds an old
    /// snapshot) or fails leaves the log as it was, for SQLite's own
    /// checkpoint to copy later; the commit it follows has landed either way.
    pub(crate) async fn checkpoint_once(&self) {
        if !self.checkpointed.swap(true, Ordering::Relaxed) {
            let _ = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&self.write)
                .await;
        }
    }

    /// Lets go of the file just before the process exits. The connection
    /// that closes last checkpoints the write-ahead log into the database
    /// (two more fsyncs) and deletes it, and the next process then creates
    /// the log again and syncs its header and the directory on its first
    /// commit. Every commit is already durable in the log, so the writer is
    /// left for the exit to end, and the next open reads the log back: what
    /// was written since a drive's first commit copied it
    /// ([`Db::checkpoint_once`]), or at most `wal_autocheckpoint` pages.
    pub(crate) async fn close_at_exit(self) {
        // Held and forgotten, the writer is never closed, however the
        // runtime's remaining tasks are dropped after this. A connection
        // still busy after a moment is left to close as before.
        if let Ok(Ok(connection)) =
            tokio::time::timeout(Duration::from_millis(100), self.write.acquire()).await
        {
            std::mem::forget(connection);
        }
        std::mem::forget(self);
    }
}
