//! The one way baton starts a process.
//!
//! Every process the executor starts — a stage's script, an agent CLI, the
//! containment helper, git, a `--version` probe — is a `std::process::Command`
//! made by [`command`], leading a process group of its own. std starts it
//! with `posix_spawn` (a vfork-style clone: nothing of baton's memory is
//! copied), reports a failed `exec` as an error rather than a dead child,
//! and gives the child an empty signal mask, every caught signal and
//! `SIGPIPE` back at their defaults, and only stdin, stdout and stderr
//! among baton's descriptors (every descriptor baton opens is
//! close-on-exec). Async callers hand the command to
//! `tokio::process::Command::from`.
//!
//! A child leading its own group is what makes one `killpg` reach
//! everything it forked, and it is also why none of them can become a
//! session leader (`setsid` refuses a group leader): the subreaper
//! fallback relies on that to tell a process baton started from one it
//! adopted (see `subreaper.rs`).

use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// A command for `program`, whose process will lead a new process group.
#[expect(
    clippy::disallowed_methods,
    reason = "the executor's one place that makes a command"
)]
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    command.process_group(0);
    command
}

/// A command for `program` whose process stays in baton's own process
/// group: only for the containment helper's children (see
/// `contain/namespace.rs`), which must stay in the group the helper leads
/// so that signalling that group reaches the agent inside.
#[expect(
    clippy::disallowed_methods,
    reason = "the executor's one place that makes a command"
)]
pub(crate) fn command_in_own_group(program: impl AsRef<OsStr>) -> Command {
    Command::new(program)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::process::Stdio;

    use super::*;

    #[test]
    fn the_child_leads_its_own_group_with_no_signal_blocked_and_sigpipe_at_its_default() {
        let output = command("sh")
            .args([
                "-c",
                "cut -d ' ' -f 1,5 /proc/$$/stat; exec grep -E '^Sig(Blk|Ign)' /proc/self/status",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("sh runs");
        let out = String::from_utf8(output.stdout).expect("text");
        let mut lines = out.lines();
        let ids: Vec<&str> = lines
            .next()
            .expect("pid and pgid")
            .split_whitespace()
            .collect();
        assert_eq!(ids[0], ids[1], "pid and pgid: {out}");
        for line in lines {
            let mask = line.split_whitespace().nth(1).expect("a mask");
            let bits = u64::from_str_radix(mask, 16).expect("hex");
            // SIGPIPE (bit 12) is back at its default although baton
            // ignores it.
            assert_eq!(bits & (1 << 12), 0, "{line}");
            if line.starts_with("SigBlk") {
                assert_eq!(bits, 0, "{line}");
            }
        }
    }

    #[test]
    fn baton_s_own_descriptors_are_not_inherited() {
        // Numbered above the few the child opens itself (ls opens 3).
        let own = std::fs::File::open("/dev/null").expect("a descriptor of baton's");
        let own = rustix::io::fcntl_dupfd_cloexec(&own, 100).expect("a high descriptor");
        let mut child = command("sh")
            .args(["-c", "exec ls /proc/self/fd"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("a pipe")
            .read_to_string(&mut out)
            .expect("reads");
        assert!(child.wait().expect("reaps").success());
        let fds: Vec<i32> = out.lines().filter_map(|fd| fd.parse().ok()).collect();
        assert!(
            !fds.contains(&std::os::fd::AsRawFd::as_raw_fd(&own)),
            "{fds:?}"
        );
    }

    #[test]
    fn a_missing_program_or_directory_is_an_error_not_a_dead_child() {
        let dir = tempfile::tempdir().expect("a directory");
        let error = command("/nonexistent/program")
            .spawn()
            .expect_err("an error");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
        let error = command("/bin/sh")
            .current_dir(dir.path().join("gone"))
            .spawn()
            .expect_err("an error");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }
}
