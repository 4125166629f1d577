//! A span-keeping JSON reader and a byte splicer.
//!
//! `lcc` never re-serialises what it did not change: it reads the input into a tree of
//! [`Node`]s that remember where each value starts and ends in the source, decides, and then
//! writes the source back with a handful of [`Edit`]s spliced in. Untouched bytes (key order,
//! whitespace, `1e3`, `"\u00e9"`, lone surrogate escapes) come out exactly as they went in.
//!
//! The reader is strict JSON (RFC 8259) plus the three literals Python's `json` module also
//! accepts (`NaN`, `Infinity`, `-Infinity`). Strings are decoded lazily: most result payloads
//! are only ever hashed or copied, so the tree keeps spans, not owned text.

use std::borrow::Cow;
use std::fmt;

/// One JSON value with its byte span `[start, end)` in the source.
#[derive(Debug, Clone)]
pub struct Node {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Null,
    Bool(bool),
    Number,
    /// A string; `escaped` says whether the raw text holds a backslash escape.
    Str {
        escaped: bool,
    },
    Array(Vec<Node>),
    Object(Vec<Member>),
    /// A container that [`parse_shallow`] validated but did not build; parse its span with
    /// [`parse_range`] when needed.
    Deferred {
        array: bool,
    },
}

/// One `"key": value` member; its span runs from the key's opening quote to the value's end.
#[derive(Debug, Clone)]
pub struct Member {
    pub key: String,
    pub key_start: usize,
    pub value: Node,
}

impl Member {
    pub fn start(&self) -> usize {
        self.key_start
    }
    pub fn end(&self) -> usize {
        self.value.end
    }
}

/// Where and why the reader stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = &src.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let col = src
        .get(line_start..offset)
        .map_or(offset - line_start, |s| s.chars().count())
        + 1;
    (line, col)
}

const MAX_DEPTH: usize = 1024;

/// Parse one JSON value that spans `src[from..to]` (surrounding whitespace allowed).
pub fn parse_range(src: &str, from: usize, to: usize) -> Result<Node, SyntaxError> {
    parse_shallow(src, from, to, usize::MAX)
}

/// Like [`parse_range`], but containers nested deeper than `build_depth` (the top value is at
/// depth 0) are validated and returned as [`Kind::Deferred`] instead of being built. This keeps
/// memory flat when a large array is then processed one element at a time.
pub fn parse_shallow(
    src: &str,
    from: usize,
    to: usize,
    build_depth: usize,
) -> Result<Node, SyntaxError> {
    parse_span(src, from, to, build_depth, false)
}

/// Build a node that an earlier parse returned as [`Kind::Deferred`] (so its span is known
/// to be valid JSON), as [`parse_shallow`] would, skipping the checks that parse already made.
pub fn build_deferred(src: &str, node: &Node, build_depth: usize) -> Result<Node, SyntaxError> {
    let trusted = matches!(node.kind, Kind::Deferred { .. });
    parse_span(src, node.start, node.end, build_depth, trusted)
}

/// The one value in `src[from..to]`; `trusted` skips the checks a validating parse of the
/// same span has already made.
fn parse_span(
    src: &str,
    from: usize,
    to: usize,
    build_depth: usize,
    trusted: bool,
) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        s: &src[..to],
        b: &src.as_bytes()[..to],
        pos: from,
        depth: 0,
        build_depth,
        trusted,
    };
    p.ws();
    let node = p.value()?;
    p.ws();
    if p.pos < to {
        return Err(p.err("unexpected data after the JSON value"));
    }
    Ok(node)
}

/// Parse the one JSON value that starts at `from` (after optional whitespace), whatever
/// follows it: the node's `end` says where it stopped. For streams of concatenated values
/// (JSONL, or pretty-printed records spanning lines).
pub fn parse_value_at(src: &str, from: usize) -> Result<Node, SyntaxError> {
    parse_value_at_shallow(src, from, usize::MAX)
}

