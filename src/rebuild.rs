//! Rebuild: apply decisions to the original bytes.
//!
//! Only what was decided changes: a dropped call takes its result with it (and the reverse),
//! a trimmed/deduped/replaced result gets its new text, a message is removed only when this
//! pass emptied it, and an array this pass emptied is removed with its key. Everything else is
//! the input's own bytes. Pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::decide::{Action, Decision};
use crate::json::{self, Edit};
use crate::transcript::{self, ContainerKind, Slot, TextSlot, Transcript};

/// The rebuilt text, as the edits that turn the source into it, and what it removed.
#[derive(Debug, Clone)]
pub struct Rebuilt {
    /// In order, not overlapping ([`json::in_order`]).
    pub edits: Vec<Edit>,
    /// Indices of messages this pass emptied and removed.
    pub removed_messages: Vec<usize>,
}

impl Rebuilt {
    /// The rebuilt text in pieces (see [`json::spliced`]): it is written out piece by piece,
    /// never held whole.
    pub fn pieces<'a>(&'a self, src: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        json::spliced(src, 0..src.len(), &self.edits)
    }

    /// The rebuilt text, whole.
    pub fn text(&self, src: &str) -> String {
        json::spliced_string(src, 0..src.len(), &self.edits)
    }

    /// Check that the rebuilt text of `t` is still well-formed in its format
    /// ([`transcript::validate`]), without holding it whole where the format allows: lcc's
    /// own shape, only syntax-checked there, is checked piece by piece; a JSONL session, only
    /// checked record by record there, has only its edited records checked (the others are
    /// the source's own bytes, which its reader accepted).
    pub fn validate(&self, t: &Transcript) -> Result<(), transcript::ParseError> {
        use transcript::Format;
        let whole = || transcript::validate(&self.text(t.src), t.format);
        match t.format {
            Format::Lcc => self.check_pieces(t.src),
            Format::ClaudeCode | Format::Codex => {
                self.check_edited_records(t).unwrap_or_else(whole)
            }
            Format::Anthropic | Format::OpenAiChat | Format::OpenAiResponses => whole(),
        }
    }

    /// The syntax check of the whole rebuilt text, fed piece by piece to a push checker.
    fn check_pieces(&self, src: &str) -> Result<(), transcript::ParseError> {
        let mut checker = crate::json_check::Checker::new();
        for piece in self.pieces(src) {
            if checker.feed(piece.as_bytes()).is_err() {
                break;
            }
        }
        checker.finish().map_err(|e| {
            transcript::ParseError::new(
                format!("byte {}", e.offset),
                format!("invalid JSON: {}", e.message),
            )
        })
    }

    /// The syntax check of every record an edit changed (a record an edit removes whole needs
    /// none), or `None` when an edit does not lie inside one record of the layout's list,
    /// which the whole-text check then handles.
    fn check_edited_records(&self, t: &Transcript) -> Option<Result<(), transcript::ParseError>> {
        let records = &t
            .layout
            .containers
            .iter()
            .find(|c| c.kind == ContainerKind::Lines)?
            .children;
        let mut edited: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (k, e) in self.edits.iter().enumerate() {
            let i = records.partition_point(|r| r.1 <= e.start);
            let &(start, end) = records.get(i)?;
            if e.start < start || e.end > end {
                return None;
            }
            if (e.start, e.end) == (start, end) && e.text.is_empty() {
                continue;
            }
            match edited.last_mut() {
                Some((last, ks)) if *last == i => ks.end = k + 1,
                _ => edited.push((i, k..k + 1)),
            }
        }
        for (i, ks) in edited {
            let (start, end) = records[i];
            let old = &t.src[start..end];
            let new = json::spliced_string(t.src, start..end, &self.edits[ks]);
            let why =
                |message: String| transcript::ParseError::new(format!("record {}", i + 1), message);
            // The line break that ends a record stays: records never run together.
            if old.ends_with('\n') && !new.ends_with('\n') {
                return Some(Err(why("the edit removed the record's line break".into())));
            }
            // Each record of the list is one JSON value (the reader's leniency for a torn last
            // line does not apply to a record it accepted).
            if let Err(e) = json::parse_shallow(&new, 0, new.len(), 0) {
                return Some(Err(why(
                    transcript::ParseError::syntax(&new, &e).to_string()
                )));
            }
        }
        Some(Ok(()))
    }

    /// Write the rebuilt text.
    pub fn write_to(&self, src: &str, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        for piece in self.pieces(src) {
            w.write_all(piece.as_bytes())?;
        }
        Ok(())
    }
}

