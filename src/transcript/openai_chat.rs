//! OpenAI Chat Completions messages, bare or under `messages` (or under `history`, as
//! SWE-agent trajectories store them; their other keys are kept as they are).
//!
//! * An assistant message's calls are its `tool_calls[{id, type: "function", function: {name,
//!   arguments}}]`; `arguments` is a JSON string, read as the JSON it holds (or kept as a
//!   string when it holds none). `type: "custom"` calls (`custom: {name, input}`) are read too.
//! * A result is a `role: "tool"` message with `tool_call_id` (SWE-agent writes a one-element
//!   `tool_call_ids` list instead); its `content` (a string or text parts) is the result text.
//!   A tool message naming several calls is not treated as a result: removing it would orphan
//!   the others, so those calls are never judged.
//! * `content` of other messages (a string, text parts, or null) is the message text.
//!
//! A dropped pair removes the call from `tool_calls` (and `tool_calls` itself when it empties)
//! and removes the tool message; an assistant message left with no text and no calls is
//! removed. A trimmed or deduped result gets its new text in place (a string stays a string;
//! parts keep their first text part).

use crate::json::Node;

use super::anthropic::messages_node;
use super::blocks::{arguments_value, id_field, is_true, parts_text, result_text};
use super::{is_blank, Call, Format, Layout, Message, ParseError, Slot, ToolResult, Transcript};

pub fn from_node<'s>(src: &'s str, root: &Node) -> Result<Transcript<'s>, ParseError> {
    let (msgs, prefix) = messages_node(root, &["messages", "history"], "messages")?;
    let mut layout = Layout::default();
    let container = layout.add_node(msgs, None);
    let items = msgs.items().unwrap_or_default();
    let mut messages = Vec::with_capacity(items.len());
    for (i, m) in items.iter().enumerate() {
        let path = format!("{prefix}[{i}]");
        let slot = Slot {
            container,
            index: i,
        };
        if m.members().is_none() {
            return Err(ParseError::new(
                path,
                format!("every message must be an object, found {}", m.type_name()),
            ));
        }
        let role = match m.get("role").and_then(|r| r.as_str(src)) {
            Some(r) if !r.is_empty() => r.into_owned(),
            _ => return Err(ParseError::new(path, "message has no string 'role'")),
        };
        if role == "tool" {
            if let Some(id) = tool_call_id(src, m) {
                let (text, text_slot) = result_text(src, m, "content", &["text"], "text");
                let result = ToolResult {
                    id,
                    text,
                    is_error: is_true(m.get("is_error")),
                    slot,
                    text_slot,
                    path: path.clone(),
                };
                messages.push(Message {
                    role,
                    text: String::new(),
                    calls: Vec::new(),
                    results: vec![result],
                    slot,
                    has_other_content: false,
                    path,
                });
                continue;
            }
        }
        let (text, mut other) = parts_text(src, m.get("content"), &["text"]);
        for key in ["refusal", "function_call", "audio"] {
            if m.get(key).is_some_and(|v| !v.is_null()) {
                other = true;
            }
        }
        let mut calls = Vec::new();
        if let Some(idx) = m.member_index("tool_calls") {
            let arr = &m.members().unwrap_or_default()[idx].value;
            if let Some(list) = arr.items() {
                let msg_container = layout.add_node(m, None);
                let c = layout.add_node(
                    arr,
                    Some(Slot {
                        container: msg_container,
                        index: idx,
                    }),
                );
                for (bi, b) in list.iter().enumerate() {
                    calls.push(call(
                        src,
                        b,
                        format!("{path}.tool_calls[{bi}]"),
                        Slot {
                            container: c,
                            index: bi,
                        },
                    )?);
                }
            } else if !arr.is_null() {
                return Err(ParseError::new(
                    format!("{path}.tool_calls"),
                    format!("expected an array, found {}", arr.type_name()),
                ));
            }
        }
        messages.push(Message {
            role,
            has_other_content: other || !is_blank(&text),
            text,
            calls,
            results: Vec::new(),
            slot,
            path,
        });
    }
    Ok(Transcript {
        src,
        format: Format::OpenAiChat,
        messages,
        layout,
        warnings: Vec::new(),
    })
}

/// `tool_call_id`, or the only element of SWE-agent's `tool_call_ids`.
fn tool_call_id(src: &str, m: &Node) -> Option<String> {
    if let Some(id) = id_field(src, m, "tool_call_id") {
        return Some(id);
    }
    match m.get("tool_call_ids").and_then(Node::items) {
        Some([one]) => one
            .as_str(src)
            .map(std::borrow::Cow::into_owned)
            .filter(|s| !s.is_empty()),
        _ => None,
    }
}

fn call(src: &str, b: &Node, path: String, slot: Slot) -> Result<Call, ParseError> {
    if b.members().is_none() {
        return Err(ParseError::new(
            path,
            format!("tool call must be an object, found {}", b.type_name()),
        ));
    }
    let Some(id) = id_field(src, b, "id") else {
        return Err(ParseError::new(
            path,
            "tool call has no id (expected a non-empty string in 'id')",
        ));
    };
    let (tool, input) = if let Some(f) = b.get("function") {
        (
            id_field(src, f, "name"),
            arguments_value(src, f.get("arguments")),
        )
    } else if let Some(c) = b.get("custom") {
        (
            id_field(src, c, "name"),
            c.get("input")
                .map_or(serde_json::Value::Null, |n| n.to_value(src)),
        )
    } else {
        (
            id_field(src, b, "name"),
            serde_json::Value::Object(serde_json::Map::new()),
        )
    };
    Ok(Call {
        id,
        tool: tool.unwrap_or_else(|| "tool".to_string()),
        input,
        slot,
        path,
    })
}
