//! `lcc compact` on well-formed inputs: every accepted spelling, pinning, and the lossless
//! rules policy (both pointer kinds, is_error, Codex headers, replaced results as targets).
//! `support::lcc()` disables the network, so `auto` runs rules lossless.

use crate::support::{compact, decision, decisions, fixture_text, lcc_stdin, with_text, Run};

/// The failing-test output that appears twice in every spelling fixture, as written there.
const NOTE_A: &str = "[identical output kept at call_b]";

fn dd(id: &str, decision: &str, reason: &str) -> (String, String, String) {
    (id.into(), decision.into(), reason.into())
}

#[track_caller]
fn assert_spelling(name: &str, id_key: &str) {
    let (run, report) = compact(name, &["--preserve-recent", "0", "--quiet"]);
    let src = fixture_text(name);
    assert_eq!(
        run.out(),
        with_text(&src, id_key, "call_a", NOTE_A),
        "{name}: only call_a's text changes"
    );
    assert_eq!(
        decisions(&report),
        vec![
            dd("call_a", "dedupe", "identical_output_kept_later"),
            dd("call_b", "keep", "no_lossless_superseder"),
        ],
        "{name}"
    );
    let a = decision(&report, "call_a");
    assert_eq!(a["kept_at"], "call_b", "{name}");
    assert_eq!(a["tool"], "Bash", "{name}: tool read from `tool` or `name`");
    assert_eq!(a["message_index"], 1, "{name}");
    assert_eq!(a["result_message_index"], 2, "{name}");
    assert_eq!(report["input_format"], "lcc", "{name}");
    assert_eq!(report["messages_before"], 5, "{name}");
    assert_eq!(report["messages_after"], 5, "{name}");
    assert_eq!(report["tool_calls_total"], 2, "{name}");
}

#[test]
fn object_with_messages_camel_case_and_extra_top_level_keys() {
    assert_spelling("spell-object-camel.json", "tool_use_id");
}

#[test]
fn bare_array_snake_case_with_id_and_name() {
    assert_spelling("spell-bare-snake.json", "id");
}

#[test]
fn tool_call_id_null_text_null_blocks_and_mixed_block_keys() {
    assert_spelling("spell-tool-call-id.json", "tool_call_id");
}

#[test]
fn stdin_is_read_with_a_dash() {
    let src = fixture_text("spell-object-camel.json");
    let r = lcc_stdin(
        &["compact", "-", "--preserve-recent", "0", "--quiet"],
        src.as_bytes(),
    )
    .expect(0);
    assert_eq!(r.out(), with_text(&src, "tool_use_id", "call_a", NOTE_A));
}

#[test]
fn json_result_texts_and_a_call_without_a_result() {
    let name = "spell-json-text.json";
    let (run, report) = compact(name, &["--preserve-recent", "0", "--quiet"]);
    let src = fixture_text(name);
    assert_eq!(
        run.out(),
        with_text(
            &src,
            "tool_use_id",
            "cov_1",
            "[identical output kept at cov_2]"
        )
    );
    // The pending call is counted but neither pinned nor judged.
    assert_eq!(
        decisions(&report),
        vec![
            dd("cov_1", "dedupe", "identical_output_kept_later"),
            dd("cov_2", "keep", "no_lossless_superseder"),
        ]
    );
    assert_eq!(report["tool_calls_total"], 3);
    assert_eq!(report["blocks_total"], 2);
}

// ---------------------------------------------------------------------------------------
// Pinning

#[test]
fn pinned_messages_are_never_changed_even_through_their_result() {
    // Message 0 holds p0's call; c3's call (message 6) is not pinned but its result
    // (message 7) is, with --preserve-recent 3. Both would be deduped if they were judged.
    let (run, report) = compact("pinning.json", &["--preserve-recent", "3", "--quiet"]);
    assert_eq!(run.out(), fixture_text("pinning.json"));
    assert_eq!(
        decisions(&report),
        vec![
            dd("p0", "keep", "pinned_first_message"),
            dd("c3", "keep", "pinned_recent"),
            dd("c4", "keep", "pinned_recent"),
            dd("c1", "keep", "no_lossless_superseder"),
        ]
    );
    let c3 = decision(&report, "c3");
    assert_eq!(c3["source"], "pin");
    assert_eq!(c3["message_index"], 6);
    assert_eq!(c3["result_message_index"], 7);
    assert_eq!(c3["chars"], c3["chars_after"]);
    assert_eq!(report["blocks_protected"], 3);
    assert_eq!(report["blocks_total"], 4);
    assert_eq!(report["tool_calls_kept"], 1, "pins are not counted as kept");
}

