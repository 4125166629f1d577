//! `lcc explain`: a report with every decision kind and every reason code, `--source`,
//! `--only`, `--limit`, malformed reports, and reports written by `lcc compact`.

use crate::support::{at, fx, lcc_run, tmp, Run};

fn explain(args: &[&str]) -> Run {
    let mut a = vec!["explain"];
    a.extend_from_slice(args);
    lcc_run(&a)
}

fn all_kinds(extra: &[&str]) -> String {
    let path = fx("reports/all-kinds.json");
    let mut a = vec![path.as_str()];
    a.extend_from_slice(extra);
    explain(&a).expect(0).out()
}

/// The group header lines of an explanation, in order.
fn groups(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|w| {
            !w[1].is_empty() && w[1].chars().all(|c| c == '-') && w[1].len() == w[0].chars().count()
        })
        .map(|w| w[0])
        .collect()
}

#[test]
fn header_rows() {
    let text = all_kinds(&[]);
    let header: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("WARNINGS"))
        .collect();
    assert_eq!(
        header,
        vec![
            "lcc explain: why each tool call was dropped, trimmed, deduped, replaced, kept or pinned",
            "",
            "Objective   finish the parser fix",
            "Input       lcc transcript",
            "Provider    jev+partial_fail_safe (requested jev)",
            "Degraded    yes: jev_batch_failed: HTTP 503 after 3 attempts",
            "Guarantee   partial: some calls were judged; the others were kept unjudged",
            "Threshold   keep if keep_result >= 0.50, else trim if keep_call >= 0.50, else drop; a trim keeps 300 chars",
            "Pinned      the first message and the newest 2 messages",
            "Tokens      5 000 -> 3 100 (exact, o200k_base)",
            "Reduction   38.0% of tokens (1 900 saved); 38.3% of chars (20 000 -> 12 345)",
            "Worth it    yes (at least --min-reduction 25.0%)",
            "Messages    34 -> 31",
            "Judge       3 request(s), 2 answered, model jev-1.13.0; state 2 466 tokens at stage inputs-200; 9 100 input tokens sent",
            "Decisions   2 dropped, 1 trimmed, 2 deduped, 1 replaced, 8 kept, 2 pinned",
            "",
        ]
    );
}

#[test]
fn every_kind_in_a_fixed_order_with_totals() {
    let text = all_kinds(&[]);
    assert_eq!(
        groups(&text),
        vec![
            "WARNINGS (2)",
            "DROPPED (2): 2 000 chars, 500 tokens saved",
            "TRIMMED (1): 121 chars, 40 tokens saved",
            "DEDUPED (2): 876 chars, 242 tokens saved",
            "REPLACED (1): 4 910 chars, 1 170 tokens saved",
            "KEPT (8): 2 725 chars, 765 tokens kept whole",
            "PINNED (2): 162 chars kept whole",
        ]
    );
    assert!(text.contains("\n  - jev_missing_answer:keep_result_toolu_half\n"));
    assert!(
        !text.contains("812") && !text.contains("timing"),
        "no timing values"
    );
    assert!(
        text.lines().all(|l| l == l.trim_end()),
        "no trailing spaces"
    );
}

