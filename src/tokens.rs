//! Token counting.
//!
//! Counts are exact BPE counts (`o200k_base` for gpt-4.1 / gpt-4o / o-series / gpt-5,
//! `cl100k_base` for gpt-4 and gpt-3.5), made with the `bpe-openai` tokenizer, which gives
//! the same counts as tiktoken (a test compares it with tiktoken-rs on the fixtures) at about
//! twice the speed. An unknown `--model` is counted with `o200k_base` and marked approximate.
//!
//! Whole-transcript counts are the sum of per-piece counts (each message text, call line and
//! result text), each distinct piece counted once, in parallel.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::fasthash::FastMap;

thread_local! {
    static PIECE_CACHE: [RefCell<FastMap<Box<[u8]>, u32>>; 2] =
        [RefCell::new(FastMap::default()), RefCell::new(FastMap::default())];
    static SEGMENT_CACHE: [RefCell<FastMap<Box<[u8]>, u32>>; 2] =
        [RefCell::new(FastMap::default()), RefCell::new(FastMap::default())];
    /// Segments of at most [`SHORT`] bytes (most of them), keyed inline: one memory access
    /// per lookup instead of two, and no allocation per entry.
    static SHORT_SEGMENT_CACHE: [RefCell<FastMap<ShortKey, u32>>; 2] =
        [RefCell::new(FastMap::default()), RefCell::new(FastMap::default())];
}

/// Segments up to this many bytes are keyed inline.
const SHORT: usize = 16;

/// A short segment's bytes, zero-padded, and its length.
type ShortKey = (u128, u8);

fn short_key(b: &[u8]) -> ShortKey {
    let mut w = [0u8; SHORT];
    w[..b.len()].copy_from_slice(b);
    (u128::from_le_bytes(w), b.len() as u8)
}

/// Segments up to this many bytes are memoised.
const SEGMENT_CACHE_MAX: usize = 96;

/// Cut `text` before every space (U+0020) that follows a non-whitespace character.
///
/// Both encodings' pre-tokenizers start a new chunk there: no chunk of either pattern holds a
/// non-whitespace character followed by a space (letters, digits and punctuation runs never
/// end in a space, whitespace runs never start after a non-whitespace character inside a
/// chunk), and the patterns only look ahead. So a text's count is the sum of its segments'
/// counts, and a segment seen before (a word, mostly) need not be pre-tokenized again.
fn segments(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut spaces = memchr::memchr_iter(b' ', bytes);
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        for p in spaces.by_ref() {
            if p <= start {
                continue;
            }
            let prev = bytes[p - 1];
            let after_text = if prev < 0x80 {
                !prev.is_ascii_whitespace() && prev != 0x0b
            } else {
                text[..p]
                    .chars()
                    .next_back()
                    .is_some_and(|c| !c.is_whitespace())
            };
            if after_text {
                let seg = &text[start..p];
                start = p;
                return Some(seg);
            }
        }
        let seg = &text[start..];
        start = bytes.len();
        Some(seg)
    })
}