/// [`parse_value_at`] that defers containers deeper than `build_depth` (see [`parse_shallow`]).
pub fn parse_value_at_shallow(
    src: &str,
    from: usize,
    build_depth: usize,
) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        s: src,
        b: src.as_bytes(),
        pos: from,
        depth: 0,
        build_depth,
        trusted: false,
    };
    p.ws();
    p.value()
}

/// Parse a whole document.
pub fn parse(src: &str) -> Result<Node, SyntaxError> {
    let start = if src.starts_with('\u{feff}') { 3 } else { 0 };
    parse_range(src, start, src.len())
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    build_depth: usize,
    /// The span was already validated (a [`Kind::Deferred`] node being built): skip the
    /// checks for raw control characters in strings, the costliest part of validation.
    trusted: bool,
}

impl Parser<'_> {
    fn err(&self, msg: &str) -> SyntaxError {
        SyntaxError {
            offset: self.pos,
            message: msg.to_string(),
        }
    }

    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if c == b' ' || c == b'\n' || c == b'\t' || c == b'\r' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        let Some(&c) = self.b.get(self.pos) else {
            return Err(self.err("unexpected end of input, expected a value"));
        };
        match c {
            b'{' | b'[' if self.depth >= self.build_depth => {
                self.skip_container()?;
                Ok(Node {
                    start,
                    end: self.pos,
                    kind: Kind::Deferred { array: c == b'[' },
                })
            }
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => {
                let escaped = self.string()?;
                Ok(Node {
                    start,
                    end: self.pos,
                    kind: Kind::Str { escaped },
                })
            }
            b't' => self.literal("true", Kind::Bool(true)),
            b'f' => self.literal("false", Kind::Bool(false)),
            b'n' => self.literal("null", Kind::Null),
            b'N' => self.literal("NaN", Kind::Number),
            b'I' => self.literal("Infinity", Kind::Number),
            b'-' if self.b.get(self.pos + 1) == Some(&b'I') => {
                self.literal("-Infinity", Kind::Number)
            }
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &str, kind: Kind) -> Result<Node, SyntaxError> {
        let start = self.pos;
        if self.b[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(Node {
                start,
                end: self.pos,
                kind,
            })
        } else {
            Err(self.err("expected a JSON value"))
        }
    }

    fn number(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        if self.b.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.b.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while matches!(self.b.get(self.pos), Some(b'0'..=b'9')) {
                    self.pos += 1;
                }
            }
            _ => return Err(self.err("invalid number")),
        }
        if self.b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !matches!(self.b.get(self.pos), Some(b'0'..=b'9')) {
                return Err(self.err("invalid number: digit expected after '.'"));
            }
            while matches!(self.b.get(self.pos), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.b.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.b.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !matches!(self.b.get(self.pos), Some(b'0'..=b'9')) {
                return Err(self.err("invalid number: digit expected in exponent"));
            }
            while matches!(self.b.get(self.pos), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Number,
        })
    }

    /// Scan a string starting at the opening quote; returns whether it holds escapes.
    fn string(&mut self) -> Result<bool, SyntaxError> {
        self.pos += 1;
        let mut escaped = false;
        loop {
            // Jump to the next quote, backslash or raw control character, eight bytes at a
            // time: tool outputs escape a newline every few dozen bytes, too often for a
            // search that stops at each escape and then re-checks the run it skipped.
            self.pos = crate::json_check::special(self.b, self.pos);
            let Some(&c) = self.b.get(self.pos) else {
                return Err(self.err("unterminated string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    return Ok(escaped);
                }
                b'\\' => {
                    escaped = true;
                    match self.b.get(self.pos + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 2;
                        }
                        Some(b'u') => {
                            let hex = self.b.get(self.pos + 2..self.pos + 6);
                            if hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                self.pos += 6;
                            } else {
                                return Err(self.err("invalid \\u escape in string"));
                            }
                        }
                        _ => return Err(self.err("invalid escape in string")),
                    }
                }
                // A trusted span was validated already: its raw controls cannot be there.
                0..=0x1f if !self.trusted => {
                    return Err(self.err("control character inside a string"))
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Validate a whole array or object without building it.
    fn skip_container(&mut self) -> Result<(), SyntaxError> {
        let saved = self.build_depth;
        // Everything below is skipped: validate with a stack of closers instead of recursion.
        let mut stack: Vec<u8> = Vec::new();
        loop {
            self.ws();
            let Some(&c) = self.b.get(self.pos) else {
                return Err(self.err("unexpected end of input inside a container"));
            };
            match c {
                b'[' | b'{' => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(self.err("nesting too deep"));
                    }
                    stack.push(if c == b'[' { b']' } else { b'}' });
                    self.pos += 1;
                    self.ws();
                    if self.b.get(self.pos) == stack.last() {
                        self.pos += 1;
                        stack.pop();
                        if stack.is_empty() {
                            break;
                        }
                        self.after_item(&mut stack)?;
                        if stack.is_empty() {
                            break;
                        }
                        continue;
                    }
                    if c == b'{' {
                        self.key_colon()?;
                    }
                    continue;
                }
                b'"' => {
                    self.string()?;
                }
                b't' => drop(self.literal("true", Kind::Null)?),
                b'f' => drop(self.literal("false", Kind::Null)?),
                b'n' => drop(self.literal("null", Kind::Null)?),
                b'N' => drop(self.literal("NaN", Kind::Null)?),
                b'I' => drop(self.literal("Infinity", Kind::Null)?),
                b'-' if self.b.get(self.pos + 1) == Some(&b'I') => {
                    drop(self.literal("-Infinity", Kind::Null)?);
                }
                b'-' | b'0'..=b'9' => drop(self.number()?),
                _ => return Err(self.err("expected a JSON value")),
            }
            self.after_item(&mut stack)?;
            if stack.is_empty() {
                break;
            }
        }
        self.build_depth = saved;
        Ok(())
    }

    /// After a value inside a skipped container: a comma (then, in an object, the next key)
    /// or closers.
    fn after_item(&mut self, stack: &mut Vec<u8>) -> Result<(), SyntaxError> {
        loop {
            self.ws();
            let Some(&closer) = stack.last() else {
                return Ok(());
            };
            match self.b.get(self.pos) {
                Some(b',') => {
                    self.pos += 1;
                    if closer == b'}' {
                        self.ws();
                        self.key_colon()?;
                    }
                    return Ok(());
                }
                Some(&c) if c == closer => {
                    self.pos += 1;
                    stack.pop();
                    if stack.is_empty() {
                        return Ok(());
                    }
                }
                _ => {
                    return Err(self.err(if closer == b']' {
                        "expected ',' or ']' in array"
                    } else {
                        "expected ',' or '}' in object"
                    }))
                }
            }
        }
    }

    fn key_colon(&mut self) -> Result<(), SyntaxError> {
        self.ws();
        if self.b.get(self.pos) != Some(&b'"') {
            return Err(self.err("expected a string key in object"));
        }
        self.string()?;
        self.ws();
        if self.b.get(self.pos) != Some(&b':') {
            return Err(self.err("expected ':' after object key"));
        }
        self.pos += 1;
        Ok(())
    }

    fn enter(&mut self) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        Ok(())
    }

    fn array(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.b.get(self.pos) == Some(&b']') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                items.push(self.value()?);
                self.ws();
                match self.b.get(self.pos) {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or ']' in array")),
                }
            }
        }
        self.depth -= 1;
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Array(items),
        })
    }

    fn object(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        self.enter()?;
        self.pos += 1;
        let mut members = Vec::new();
        self.ws();
        if self.b.get(self.pos) == Some(&b'}') {
            self.pos += 1;
        } else {
            loop {
                self.ws();
                if self.b.get(self.pos) != Some(&b'"') {
                    return Err(self.err("expected a string key in object"));
                }
                let key_start = self.pos;
                let escaped = self.string()?;
                let key = decode_token(&self.s[key_start..self.pos], escaped).into_owned();
                self.ws();
                if self.b.get(self.pos) != Some(&b':') {
                    return Err(self.err("expected ':' after object key"));
                }
                self.pos += 1;
                self.ws();
                let value = self.value()?;
                members.push(Member {
                    key,
                    key_start,
                    value,
                });
                self.ws();
                match self.b.get(self.pos) {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or '}' in object")),
                }
            }
        }
        self.depth -= 1;
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Object(members),
        })
    }
}

