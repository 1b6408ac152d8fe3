//! How a task run ends early: with an exit code already reported, or with
//! a task error still to report.

use crate::tasks;

/// A failure already reported (an exit code), or a task error to report.
pub(super) enum Failure {
    Code(u8),
    Task(tasks::Error),
}

impl From<tasks::Error> for Failure {
    fn from(error: tasks::Error) -> Failure {
        Failure::Task(error)
    }
}
