//! Anthropic Messages: `[{role, content}]`, bare or under `messages` (an API request body:
//! `system`, `tools`, `model` and every other top-level key are kept as they are).
//!
//! `content` is a string or an array of blocks: `text{text}`, `tool_use{id, name, input}`,
//! `tool_result{tool_use_id, content: string | blocks, is_error}`, `thinking`, `image`, ...
//! One typed message per API message. A dropped pair removes its `tool_use` and its
//! `tool_result` block; a message left with nothing but blank text and thinking blocks is
//! removed with them (the thinking belonged to the calls that went). Any other block keeps the
//! message. A trimmed or deduped result keeps its block: a string `content` gets the new
//! string, an array keeps its first text block (with the new text) and loses the others.

use crate::json::{Kind, Node};

use super::blocks::anthropic_content;
use super::{Format, Layout, Message, ParseError, Slot, Transcript};

/// The messages array of a document, and the prefix of its JSON paths.
pub(crate) fn messages_node<'n>(
    root: &'n Node,
    keys: &[&'static str],
    what: &str,
) -> Result<(&'n Node, &'static str), ParseError> {
    match &root.kind {
        Kind::Array(_) => Ok((root, "")),
        Kind::Object(_) => {
            for &k in keys {
                match root.get(k) {
                    Some(n) if n.items().is_some() => return Ok((n, k)),
                    Some(n) => {
                        return Err(ParseError::new(
                            k,
                            format!("expected an array of {what}, found {}", n.type_name()),
                        ))
                    }
                    None => {}
                }
            }
            Err(ParseError::new(
                "",
                format!(
                    "expected an array of {what} or an object with {}",
                    keys.iter()
                        .map(|k| format!("'{k}'"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            ))
        }
        _ => Err(ParseError::new(
            "",
            format!("expected an array of {what}, found {}", root.type_name()),
        )),
    }
}

pub fn from_node<'s>(src: &'s str, root: &Node) -> Result<Transcript<'s>, ParseError> {
    let (msgs, prefix) = messages_node(root, &["messages"], "messages")?;
    let mut layout = Layout::default();
    let container = layout.add_node(msgs, None);
    let items = msgs.items().unwrap_or_default();
    let mut messages = Vec::with_capacity(items.len());
    for (i, m) in items.iter().enumerate() {
        let path = format!("{prefix}[{i}]");
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
        let content = anthropic_content(
            src,
            m.get("content"),
            &format!("{path}.content"),
            &mut layout,
        )?;
        messages.push(Message {
            role,
            has_other_content: content.has_other_content(),
            text: content.text,
            calls: content.calls,
            results: content.results,
            slot: Slot {
                container,
                index: i,
            },
            path,
        });
    }
    Ok(Transcript {
        src,
        format: Format::Anthropic,
        messages,
        layout,
        warnings: Vec::new(),
    })
}
