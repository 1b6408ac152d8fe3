//! The `baton` binary: see `baton --help`.

fn main() -> std::process::ExitCode {
    limit_malloc_arenas();
    baton_cli::main()
}

/// glibc gives each thread that allocates an arena of its own, and keeps
/// freed memory at the top of a heap once large blocks have come and gone
/// (its trim threshold keeps rising). A run's threads (the runtime's, each
/// SQLite connection's, the envelope writer's) then hold on to more memory
/// than the run uses; two arenas and a fixed trim threshold keep a large
/// run's peak lower at the same speed (figures in bench/README.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(
    unsafe_code,
    reason = "mallopt is a foreign function; it only sets allocator parameters"
)]
fn limit_malloc_arenas() {
    // SAFETY: `mallopt` takes two integers and touches nothing but the
    // allocator's settings; it runs before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
