//! Content blocks and parts, shared by the adapters.
//!
//! * Anthropic-style content (Anthropic Messages, Claude Code): a string, or an array of
//!   `text`, `tool_use`, `tool_result`, `thinking`, ... blocks.
//! * A result's text wherever it lives (`tool_result.content`, a Chat `tool` message's
//!   `content`, a Responses `output`): a string, or an array of parts. Text parts are joined
//!   with `\n`. Any other part (an image, a tool reference) is shown as its raw JSON when
//!   short, else as `[<type> block: N bytes, sha256 <16 hex>]`, so two results only compare
//!   equal (for lossless dedupe) when those parts are the same bytes.

use sha2::{Digest, Sha256};

use crate::json::{self, Kind, Node};

use super::{
    call_input, is_blank, Call, Layout, ParseError, Slot, Text, TextBlock, TextSlot, ToolResult,
};

/// What a content value holds.
#[derive(Default)]
pub struct Content {
    pub text: String,
    pub calls: Vec<Call>,
    pub results: Vec<ToolResult>,
    /// Something besides text, calls, results and thinking that must survive.
    pub other: bool,
}

impl Content {
    /// Whether the message holding this content must never be removed.
    pub fn has_other_content(&self) -> bool {
        self.other || !is_blank(&self.text)
    }
}

/// Raw JSON up to this size stands for itself in a result's text.
const RAW_PART_MAX: usize = 256;

/// How a non-text part is shown in a result's text.
pub fn part_placeholder(src: &str, n: &Node) -> String {
    let raw = n.raw(src);
    if raw.len() <= RAW_PART_MAX {
        return raw.to_string();
    }
    let kind = n
        .get("type")
        .and_then(|t| t.as_str(src))
        .map_or_else(|| "content".to_string(), std::borrow::Cow::into_owned);
    let digest = Sha256::digest(raw.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("[{kind} block: {} bytes, sha256 {hex}]", raw.len())
}

fn str_field(src: &str, n: &Node, key: &str) -> Option<String> {
    n.get(key)
        .and_then(|v| v.as_str(src))
        .map(std::borrow::Cow::into_owned)
}

/// A non-empty string field.
pub fn id_field(src: &str, n: &Node, key: &str) -> Option<String> {
    str_field(src, n, key).filter(|s| !s.is_empty())
}

fn part_type(src: &str, n: &Node) -> Option<String> {
    str_field(src, n, "type")
}

/// The `text` value of a part whose type is one of `text_types` and whose `text` is a string.
fn text_part<'n>(src: &str, n: &'n Node, text_types: &[&str]) -> Option<&'n Node> {
    let ty = part_type(src, n)?;
    if !text_types.contains(&ty.as_str()) {
        return None;
    }
    n.get("text").filter(|v| matches!(v.kind, Kind::Str { .. }))
}

