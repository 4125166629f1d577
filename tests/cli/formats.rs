//! Real session formats in and out (issue 6): every format is detected, compacted with
//! `--provider rules` (lossless), written back in its own format with untouched records
//! byte-identical and no orphan created, and decided exactly as the same session in lcc's own
//! shape. Also: detection errors, `--format`, `--strict`, torn and pretty-printed JSONL, and
//! the public real sessions in `../shared/real-sessions` when that folder is there.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use lcc::transcript::{self, Format, Transcript};
use serde_json::Value;

use crate::support::{fixture, lcc, run};

const FIXTURES: [(&str, Format); 5] = [
    ("claude-code.jsonl", Format::ClaudeCode),
    ("anthropic.json", Format::Anthropic),
    ("openai-chat.json", Format::OpenAiChat),
    ("openai-responses.json", Format::OpenAiResponses),
    ("codex.jsonl", Format::Codex),
];

fn format_fixture(name: &str) -> PathBuf {
    fixture(&format!("formats/{name}"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

struct Run {
    status: i32,
    stderr: String,
    output: Option<String>,
    report: Option<Value>,
}

/// `lcc compact INPUT --provider rules -o OUT -r REPORT [extra]`.
fn compact(input: &Path, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let rep = dir.path().join("report.json");
    let o = run(lcc()
        .arg("compact")
        .arg(input)
        .args(["--provider", "rules", "-q", "fix the parser"])
        .arg("-o")
        .arg(&out)
        .arg("-r")
        .arg(&rep)
        .args(extra));
    Run {
        status: o.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        output: std::fs::read_to_string(&out).ok(),
        report: std::fs::read_to_string(&rep)
            .ok()
            .map(|r| serde_json::from_str(&r).unwrap()),
    }
}

fn span<'s>(t: &Transcript, src: &'s str, mi: usize) -> (usize, usize, &'s str) {
    let s = t.messages[mi].slot;
    let (a, b) = t.layout.containers[s.container].children[s.index];
    (a, b, &src[a..b])
}

/// The decisions that matter for parity, in report order.
fn decisions(report: &Value) -> Vec<Value> {
    report["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            serde_json::json!([
                d["id"],
                d["decision"],
                d["reason"],
                d["source"],
                d["message_index"],
                d["result_message_index"],
                d["kept_at"],
                d["note"],
                d["tool"],
                d["chars"],
                d["chars_after"]
            ])
        })
        .collect()
}