#[test]
fn each_decision_says_what_happened_and_why() {
    let text = all_kinds(&[]);
    let block = |id: &str| -> String {
        let start = text
            .find(&format!("\n  {id}  "))
            .unwrap_or_else(|| panic!("{id} not shown"))
            + 1;
        let rest = &text[start..];
        let end = rest.find("\n\n").map_or(rest.len(), |e| e + 1);
        rest[..end].to_string()
    };
    assert_eq!(
        block("toolu_drop"),
        "  toolu_drop  Read  message 3, result in message 4  [judged by jev]\n\
         \x20     what     call and result removed: 1 191 -> 0 chars, 300 -> 0 tokens (1 191 chars, 300 tokens saved)\n\
         \x20     why      the judge said neither the call nor its result is needed any more, so both were removed together\n\
         \x20     scores   keep_call 0.20, keep_result 0.10\n"
    );
    assert_eq!(
        block("toolu_dup"),
        "  toolu_dup  Bash  message 9, result in message 10  [rules]\n\
         \x20     what     result replaced by a pointer to toolu_keep: 600 -> 64 chars, 180 -> 20 tokens (536 chars, 160 tokens saved)\n\
         \x20     why      the same output appears again later, kept unchanged at toolu_keep, so this copy became a pointer to it\n\
         \x20     kept at  toolu_keep\n\
         \x20     note     [identical output kept at toolu_keep]\n"
    );
    let replace = block("toolu_replace");
    assert!(
        replace.contains("\n      note     [removed: re-read src/lexer.py to recover]\n"),
        "{replace}"
    );
    assert!(
        replace.contains("\n      recover  re-read src/lexer.py\n"),
        "{replace}"
    );
    assert!(block("toolu_trim")
        .contains("what     result cut to its head plus a note: 524 -> 403 chars"));
    assert!(block("toolu_unjudged").contains("  [fail-safe]\n"));
    assert!(block("toolu_half").contains("scores   keep_call 0.10\n"));
    assert!(block("toolu_first").contains("what     pinned, kept byte for byte (120 chars)\n"));
    assert!(block("toolu_future").contains("why      recorded as 'brand_new_reason_v9'\n"));
}

#[test]
fn every_reason_code_is_explained_in_words() {
    let text = all_kinds(&[]);
    let whys: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("      why      "))
        .collect();
    assert_eq!(whys.len(), 16, "one why per decision");
    let recorded: Vec<&&str> = whys
        .iter()
        .filter(|w| w.starts_with("recorded as"))
        .collect();
    assert_eq!(recorded, vec![&"recorded as 'brand_new_reason_v9'"]);
    for code in [
        "pinned_first_message",
        "pinned_recent",
        "result_still_needed",
        "call_kept_result_trimmed",
        "short_result_kept_whole",
        "trim_disabled_kept_whole",
        "call_and_result_not_needed",
        "not_judged_fail_safe",
        "half_judged_kept_fail_safe",
        "no_lossless_superseder",
        "identical_output_kept_later",
        "output_lines_of_later",
        "lossless_verification_failed",
    ] {
        assert!(
            !text.contains(code),
            "{code} is shown as a code, not in words"
        );
    }
    let distinct: std::collections::HashSet<&&str> = whys.iter().collect();
    assert_eq!(
        distinct.len(),
        15,
        "the two drops share a reason; every other why differs"
    );
}

#[test]
fn source_adds_the_input_and_the_first_result_lines() {
    let src = fx("reports/all-kinds.source.json");
    let text = all_kinds(&["--source", &src]);
    assert!(
        text.contains(
            "      input    {\"file_path\": \"src/parser.py\"}\n\
         \x20     result   | import re\n\
         \x20              |\n\
         \x20              |\n\
         \x20              | class Parser:\n\
         \x20              | ... 3 more lines\n"
        ),
        "{text}"
    );
    // A failed result, with CR and control characters made visible; a long input is cut.
    assert!(text.contains(
        "      error    | F.\n\
         \x20              | \\u{1b}[31mFAILED\\u{1b}[0m tests/test_parser.py::test_nested\\tKeyError\n"
    ), "{text}");
    let long_input = text
        .lines()
        .find(|l| l.starts_with("      input    {\"command\": \"pytest -q tests/test_parser.py"))
        .unwrap();
    assert!(long_input.ends_with(" ..."), "{long_input}");
    assert_eq!(
        long_input.chars().count(),
        "      input    ".len() + 200 + 4
    );
    assert!(text.contains("      source   (call toolu_dup is not in the source transcript)\n"));
    assert!(text.contains("      input    {\"command\": \"sleep 600\"}\n      result   (no result in the source transcript)\n"));
    assert!(text.contains(
        "      input    (the call is not in the source transcript)\n      result   (empty)\n"
    ));
    // Without --source none of this is shown.
    assert!(!all_kinds(&[]).contains("      input "));
}

