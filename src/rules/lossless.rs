//! `--rules-mode lossless`: replace an older result by a pointer to a later, kept result that
//! holds exactly the same output (`[identical output kept at <id>]`) or holds it as a run of
//! whole lines (`[output = lines a-b of <id>]`). The note alone rebuilds the original.
//!
//! Rules (seed §5, `reference/spec-rules.md` §2):
//! * results are scanned newest first; only candidate results are replaced; any later result
//!   (pinned or orphan included) that is still kept and has the same `is_error` may be a target;
//! * the nearest later matching result wins, even when its note would not be shorter (then
//!   nothing is replaced);
//! * "identical" compares lines after dropping Codex `Chunk ID:` / `Wall time:` /
//!   `Original token count:` header lines (exit codes are compared); "lines a-b" compares raw
//!   lines;
//! * a replaced result is never a target.
//!
//! The Python release compares every result with every later one (quadratic: 220 s at 50 000
//! messages). Here every result is indexed by the hash of its comparable form and by the hashes
//! of its lines; a result is only compared with later results that hold its rarest line.

use std::collections::{HashMap, HashSet};

use crate::decide::{Action, Decision};
use crate::transcript::{BlockRef, Pair, Transcript};

/// A 64-bit FNV-1a hash: fast, stable, and only used to find candidates that are then
/// compared byte for byte.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const HEADER_NAMES: [&str; 5] = [
    "Chunk ID",
    "Wall time",
    "Process exited with code",
    "Process running with session ID",
    "Original token count",
];
const VOLATILE: [&str; 3] = ["Chunk ID:", "Wall time:", "Original token count:"];