/// A result's text and where to write a new one: `owner[key]` as a string, an array of parts,
/// null, or absent.
pub fn result_text(
    src: &str,
    owner: &Node,
    key: &'static str,
    text_types: &[&str],
    text_type: &'static str,
) -> (Text, TextSlot) {
    let Some(v) = owner.get(key) else {
        return (
            Text::empty(),
            TextSlot::InsertMember {
                open: owner.start,
                key,
            },
        );
    };
    let value_slot = TextSlot::Value {
        start: v.start,
        end: v.end,
    };
    match &v.kind {
        Kind::Str { .. } => (Text::of_node(v).unwrap_or_else(Text::empty), value_slot),
        Kind::Null => (Text::empty(), value_slot),
        Kind::Array(items) => {
            let mut pieces = Vec::with_capacity(items.len());
            let mut first_text = None;
            for it in items {
                match text_part(src, it, text_types) {
                    Some(value) => {
                        if first_text.is_none() {
                            first_text = Some(TextBlock {
                                start: it.start,
                                end: it.end,
                                value_start: value.start,
                                value_end: value.end,
                            });
                        }
                        pieces.push(Ok(value));
                    }
                    None => pieces.push(Err(part_placeholder(src, it))),
                }
            }
            // One text part (the usual case) is read from the source like a plain string.
            let text = match pieces.as_slice() {
                [Ok(value)] => Text::of_node(value).unwrap_or_else(Text::empty),
                _ => Text::Owned(
                    pieces
                        .iter()
                        .map(|p| match p {
                            Ok(value) => value.as_str(src).unwrap_or_default(),
                            Err(placeholder) => std::borrow::Cow::Borrowed(placeholder.as_str()),
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
            };
            (
                text,
                TextSlot::Blocks {
                    start: v.start,
                    end: v.end,
                    first_text,
                    text_type,
                },
            )
        }
        _ => (
            Text::Owned(json::py_dumps(&v.to_value(src), false)),
            value_slot,
        ),
    }
}

/// The text of an array of parts (Chat content parts, Responses message content), and
/// whether it holds any other part.
pub fn parts_text(src: &str, v: Option<&Node>, text_types: &[&str]) -> (String, bool) {
    match v.map(|n| &n.kind) {
        None | Some(Kind::Null) => (String::new(), false),
        Some(Kind::Str { .. }) => (
            v.and_then(|n| n.as_str(src))
                .unwrap_or_default()
                .into_owned(),
            false,
        ),
        Some(Kind::Array(items)) => {
            let mut texts = Vec::new();
            let mut other = false;
            for it in items {
                match text_part(src, it, text_types).and_then(|n| n.as_str(src)) {
                    Some(t) => texts.push(t),
                    None => other = true,
                }
            }
            (texts.join("\n"), other)
        }
        Some(_) => (String::new(), true),
    }
}

/// Anthropic-style message content: a string, or an array of blocks registered as a
/// container so that call and result blocks can be removed one by one.
pub fn anthropic_content(
    src: &str,
    content: Option<&Node>,
    path: &str,
    layout: &mut Layout,
) -> Result<Content, ParseError> {
    let mut out = Content::default();
    let Some(content) = content else {
        return Ok(out);
    };
    let items = match &content.kind {
        Kind::Null => return Ok(out),
        Kind::Str { .. } => {
            out.text = content.as_str(src).unwrap_or_default().into_owned();
            return Ok(out);
        }
        Kind::Array(items) => items,
        _ => {
            out.other = true;
            return Ok(out);
        }
    };
    let container = layout.add_node(content, None);
    let mut texts: Vec<String> = Vec::new();
    for (i, b) in items.iter().enumerate() {
        let bpath = format!("{path}[{i}]");
        let slot = Slot {
            container,
            index: i,
        };
        match part_type(src, b).as_deref() {
            Some("text") => match b.get("text").and_then(|t| t.as_str(src)) {
                Some(t) => texts.push(t.into_owned()),
                None => out.other = true,
            },
            Some("tool_use") => out.calls.push(tool_use(src, b, bpath, slot)?),
            Some("tool_result") => out.results.push(tool_result(src, b, bpath, slot)?),
            // Reasoning that led to the calls: it goes with them when they all go.
            Some("thinking" | "redacted_thinking") => {}
            _ => out.other = true,
        }
    }
    out.text = texts.join("\n");
    Ok(out)
}

fn tool_use(src: &str, b: &Node, path: String, slot: Slot) -> Result<Call, ParseError> {
    let Some(id) = id_field(src, b, "id") else {
        return Err(ParseError::new(
            path,
            "tool_use block has no id (expected a non-empty string in 'id')",
        ));
    };
    let tool = id_field(src, b, "name").unwrap_or_else(|| "tool".to_string());
    let input = call_input(src, b);
    Ok(Call {
        id,
        tool,
        input,
        slot,
        path,
    })
}

fn tool_result(src: &str, b: &Node, path: String, slot: Slot) -> Result<ToolResult, ParseError> {
    let Some(id) = id_field(src, b, "tool_use_id") else {
        return Err(ParseError::new(
            path,
            "tool_result block has no tool_use_id (expected a non-empty string)",
        ));
    };
    let (text, text_slot) = result_text(src, b, "content", &["text"], "text");
    Ok(ToolResult {
        id,
        text,
        is_error: is_true(b.get("is_error")),
        slot,
        text_slot,
        path,
    })
}

pub fn is_true(n: Option<&Node>) -> bool {
    matches!(n.map(|n| &n.kind), Some(Kind::Bool(true)))
}

/// A tool input given as a JSON string (OpenAI `arguments`): the decoded JSON when it is
/// JSON, else the string itself.
pub fn arguments_value(src: &str, n: Option<&Node>) -> serde_json::Value {
    let Some(n) = n else {
        return serde_json::Value::Object(serde_json::Map::new());
    };
    match n.as_str(src) {
        Some(s) => match json::parse(&s) {
            Ok(inner) => inner.to_value(&s),
            Err(_) => serde_json::Value::String(s.into_owned()),
        },
        None => n.to_value(src),
    }
}
