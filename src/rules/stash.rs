//! `--rules-mode stashed`: remove what `lossy` would drop or trim and what `recoverable`
//! would replace, but keep the exact bytes in a local content-addressed stash, so nothing is
//! lost: the result becomes `[removed: N lines, M tokens · lcc recall <id>]` and
//! `lcc recall <id>` prints the bytes back after checking their hash.
//!
//! # The stash
//! One file per removed output, named by the SHA-256 of its UTF-8 bytes (64 lowercase hex
//! digits), in `$LCC_STASH_DIR` (default: the user cache directory's `lcc/stash`). The id in
//! a note is the first 12 hex digits; `lcc recall` accepts any unambiguous prefix of 12 to 64
//! digits. Files are written atomically (a temporary file renamed into place) before the
//! transcript that points at them, and re-hashed on every read: a file whose bytes no longer
//! hash to its name is never printed.
//!
//! Lossless dedupes win where they apply (they need no stash). A result is stashed whole,
//! never cut, and only where the note is shorter than the result. Calls, inputs and texts
//! never change. This module is pure: the command layer writes and reads the files.

use std::sync::LazyLock;

use regex::Regex;
use sha2::{Digest, Sha256};

use super::calls::Context;
use super::disk::FileProbe;
use super::recoverable::{self, Plan};
use crate::decide::{Action, Decision};
use crate::transcript::{BlockRef, ToolResult, Transcript};

/// Hex digits of the id a note shows.
pub const ID_LEN: usize = 12;

