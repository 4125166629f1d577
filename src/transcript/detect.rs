//! Telling the formats apart from the content.
//!
//! 1. A stream whose records carry Claude Code's record keys (`type` with `uuid`,
//!    `parentUuid`, `sessionId`, `leafUuid` or `messageId`) is Claude Code JSONL; one whose
//!    records are `{timestamp, type, payload}` is a Codex rollout. The first record decides;
//!    when it carries neither signature, the next few records are looked at.
//! 2. A single JSON document is a list of messages (bare, or under `messages`, `history` or
//!    `input`). Each format has keys or block types no other format uses:
//!    * lcc: `text`, `toolUses`, `toolResults`, `tool_results` on a message, or `tool_calls`
//!      entries without `function`;
//!    * Anthropic: content blocks `tool_use`, `tool_result`, `thinking`, `redacted_thinking`,
//!      `server_tool_use`, `web_search_tool_result`, `document`, `search_result`, or an
//!      `image` block with a `source`;
//!    * OpenAI Chat: `tool_calls` entries with `function` / `custom`, `tool_call_id(s)`, a
//!      `history` list, content parts `image_url` / `input_audio` / `file`;
//!    * OpenAI Responses: item types `function_call`, `function_call_output`, `reasoning`,
//!      ..., content parts `input_text` / `output_text` / `input_image` / `input_file`, or an
//!      `input` list.
//!
//! Exactly one format with evidence wins. Evidence for two formats is ambiguous, and plain
//! `{role, content}` messages with no tool use fit three formats: both are errors that name
//! `--format`. Messages with no `content` at all (or no messages) are read as lcc's shape,
//! whose reader then says precisely what is wrong, if anything.

use crate::json::{self, Kind, Node};

use super::openai_responses::{is_item_type, is_part_type};
use super::{Format, ParseError};

/// What the start of the input says.
pub enum Sniff {
    /// A JSONL session: read it record by record.
    Stream(Format),
    /// One JSON document, already parsed.
    Document(Node),
}

const CLAUDE_KEYS: [&str; 5] = ["uuid", "parentUuid", "sessionId", "leafUuid", "messageId"];

fn format_hint() -> String {
    format!(
        "pass --format to name it (one of {})",
        Format::NAMES.join(", ")
    )
}

fn record_format(src: &str, n: &Node) -> Option<Format> {
    n.get("type").and_then(|t| t.as_str(src))?;
    if n.get("payload").is_some() && n.get("timestamp").is_some() {
        return Some(Format::Codex);
    }
    if CLAUDE_KEYS.iter().any(|k| n.get(k).is_some()) {
        return Some(Format::ClaudeCode);
    }
    None
}

fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while matches!(b.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        pos += 1;
    }
    pos
}

/// How many further records a stream may have before one shows its format.
const SNIFF_RECORDS: usize = 32;

pub fn sniff(src: &str) -> Result<Sniff, ParseError> {
    let b = src.as_bytes();
    let start = skip_ws(b, if src.starts_with('\u{feff}') { 3 } else { 0 });
    if start >= b.len() {
        return Err(ParseError::new(
            "",
            "the input is empty (expected a JSON transcript or a JSONL session)",
        ));
    }
    // Only the top level is built: a large document's messages are read one at a time later.
    let first =
        json::parse_value_at_shallow(src, start, 1).map_err(|e| ParseError::syntax(src, &e))?;
    if let Some(f) = record_format(src, &first) {
        return Ok(Sniff::Stream(f));
    }
    let mut pos = skip_ws(b, first.end);
    if pos >= b.len() {
        return Ok(Sniff::Document(first));
    }
    for seen in 0..SNIFF_RECORDS {
        let n = match json::parse_value_at_shallow(src, pos, 1) {
            Ok(n) => n,
            // One document with junk after it: say where, as a document reader would.
            Err(e) if seen == 0 => {
                let e = json::parse(src).err().unwrap_or(e);
                return Err(ParseError::syntax(src, &e));
            }
            Err(_) => break,
        };
        if let Some(f) = record_format(src, &n) {
            return Ok(Sniff::Stream(f));
        }
        pos = skip_ws(b, n.end);
        if pos >= b.len() {
            break;
        }
    }
    Err(ParseError::new(
        "",
        format!(
            "a stream of JSON values whose records are neither Claude Code session records nor Codex rollout lines; {}",
            format_hint()
        ),
    ))
}

#[derive(Default)]
struct Evidence {
    lcc: bool,
    anthropic: bool,
    chat: bool,
    responses: bool,
    content: bool,
}

impl Evidence {
    fn formats(&self) -> Vec<Format> {
        let mut v = Vec::new();
        if self.lcc {
            v.push(Format::Lcc);
        }
        if self.anthropic {
            v.push(Format::Anthropic);
        }
        if self.chat {
            v.push(Format::OpenAiChat);
        }
        if self.responses {
            v.push(Format::OpenAiResponses);
        }
        v
    }

    fn message(&mut self, src: &str, m: &Node) {
        if m.members().is_none() {
            return;
        }
        if ["text", "toolUses", "toolResults", "tool_results"]
            .iter()
            .any(|k| m.get(k).is_some())
        {
            self.lcc = true;
        }
        if let Some(calls) = m.get("tool_calls").and_then(Node::items) {
            for c in calls {
                if c.get("function").is_some() || c.get("custom").is_some() {
                    self.chat = true;
                } else if c.members().is_some() {
                    self.lcc = true;
                }
            }
        }
        if m.get("tool_call_id").is_some() || m.get("tool_call_ids").is_some() {
            self.chat = true;
        }
        if let Some(t) = m.get("type").and_then(|t| t.as_str(src)) {
            if is_item_type(&t) {
                self.responses = true;
            }
        }
        if let Some(c) = m.get("content") {
            self.content = true;
            for part in c.items().unwrap_or_default() {
                self.part(src, part);
            }
        }
    }