/// The number of characters of a raw string token's decoded text (see [`decode_token`]),
/// counted without decoding: every character's first byte, less what escapes add (`\n` is
/// two bytes for one character, `\u00e9` six, a surrogate pair twelve).
pub fn token_chars(raw: &str) -> usize {
    let mut chars = raw[1..raw.len() - 1].chars().count();
    let inner = &raw.as_bytes()[1..raw.len() - 1];
    let mut i = 0;
    while let Some(skip) = memchr::memchr(b'\\', &inner[i..]) {
        i += skip;
        if inner[i + 1] != b'u' {
            chars -= 1;
            i += 2;
            continue;
        }
        let hi = hex4(&inner[i + 2..i + 6]);
        i += 6;
        chars -= 5;
        if (0xD800..0xDC00).contains(&hi)
            && inner.get(i) == Some(&b'\\')
            && inner.get(i + 1) == Some(&b'u')
        {
            let lo = hex4(&inner[i + 2..i + 6]);
            if (0xDC00..0xE000).contains(&lo) {
                // The pair's second half adds no character.
                chars -= 6;
                i += 6;
            }
        }
    }
    chars
}

/// Decode a raw string token (with its quotes). Lone surrogates become U+FFFD.
pub fn decode_token(raw: &str, escaped: bool) -> Cow<'_, str> {
    // `raw` is a whole string token, quotes included (quotes are ASCII, so these are char
    // boundaries).
    let inner = &raw[1..raw.len() - 1];
    if !escaped {
        return Cow::Borrowed(inner);
    }
    let mut out = String::with_capacity(inner.len());
    decode_escaped_into(inner, &mut out);
    Cow::Owned(out)
}

