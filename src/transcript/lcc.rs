//! lcc's own transcript shape (the Python release's input).
//!
//! A bare array of messages or an object with `messages` (other top-level keys are kept).
//! Per message: `role` (string), `text` (string or null), calls in `toolUses` or
//! `tool_calls`, results in `toolResults` or `tool_results`. Per call: id from
//! `tool_use_id`, `id` or `tool_call_id`; tool from `tool` or `name`; `input` any JSON.
//! Per result: the same id keys, `text` (a string, or any JSON, which is then shown as its
//! compact JSON), `is_error` (true only when the JSON boolean `true`).

use crate::json::{self, Kind, Node};

use super::{
    call_input, is_blank, Call, Format, Layout, Message, ParseError, Slot, Text, TextSlot,
    ToolResult, Transcript,
};

const ID_KEYS: [&str; 3] = ["tool_use_id", "id", "tool_call_id"];

/// Does this look like lcc's shape? (a messages array whose objects use `text`/`toolUses`…)
pub fn looks_like(root: &Node, src: &str) -> bool {
    let _ = src;
    let msgs = match &root.kind {
        Kind::Array(_) => Some(root),
        Kind::Object(_) => root.get("messages"),
        _ => None,
    };
    msgs.and_then(Node::items).is_some_and(|items| {
        items.iter().any(|m| {
            ["toolUses", "tool_results", "toolResults", "text"]
                .iter()
                .any(|k| m.get(k).is_some())
                || m.get("tool_calls")
                    .and_then(Node::items)
                    .is_some_and(|c| c.iter().any(|b| b.get("function").is_none()))
        })
    })
}

pub fn parse(src: &str) -> Result<Transcript<'_>, ParseError> {
    // Build only the top two levels; each message is built, read and dropped in turn, so the
    // whole-file tree never exists at once.
    let start = if src.starts_with('\u{feff}') { 3 } else { 0 };
    let root =
        json::parse_shallow(src, start, src.len(), 1).map_err(|e| ParseError::syntax(src, &e))?;
    from_node(src, &root)
}

pub fn from_node<'s>(src: &'s str, root: &Node) -> Result<Transcript<'s>, ParseError> {
    let mut layout = Layout::default();
    let (msgs_node, prefix) = match &root.kind {
        Kind::Array(_) => (root.clone(), String::new()),
        Kind::Deferred { .. } => return from_node(src, &*super::expand(src, root, 1)?),
        Kind::Object(_) => match root.get("messages") {
            Some(n) if matches!(n.kind, Kind::Deferred { array: true }) => {
                (super::expand(src, n, 1)?.into_owned(), "messages".to_string())
            }
            Some(n) if n.items().is_some() => (n.clone(), "messages".to_string()),
            Some(n) => {
                return Err(ParseError::new(
                    "messages",
                    format!("expected an array of messages, found {}", n.type_name()),
                ))
            }
            None => {
                return Err(ParseError::new(
                    "",
                    "transcript must be an array of messages or an object with a 'messages' array; this object has no 'messages' key",
                ))
            }
        },
        _ => {
            return Err(ParseError::new(
                "",
                format!(
                    "transcript must be an array of messages or an object with a 'messages' array, found {}",
                    root.type_name()
                ),
            ))
        }
    };
    let msgs_container = layout.add_node(&msgs_node, None);
    let items = msgs_node.items().unwrap_or_default();
    let messages = super::build_messages(&mut layout, items.len(), |i, fragment| {
        let m = super::expand(src, &items[i], usize::MAX)?;
        let m = &*m;
        let path = format!("{prefix}[{i}]");
        message(
            src,
            m,
            path,
            Slot {
                container: msgs_container,
                index: i,
            },
            fragment,
        )
    })?;
    Ok(Transcript {
        src,
        format: Format::Lcc,
        messages,
        layout,
        warnings: Vec::new(),
    })
}

fn string_field(src: &str, m: &Node, key: &str, path: &str) -> Result<Option<String>, ParseError> {
    match m.get(key) {
        None => Ok(None),
        Some(n) if n.is_null() => Ok(None),
        Some(n) => n.as_str(src).map(|s| Some(s.into_owned())).ok_or_else(|| {
            ParseError::new(
                format!("{path}.{key}"),
                format!("expected a string, found {}", n.type_name()),
            )
        }),
    }
}

fn message(
    src: &str,
    m: &Node,
    path: String,
    slot: Slot,
    layout: &mut Layout,
) -> Result<Message, ParseError> {
    if m.members().is_none() {
        return Err(ParseError::new(
            path,
            format!("every message must be an object, found {}", m.type_name()),
        ));
    }
    let role = match string_field(src, m, "role", &path)? {
        Some(r) if !r.is_empty() => r,
        _ => return Err(ParseError::new(path, "message has no string 'role'")),
    };
    let text = string_field(src, m, "text", &path)?.unwrap_or_default();
    let msg_container = layout.add_node(m, None);

    let results = block_list(
        src,
        m,
        &["toolResults", "tool_results"],
        &path,
        msg_container,
        layout,
        result,
    )?;
    let calls = block_list(
        src,
        m,
        &["toolUses", "tool_calls"],
        &path,
        msg_container,
        layout,
        call,
    )?;
    Ok(Message {
        role,
        has_other_content: !is_blank(&text),
        text,
        calls,
        results,
        slot,
        path,
    })
}

