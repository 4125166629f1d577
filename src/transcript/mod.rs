//! The typed view of a transcript, whatever format it came in.
//!
//! A format adapter (one module per format) reads the source text into a [`Transcript`]:
//! messages with their text, tool calls and tool results, plus a [`Layout`] that says where
//! every message and block sits in the source bytes. Everything downstream (pinning, the
//! judge, the rules policies, decisions) works on the typed view only; [`crate::rebuild`]
//! uses the layout to splice the few changed spans back into the original bytes.
//!
//! This module owns no I/O: adapters take `&str` and return values or a [`ParseError`].
//!
//! Formats (one module each): [`lcc`] (lcc's own shape), [`claude_code`] (Claude Code session
//! JSONL), [`anthropic`] (Anthropic Messages), [`openai_chat`] (OpenAI Chat Completions),
//! [`openai_responses`] (OpenAI Responses items) and [`codex`] (Codex CLI rollout JSONL).
//! [`detect`] tells them apart from the content; `--format` forces one.

pub mod anthropic;
mod blocks;
pub mod claude_code;
pub mod codex;
pub mod detect;
mod jsonl;
pub mod lcc;
pub mod openai_chat;
pub mod openai_responses;
#[cfg(test)]
mod tests;

use std::fmt;

use serde_json::Value;

use crate::json::{self, Edit};

/// The transcript formats `lcc` reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// lcc's own shape: `[{role, text, toolUses|tool_calls, toolResults|tool_results}]`,
    /// bare or under `{"messages": [...]}`.
    Lcc,
    /// Claude Code session JSONL (`~/.claude/projects/<dir>/<session>.jsonl`).
    ClaudeCode,
    /// Anthropic Messages: `[{role, content: string | blocks}]`, bare or under `messages`.
    Anthropic,
    /// OpenAI Chat Completions messages (`tool_calls`, `role: "tool"`), bare or under
    /// `messages` (or `history`, as SWE-agent trajectories write it).
    OpenAiChat,
    /// OpenAI Responses items (`message`, `function_call`, `function_call_output`, ...), bare
    /// or under `input`.
    OpenAiResponses,
    /// Codex CLI rollout JSONL (`{timestamp, type, payload}` lines).
    Codex,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Lcc => "lcc",
            Format::ClaudeCode => "claude-code",
            Format::Anthropic => "anthropic",
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::Codex => "codex",
        }
    }

    pub fn from_name(s: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.name() == s)
    }

    pub const ALL: [Format; 6] = [
        Format::Lcc,
        Format::ClaudeCode,
        Format::Anthropic,
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Codex,
    ];

    pub const NAMES: &'static [&'static str] = &[
        "lcc",
        "claude-code",
        "anthropic",
        "openai-chat",
        "openai-responses",
        "codex",
    ];
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
    /// Source elements that are not messages but belong to some (an OpenAI reasoning item
    /// and the calls it produced, a Codex UI event about a call): removed when this pass
    /// removes every one of their messages.
    pub companions: Vec<Companion>,
    /// Claude Code's record chain (`uuid` / `parentUuid`), kept valid when records go.
    pub chain: Option<claude_code::Chain>,
}

/// A removable element that lives and dies with some messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Companion {
    pub slot: Slot,
    /// Message indices; never empty.
    pub messages: Vec<usize>,
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

