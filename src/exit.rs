//! Exit codes, and the one place errors are mapped to them.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success, also when the pass was degraded or kept everything fail-safe |
//! | 1 | I/O failure: a file could not be read or written |
//! | 2 | bad input or flags: malformed transcript, refused or out-of-range flag, a state that cannot be fitted |

use std::process::ExitCode;

use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Success,
    Io,
    Invalid,
    /// stdout was closed by the reader (e.g. `| head`): not an error.
    BrokenPipe,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        match s {
            ExitStatus::Success | ExitStatus::BrokenPipe => ExitCode::SUCCESS,
            ExitStatus::Io => ExitCode::from(1),
            ExitStatus::Invalid => ExitCode::from(2),
        }
    }
}

/// Map an error to its exit status.
pub fn status_for(err: &anyhow::Error) -> ExitStatus {
    for cause in err.chain() {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::BrokenPipe {
                return ExitStatus::BrokenPipe;
            }
        }
    }
    match err.downcast_ref::<Error>() {
        Some(Error::Io { .. }) => ExitStatus::Io,
        Some(Error::Usage(_) | Error::Input { .. } | Error::Fit(_)) => ExitStatus::Invalid,
        None => ExitStatus::Io,
    }
}

/// The line an error is reported with (`error: …`): on stderr by the CLI, and as the text of
/// an MCP tool error by `lcc mcp`.
pub fn message(err: &anyhow::Error) -> String {
    // Our own errors already carry their cause in their message.
    if err.downcast_ref::<Error>().is_some() {
        format!("error: {err}")
    } else {
        format!("error: {err:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping() {
        let usage = anyhow::Error::new(Error::Usage("x".into()));
        assert_eq!(status_for(&usage), ExitStatus::Invalid);
        let io = anyhow::Error::new(Error::Io {
            what: "read".into(),
            source: std::io::Error::other("boom"),
        });
        assert_eq!(status_for(&io), ExitStatus::Io);
        let fit = anyhow::Error::new(Error::Fit("x".into()));
        assert_eq!(status_for(&fit), ExitStatus::Invalid);
        assert_eq!(ExitCode::from(ExitStatus::Invalid), ExitCode::from(2));
    }
}