#[test]
fn only_shows_one_kind() {
    for (only, title) in [
        ("drop", "DROPPED (2)"),
        ("TRIM", "TRIMMED (1)"),
        ("dedupe", "DEDUPED (2)"),
        (" replace ", "REPLACED (1)"),
        ("keep", "KEPT (8)"),
        ("pin", "PINNED (2)"),
        ("pinned", "PINNED (2)"),
    ] {
        let text = all_kinds(&["--only", only]);
        let g = groups(&text);
        assert_eq!(g.len(), 2, "{only}: {g:?}");
        assert_eq!(g[0], "WARNINGS (2)");
        assert!(g[1].starts_with(title), "{only}: {g:?}");
    }
}

#[test]
fn only_on_an_empty_kind_says_none() {
    let text = explain(&[&fx("reports/sparse.json"), "--only", "trim"])
        .expect(0)
        .out();
    assert!(
        text.ends_with("\nTRIMMED (0)\n-----------\n  (none)\n"),
        "{text}"
    );
}

#[test]
fn unknown_only_value_is_refused() {
    let r = explain(&[&fx("reports/all-kinds.json"), "--only", "kept-ish"]).expect(2);
    assert_eq!(
        r.stderr,
        "error: --only must be one of drop, trim, dedupe, replace, keep, pin (got 'kept-ish')\n"
    );
    assert!(r.stdout.is_empty());
}

#[test]
fn limit_caps_each_group_and_says_so() {
    let text = all_kinds(&["--limit", "1"]);
    assert!(text.contains("\n  ... 1 more not shown (--limit 1)\n"));
    assert!(text.contains("\n  ... 7 more not shown (--limit 1)\n"));
    assert!(text.ends_with("\n(limited by --limit; drop it to see every decision)\n"));
    let shown = text.lines().filter(|l| l.starts_with("      why ")).count();
    assert_eq!(shown, 6, "one per kind");
    // A limit no group reaches changes nothing.
    assert_eq!(all_kinds(&["--limit", "100"]), all_kinds(&[]));
    let r = explain(&[&fx("reports/all-kinds.json"), "--limit", "0"]).expect(2);
    assert_eq!(r.stderr, "error: --limit must be at least 1\n");
}

#[test]
fn lenient_on_odd_fields() {
    let text = explain(&[&fx("reports/sparse.json")]).expect(0).out();
    assert!(text.contains("\nProvider    ? (requested ?)\n"));
    assert!(text.contains("\nDROPPED (1): sizes not recorded\n"));
    assert!(text.contains("\nOTHER: decision 'summarize' (1): sizes not recorded\n"));
    assert!(text.contains("      why      no reason recorded\n"));
    assert!(text.contains("      why      recorded as {\"code\":3}\n"));
    assert!(text.contains("      scores   score \"high\"\n"));
}

