//! Faithful round trip: a transcript full of unknown fields, odd number spellings, escapes,
//! tabs and already-empty messages comes back byte for byte when nothing is decided, and with
//! only the decided text changed when something is.

use crate::support::{at, compact, decisions, fixture_text, lcc_run, lcc_stdin, tmp, with_text};

const NOTE: &str = "[identical output kept at t2]";

#[test]
fn nothing_decided_means_byte_identical() {
    // 7 messages, the first and the newest 6 pinned: nothing can be decided.
    let (run, report) = compact("roundtrip.json", &["--quiet"]);
    assert_eq!(run.out(), fixture_text("roundtrip.json"));
    assert!(decisions(&report)
        .iter()
        .all(|(_, d, r)| d == "keep" && r.starts_with("pinned_")));
    assert_eq!(report["messages_before"], 7);
    assert_eq!(
        report["messages_after"], 7,
        "already-empty messages are not removed"
    );
}

#[test]
fn one_decision_changes_only_its_text() {
    let (run, report) = compact("roundtrip.json", &["--preserve-recent", "0", "--quiet"]);
    assert_eq!(
        decisions(&report),
        vec![
            (
                "t1".into(),
                "dedupe".into(),
                "identical_output_kept_later".into()
            ),
            ("t2".into(), "keep".into(), "no_lossless_superseder".into()),
        ]
    );
    assert_eq!(report["tool_calls_deduped"], 1);
    assert_eq!(
        run.out(),
        with_text(&fixture_text("roundtrip.json"), "tool_use_id", "t1", NOTE)
    );
}

#[test]
fn crlf_line_endings_and_no_final_newline_survive() {
    let dir = tmp();
    let src = fixture_text("roundtrip.json");
    let crlf = src.trim_end().replace('\n', "\r\n");
    assert!(!crlf.ends_with('\n'));
    let input = at(dir.path(), "crlf.json");
    std::fs::write(&input, &crlf).unwrap();

    let r = lcc_run(&["compact", &input, "--quiet"]).expect(0);
    assert_eq!(r.out(), crlf);

    let r = lcc_run(&["compact", &input, "--quiet", "--preserve-recent", "0"]).expect(0);
    assert_eq!(r.out(), with_text(&crlf, "tool_use_id", "t1", NOTE));
}

#[test]
fn stdin_round_trip_is_byte_identical() {
    let src = fixture_text("roundtrip.json");
    let r = lcc_stdin(&["compact", "-", "--quiet"], src.as_bytes()).expect(0);
    assert_eq!(r.stdout, src.as_bytes());
}

#[test]
fn untouched_fixtures_come_back_identical() {
    // With every message pinned, each well-formed fixture is returned as it was.
    for name in [
        "spell-object-camel.json",
        "spell-bare-snake.json",
        "spell-tool-call-id.json",
        "spell-json-text.json",
        "lossless.json",
        "pinning.json",
        "session.json",
    ] {
        let (run, _) = compact(name, &["--quiet", "--preserve-recent", "100000"]);
        assert!(run.out() == fixture_text(name), "{name} changed");
    }
}