/// Append the decoded text of a raw string token (with its quotes) to `out`.
pub fn decode_token_into(raw: &str, out: &mut String) {
    decode_escaped_into(&raw[1..raw.len() - 1], out);
}

/// Append the decoded text of a string token's inside to `out`.
fn decode_escaped_into(inner: &str, out: &mut String) {
    out.reserve(inner.len());
    let b = inner.as_bytes();
    let mut i = 0;
    let mut run = 0;
    while let Some(skip) = memchr::memchr(b'\\', &b[i..]) {
        i += skip;
        out.push_str(&inner[run..i]);
        let e = b[i + 1];
        i += 2;
        match e {
            b'n' => out.push('\n'),
            b't' => out.push('\t'),
            b'r' => out.push('\r'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'u' => {
                let hi = hex4(&b[i..i + 4]);
                i += 4;
                if (0xD800..0xDC00).contains(&hi)
                    && b.get(i) == Some(&b'\\')
                    && b.get(i + 1) == Some(&b'u')
                {
                    let lo = hex4(&b[i + 2..i + 6]);
                    if (0xDC00..0xE000).contains(&lo) {
                        let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                        i += 6;
                    } else {
                        out.push('\u{fffd}');
                    }
                } else {
                    out.push(char::from_u32(hi).unwrap_or('\u{fffd}'));
                }
            }
            other => out.push(other as char),
        }
        run = i;
    }
    out.push_str(&inner[run..]);
}

fn hex4(h: &[u8]) -> u32 {
    h.iter().fold(0, |acc, &c| {
        acc * 16
            + match c {
                b'0'..=b'9' => u32::from(c - b'0'),
                b'a'..=b'f' => u32::from(c - b'a' + 10),
                _ => u32::from(c - b'A' + 10),
            }
    })
}

impl Node {
    pub fn raw<'s>(&self, src: &'s str) -> &'s str {
        &src[self.start..self.end]
    }

    /// The decoded string, if this is a string.
    pub fn as_str<'s>(&self, src: &'s str) -> Option<Cow<'s, str>> {
        match self.kind {
            Kind::Str { escaped } => Some(decode_token(&src[self.start..self.end], escaped)),
            _ => None,
        }
    }

    pub fn members(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The first member with this key (JSON allows duplicates; the first one wins here).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.members()?
            .iter()
            .find(|m| m.key == key)
            .map(|m| &m.value)
    }

    pub fn member_index(&self, key: &str) -> Option<usize> {
        self.members()?.iter().position(|m| m.key == key)
    }

    pub fn is_null(&self) -> bool {
        matches!(self.kind, Kind::Null)
    }

    pub fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Number => "a number",
            Kind::Str { .. } => "a string",
            Kind::Array(_) | Kind::Deferred { array: true } => "an array",
            Kind::Object(_) | Kind::Deferred { array: false } => "an object",
        }
    }

    /// Convert to a `serde_json::Value` (for tool inputs). Numbers go through serde_json;
    /// the rare value serde cannot read (NaN, a huge exponent) becomes its raw text.
    pub fn to_value(&self, src: &str) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            Kind::Null => Value::Null,
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Number => serde_json::from_str::<serde_json::Number>(self.raw(src))
                .map_or_else(|_| Value::String(self.raw(src).to_string()), Value::Number),
            Kind::Str { .. } => Value::String(self.as_str(src).unwrap_or_default().into_owned()),
            Kind::Array(items) => Value::Array(items.iter().map(|n| n.to_value(src)).collect()),
            Kind::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.clone(), m.value.to_value(src)))
                    .collect(),
            ),
            Kind::Deferred { .. } => {
                parse_range(src, self.start, self.end).map_or(Value::Null, |n| n.to_value(src))
            }
        }
    }
}

