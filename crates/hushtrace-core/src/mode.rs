//! The buffer mode of a session: what a full ring does.

use core::fmt;
use core::str::FromStr;

/// What happens when a thread's ring is full.
///
/// The one `Mode` type of hushtrace: the runtime (`hushtrace::Mode`), the environment
/// (`HUSHTRACE_MODE`) and the command line (`hushtrace record --mode`) all use it.
///
/// ```
/// use hushtrace_core::Mode;
/// assert_eq!("overwrite".parse::<Mode>(), Ok(Mode::Overwrite));
/// assert_eq!(Mode::Discard.as_str(), "discard");
/// assert!("sometimes".parse::<Mode>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Drop new events and count them (the default).
    #[default]
    Discard,
    /// Flight recorder: overwrite the oldest packets, count their events, keep the newest.
    Overwrite,
}

impl Mode {
    /// Every mode, for listings.
    pub const ALL: [Mode; 2] = [Mode::Discard, Mode::Overwrite];

    /// The spelling used by `HUSHTRACE_MODE` and `--mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Discard => "discard",
            Mode::Overwrite => "overwrite",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Mode`]: the text was neither `discard` nor `overwrite`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseModeError;

impl fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("expected `discard` or `overwrite`")
    }
}

impl std::error::Error for ParseModeError {}

impl FromStr for Mode {
    type Err = ParseModeError;
    fn from_str(s: &str) -> Result<Mode, ParseModeError> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s.trim())
            .ok_or(ParseModeError)
    }
}