/// The blocks (calls or results) under the first of `keys` present in message `m`, each
/// built by `build` with its JSON path and its slot in a container registered for the array
/// (a member of the message's object, so removing every block removes the key).
fn block_list<T>(
    src: &str,
    m: &Node,
    keys: &[&'static str],
    path: &str,
    msg_container: usize,
    layout: &mut Layout,
    build: fn(&str, &Node, String, Slot) -> Result<T, ParseError>,
) -> Result<Vec<T>, ParseError> {
    let Some((key, idx, arr)) = blocks(m, keys, path)? else {
        return Ok(Vec::new());
    };
    let c = layout.add_node(
        arr,
        Some(Slot {
            container: msg_container,
            index: idx,
        }),
    );
    let items = arr.items().unwrap_or_default();
    let mut out = Vec::with_capacity(items.len());
    for (bi, b) in items.iter().enumerate() {
        let slot = Slot {
            container: c,
            index: bi,
        };
        out.push(build(src, b, format!("{path}.{key}[{bi}]"), slot)?);
    }
    Ok(out)
}

/// The first present, non-null key of `keys`, which must hold an array.
fn blocks<'n>(
    m: &'n Node,
    keys: &[&'static str],
    path: &str,
) -> Result<Option<(&'static str, usize, &'n Node)>, ParseError> {
    for &key in keys {
        if let Some(idx) = m.member_index(key) {
            let v = &m.members().unwrap_or_default()[idx].value;
            if v.is_null() {
                continue;
            }
            if v.items().is_none() {
                return Err(ParseError::new(
                    format!("{path}.{key}"),
                    format!("expected an array, found {}", v.type_name()),
                ));
            }
            return Ok(Some((key, idx, v)));
        }
    }
    Ok(None)
}

fn block_id(src: &str, b: &Node) -> Option<String> {
    ID_KEYS.iter().find_map(|k| {
        b.get(k)
            .and_then(|n| n.as_str(src))
            .filter(|s| !s.is_empty())
            .map(std::borrow::Cow::into_owned)
    })
}

fn call(src: &str, b: &Node, path: String, slot: Slot) -> Result<Call, ParseError> {
    if b.members().is_none() {
        return Err(ParseError::new(
            path,
            format!("tool call must be an object, found {}", b.type_name()),
        ));
    }
    let Some(id) = block_id(src, b) else {
        return Err(ParseError::new(
            path,
            "call has no id (expected a non-empty string in tool_use_id, id or tool_call_id)",
        ));
    };
    let tool = ["tool", "name"]
        .iter()
        .find_map(|k| {
            b.get(k)
                .and_then(|n| n.as_str(src))
                .filter(|s| !s.is_empty())
        })
        .map_or_else(|| "tool".to_string(), std::borrow::Cow::into_owned);
    let input = call_input(src, b);
    Ok(Call {
        id,
        tool,
        input,
        slot,
        path,
    })
}

fn result(src: &str, b: &Node, path: String, slot: Slot) -> Result<ToolResult, ParseError> {
    if b.members().is_none() {
        return Err(ParseError::new(
            path,
            format!("tool result must be an object, found {}", b.type_name()),
        ));
    }
    let Some(id) = block_id(src, b) else {
        return Err(ParseError::new(
            path,
            "result has no id (expected a non-empty string in tool_use_id, id or tool_call_id)",
        ));
    };
    let (text, text_slot) = match b.get("text") {
        Some(n) => {
            let text = match Text::of_node(n) {
                Some(text) => text,
                None if n.is_null() => Text::empty(),
                None => Text::Owned(json::py_dumps(&n.to_value(src), false)),
            };
            (
                text,
                TextSlot::Value {
                    start: n.start,
                    end: n.end,
                },
            )
        }
        None => (
            Text::empty(),
            TextSlot::InsertMember {
                open: b.start,
                key: "text",
            },
        ),
    };
    let is_error = matches!(b.get("is_error").map(|n| &n.kind), Some(Kind::Bool(true)));
    Ok(ToolResult {
        id,
        text,
        is_error,
        slot,
        text_slot,
        path,
    })
}

/// Write a transcript's typed view in lcc's own shape: `{"messages": [{role, text, toolUses,
/// toolResults}]}`, the same messages, calls and results whatever format they were read
/// from. Compacting this twin must give the same decisions as compacting the original.
pub fn write(t: &Transcript) -> String {
    use serde_json::{Map, Value};
    let messages: Vec<Value> = t
        .messages
        .iter()
        .map(|m| {
            let mut o = Map::new();
            o.insert("role".into(), Value::String(m.role.clone()));
            o.insert("text".into(), Value::String(m.text.clone()));
            if !m.calls.is_empty() {
                let calls = m.calls.iter().map(|c| {
                    let mut b = Map::new();
                    b.insert("tool_use_id".into(), Value::String(c.id.clone()));
                    b.insert("tool".into(), Value::String(c.tool.clone()));
                    b.insert("input".into(), c.input.clone());
                    Value::Object(b)
                });
                o.insert("toolUses".into(), Value::Array(calls.collect()));
            }
            if !m.results.is_empty() {
                let results = m.results.iter().map(|r| {
                    let mut b = Map::new();
                    b.insert("tool_use_id".into(), Value::String(r.id.clone()));
                    b.insert("text".into(), Value::String(t.text(r).into_owned()));
                    if r.is_error {
                        b.insert("is_error".into(), Value::Bool(true));
                    }
                    Value::Object(b)
                });
                o.insert("toolResults".into(), Value::Array(results.collect()));
            }
            Value::Object(o)
        })
        .collect();
    let mut root = Map::new();
    root.insert("messages".into(), Value::Array(messages));
    let mut s = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    s.push('\n');
    s
}