/// Replace `src[start..end]` with `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// Edits sorted by position, ready for [`spliced`]. An edit nested inside (or overlapping) an
/// earlier, wider one is left out (the wider one wins), so a removed message takes its removed
/// blocks with it.
pub fn in_order(mut edits: Vec<Edit>) -> Vec<Edit> {
    edits.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut pos = 0;
    edits.retain(|e| {
        let keep = e.start >= pos;
        if keep {
            pos = e.end;
        }
        keep
    });
    edits
}

/// The pieces of `src[range]` with `edits` (from [`in_order`], all inside `range`) applied, in
/// order: the text is their concatenation, which need never be held whole.
pub fn spliced<'a>(
    src: &'a str,
    range: std::ops::Range<usize>,
    edits: &'a [Edit],
) -> impl Iterator<Item = &'a str> + 'a {
    let starts = std::iter::once(range.start).chain(edits.iter().map(|e| e.end));
    let ends = edits
        .iter()
        .map(|e| e.start)
        .chain(std::iter::once(range.end));
    let kept = starts.zip(ends).map(move |(a, b)| &src[a..b]);
    let new = edits
        .iter()
        .map(|e| e.text.as_str())
        .chain(std::iter::once(""));
    kept.zip(new)
        .flat_map(|(k, n)| [k, n])
        .filter(|p| !p.is_empty())
}

/// [`spliced`]'s text, whole. The exact size is reserved up front: the output of a long
/// session is tens of MB, and a buffer grown by doubling would hold far more than it needs.
pub fn spliced_string(src: &str, range: std::ops::Range<usize>, edits: &[Edit]) -> String {
    let removed: usize = edits.iter().map(|e| e.end - e.start).sum();
    let added: usize = edits.iter().map(|e| e.text.len()).sum();
    let mut out = String::with_capacity(range.len() - removed + added);
    out.extend(spliced(src, range, edits));
    out
}

