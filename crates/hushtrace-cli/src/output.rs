//! What every converter shares: the error of a conversion and JSON string escaping. A bottom
//! layer of the CLI: `chrome`, `perfetto` and `kernel_convert` use it, it uses none of them.

use hushtrace_ctf::reader::Error as ReadError;
use std::io::{self, Write};

/// A conversion failure: reading the trace or writing the output.
#[derive(Debug)]
pub enum ConvertError {
    /// The trace is unreadable or corrupt.
    Read(ReadError),
    /// The output could not be written.
    Write(io::Error),
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Read(e) => write!(f, "{e}"),
            ConvertError::Write(e) => write!(f, "writing output: {e}"),
        }
    }
}

// No `source()`: `Display` already includes the inner error, so chains would repeat it.
impl std::error::Error for ConvertError {}

impl From<ReadError> for ConvertError {
    fn from(e: ReadError) -> Self {
        ConvertError::Read(e)
    }
}

impl From<io::Error> for ConvertError {
    fn from(e: io::Error) -> Self {
        ConvertError::Write(e)
    }
}

/// Writes `s` as a JSON string literal.
pub fn json_str(line: &mut Vec<u8>, s: &str) {
    line.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f | 0x7f => b"",
            _ => continue,
        };
        line.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            let _ = write!(line, "\\u{:04x}", b);
        } else {
            line.extend_from_slice(esc);
        }
        start = i + 1;
    }
    line.extend_from_slice(&bytes[start..]);
    line.push(b'"');
}
