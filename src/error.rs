//! The error kinds that decide the exit code.

use crate::transcript::ParseError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag is refused, out of range or inconsistent (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The input cannot be read as a transcript (exit 2).
    #[error("{file}: {error}")]
    Input { file: String, error: ParseError },
    /// The conversation cannot be shown to the judge within the budget (exit 2).
    #[error("{0}")]
    Fit(String),
    /// A file could not be read or written (exit 1).
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}