/// Edits that delete the children at `remove` (sorted, unique indices) from a container whose
/// children have the given spans, keeping separators and indentation tidy. Removing every child
/// empties the container to `[]` / `{}` (`open`..`close` are the bracket positions).
pub fn delete_children(
    spans: &[(usize, usize)],
    remove: &[usize],
    open: usize,
    close: usize,
) -> Vec<Edit> {
    let mut edits = Vec::new();
    if remove.is_empty() {
        return edits;
    }
    if remove.len() == spans.len() {
        edits.push(Edit {
            start: open + 1,
            end: close,
            text: String::new(),
        });
        return edits;
    }
    let removed = |i: usize| remove.binary_search(&i).is_ok();
    let mut i = 0;
    while i < spans.len() {
        if !removed(i) {
            i += 1;
            continue;
        }
        let run_start = i;
        while i < spans.len() && removed(i) {
            i += 1;
        }
        let run_end = i; // exclusive
        if run_start > 0 {
            // ", a, b" after a kept child
            edits.push(Edit {
                start: spans[run_start - 1].1,
                end: spans[run_end - 1].1,
                text: String::new(),
            });
        } else {
            // "a, b, " before the first kept child
            edits.push(Edit {
                start: spans[run_start].0,
                end: spans[run_end].0,
                text: String::new(),
            });
        }
    }
    edits
}

/// Write a JSON string literal; `ascii` escapes every non-ASCII character as Python's
/// `json.dumps` does by default.
pub fn quote(s: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s, ascii);
    out
}

/// [`quote`], appended to `out`.
pub fn quote_into(out: &mut String, s: &str, ascii: bool) {
    out.reserve(s.len() + 2);
    out.push('"');
    escape_into(out, s, ascii);
    out.push('"');
}

/// `s` as it reads inside a JSON string (what [`quote`] writes between the quotes), appended
/// to `out`.
pub fn escape_into(out: &mut String, s: &str, ascii: bool) {
    if !ascii {
        // Only `"`, `\` and control characters change, all ASCII: copy the runs between them.
        let mut run = 0;
        for (i, b) in s.bytes().enumerate() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                out.push_str(&s[run..i]);
                match b {
                    b'"' => out.push_str("\\\""),
                    b'\\' => out.push_str("\\\\"),
                    b'\n' => out.push_str("\\n"),
                    b'\r' => out.push_str("\\r"),
                    b'\t' => out.push_str("\\t"),
                    0x08 => out.push_str("\\b"),
                    0x0c => out.push_str("\\f"),
                    _ => out.push_str(&format!("\\u{b:04x}")),
                }
                run = i + 1;
            }
        }
        out.push_str(&s[run..]);
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ascii && !c.is_ascii() => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// Serialise a value the way Python's `json.dumps` does: separators `", "` and `": "`,
/// keys in their order, non-ASCII kept or `\u`-escaped.
pub fn py_dumps(v: &serde_json::Value, ascii: bool) -> String {
    let mut out = String::new();
    py_write(v, ascii, &mut out);
    out
}

/// [`py_dumps`] with object keys sorted (Python's `json.dumps(..., sort_keys=True)`), so that
/// two inputs that differ only in key order serialise the same.
pub fn py_dumps_sorted(v: &serde_json::Value, ascii: bool) -> String {
    let mut out = String::new();
    py_write_sorted(v, ascii, &mut out);
    out
}

fn py_write_sorted(v: &serde_json::Value, ascii: bool, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_write_sorted(x, ascii, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                quote_into(out, k, ascii);
                out.push_str(": ");
                py_write_sorted(&m[k], ascii, out);
            }
            out.push('}');
        }
        scalar => py_write(scalar, ascii, out),
    }
}

