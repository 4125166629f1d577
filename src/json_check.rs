//! A push (incremental) JSON syntax checker: the bytes of one document go in chunk by chunk,
//! and nothing is kept but a small state and the stack of open containers.
//!
//! It accepts exactly what [`json::parse_shallow`](crate::json::parse_shallow) accepts over a
//! whole document (after a leading BOM, as [`json::parse`](crate::json::parse) skips it):
//! strict JSON plus `NaN`, `Infinity` and `-Infinity`, at most 1024 nested containers, lone
//! surrogate escapes allowed (escapes are checked for shape, not decoded), one value and
//! nothing but whitespace after it. Its errors carry the same absolute byte offset and message
//! as the reader's for the same bytes, so a check of streamed output reports what a check of
//! the whole text in memory would.
//!
//! Chunks may split anything (an escape, a literal, a number, a multi-byte character): the
//! state says where the previous chunk stopped. String content, most of a transcript's bytes,
//! is skipped eight bytes at a time (one pass that stops at a quote, a backslash or a control
//! character), and whole escapes are taken in place unless a chunk's end cuts them.

use crate::json::SyntaxError;

/// Containers nested deeper than this are an error, as in the reader.
const MAX_DEPTH: usize = 1024;

const BOM: [u8; 3] = [0xef, 0xbb, 0xbf];

/// Where the previous byte left the check. Offsets are absolute stream offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start: `n` bytes of a UTF-8 byte order mark seen so far.
    Bom(u8),
    /// A value is due (whitespace first is fine).
    Value,
    /// Just after `[`: `]` or a first value.
    ArrayFirst,
    /// Just after `{`: `}` or a first key.
    ObjectFirst,
    /// After a `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or a closer in a container, only whitespace at the top.
    After,
    /// Inside a string (a key when `key`).
    Str { key: bool },
    /// After the backslash at `at`.
    Escape { key: bool, at: usize },
    /// After `\u` (the backslash at `at`) and `n` hex digits.
    Unicode { key: bool, at: usize, n: u8 },
    /// Inside the literal `word` that starts at `at`, `matched` bytes of it seen.
    Literal {
        word: &'static [u8],
        matched: u8,
        at: usize,
    },
    /// After a `-` at `at`: `Infinity` or a number's digits.
    Minus { at: usize },
    /// A number with its integer part `0`.
    Zero,
    /// In a number's integer digits (not starting with `0`).
    Int,
    /// After a number's `.`.
    Dot,
    /// In a number's fraction digits.
    Frac,
    /// After a number's `e`/`E`.
    Exp,
    /// After the exponent's sign.
    ExpSign,
    /// In the exponent's digits.
    ExpDigits,
}

/// Checks one JSON document fed in chunks.
#[derive(Debug, Clone)]
pub struct Checker {
    state: State,
    /// The closers of the open containers, innermost last.
    stack: Vec<u8>,
    /// Stream offset of the current chunk's first byte.
    base: usize,
    /// The first error; once set, the checker stops reading.
    error: Option<SyntaxError>,
}

impl Default for Checker {
    fn default() -> Self {
        Self::new()
    }
}

fn err(offset: usize, message: &str) -> SyntaxError {
    SyntaxError {
        offset,
        message: message.to_string(),
    }
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\t' | b'\r')
}

impl Checker {
    /// A checker expecting one JSON document; a leading UTF-8 BOM is skipped.
    pub fn new() -> Checker {
        Checker {
            state: State::Bom(0),
            stack: Vec::new(),
            base: 0,
            error: None,
        }
    }

    /// How many bytes have been fed so far.
    pub fn offset(&self) -> usize {
        self.base
    }

    /// The first syntax error met so far, if any.
    pub fn error(&self) -> Option<&SyntaxError> {
        self.error.as_ref()
    }

