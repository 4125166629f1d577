//! Everything `lcc compact` refuses: malformed input (exit 2, naming the file and the JSON
//! path), refused and out-of-range flags (exit 2, naming the flag), unreadable input (exit 1).
//! Nothing is written when the input is refused.

use crate::support::{at, fx, lcc_run, lcc_stdin, tmp};

/// Compact a malformed fixture with `-o` and `-r`; check the exit code, that the message
/// names the file, and that nothing was written.
#[track_caller]
fn refuse(name: &str) -> String {
    let dir = tmp();
    let out = at(dir.path(), "out.json");
    let report = at(dir.path(), "report.json");
    let path = fx(&format!("malformed/{name}"));
    let r = lcc_run(&["compact", &path, "-o", &out, "-r", &report]).expect(2);
    assert!(r.stdout.is_empty(), "{name}: nothing on stdout");
    assert!(
        r.stderr.starts_with(&format!("error: {path}: ")),
        "{name}: the message names the file: {}",
        r.stderr
    );
    assert_eq!(
        r.stderr.lines().count(),
        1,
        "{name}: one line: {}",
        r.stderr
    );
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "{name}: no output and no report are written"
    );
    r.stderr
        .trim_end()
        .strip_prefix(&format!("error: {path}: "))
        .unwrap()
        .to_string()
}

#[test]
fn invalid_json_gives_line_and_column() {
    assert_eq!(
        refuse("syntax.json"),
        "line 3, column 1: invalid JSON: expected a JSON value"
    );
    assert_eq!(
        refuse("empty.json"),
        "the input is empty (expected a JSON transcript or a JSONL session)"
    );
}

#[test]
fn invalid_utf8_names_the_byte() {
    assert_eq!(
        refuse("not-utf8.json"),
        "byte 30: the file is not valid UTF-8 (transcripts are UTF-8 JSON or JSONL)"
    );
}

#[test]
fn top_level_shapes_that_are_not_transcripts() {
    // The wording here belongs to format detection; only the exit code and file are pinned.
    refuse("scalar.json");
    refuse("no-messages.json");
}

#[test]
fn malformed_messages_name_their_json_path() {
    let cases = [
        (
            "messages-not-array.json",
            "messages: expected an array of messages, found an object",
        ),
        (
            "message-not-object.json",
            "messages[1]: every message must be an object, found a string",
        ),
        ("no-role.json", "[1]: message has no string 'role'"),
        ("role-not-string.json", "[0].role: expected a string, found a number"),
        ("text-not-string.json", "[0].text: expected a string, found an array"),
        ("calls-not-array.json", "[1].toolUses: expected an array, found an object"),
        (
            "call-not-object.json",
            "[1].toolUses[0]: tool call must be an object, found a string",
        ),
        (
            "call-no-id.json",
            "[1].toolUses[0]: call has no id (expected a non-empty string in tool_use_id, id or tool_call_id)",
        ),
        (
            "result-not-object.json",
            "[1].toolResults[0]: tool result must be an object, found a number",
        ),
        (
            "result-no-id.json",
            "[1].toolResults[0]: result has no id (expected a non-empty string in tool_use_id, id or tool_call_id)",
        ),
        (
            "duplicate-call-id.json",
            "[3].toolUses[0]: duplicate tool call id 'dup' (also at [1].toolUses[0])",
        ),
        (
            "duplicate-result-id.json",
            "[3].toolResults[0]: duplicate tool result id 'r1' (also at [2].toolResults[0])",
        ),
    ];
    for (name, want) in cases {
        assert_eq!(refuse(name), want, "{name}");
    }
}

