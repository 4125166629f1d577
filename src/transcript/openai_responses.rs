//! OpenAI Responses items, bare or under `input` (a request body; other keys are kept).
//!
//! One typed message per conversational item:
//! * `message{role, content}`: text from `input_text` / `output_text` / `text` parts (or a
//!   string); any other part keeps the message;
//! * `function_call{call_id, name, arguments}` (a JSON string, read as the JSON it holds),
//!   `custom_tool_call{call_id, name, input}` (input kept as a string) and
//!   `local_shell_call{call_id, action}`: a message with one call;
//! * `function_call_output{call_id, output}`, `custom_tool_call_output` and
//!   `local_shell_call_output`: a message (role `tool`) with one result; `output` is a string
//!   or an array of parts (text parts joined).
//!
//! Pairing is by `call_id`. Other items (`reasoning`, `web_search_call`, `compaction`, ...) are
//! not messages and are never changed, with one exception: a `reasoning` item whose output
//! items (the calls and assistant messages right after it) are all removed by this pass is
//! removed with them, since the API refuses a reasoning item without the item it produced.
//! A dropped pair removes the call item and the output item; a trimmed or deduped output gets
//! its new text in place (a string stays a string; parts keep their first text part).

use crate::json::Node;

use super::anthropic::messages_node;
use super::blocks::{arguments_value, id_field, is_true, parts_text, result_text};
use super::{
    is_blank, Call, Companion, Format, Layout, Message, ParseError, Slot, ToolResult, Transcript,
};

/// Item types the model produces besides calls and messages: they keep a reasoning item.
const MODEL_OUTPUTS: [&str; 10] = [
    "web_search_call",
    "file_search_call",
    "computer_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
    "apply_patch_call",
];

const TEXT_PARTS: [&str; 3] = ["input_text", "output_text", "text"];

/// Builds typed messages from items in order, and the reasoning companions.
#[derive(Default)]
pub(crate) struct Builder {
    pub messages: Vec<Message>,
    pub companions: Vec<Companion>,
    /// The open reasoning item: its slot, the messages it produced, and whether it produced
    /// something that is not a typed message (then it is never removed).
    run: Option<(Slot, Vec<usize>, bool)>,
}

enum ItemKind {
    /// A typed message; `true` when the model produced it.
    Msg(Message, bool),
    Reasoning,
    ModelOutput,
    Other,
}

impl Builder {
    /// Read one item.
    pub fn push(
        &mut self,
        src: &str,
        n: &Node,
        path: String,
        slot: Slot,
        layout: &mut Layout,
    ) -> Result<(), ParseError> {
        let _ = layout; // items hold no removable inner blocks
        match item(src, n, path, slot)? {
            ItemKind::Msg(m, produced) => {
                let index = self.messages.len();
                self.messages.push(m);
                match (&mut self.run, produced) {
                    (Some((_, list, _)), true) => list.push(index),
                    (Some(_), false) => self.close(),
                    (None, _) => {}
                }
            }
            ItemKind::Reasoning => {
                self.close();
                self.run = Some((slot, Vec::new(), false));
            }
            ItemKind::ModelOutput => {
                if let Some((_, _, blocked)) = &mut self.run {
                    *blocked = true;
                }
            }
            ItemKind::Other => self.close(),
        }
        Ok(())
    }

    fn close(&mut self) {
        if let Some((slot, messages, blocked)) = self.run.take() {
            if !blocked && !messages.is_empty() {
                self.companions.push(Companion { slot, messages });
            }
        }
    }

    pub fn finish(mut self) -> (Vec<Message>, Vec<Companion>) {
        self.close();
        (self.messages, self.companions)
    }
}

pub fn from_node<'s>(src: &'s str, root: &Node) -> Result<Transcript<'s>, ParseError> {
    let (items, prefix) = messages_node(root, &["input", "items"], "items")?;
    let mut layout = Layout::default();
    let container = layout.add_node(items, None);
    let mut b = Builder::default();
    for (i, n) in items.items().unwrap_or_default().iter().enumerate() {
        let path = format!("{prefix}[{i}]");
        if n.members().is_none() {
            return Err(ParseError::new(
                path,
                format!("every item must be an object, found {}", n.type_name()),
            ));
        }
        b.push(
            src,
            n,
            path,
            Slot {
                container,
                index: i,
            },
            &mut layout,
        )?;
    }
    let (messages, companions) = b.finish();
    layout.companions = companions;
    Ok(Transcript {
        src,
        format: Format::OpenAiResponses,
        messages,
        layout,
        warnings: Vec::new(),
    })
}