    /// Check the next bytes of the document. After an error every later call returns that
    /// same (first) error and reads nothing.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), SyntaxError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        match self.run(chunk) {
            Ok(()) => {
                self.base += chunk.len();
                Ok(())
            }
            Err(e) => {
                self.error = Some(e.clone());
                Err(e)
            }
        }
    }

    /// End of input: a document that is not complete is an error (at the end's offset, or
    /// where the reader would put it, e.g. a truncated literal's start).
    pub fn finish(self) -> Result<(), SyntaxError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let end = self.base;
        let in_array = self.stack.last() == Some(&b']');
        match self.state {
            State::Bom(0) => Err(err(end, "unexpected end of input, expected a value")),
            // A cut-short BOM is other bytes at offset 0, where no value starts.
            State::Bom(_) => Err(err(0, "expected a JSON value")),
            State::Value if self.stack.is_empty() => {
                Err(err(end, "unexpected end of input, expected a value"))
            }
            State::Value | State::ArrayFirst => {
                Err(err(end, "unexpected end of input inside a container"))
            }
            State::ObjectFirst | State::Key => Err(err(end, "expected a string key in object")),
            State::Colon => Err(err(end, "expected ':' after object key")),
            State::Str { .. } => Err(err(end, "unterminated string")),
            State::Escape { at, .. } => Err(err(at, "invalid escape in string")),
            State::Unicode { at, .. } => Err(err(at, "invalid \\u escape in string")),
            State::Literal { at, .. } => Err(err(at, "expected a JSON value")),
            State::Minus { .. } => Err(err(end, "invalid number")),
            State::Dot => Err(err(end, "invalid number: digit expected after '.'")),
            State::Exp | State::ExpSign => {
                Err(err(end, "invalid number: digit expected in exponent"))
            }
            State::After | State::Zero | State::Int | State::Frac | State::ExpDigits => {
                if self.stack.is_empty() {
                    Ok(())
                } else if in_array {
                    Err(err(end, "expected ',' or ']' in array"))
                } else {
                    Err(err(end, "expected ',' or '}' in object"))
                }
            }
        }
    }

    /// Open a container at `at`.
    fn open(&mut self, closer: u8, at: usize) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(err(at, "nesting too deep"));
        }
        self.stack.push(closer);
        self.state = if closer == b']' {
            State::ArrayFirst
        } else {
            State::ObjectFirst
        };
        Ok(())
    }

    /// The state after the first byte `c` (at `at`) of a value.
    fn start_value(&mut self, c: u8, at: usize) -> Result<(), SyntaxError> {
        self.state = match c {
            b'{' => return self.open(b'}', at),
            b'[' => return self.open(b']', at),
            b'"' => State::Str { key: false },
            b't' | b'f' | b'n' | b'N' | b'I' => State::Literal {
                word: match c {
                    b't' => b"true",
                    b'f' => b"false",
                    b'n' => b"null",
                    b'N' => b"NaN",
                    _ => b"Infinity",
                },
                matched: 1,
                at,
            },
            b'-' => State::Minus { at },
            b'0' => State::Zero,
            b'1'..=b'9' => State::Int,
            _ => return Err(err(at, "expected a JSON value")),
        };
        Ok(())
    }

    fn run(&mut self, chunk: &[u8]) -> Result<(), SyntaxError> {
        let base = self.base;
        let len = chunk.len();
        let mut i = 0;
        while i < len {
            match self.state {
                State::Str { key } => {
                    i = self.string(chunk, i, key)?;
                    continue;
                }
                State::Bom(n) => {
                    let c = chunk[i];
                    if c == BOM[n as usize] {
                        i += 1;
                        self.state = if n == 2 {
                            State::Value
                        } else {
                            State::Bom(n + 1)
                        };
                    } else if n == 0 {
                        self.state = State::Value;
                    } else {
                        return Err(err(0, "expected a JSON value"));
                    }
                    continue;
                }
                _ => {}
            }
            let c = chunk[i];
            let at = base + i;
            match self.state {
                State::Value => {
                    if !is_ws(c) {
                        self.start_value(c, at)?;
                    }
                }
                State::ArrayFirst => {
                    if c == b']' {
                        self.stack.pop();
                        self.state = State::After;
                    } else if !is_ws(c) {
                        self.start_value(c, at)?;
                    }
                }
                State::ObjectFirst | State::Key => {
                    if c == b'}' && self.state == State::ObjectFirst {
                        self.stack.pop();
                        self.state = State::After;
                    } else if c == b'"' {
                        self.state = State::Str { key: true };
                    } else if !is_ws(c) {
                        return Err(err(at, "expected a string key in object"));
                    }
                }
                State::Colon => {
                    if c == b':' {
                        self.state = State::Value;
                    } else if !is_ws(c) {
                        return Err(err(at, "expected ':' after object key"));
                    }
                }
                State::After => {
                    if !is_ws(c) {
                        match self.stack.last() {
                            None => return Err(err(at, "unexpected data after the JSON value")),
                            Some(&closer) if c == closer => {
                                self.stack.pop();
                            }
                            Some(&closer) if c == b',' => {
                                self.state = if closer == b'}' {
                                    State::Key
                                } else {
                                    State::Value
                                };
                            }
                            Some(&b']') => return Err(err(at, "expected ',' or ']' in array")),
                            Some(_) => return Err(err(at, "expected ',' or '}' in object")),
                        }
                    }
                }
                State::Escape { key, at: slash } => match c {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                        self.state = State::Str { key };
                    }
                    b'u' => {
                        self.state = State::Unicode {
                            key,
                            at: slash,
                            n: 0,
                        };
                    }
                    _ => return Err(err(slash, "invalid escape in string")),
                },
                State::Unicode { key, at: slash, n } => {
                    if !c.is_ascii_hexdigit() {
                        return Err(err(slash, "invalid \\u escape in string"));
                    }
                    self.state = if n == 3 {
                        State::Str { key }
                    } else {
                        State::Unicode {
                            key,
                            at: slash,
                            n: n + 1,
                        }
                    };
                }
                State::Literal {
                    word,
                    matched,
                    at: start,
                } => {
                    if c != word[matched as usize] {
                        return Err(err(start, "expected a JSON value"));
                    }
                    self.state = if matched as usize + 1 == word.len() {
                        State::After
                    } else {
                        State::Literal {
                            word,
                            matched: matched + 1,
                            at: start,
                        }
                    };
                }
                State::Minus { at: start } => {
                    self.state = match c {
                        b'I' => State::Literal {
                            word: b"-Infinity",
                            matched: 2,
                            at: start,
                        },
                        b'0' => State::Zero,
                        b'1'..=b'9' => State::Int,
                        _ => return Err(err(at, "invalid number")),
                    };
                }
                State::Zero | State::Int | State::Frac | State::ExpDigits => {
                    match (self.state, c) {
                        (State::Int | State::Frac | State::ExpDigits, b'0'..=b'9') => {}
                        (State::Zero | State::Int, b'.') => self.state = State::Dot,
                        (State::Zero | State::Int | State::Frac, b'e' | b'E') => {
                            self.state = State::Exp;
                        }
                        _ => {
                            // The number ended just before `c`, which comes after it.
                            self.state = State::After;
                            continue;
                        }
                    }
                }
                State::Dot => match c {
                    b'0'..=b'9' => self.state = State::Frac,
                    _ => return Err(err(at, "invalid number: digit expected after '.'")),
                },
                State::Exp | State::ExpSign => match c {
                    b'0'..=b'9' => self.state = State::ExpDigits,
                    b'+' | b'-' if self.state == State::Exp => self.state = State::ExpSign,
                    _ => return Err(err(at, "invalid number: digit expected in exponent")),
                },
                State::Str { .. } | State::Bom(_) => unreachable!("handled above"),
            }
            i += 1;
        }
        Ok(())
    }

    /// Read string content from `chunk[i..]`; returns where reading stopped (the chunk's end,
    /// or just after the closing quote, with the state updated).
    fn string(&mut self, chunk: &[u8], mut i: usize, key: bool) -> Result<usize, SyntaxError> {
        let len = chunk.len();
        loop {
            i = special(chunk, i);
            if i == len {
                return Ok(i);
            }
            match chunk[i] {
                b'"' => {
                    self.state = if key { State::Colon } else { State::After };
                    return Ok(i + 1);
                }
                b'\\' => {
                    // Take whole escapes here; one cut by the chunk's end (or a bad one)
                    // goes through the states, which report it as the reader does.
                    match chunk.get(i + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                        Some(b'u')
                            if chunk
                                .get(i + 2..i + 6)
                                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                        {
                            i += 6;
                        }
                        _ => {
                            self.state = State::Escape {
                                key,
                                at: self.base + i,
                            };
                            return Ok(i + 1);
                        }
                    }
                }
                _ => return Err(err(self.base + i, "control character inside a string")),
            }
        }
    }
}

