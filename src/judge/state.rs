//! What the judge is shown: `{"goal": <question>, "conversation": [...]}`, oldest first.
//!
//! Every tool result is replaced by a short note (`ok, 4213 chars`, `ok, 0 chars (empty)`,
//! `error, 88 chars` for an `is_error` result): the judge sees that a call ran and how big its
//! output was, never the output. Texts and call inputs are shown as the fitting stage allows
//! (`reference/spec-core.md` §3.1):
//!
//! * `full`: as written;
//! * `inputs-200`: every input whose JSON is over 200 characters becomes a string of its
//!   first 200 characters followed by `…`; unpinned texts over 400 characters are abridged to
//!   400 head + 200 tail characters with an omission line;
//! * `calls-one-line`: additionally every unpinned text is abridged, calls that are not
//!   candidates in unpinned messages become one line each, and unpinned messages with no
//!   candidate and no text collapse to `{"role", "tool_calls": [line, ...]}` (their result
//!   notes are left out).
//!
//! Pinned message texts are never abridged. Each message renders to one JSON piece
//! (Python `json.dumps` style: `", "` and `": "` separators, non-ASCII kept), so the fitter
//! can count tokens per piece and reuse counts across stages. Lengths are in characters
//! (code points). Pure.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::json::{py_dumps, quote};
use crate::pin::Pins;
use crate::transcript::{BlockRef, Call, Pair, Transcript};

/// A fitting stage, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Full,
    Inputs200,
    CallsOneLine,
}

impl Stage {
    pub const ALL: [Stage; 3] = [Stage::Full, Stage::Inputs200, Stage::CallsOneLine];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Full => "full",
            Stage::Inputs200 => "inputs-200",
            Stage::CallsOneLine => "calls-one-line",
        }
    }
}

/// Input JSON longer than this is cut (stages after `full`).
pub const INPUT_CHARS: usize = 200;
/// Abridged texts keep this many leading characters…
pub const TEXT_HEAD: usize = 400;
/// …and this many trailing ones.
pub const TEXT_TAIL: usize = 200;

/// The transcript as the renderer needs it: which messages are pinned, which calls are
/// candidates, and the length of each call's paired result.
pub struct View<'a> {
    t: &'a Transcript,
    pinned: Vec<bool>,
    has_candidate: Vec<bool>,
    candidates: HashSet<BlockRef>,
    result_chars: HashMap<BlockRef, usize>,
}