fn item(src: &str, n: &Node, path: String, slot: Slot) -> Result<ItemKind, ParseError> {
    if n.members().is_none() {
        return Ok(ItemKind::Other);
    }
    let ty = n
        .get("type")
        .and_then(|t| t.as_str(src))
        .map(std::borrow::Cow::into_owned);
    let ty = match ty {
        Some(t) => t,
        // An "easy" input message: {role, content} without a type.
        None if n.get("role").is_some() => "message".to_string(),
        None => return Ok(ItemKind::Other),
    };
    let call = |tool: Option<String>, input: serde_json::Value| -> Result<ItemKind, ParseError> {
        let Some(id) = id_field(src, n, "call_id") else {
            return Err(ParseError::new(
                path.clone(),
                format!("{ty} item has no call_id (expected a non-empty string)"),
            ));
        };
        let c = Call {
            id,
            tool: tool.unwrap_or_else(|| "tool".to_string()),
            input,
            slot,
            path: path.clone(),
        };
        Ok(ItemKind::Msg(
            Message {
                role: "assistant".into(),
                text: String::new(),
                calls: vec![c],
                results: Vec::new(),
                slot,
                has_other_content: false,
                path: path.clone(),
            },
            true,
        ))
    };
    match ty.as_str() {
        "message" => {
            let role = n
                .get("role")
                .and_then(|r| r.as_str(src))
                .map_or_else(|| "user".to_string(), std::borrow::Cow::into_owned);
            let (text, other) = parts_text(src, n.get("content"), &TEXT_PARTS);
            let produced = role == "assistant";
            Ok(ItemKind::Msg(
                Message {
                    role,
                    has_other_content: other || !is_blank(&text),
                    text,
                    calls: Vec::new(),
                    results: Vec::new(),
                    slot,
                    path,
                },
                produced,
            ))
        }
        "function_call" => call(
            id_field(src, n, "name"),
            arguments_value(src, n.get("arguments")),
        ),
        "custom_tool_call" => call(
            id_field(src, n, "name"),
            n.get("input")
                .map_or(serde_json::Value::Null, |v| v.to_value(src)),
        ),
        "local_shell_call" => call(
            Some("local_shell".to_string()),
            n.get("action")
                .map_or(serde_json::Value::Null, |v| v.to_value(src)),
        ),
        "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
            let id = id_field(src, n, "call_id").or_else(|| {
                (ty == "local_shell_call_output")
                    .then(|| id_field(src, n, "id"))
                    .flatten()
            });
            let Some(id) = id else {
                return Err(ParseError::new(
                    path,
                    format!("{ty} item has no call_id (expected a non-empty string)"),
                ));
            };
            let (text, text_slot) = result_text(src, n, "output", &TEXT_PARTS, "input_text");
            let r = ToolResult {
                id,
                text,
                is_error: is_true(n.get("is_error")),
                slot,
                text_slot,
                path: path.clone(),
            };
            Ok(ItemKind::Msg(
                Message {
                    role: "tool".into(),
                    text: String::new(),
                    calls: Vec::new(),
                    results: vec![r],
                    slot,
                    has_other_content: false,
                    path,
                },
                false,
            ))
        }
        "reasoning" => Ok(ItemKind::Reasoning),
        t if MODEL_OUTPUTS.contains(&t) => Ok(ItemKind::ModelOutput),
        _ => Ok(ItemKind::Other),
    }
}

/// Does this item look like a Responses item? (for detection)
pub(crate) fn is_item_type(t: &str) -> bool {
    matches!(
        t,
        "function_call"
            | "function_call_output"
            | "custom_tool_call"
            | "custom_tool_call_output"
            | "local_shell_call"
            | "local_shell_call_output"
            | "reasoning"
            | "compaction"
            | "item_reference"
    ) || MODEL_OUTPUTS.contains(&t)
}

/// Part types only Responses messages use.
pub(crate) fn is_part_type(t: &str) -> bool {
    matches!(
        t,
        "input_text" | "output_text" | "input_image" | "input_file"
    )
}