/// The index of the first byte at or after `from` that ends a run of plain string content
/// (a quote, a backslash or a control character below 0x20), or `b.len()`.
///
/// Eight bytes at a time: `v - 0x01..01 & !v & 0x80..80` flags the zero bytes of `v`, and
/// `x - 0x20..20 & !x & 0x80..80` the bytes of `x` below 0x20; a borrow can only flag a
/// byte above a truly flagged one, so the lowest flag is exact.
pub(crate) fn special(b: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while let Some(w) = b.get(i..i + 8) {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let q = x ^ (ONES * u64::from(b'"'));
        let s = x ^ (ONES * u64::from(b'\\'));
        let hits = (q.wrapping_sub(ONES) & !q)
            | (s.wrapping_sub(ONES) & !s)
            | (x.wrapping_sub(ONES * 0x20) & !x);
        let hits = hits & HIGH;
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < b.len() && !matches!(b[i], b'"' | b'\\' | 0..=0x1f) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    /// A fixed-seed linear congruential generator: reproducible cases, no extra crate.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }

    /// What `transcript::validate` does for lcc's own shape.
    fn reference(s: &str) -> Result<(), SyntaxError> {
        let start = if s.starts_with('\u{feff}') { 3 } else { 0 };
        json::parse_shallow(s, start, s.len(), 0).map(drop)
    }

    /// Feed `s` in chunks of the sizes `next` gives (0 included), then finish.
    fn check_in(s: &[u8], mut next: impl FnMut() -> usize) -> Result<(), SyntaxError> {
        let mut c = Checker::new();
        let mut i = 0;
        while i < s.len() {
            let n = next().min(s.len() - i);
            c.feed(&s[i..i + n])?;
            i += n;
        }
        c.finish()
    }

    /// `s` fed whole, byte by byte and in random chunks gives exactly the reader's verdict
    /// (same offset and message on errors). Returns whether it was accepted.
    fn assert_same(s: &str, rng: &mut Lcg) -> bool {
        let want = reference(s);
        let b = s.as_bytes();
        let whole = check_in(b, || usize::MAX);
        assert_eq!(whole, want, "whole: {s:?}");
        let bytes = check_in(b, || 1);
        assert_eq!(bytes, want, "byte by byte: {s:?}");
        let max = [2, 5, 17, 300][rng.below(4)];
        let random = check_in(b, || rng.below(max + 1));
        assert_eq!(random, want, "random chunks up to {max}: {s:?}");
        want.is_ok()
    }

    /// A small document with every kind of value, escape and number form.
    const SAMPLE: &str = "\u{feff} {\"messages\": [{\"role\": \"user\", \"text\": \"h\\u00e9llo \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t \\ud83d\\ude00 \\udc00 é 😀\", \"n\": [0, -0, 12, -3.25, 1e5, 1E+5, 2.5e-3, -0.0e0], \"l\": [true, false, null, NaN, Infinity, -Infinity], \"o\": {}, \"a\": [], \"d\": [[{\"x\": [{}]}]]}\r\n,\t{\"role\":\"assistant\",\"toolUses\":[{\"tool_use_id\":\"t1\",\"tool\":\"Read\",\"input\":{\"file_path\":\"/a/b.py\"}}]}]}\n";

    fn edge_cases() -> Vec<String> {
        let mut v: Vec<String> = [
            "",
            " ",
            " \n\t\r ",
            "\u{feff}",
            "\u{feff} ",
            "\u{feff}1",
            " \u{feff}1",
            "\u{feff}\u{feff}1",
            "\u{fefe}1",
            "\u{feff}{}",
            "true",
            "false",
            "null",
            "NaN",
            "Infinity",
            "-Infinity",
            "tru",
            "truex",
            "nul",
            "nulll",
            "NaNa",
            "nan",
            "infinity",
            "-infinity",
            "-Inf",
            "-I",
            "+1",
            "Infinityx",
            "[tru]",
            "[true,fals]",
            "[-Infinit]",
            "[-Infinity]",
            "{\"a\":NaN}",
            "0",
            "-0",
            "1",
            "12",
            "1e5",
            "1E5",
            "1e+5",
            "1e-5",
            "1.",
            "1.5",
            "1.e5",
            "01",
            "-01",
            "-",
            "--1",
            "1e",
            "1e+",
            "1e-",
            "1E+x",
            ".5",
            "-.5",
            "1.5.5",
            "1e5e5",
            "0x10",
            "[0]",
            "[01]",
            "[-]",
            "[1.]",
            "[1e]",
            "[1e+]",
            "[-",
            "[1",
            "[1.",
            "[1e",
            "[1e+",
            "[1 2]",
            "[1,2]",
            "{\"a\":1e5}",
            "{\"a\":-}",
            "{\"a\":1.}",
            "{\"a\":0",
            "{\"a\":0.5",
            "1 ",
            " 1",
            "1 2",
            "1,",
            "12x",
            "\"a\" \"b\"",
            "[] []",
            "{}{}",
            "{} x",
            "[]]",
            "{}}",
            "\"\"",
            "\"abc\"",
            "\"a\tb\"",
            "\"a\nb\"",
            "\"a\u{1}b\"",
            "\"a\u{1f}b\"",
            "\"a\u{7f}b\"",
            "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
            "\"\\a\"",
            "\"\\x41\"",
            "\"\\'\"",
            "\"\\\"",
            "\"\\",
            "\"\\u\"",
            "\"\\u1\"",
            "\"\\u12\"",
            "\"\\u123\"",
            "\"\\u1234\"",
            "\"\\uABCD\"",
            "\"\\uabcd\"",
            "\"\\u12G4\"",
            "\"\\u",
            "\"\\u12",
            "\"\\u1234",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ude00\\ud83d\"",
            "\"\\U1234\"",
            "\"\\\u{1}\"",
            "\"é😀\"",
            "\"abc",
            "\"abc\\\"",
            "[\"a\u{0}\"]",
            "{\"a\u{1}\":1}",
            "{\"\\q\":1}",
            "{\"\\u12\":1}",
            "[",
            "]",
            "{",
            "}",
            "[[",
            "[[]",
            "[{}",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1",
            "{\"a\":1,",
            "{\"a\":[",
            "[1,",
            "[1,]",
            "[,1]",
            "[,]",
            "{,}",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{\"a\"1}",
            "{\"a\":1 \"b\":2}",
            "{\"a\":1,\"b\"}",
            "{1:2}",
            "{a:1}",
            "{'a':1}",
            "['a']",
            "{:1}",
            "{\"a\"::1}",
            "[1;2]",
            "{\"a\":1;}",
            "[1}",
            "{\"a\":1]",
            "[}",
            "{]",
            "{\"a\":}",
            "[ ]",
            "{ }",
            "[ 1 , 2 ]",
            "{ \"a\" : 1 , \"b\" : [ ] }",
            "\u{c}[]",
            "[]\u{c}",
            "[\u{b}]",
            "[\u{a0}]",
            "\u{a0}1",
            "é",
            "[é]",
            "{\"a\":é}",
            "[1]é",
            "\u{0}",
            "[true false]",
            "[null,]",
            "{\"a\":{\"b\":{}}}}",
            "[[[]]]",
            "[[[]]",
            "{\"\":\"\"}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for open in ["[", "{\"k\":"] {
            let close = if open == "[" { "]" } else { "}" };
            for depth in [1023, 1024, 1025, 2000] {
                v.push(format!("{}{}", open.repeat(depth), close.repeat(depth)));
                v.push(format!("{}1{}", open.repeat(depth), close.repeat(depth)));
                v.push(format!(
                    "{}[]{}",
                    open.repeat(depth - 1),
                    close.repeat(depth - 1)
                ));
                v.push(format!(
                    "{}{{}}{}",
                    open.repeat(depth - 1),
                    close.repeat(depth - 1)
                ));
                // Unclosed at the end.
                v.push(open.repeat(depth));
            }
        }
        v
    }

    #[test]
    fn edge_cases_match_the_reader() {
        let mut rng = Lcg(1);
        let cases = edge_cases();
        let accepted = cases.iter().filter(|s| assert_same(s, &mut rng)).count();
        // The list holds both kinds in numbers (a check that always agrees trivially fails).
        assert!(accepted > 40 && cases.len() - accepted > 150, "{accepted}");
        assert!(assert_same(SAMPLE, &mut rng));
    }

    /// Every valid-UTF-8 prefix of a document is cut somewhere inside something (a literal,
    /// an escape, a number, a container): each end-of-input error is the reader's.
    #[test]
    fn every_prefix_matches_the_reader() {
        let mut rng = Lcg(2);
        let mut rejected = 0;
        for end in 0..SAMPLE.len() {
            if let Some(prefix) = SAMPLE.get(..end) {
                if !assert_same(prefix, &mut rng) {
                    rejected += 1;
                }
            }
        }
        assert!(rejected > 300, "{rejected}");
    }

    fn fixtures() -> Vec<(String, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
            entries.sort_by_key(|e| e.path());
            for e in entries {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if let Ok(text) = std::fs::read_to_string(&p) {
                    out.push((p.display().to_string(), text));
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
            &mut out,
        );
        out
    }

    #[test]
    fn fixtures_match_the_reader() {
        let mut rng = Lcg(3);
        let files = fixtures();
        assert!(files.len() > 30, "{}", files.len());
        let mut accepted = 0;
        for (path, text) in &files {
            let want = reference(text);
            let got = check_in(text.as_bytes(), || rng.below(9000));
            assert_eq!(got, want, "{path}");
            assert_eq!(check_in(text.as_bytes(), || 1), want, "{path} byte by byte");
            accepted += usize::from(want.is_ok());
        }
        assert!(accepted > 20 && accepted < files.len(), "{accepted}");
    }

    /// Random byte edits of valid documents: inserted, deleted or replaced bytes, mostly
    /// ones that matter to the grammar.
    #[test]
    fn mutations_match_the_reader() {
        let alphabet: &[u8] = b"{}[]\":,\\ \n\t\r0123456789-+.eEtrufalsnNIiybx/u\x00\x01\x1f\x7f";
        let lossless = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/roundtrip.json"),
        )
        .unwrap();
        let bases = [
            SAMPLE,
            lossless.as_str(),
            "[1, -2.5e3, \"a\\u00e9\", {\"k\": [null]}]",
        ];
        let mut rng = Lcg(4);
        let (mut accepted, mut rejected, mut skipped) = (0, 0, 0);
        for case in 0..4000 {
            let mut b = bases[case % bases.len()].as_bytes().to_vec();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(b.len() + 1);
                let byte = if rng.below(8) == 0 {
                    rng.below(256) as u8
                } else {
                    alphabet[rng.below(alphabet.len())]
                };
                match rng.below(3) {
                    0 => b.insert(at, byte),
                    1 if at < b.len() => drop(b.remove(at)),
                    _ if at < b.len() => b[at] = byte,
                    _ => b.push(byte),
                }
            }
            // The reader takes text: edits that break UTF-8 cannot be compared.
            let Ok(s) = String::from_utf8(b) else {
                skipped += 1;
                continue;
            };
            if assert_same(&s, &mut rng) {
                accepted += 1;
            } else {
                rejected += 1;
            }
        }
        assert!(
            accepted > 300 && rejected > 2000 && skipped < 500,
            "{accepted} {rejected} {skipped}"
        );
    }

    /// The word-at-a-time scan stops exactly where a byte-by-byte one does, wherever the
    /// special byte sits in the word and whatever surrounds it.
    #[test]
    fn special_is_exact() {
        let alphabet = [
            0x00u8, 0x01, 0x0a, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2,
            0xdc, 0xff,
        ];
        let mut rng = Lcg(5);
        for round in 0..50_000 {
            let run: Vec<u8> = (0..round % 29)
                .map(|_| {
                    if rng.below(6) == 0 {
                        alphabet[rng.below(alphabet.len())]
                    } else {
                        0x23 + rng.below(0x38) as u8
                    }
                })
                .collect();
            let from = rng.below(run.len() + 1);
            let want = run[from..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .map_or(run.len(), |p| from + p);
            assert_eq!(special(&run, from), want, "{run:?} from {from}");
        }
    }

    #[test]
    fn errors_stick_and_finish_repeats_them() {
        let mut c = Checker::new();
        c.feed(b"[1, ").unwrap();
        let e = c.feed(b"x, 2]").unwrap_err();
        assert_eq!(
            e,
            SyntaxError {
                offset: 4,
                message: "expected a JSON value".into()
            }
        );
        assert_eq!(c.feed(b"]").unwrap_err(), e);
        assert_eq!(c.error(), Some(&e));
        assert_eq!(c.offset(), 4);
        assert_eq!(c.finish().unwrap_err(), e);
    }

    /// A transcript-like document of about `target` bytes: tool outputs (code, logs with
    /// escaped newlines and quotes, some non-ASCII and `\u` escapes) are most of the bytes.
    fn transcript_like(target: usize) -> String {
        let mut rng = Lcg(9);
        let words = [
            "def",
            "return",
            "self",
            "value",
            "if",
            "else",
            "for",
            "in",
            "import",
            "os",
            "path",
            "error",
            "test_",
            "assert",
            "None",
            "print(\"ok\")",
            "x\ty",
            "données",
            "→",
            "{",
            "}",
            "[1, 2]",
            "\\",
            "'q'",
            "😀",
            "\u{1}",
        ];
        let mut out = String::from("{\"messages\": [");
        let mut n = 0;
        while out.len() < target {
            let lines = 1 + rng.below(200);
            let mut text = String::new();
            for _ in 0..lines {
                for _ in 0..rng.below(12) {
                    text.push_str(words[rng.below(words.len())]);
                    text.push(' ');
                }
                text.push('\n');
            }
            if n > 0 {
                out.push_str(", ");
            }
            out.push_str(&format!(
                "{{\"role\": \"assistant\", \"text\": {}, \"toolUses\": [{{\"tool_use_id\": \"toolu_{n:06}\", \"tool\": \"Read\", \"input\": {{\"file_path\": \"/home/dev/acme/f{n}.py\", \"offset\": {}, \"limit\": -1.5e2}}}}]}}, ",
                json::quote("Let me look at that file.", false),
                rng.below(1000)
            ));
            out.push_str(&format!(
                "{{\"role\": \"user\", \"toolResults\": [{{\"tool_use_id\": \"toolu_{n:06}\", \"text\": {}, \"is_error\": false}}]}}",
                json::quote(&text, n % 7 == 0)
            ));
            n += 1;
        }
        out.push_str("]}\n");
        out
    }

    /// Throughput, in release: `cargo test --release --lib json_check::tests::throughput --
    /// --ignored --nocapture`. Prints figures; asserts only that the document is accepted.
    #[test]
    #[ignore = "a measurement: run by hand in release"]
    fn throughput() {
        use std::time::Instant;
        let doc = transcript_like(40_000_000);
        let mb = doc.len() as f64 / 1e6;
        let b = doc.as_bytes();
        // The output as `splice` would write it: big slices of the input and small edits.
        let mut rng = Lcg(11);
        let mut cuts = vec![0];
        while *cuts.last().unwrap() < b.len() {
            let big = *cuts.last().unwrap() + 1_000_000 + rng.below(3_000_000);
            cuts.push(big.min(b.len()));
            let small = big + 10 + rng.below(200);
            cuts.push(small.min(b.len()));
        }
        cuts.dedup();
        let time = |label: &str, f: &dyn Fn() -> Result<(), SyntaxError>| {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                f().unwrap();
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!(
                "{label:<40} {mb:.1} MB  {:>7.1} ms  {:>6.0} MB/s",
                best * 1e3,
                mb / best
            );
        };
        time("json::parse_shallow (whole text)", &|| {
            json::parse_shallow(&doc, 0, doc.len(), 0).map(drop)
        });
        time("Checker: one chunk", &|| check_in(b, || usize::MAX));
        time("Checker: 8 KiB chunks", &|| check_in(b, || 8192));
        time("Checker: 1-4 MB slices + small edits", &|| {
            let mut c = Checker::new();
            for w in cuts.windows(2) {
                c.feed(&b[w[0]..w[1]])?;
            }
            c.finish()
        });
    }
}