pub fn apply(t: &Transcript, src: &str, decisions: &[Decision]) -> Rebuilt {
    let mut removed_blocks: BTreeSet<Slot> = BTreeSet::new();
    let mut edits: Vec<Edit> = Vec::new();
    for d in decisions {
        match &d.action {
            Action::Keep => {}
            Action::Drop => {
                removed_blocks.insert(t.call(d.call).slot);
                if let Some(r) = d.result {
                    removed_blocks.insert(t.result(r).slot);
                }
            }
            a => {
                let (Some(r), Some(new_text)) = (d.result, a.new_text()) else {
                    continue;
                };
                edits.push(text_edit(src, &t.result(r).text_slot, new_text));
            }
        }
    }

    let mut removal: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    let mut removed_messages = Vec::new();
    for (mi, m) in t.messages.iter().enumerate() {
        let blocks = m
            .calls
            .iter()
            .map(|c| c.slot)
            .chain(m.results.iter().map(|r| r.slot));
        let (mut total, mut gone) = (0, 0);
        for s in blocks {
            total += 1;
            if removed_blocks.contains(&s) {
                gone += 1;
            }
        }
        if total > 0 && gone == total && !m.has_other_content {
            removed_messages.push(mi);
            removal
                .entry(m.slot.container)
                .or_default()
                .insert(m.slot.index);
        }
    }
    for s in &removed_blocks {
        removal.entry(s.container).or_default().insert(s.index);
    }
    // Elements that live and die with messages (a reasoning item and the calls it produced).
    for c in &t.layout.companions {
        if c.messages
            .iter()
            .all(|m| removed_messages.binary_search(m).is_ok())
        {
            removal
                .entry(c.slot.container)
                .or_default()
                .insert(c.slot.index);
        }
    }

    // Children before parents: a container emptied by this pass is removed from its parent
    // object instead of being left as `[]`.
    let mut ids: Vec<usize> = removal.keys().copied().collect();
    while let Some(id) = ids.pop() {
        let c = &t.layout.containers[id];
        let Some(set) = removal.get(&id) else {
            continue;
        };
        if set.len() == c.children.len() {
            if let Some(parent) = c.member_of {
                removal.remove(&id);
                let entry = removal.entry(parent.container).or_default();
                let fresh = entry.is_empty();
                entry.insert(parent.index);
                if fresh {
                    ids.push(parent.container);
                    ids.sort_unstable();
                }
            }
        }
    }
    for (id, set) in &removal {
        let c = &t.layout.containers[*id];
        let remove: Vec<usize> = set.iter().copied().collect();
        match c.kind {
            ContainerKind::Json => {
                edits.extend(json::delete_children(&c.children, &remove, c.open, c.close));
            }
            ContainerKind::Lines => edits.extend(remove.iter().map(|&i| Edit {
                start: c.children[i].0,
                end: c.children[i].1,
                text: String::new(),
            })),
        }
    }
    edits.extend(transcript::extra_edits(
        t,
        src,
        &removed_messages,
        decisions,
    ));
    Rebuilt {
        edits: json::in_order(edits),
        removed_messages,
    }
}