#[test]
fn malformed_stdin_is_named_stdin() {
    let r = lcc_stdin(&["compact", "-"], b"[{\"role\": \"user\", \"text\": 5}]").expect(2);
    assert_eq!(
        r.stderr,
        "error: <stdin>: [0].text: expected a string, found a number\n"
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn unreadable_input_is_an_io_error() {
    let r = lcc_run(&["compact", "/nonexistent/lcc/in.json"]).expect(1);
    assert!(
        r.stderr
            .starts_with("error: could not read /nonexistent/lcc/in.json: "),
        "{}",
        r.stderr
    );
    let dir = tmp();
    let d = dir.path().to_string_lossy().into_owned();
    let r = lcc_run(&["compact", &d]).expect(1);
    assert!(r.stderr.contains("could not read"), "{}", r.stderr);
}

// ---------------------------------------------------------------------------------------
// Flags

/// Every block-mode flag of the Python release, with a value when it takes one.
const REFUSED: [(&str, Option<&str>); 19] = [
    ("--trim-threshold", Some("0.3")),
    ("--preserve-tail", Some("2")),
    ("--min-block-chars", Some("10")),
    ("--keep-regex", Some("TODO")),
    ("--protect-prefix", Some("1")),
    ("--prefix-marker", Some("##")),
    ("--decisions-cache", Some("cache.json")),
    ("--no-marker", None),
    ("--marker-scores", Some("on")),
    ("--append-to", Some("log.json")),
    ("--require-exact-tokens", None),
    ("--semantic-verify", None),
    ("--no-sufficiency", None),
    ("--max-restorations", Some("3")),
    ("--confidence-threshold", Some("0.8")),
    ("--laya-model", Some("m")),
    ("--laya-device", Some("cpu")),
    ("--laya-context-limit", Some("4096")),
    ("--laya-temperature", Some("0")),
];

/// Run compact on a good fixture with extra flags; expect exit 2 and return the message.
#[track_caller]
fn flag_error(flags: &[&str]) -> String {
    let mut args = vec!["compact".to_string(), fx("spell-object-camel.json")];
    args.extend(flags.iter().map(|s| (*s).to_string()));
    let r = lcc_run(&args).expect(2);
    assert!(r.stdout.is_empty());
    r.stderr
}

#[test]
fn every_block_mode_flag_is_refused_by_name() {
    for (flag, value) in REFUSED {
        let mut flags = vec![flag];
        flags.extend(value);
        assert_eq!(
            flag_error(&flags),
            format!(
                "error: these options do not apply to --mode tool-calls: {flag} (they belong to block mode, which this tool does not implement)\n"
            ),
            "{flag}"
        );
    }
}

#[test]
fn several_refused_flags_are_listed_together_before_the_input_is_read() {
    // The input does not exist: flags are checked first, so this is exit 2, not 1.
    let r = lcc_run(&[
        "compact",
        "/nonexistent/in.json",
        "--no-marker",
        "--trim-threshold",
        "0.2",
        "--laya-device",
        "cpu",
    ])
    .expect(2);
    assert!(
        r.stderr
            .contains(": --trim-threshold, --no-marker, --laya-device ("),
        "{}",
        r.stderr
    );
}

#[test]
fn mechanical_and_unknown_providers_are_refused() {
    for p in ["mechanical", "nimble"] {
        let e = flag_error(&["--provider", p]);
        assert!(e.contains(&format!("'{p}' cannot answer")), "{e}");
    }
    assert_eq!(
        flag_error(&["--provider", "gpt"]),
        "error: unknown provider 'gpt' for --provider; expected auto, jev, laya or rules\n"
    );
}

#[test]
fn other_modes_are_refused() {
    assert!(flag_error(&["--mode", "blocks"])
        .starts_with("error: --mode blocks is not part of this tool"));
    assert_eq!(
        flag_error(&["--mode", "lines"]),
        "error: --mode must be 'tool-calls' (got 'lines')\n"
    );
    assert!(flag_error(&["--rules-mode", "greedy"]).starts_with(
        "error: --rules-mode must be one of lossless, recoverable, lossy, stashed (got 'greedy')"
    ));
}

#[test]
fn out_of_range_values_name_the_flag() {
    let cases: [(&[&str], &str); 11] = [
        (
            &["--threshold", "1.5"],
            "--threshold must be between 0 and 1 (got 1.5)",
        ),
        (
            &["--threshold=-0.1"],
            "--threshold must be between 0 and 1 (got -0.1)",
        ),
        (
            &["--trim-head-chars=-1"],
            "--trim-head-chars must be >= 0 (got -1)",
        ),
        (
            &["--preserve-recent=-2"],
            "--preserve-recent must be >= 0 (got -2)",
        ),
        (
            &["--max-state-tokens", "10"],
            "--max-state-tokens must be >= 64 (got 10)",
        ),
        (
            &["--max-state-tokens", "5000", "--max-request-tokens", "5000"],
            "--max-request-tokens must be greater than --max-state-tokens (got 5000 <= 5000)",
        ),
        (&["--batch-size", "0"], "--batch-size must be >= 1 (got 0)"),
        (
            &["--max-workers", "0"],
            "--max-workers must be >= 1 (got 0)",
        ),
        (
            &["--max-workers", "65"],
            "--max-workers must be between 1 and 64 (got 65)",
        ),
        (
            &["--min-reduction", "2"],
            "--min-reduction must be between 0 and 1 (got 2)",
        ),
        (&["--model", " "], "--model must not be empty"),
    ];
    for (flags, want) in cases {
        assert_eq!(flag_error(flags), format!("error: {want}\n"), "{flags:?}");
    }
}

#[test]
fn unknown_flags_and_bad_numbers_are_usage_errors() {
    let e = flag_error(&["--frobnicate"]);
    assert!(e.contains("--frobnicate"), "{e}");
    let e = flag_error(&["--threshold", "high"]);
    assert!(e.contains("--threshold"), "{e}");
}
