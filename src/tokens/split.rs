//! The encodings' pre-tokenizers for any text.
//!
//! Both patterns end in alternatives for whitespace that need a look-ahead (`\s+(?!\S)`: a
//! whitespace run that is not followed by a non-whitespace character) and, for cl100k, an
//! end-of-text anchor after a possessive run (`\s++$`). The `regex` crate has neither, so the
//! regexes below end in a plain `\s+` instead, and [`whitespace_end`] works out where the
//! original alternatives would have stopped: the earlier alternatives are unchanged and tried
//! first (leftmost-first, as a backtracking engine would), and a match of the final `\s+` is
//! the only kind made of whitespace alone.
//!
//! The original patterns, as alternatives tried in order:
//! - o200k: letters with an optional leading character (upper-case then lower-case classes,
//!   two variants) and an optional contraction; `\p{N}{1,3}`; ` ?[^\s\p{L}\p{N}]+[\r\n/]*`;
//!   `\s*[\r\n]+`; `\s+(?!\S)`; `\s+`.
//! - cl100k: a contraction; `[^\r\n\p{L}\p{N}]?+\p{L}++`; `\p{N}{1,3}+`;
//!   ` ?[^\s\p{L}\p{N}]++[\r\n]*+`; `\s++$`; `\s*[\r\n]`; `\s+(?!\S)`; `\s`.
//!
//! The possessive quantifiers in cl100k's change nothing here (what follows each never
//! matches what it would give back), so plain ones are used.

use std::sync::OnceLock;

use regex::Regex;

use super::Encoding;

const O200K: &str = concat!(
    r"^(?:[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s+)",
);

const CL100K: &str = concat!(
    r"^(?:'(?i:[sdmt]|ll|ve|re)",
    r"|[^\r\n\p{L}\p{N}]?\p{L}+",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s+)",
);

fn regex(enc: Encoding) -> &'static Regex {
    static RES: [OnceLock<Regex>; 2] = [OnceLock::new(), OnceLock::new()];
    let pat = match enc {
        Encoding::O200k => O200K,
        Encoding::Cl100k => CL100K,
    };
    RES[enc.index()].get_or_init(|| Regex::new(pat).expect("the pre-tokenizer pattern compiles"))
}

/// The pieces of `text`, in order, as the encoding's pre-tokenizer cuts them.
pub fn split(enc: Encoding, text: &str) -> impl Iterator<Item = &str> {
    let re = regex(enc);
    let mut rest = text;
    std::iter::from_fn(move || {
        // Anchored at the start of what is left (no alternative looks behind, so cutting the
        // text changes no match): a far smaller automaton than a search for the next match.
        // Every character starts a match of some alternative, so this fails only at the end.
        let m = re.find(rest)?;
        let mut end = m.end();
        if is_whitespace_run(m.as_str()) {
            end = whitespace_end(enc, m.as_str(), end == rest.len());
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// Whether a match came from the final `\s+`: every other alternative needs a character that
/// is not whitespace within its first two (a letter, digit or punctuation after at most one
/// leading character, or the apostrophe of a contraction).
fn is_whitespace_run(m: &str) -> bool {
    let mut chars = m.chars();
    chars.next().is_some_and(char::is_whitespace) && chars.next().is_none_or(char::is_whitespace)
}

/// Where the original pattern's whitespace alternatives end a whole whitespace run `run`
/// (followed by a non-whitespace character, or by the end of the text when `at_end`).
fn whitespace_end(enc: Encoding, run: &str, at_end: bool) -> usize {
    let last_newline = run.rfind(['\r', '\n']);
    let last_char = run.chars().next_back().map_or(0, char::len_utf8);
    let single = last_char == run.len();
    match enc {
        Encoding::O200k => match last_newline {
            Some(k) => k + 1,
            None if at_end || single => run.len(),
            None => run.len() - last_char,
        },
        Encoding::Cl100k => match last_newline {
            _ if at_end => run.len(),
            Some(k) => k + 1,
            None if single => run.len(),
            None => run.len() - last_char,
        },
    }
}
