//! Text tests shared by the rules policies: does a text name a file, which paths and URLs
//! does a goal mention, does an output look like an error.
//!
//! "Mentions" is a whole-name match: `ref` occurs in `text` with no `[\w.-]` character right
//! before it and no `[\w-]` character right after it (a `.` after it is allowed, so `app.py.`
//! at the end of a sentence counts). `app.py` is therefore not mentioned by `webapp.py`.
//!
//! Asking "does any later call mention this file" for every call would compare every call
//! with every later one. [`NameIndex`] answers it in one pass instead: for a set of names
//! fixed up front it records the last position of a text that mentions each.

use std::sync::LazyLock;

use crate::fasthash::FastMap;

use regex::Regex;
use serde_json::Value;

/// Python's `\w` for `str` patterns: letters, digits (any script) and `_`.
pub fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A character that may sit inside a plain file name: `[\w.-]`.
fn is_name_char(c: char) -> bool {
    is_word(c) || c == '.' || c == '-'
}

/// Does `text` mention `name` as a whole name (see the module docs)? An empty name is never
/// mentioned.
pub fn mentions(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(i) = text[from..].find(name) {
        let at = from + i;
        let before_ok = text[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !is_name_char(c));
        let after_ok = text[at + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(is_word(c) || c == '-'));
        if before_ok && after_ok {
            return true;
        }
        // Overlapping occurrences: move on by one character.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// The last `/` segment of a path, after trailing slashes are removed (`src/` → `src`).
pub fn basename(path: &str) -> &str {
    let p = path.trim_end_matches('/');
    p.rsplit('/').next().unwrap_or(p)
}

/// Does `text` name the file `path`: its whole path or its file name as a whole name?
///
/// A mention of the whole path always mentions its file name too (the name follows a `/`
/// and ends where the path ends), so only the name is searched.
pub fn names_file(text: &str, path: &str) -> bool {
    mentions(text, basename(path))
}

/// A name [`NameIndex`] can look up by hashing: non-empty and made of `[\w.-]` only.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(is_name_char)
}

/// Every plain name `text` mentions: for each maximal run of `[\w.-]` characters, the run
/// itself and each of its prefixes that ends right before a `.` (`a.py.bak` mentions `a`,
/// `a.py` and `a.py.bak`).
pub fn plain_mentions(text: &str, mut f: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut start: Option<usize> = None;
    let mut i = 0;
    while i <= bytes.len() {
        // The character at `i` (ASCII fast path) and its length; the end counts as a break.
        let (name_char, dot, len) = match bytes.get(i) {
            None => (false, false, 1),
            Some(&b) if b < 0x80 => (
                b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-',
                b == b'.',
                1,
            ),
            Some(_) => {
                let c = text[i..].chars().next().unwrap_or(' ');
                (is_word(c), false, c.len_utf8())
            }
        };
        if name_char {
            let s = *start.get_or_insert(i);
            if dot && i > s {
                f(&text[s..i]);
            }
        } else if let Some(s) = start.take() {
            f(&text[s..i]);
        }
        i += len;
    }
}

/// For a fixed set of names: the last position (any ordering key the caller chooses) of a
/// text that mentions each name.
#[derive(Debug, Default)]
pub struct NameIndex {
    plain: FastMap<String, usize>,
    odd: Vec<(String, Option<usize>)>,
    /// Matches any odd name as a substring: most texts mention none, and skip them at once.
    odd_any: Option<Regex>,
    last: Vec<Option<usize>>,
}

impl NameIndex {
    /// An index over these names (duplicates allowed; empty names are never mentioned).
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> NameIndex {
        let mut ix = NameIndex::default();
        let mut seen_odd = std::collections::HashSet::new();
        for n in names {
            if n.is_empty() {
                continue;
            }
            if is_plain_name(n) {
                if !ix.plain.contains_key(n) {
                    ix.plain.insert(n.to_string(), ix.last.len());
                    ix.last.push(None);
                }
            } else if seen_odd.insert(n) {
                ix.odd.push((n.to_string(), None));
            }
        }
        if !ix.odd.is_empty() {
            let alternation: Vec<String> = ix.odd.iter().map(|(n, _)| regex::escape(n)).collect();
            ix.odd_any = Regex::new(&alternation.join("|")).ok();
        }
        ix
    }

    /// Record that the text at `pos` was seen. Texts may come in any order; the largest
    /// position wins.
    pub fn add(&mut self, pos: usize, text: &str) {
        let hits = self.hits(text);
        self.record(pos, &hits);
    }

    /// Which of the names `text` mentions (opaque ids for [`NameIndex::record`]). Takes
    /// `&self`, so many texts can be scanned in parallel.
    pub fn hits(&self, text: &str) -> Vec<usize> {
        let mut out = Vec::new();
        if !self.plain.is_empty() {
            plain_mentions(text, |m| {
                if let Some(&k) = self.plain.get(m) {
                    out.push(k);
                }
            });
        }
        if self.odd_any.as_ref().is_none_or(|re| re.is_match(text)) {
            for (j, (name, _)) in self.odd.iter().enumerate() {
                if mentions(text, name) {
                    out.push(self.last.len() + j);
                }
            }
        }
        out
    }

    /// Record [`NameIndex::hits`] of a text at `pos`.
    pub fn record(&mut self, pos: usize, hits: &[usize]) {
        let n = self.last.len();
        for &k in hits {
            let slot = if k < n {
                &mut self.last[k]
            } else {
                &mut self.odd[k - n].1
            };
            *slot = Some(slot.map_or(pos, |p| p.max(pos)));
        }
    }

    /// The last position of a text mentioning `name`, if any.
    pub fn last(&self, name: &str) -> Option<usize> {
        if let Some(&k) = self.plain.get(name) {
            return self.last[k];
        }
        self.odd
            .iter()
            .find(|(o, _)| o == name)
            .and_then(|(_, p)| *p)
    }

    /// Is `name` mentioned by a text at a position after `pos`?
    pub fn mentioned_after(&self, name: &str, pos: usize) -> bool {
        self.last(name).is_some_and(|p| p > pos)
    }
}

static REF_URL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"https?://\S+").expect("regex"));
static REF_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[\w.~-]*/[\w.-]+(?:/[\w.-]+)*").expect("regex"));
static REF_FILE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[\w-]+\.(?:py|ts|tsx|js|jsx|md|json|toml|ya?ml|sql|css|html|sh|go|rs)\b")
        .expect("regex")
});