#[test]
fn without_recent_pins_the_same_pair_is_deduped() {
    // The control for the test above: the fixture does exercise the pin.
    let (_, report) = compact("pinning.json", &["--preserve-recent", "0", "--quiet"]);
    assert_eq!(
        decisions(&report),
        vec![
            dd("p0", "keep", "pinned_first_message"),
            dd("c1", "keep", "no_lossless_superseder"),
            dd("c3", "dedupe", "identical_output_kept_later"),
            dd("c4", "keep", "no_lossless_superseder"),
        ]
    );
}

#[test]
fn nothing_to_score_when_everything_is_pinned() {
    let name = "spell-object-camel.json";
    let (run, report) = compact(name, &["--preserve-recent", "50", "--quiet"]);
    assert_eq!(run.out(), fixture_text(name));
    assert_eq!(report["degraded"], false);
    assert_eq!(report["degradation_reason"], "no_candidates");
    assert_eq!(report["blocks_scored"], 0);
    assert!(report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().starts_with("no_scorable_tool_calls")));
    assert!(decisions(&report).iter().all(|(_, d, _)| d == "keep"));
}

// ---------------------------------------------------------------------------------------
// Lossless pointers

fn lossless() -> (Run, serde_json::Value) {
    compact("lossless.json", &["--preserve-recent", "0", "--quiet"])
}

/// Result texts by id, from a transcript in lcc's object shape.
fn texts(transcript: &str) -> std::collections::HashMap<String, String> {
    let v: serde_json::Value = serde_json::from_str(transcript).unwrap();
    let mut out = std::collections::HashMap::new();
    for m in v["messages"].as_array().unwrap() {
        for r in m["toolResults"].as_array().into_iter().flatten() {
            out.insert(
                r["tool_use_id"].as_str().unwrap().to_string(),
                r["text"].as_str().unwrap().to_string(),
            );
        }
    }
    out
}