/// o200k's pre-tokenizer on an ASCII text, by hand: the same pieces as the encoding's regex
/// (a unit test compares the two on random texts), without a regex search per piece.
///
/// On ASCII the pattern's alternatives, tried in order at each position, read: an optional
/// character that is not CR, LF, a letter or a digit, then uppercase letters and lowercase
/// ones (at least one lowercase; or else at least one uppercase), then an optional
/// contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, any case); one to three digits;
/// an optional space, a run of characters that are not whitespace, letters or digits, and any
/// CR, LF or `/` after it; whitespace up to the last CR or LF of its run; whitespace up to the
/// end of the text; a whitespace run but its last character (when two or more); one
/// whitespace character.
fn o200k_ascii_split(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let n = b.len();
    let ws = |x: u8| matches!(x, b'\t'..=b'\r' | b' ');
    let letter = |x: u8| x.is_ascii_alphabetic();
    let punct = move |x: u8| !ws(x) && !x.is_ascii_alphanumeric();
    let mut p = 0;
    std::iter::from_fn(move || {
        if p >= n {
            return None;
        }
        let c = b[p];
        let end = 'end: {
            // Letters, with an optional leading character.
            let q = if !letter(c)
                && !c.is_ascii_digit()
                && c != b'\r'
                && c != b'\n'
                && p + 1 < n
                && letter(b[p + 1])
            {
                p + 1
            } else {
                p
            };
            if letter(b[q]) {
                let mut i = q;
                while i < n && b[i].is_ascii_uppercase() {
                    i += 1;
                }
                while i < n && b[i].is_ascii_lowercase() {
                    i += 1;
                }
                if i + 1 < n && b[i] == b'\'' {
                    let d = b[i + 1].to_ascii_lowercase();
                    if matches!(d, b's' | b't' | b'm' | b'd') {
                        break 'end i + 2;
                    }
                    if i + 2 < n {
                        let e = b[i + 2].to_ascii_lowercase();
                        if matches!((d, e), (b'r', b'e') | (b'v', b'e') | (b'l', b'l')) {
                            break 'end i + 3;
                        }
                    }
                }
                break 'end i;
            }
            if c.is_ascii_digit() {
                let mut i = p + 1;
                while i < n && i < p + 3 && b[i].is_ascii_digit() {
                    i += 1;
                }
                break 'end i;
            }
            let run = if punct(c) {
                Some(p)
            } else if c == b' ' && p + 1 < n && punct(b[p + 1]) {
                Some(p + 1)
            } else {
                None
            };
            if let Some(mut i) = run {
                while i < n && punct(b[i]) {
                    i += 1;
                }
                while i < n && matches!(b[i], b'\r' | b'\n' | b'/') {
                    i += 1;
                }
                break 'end i;
            }
            // Whitespace (c is whitespace here).
            let mut q = p;
            let mut last_newline = None;
            while q < n && ws(b[q]) {
                if matches!(b[q], b'\r' | b'\n') {
                    last_newline = Some(q);
                }
                q += 1;
            }
            if let Some(k) = last_newline {
                break 'end k + 1;
            }
            if q == n || q - p == 1 {
                break 'end q;
            }
            q - 1
        };
        let piece = &text[p..end];
        p = end;
        Some(piece)
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    O200k,
    Cl100k,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }
}

/// A counter for one encoding; `exact` is false when the model was not recognised.
#[derive(Debug, Clone, Copy)]
pub struct Counter {
    pub encoding: Encoding,
    pub exact: bool,
}

impl Counter {
    /// The encoding a model name uses.
    pub fn for_model(model: &str) -> Counter {
        let m = model.to_ascii_lowercase();
        let o200k = m.starts_with("gpt-4o")
            || m.starts_with("gpt-4.1")
            || m.starts_with("gpt-4.5")
            || m.starts_with("gpt-5")
            || m.starts_with("chatgpt-4o")
            || m.starts_with("o1")
            || m.starts_with("o3")
            || m.starts_with("o4");
        let cl100k = !o200k
            && (m.starts_with("gpt-4")
                || m.starts_with("gpt-3.5")
                || m.starts_with("gpt-35")
                || m.starts_with("text-embedding-3")
                || m.starts_with("text-embedding-ada-002"));
        if o200k {
            Counter {
                encoding: Encoding::O200k,
                exact: true,
            }
        } else if cl100k {
            Counter {
                encoding: Encoding::Cl100k,
                exact: true,
            }
        } else {
            Counter {
                encoding: Encoding::O200k,
                exact: false,
            }
        }
    }

    pub fn o200k() -> Counter {
        Counter {
            encoding: Encoding::O200k,
            exact: true,
        }
    }