#[test]
fn malformed_reports_exit_2_naming_the_file() {
    let cases = [
        ("bad-not-json.json", " is not valid JSON (line 3, column 0): EOF while parsing a list\n"),
        ("bad-not-utf8.json", " is not a report: it is not valid UTF-8 (byte 71)\n"),
        ("bad-schema.json", " is not a transcript-compaction-1.0 report (its schema_version is 'compaction-1.0')\n"),
        ("bad-no-schema.json", " is not a transcript-compaction-1.0 report (it has no schema_version); write one with `lcc compact INPUT -r report.json`\n"),
        ("bad-no-decisions.json", " has no 'decisions' list, so there is nothing to explain; write a report with `lcc compact INPUT -r report.json`\n"),
        ("bad-decisions-not-list.json", ": decisions must be a list, found an object\n"),
        ("bad-decision-not-object.json", ": decisions[1] must be an object, found a string\n"),
        ("bad-top-level-list.json", " is not a transcript-compaction-1.0 report: the top level is a list, not an object\n"),
        ("bad-block-mode.json", " is a 'blocks' report; lcc explain renders tool-call reports (mode 'tool-calls') only\n"),
    ];
    for (name, tail) in cases {
        let path = fx(&format!("reports/{name}"));
        let r = explain(&[&path]).expect(2);
        assert_eq!(r.stderr, format!("error: {path}{tail}"), "{name}");
        assert!(r.stdout.is_empty(), "{name}");
    }
    // A transcript is not a report.
    let path = fx("lossless.json");
    let r = explain(&[&path]).expect(2);
    assert!(
        r.stderr.starts_with(&format!(
            "error: {path} is not a transcript-compaction-1.0 report"
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn unreadable_report_or_source_is_exit_1() {
    let r = explain(&["/nonexistent/report.json"]).expect(1);
    assert!(
        r.stderr
            .starts_with("error: could not read /nonexistent/report.json: "),
        "{}",
        r.stderr
    );
    let dir = tmp();
    explain(&[&dir.path().to_string_lossy()]).expect(1);
    let r = explain(&[
        &fx("reports/all-kinds.json"),
        "--source",
        "/nonexistent/t.json",
    ])
    .expect(1);
    assert!(
        r.stderr.contains("could not read /nonexistent/t.json"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_malformed_source_is_exit_2() {
    let path = fx("malformed/no-role.json");
    let r = explain(&[&fx("reports/all-kinds.json"), "--source", &path]).expect(2);
    assert_eq!(
        r.stderr,
        format!("error: {path}: [1]: message has no string 'role'\n")
    );
}

#[test]
fn explains_what_compact_wrote() {
    let dir = tmp();
    let report = at(dir.path(), "r.json");
    let input = fx("lossless.json");
    lcc_run(&[
        "compact",
        &input,
        "--preserve-recent",
        "1",
        "--quiet",
        "--dry-run",
        "-r",
        &report,
    ])
    .expect(0);
    let text = explain(&[&report, "--source", &input]).expect(0).out();
    assert_eq!(
        groups(&text)[1..],
        [
            "DEDUPED (5): 250 chars, 68 tokens saved",
            "KEPT (10): 891 chars, 329 tokens kept whole",
        ][..],
        "{text}"
    );
    assert!(text.contains("Provider    rules (requested auto)\nRules mode  lossless\n"));
    assert!(text.contains("\n  st_1  Bash  message 17, result in message 18  [rules]\n"));
    assert!(text.contains("      kept at  st_3\n"));
    assert!(
        text.contains("      result   |  M src/lexer.py\n"),
        "the source shows the original, not the note"
    );
}

#[test]
fn explains_the_realistic_session() {
    let dir = tmp();
    let report = at(dir.path(), "r.json");
    lcc_run(&[
        "compact",
        &fx("session.json"),
        "--quiet",
        "--dry-run",
        "-r",
        &report,
    ])
    .expect(0);
    let text = explain(&[
        &report,
        "--only",
        "dedupe",
        "--limit",
        "2",
        "--source",
        &fx("session.json"),
    ])
    .expect(0)
    .out();
    assert!(
        groups(&text).iter().any(|g| g.starts_with("DEDUPED (")),
        "{text}"
    );
    assert_eq!(text.matches("\n      kept at  toolu_").count(), 2);
}

#[test]
fn a_report_whose_tokens_grew_says_larger() {
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fx("reports/all-kinds.json")).unwrap())
            .unwrap();
    report["tokens_after"] = serde_json::json!(5048);
    let dir = tmp();
    let path = at(dir.path(), "grew.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let text = explain(&[&path]).expect(0).out();
    let row = text
        .lines()
        .find(|l| l.starts_with("Reduction"))
        .unwrap_or_else(|| panic!("no Reduction row in {text}"));
    assert_eq!(
        row,
        "Reduction   none: tokens 1.0% larger (48 added); 38.3% of chars (20 000 -> 12 345)"
    );
}
