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

use std::borrow::Cow;
use std::cell::OnceCell;

use crate::decide::{Action, Decision};
use crate::transcript::{BlockRef, Pair, Transcript};

use crate::fasthash::{hash_bytes, FastMap, FastSet};

pub(crate) const HEADER_NAMES: [&str; 5] = [
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
            rest.chars().next().is_none_or(|c| !super::text::is_word(c))
        })
    })
}

/// The comparable form of a result: its lines with Codex volatile header lines dropped when a
/// header block is followed by a line that is exactly `Output:`; borrowed unless lines are
/// dropped. (Python frames it as `"\n" + lines + "\n"`; framing is injective, so two texts are
/// comparable-equal exactly when their bodies are.)
fn comparable_body(text: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    // Only a text that starts with a header line can lose lines.
    if !HEADER_NAMES.iter().any(|n| text.starts_with(n)) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let end = lines.iter().take_while(|l| is_header_line(l)).count();
    if !(end > 0 && lines.get(end) == Some(&"Output:")) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut first = true;
    for (i, l) in lines.iter().enumerate() {
        if i < end && VOLATILE.iter().any(|v| l.starts_with(v)) {
            continue;
        }
        if !first {
            out.push('\n');
        }
        out.push_str(l);
        first = false;
    }
    Cow::Owned(out)
}

/// Hashes of each raw line of a text.
#[cfg(test)]
fn line_hashes(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    push_line_hashes(text, &mut out);
    out
}

/// Append the hashes of each raw line of a text. 32 bits are enough: a line hash only
/// narrows the search, and every match is confirmed on the text itself.
fn push_line_hashes(text: &str, out: &mut Vec<u32>) {
    out.extend(text.split('\n').map(|l| hash_bytes(l.as_bytes()) as u32));
}

/// The line hashes of every result, stored end to end in chunks of [`LineHashes::CHUNK`]
/// results (a vector per result would cost more than the hashes themselves).
struct LineHashes {
    /// Per chunk: the hashes, and where each result's hashes end.
    chunks: Vec<(Vec<u32>, Vec<u32>)>,
}

impl LineHashes {
    const CHUNK: usize = 256;

    fn of(&self, i: usize) -> &[u32] {
        let (hashes, ends) = &self.chunks[i / Self::CHUNK];
        let k = i % Self::CHUNK;
        let from = if k == 0 { 0 } else { ends[k - 1] as usize };
        &hashes[from..ends[k] as usize]
    }

    fn iter(&self) -> impl Iterator<Item = &[u32]> + '_ {
        self.chunks.iter().flat_map(|(hashes, ends)| {
            std::iter::once(0)
                .chain(ends.iter().copied())
                .zip(ends.iter().copied())
                .map(move |(a, b)| &hashes[a as usize..b as usize])
        })
    }
}

/// First line index in `o_text` where `r_text`'s lines appear as a contiguous run of whole
/// lines (found on line hashes, confirmed on the actual bytes), or `None`. The other text is
/// made by `o_text` only once the hashes match somewhere.
fn find_lines<S: AsRef<str>>(
    r_text: &str,
    r_hashes: &[u32],
    o_text: impl Fn() -> S,
    o_hashes: &[u32],
) -> Option<usize> {
    let k = r_hashes.len();
    if k == 0 || k > o_hashes.len() {
        return None;
    }
    let first = r_hashes[0];
    let text: OnceCell<S> = OnceCell::new();
    (0..=o_hashes.len() - k)
        .filter(|&p| o_hashes[p] == first && o_hashes[p..p + k] == *r_hashes)
        .find(|&p| {
            let o_text = text.get_or_init(&o_text).as_ref();
            // Byte offset of line p.
            let from = if p == 0 {
                0
            } else {
                o_text
                    .match_indices('\n')
                    .nth(p - 1)
                    .map_or(o_text.len(), |(i, _)| i + 1)
            };
            let to = from + r_text.len();
            o_text.get(from..to) == Some(r_text)
                && (to == o_text.len() || o_text.as_bytes()[to] == b'\n')
        })
}

