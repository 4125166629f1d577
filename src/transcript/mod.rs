//! The typed view of a transcript, whatever format it came in.
//!
//! A format adapter (one module per format) reads the source text into a [`Transcript`]:
//! messages with their text, tool calls and tool results, plus a [`Layout`] that says where
//! every message and block sits in the source bytes. Everything downstream (pinning, the
//! judge, the rules policies, decisions) works on the typed view only; [`crate::rebuild`]
//! uses the layout to splice the few changed spans back into the original bytes.
//!
//! This module owns no I/O: adapters take `&str` and return values or a [`ParseError`].

pub mod lcc;

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use crate::json::{self, Edit};

/// The transcript formats `lcc` reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// lcc's own shape: `[{role, text, toolUses|tool_calls, toolResults|tool_results}]`,
    /// bare or under `{"messages": [...]}`.
    Lcc,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Lcc => "lcc",
        }
    }

    pub fn from_name(s: &str) -> Option<Format> {
        match s {
            "lcc" => Some(Format::Lcc),
            _ => None,
        }
    }

    pub const NAMES: &'static [&'static str] = &["lcc"];
}

/// Index of a container in [`Layout::containers`].
pub type ContainerId = usize;

/// Where a removable thing (a message, a call block, a result block) sits: child `index`
/// of container `container`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot {
    pub container: ContainerId,
    pub index: usize,
}

/// How children are separated inside a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerKind {
    /// A JSON array or object: children are separated by commas.
    Json,
    /// Lines of a JSONL file: each child span already includes its line ending.
    Lines,
}

/// A JSON array/object (or a JSONL file) whose children may be removed.
#[derive(Debug, Clone)]
pub struct Container {
    pub kind: ContainerKind,
    /// Byte offsets of the opening and closing bracket (unused for `Lines`).
    pub open: usize,
    pub close: usize,
    /// Spans of the children (for objects: from the key's quote to the value's end).
    pub children: Vec<(usize, usize)>,
    /// When this container is the value of an object member, that member's slot: removing
    /// every child removes the member itself (no `"toolUses": []` left behind).
    pub member_of: Option<Slot>,
}

/// Where the bytes of each message and block are.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub containers: Vec<Container>,
}

impl Layout {
    pub fn add(&mut self, c: Container) -> ContainerId {
        self.containers.push(c);
        self.containers.len() - 1
    }

    /// Register a JSON array or object node as a container.
    pub fn add_node(&mut self, node: &json::Node, member_of: Option<Slot>) -> ContainerId {
        let children = match &node.kind {
            json::Kind::Array(items) => items.iter().map(|n| (n.start, n.end)).collect(),
            json::Kind::Object(members) => members.iter().map(|m| (m.start(), m.end())).collect(),
            _ => Vec::new(),
        };
        self.add(Container {
            kind: ContainerKind::Json,
            open: node.start,
            close: node.end - 1,
            children,
            member_of,
        })
    }
}

/// How a changed result text is written back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextSlot {
    /// Replace the JSON value at this span with a JSON string.
    Value { start: usize, end: usize },
    /// No text value exists (e.g. the key is absent): insert `"key": "..."` right after the
    /// opening brace of the object at `open`.
    InsertMember { open: usize, key: &'static str },
}

#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub tool: String,
    pub input: Value,
    pub slot: Slot,
    /// JSON path for messages, e.g. `messages[3].toolUses[0]`.
    pub path: String,
}

#[derive(Debug, Clone)]
pub struct ToolResult {
    pub id: String,
    pub text: String,
    pub is_error: bool,
    pub slot: Slot,
    pub text_slot: TextSlot,
    pub path: String,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub role: String,
    pub text: String,
    pub calls: Vec<Call>,
    pub results: Vec<ToolResult>,
    pub slot: Slot,
    /// True when the message holds something besides its calls and results that must
    /// survive (non-blank text, other content blocks); such a message is never removed.
    pub has_other_content: bool,
    pub path: String,
}