/// The references (URLs, slash paths, file names with a known extension) a text mentions,
/// in that order of kinds, each once.
pub fn refs(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for re in [&*REF_URL, &*REF_PATH, &*REF_FILE] {
        for m in re.find_iter(text) {
            if !out.iter().any(|r| r == m.as_str()) {
                out.push(m.as_str().to_string());
            }
        }
    }
    out
}

static ERROR_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"Traceback \(most recent call last\)|\bError\b|\bERROR\b|\bFAILED?\b|\bexit code [1-9]|Exception",
    )
    .expect("regex")
});

/// Does an output read like a failure (a traceback, `Error`, `FAILED`, a non-zero exit code)?
pub fn looks_like_error(text: &str) -> bool {
    ERROR_RE.is_match(text)
}

/// A call input as one string: JSON with sorted keys, non-ASCII kept.
pub fn input_text(input: &Value) -> String {
    crate::json::py_dumps_sorted(input, false)
}

/// The first truthy value among `keys` (Python's `a or b or c`).
pub fn first_truthy<'v>(input: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().filter_map(|k| input.get(k)).find(|v| truthy(v))
}

/// Python truthiness of a JSON value.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The command a call ran, for the error and supersession rules: `input.command`, else
/// `input.cmd`, when it is a string (any tool).
pub fn command_of(input: &Value) -> &str {
    first_truthy(input, &["command", "cmd"])
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The file a call is about: the first non-empty string of `file_path`, `notebook_path`,
/// `path`.
pub fn path_of(input: &Value) -> Option<&str> {
    ["file_path", "notebook_path", "path"]
        .iter()
        .filter_map(|k| input.get(k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
}

/// Python's `str.strip()`: Unicode whitespace at both ends.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_name_mentions() {
        assert!(mentions("see app.py", "app.py"));
        assert!(mentions("see app.py.", "app.py"));
        assert!(mentions("/r/src/app.py", "app.py"));
        assert!(!mentions("webapp.py", "app.py"));
        assert!(!mentions("app.pyc", "app.py"));
        assert!(!mentions("app.py-x", "app.py"));
        assert!(!mentions(".app.py", "app.py"));
        assert!(mentions("a-app.py app.py", "app.py"));
        assert!(!mentions("anything", ""));
        assert!(names_file("rm -rf /r/src/", "/x/src/"));
        assert_eq!(basename("/a/b/"), "b");
        assert_eq!(basename("b"), "b");
        assert_eq!(basename("/"), "");
    }

    #[test]
    fn plain_mentions_agree_with_mentions() {
        let text = "edit /r/src/a.py.bak, then b-c.d and .env or x..y; naïve.py";
        let mut got = Vec::new();
        plain_mentions(text, |m| got.push(m.to_string()));
        for name in &got {
            assert!(mentions(text, name), "{name}");
        }
        for name in [
            "a",
            "a.py",
            "a.py.bak",
            "b-c",
            "b-c.d",
            ".env",
            "x",
            "x.",
            "x..y",
            "naïve.py",
        ] {
            assert!(got.iter().any(|g| g == name), "{name} missing from {got:?}");
        }
        assert!(!got.iter().any(|g| g == "py"));
    }

    #[test]
    fn name_index() {
        let mut ix = NameIndex::new(["a.py", "my file.txt", "zz"]);
        ix.add(3, "touch /r/a.py");
        ix.add(1, "a.py");
        ix.add(2, "cp 'my file.txt' x");
        assert_eq!(ix.last("a.py"), Some(3));
        assert!(ix.mentioned_after("my file.txt", 1));
        assert!(!ix.mentioned_after("my file.txt", 2));
        assert_eq!(ix.last("zz"), None);
    }

    #[test]
    fn references() {
        let r = refs("fix src/app.py and see https://x.io/a?b=1 then README.md");
        assert_eq!(
            r,
            [
                "https://x.io/a?b=1",
                "src/app.py",
                "/x.io/a",
                "app.py",
                "README.md"
            ]
        );
        assert!(looks_like_error("Traceback (most recent call last):"));
        assert!(looks_like_error("1 FAILED"));
        assert!(!looks_like_error("ErrorCount"));
    }
}