/// The positions in a sorted list that come after `i`.
fn later(list: Option<&Vec<usize>>, i: usize) -> &[usize] {
    list.map_or(&[], |l| &l[l.partition_point(|&j| j <= i)..])
}

/// Decide every candidate. Returns one decision per candidate, in candidate order.
pub fn decide(t: &Transcript, candidates: &[Pair]) -> Vec<Decision> {
    decide_excluding(t, candidates, &FastSet::default())
}

/// [`decide`], where the results in `unavailable` are being replaced by another policy: they
/// are neither deduped here nor used as pointer targets.
pub fn decide_excluding(
    t: &Transcript,
    candidates: &[Pair],
    unavailable: &FastSet<BlockRef>,
) -> Vec<Decision> {
    use rayon::prelude::*;

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
    let position: FastMap<BlockRef, usize> = all.iter().enumerate().map(|(i, r)| (*r, i)).collect();
    let is_candidate: FastMap<usize, usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, p)| !unavailable.contains(&p.result))
        .filter_map(|(ci, p)| position.get(&p.result).map(|&pos| (pos, ci)))
        .collect();

    // Index 1: the hash of every result's comparable form. Index 2 (below) needs the hashes
    // of its lines: both come from one decoding of each text.
    type Chunk = (Vec<u64>, (Vec<u32>, Vec<u32>));
    let (framed, chunks): (Vec<Vec<u64>>, Vec<_>) = all
        .par_chunks(LineHashes::CHUNK)
        .map(|rs| -> Chunk {
            let mut framed = Vec::with_capacity(rs.len());
            let (mut hashes, mut ends) = (Vec::new(), Vec::with_capacity(rs.len()));
            for r in rs {
                t.with_text(t.result(*r), |s| {
                    framed.push(hash_bytes(comparable_body(s).as_bytes()));
                    push_line_hashes(s, &mut hashes);
                });
                ends.push(u32::try_from(hashes.len()).unwrap_or(u32::MAX));
            }
            (framed, (hashes, ends))
        })
        .unzip();
    let framed: Vec<u64> = framed.concat();
    let lines = LineHashes { chunks };
    let mut by_framed: FastMap<u64, Vec<usize>> = FastMap::default();
    for (i, h) in framed.iter().enumerate() {
        by_framed.entry(*h).or_default().push(i);
    }
    // Index 2: for each candidate its rarest line, and the results that hold that line.
    let mut freq: FastMap<u32, u32> = FastMap::default();
    for hs in lines.iter() {
        for h in hs {
            *freq.entry(*h).or_default() += 1;
        }
    }
    let to_key: Vec<usize> = is_candidate
        .keys()
        .copied()
        .filter(|&i| !t.result(all[i]).text.is_empty())
        .collect();
    let key_of: FastMap<usize, u32> = to_key
        .par_iter()
        .filter_map(|&i| {
            lines
                .of(i)
                .iter()
                .min_by_key(|h| freq.get(h).copied().unwrap_or(0))
                .map(|h| (i, *h))
        })
        .collect::<Vec<_>>()
        .into_iter()
        .collect();
    drop(freq);
    let mut holders: FastMap<u32, Vec<usize>> = FastMap::default();
    for h in key_of.values() {
        holders.entry(*h).or_default();
    }
    for (j, hs) in lines.iter().enumerate() {
        for h in hs {
            if let Some(list) = holders.get_mut(h) {
                if list.last() != Some(&j) {
                    list.push(j);
                }
            }
        }
    }

    let mut kept: Vec<bool> = all.iter().map(|r| !unavailable.contains(r)).collect();
    let mut outcome: Vec<Option<(String, String, &'static str)>> = vec![None; candidates.len()];
    for i in (0..all.len()).rev() {
        let (Some(&ci), Some(key)) = (is_candidate.get(&i), key_of.get(&i)) else {
            continue; // not a candidate, or empty (framed form "\n\n": never deduped)
        };
        let text = t.result_text(all[i]);
        let text = text.as_ref();
        let is_error = t.result(all[i]).is_error;
        // Later results that may be identical, and later results holding our key line.
        let same = later(by_framed.get(&framed[i]), i);
        let hold = later(holders.get(key), i);
        let my_framed = comparable_body(text);
        let my_lines = lines.of(i);
        let (mut a, mut b) = (0, 0);
        while a < same.len() || b < hold.len() {
            let j = match (same.get(a), hold.get(b)) {
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
            // The other text is decoded only where the hashes say it may match.
            let other_text = || t.text(other);
            let found = if framed[j] == framed[i] && comparable_body(&other_text()) == my_framed {
                Some((
                    format!("[identical output kept at {}]", other.id),
                    "identical_output_kept_later",
                ))
            } else {
                find_lines(text, my_lines, other_text, lines.of(j)).map(|p| {
                    let first = p + 1;
                    let last = first + my_lines.len() - 1;
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
    verify_with(original, compacted, &|_, _, _| false)
}

/// A verifier hook: `allow(original_result, original_text, new_text)` accepts a changed result that is not
/// a lossless note (the recoverable and stashed modes' own pointers).
pub type Allow<'a> = &'a (dyn Fn(&crate::transcript::ToolResult, &str, &str) -> bool + Sync);

/// [`verify`] with an [`Allow`] hook.
pub fn verify_with(original: &Transcript, compacted: &Transcript, allow: Allow<'_>) -> Vec<String> {
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
        let same_calls = a.calls.len() == b.calls.len()
            && a.calls
                .iter()
                .zip(&b.calls)
                .all(|(x, y)| x.id == y.id && x.tool == y.tool && x.input == y.input);
        if !same_calls {
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
    let new: Vec<&crate::transcript::ToolResult> =
        compacted.messages.iter().flat_map(|m| &m.results).collect();
    let old: Vec<&crate::transcript::ToolResult> =
        original.messages.iter().flat_map(|m| &m.results).collect();
    let unchanged: Vec<bool> = {
        use rayon::prelude::*;
        (0..old.len())
            .into_par_iter()
            .map(|i| {
                new.get(i)
                    .is_some_and(|n| compacted.text(n) == original.text(old[i]))
            })
            .collect()
    };
    v.extend(check_changes(
        original,
        &unchanged,
        |i| new.get(i).map(|n| compacted.text(n)),
        allow,
    ));
    v
}

/// Check the decisions of a pass against the transcript they were made on, without parsing
/// the output again: every changed result must hold a note whose claim is true against the
/// first later unchanged result with the named id and the same `is_error`.
pub fn verify_decisions(t: &Transcript, decisions: &[Decision]) -> Vec<String> {
    verify_decisions_with(t, decisions, &|_, _, _| false)
}

/// [`verify_decisions`] for a policy that also replaces results (`Replace` decisions): their
/// notes must be accepted by `allow` (or be true lossless notes).
pub fn verify_decisions_with(
    t: &Transcript,
    decisions: &[Decision],
    allow: Allow<'_>,
) -> Vec<String> {
    let mut flat: FastMap<BlockRef, usize> = FastMap::default();
    for (mi, m) in t.messages.iter().enumerate() {
        for bi in 0..m.results.len() {
            let k = flat.len();
            flat.insert(
                BlockRef {
                    message: mi,
                    block: bi,
                },
                k,
            );
        }
    }
    let mut changed: FastMap<usize, &str> = FastMap::default();
    let mut v = Vec::new();
    for d in decisions {
        match (&d.action, d.result) {
            (Action::Keep, _) => {}
            (Action::Dedupe { note, .. } | Action::Replace { note, .. }, Some(r)) => {
                changed.insert(flat[&r], note.as_str());
            }
            (a, _) => v.push(format!(
                "call {}: '{}' is not a lossless decision",
                t.call(d.call).id,
                a.kind()
            )),
        }
    }
    let unchanged: Vec<bool> = (0..flat.len()).map(|i| !changed.contains_key(&i)).collect();
    v.extend(check_changes(
        t,
        &unchanged,
        |i| changed.get(&i).map(|note| Cow::Borrowed(*note)),
        allow,
    ));
    v
}

/// The note checks shared by [`verify`] and [`verify_decisions`]. `unchanged[i]` says whether
/// flat result `i` kept its text; `new_text(i)` is its text after the pass.
fn check_changes<'n>(
    original: &Transcript,
    unchanged: &[bool],
    new_text: impl Fn(usize) -> Option<Cow<'n, str>> + Sync,
    allow: Allow<'_>,
) -> Vec<String> {
    use rayon::prelude::*;
    let old: Vec<&crate::transcript::ToolResult> =
        original.messages.iter().flat_map(|m| &m.results).collect();
    // Positions of each result id, in transcript order, so a note's target is found without
    // scanning every later result.
    let mut by_id: FastMap<&str, Vec<usize>> = FastMap::default();
    for (j, r) in old.iter().enumerate() {
        by_id.entry(r.id.as_str()).or_default().push(j);
    }
    // Each result is checked on its own (in parallel); violations come back in order.
    let check = |(i, a): (usize, &&crate::transcript::ToolResult)| {
        if unchanged[i] {
            return None;
        }
        let new = new_text(i);
        let old_text = original.text(a);
        if new.as_deref().is_some_and(|n| allow(a, &old_text, n)) {
            return None;
        }
        let target = |id: &str| {
            by_id.get(id).and_then(|list| {
                list[list.partition_point(|&j| j <= i)..]
                    .iter()
                    .find(|&&j| unchanged[j] && old[j].is_error == a.is_error)
                    .map(|&j| old[j])
            })
        };
        (!new
            .as_deref()
            .is_some_and(|note| check_note(original, note, &old_text, target)))
        .then(|| {
            format!(
                "result {} changed and its note does not point at a later unchanged result that holds its exact text",
                a.id
            )
        })
    };
    old.par_iter().enumerate().filter_map(check).collect()
}

/// Is `note` true of the original text `original`? `target_of(id)` is the result a note's id
/// names (in transcript `t`).
fn check_note<'a>(
    t: &Transcript,
    note: &str,
    original: &str,
    target_of: impl Fn(&str) -> Option<&'a crate::transcript::ToolResult>,
) -> bool {
    if let Some(id) = note
        .strip_prefix("[identical output kept at ")
        .and_then(|s| s.strip_suffix(']'))
    {
        return target_of(id)
            .is_some_and(|r| comparable_body(&t.text(r)) == comparable_body(original));
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
        return target_of(id).is_some_and(|r| {
            let text = t.text(r);
            let lines: Vec<&str> = text.split('\n').collect();
            last <= lines.len() && lines[first - 1..last].join("\n") == original
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
        assert_eq!(comparable_body(a), comparable_body(b));
        assert_ne!(comparable_body(a), comparable_body(c));
        // Without an `Output:` line the header is compared as written.
        assert_ne!(
            comparable_body("Chunk ID: 1\nok"),
            comparable_body("Chunk ID: 2\nok")
        );
        assert!(!is_header_line("Chunk IDs: 1"));
    }

    /// A small original: `a` and `c` hold the same output, `b` holds lines 2-3 of `c`'s, and
    /// `e` holds the same output as `c` but failed.
    fn original() -> String {
        let out = "alpha line of the output\\nbeta line of the output\\ngamma line of the output";
        let mid = "beta line of the output\\ngamma line of the output";
        let msg = |id: &str, text: &str, err: bool| {
            format!(
                r#"{{"role": "assistant", "text": "", "toolUses": [{{"tool_use_id": "{id}", "tool": "Bash", "input": {{}}}}]}}, {{"role": "user", "text": "", "toolResults": [{{"tool_use_id": "{id}", "text": "{text}", "is_error": {err}}}]}}"#
            )
        };
        format!(
            "[{{\"role\": \"user\", \"text\": \"go\"}}, {}, {}, {}, {}]",
            msg("a", out, false),
            msg("b", mid, false),
            msg("c", out, false),
            msg("e", out, true)
        )
    }

    /// The original with some result texts swapped for forged notes.
    fn forged(notes: &[(&str, &str)]) -> Vec<String> {
        let src = original();
        let t = crate::transcript::lcc::parse(&src).unwrap();
        let mut s = src.clone();
        for (id, note) in notes {
            let needle = format!(r#""tool_use_id": "{id}", "text": ""#);
            let at = s.find(&needle).unwrap() + needle.len() - 1;
            let end = at + s[at + 1..].find('"').unwrap() + 2;
            s.replace_range(at..end, &crate::json::quote(note, false));
        }
        let after = crate::transcript::lcc::parse(&s).unwrap();
        verify(&t, &after)
    }

    #[test]
    fn verify_accepts_true_pointers() {
        assert_eq!(forged(&[]), Vec::<String>::new());
        assert_eq!(
            forged(&[
                ("a", "[identical output kept at c]"),
                ("b", "[output = lines 2-3 of c]")
            ]),
            Vec::<String>::new()
        );
        // What the pass itself decides on this transcript passes too.
        let src = original();
        let t = crate::transcript::lcc::parse(&src).unwrap();
        let pairs = t.pairs().unwrap();
        let pins = crate::pin::select(&t, &pairs, 0);
        let decisions = decide(&t, &pins.candidates);
        let kinds: Vec<&str> = decisions.iter().map(|d| d.action.kind()).collect();
        assert_eq!(kinds, ["dedupe", "dedupe", "keep", "keep"]);
        let rebuilt = crate::rebuild::apply(&t, &src, &decisions);
        let out = rebuilt.text(&src);
        let after = crate::transcript::lcc::parse(&out).unwrap();
        assert_eq!(verify(&t, &after), Vec::<String>::new());
    }

    #[test]
    fn verify_rejects_forged_pointers() {
        let bad = [
            // Points backwards: `a` is before `c`.
            ("c", "[identical output kept at a]"),
            // The lines are 2-3, not 1-2.
            ("b", "[output = lines 1-2 of c]"),
            // Out of range, zero, reversed, malformed.
            ("b", "[output = lines 2-9 of c]"),
            ("b", "[output = lines 0-1 of c]"),
            ("b", "[output = lines 3-2 of c]"),
            ("b", "[output = lines two-3 of c]"),
            // The texts differ (`b` is only part of `c`).
            ("b", "[identical output kept at c]"),
            // `e` failed, `c` did not (and `e` is later than `a` but has the other flag).
            ("a", "[identical output kept at e]"),
            // No such id.
            ("a", "[identical output kept at zz]"),
            // Not a note at all.
            ("a", "[output contained in c]"),
            ("a", ""),
        ];
        for (id, note) in bad {
            let v = forged(&[(id, note)]);
            assert_eq!(v.len(), 1, "{id} -> {note}: {v:?}");
            assert!(v[0].starts_with(&format!("result {id} changed")), "{v:?}");
        }
        // A target that is itself replaced does not hold the text any more.
        let v = forged(&[
            ("a", "[identical output kept at c]"),
            ("c", "[identical output kept at a]"),
        ]);
        assert_eq!(v.len(), 2, "{v:?}");
    }

    #[test]
    fn verify_rejects_changes_outside_results() {
        let src = original();
        let t = crate::transcript::lcc::parse(&src).unwrap();
        let check = |s: &str| verify(&t, &crate::transcript::lcc::parse(s).unwrap());
        assert_eq!(
            check(&src.replacen("\"go\"", "\"stop\"", 1)),
            ["message 0: text changed"]
        );
        assert_eq!(
            check(&src.replacen("\"input\": {}", "\"input\": {\"x\": 1}", 1)),
            ["message 1: tool calls changed"]
        );
        assert_eq!(
            check(&src.replacen("\"is_error\": true", "\"is_error\": false", 1)),
            ["message 8: tool result ids or error flags changed"]
        );
        assert_eq!(
            check(&src.replacen("{\"role\": \"user\", \"text\": \"go\"}, ", "", 1)),
            ["message count changed: 9 -> 8"]
        );
    }

    #[test]
    fn line_runs() {
        let r = "b\nc";
        let o = "a\nb\nc\nd";
        let f = |o: &str| find_lines(r, &line_hashes(r), || o, &line_hashes(o));
        assert_eq!(f(o), Some(1));
        assert_eq!(f("b\nc"), Some(0));
        assert_eq!(f("a\nxb\nc"), None);
        assert_eq!(f("a\nb\ncd"), None);
        assert_eq!(f("b\nx\nb\nc"), Some(2));
    }
}