/// A parsed transcript: the typed messages and where they are in `src`.
#[derive(Debug, Clone)]
pub struct Transcript {
    pub format: Format,
    pub messages: Vec<Message>,
    pub layout: Layout,
    /// Warnings found while reading (e.g. a torn last JSONL line left as it was).
    pub warnings: Vec<String>,
}

/// A reference to a call or a result: (message index, block index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockRef {
    pub message: usize,
    pub block: usize,
}

/// A call paired with its result by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    pub call: BlockRef,
    pub result: BlockRef,
}

impl Transcript {
    pub fn call(&self, r: BlockRef) -> &Call {
        &self.messages[r.message].calls[r.block]
    }
    pub fn result(&self, r: BlockRef) -> &ToolResult {
        &self.messages[r.message].results[r.block]
    }

    /// Pair every call with the result carrying its id, wherever it sits. Calls without a
    /// result and results without a call are left out (never judged, never touched).
    /// Duplicate call ids (or result ids) are an error naming both places.
    pub fn pairs(&self) -> Result<Vec<Pair>, ParseError> {
        let mut results: HashMap<&str, BlockRef> = HashMap::new();
        for (mi, m) in self.messages.iter().enumerate() {
            for (bi, r) in m.results.iter().enumerate() {
                let here = BlockRef {
                    message: mi,
                    block: bi,
                };
                if let Some(prev) = results.insert(&r.id, here) {
                    return Err(ParseError::new(
                        r.path.clone(),
                        format!(
                            "duplicate tool result id '{}' (also at {})",
                            r.id,
                            self.result(prev).path
                        ),
                    ));
                }
            }
        }
        let mut seen: HashMap<&str, BlockRef> = HashMap::new();
        let mut pairs = Vec::new();
        for (mi, m) in self.messages.iter().enumerate() {
            for (bi, c) in m.calls.iter().enumerate() {
                let here = BlockRef {
                    message: mi,
                    block: bi,
                };
                if let Some(prev) = seen.insert(&c.id, here) {
                    return Err(ParseError::new(
                        c.path.clone(),
                        format!(
                            "duplicate tool call id '{}' (also at {})",
                            c.id,
                            self.call(prev).path
                        ),
                    ));
                }
                if let Some(&result) = results.get(c.id.as_str()) {
                    pairs.push(Pair { call: here, result });
                }
            }
        }
        Ok(pairs)
    }

    pub fn tool_calls_total(&self) -> usize {
        self.messages.iter().map(|m| m.calls.len()).sum()
    }
}

/// A transcript that cannot be read: where (a JSON path or line/column) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub path: String,
    pub message: String,
}

impl ParseError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ParseError {
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn syntax(src: &str, e: &json::SyntaxError) -> Self {
        let (line, col) = json::line_col(src, e.offset);
        ParseError::new(
            format!("line {line}, column {col}"),
            format!("invalid JSON: {}", e.message),
        )
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ParseError {}

/// Read `src` in the given format (or detect it).
pub fn parse(src: &str, format: Option<Format>) -> Result<Transcript, ParseError> {
    match format.unwrap_or_else(|| detect(src)) {
        Format::Lcc => lcc::parse(src),
    }
}

/// Check that a rebuilt text is still well-formed in its format, without building it.
pub fn validate(src: &str, format: Format) -> Result<(), ParseError> {
    match format {
        Format::Lcc => {
            let start = if src.starts_with('\u{feff}') { 3 } else { 0 };
            json::parse_shallow(src, start, src.len(), 0)
                .map(drop)
                .map_err(|e| ParseError::syntax(src, &e))
        }
    }
}

/// Guess the format from the content.
pub fn detect(_src: &str) -> Format {
    Format::Lcc
}

/// Format-specific edits the generic rebuild cannot know about (e.g. re-pointing a record
/// chain after a record is removed).
pub fn extra_edits(_t: &Transcript, _src: &str, _removed_messages: &[usize]) -> Vec<Edit> {
    Vec::new()
}

/// True when a string is empty or only (Unicode) whitespace.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}