fn py_write(v: &serde_json::Value, ascii: bool, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&py_number(n)),
        Value::String(s) => quote_into(out, s, ascii),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_write(x, ascii, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                quote_into(out, k, ascii);
                out.push_str(": ");
                py_write(x, ascii, out);
            }
            out.push('}');
        }
    }
}

/// Python's float repr differs from serde's in exponent style (`1e-05` vs `1e-5`).
fn py_number(n: &serde_json::Number) -> String {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(0.0);
        if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
            return format!("{f:.1}");
        }
        let s = format!("{f:e}");
        // Rust: 1.5e-7 / 1e16 ; Python: 1.5e-07 / 1e+16 (only when repr uses an exponent)
        if f.abs() >= 1e16 || (f != 0.0 && f.abs() < 1e-4) {
            if let Some((mant, exp)) = s.split_once('e') {
                let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
                return format!("{mant}e{sign}{digits:0>2}");
            }
        }
        return n.to_string();
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Characters counted on the raw token equal those of the decoded text, whatever the
    /// escapes: every short escape, BMP and astral `\u` escapes, lone and reversed surrogates,
    /// multi-byte UTF-8 left raw.
    #[test]
    fn token_chars_counts_the_decoded_text() {
        let tokens = [
            r#""""#,
            r#""plain ascii""#,
            r#""a\nb\tc\rd\\e\"f\/g\bh\fi""#,
            r#""\u00e9t\u00E9 \u6771\u4eac""#,
            r#""\ud83d\ude00 pair""#,
            r#""\ud83d lone high""#,
            r#""\ude00 lone low""#,
            r#""\ude00\ud83d reversed""#,
            r#""\ud83d\u0041 high then BMP""#,
            r#""\ud83d\n high then short""#,
            "\"déjà vu — 東京 😀\"",
            "\"mixed 😀\\n\\u00e9 東\\\\京\"",
        ];
        for raw in tokens {
            assert_eq!(
                token_chars(raw),
                decode_token(raw, raw.contains('\\')).chars().count(),
                "{raw}"
            );
        }
        // Every character serde_json escapes, and some it leaves raw.
        let text: String = (0u32..0x3000)
            .step_by(7)
            .filter_map(char::from_u32)
            .chain("😀𝄞\u{10ffff}".chars())
            .collect();
        for ascii in [false, true] {
            let raw = quote(&text, ascii);
            assert_eq!(token_chars(&raw), text.chars().count(), "ascii: {ascii}");
        }
    }

    /// A deferred node builds to the same tree as parsing its span afresh; a node that is
    /// not deferred is still fully checked.
    #[test]
    fn build_deferred_is_parse_shallow() {
        let src = r#"[{"a": "x\ny", "b": [1, {"c": null}]}, [true, "\u00e9"]]"#;
        let root = parse_shallow(src, 0, src.len(), 1).unwrap();
        for n in root.items().unwrap() {
            assert!(matches!(n.kind, Kind::Deferred { .. }));
            let built = build_deferred(src, n, usize::MAX).unwrap();
            let fresh = parse_shallow(src, n.start, n.end, usize::MAX).unwrap();
            assert_eq!(built.to_value(src), fresh.to_value(src));
            assert_eq!((built.start, built.end), (fresh.start, fresh.end));
        }
        // A built node's span is checked again: the same span over bytes with a raw
        // control character fails.
        let valid = "[\"a b\"]";
        let raw = "[\"a\u{1}b\"]";
        let whole = parse_shallow(valid, 0, valid.len(), usize::MAX).unwrap();
        assert!(build_deferred(valid, &whole, usize::MAX).is_ok());
        assert!(build_deferred(raw, &whole, usize::MAX).is_err());
    }

    #[test]
    fn spans_and_strings() {
        let src = r#" {"a": [1, 2.50, 1e3], "b\u00e9": "x\ny\ud83d\ude00", "c": "\udc00"} "#;
        let n = parse(src).unwrap();
        let m = n.members().unwrap();
        assert_eq!(m[0].key, "a");
        assert_eq!(m[1].key, "bé");
        assert_eq!(m[0].value.items().unwrap()[1].raw(src), "2.50");
        assert_eq!(m[1].value.as_str(src).unwrap(), "x\ny😀");
        assert_eq!(m[2].value.as_str(src).unwrap(), "\u{fffd}");
    }

    #[test]
    fn errors_have_offsets() {
        let e = parse("[1, 2,]").unwrap_err();
        assert_eq!(e.offset, 6);
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert!(parse("[1] x").is_err());
        assert!(parse("\"a\u{1}\"").is_err());
        assert!(parse("[NaN, -Infinity]").is_ok());
    }

    #[test]
    fn shallow_defers_and_validates() {
        let src = r#"{"a": [1, {"b": [2, 3]}, "x"], "m": {"k": [true, null, -1.5e3, "q\"]"]}}"#;
        let n = parse_shallow(src, 0, src.len(), 1).unwrap();
        let a = n.get("a").unwrap();
        assert!(matches!(a.kind, Kind::Deferred { array: true }));
        assert_eq!(a.raw(src), r#"[1, {"b": [2, 3]}, "x"]"#);
        let full = parse_range(src, a.start, a.end).unwrap();
        assert_eq!(full.items().unwrap().len(), 3);
        let n1 = parse_shallow(src, 0, src.len(), 2).unwrap();
        let items = n1.get("a").unwrap().items().unwrap();
        assert!(matches!(items[1].kind, Kind::Deferred { array: false }));
        for bad in [
            r#"{"a": [1, 2}"#,
            r#"{"a": {"b" 1}}"#,
            r#"{"a": [1,]}"#,
            r#"{"a": {"b": 1,}}"#,
            r#"{"a": [[]"#,
        ] {
            let e = parse_shallow(bad, 0, bad.len(), 0).unwrap_err();
            let f = parse(bad).unwrap_err();
            assert_eq!(e.offset, f.offset, "{bad}");
        }
        assert!(parse_shallow("[[], {}, [{}]]", 0, 14, 0).is_ok());
    }

    #[test]
    fn delete_children_keeps_layout() {
        let src = "[\n  1,\n  2,\n  3\n]";
        let n = parse(src).unwrap();
        let spans: Vec<_> = n
            .items()
            .unwrap()
            .iter()
            .map(|c| (c.start, c.end))
            .collect();
        let cases = [
            (vec![0], "[\n  2,\n  3\n]"),
            (vec![1], "[\n  1,\n  3\n]"),
            (vec![2], "[\n  1,\n  2\n]"),
            (vec![0, 2], "[\n  2\n]"),
            (vec![0, 1, 2], "[]"),
        ];
        for (remove, want) in cases {
            let edits = delete_children(&spans, &remove, n.start, n.end - 1);
            let out = spliced_string(src, 0..src.len(), &in_order(edits));
            assert_eq!(out, want, "removing {remove:?}");
        }
    }

    #[test]
    fn python_dumps() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"a": [1, 2.5, 1e-5, 1e20], "é": true}"#).unwrap();
        assert_eq!(
            py_dumps(&v, false),
            r#"{"a": [1, 2.5, 1e-05, 1e+20], "é": true}"#
        );
        assert_eq!(
            py_dumps(&v, true),
            r#"{"a": [1, 2.5, 1e-05, 1e+20], "\u00e9": true}"#
        );
        assert_eq!(quote("😀", true), r#""\ud83d\ude00""#);
    }

    #[test]
    fn quoting_matches_serde_json() {
        let texts = [
            "",
            "plain",
            "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f} é 東京 😀",
            "\"\"",
            "end\\",
        ];
        for t in texts {
            assert_eq!(quote(t, false), serde_json::to_string(t).unwrap(), "{t:?}");
        }
    }
}