    fn part(&mut self, src: &str, p: &Node) {
        let Some(t) = p.get("type").and_then(|t| t.as_str(src)) else {
            return;
        };
        match t.as_ref() {
            "tool_use"
            | "tool_result"
            | "thinking"
            | "redacted_thinking"
            | "server_tool_use"
            | "web_search_tool_result"
            | "document"
            | "search_result" => self.anthropic = true,
            "image" if p.get("source").is_some() => self.anthropic = true,
            "image_url" | "input_audio" | "file" => self.chat = true,
            t if is_part_type(t) => self.responses = true,
            _ => {}
        }
    }
}

/// The format of a single JSON document. The root may come from a shallow parse: deferred
/// lists are expanded here, one message at a time.
pub fn document_format(src: &str, root: &Node) -> Result<Format, ParseError> {
    document_format_and_root(src, root).map(|(f, _)| f)
}

/// [`document_format`], and the root with its message list expanded one level (its messages
/// still deferred), for the reader to start from instead of expanding it again.
pub fn document_format_and_root(src: &str, root: &Node) -> Result<(Format, Node), ParseError> {
    let mut root = super::expand(src, root, 1)?.into_owned();
    if let Kind::Object(members) = &mut root.kind {
        for m in members.iter_mut() {
            if matches!(m.key.as_str(), "messages" | "history" | "input" | "items") {
                if let std::borrow::Cow::Owned(n) = super::expand(src, &m.value, 1)? {
                    m.value = n;
                }
            }
        }
    }
    let format = format_of(src, &root)?;
    Ok((format, root))
}

fn format_of(src: &str, root: &Node) -> Result<Format, ParseError> {
    let mut ev = Evidence::default();
    let items = match &root.kind {
        Kind::Array(items) => items.as_slice(),
        Kind::Object(_) => {
            if let Some(m) = root.get("messages") {
                match m.items() {
                    Some(items) => items,
                    // lcc's reader says what is wrong with it.
                    None => return Ok(Format::Lcc),
                }
            } else if let Some(h) = root.get("history").and_then(Node::items) {
                ev.chat = true;
                h
            } else if let Some(i) = root.get("input").and_then(Node::items) {
                ev.responses = true;
                i
            } else if let Some(i) = root.get("items").and_then(Node::items) {
                i
            } else {
                return Err(ParseError::new(
                    "",
                    format!(
                        "not a transcript lcc recognises: this object has no 'messages', 'history' or 'input' list; {}",
                        format_hint()
                    ),
                ));
            }
        }
        _ => {
            return Err(ParseError::new(
                "",
                format!(
                    "not a transcript lcc recognises: expected a list of messages, found {}; {}",
                    root.type_name(),
                    format_hint()
                ),
            ))
        }
    };
    for m in items {
        if matches!(m.kind, Kind::Deferred { .. }) {
            // The evidence is in a message's keys and those of its blocks and parts: three
            // levels, not the whole message (tool inputs and outputs are left unbuilt).
            ev.message(src, &*super::expand(src, m, 3)?);
        } else {
            ev.message(src, m);
        }
    }
    let found = ev.formats();
    let names = |fs: &[Format]| fs.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ");
    match found.as_slice() {
        [one] => Ok(*one),
        [] if !ev.content => Ok(Format::Lcc),
        [] => Err(ParseError::new(
            "",
            format!(
                "cannot tell the transcript format: these messages use no tool calls or format-specific fields, so they fit anthropic, openai-chat and openai-responses alike; {}",
                format_hint()
            ),
        )),
        many => Err(ParseError::new(
            "",
            format!(
                "cannot tell the transcript format: it has fields of {} at once; {}",
                names(many),
                format_hint()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{detect, Format};

    #[test]
    fn formats() {
        let cases = [
            (r#"{"messages": [{"role": "user", "text": "hi"}]}"#, Format::Lcc),
            ("[]", Format::Lcc),
            (
                r#"[{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}]"#,
                Format::Anthropic,
            ),
            (
                r#"{"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]}"#,
                Format::OpenAiChat,
            ),
            (
                r#"{"history": [{"role": "user", "content": "x"}]}"#,
                Format::OpenAiChat,
            ),
            (
                r#"[{"type": "function_call", "call_id": "c", "name": "x", "arguments": "{}"}]"#,
                Format::OpenAiResponses,
            ),
            (
                "{\"type\":\"user\",\"uuid\":\"u1\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
                Format::ClaudeCode,
            ),
            (
                "{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{}}\n{\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{}}\n",
                Format::Codex,
            ),
        ];
        for (src, want) in cases {
            assert_eq!(detect(src).unwrap(), want, "{src}");
        }
    }

    #[test]
    fn unknown_and_ambiguous_name_the_flag() {
        for src in [
            r#"[{"role": "user", "content": "hi"}]"#,
            r#"{"foo": 1}"#,
            "42",
            "{\"a\":1}\n{\"b\":2}\n",
            r#"[{"role": "user", "text": "x", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}]"#,
        ] {
            let e = detect(src).unwrap_err();
            assert!(e.message.contains("--format"), "{src}: {e}");
        }
    }
}