/// Output in the input's own format; untouched messages and everything between them
/// byte-identical; no orphan created; the same decisions as the lcc-shape twin.
fn check_round_trip(input: &Path, format: Format, run: &Run) {
    let name = input.display();
    assert_eq!(run.status, 0, "{name}: {}", run.stderr);
    let report = run.report.as_ref().unwrap();
    assert_eq!(report["input_format"], format.name(), "{name}");
    let src = read(input);
    let out = run.output.as_deref().unwrap();
    let before = transcript::parse(&src, None).unwrap();
    let after = transcript::parse(out, Some(format)).unwrap_or_else(|e| {
        panic!(
            "{name}: the output does not parse as {}: {e}",
            format.name()
        )
    });
    assert_eq!(
        transcript::detect(out).unwrap(),
        format,
        "{name}: output detected"
    );

    // Lossless never removes a message: compare message by message.
    assert_eq!(before.messages.len(), after.messages.len(), "{name}");
    let changed: HashSet<&str> = report["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["decision"] != "keep")
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    let mut expected = String::new();
    let mut pos = 0;
    for (mi, m) in before.messages.iter().enumerate() {
        let (a, b, raw) = span(&before, &src, mi);
        let (_, _, raw_after) = span(&after, out, mi);
        if m.results.iter().any(|r| changed.contains(r.id.as_str())) {
            expected.push_str(&src[pos..a]);
            expected.push_str(raw_after);
            pos = b;
        } else {
            assert_eq!(raw, raw_after, "{name}: untouched message {mi} changed");
        }
    }
    expected.push_str(&src[pos..]);
    assert!(
        expected == out,
        "{name}: bytes outside the changed messages differ"
    );

    // No orphan: a call has its result after exactly when it had one before, and the reverse.
    let ids = |t: &Transcript| -> (HashSet<String>, HashSet<String>) {
        let calls = t
            .messages
            .iter()
            .flat_map(|m| m.calls.iter().map(|c| c.id.clone()));
        let results = t
            .messages
            .iter()
            .flat_map(|m| m.results.iter().map(|r| r.id.clone()));
        (calls.collect(), results.collect())
    };
    let (calls_before, results_before) = ids(&before);
    let (calls_after, results_after) = ids(&after);
    assert_eq!(calls_before, calls_after, "{name}");
    assert_eq!(results_before, results_after, "{name}");

    // The same session in lcc's shape is decided the same way.
    let dir = tempfile::tempdir().unwrap();
    let twin = dir.path().join("twin.json");
    std::fs::write(&twin, transcript::lcc::write(&before)).unwrap();
    let twin_run = compact(&twin, &[]);
    assert_eq!(twin_run.status, 0, "{}", twin_run.stderr);
    let twin_report = twin_run.report.unwrap();
    assert_eq!(twin_report["input_format"], "lcc");
    assert_eq!(
        decisions(report),
        decisions(&twin_report),
        "{name}: decisions differ from the lcc-shape twin"
    );
    for key in ["messages_before", "tool_calls_total", "blocks_total"] {
        assert_eq!(report[key], twin_report[key], "{name}: {key}");
    }
}

#[test]
fn every_format_round_trips_with_rules_lossless() {
    for (name, format) in FIXTURES {
        let input = format_fixture(name);
        let r = compact(&input, &[]);
        check_round_trip(&input, format, &r);
        let report = r.report.as_ref().unwrap();
        // The repeated read is deduped against the later one, nothing else changes.
        let deduped: Vec<&Value> = report["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["decision"] == "dedupe")
            .collect();
        assert_eq!(deduped.len(), 1, "{name}");
        assert!(deduped[0]["id"].as_str().unwrap().ends_with("R2"), "{name}");
        assert_eq!(report["semantic_guarantee"], "lossless", "{name}");
        assert!(!report["degraded"].as_bool().unwrap(), "{name}");
        // Forcing the detected format changes nothing.
        let forced = compact(&input, &["--format", format.name()]);
        assert_eq!(forced.status, 0);
        assert_eq!(forced.output, r.output, "{name}");
    }
}

#[test]
fn odd_bytes_survive_in_every_format() {
    for (name, _) in FIXTURES {
        let input = format_fixture(name);
        let src = read(&input);
        let r = compact(&input, &[]);
        let out = r.output.unwrap();
        for odd in [
            "\\ud83d", "5.70E1", "4.25e4", "1.0e0", "2.50e-1", "1.6e4", "2.8e1",
        ] {
            assert_eq!(
                src.matches(odd).count(),
                out.matches(odd).count(),
                "{name}: {odd}"
            );
        }
    }
}

fn write_temp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn unknown_or_ambiguous_input_exits_2_naming_format() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "plain.json",
            r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]"#,
        ),
        ("object.json", r#"{"session": {"turns": []}}"#),
        ("stream.jsonl", "{\"event\": 1}\n{\"event\": 2}\n"),
        (
            "mixed.json",
            r#"[{"role": "user", "text": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}]"#,
        ),
    ];
    for (name, text) in cases {
        let p = write_temp(&dir, name, text);
        let r = compact(&p, &[]);
        assert_eq!(r.status, 2, "{name}: {}", r.stderr);
        assert!(r.stderr.contains("--format"), "{name}: {}", r.stderr);
        assert!(
            r.stderr.contains(name),
            "{name}: the file is named: {}",
            r.stderr
        );
        assert!(r.output.is_none(), "{name}: nothing is written");
    }
    // Naming the format settles it.
    let p = dir.path().join("plain.json");
    let r = compact(&p, &["--format", "anthropic"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.report.unwrap()["input_format"], "anthropic");
    assert_eq!(r.output.unwrap(), read(&p));
}

#[test]
fn unknown_format_name_is_refused() {
    let r = compact(&format_fixture("anthropic.json"), &["--format", "gemini"]);
    assert_eq!(r.status, 2);
    assert!(
        r.stderr.contains("--format") && r.stderr.contains("claude-code"),
        "{}",
        r.stderr
    );
}

