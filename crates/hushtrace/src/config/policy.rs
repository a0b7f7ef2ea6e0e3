//! The no-syscall policy (`HUSHTRACE_NO_SYSCALL_POLICY`).

use super::Error;
use crate::env;

/// What a tracepoint on a no-syscall thread does when it would still need a system call
/// (`HUSHTRACE_NO_SYSCALL_POLICY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Policy {
    /// Record zeros instead of the missing value (the default).
    #[default]
    Zero = 0,
    /// Record a `hushtrace:no_syscall_violation` event naming what was needed (once per thread
    /// and kind of violation), itself without a system call; the missing value is zero.
    Log = 1,
    /// Abort the process.
    Abort = 2,
}

impl Policy {
    /// Parses `HUSHTRACE_NO_SYSCALL_POLICY`'s value (`None` = unset).
    pub(crate) fn parse_env(value: Option<String>) -> Result<Policy, Error> {
        let Some(v) = value else {
            return Ok(Policy::Zero);
        };
        match v.trim() {
            "zero" | "" => Ok(Policy::Zero),
            "log" => Ok(Policy::Log),
            "abort" => Ok(Policy::Abort),
            _ => Err(Error::Config {
                var: Some(env::NO_SYSCALL_POLICY),
                value: v,
                reason: "expected `zero`, `log` or `abort`".into(),
            }),
        }
    }

    pub(crate) fn from_u8(v: u8) -> Policy {
        match v {
            1 => Policy::Log,
            2 => Policy::Abort,
            _ => Policy::Zero,
        }
    }
}
