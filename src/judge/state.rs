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

use serde_json::Value;

use crate::fasthash::{FastMap, FastSet};
use crate::json::{py_dumps, quote, quote_into};
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

/// Buffers [`View::write_entries`] reuses from one message to the next.
#[derive(Default)]
pub struct Scratch {
    text: String,
    short: String,
    head: String,
    notes: String,
}

/// The transcript as the renderer needs it: which messages are pinned, which calls are
/// candidates, and the length of each call's paired result.
pub struct View<'a> {
    t: &'a Transcript<'a>,
    pinned: Vec<bool>,
    has_candidate: Vec<bool>,
    candidates: FastSet<BlockRef>,
    /// Per call with a result: the result's length in characters.
    result_chars: FastMap<BlockRef, usize>,
    /// Per message, per result: its length in characters.
    result_lens: Vec<Vec<usize>>,
}

impl<'a> View<'a> {
    pub fn new(t: &'a Transcript<'a>, pins: &Pins, pairs: &[Pair]) -> View<'a> {
        let n = t.messages.len();
        let mut has_candidate = vec![false; n];
        let mut candidates = FastSet::default();
        candidates.reserve(pins.candidates.len());
        for p in &pins.candidates {
            has_candidate[p.call.message] = true;
            candidates.insert(p.call);
        }
        let result_lens: Vec<Vec<usize>> = t
            .messages
            .iter()
            .map(|m| m.results.iter().map(|r| t.text_chars(r)).collect())
            .collect();
        let result_chars = pairs
            .iter()
            .map(|p| (p.call, result_lens[p.result.message][p.result.block]))
            .collect();
        View {
            t,
            pinned: (0..n).map(|i| pins.is_pinned(i)).collect(),
            has_candidate,
            candidates,
            result_chars,
            result_lens,
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

    /// Message `mi` at every stage (in [`Stage::ALL`] order), `None` where it shows nothing
    /// (the tests' view of [`View::write_entries`]).
    #[cfg(test)]
    pub fn entries(&self, mi: usize) -> [Option<String>; 3] {
        let mut out: [String; 3] = Default::default();
        let [a, b, c] = &mut out;
        let shown = self.write_entries(mi, [a, b, c], &mut Scratch::default());
        let [a, b, c] = out;
        [
            shown[0].then_some(a),
            shown[1].then_some(b),
            shown[2].then_some(c),
        ]
    }

    /// Message `mi` at every stage (in [`Stage::ALL`] order), each piece (quoted text, input
    /// JSON, call line, result note) rendered once; each stage's entry is appended to `out[k]`.
    /// Returns which stages show the message (nothing is appended for the others). `scratch`
    /// only saves allocations.
    pub fn write_entries(
        &self,
        mi: usize,
        out: [&mut String; 3],
        scratch: &mut Scratch,
    ) -> [bool; 3] {
        let m = &self.t.messages[mi];
        let pinned = self.pinned[mi];
        let Scratch {
            text: text_full,
            short: abridged,
            head,
            notes,
        } = scratch;
        let has_text = !py_blank(&m.text);
        if has_text {
            text_full.clear();
            quote_into(text_full, &m.text, false);
        }
        // inputs-200 abridges unpinned texts over 400 characters and calls-one-line every
        // unpinned text, but abridging leaves texts of at most 600 characters as they are:
        // both stages show the same text.
        let text_short: Option<&str> = if !pinned && m.text.chars().count() > TEXT_HEAD + TEXT_TAIL
        {
            let a = abridge(&m.text);
            (!py_blank(&a)).then(|| {
                abridged.clear();
                quote_into(abridged, &a, false);
                abridged.as_str()
            })
        } else {
            has_text.then_some(text_full.as_str())
        };
        let text_full = has_text.then_some(text_full.as_str());
        let collapsed = !self.has_candidate[mi]
            && !pinned
            && !has_text
            && (!m.calls.is_empty() || !m.results.is_empty());
        let [f, c, o] = out;
        let open = |e: &mut String, text: Option<&str>| -> bool {
            if text.is_none() && m.calls.is_empty() && m.results.is_empty() {
                return false;
            }
            e.push_str("{\"role\": ");
            quote_into(e, &m.role, false);
            if let Some(t) = text {
                e.push_str(", \"text\": ");
                e.push_str(t);
            }
            true
        };
        let shown = [
            open(f, text_full),
            open(c, text_short),
            collapsed || open(o, text_short),
        ];
        if collapsed {
            o.push_str("{\"role\": ");
            quote_into(o, &m.role, false);
            o.push_str(", \"tool_calls\": [");
            for (bi, call) in m.calls.iter().enumerate() {
                if bi > 0 {
                    o.push_str(", ");
                }
                quote_into(o, &self.line(mi, bi, call), false);
            }
            o.push_str("]}");
        }
        if m.calls.is_empty() && m.results.is_empty() {
            // Text only: close whatever opened.
            for (e, shows) in [f, c, o].into_iter().zip(shown) {
                if shows {
                    e.push('}');
                }
            }
            return shown;
        }
        // A message with calls or results shows at every stage.
        let mut o = (!collapsed).then_some(o);
        if !m.calls.is_empty() {
            for e in [&mut *f, &mut *c] {
                e.push_str(", \"tool_calls\": [");
            }
            if let Some(o) = o.as_mut() {
                o.push_str(", \"tool_calls\": [");
            }
            for (bi, call) in m.calls.iter().enumerate() {
                if bi > 0 {
                    f.push_str(", ");
                    c.push_str(", ");
                    if let Some(o) = o.as_mut() {
                        o.push_str(", ");
                    }
                }
                head.clear();
                head.push_str("{\"id\": ");
                quote_into(head, &call.id, false);
                head.push_str(", \"tool\": ");
                quote_into(head, &call.tool, false);
                head.push_str(", \"input\": ");
                let input = py_dumps(&call.input, false);
                let short = input
                    .char_indices()
                    .nth(INPUT_CHARS)
                    .map(|(at, _)| quote(&format!("{}\u{2026}", &input[..at]), false));
                let short = short.as_deref().unwrap_or(&input);
                for (e, x) in [(&mut *f, input.as_str()), (&mut *c, short)] {
                    e.push_str(head);
                    e.push_str(x);
                    e.push('}');
                }
                if let Some(o) = o.as_mut() {
                    let here = BlockRef {
                        message: mi,
                        block: bi,
                    };
                    if !pinned && !self.candidates.contains(&here) {
                        o.push_str("{\"line\": ");
                        quote_into(o, &self.line(mi, bi, call), false);
                        o.push('}');
                    } else {
                        o.push_str(head);
                        o.push_str(short);
                        o.push('}');
                    }
                }
            }
            f.push(']');
            c.push(']');
            if let Some(o) = o.as_mut() {
                o.push(']');
            }
        }
        if !m.results.is_empty() {
            notes.clear();
            notes.push_str(", \"tool_results\": [");
            for (i, r) in m.results.iter().enumerate() {
                if i > 0 {
                    notes.push_str(", ");
                }
                notes.push_str("{\"id\": ");
                quote_into(notes, &r.id, false);
                notes.push_str(", \"note\": \"");
                // A note is ASCII letters, digits, commas, spaces and parentheses: its JSON
                // string is itself in quotes.
                push_note(notes, self.result_lens[mi][i], r.is_error);
                notes.push_str("\"}");
            }
            notes.push(']');
            f.push_str(notes);
            c.push_str(notes);
            if let Some(o) = o.as_mut() {
                o.push_str(notes);
            }
        }
        f.push('}');
        c.push('}');
        if let Some(o) = o {
            o.push('}');
        }
        [true; 3]
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
    let mut out = String::new();
    push_note(&mut out, text.chars().count(), is_error);
    out
}

/// [`note`] for a result of `n` characters, appended to `out`.
fn push_note(out: &mut String, n: usize, is_error: bool) {
    use std::fmt::Write as _;
    out.push_str(if is_error { "error" } else { "ok" });
    if n == 0 {
        out.push_str(", 0 chars (empty)");
    } else {
        let _ = write!(out, ", {n} chars");
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

    /// The renderer as first written, one stage at a time: [`View::entries`] must agree.
    impl View<'_> {
        /// Message `mi` at `stage`, or `None` when it shows nothing (blank, no calls, no results).
        fn reference_entry(&self, mi: usize, stage: Stage) -> Option<String> {
            let m = &self.t.messages[mi];
            let pinned = self.pinned[mi];
            let one_line = stage == Stage::CallsOneLine;
            if one_line
                && !self.has_candidate[mi]
                && !pinned
                && py_blank(&m.text)
                && (!m.calls.is_empty() || !m.results.is_empty())
            {
                let lines: Vec<String> = m
                    .calls
                    .iter()
                    .enumerate()
                    .map(|(bi, c)| quote(&self.line(mi, bi, c), false))
                    .collect();
                return Some(format!(
                    "{{\"role\": {}, \"tool_calls\": [{}]}}",
                    quote(&m.role, false),
                    lines.join(", ")
                ));
            }
            let mut parts: Vec<String> = vec![format!("\"role\": {}", quote(&m.role, false))];
            let abridge_text = !pinned
                && (one_line || (stage == Stage::Inputs200 && m.text.chars().count() > TEXT_HEAD));
            let text = if abridge_text {
                abridge(&m.text)
            } else {
                m.text.clone()
            };
            let has_text = !py_blank(&text);
            if has_text {
                parts.push(format!("\"text\": {}", quote(&text, false)));
            }
            let calls = self.reference_calls(mi, m, stage, pinned);
            if !calls.is_empty() {
                parts.push(format!("\"tool_calls\": [{}]", calls.join(", ")));
            }
            if !m.results.is_empty() {
                let notes: Vec<String> = m
                    .results
                    .iter()
                    .map(|r| {
                        format!(
                            "{{\"id\": {}, \"note\": {}}}",
                            quote(&r.id, false),
                            quote(&note(&self.t.text(r), r.is_error), false)
                        )
                    })
                    .collect();
                parts.push(format!("\"tool_results\": [{}]", notes.join(", ")));
            }
            if !has_text && calls.is_empty() && m.results.is_empty() {
                return None;
            }
            Some(format!("{{{}}}", parts.join(", ")))
        }

        fn reference_calls(
            &self,
            mi: usize,
            m: &crate::transcript::Message,
            stage: Stage,
            pinned: bool,
        ) -> Vec<String> {
            m.calls
                .iter()
                .enumerate()
                .map(|(bi, c)| {
                    let here = BlockRef {
                        message: mi,
                        block: bi,
                    };
                    if stage == Stage::CallsOneLine && !pinned && !self.candidates.contains(&here) {
                        return format!("{{\"line\": {}}}", quote(&self.line(mi, bi, c), false));
                    }
                    let full = py_dumps(&c.input, false);
                    let input = if stage == Stage::Full || full.chars().count() <= INPUT_CHARS {
                        full
                    } else {
                        let cut: String = full.chars().take(INPUT_CHARS).collect();
                        quote(&format!("{cut}\u{2026}"), false)
                    };
                    format!(
                        "{{\"id\": {}, \"tool\": {}, \"input\": {input}}}",
                        quote(&c.id, false),
                        quote(&c.tool, false)
                    )
                })
                .collect()
        }
    }

    #[test]
    fn entries_match_the_reference_renderer() {
        let long = "word ".repeat(150);
        let blank = " ".repeat(700);
        let mut msgs = vec![json!({"role": "user", "text": format!("goal {long}")})];
        for i in 0..12 {
            let input = if i % 3 == 0 {
                json!({"path": "a.py", "content": "x\"y\\z\n".repeat(60 + i)})
            } else {
                json!({"command": format!("ls {i}"), "flag": true, "n": null})
            };
            let text = match i % 4 {
                0 => long.clone(),
                1 => String::new(),
                2 => blank.clone(),
                _ => format!("step {i} é"),
            };
            msgs.push(json!({"role": "assistant", "text": text,
                "toolUses": [{"tool_use_id": format!("c{i}"), "tool": "Bash", "input": input},
                             {"tool_use_id": format!("p{i}"), "tool": "Read", "input": {}}]}));
            msgs.push(json!({"role": "user", "text": if i % 5 == 0 { blank.clone() } else { String::new() },
                "toolResults": [{"tool_use_id": format!("c{i}"), "text": "out".repeat(i), "is_error": i % 2 == 0}]}));
        }
        msgs.push(json!({"role": "user", "text": blank}));
        msgs.push(json!({"role": "assistant", "text": ""}));
        msgs.push(json!({"role": "assistant", "text": format!("done {long}")}));
        let src = serde_json::to_string(&msgs).unwrap();
        let t = crate::transcript::parse(&src, None).unwrap();
        let pairs = t.pairs().unwrap();
        for recent in [0, 3, 30] {
            let pins = crate::pin::select(&t, &pairs, recent);
            let view = View::new(&t, &pins, &pairs);
            // Also written one after the other into shared buffers, with one scratch.
            let mut shared: [String; 3] = Default::default();
            let mut scratch = Scratch::default();
            for mi in 0..t.messages.len() {
                let all = view.entries(mi);
                let starts = shared.each_ref().map(String::len);
                let [a, b, c] = &mut shared;
                let shown = view.write_entries(mi, [a, b, c], &mut scratch);
                for (k, stage) in Stage::ALL.into_iter().enumerate() {
                    let want = view.reference_entry(mi, stage);
                    assert_eq!(all[k], want, "message {mi} at {stage:?}");
                    let written = &shared[k][starts[k]..];
                    assert_eq!(shown[k].then_some(written), want.as_deref());
                    assert!(shown[k] || written.is_empty());
                }
            }
        }
    }

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