/// Build `n` messages on the rayon pool, in chunks, each chunk with its own [`Layout`]
/// fragment, and merge them in order into `layout`: the typed view and the containers are
/// exactly what building them one after another would give (container ids are renumbered
/// as the fragments are appended). `build(i, fragment)` builds message `i`: it registers
/// the containers it creates in `fragment`, and the slots of its calls and results and the
/// `member_of` of its containers refer to those only; the message's own slot refers to
/// `layout` and is kept as it is. Of several errors, the one of the lowest message index is
/// returned, as a sequential build would.
pub(crate) fn build_messages<F>(
    layout: &mut Layout,
    n: usize,
    build: F,
) -> Result<Vec<Message>, ParseError>
where
    F: Fn(usize, &mut Layout) -> Result<Message, ParseError> + Sync,
{
    use rayon::prelude::*;
    /// Messages per task: enough to amortise the task and the merge, small enough to
    /// balance two cores on uneven messages.
    const CHUNK: usize = 512;
    let chunks: Vec<Result<(Vec<Message>, Layout), ParseError>> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut fragment = Layout::default();
            let range = c * CHUNK..n.min((c + 1) * CHUNK);
            let mut messages = Vec::with_capacity(range.len());
            for i in range {
                messages.push(build(i, &mut fragment)?);
            }
            Ok((messages, fragment))
        })
        .collect();
    let mut messages = Vec::with_capacity(n);
    // The exact room: grown by doubling, the containers of a long session would hold a
    // quarter more than they need.
    layout.containers.reserve(
        chunks
            .iter()
            .flatten()
            .map(|(_, fragment)| fragment.containers.len())
            .sum(),
    );
    for chunk in chunks {
        let (mut chunk_messages, fragment) = chunk?;
        let offset = layout.containers.len();
        let shift = |slot: &mut Slot| slot.container += offset;
        for mut c in fragment.containers {
            if let Some(slot) = c.member_of.as_mut() {
                shift(slot);
            }
            layout.containers.push(c);
        }
        for m in &mut chunk_messages {
            for c in &mut m.calls {
                shift(&mut c.slot);
            }
            for r in &mut m.results {
                shift(&mut r.slot);
            }
        }
        messages.append(&mut chunk_messages);
    }
    Ok(messages)
}

/// A node a shallow parse deferred, built to `depth` levels; any other node as it is.
pub(crate) fn expand<'n>(
    src: &str,
    n: &'n json::Node,
    depth: usize,
) -> Result<std::borrow::Cow<'n, json::Node>, ParseError> {
    if matches!(n.kind, json::Kind::Deferred { .. }) {
        json::build_deferred(src, n, depth)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| ParseError::syntax(src, &e))
    } else {
        Ok(std::borrow::Cow::Borrowed(n))
    }
}

/// A call block's `input` as JSON (an empty object when the block has none).
pub(crate) fn call_input(src: &str, block: &json::Node) -> Value {
    block.get("input").map_or_else(
        || Value::Object(serde_json::Map::new()),
        |n| n.to_value(src),
    )
}

/// How a changed result text is written back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextSlot {
    /// Replace the JSON value at this span with a JSON string.
    Value { start: usize, end: usize },
    /// No text value exists (e.g. the key is absent): insert `"key": "..."` right after the
    /// opening brace of the object at `open`.
    InsertMember { open: usize, key: &'static str },
    /// The text is an array of content blocks at `start..end`. The new text goes into the
    /// first text block (its other fields kept) and every other block is removed; with no
    /// text block, the array becomes one `{"type": text_type, "text": ...}` block.
    Blocks {
        start: usize,
        end: usize,
        first_text: Option<TextBlock>,
        text_type: &'static str,
    },
}

/// A text block inside a content array: the block's span and its `text` value's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextBlock {
    pub start: usize,
    pub end: usize,
    pub value_start: usize,
    pub value_end: usize,
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

/// A tool result's text. Results hold most of a transcript's bytes, so a text that is one JSON
/// string in the source is not copied out of it: it is decoded from its span when asked for
/// ([`Transcript::text`]), and nothing holds every decoded text at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// The JSON string token (quotes included) at `src[start..end]`; `escaped` when it holds
    /// a backslash escape.
    Json {
        start: usize,
        end: usize,
        escaped: bool,
    },
    /// A text that is not one string of the source: parts joined, a non-string value
    /// serialized, or none at all (empty).
    Owned(String),
}

impl Text {
    /// The text of a string node, or `None` for any other node.
    pub fn of_node(n: &json::Node) -> Option<Text> {
        match n.kind {
            json::Kind::Str { escaped } => Some(Text::Json {
                start: n.start,
                end: n.end,
                escaped,
            }),
            _ => None,
        }
    }

    pub fn empty() -> Text {
        Text::Owned(String::new())
    }

    /// Is the text empty? (Without decoding it.)
    pub fn is_empty(&self) -> bool {
        match self {
            Text::Json { start, end, .. } => end - start == 2,
            Text::Owned(s) => s.is_empty(),
        }
    }