#[test]
fn each_fixture_is_detected() {
    for (name, format) in FIXTURES {
        let src = read(&format_fixture(name));
        assert_eq!(transcript::detect(&src).unwrap(), format, "{name}");
    }
}

const TORN: &str = r#"{"parentUuid":"a0000000-0000-4000-8000-000000000021","isSidechain":false,"type":"user","message":{"role":"user","content":"and now the lex"#;

#[test]
fn torn_last_line_is_reported_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let src = read(&format_fixture("claude-code.jsonl")) + TORN;
    let p = write_temp(&dir, "torn.jsonl", &src);
    let r = compact(&p, &[]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("warning: line 23: the last record is incomplete"),
        "{}",
        r.stderr
    );
    let report = r.report.unwrap();
    assert!(report["warnings"][0]
        .as_str()
        .unwrap()
        .starts_with("line 23: the last record is incomplete"));
    let out = r.output.unwrap();
    assert!(
        out.ends_with(&format!("\n{TORN}")),
        "the torn line is kept as it was"
    );
    assert_eq!(report["tool_calls_deduped"], 1, "the rest is compacted");

    let strict = compact(&p, &["--strict"]);
    assert_eq!(strict.status, 2);
    assert!(
        strict.stderr.contains("line 23") && strict.stderr.contains("--strict"),
        "{}",
        strict.stderr
    );
    assert!(strict.output.is_none());
    // A broken line that is not the last one is malformed input.
    let mid = read(&format_fixture("claude-code.jsonl")).replacen("\n", "\n{\"type\":\n", 1);
    let p = write_temp(&dir, "mid.jsonl", &mid);
    let r = compact(&p, &[]);
    assert_eq!(r.status, 2);
    assert!(
        r.stderr.contains("line 2: this record is not valid JSON"),
        "{}",
        r.stderr
    );
}

/// Re-indent a compact JSON line (no lone surrogates in it) over several lines.
fn pretty(line: &str) -> String {
    let v: Value = serde_json::from_str(&line.replace("\\ud83d", "\\u00e9")).unwrap();
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn pretty_printed_claude_code_records_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let src = read(&format_fixture("claude-code.jsonl"));
    let text: String = src.lines().map(|l| pretty(l) + "\n").collect();
    assert!(text.lines().count() > 200);
    let p = write_temp(&dir, "pretty.jsonl", &text);
    let r = compact(&p, &[]);
    check_round_trip(&p, Format::ClaudeCode, &r);
    let compact_run = compact(&format_fixture("claude-code.jsonl"), &[]);
    assert_eq!(
        decisions(r.report.as_ref().unwrap()),
        decisions(compact_run.report.as_ref().unwrap())
    );
}

#[test]
fn explain_source_reads_every_format() {
    for (name, _) in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        let rep = dir.path().join("r.json");
        let input = format_fixture(name);
        let o = run(lcc()
            .arg("compact")
            .arg(&input)
            .args(["--provider", "rules", "--dry-run", "--quiet", "-r"])
            .arg(&rep));
        assert!(o.status.success());
        let o = run(lcc().arg("explain").arg(&rep).arg("--source").arg(&input));
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// The public sessions collected in `../shared/real-sessions` (see its PROVENANCE.md). They
/// are not part of this repository; the test says so and passes when they are absent.
#[test]
fn real_sessions_round_trip() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/real-sessions");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!(
            "notice: {} is absent; skipping the real-session round trips",
            dir.display()
        );
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x != "md"))
        .collect();
    files.sort();
    let mut seen = HashSet::new();
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let format = match name.split("__").next().unwrap() {
            "claude-code" => Format::ClaudeCode,
            "codex" => Format::Codex,
            "openai-chat" => Format::OpenAiChat,
            "lcc" => Format::Lcc,
            other => panic!("{name}: unknown format prefix {other}"),
        };
        seen.insert(format);
        let r = compact(p, &[]);
        check_round_trip(p, format, &r);
    }
    assert!(
        seen.len() >= 3,
        "expected several formats in {}",
        dir.display()
    );
}