/// The SHA-256 of a text's UTF-8 bytes, as 64 lowercase hex digits.
pub fn digest(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(64);
    for b in Sha256::digest(text.as_bytes()) {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Lines as `lcc recall --lines` numbers them: each ends at a `\n` (the last one may not).
pub fn line_count(text: &str) -> usize {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The note that replaces a stashed result.
pub fn note(text: &str, tokens: usize, digest: &str) -> String {
    format!(
        "[removed: {}, {} · lcc recall {}]",
        plural(line_count(text), "line", "lines"),
        plural(tokens, "token", "tokens"),
        &digest[..ID_LEN]
    )
}

static NOTE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\A\[removed: ([0-9]+) lines?, ([0-9]+) tokens? · lcc recall ([0-9a-f]{12})\]\z")
        .expect("regex")
});

/// Is `new` the stash note of `original` (its id is the hash of the original, its line count
/// is the original's)?
pub fn is_note_of(original: &str, new: &str) -> bool {
    NOTE.captures(new).is_some_and(|c| {
        c[1].parse::<usize>().ok() == Some(line_count(original))
            && digest(original).starts_with(&c[3])
    })
}

/// Decide every candidate. Returns the decisions (candidate order) and the stash entries:
/// (decision index, digest of the result text to write). The stashed results' notes are
/// left empty until [`finish_notes`] knows their token counts.
pub fn decide(
    ctx: &Context<'_>,
    opts: &recoverable::Options<'_>,
    probe: &dyn FileProbe,
) -> (Vec<Decision>, Vec<(usize, String)>) {
    // Command pointers never matter here: the bytes are stashed, not re-run.
    let rec_opts = recoverable::Options {
        allow_command_pointers: false,
        ..*opts
    };
    // The two policies are independent: run them side by side.
    let (lossy, plans) = std::thread::scope(|scope| {
        let lossy = scope.spawn(|| super::lossy::decide(ctx));
        let plans = recoverable::plan(ctx, &rec_opts, probe);
        let lossy = lossy
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (lossy, plans)
    });
    let eligible: Vec<Option<String>> = lossy
        .iter()
        .zip(&plans)
        .map(|(lo, plan)| match plan {
            Plan::Replace(hit) => Some(hit.reason.to_string()),
            Plan::Keep(_) if matches!(lo.action, Action::Drop | Action::Trim(_)) => {
                Some(lo.reason.clone())
            }
            Plan::Keep(_) => None,
        })
        .collect();
    let unavailable: crate::fasthash::FastSet<BlockRef> = ctx
        .pairs()
        .iter()
        .zip(&eligible)
        .filter(|(_, e)| e.is_some())
        .map(|(p, _)| p.result)
        .collect();
    let base = super::lossless::decide_excluding(ctx.t, ctx.pairs(), &unavailable);
    let texts: Vec<BlockRef> = ctx
        .pairs()
        .iter()
        .zip(&eligible)
        .filter(|(_, e)| e.is_some())
        .map(|(p, _)| p.result)
        .collect();
    let mut digests = {
        use rayon::prelude::*;
        texts
            .par_iter()
            .map(|&r| ctx.t.with_text(ctx.t.result(r), digest))
            .collect::<Vec<_>>()
            .into_iter()
    };
    let mut stash = Vec::new();
    let decisions = base
        .into_iter()
        .zip(eligible)
        .enumerate()
        .map(|(k, (d, why))| {
            if d.action != Action::Keep {
                return d; // a lossless dedupe (eligible results are never deduped)
            }
            let Some(why) = why else {
                return Decision {
                    reason: "not_stash_eligible".into(),
                    ..d
                };
            };
            let hash = digests.next().unwrap_or_default();
            let recover = format!("lcc recall {}", &hash[..ID_LEN]);
            stash.push((k, hash));
            Decision {
                action: Action::Replace {
                    note: String::new(),
                    recover,
                },
                reason: format!("stashed:{why}"),
                ..d
            }
        })
        .collect();
    (decisions, stash)
}

/// Write the stash notes now that the token counts of the stashed results are known. A
/// result whose note would not be shorter is kept whole (`short_result_kept_whole`) and
/// leaves the stash list.
pub fn finish_notes(
    t: &Transcript,
    decisions: &mut [Decision],
    extras: &mut super::Extras,
    tokens: impl Fn(BlockRef) -> usize,
) {
    extras.stash.retain(|(k, hash)| {
        let d = &mut decisions[*k];
        let Some(r) = d.result else {
            return false;
        };
        let n = tokens(r);
        let (note, shorter) = t.with_text(t.result(r), |text| {
            let note = note(text, n, hash);
            let shorter = shorter(&note, text);
            (note, shorter)
        });
        if !shorter {
            d.action = Action::Keep;
            d.reason = "short_result_kept_whole".into();
            return false;
        }
        if let Action::Replace { note: n, .. } = &mut d.action {
            *n = note;
        }
        true
    });
    extras.notes_pending = false;
}

/// Will [`finish_notes`] keep this entry stashed whatever the text's token count turns out
/// to be? A count never exceeds the text's UTF-8 bytes (every token holds at least one), and
/// a larger count never gives a shorter note, so the note at that bound is the longest one.
/// Such entries can be written to the stash before the counts are known.
pub fn stashed_whatever_the_count(text: &str, digest: &str) -> bool {
    shorter(&note(text, text.len(), digest), text)
}

/// A note replaces a text only when it is shorter, in characters.
fn shorter(note: &str, text: &str) -> bool {
    note.chars().count() < text.chars().count()
}

/// The verifier's hook: a changed result is accepted when it is its own stash note.
pub fn allow(_old: &ToolResult, old_text: &str, new: &str) -> bool {
    is_note_of(old_text, new)
}

/// Is `id` a stash id (12 to 64 lowercase hex digits)?
pub fn is_id(id: &str) -> bool {
    (ID_LEN..=64).contains(&id.len()) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Is `name` a stash file name (64 lowercase hex digits)?
pub fn is_file_name(name: &str) -> bool {
    name.len() == 64 && is_id(name)
}

/// Parse `--lines a-b` (or `a`): a 1-based inclusive range.
pub fn parse_lines(spec: &str) -> Option<(usize, usize)> {
    let (a, b) = spec.split_once('-').unwrap_or((spec, spec));
    let a: usize = a.trim().parse().ok()?;
    let b: usize = b.trim().parse().ok()?;
    (a >= 1 && b >= a).then_some((a, b))
}

/// Lines `a..=b` of stored bytes (each line with its own `\n`), or `None` when the range
/// starts past the end. A range that runs past the end stops at the last line.
pub fn slice_lines(bytes: &[u8], (a, b): (usize, usize)) -> Option<&[u8]> {
    let mut starts = vec![0usize];
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'\n' && i + 1 < bytes.len() {
            starts.push(i + 1);
        }
    }
    if bytes.is_empty() || a > starts.len() {
        return None;
    }
    let from = starts[a - 1];
    let to = starts.get(b).copied().unwrap_or(bytes.len());
    Some(&bytes[from..to])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes() {
        let text = "a\nb\nc\n";
        let h = digest(text);
        assert_eq!(h.len(), 64);
        let n = note(text, 7, &h);
        assert_eq!(
            n,
            format!("[removed: 3 lines, 7 tokens · lcc recall {}]", &h[..12])
        );
        assert!(is_note_of(text, &n));
        assert!(!is_note_of("a\nb\nd\n", &n));
        assert!(!is_note_of("a\nb\nc\nd", &n));
        assert_eq!(
            note("x", 1, &h),
            format!("[removed: 1 line, 1 token · lcc recall {}]", &h[..12])
        );
        assert!(is_note_of("x", &note("x", 1, &digest("x"))));
    }

    #[test]
    fn ids_and_ranges() {
        assert!(is_id("0123456789ab"));
        assert!(!is_id("0123456789a"));
        assert!(!is_id("0123456789AB"));
        assert!(!is_id("../../etc/pw"));
        assert_eq!(parse_lines("2-3"), Some((2, 3)));
        assert_eq!(parse_lines("4"), Some((4, 4)));
        assert_eq!(parse_lines("3-2"), None);
        assert_eq!(parse_lines("0-2"), None);
        assert_eq!(parse_lines("x"), None);
        let b = b"one\ntwo\r\nthree";
        assert_eq!(slice_lines(b, (2, 2)), Some(&b"two\r\n"[..]));
        assert_eq!(slice_lines(b, (2, 9)), Some(&b"two\r\nthree"[..]));
        assert_eq!(slice_lines(b, (4, 4)), None);
        assert_eq!(slice_lines(b"x\n", (1, 1)), Some(&b"x\n"[..]));
        assert_eq!(slice_lines(b"x\n", (2, 2)), None);
    }
}