    /// The text itself: borrowed unless an escape has to be decoded.
    pub fn get<'a>(&'a self, src: &'a str) -> std::borrow::Cow<'a, str> {
        self.key(src).text()
    }

    /// The text's length in characters, counted without decoding it.
    pub fn chars(&self, src: &str) -> usize {
        self.key(src).chars()
    }

    /// What identifies the text without decoding it: equal keys mean equal texts (two equal
    /// texts may still have different keys when their sources escape them differently).
    pub fn key<'a>(&'a self, src: &'a str) -> TextKey<'a> {
        match self {
            Text::Json {
                start,
                end,
                escaped,
            } => TextKey::Json {
                raw: &src[*start..*end],
                escaped: *escaped,
            },
            Text::Owned(s) => TextKey::Plain(s),
        }
    }
}

thread_local! {
    /// [`TextKey::with`]'s buffer.
    static SCRATCH: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// A text by its source form: a JSON string token (quotes included; `escaped` when it holds a
/// backslash escape), or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextKey<'a> {
    Json { raw: &'a str, escaped: bool },
    Plain(&'a str),
}

impl<'a> TextKey<'a> {
    /// The text itself (decoding a JSON token).
    pub fn text(self) -> std::borrow::Cow<'a, str> {
        match self {
            TextKey::Json { raw, escaped } => json::decode_token(raw, escaped),
            TextKey::Plain(s) => std::borrow::Cow::Borrowed(s),
        }
    }

    /// The text's length in characters, counted without decoding it.
    pub fn chars(self) -> usize {
        match self {
            TextKey::Json { raw, .. } => json::token_chars(raw),
            TextKey::Plain(s) => s.chars().count(),
        }
    }

    /// Call `f` with the text, decoded (when it must be) into this thread's scratch buffer
    /// rather than a fresh allocation: a pass over every text allocates nothing per text.
    pub fn with<R>(self, f: impl FnOnce(&str) -> R) -> R {
        let raw = match self {
            TextKey::Json { raw, escaped: true } => raw,
            TextKey::Json { raw, .. } => return f(&raw[1..raw.len() - 1]),
            TextKey::Plain(s) => return f(s),
        };
        // Taken out while in use, so a nested call starts a buffer of its own.
        let mut buf = SCRATCH.with(std::cell::Cell::take);
        buf.clear();
        json::decode_token_into(raw, &mut buf);
        let out = f(&buf);
        SCRATCH.with(|s| s.set(buf));
        out
    }

    /// The length of the source form: an upper bound of the text's length in bytes.
    pub fn source_len(self) -> usize {
        match self {
            TextKey::Json { raw, .. } | TextKey::Plain(raw) => raw.len(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolResult {
    pub id: String,
    pub text: Text,
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
pub struct Transcript<'s> {
    /// The source the transcript was read from (result texts are read from it).
    pub src: &'s str,
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

impl<'s> Transcript<'s> {
    pub fn call(&self, r: BlockRef) -> &Call {
        &self.messages[r.message].calls[r.block]
    }
    pub fn result(&self, r: BlockRef) -> &ToolResult {
        &self.messages[r.message].results[r.block]
    }

    /// A result's text (decoded from the source when it holds escapes).
    pub fn text<'a>(&'a self, r: &'a ToolResult) -> std::borrow::Cow<'a, str> {
        r.text.get(self.src)
    }

    /// The text of the result at `r`.
    pub fn result_text(&self, r: BlockRef) -> std::borrow::Cow<'_, str> {
        self.text(self.result(r))
    }

    /// A result's text length in characters.
    pub fn text_chars(&self, r: &ToolResult) -> usize {
        r.text.chars(self.src)
    }

    /// Call `f` with a result's text, decoded without an allocation of its own (see
    /// [`TextKey::with`]).
    pub fn with_text<R>(&self, r: &ToolResult, f: impl FnOnce(&str) -> R) -> R {
        self.text_key(r).with(f)
    }

    /// A result's text by its source form (see [`Text::key`]).
    pub fn text_key<'a>(&'a self, r: &'a ToolResult) -> TextKey<'a> {
        r.text.key(self.src)
    }

    /// Pair every call with the result carrying its id, wherever it sits. Calls without a
    /// result and results without a call are left out (never judged, never touched).
    /// Duplicate call ids (or result ids) are an error naming both places.
    pub fn pairs(&self) -> Result<Vec<Pair>, ParseError> {
        let n_results: usize = self.messages.iter().map(|m| m.results.len()).sum();
        let mut results: crate::fasthash::FastMap<&str, BlockRef> =
            crate::fasthash::FastMap::default();
        results.reserve(n_results);
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
        let mut seen: crate::fasthash::FastMap<&str, BlockRef> =
            crate::fasthash::FastMap::default();
        seen.reserve(self.tool_calls_total());
        let mut pairs = Vec::with_capacity(n_results);
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

/// Read `src` in the given format, or in the format [`detect`] finds (an error naming
/// `--format` when it cannot tell).
pub fn parse(src: &str, format: Option<Format>) -> Result<Transcript<'_>, ParseError> {
    let root = match format {
        Some(Format::ClaudeCode) => return claude_code::parse(src),
        Some(Format::Codex) => return codex::parse(src),
        Some(Format::Lcc) => return lcc::parse(src),
        Some(f) => return from_document(f, src, &document(src)?),
        None => match detect::sniff(src)? {
            detect::Sniff::Stream(Format::Codex) => return codex::parse(src),
            detect::Sniff::Stream(_) => return claude_code::parse(src),
            detect::Sniff::Document(root) => root,
        },
    };
    // The root is shallow (its lists deferred): lcc's reader builds one message at a time;
    // the other readers get the whole tree.
    match detect::document_format_and_root(src, &root)? {
        (Format::Lcc, root) => lcc::from_node(src, &root),
        (f, _) => from_document(f, src, &document(src)?),
    }
}

fn document(src: &str) -> Result<json::Node, ParseError> {
    json::parse(src).map_err(|e| ParseError::syntax(src, &e))
}

fn from_document<'s>(
    f: Format,
    src: &'s str,
    root: &json::Node,
) -> Result<Transcript<'s>, ParseError> {
    match f {
        Format::Lcc => lcc::from_node(src, root),
        Format::Anthropic => anthropic::from_node(src, root),
        Format::OpenAiChat => openai_chat::from_node(src, root),
        Format::OpenAiResponses => openai_responses::from_node(src, root),
        Format::ClaudeCode => claude_code::parse(src),
        Format::Codex => codex::parse(src),
    }
}

/// Check that a rebuilt text is still well-formed in its format. lcc's own shape is only
/// syntax-checked (nothing is built); the other formats are read again in full.
pub fn validate(src: &str, format: Format) -> Result<(), ParseError> {
    match format {
        Format::Lcc => {
            let start = if src.starts_with('\u{feff}') { 3 } else { 0 };
            json::parse_shallow(src, start, src.len(), 0)
                .map(drop)
                .map_err(|e| ParseError::syntax(src, &e))
        }
        // A rebuilt JSONL stream only changes string values and removes members or whole
        // records of a stream the full reader accepted, so what can still go wrong is a
        // record's syntax: check that, at a fraction of the full reader's cost.
        Format::ClaudeCode | Format::Codex => jsonl::check(src),
        other => parse(src, Some(other)).map(drop),
    }
}

/// Tell the format from the content. An empty, unknown or ambiguous file is an error that
/// names `--format`.
pub fn detect(src: &str) -> Result<Format, ParseError> {
    match detect::sniff(src)? {
        detect::Sniff::Stream(f) => Ok(f),
        detect::Sniff::Document(root) => detect::document_format(src, &root),
    }
}

/// Format-specific edits the generic rebuild cannot know about: Claude Code's record chain
/// re-pointed past removed records, and its `toolUseResult` copies dropped where the result
/// the model sees changed.
pub fn extra_edits(
    t: &Transcript,
    _src: &str,
    removed_messages: &[usize],
    decisions: &[crate::decide::Decision],
) -> Vec<Edit> {
    match (&t.layout.chain, t.format) {
        (Some(chain), Format::ClaudeCode) => {
            claude_code::extra_edits(t, chain, removed_messages, decisions)
        }
        _ => Vec::new(),
    }
}

/// True when a string is empty or only (Unicode) whitespace.
pub fn is_blank(s: &str) -> bool {
    s.chars().all(char::is_whitespace)
}
