//! The offline rules provider: deterministic policies that need no model and no network.
//!
//! `lossless` (the default) only replaces a result by a pointer to a later result that holds
//! the same bytes. The other modes (`recoverable`, `lossy`, `stashed`) are not built yet and
//! are refused at the flag level.

pub mod lossless;

/// The rules policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesMode {
    Lossless,
    Recoverable,
    Lossy,
    Stashed,
}

impl RulesMode {
    pub fn name(self) -> &'static str {
        match self {
            RulesMode::Lossless => "lossless",
            RulesMode::Recoverable => "recoverable",
            RulesMode::Lossy => "lossy",
            RulesMode::Stashed => "stashed",
        }
    }
}