impl<'a> View<'a> {
    pub fn new(t: &'a Transcript, pins: &Pins, pairs: &[Pair]) -> View<'a> {
        let n = t.messages.len();
        let mut has_candidate = vec![false; n];
        let mut candidates = HashSet::with_capacity(pins.candidates.len());
        for p in &pins.candidates {
            has_candidate[p.call.message] = true;
            candidates.insert(p.call);
        }
        let result_chars = pairs
            .iter()
            .map(|p| (p.call, t.result(p.result).text.chars().count()))
            .collect();
        View {
            t,
            pinned: (0..n).map(|i| pins.is_pinned(i)).collect(),
            has_candidate,
            candidates,
            result_chars,
        }
    }

    pub fn messages(&self) -> usize {
        self.t.messages.len()
    }

    pub fn is_pinned(&self, mi: usize) -> bool {
        self.pinned[mi]
    }

    /// At `calls-one-line`, message `mi` collapses to an entry with no call lines at all
    /// (`{"role": R, "tool_calls": []}`: a results-only message with nothing asked about).
    pub fn collapses_empty(&self, mi: usize) -> bool {
        let m = &self.t.messages[mi];
        !self.pinned[mi]
            && !self.has_candidate[mi]
            && py_blank(&m.text)
            && m.calls.is_empty()
            && !m.results.is_empty()
    }

    /// The opening of the state, up to and including `[`.
    pub fn head(goal: &str) -> String {
        format!("{{\"goal\": {}, \"conversation\": [", quote(goal, false))
    }

    /// The closing of the state.
    pub const TAIL: &'static str = "]}";
    /// Between two conversation entries.
    pub const SEP: &'static str = ", ";

    /// Message `mi` at `stage`, or `None` when it shows nothing (blank, no calls, no results).
    pub fn entry(&self, mi: usize, stage: Stage) -> Option<String> {
        let [full, cut, one_line] = self.entries(mi);
        match stage {
            Stage::Full => full,
            Stage::Inputs200 => cut,
            Stage::CallsOneLine => one_line,
        }
    }

    /// Message `mi` at every stage (in [`Stage::ALL`] order), each piece (quoted text, input
    /// JSON, call line, result note) rendered once.
    pub fn entries(&self, mi: usize) -> [Option<String>; 3] {
        let m = &self.t.messages[mi];
        let pinned = self.pinned[mi];
        let role = quote(&m.role, false);
        let non_blank = |t: &str| (!py_blank(t)).then(|| quote(t, false));
        let text_full = non_blank(&m.text);
        // inputs-200 abridges unpinned texts over 400 characters and calls-one-line every
        // unpinned text, but abridging leaves texts of at most 600 characters as they are:
        // both stages show the same text.
        let text_short = if !pinned && m.text.chars().count() > TEXT_HEAD + TEXT_TAIL {
            non_blank(&abridge(&m.text))
        } else {
            text_full.clone()
        };
        let lines = || -> Vec<String> {
            m.calls
                .iter()
                .enumerate()
                .map(|(bi, c)| quote(&self.line(mi, bi, c), false))
                .collect()
        };
        // Calls: (full form, cut form, calls-one-line form).
        let mut calls: Vec<[String; 3]> = Vec::with_capacity(m.calls.len());
        for (bi, c) in m.calls.iter().enumerate() {
            let head = format!(
                "{{\"id\": {}, \"tool\": {}, \"input\": ",
                quote(&c.id, false),
                quote(&c.tool, false)
            );
            let full = py_dumps(&c.input, false);
            let cut = match full.char_indices().nth(INPUT_CHARS) {
                None => full.clone(),
                Some((at, _)) => quote(&format!("{}\u{2026}", &full[..at]), false),
            };
            let here = BlockRef {
                message: mi,
                block: bi,
            };
            let short = if !pinned && !self.candidates.contains(&here) {
                format!("{{\"line\": {}}}", quote(&self.line(mi, bi, c), false))
            } else {
                format!("{head}{cut}}}")
            };
            calls.push([format!("{head}{full}}}"), format!("{head}{cut}}}"), short]);
        }
        let notes = (!m.results.is_empty()).then(|| {
            let notes: Vec<String> = m
                .results
                .iter()
                .map(|r| {
                    format!(
                        "{{\"id\": {}, \"note\": {}}}",
                        quote(&r.id, false),
                        quote(&note(&r.text, r.is_error), false)
                    )
                })
                .collect();
            notes.join(", ")
        });
        let assemble = |text: &Option<String>, k: usize| -> Option<String> {
            if text.is_none() && calls.is_empty() && notes.is_none() {
                return None;
            }
            let mut out = format!("{{\"role\": {role}");
            if let Some(t) = text {
                out.push_str(", \"text\": ");
                out.push_str(t);
            }
            if !calls.is_empty() {
                out.push_str(", \"tool_calls\": [");
                for (i, c) in calls.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&c[k]);
                }
                out.push(']');
            }
            if let Some(n) = &notes {
                out.push_str(", \"tool_results\": [");
                out.push_str(n);
                out.push(']');
            }
            out.push('}');
            Some(out)
        };
        let collapsed = !self.has_candidate[mi]
            && !pinned
            && text_full.is_none()
            && (!m.calls.is_empty() || !m.results.is_empty());
        let one_line = if collapsed {
            Some(format!(
                "{{\"role\": {role}, \"tool_calls\": [{}]}}",
                lines().join(", ")
            ))
        } else {
            assemble(&text_short, 2)
        };
        [assemble(&text_full, 0), assemble(&text_short, 1), one_line]
    }

    /// `"{id} {tool} {k1=v1, k2=v2} -> ok {n}ch"` (or `-> pending`), ends stripped.
    fn line(&self, mi: usize, bi: usize, c: &Call) -> String {
        let here = BlockRef {
            message: mi,
            block: bi,
        };
        line_for_call(c, self.result_chars.get(&here).copied())
    }
}

