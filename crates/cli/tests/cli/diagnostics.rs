//! Diagnostics snapshots.
