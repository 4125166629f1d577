//! A JSONL stream read record by record, with the spans rebuild needs.
//!
//! Each record is one JSON value. The usual file has one per line; a record that does not
//! parse on its own line is read again as a value that may span lines (pretty-printed
//! exports). A record's span runs from the start of its first line through the line ending
//! after it, so removing the span removes the record's lines cleanly; blank lines belong to no
//! record and are never touched.
//!
//! A final record that cannot be completed (the writer was killed mid-line) is not an error:
//! it is left as it was, outside every record, and reported as a warning. A broken record
//! followed by more data is an error (exit 2).

use crate::json::{self, Node};

use super::ParseError;

/// One record of the stream.
pub struct Record {
    pub node: Node,
    /// Bytes to remove to remove the record (its lines and their line ending).
    pub span: (usize, usize),
    /// 1-based line where the record starts.
    pub line: usize,
}

fn is_blank_bytes(b: &[u8]) -> bool {
    b.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
}

/// Call `f` for every record, in order. Returns the reading warnings (a torn last record).
pub fn for_each(
    src: &str,
    f: impl FnMut(Record) -> Result<(), ParseError>,
) -> Result<Vec<String>, ParseError> {
    walk(src, usize::MAX, f)
}

/// Check that a stream reads back: every record valid JSON, the same rules as [`for_each`]
/// (a torn last record is a warning, not an error). A record that sits on one line (the usual
/// file) is only syntax-checked, without building its value.
pub fn check(src: &str) -> Result<(), ParseError> {
    walk(src, 0, |_| Ok(())).map(drop)
}

/// [`for_each`], with one-line records built only `build_depth` levels deep.
fn walk(
    src: &str,
    build_depth: usize,
    mut f: impl FnMut(Record) -> Result<(), ParseError>,
) -> Result<Vec<String>, ParseError> {
    let b = src.as_bytes();
    let mut pos = if src.starts_with('\u{feff}') { 3 } else { 0 };
    let mut line = 1;
    let mut warnings = Vec::new();
    while pos < b.len() {
        let nl = memchr_nl(b, pos);
        let line_end = nl.map_or(b.len(), |i| i + 1);
        let content_end = nl.unwrap_or(b.len());
        if is_blank_bytes(&b[pos..content_end]) {
            pos = line_end;
            line += 1;
            continue;
        }
        // Fast path: the record is exactly this line.
        if let Ok(node) = json::parse_shallow(src, pos, content_end, build_depth) {
            f(Record {
                node,
                span: (pos, line_end),
                line,
            })?;
            pos = line_end;
            line += 1;
            continue;
        }
        // A value that may span lines, or several values on one line.
        match json::parse_value_at(src, pos) {
            Ok(node) => {
                let mut end = node.end;
                while matches!(b.get(end), Some(b' ' | b'\t' | b'\r')) {
                    end += 1;
                }
                match b.get(end) {
                    Some(b'\n') => end += 1,
                    None => {}
                    Some(_) => end = node.end, // another value follows on the same line
                }
                let start_line = line;
                line += b[pos..end].iter().filter(|&&c| c == b'\n').count();
                f(Record {
                    node,
                    span: (pos, end),
                    line: start_line,
                })?;
                pos = end;
            }
            Err(e) => {
                let last_content = b
                    .iter()
                    .rposition(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
                    .map_or(0, |i| i + 1);
                let on_last_line = !b[pos..last_content].contains(&b'\n');
                if on_last_line || e.offset >= last_content {
                    warnings.push(format!(
                        "line {line}: the last record is incomplete (a torn write?); it was left as it was and not compacted"
                    ));
                    break;
                }
                let (l, c) = json::line_col(src, e.offset);
                return Err(ParseError::new(
                    format!("line {line}"),
                    format!(
                        "this record is not valid JSON: {} (at line {l}, column {c})",
                        e.message
                    ),
                ));
            }
        }
    }
    Ok(warnings)
}

fn memchr_nl(b: &[u8], from: usize) -> Option<usize> {
    b[from..].iter().position(|&c| c == b'\n').map(|i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(src: &str) -> (Vec<(usize, usize, usize)>, Vec<String>) {
        let mut out = Vec::new();
        let w = for_each(src, |r| {
            out.push((r.span.0, r.span.1, r.line));
            Ok(())
        })
        .unwrap();
        (out, w)
    }

    #[test]
    fn check_agrees_with_the_reader() {
        for (src, ok) in [
            ("{\"a\":1}\n\n{\"b\":[2]}\r\n", true),
            ("{\"a\":\n 1}\n{\"b\":2}\n", true),
            ("{\"a\":1}\n{\"b\":", true),
            ("{\"a\":1}\n{\"b\":\n{\"c\":3}\n", true), // torn: the last record never closes
            ("{\"a\":1}\n{\"b\"\n{\"c\":3}\n", false),
            ("{\"a\":1} x\n{\"b\":2}\n", false),
        ] {
            assert_eq!(check(src).is_ok(), ok, "{src:?}");
            assert_eq!(for_each(src, |_| Ok(())).is_ok(), ok, "{src:?}");
        }
    }

    #[test]
    fn lines_blank_lines_and_crlf() {
        let src = "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}";
        let (s, w) = spans(src);
        assert_eq!(s, vec![(0, 8, 1), (9, 18, 3), (18, 25, 4)]);
        assert!(w.is_empty());
    }

    #[test]
    fn pretty_printed_records() {
        let src = "{\n  \"a\": 1\n}\n{\n  \"b\": [\n    2\n  ]\n}\n";
        let (s, _) = spans(src);
        assert_eq!(s.len(), 2);
        assert_eq!(&src[s[0].0..s[0].1], "{\n  \"a\": 1\n}\n");
        assert_eq!(s[1].2, 4);
        assert_eq!(s[1].1, src.len());
    }

    #[test]
    fn torn_last_record_is_a_warning() {
        for torn in ["{\"a\":\"x", "{\"a\": tr", "{\"a\":1,", "{\n  \"a\": [1,\n"] {
            let src = format!("{{\"ok\":1}}\n{torn}");
            let (s, w) = spans(&src);
            assert_eq!(s.len(), 1, "{torn}");
            assert_eq!(w.len(), 1, "{torn}");
            assert!(w[0].starts_with("line 2:"), "{}", w[0]);
        }
    }

    #[test]
    fn broken_record_in_the_middle_is_an_error() {
        let src = "{\"ok\":1}\n{\"a\":]\n{\"b\":2}\n";
        let e = for_each(src, |_| Ok(())).unwrap_err();
        assert_eq!(e.path, "line 2", "{e}");
        assert!(e.message.contains("line 2, column 6"), "{e}");
    }

    #[test]
    fn several_values_on_a_line() {
        let src = "{\"a\":1} {\"b\":2}\n{\"c\":3}\n";
        let (s, _) = spans(src);
        assert_eq!(s, vec![(0, 7, 1), (7, 16, 1), (16, 24, 2)]);
    }
}
