//! A child's start time, read off the boot clock around its spawn.
//!
//! Baton records each child's start time (field 22 of `/proc/<pid>/stat`,
//! clock ticks since boot) with its pid, so that after a restart a reused
//! pid is never taken for the child. Reading `/proc/<pid>/stat` costs an
//! open, a read the kernel formats 52 numbers for, and a close, at every
//! stage.
//!
//! The kernel takes that start time from `CLOCK_BOOTTIME` inside `clone`,
//! and `/proc` shows it truncated to clock ticks (`USER_HZ`, 100 a second),
//! both shifted by the same time-namespace offset as `clock_gettime`. So
//! when the boot clock reads the same tick just before the spawn and just
//! after it, the child started in that tick. When the spawn straddles a
//! tick boundary (a fraction of a millisecond out of ten), `/proc` answers.

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use nix::unistd::{SysconfVar, sysconf};

/// The boot clock, read before a spawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpawnClock {
    before: Option<u64>,
}

impl SpawnClock {
    /// Reads the clock; call right before starting the child.
    pub(crate) fn before_spawn() -> SpawnClock {
        SpawnClock {
            before: now_ticks(),
        }
    }

    /// The child's start time in clock ticks since boot, if the clock read
    /// the same tick before and after its spawn; call right after it.
    pub(crate) fn start_time(self) -> Option<u64> {
        let before = self.before?;
        (now_ticks()? == before).then_some(before)
    }
}

/// `CLOCK_BOOTTIME` in clock ticks, as `/proc` rounds a start time.
fn now_ticks() -> Option<u64> {
    let now = clock_gettime(ClockId::CLOCK_BOOTTIME).ok()?;
    let now = Duration::from(now);
    let nanos_per_tick = 1_000_000_000 / ticks_per_second()?;
    u64::try_from(now.as_nanos() / u128::from(nanos_per_tick)).ok()
}

/// `USER_HZ`, the unit of `/proc`'s times; read once.
fn ticks_per_second() -> Option<u64> {
    static TICKS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let ticks = u64::try_from(sysconf(SysconfVar::CLK_TCK).ok()??).ok()?;
        // Only a tick that divides a second exactly is truncated the way
        // `now_ticks` truncates; anything else goes through `/proc`.
        (ticks > 0 && 1_000_000_000 % ticks == 0).then_some(ticks)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test compares with children it starts itself"
    )]
    fn agrees_with_proc_for_every_child_it_answers_for() {
        let mut answered = 0;
        for _ in 0..200 {
            let clock = SpawnClock::before_spawn();
            let mut child = std::process::Command::new("true")
                .spawn()
                .expect("true runs");
            let computed = clock.start_time();
            let pid = child.id();
            // Still unreaped, so its /proc entry is there and is its own.
            let from_proc = crate::group::process_start_time(pid).expect("a zombie has a stat");
            child.wait().expect("reaped");
            if let Some(computed) = computed {
                assert_eq!(computed, from_proc, "start time of pid {pid}");
                answered += 1;
            }
        }
        // An idle machine answers for all but a few in a hundred; a busy
        // one (CI's two cores running other tests) stretches spawns across
        // more tick boundaries, so only a floor is checked: the fast path
        // is taken, and every answer it gave agreed with `/proc`.
        assert!(answered >= 20, "answered for only {answered} of 200 spawns");
    }
}
