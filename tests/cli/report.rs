//! The report: keys and their order, internal consistency, and determinism (two runs give the
//! same bytes apart from `timing`, and so does their explanation).

use crate::support::{at, fx, json_file, lcc_run, tmp, without_timing};

/// The keys of the Python release's report, in its order (`reference/spec-core.md` §8.1).
const PYTHON_KEYS: [&str; 50] = [
    "schema_version",
    "mode",
    "objective",
    "provider_requested",
    "provider_used",
    "rules_mode",
    "lossless_violations",
    "recoverability_check",
    "degraded",
    "degradation_reason",
    "semantic_guarantee",
    "jev_model_requested",
    "jev_model_resolved",
    "threshold",
    "trim_threshold",
    "trim_head_chars",
    "preserve_recent",
    "blocks_total",
    "blocks_scored",
    "blocks_protected",
    "calls",
    "chars_before",
    "chars_after",
    "reduction_ratio",
    "worth_it",
    "min_reduction",
    "tool_chars_before",
    "tool_chars_after",
    "tool_reduction_ratio",
    "tokens_before",
    "tokens_after",
    "token_count_method",
    "state_tokens",
    "state_fit_stage",
    "requests",
    "messages_before",
    "messages_after",
    "tool_calls_total",
    "tool_calls_kept",
    "tool_calls_trimmed",
    "tool_calls_dropped",
    "tool_calls_deduped",
    "tool_calls_replaced",
    "warnings",
    "decisions",
    // Ours.
    "input_format",
    "tokenizer",
    "state_windows",
    "input_tokens_sent",
    "timing",
];

/// Is `want` a subsequence of `keys` (same relative order)?
fn in_order(keys: &[String], want: &[&str]) -> bool {
    let mut it = keys.iter();
    want.iter().all(|w| it.any(|k| k == w))
}

fn run_report(dir: &std::path::Path, name: &str, input: &str, flags: &[&str]) -> (String, Vec<u8>) {
    let report = at(dir, name);
    let mut args = vec!["compact", input, "-r", &report, "--quiet"];
    args.extend_from_slice(flags);
    let r = lcc_run(&args).expect(0);
    (std::fs::read_to_string(&report).unwrap(), r.stdout)
}