fn text_edit(src: &str, slot: &TextSlot, new_text: &str) -> Edit {
    match slot {
        TextSlot::Value { start, end } => Edit {
            start: *start,
            end: *end,
            text: json::quote(new_text, false),
        },
        TextSlot::InsertMember { open, key } => {
            let rest = src[open + 1..].trim_start();
            let sep = if rest.starts_with('}') { "" } else { ", " };
            Edit {
                start: open + 1,
                end: open + 1,
                text: format!(
                    "{}: {}{sep}",
                    json::quote(key, false),
                    json::quote(new_text, false)
                ),
            }
        }
        TextSlot::Blocks {
            start,
            end,
            first_text,
            text_type,
        } => {
            // Keep the array's own layout: the whitespace after `[` and before `]`.
            let inner = &src[start + 1..end - 1];
            let lead = &inner[..inner.len() - inner.trim_start().len()];
            let trail = &inner[inner.trim_end().len()..];
            let (lead, trail) = if inner.trim().is_empty() {
                ("", "")
            } else {
                (lead, trail)
            };
            let block = match first_text {
                Some(b) => format!(
                    "{}{}{}",
                    &src[b.start..b.value_start],
                    json::quote(new_text, false),
                    &src[b.value_end..b.end]
                ),
                None => format!(
                    "{{\"type\":{},\"text\":{}}}",
                    json::quote(text_type, false),
                    json::quote(new_text, false)
                ),
            };
            Edit {
                start: *start,
                end: *end,
                text: format!("[{lead}{block}{trail}]"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"{"messages": [
  {"role": "user", "text": "goal"},
  {"role": "assistant", "toolUses": [{"tool_use_id": "a", "tool": "Read", "input": {}}]},
  {"role": "user", "toolResults": [{"tool_use_id": "a", "text": "line\nline"}]}
]}"#;

    /// The piecewise check of lcc's own shape gives the verdict a check of the whole text
    /// gives, and names the byte where the text stops being JSON.
    #[test]
    fn validate_checks_the_pieces_as_the_whole_text() {
        let t = transcript::parse(SRC, None).unwrap();
        let at = SRC.find(r#""line\nline""#).unwrap();
        let with = |text: &str| Rebuilt {
            edits: vec![Edit {
                start: at,
                end: at + r#""line\nline""#.len(),
                text: text.to_string(),
            }],
            removed_messages: Vec::new(),
        };
        let good = with(r#""[identical output kept at b]""#);
        assert_eq!(good.validate(&t), Ok(()));
        assert!(transcript::validate(&good.text(SRC), t.format).is_ok());

        // An unquoted note: the whole-text check and the piecewise one both refuse it.
        let bad = with("[kept at b]");
        let whole = transcript::validate(&bad.text(SRC), t.format).unwrap_err();
        let piecewise = bad.validate(&t).unwrap_err();
        assert!(whole.message.starts_with("invalid JSON"), "{whole}");
        assert_eq!(piecewise.message, whole.message);
        // `[kept` opens an array: the first byte that cannot follow is the `k`.
        assert_eq!(piecewise.path, format!("byte {}", at + 1));
    }

    /// A JSONL session: only the records an edit changed are checked, with the verdict of
    /// the whole-text check; an edit outside every record falls back to that check.
    #[test]
    fn validate_checks_the_edited_records_of_a_session() {
        use crate::decide::{Action, Decision};
        let src = include_str!("../fixtures/formats/claude-code.jsonl");
        let t = transcript::parse(src, None).unwrap();
        assert_eq!(t.format, transcript::Format::ClaudeCode);
        let pairs = t.pairs().unwrap();
        let decide = |i: usize, action: Action| Decision {
            call: pairs[i].call,
            result: Some(pairs[i].result),
            action,
            reason: String::new(),
            source: "rules",
            keep_call: None,
            keep_result: None,
        };
        let whole = |r: &Rebuilt| transcript::validate(&r.text(src), t.format);

        // A trimmed result and a dropped pair (records removed, the chain re-pointed).
        let good = apply(
            &t,
            src,
            &[
                decide(0, Action::Trim("head".into())),
                decide(1, Action::Drop),
            ],
        );
        assert!(good.edits.len() > 2, "{:?}", good.edits);
        assert_eq!(good.validate(&t), Ok(()));
        assert_eq!(whole(&good), Ok(()));

        // The trimmed text written unquoted: both checks refuse it, and this one names the
        // record.
        let mut bad = good.clone();
        let e = bad
            .edits
            .iter_mut()
            .find(|e| e.text.contains("head"))
            .unwrap();
        e.text = "head".into();
        assert!(whole(&bad).is_err());
        let err = bad.validate(&t).unwrap_err();
        assert!(err.path.starts_with("record "), "{err}");

        // A record's line break edited away is refused, though the record alone still parses.
        let records = &t.layout.containers[0].children;
        let (_, end) = records[2];
        let mut joined = good.clone();
        assert!(joined.edits[0].start > end);
        joined.edits.insert(
            0,
            Edit {
                start: end - 1,
                end,
                text: String::new(),
            },
        );
        let err = joined.validate(&t).unwrap_err();
        assert!(err.message.contains("line break"), "{err}");

        // An edit across two records: the whole text is checked instead.
        let mut across = good.clone();
        across.edits.insert(
            0,
            Edit {
                start: records[0].1 - 5,
                end: records[1].0 + 5,
                text: "x".into(),
            },
        );
        assert!(across.edits[1].start >= records[1].0 + 5);
        assert!(whole(&across).is_err());
        assert_eq!(across.validate(&t), whole(&across));
    }
}