pub(crate) fn is_header_line(line: &str) -> bool {
    HEADER_NAMES.iter().any(|name| {
        line.strip_prefix(name).is_some_and(|rest| {
            // `\b` after the name: the next char must not be a word character.
            rest.chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
    })
}

/// The framed comparable form: `"\n" + lines + "\n"`, with Codex volatile header lines
/// dropped when a header block is followed by a line that is exactly `Output:`.
pub fn comparable(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let end = lines.iter().take_while(|l| is_header_line(l)).count();
    let strip = end > 0 && lines.get(end) == Some(&"Output:");
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\n');
    let mut first = true;
    for (i, l) in lines.iter().enumerate() {
        if strip && i < end && VOLATILE.iter().any(|v| l.starts_with(v)) {
            continue;
        }
        if !first {
            out.push('\n');
        }
        out.push_str(l);
        first = false;
    }
    out.push('\n');
    out
}

/// Per-result index data.
struct Entry {
    framed_hash: u64,
    line_hashes: Vec<u64>,
    /// Byte offset of each line start in the text.
    line_starts: Vec<usize>,
}

fn entry(text: &str) -> Entry {
    let framed = comparable(text);
    let mut line_hashes = Vec::new();
    let mut line_starts = Vec::new();
    let mut start = 0;
    for line in text.split('\n') {
        line_hashes.push(fnv(line.as_bytes()));
        line_starts.push(start);
        start += line.len() + 1;
    }
    Entry {
        framed_hash: fnv(framed.as_bytes()),
        line_hashes,
        line_starts,
    }
}

/// First line index in `o` where `r`'s lines appear as a contiguous run (verified on the
/// actual text), or `None`.
fn find_lines(r_text: &str, r: &Entry, o_text: &str, o: &Entry) -> Option<usize> {
    let k = r.line_hashes.len();
    if k > o.line_hashes.len() {
        return None;
    }
    for p in 0..=(o.line_hashes.len() - k) {
        if o.line_hashes[p..p + k] == r.line_hashes[..] {
            let from = o.line_starts[p];
            let to = from + r_text.len();
            let ends_on_line = o_text.len() == to || o_text.as_bytes().get(to) == Some(&b'\n');
            if o_text.get(from..to) == Some(r_text) && ends_on_line {
                return Some(p);
            }
        }
    }
    None
}

/// The positions in a sorted list that come after `i`.
fn later(list: Option<&Vec<usize>>, i: usize) -> &[usize] {
    list.map_or(&[], |l| &l[l.partition_point(|&j| j <= i)..])
}

/// Decide every candidate. Returns one decision per candidate, in candidate order.
pub fn decide(t: &Transcript, candidates: &[Pair]) -> Vec<Decision> {
    decide_excluding(t, candidates, &HashSet::new())
}

/// [`decide`], where the results in `unavailable` are being replaced by another policy: they
/// are neither deduped here nor used as pointer targets.
pub fn decide_excluding(
    t: &Transcript,
    candidates: &[Pair],
    unavailable: &HashSet<BlockRef>,
) -> Vec<Decision> {
    // Every result in transcript order.
    let mut all: Vec<BlockRef> = Vec::new();
    for (mi, m) in t.messages.iter().enumerate() {
        for bi in 0..m.results.len() {
            all.push(BlockRef {
                message: mi,
                block: bi,
            });
        }
    }
    let position: HashMap<BlockRef, usize> = all.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let texts: Vec<&str> = all.iter().map(|r| t.result(*r).text.as_str()).collect();
    let entries: Vec<Entry> = {
        use rayon::prelude::*;
        texts.par_iter().map(|s| entry(s)).collect()
    };
    // Indexes: framed hash -> positions; line hash -> positions (each position once per line).
    let mut by_framed: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut by_line: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        by_framed.entry(e.framed_hash).or_default().push(i);
        for &h in &e.line_hashes {
            let list = by_line.entry(h).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }

    let is_candidate: HashMap<usize, usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, p)| !unavailable.contains(&p.result))
        .filter_map(|(ci, p)| position.get(&p.result).map(|&pos| (pos, ci)))
        .collect();
    let mut kept: Vec<bool> = all.iter().map(|r| !unavailable.contains(r)).collect();
    let mut outcome: Vec<Option<(String, String, &'static str)>> = vec![None; candidates.len()];

    for i in (0..all.len()).rev() {
        let Some(&ci) = is_candidate.get(&i) else {
            continue;
        };
        let text = texts[i];
        if text.is_empty() {
            continue; // framed form "\n\n": never deduped
        }
        let me = &entries[i];
        let is_error = t.result(all[i]).is_error;
        // Later results that may be identical, and later results holding our rarest line.
        let same = later(by_framed.get(&me.framed_hash), i);
        let rarest = me
            .line_hashes
            .iter()
            .filter_map(|h| by_line.get(h))
            .min_by_key(|l| l.len());
        let holders = later(rarest, i);
        let (mut a, mut b) = (0, 0);
        let my_framed = comparable(text);
        while a < same.len() || b < holders.len() {
            let j = match (same.get(a), holders.get(b)) {
                (Some(&x), Some(&y)) if x == y => {
                    a += 1;
                    b += 1;
                    x
                }
                (Some(&x), Some(&y)) if x < y => {
                    a += 1;
                    x
                }
                (Some(&x), None) => {
                    a += 1;
                    x
                }
                (_, Some(&y)) => {
                    b += 1;
                    y
                }
                (None, None) => break,
            };
            let other = t.result(all[j]);
            if !kept[j] || other.is_error != is_error {
                continue;
            }
            let found = if entries[j].framed_hash == me.framed_hash
                && comparable(&other.text) == my_framed
            {
                Some((
                    format!("[identical output kept at {}]", other.id),
                    "identical_output_kept_later",
                ))
            } else {
                find_lines(text, me, &other.text, &entries[j]).map(|p| {
                    let first = p + 1;
                    let last = first + me.line_hashes.len() - 1;
                    (
                        format!("[output = lines {first}-{last} of {}]", other.id),
                        "output_lines_of_later",
                    )
                })
            };
            if let Some((note, reason)) = found {
                if note.chars().count() < text.chars().count() {
                    kept[i] = false;
                    outcome[ci] = Some((other.id.clone(), note, reason));
                }
                break;
            }
        }
    }

    candidates
        .iter()
        .zip(outcome)
        .map(|(p, o)| {
            let (action, reason) = match o {
                Some((kept_at, note, reason)) => (Action::Dedupe { kept_at, note }, reason),
                None => (Action::Keep, "no_lossless_superseder"),
            };
            Decision {
                call: p.call,
                result: Some(p.result),
                action,
                keep_call: None,
                keep_result: None,
                source: "rules",
                reason: reason.to_string(),
            }
        })
        .collect()
}

/// Re-check a compacted transcript against the original: same messages, roles, texts, calls
/// and result ids/flags; every changed result holds a note whose claim is true against the
/// first later unchanged result with the named id. Returns the violations (empty = pass).
pub fn verify(original: &Transcript, compacted: &Transcript) -> Vec<String> {
    verify_with(original, compacted, &|_, _| false)
}

/// [`verify`], where `allow(original_result, new_text)` may accept a changed result that is
/// not a lossless note (the recoverable and stashed modes' own pointers).
pub fn verify_with(
    original: &Transcript,
    compacted: &Transcript,
    allow: &dyn Fn(&crate::transcript::ToolResult, &str) -> bool,
) -> Vec<String> {
    let mut v = Vec::new();
    if original.messages.len() != compacted.messages.len() {
        v.push(format!(
            "message count changed: {} -> {}",
            original.messages.len(),
            compacted.messages.len()
        ));
        return v;
    }
    for (i, (a, b)) in original
        .messages
        .iter()
        .zip(&compacted.messages)
        .enumerate()
    {
        let w = format!("message {i}");
        if a.role != b.role {
            v.push(format!("{w}: role changed"));
        }
        if a.text != b.text {
            v.push(format!("{w}: text changed"));
        }
        let calls = |m: &crate::transcript::Message| -> Vec<(String, String, serde_json::Value)> {
            m.calls
                .iter()
                .map(|c| (c.id.clone(), c.tool.clone(), c.input.clone()))
                .collect()
        };
        if calls(a) != calls(b) {
            v.push(format!("{w}: tool calls changed"));
        }
        let ids = |m: &crate::transcript::Message| -> Vec<(String, bool)> {
            m.results
                .iter()
                .map(|r| (r.id.clone(), r.is_error))
                .collect()
        };
        if ids(a) != ids(b) {
            v.push(format!("{w}: tool result ids or error flags changed"));
        }
    }
    if !v.is_empty() {
        return v;
    }
    let old: Vec<&crate::transcript::ToolResult> =
        original.messages.iter().flat_map(|m| &m.results).collect();
    let new: Vec<&crate::transcript::ToolResult> =
        compacted.messages.iter().flat_map(|m| &m.results).collect();
    let unchanged: Vec<bool> = old
        .iter()
        .zip(&new)
        .map(|(a, b)| a.text == b.text)
        .collect();
    for (i, (a, b)) in old.iter().zip(&new).enumerate() {
        if unchanged[i] || allow(a, &b.text) {
            continue;
        }
        let ok = check_note(&b.text, a, &old, &unchanged, i);
        if !ok {
            v.push(format!(
                "result {} changed and its note does not point at a later unchanged result that holds its exact text",
                a.id
            ));
        }
    }
    v
}

fn check_note(
    note: &str,
    original: &crate::transcript::ToolResult,
    old: &[&crate::transcript::ToolResult],
    unchanged: &[bool],
    i: usize,
) -> bool {
    let target_of = |id: &str| {
        (i + 1..old.len())
            .find(|&j| old[j].id == id && unchanged[j] && old[j].is_error == original.is_error)
            .map(|j| old[j])
    };
    if let Some(id) = note
        .strip_prefix("[identical output kept at ")
        .and_then(|s| s.strip_suffix(']'))
    {
        return target_of(id).is_some_and(|t| comparable(&t.text) == comparable(&original.text));
    }
    if let Some(rest) = note
        .strip_prefix("[output = lines ")
        .and_then(|s| s.strip_suffix(']'))
    {
        let Some((range, id)) = rest.split_once(" of ") else {
            return false;
        };
        let Some((a, b)) = range.split_once('-') else {
            return false;
        };
        let (Ok(first), Ok(last)) = (a.parse::<usize>(), b.parse::<usize>()) else {
            return false;
        };
        if first == 0 || last < first {
            return false;
        }
        return target_of(id).is_some_and(|t| {
            let lines: Vec<&str> = t.text.split('\n').collect();
            last <= lines.len() && lines[first - 1..last].join("\n") == original.text
        });
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_headers() {
        let a = "Chunk ID: 1\nWall time: 0.1s\nProcess exited with code 0\nOutput:\nok";
        let b = "Chunk ID: 2\nWall time: 0.3s\nProcess exited with code 0\nOutput:\nok";
        let c = "Chunk ID: 2\nWall time: 0.3s\nProcess exited with code 1\nOutput:\nok";
        assert_eq!(comparable(a), comparable(b));
        assert_ne!(comparable(a), comparable(c));
        // Without an `Output:` line the header is compared as written.
        assert_ne!(comparable("Chunk ID: 1\nok"), comparable("Chunk ID: 2\nok"));
        assert!(!is_header_line("Chunk IDs: 1"));
    }

    #[test]
    fn line_runs() {
        let r = "b\nc";
        let o = "a\nb\nc\nd";
        assert_eq!(find_lines(r, &entry(r), o, &entry(o)), Some(1));
        let o2 = "a\nxb\nc";
        assert_eq!(find_lines(r, &entry(r), o2, &entry(o2)), None);
    }
}