#[test]
fn report_keys_are_all_there_in_order() {
    let dir = tmp();
    let (text, _) = run_report(
        dir.path(),
        "r.json",
        &fx("lossless.json"),
        &["--preserve-recent", "2"],
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    for k in PYTHON_KEYS {
        assert!(keys.iter().any(|x| x == k), "missing key {k}");
    }
    assert!(
        in_order(&keys, &PYTHON_KEYS[..45]),
        "Python's keys keep their order: {keys:?}"
    );
    assert_eq!(keys.last().map(String::as_str), Some("timing"));
    assert!(in_order(
        &keys,
        &["objective", "input_format", "provider_requested"]
    ));
    assert!(in_order(
        &keys,
        &["token_count_method", "tokenizer", "state_tokens"]
    ));
    assert_eq!(v["schema_version"], "transcript-compaction-1.0");
    assert_eq!(v["mode"], "tool-calls");
    assert!(
        text.starts_with("{\n  \"schema_version\""),
        "2-space indent"
    );
    assert!(text.ends_with("}\n"));

    let timing = v["timing"].as_object().unwrap();
    assert!(timing.values().all(serde_json::Value::is_u64), "{timing:?}");
    assert!(timing.contains_key("total_ms"));

    let decision_keys = [
        "id",
        "decision",
        "score",
        "keep_call",
        "keep_result",
        "chars",
        "chars_after",
        "source",
        "reason",
        "message_index",
        "tool",
    ];
    for d in v["decisions"].as_array().unwrap() {
        let dk: Vec<String> = d.as_object().unwrap().keys().cloned().collect();
        assert_eq!(&dk[..11], &decision_keys.map(String::from)[..], "{d}");
        assert!(in_order(&dk, &["tool", "result_message_index"]));
        if d["source"] == "pin" {
            assert!(!dk.iter().any(|k| k == "kept_at" || k == "note"));
        } else {
            assert!(
                in_order(&dk, &["result_message_index", "tokens", "tokens_after"]),
                "{dk:?}"
            );
        }
        if d["decision"] == "dedupe" {
            assert!(
                in_order(&dk, &["tokens_after", "kept_at", "note"]),
                "{dk:?}"
            );
        } else {
            assert!(
                d.get("kept_at").is_none() && d.get("note").is_none() && d.get("recover").is_none()
            );
        }
    }
    // Pins come first.
    let sources: Vec<&str> = v["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["source"].as_str().unwrap())
        .collect();
    let first_candidate = sources.iter().position(|s| *s != "pin").unwrap();
    assert!(
        sources[first_candidate..].iter().all(|s| *s != "pin"),
        "{sources:?}"
    );
}

#[test]
fn report_figures_agree_with_each_other() {
    let dir = tmp();
    let (text, _) = run_report(dir.path(), "r.json", &fx("session.json"), &[]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = |k: &str| {
        v[k].as_u64()
            .unwrap_or_else(|| panic!("{k} is not a count"))
    };
    let f = |k: &str| v[k].as_f64().unwrap();
    let ds = v["decisions"].as_array().unwrap();
    let pins = ds.iter().filter(|d| d["source"] == "pin").count() as u64;
    assert_eq!(n("blocks_protected"), pins);
    assert_eq!(n("blocks_total"), ds.len() as u64);
    assert_eq!(
        n("tool_calls_kept")
            + n("tool_calls_trimmed")
            + n("tool_calls_dropped")
            + n("tool_calls_deduped")
            + n("tool_calls_replaced"),
        ds.len() as u64 - pins
    );
    assert_eq!(
        n("blocks_scored"),
        ds.len() as u64 - pins,
        "rules judges every candidate"
    );
    let ratio = 1.0 - n("chars_after") as f64 / n("chars_before") as f64;
    assert!((f("reduction_ratio") - ratio).abs() < 1e-12);
    let tool_ratio = 1.0 - n("tool_chars_after") as f64 / n("tool_chars_before") as f64;
    assert!((f("tool_reduction_ratio") - tool_ratio).abs() < 1e-12);
    let token_ratio = 1.0 - n("tokens_after") as f64 / n("tokens_before") as f64;
    assert_eq!(v["worth_it"], token_ratio >= f("min_reduction"));
    assert_eq!(v["token_count_method"], "exact");
    assert_eq!(v["tokenizer"], "o200k_base");
}

#[test]
fn cl100k_and_unknown_models_are_labelled() {
    let dir = tmp();
    let (text, _) = run_report(dir.path(), "a.json", &fx("pinning.json"), &["-m", "gpt-4"]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["tokenizer"], "cl100k_base");
    assert_eq!(v["token_count_method"], "exact");
    let (text, _) = run_report(
        dir.path(),
        "b.json",
        &fx("pinning.json"),
        &["-m", "some-local-model"],
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["tokenizer"], "o200k_base");
    assert_eq!(v["token_count_method"], "approximate");
}

#[test]
fn two_runs_give_the_same_bytes_apart_from_timing() {
    let dir = tmp();
    for (i, fixture) in ["session.json", "lossless.json"].iter().enumerate() {
        let input = fx(fixture);
        let (a, out_a) = run_report(
            dir.path(),
            &format!("a{i}.json"),
            &input,
            &["--preserve-recent", "2"],
        );
        let (b, out_b) = run_report(
            dir.path(),
            &format!("b{i}.json"),
            &input,
            &["--preserve-recent", "2"],
        );
        assert_eq!(out_a, out_b, "{fixture}: output differs between runs");
        assert_eq!(
            without_timing(&a),
            without_timing(&b),
            "{fixture}: report differs between runs"
        );
        let ea = lcc_run(&["explain", &at(dir.path(), &format!("a{i}.json"))]).expect(0);
        let eb = lcc_run(&["explain", &at(dir.path(), &format!("b{i}.json"))]).expect(0);
        assert_eq!(ea.stdout, eb.stdout, "{fixture}: explanations differ");
    }
}

#[test]
fn the_report_is_the_same_whatever_the_output_target() {
    // stdout, -o and --dry-run differ only in where the transcript goes.
    let dir = tmp();
    let input = fx("lossless.json");
    let (a, _) = run_report(dir.path(), "a.json", &input, &[]);
    let out = at(dir.path(), "out.json");
    let (b, _) = run_report(dir.path(), "b.json", &input, &["-o", &out]);
    let (c, _) = run_report(dir.path(), "c.json", &input, &["--dry-run"]);
    assert_eq!(without_timing(&a), without_timing(&b));
    assert_eq!(without_timing(&a), without_timing(&c));
    let _ = json_file(&out);
}