    pub fn method(self) -> &'static str {
        if self.exact {
            "exact"
        } else {
            "approximate"
        }
    }

    fn tokenizer(self) -> &'static bpe_openai::Tokenizer {
        match self.encoding {
            Encoding::O200k => bpe_openai::o200k_base(),
            Encoding::Cl100k => bpe_openai::cl100k_base(),
        }
    }

    /// Exact token count of one text. The text is cut into [`segments`] (mostly a word with
    /// the space before it), each segment's count is memoised per thread, and a segment not
    /// seen before is split by the encoding's pre-tokenizer, each piece's count memoised too:
    /// in transcripts most segments and pieces repeat, and a lookup is cheaper than running
    /// the pre-tokenizer and encoding again.
    pub fn count(self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        let which = match self.encoding {
            Encoding::O200k => 0,
            Encoding::Cl100k => 1,
        };
        SHORT_SEGMENT_CACHE.with(|shorts| {
            SEGMENT_CACHE.with(|caches| {
                let mut short = shorts[which].borrow_mut();
                let mut cache = caches[which].borrow_mut();
                if short.len() > 1 << 20 {
                    short.clear();
                }
                if cache.len() > 1 << 20 {
                    cache.clear();
                }
                let mut total = 0;
                for seg in segments(text) {
                    let b = seg.as_bytes();
                    if b.len() <= SHORT {
                        let key = short_key(b);
                        total += match short.get(&key) {
                            Some(&n) => n as usize,
                            None => {
                                let n = self.count_pieces(seg);
                                short.insert(key, u32::try_from(n).unwrap_or(u32::MAX));
                                n
                            }
                        };
                        continue;
                    }
                    if b.len() > SEGMENT_CACHE_MAX {
                        total += self.count_pieces(seg);
                        continue;
                    }
                    if let Some(&n) = cache.get(b) {
                        total += n as usize;
                        continue;
                    }
                    let n = self.count_pieces(seg);
                    cache.insert(b.into(), u32::try_from(n).unwrap_or(u32::MAX));
                    total += n;
                }
                total
            })
        })
    }

    /// Exact token count of one text, split by the encoding's pre-tokenizer, each piece's
    /// count memoised per thread.
    fn count_pieces(self, text: &str) -> usize {
        let tok = self.tokenizer();
        let which = match self.encoding {
            Encoding::O200k => 0,
            Encoding::Cl100k => 1,
        };
        PIECE_CACHE.with(|caches| {
            let mut cache = caches[which].borrow_mut();
            if cache.len() > 1 << 18 {
                cache.clear();
            }
            let mut one = |piece: &str| {
                let b = piece.as_bytes();
                if b.len() == 1 {
                    return 1;
                }
                if b.len() > 64 {
                    return tok.bpe.count(b);
                }
                if let Some(&n) = cache.get(b) {
                    return n as usize;
                }
                let n = tok.bpe.count(b);
                cache.insert(b.into(), u32::try_from(n).unwrap_or(u32::MAX));
                n
            };
            if self.encoding == Encoding::O200k && text.is_ascii() {
                o200k_ascii_split(text).map(&mut one).sum()
            } else {
                tok.split(text).map(&mut one).sum()
            }
        })
    }

    /// Count many pieces: each distinct text once, in parallel. Returns counts in input order.
    pub fn count_many(self, pieces: &[&str]) -> Vec<usize> {
        let mut index: FastMap<&str, usize> = FastMap::default();
        index.reserve(pieces.len());
        let mut distinct: Vec<&str> = Vec::new();
        let slots: Vec<usize> = pieces
            .iter()
            .map(|p| {
                *index.entry(p).or_insert_with(|| {
                    distinct.push(p);
                    distinct.len() - 1
                })
            })
            .collect();
        // Big pieces first so the two cores finish together.
        let mut order: Vec<usize> = (0..distinct.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(distinct[i].len()));
        let mut counts = vec![0usize; distinct.len()];
        let computed: Vec<(usize, usize)> = order
            .par_iter()
            .with_min_len(16)
            .map(|&i| (i, self.count(distinct[i])))
            .collect();
        for (i, c) in computed {
            counts[i] = c;
        }
        slots.into_iter().map(|s| counts[s]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_mapping() {
        assert_eq!(Counter::for_model("gpt-4.1").encoding, Encoding::O200k);
        assert_eq!(Counter::for_model("gpt-4o-mini").encoding, Encoding::O200k);
        assert_eq!(Counter::for_model("o3").encoding, Encoding::O200k);
        assert_eq!(Counter::for_model("gpt-4").encoding, Encoding::Cl100k);
        assert_eq!(
            Counter::for_model("gpt-3.5-turbo").encoding,
            Encoding::Cl100k
        );
        let unknown = Counter::for_model("claude-sonnet");
        assert_eq!(unknown.encoding, Encoding::O200k);
        assert!(!unknown.exact);
    }

    #[test]
    fn matches_tiktoken() {
        let texts = [
            "Hello, world!",
            "fn main() {\n    println!(\"hi\");\n}\n\n\n   trailing   ",
            "déjà vu — 東京 😀 1234567 tokens\r\n\tend",
            "{\"command\": \"pytest -q\"}",
        ];
        let o = tiktoken_rs::o200k_base().unwrap();
        let c = tiktoken_rs::cl100k_base().unwrap();
        for t in texts {
            assert_eq!(
                Counter::o200k().count(t),
                o.encode_ordinary(t).len(),
                "{t:?}"
            );
            let cl = Counter {
                encoding: Encoding::Cl100k,
                exact: true,
            };
            assert_eq!(cl.count(t), c.encode_ordinary(t).len(), "{t:?}");
        }
        let many = Counter::o200k().count_many(&texts);
        assert_eq!(many[0], Counter::o200k().count(texts[0]));
    }

    /// Cutting at spaces never changes a count: texts built to stress whitespace (runs of
    /// spaces, tabs, newlines, Unicode spaces, contractions, digits, punctuation), counted by
    /// tiktoken-rs whole.
    #[test]
    fn segments_keep_counts_exact() {
        let atoms = [
            " ", "  ", "   ", "\t", "\n", "\r\n", "\u{a0}", "\u{3000}", "\u{2003}", "\u{85}",
            "\u{b}", "\u{c}", "\u{1c}", "a", "Word", "it's", "'s", "DON'T", "123", "45678", ".",
            "...", "/", "//", "\"", "{\"k\": ", "é", "東京", "😀", "-", "_x", "(", ")", "\n    ",
            "\t\t",
        ];
        let o = tiktoken_rs::o200k_base().unwrap();
        let c = tiktoken_rs::cl100k_base().unwrap();
        let cl = Counter {
            encoding: Encoding::Cl100k,
            exact: true,
        };
        let mut seed: u64 = 11;
        for round in 0..3000 {
            let text = random_text(&atoms, &mut seed, 1 + round % 40);
            let joined: String = segments(&text).collect();
            assert_eq!(joined, text);
            assert_eq!(
                Counter::o200k().count(&text),
                o.encode_ordinary(&text).len(),
                "{text:?}"
            );
            assert_eq!(cl.count(&text), c.encode_ordinary(&text).len(), "{text:?}");
            // Twice: the second time from the segment cache.
            assert_eq!(
                Counter::o200k().count(&text),
                o.encode_ordinary(&text).len(),
                "{text:?}"
            );
        }
    }

    /// `len` atoms drawn from `atoms` by a small deterministic generator.
    fn random_text(atoms: &[&str], seed: &mut u64, len: usize) -> String {
        (0..len)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                atoms[(*seed >> 33) as usize % atoms.len()]
            })
            .collect()
    }

    /// The hand-written ASCII pre-tokenizer cuts exactly where o200k's regex does.
    #[test]
    fn ascii_split_is_the_regex_split() {
        let atoms = [
            " ", "  ", "\t", "\n", "\r", "\r\n", "\u{b}", "\u{c}", "\u{1c}", "\u{1}", "\u{7f}",
            "a", "Ab", "ABC", "xyZ", "it", "'", "'s", "'S", "'re", "'VE", "'ll", "'Ll", "'d", "'x",
            "1", "12", "1234", ".", "/", "//", "\"", "{\"", "_", "-", "(", ")", ":", "\\", "!",
            "q", "Q", "de", "Mm",
        ];
        let tok = bpe_openai::o200k_base();
        let mut seed: u64 = 5;
        for round in 0..20_000 {
            let text = random_text(&atoms, &mut seed, 1 + round % 24);
            let ours: Vec<&str> = o200k_ascii_split(&text).collect();
            let theirs: Vec<&str> = tok.split(&text).collect();
            assert_eq!(ours, theirs, "{text:?}");
        }
    }

    /// tiktoken-rs's encoding tables are the reference: every piece of every shipped fixture
    /// transcript counts the same with both tokenizers, for both encodings.
    #[test]
    fn matches_tiktoken_on_fixtures() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let o = tiktoken_rs::o200k_base().unwrap();
        let c = tiktoken_rs::cl100k_base().unwrap();
        let mut checked = 0;
        let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::path);
        for entry in entries {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let src = std::fs::read_to_string(&path).unwrap();
            let Ok(t) = crate::transcript::parse(&src, None) else {
                continue;
            };
            let pieces = crate::report::Pieces::new(&t);
            for p in pieces.all() {
                assert_eq!(
                    Counter::o200k().count(p),
                    o.encode_ordinary(p).len(),
                    "{path:?}"
                );
                let cl = Counter {
                    encoding: Encoding::Cl100k,
                    exact: true,
                };
                assert_eq!(cl.count(p), c.encode_ordinary(p).len(), "{path:?}");
                checked += 1;
            }
        }
        assert!(checked > 300, "only {checked} pieces checked");
    }
}