#[test]
fn lossless_decisions_on_every_case() {
    let (_, report) = lossless();
    assert_eq!(
        decisions(&report),
        vec![
            dd("read_1", "dedupe", "identical_output_kept_later"),
            dd("grep_1", "dedupe", "output_lines_of_later"),
            dd("read_2", "keep", "no_lossless_superseder"),
            // Same text, but only err_1 failed: never a pointer across is_error.
            dd("err_1", "keep", "no_lossless_superseder"),
            dd("err_2", "keep", "no_lossless_superseder"),
            // Exit code 101 vs 0: Codex exit codes are compared.
            dd("cx_0", "keep", "no_lossless_superseder"),
            // Chunk ID, Wall time and Original token count differ: ignored.
            dd("cx_1", "dedupe", "identical_output_kept_later"),
            dd("cx_2", "keep", "no_lossless_superseder"),
            dd("st_1", "dedupe", "identical_output_kept_later"),
            dd("st_2", "dedupe", "identical_output_kept_later"),
            dd("st_3", "keep", "no_lossless_superseder"),
            // A pointer would not be shorter than "ok"; empty texts are never deduped.
            dd("ok_1", "keep", "no_lossless_superseder"),
            dd("ok_2", "keep", "no_lossless_superseder"),
            dd("nil_1", "keep", "no_lossless_superseder"),
            dd("nil_2", "keep", "no_lossless_superseder"),
        ]
    );
    let notes: Vec<(&str, &str, &str)> = ["read_1", "grep_1", "cx_1", "st_1", "st_2"]
        .iter()
        .map(|id| {
            let d = decision(&report, id);
            (
                *id,
                d["kept_at"].as_str().unwrap(),
                d["note"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        notes,
        vec![
            ("read_1", "read_2", "[identical output kept at read_2]"),
            ("grep_1", "read_2", "[output = lines 2-4 of read_2]"),
            ("cx_1", "cx_2", "[identical output kept at cx_2]"),
            // st_2 is replaced, so st_1 points past it to st_3.
            ("st_1", "st_3", "[identical output kept at st_3]"),
            ("st_2", "st_3", "[identical output kept at st_3]"),
        ]
    );
    assert_eq!(report["semantic_guarantee"], "lossless");
    assert_eq!(report["rules_mode"], "lossless");
    assert_eq!(report["provider_used"], "rules");
    assert_eq!(report["lossless_violations"], serde_json::json!([]));
    assert_eq!(report["tool_calls_deduped"], 5);
    assert_eq!(report["tool_calls_kept"], 10);
}

#[test]
fn lossless_output_changes_only_the_deduped_texts() {
    let (run, report) = lossless();
    let mut expected = fixture_text("lossless.json");
    for d in report["decisions"].as_array().unwrap() {
        if d["decision"] == "dedupe" {
            let id = d["id"].as_str().unwrap();
            expected = with_text(&expected, "tool_use_id", id, d["note"].as_str().unwrap());
        }
    }
    assert_eq!(run.out(), expected);
}

#[test]
fn every_pointer_rebuilds_its_original_from_the_output_alone() {
    let (run, report) = lossless();
    let before = texts(&fixture_text("lossless.json"));
    let after = texts(&run.out());
    let codex_body = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| {
                !["Chunk ID:", "Wall time:", "Original token count:"]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .map(str::to_string)
            .collect()
    };
    let mut checked = 0;
    for (id, note) in &after {
        if let Some(rest) = note.strip_prefix("[identical output kept at ") {
            let target = rest.strip_suffix(']').unwrap();
            assert_eq!(after[target], before[target], "{id}: target unchanged");
            assert_eq!(codex_body(&after[target]), codex_body(&before[id]), "{id}");
            checked += 1;
        } else if let Some(rest) = note.strip_prefix("[output = lines ") {
            let (range, target) = rest.strip_suffix(']').unwrap().split_once(" of ").unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
            let lines: Vec<&str> = after[target].split('\n').collect();
            assert_eq!(lines[a - 1..b].join("\n"), before[id], "{id}");
            checked += 1;
        }
    }
    assert_eq!(checked, 5);
    assert_eq!(report["tool_calls_deduped"], checked);
}

#[test]
fn per_decision_chars_match_the_texts() {
    let (_, report) = lossless();
    let before = texts(&fixture_text("lossless.json"));
    for d in report["decisions"].as_array().unwrap() {
        let id = d["id"].as_str().unwrap();
        let chars = d["chars"].as_u64().unwrap();
        let after = d["chars_after"].as_u64().unwrap();
        let tokens = d["tokens"].as_u64().unwrap();
        let tokens_after = d["tokens_after"].as_u64().unwrap();
        if d["decision"] == "dedupe" {
            let old = before[id].chars().count() as u64;
            let new = d["note"].as_str().unwrap().chars().count() as u64;
            assert_eq!(chars - after, old - new, "{id}");
            assert!(tokens_after < tokens, "{id}");
        } else {
            assert_eq!(chars, after, "{id}");
            assert_eq!(tokens, tokens_after, "{id}");
        }
    }
    let sum = |k: &str| -> u64 {
        report["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d[k].as_u64().unwrap())
            .sum()
    };
    assert_eq!(report["tool_chars_before"].as_u64().unwrap(), sum("chars"));
    assert_eq!(
        report["tool_chars_after"].as_u64().unwrap(),
        sum("chars_after")
    );
    let saved = sum("chars") - sum("chars_after");
    assert_eq!(
        report["chars_before"].as_u64().unwrap() - report["chars_after"].as_u64().unwrap(),
        saved
    );
    assert_eq!(
        report["tokens_before"].as_u64().unwrap() - report["tokens_after"].as_u64().unwrap(),
        sum("tokens") - sum("tokens_after")
    );
}

#[test]
fn the_realistic_session_has_lossless_dedupes() {
    let (run, report) = compact(
        "session.json",
        &["-q", "fix the KeyError in src/lexer.py", "--quiet"],
    );
    let deduped = report["tool_calls_deduped"].as_u64().unwrap();
    assert!(deduped >= 3, "only {deduped} dedupes on session.json");
    assert_eq!(report["messages_before"], 120);
    assert_eq!(report["messages_after"], 120);
    assert!(report["tokens_after"].as_u64() < report["tokens_before"].as_u64());
    assert_eq!(report["objective"], "fix the KeyError in src/lexer.py");
    // Every pointer names a call that is kept in the output.
    let out = run.out();
    for d in report["decisions"].as_array().unwrap() {
        if d["decision"] == "dedupe" {
            let note = d["note"].as_str().unwrap();
            assert!(out.contains(&serde_json::to_string(note).unwrap()));
            assert_eq!(
                decision(&report, d["kept_at"].as_str().unwrap())["decision"],
                "keep"
            );
        }
    }
}