/// The one-line form of a call; `result_chars` is the paired result's length, if any.
pub fn line_for_call(c: &Call, result_chars: Option<usize>) -> String {
    let keys = match &c.input {
        Value::Object(map) => map
            .iter()
            .take(2)
            .map(|(k, v)| format!("{k}={}", py_str(v)))
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    };
    let outcome = match result_chars {
        Some(n) => format!("ok {n}ch"),
        None => "pending".to_string(),
    };
    format!("{} {} {keys} -> {outcome}", c.id, c.tool)
        .trim_matches(py_space)
        .to_string()
}

/// The note standing in for a result's payload.
pub fn note(text: &str, is_error: bool) -> String {
    let n = text.chars().count();
    let status = if is_error { "error" } else { "ok" };
    if n == 0 {
        format!("{status}, 0 chars (empty)")
    } else {
        format!("{status}, {n} chars")
    }
}

/// Head 400 + omission line + tail 200; texts of at most 600 characters are unchanged.
pub fn abridge(text: &str) -> String {
    let n = text.chars().count();
    if n <= TEXT_HEAD + TEXT_TAIL {
        return text.to_string();
    }
    let removed = n - TEXT_HEAD - TEXT_TAIL;
    let head: String = text.chars().take(TEXT_HEAD).collect();
    let tail_start = text
        .char_indices()
        .nth(n - TEXT_TAIL)
        .map_or(text.len(), |(i, _)| i);
    format!(
        "{head}\n[... {removed} chars omitted ...]\n{}",
        &text[tail_start..]
    )
}

/// Python's `str.isspace` set: Rust's whitespace plus the four separators U+001C–U+001F.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Blank after Python's `str.strip()`.
pub fn py_blank(s: &str) -> bool {
    s.chars().all(py_space)
}

/// Python `str(value)` for a JSON value: strings raw, `True`/`False`/`None`, containers in
/// repr form.
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(_) => py_dumps(v, false),
        Value::String(s) => py_repr_str(s),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, x)| format!("{}: {}", py_repr_str(k), py_repr(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
fn py_repr_str(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(input: Value) -> Call {
        Call {
            id: "toolu_1".into(),
            tool: "Read".into(),
            input,
            slot: crate::transcript::Slot {
                container: 0,
                index: 0,
            },
            path: String::new(),
        }
    }

    #[test]
    fn one_line_form() {
        let c = call(json!({"path": "a.py", "limit": 5, "x": 1}));
        assert_eq!(
            line_for_call(&c, Some(40)),
            "toolu_1 Read path=a.py, limit=5 -> ok 40ch"
        );
        let c = call(json!({}));
        assert_eq!(line_for_call(&c, Some(40)), "toolu_1 Read  -> ok 40ch");
        let c = call(json!({"a": true, "b": null}));
        assert_eq!(
            line_for_call(&c, None),
            "toolu_1 Read a=True, b=None -> pending"
        );
        let c = call(json!({"o": {"k": ["x", 1.5, false]}, "s": "it's"}));
        assert_eq!(
            line_for_call(&c, None),
            "toolu_1 Read o={'k': ['x', 1.5, False]}, s=it's -> pending"
        );
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("a'b\"c"), "'a\\'b\"c'");
    }

    #[test]
    fn notes_and_abridge() {
        assert_eq!(note("", false), "ok, 0 chars (empty)");
        assert_eq!(note("héllo", false), "ok, 5 chars");
        assert_eq!(note("boom", true), "error, 4 chars");
        let short = "x".repeat(600);
        assert_eq!(abridge(&short), short);
        let long = format!("{}{}{}", "a".repeat(400), "é".repeat(50), "z".repeat(200));
        assert_eq!(
            abridge(&long),
            format!(
                "{}\n[... 50 chars omitted ...]\n{}",
                "a".repeat(400),
                "z".repeat(200)
            )
        );
        assert!(py_blank(" \u{1c}\n"));
        assert!(!py_blank(" x "));
    }
}
