//! The judge path (`--provider jev` / `auto`) against the in-test mock System One server.
//! No test touches the network: every run points `TYPESAFE_ENDPOINT` at the mock on
//! 127.0.0.1, or keeps `LCC_DISABLE_NETWORK=1`.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};

use crate::mock_jev::{answers, by_name, noul, Mock, Reply, INPUT_TOKENS, MODEL};
use crate::support;

const KEY: &str = "sk-test-9f8e7d6c5b4a";
pub(crate) const GOAL: &str = "fix the failing parser test";

/// `lcc` with network allowed, the test key, and the mock as endpoint; short back-off.
pub(crate) fn jev(mock: &Mock) -> Command {
    let mut c = support::lcc();
    c.env_remove("LCC_DISABLE_NETWORK")
        .env("TYPESAFE_API_KEY", KEY)
        .env("TYPESAFE_ENDPOINT", &mock.url)
        .env("LCC_RETRY_BASE_MS", "5")
        // `auto` without a key probes laya: never a real server on the default port.
        .env("LAYA_ENDPOINT", "http://127.0.0.1:1/v1/systemone");
    c
}

pub(crate) struct Run {
    pub out: Output,
    pub report: Value,
    pub output: String,
    pub input: String,
    pub stderr: String,
    pub dir: tempfile::TempDir,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }

    pub fn warnings(&self) -> Vec<String> {
        self.report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    }

    /// Candidate decisions (pins left out): (id, decision, source, reason).
    pub fn decisions(&self) -> Vec<(String, String, String, String)> {
        self.report["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["source"] != "pin")
            .map(|d| {
                let s = |k: &str| d[k].as_str().unwrap_or_default().to_string();
                (s("id"), s("decision"), s("source"), s("reason"))
            })
            .collect()
    }

    fn decision(&self, id: &str) -> Value {
        self.report["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no decision for {id}"))
    }

    fn report_without_timing(&self) -> Value {
        let mut r = self.report.clone();
        r.as_object_mut().unwrap().remove("timing");
        r
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Run `compact` on `transcript` with `args` (defaults: `--provider jev --preserve-recent 1`).
pub(crate) fn compact(mut cmd: Command, transcript: &str, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::write(&input, transcript).unwrap();
    let (out_path, report_path) = (dir.path().join("out.json"), dir.path().join("report.json"));
    cmd.arg("compact").arg(&input).args(["-q", GOAL]);
    if !args.contains(&"--provider") {
        cmd.args(["--provider", "jev"]);
    }
    if !args.contains(&"--preserve-recent") {
        cmd.args(["--preserve-recent", "1"]);
    }
    cmd.arg("-o")
        .arg(&out_path)
        .arg("-r")
        .arg(&report_path)
        .args(args);
    let out = support::run(&mut cmd);
    let report = std::fs::read_to_string(&report_path)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    Run {
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        out,
        report,
        output,
        input: transcript.to_string(),
        dir,
    }
}

fn result_text(id: &str) -> String {
    format!("{id}: line of output\n").repeat(30)
}

/// A session: a user goal, then per id an assistant call and a user result, then a closing
/// assistant text (pinned with `--preserve-recent 1`).
fn session(ids: &[&str]) -> String {
    let mut msgs =
        vec![json!({"role": "user", "text": "Fix the parser test. Never edit src/generated."})];
    for (i, id) in ids.iter().enumerate() {
        msgs.push(json!({"role": "assistant", "text": format!("Step {i}."),
            "toolUses": [{"tool_use_id": id, "tool": "Bash", "input": {"command": format!("pytest -q tests/test_{i}.py")}}]}));
        msgs.push(
            json!({"role": "user", "toolResults": [{"tool_use_id": id, "text": result_text(id)}]}),
        );
    }
    msgs.push(json!({"role": "assistant", "text": "Done."}));
    serde_json::to_string_pretty(&json!({ "messages": msgs })).unwrap()
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}_{i}")).collect()
}

pub(crate) fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

// ---------------------------------------------------------------------------------------
// The request and the happy path
// ---------------------------------------------------------------------------------------

#[test]
fn request_shape_state_and_decisions() {
    let mock = Mock::by_name();
    let t = json!([
        {"role": "user", "text": "Goal msg"},
        {"role": "assistant", "text": "Reading.", "toolUses": [{"tool_use_id": "toolu_keep", "tool": "Read", "input": {"path": "a.py"}}]},
        {"role": "user", "toolResults": [{"tool_use_id": "toolu_keep", "text": "print(1)\n"}]},
        {"role": "assistant", "toolUses": [{"tool_use_id": "toolu_trim", "tool": "Bash", "input": {"command": "cat big.log"}}]},
        {"role": "user", "toolResults": [{"tool_use_id": "toolu_trim", "text": "x".repeat(1000)}]},
        {"role": "assistant", "text": "", "toolUses": [{"tool_use_id": "toolu_drop", "tool": "Bash", "input": {"command": "false"}}]},
        {"role": "user", "toolResults": [{"tool_use_id": "toolu_drop", "text": "", "is_error": true}]},
        {"role": "assistant", "text": "Done."}
    ]);
    let src = serde_json::to_string(&t).unwrap();
    let r = compact(jev(&mock), &src, &["--jev-model", "jev-test-model"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let q = &reqs[0];
    assert_eq!(q.method, "POST");
    assert_eq!(q.path, "/v1/systemone");
    assert_eq!(
        q.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(q.header("content-type"), Some("application/json"));
    let body = q.json();
    assert_eq!(
        body.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["model", "state", "questions"]
    );
    assert_eq!(body["model"], "jev-test-model");
    assert_eq!(
        q.question_keys(),
        [
            "keep_call_toolu_keep",
            "keep_result_toolu_keep",
            "keep_call_toolu_trim",
            "keep_result_toolu_trim",
            "keep_call_toolu_drop",
            "keep_result_toolu_drop"
        ]
    );
    assert_eq!(
        body["questions"]["keep_call_toolu_trim"],
        json!({"type": "noul",
            "instructions": "Judge the probability that tool call toolu_trim (Bash, in the conversation state) still matters in this session: knowing that the call was made, with the input it was made with, still serves the goal. A call whose purpose is finished and whose input adds nothing should score low.",
            "criteria": {"true": "The fact that this call happened, and its input, still matter.",
                         "false": "The call is finished and its input adds nothing to the goal."}})
    );
    assert_eq!(
        body["questions"]["keep_result_toolu_drop"],
        json!({"type": "noul",
            "instructions": "Judge the probability that the OUTPUT of tool call toolu_drop (Bash) still needs to be available verbatim in this session. Score low only when the work it was run for is finished and re-running the tool would produce the same information again if it were needed.",
            "criteria": {"true": "The output's contents are still needed and re-running would not do.",
                         "false": "The output is spent: the work it served is finished."}})
    );
    // The state, exactly: payloads replaced by notes, Python-style separators.
    let state = r#""state": {"goal": "fix the failing parser test", "conversation": [{"role": "user", "text": "Goal msg"}, {"role": "assistant", "text": "Reading.", "tool_calls": [{"id": "toolu_keep", "tool": "Read", "input": {"path": "a.py"}}]}, {"role": "user", "tool_results": [{"id": "toolu_keep", "note": "ok, 9 chars"}]}, {"role": "assistant", "tool_calls": [{"id": "toolu_trim", "tool": "Bash", "input": {"command": "cat big.log"}}]}, {"role": "user", "tool_results": [{"id": "toolu_trim", "note": "ok, 1000 chars"}]}, {"role": "assistant", "tool_calls": [{"id": "toolu_drop", "tool": "Bash", "input": {"command": "false"}}]}, {"role": "user", "tool_results": [{"id": "toolu_drop", "note": "error, 0 chars (empty)"}]}, {"role": "assistant", "text": "Done."}]}"#;
    assert!(q.body.contains(state), "{}", q.body);
    assert!(
        !q.body.contains("print(1)"),
        "result payloads are never sent"
    );

    // Decisions and report.
    assert_eq!(
        r.decisions(),
        [
            (
                "toolu_keep".into(),
                "keep".into(),
                "jev".into(),
                "result_still_needed".into()
            ),
            (
                "toolu_trim".into(),
                "trim".into(),
                "jev".into(),
                "call_kept_result_trimmed".into()
            ),
            (
                "toolu_drop".into(),
                "drop".into(),
                "jev".into(),
                "call_and_result_not_needed".into()
            ),
        ]
    );
    let d = r.decision("toolu_trim");
    assert_eq!(
        (d["keep_call"].as_f64(), d["keep_result"].as_f64()),
        (Some(0.9), Some(0.1))
    );
    assert_eq!(d["score"].as_f64(), Some(0.1));
    let rep = &r.report;
    assert_eq!(rep["provider_requested"], "jev");
    assert_eq!(rep["provider_used"], "jev");
    assert_eq!(rep["degraded"], false);
    assert_eq!(rep["degradation_reason"], Value::Null);
    assert_eq!(rep["semantic_guarantee"], "judged");
    assert_eq!(rep["jev_model_requested"], "jev-test-model");
    assert_eq!(rep["jev_model_resolved"], MODEL);
    assert_eq!(rep["calls"], 1);
    assert_eq!(rep["requests"], 1);
    assert_eq!(rep["state_fit_stage"], "full");
    assert_eq!(rep["state_windows"], 1);
    assert!(rep["state_tokens"].as_u64().unwrap() > 50);
    assert_eq!(rep["input_tokens_sent"], INPUT_TOKENS);
    assert_eq!(rep["blocks_scored"], 3);
    assert_eq!(rep["warnings"], json!([]));

    // The output: keep untouched, trim cut with its note, drop gone (with its messages).
    let out: Value = serde_json::from_str(&r.output).unwrap();
    let msgs = out.as_array().unwrap();
    assert_eq!(msgs.len(), 6, "{}", r.output);
    assert!(r.output.contains("print(1)\\n"));
    let trimmed = msgs[4]["toolResults"][0]["text"].as_str().unwrap();
    assert_eq!(
        trimmed,
        format!(
            "{}\n[... lcc: 700 chars of this tool result dropped; re-run Bash for the rest ...]",
            "x".repeat(300)
        )
    );
    assert!(!r.output.contains("toolu_drop"));
    // Not a terminal: no progress bar.
    assert!(!r.stderr.contains("judging"), "{}", r.stderr);
}

#[test]
fn input_tokens_are_counted_when_usage_is_absent() {
    let mock = Mock::start(|req| {
        let mut map = serde_json::Map::new();
        for k in req.question_keys() {
            map.insert(k.clone(), by_name(&k));
        }
        Reply::json(200, &json!({"answers": map}))
    });
    let r = compact(jev(&mock), &session(&["toolu_keep_1", "toolu_drop_2"]), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let sent = r.report["input_tokens_sent"].as_u64().unwrap();
    let state = r.report["state_tokens"].as_u64().unwrap();
    // state + envelope (64) + two calls' questions (about 240 tokens each).
    assert!(
        sent > state + 64 + 400 && sent < state + 64 + 600,
        "{sent} vs state {state}"
    );
    // No `model` in the response: the requested one is recorded.
    assert_eq!(r.report["jev_model_resolved"], "jev-latest");
}

#[test]
fn key_is_read_from_the_key_file() {
    let mock = Mock::by_name();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("typesafe.key");
    std::fs::write(&key_file, "  file-key-1234\n").unwrap();
    let mut cmd = jev(&mock);
    cmd.env_remove("TYPESAFE_API_KEY")
        .env("LCC_TYPESAFE_KEY_FILE", &key_file);
    let r = compact(cmd, &session(&["toolu_keep_1"]), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        mock.requests()[0].header("authorization"),
        Some("Bearer file-key-1234")
    );
    assert!(!r.stderr.contains("file-key-1234"));
}

#[test]
fn plain_http_is_refused_for_non_loopback_hosts() {
    let mut cmd = support::lcc();
    cmd.env_remove("LCC_DISABLE_NETWORK")
        .env("TYPESAFE_API_KEY", KEY)
        .env(
            "TYPESAFE_ENDPOINT",
            "http://judge.example.invalid/v1/systemone",
        );
    let r = compact(cmd, &session(&["toolu_keep_1"]), &[]);
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr.contains("TYPESAFE_ENDPOINT") && r.stderr.contains("https://"),
        "{}",
        r.stderr
    );
    assert!(!r.path("out.json").exists() && !r.path("report.json").exists());
    assert!(!r.stderr.contains(KEY));
}

// ---------------------------------------------------------------------------------------
// Answers: missing, out of range, wrong types
// ---------------------------------------------------------------------------------------

#[test]
fn missing_and_invalid_answers_are_warned_and_fail_safe() {
    let mock = Mock::start(|req| {
        answers(req, |qid| match qid {
            "keep_call_toolu_a" => Value::Null, // removed below
            "keep_result_toolu_a" => noul(0.1),
            "keep_call_toolu_b" => noul(0.1),
            "keep_result_toolu_b" => noul(1.7),
            "keep_call_toolu_c" => json!({"type": "noul", "noul": true}),
            "keep_result_toolu_c" => json!({"type": "noul", "noul": "0.1"}),
            "keep_call_toolu_e" => json!(0.3),
            "keep_result_toolu_e" => noul(0.9),
            "keep_call_toolu_f" => noul(-0.2),
            "keep_result_toolu_f" => json!({"type": "choice", "choice": "yes"}),
            _ => noul(0.05),
        })
        .and_remove(&[
            "keep_call_toolu_a",
            "keep_call_toolu_d",
            "keep_result_toolu_d",
        ])
    });
    let names = [
        "toolu_a", "toolu_b", "toolu_c", "toolu_d", "toolu_e", "toolu_f", "toolu_g",
    ];
    let r = compact(jev(&mock), &session(&names), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        r.warnings(),
        [
            "jev_missing_answer:keep_call_toolu_a",
            "jev_out_of_range_answer:keep_result_toolu_b",
            "jev_missing_answer:keep_call_toolu_c",
            "jev_missing_answer:keep_result_toolu_c",
            "jev_missing_answer:keep_call_toolu_d",
            "jev_missing_answer:keep_result_toolu_d",
            "jev_missing_answer:keep_call_toolu_e",
            "jev_out_of_range_answer:keep_call_toolu_f",
            "jev_missing_answer:keep_result_toolu_f",
        ]
    );
    let d = r.decisions();
    let row = |id: &str| d.iter().find(|x| x.0 == id).cloned().unwrap();
    // Half-answered pairs are kept, never dropped.
    assert_eq!(row("toolu_a").1, "keep");
    assert_eq!(row("toolu_a").3, "half_judged_kept_fail_safe");
    assert_eq!(row("toolu_b").1, "keep");
    // Nothing valid: kept unjudged.
    for id in ["toolu_c", "toolu_d", "toolu_f"] {
        assert_eq!(row(id).1, "keep");
        assert_eq!(row(id).2, "fail_safe");
        assert_eq!(row(id).3, "not_judged_fail_safe");
    }
    assert_eq!(row("toolu_e").3, "result_still_needed");
    assert_eq!(row("toolu_g").1, "drop");
    let a = r.decision("toolu_a");
    assert_eq!(a["keep_call"], Value::Null);
    assert_eq!(a["keep_result"].as_f64(), Some(0.1));
    assert_eq!(r.report["provider_used"], "jev+partial_fail_safe");
    assert_eq!(r.report["degraded"], true);
    assert_eq!(r.report["degradation_reason"], "jev_batch_failed");
    assert_eq!(r.report["semantic_guarantee"], "partial");
    assert_eq!(r.report["blocks_scored"], 4);
}

trait ReplyExt {
    fn and_remove(self, keys: &[&str]) -> Reply;
}

impl ReplyExt for Reply {
    fn and_remove(mut self, keys: &[&str]) -> Reply {
        let mut v: Value = serde_json::from_str(&self.body).unwrap();
        for k in keys {
            v["answers"].as_object_mut().unwrap().remove(*k);
        }
        self.body = v.to_string();
        self
    }
}

#[test]
fn malformed_responses_fail_the_batch_and_keep_everything() {
    let kinds: [(&str, &str); 7] = [
        ("not JSON", "<html><body>upstream overloaded</body></html>"),
        ("empty", ""),
        (
            "truncated",
            r#"{"model": "m", "answers": {"keep_call_toolu_drop_1": {"type": "noul", "no"#,
        ),
        ("array", r#"[{"answers": {}}]"#),
        (
            "answers list",
            r#"{"model": "m", "answers": [{"type": "noul", "noul": 0.1}]}"#,
        ),
        ("no answers", r#"{"model": "m", "result": {}}"#),
        ("answers null", r#"{"model": "m", "answers": null}"#),
    ];
    for (what, body) in kinds {
        let body = body.to_string();
        let mock = Mock::start(move |_| Reply::raw(200, &body));
        let src = session(&["toolu_drop_1", "toolu_drop_2"]);
        let r = compact(jev(&mock), &src, &[]);
        assert_eq!(r.code(), 0, "{what}: {}", r.stderr);
        assert_eq!(
            mock.requests().len(),
            1,
            "{what}: malformed answers are not retried"
        );
        let w = r.warnings();
        assert_eq!(w.len(), 2, "{what}: {w:?}");
        assert!(
            w[0].starts_with("jev_malformed_response:batch_1: "),
            "{what}: {w:?}"
        );
        assert!(
            w[0].ends_with("those 2 call(s) were kept (fail-safe)"),
            "{what}: {w:?}"
        );
        assert_eq!(
            w[1],
            "jev_no_answers: every call was kept unjudged (fail-safe)"
        );
        assert_eq!(r.report["provider_used"], "degraded", "{what}");
        assert_eq!(r.report["degradation_reason"], "jev_no_answers_fail_safe");
        assert_eq!(r.report["semantic_guarantee"], "none");
        assert_eq!(r.report["calls"], 0);
        assert_eq!(r.report["jev_model_resolved"], Value::Null);
        assert_eq!(r.output, src, "{what}: everything is kept byte for byte");
    }
}

// ---------------------------------------------------------------------------------------
// HTTP errors, retries, splits
// ---------------------------------------------------------------------------------------

#[test]
fn refused_key_is_final_and_stops_the_remaining_requests() {
    let mock = Mock::start(|_| Reply::raw(401, r#"{"error": "invalid_api_key"}"#));
    let names = ids("toolu_drop", 3);
    let r = compact(
        jev(&mock),
        &session(&refs(&names)),
        &["--batch-size", "1", "--max-workers", "1"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        mock.requests().len(),
        1,
        "401 is not retried, and nothing more is sent"
    );
    let w = r.warnings();
    for k in 1..=3 {
        assert_eq!(
            w[k - 1],
            format!("jev_batch_{k}_failed: the API refused the key (HTTP 401): those 1 call(s) were kept (fail-safe)")
        );
    }
    assert_eq!(r.report["provider_used"], "degraded");
    assert_eq!(r.report["requests"], 3);
    assert_eq!(r.output, r.input);
}

#[test]
fn not_found_and_other_client_errors_are_not_retried() {
    for (code, body) in [
        (404, r#"{"detail": "Not Found"}"#),
        (400, r#"{"detail": {"error_type": "api_usage_error"}}"#),
        (422, r#"{"detail": [{"input": "echo of the state"}]}"#),
    ] {
        let mock = Mock::start(move |_| Reply::raw(code, body));
        let names = ids("toolu_drop", 2);
        let r = compact(
            jev(&mock),
            &session(&refs(&names)),
            &["--batch-size", "1", "--max-workers", "1"],
        );
        assert_eq!(r.code(), 0, "{}", r.stderr);
        assert_eq!(
            mock.requests().len(),
            2,
            "{code}: one request per batch, no retry"
        );
        let w = r.warnings();
        assert!(
            w[0].starts_with(&format!("jev_batch_1_failed: HTTP {code}")),
            "{w:?}"
        );
        if code == 422 {
            assert!(
                !w[0].contains("echo of the state"),
                "422 bodies echo the request: {w:?}"
            );
        } else {
            assert!(w[0].contains(body), "{w:?}");
        }
        assert_eq!(r.report["provider_used"], "degraded");
    }
}

#[test]
fn one_failed_batch_gives_a_partial_pass() {
    let mock = Mock::start(|req| {
        if req.call_ids().iter().any(|id| id == "toolu_drop_3") {
            Reply::raw(400, r#"{"detail": "Invalid request."}"#)
        } else {
            answers(req, by_name)
        }
    });
    let names = ids("toolu_drop", 4);
    let r = compact(jev(&mock), &session(&refs(&names)), &["--batch-size", "2"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        r.warnings(),
        [
            r#"jev_batch_2_failed: HTTP 400: {"detail": "Invalid request."}: those 2 call(s) were kept (fail-safe)"#
        ]
    );
    assert_eq!(r.report["provider_used"], "jev+partial_fail_safe");
    assert_eq!(r.report["semantic_guarantee"], "partial");
    assert_eq!(r.report["degradation_reason"], "jev_batch_failed");
    assert_eq!(r.report["calls"], 1);
    let d = r.decisions();
    let kinds: Vec<&str> = d.iter().map(|x| x.1.as_str()).collect();
    assert_eq!(kinds, ["drop", "drop", "keep", "keep"]);
    assert_eq!(d[2].3, "not_judged_fail_safe");
}

#[test]
fn server_errors_and_closed_connections_are_retried() {
    for first in [
        Reply::raw(500, "oops"),
        Reply::raw(529, "overloaded"),
        Reply::raw(503, ""),
        Reply::close(),
    ] {
        let f = first.clone();
        let mock = Mock::start(move |req| {
            if req.n == 1 {
                f.clone()
            } else {
                answers(req, by_name)
            }
        });
        let r = compact(jev(&mock), &session(&["toolu_drop_1"]), &[]);
        assert_eq!(r.code(), 0, "{}", r.stderr);
        assert_eq!(mock.requests().len(), 2, "{first:?}");
        assert_eq!(r.report["semantic_guarantee"], "judged", "{first:?}");
        assert_eq!(r.report["warnings"], json!([]));
        assert_eq!(r.report["calls"], 1);
    }
    // Failing every time: four attempts, then the batch is kept.
    let mock = Mock::start(|_| Reply::raw(502, "bad gateway"));
    let r = compact(jev(&mock), &session(&["toolu_drop_1"]), &[]);
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(
        r.warnings()[0],
        "jev_batch_1_failed: HTTP 502: bad gateway (after 4 attempts): those 1 call(s) were kept (fail-safe)"
    );
    assert_eq!(r.report["provider_used"], "degraded");
}

#[test]
fn retry_after_is_honoured() {
    let mock = Mock::start(|req| {
        if req.n == 1 {
            Reply::raw(429, r#"{"detail": "slow down"}"#).header("Retry-After", "1")
        } else {
            answers(req, by_name)
        }
    });
    let r = compact(jev(&mock), &session(&["toolu_keep_1"]), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    // The back-off alone would be ~5 ms (LCC_RETRY_BASE_MS).
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    assert_eq!(r.report["semantic_guarantee"], "judged");
}

#[test]
fn slow_responses_time_out_and_are_retried() {
    let mock = Mock::start(|req| {
        let reply = answers(req, by_name);
        if req.n == 1 {
            reply.after_ms(3000)
        } else {
            reply
        }
    });
    let mut cmd = jev(&mock);
    cmd.env("LCC_JEV_TIMEOUT_MS", "300");
    let r = compact(cmd, &session(&["toolu_drop_1"]), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(r.report["semantic_guarantee"], "judged");

    let mock = Mock::start(|req| answers(req, by_name).after_ms(1500));
    let mut cmd = jev(&mock);
    cmd.env("LCC_JEV_TIMEOUT_MS", "200");
    let r = compact(cmd, &session(&["toolu_drop_1"]), &[]);
    assert_eq!(mock.requests().len(), 4);
    assert_eq!(
        r.warnings()[0],
        "jev_batch_1_failed: timed out (after 4 attempts): those 1 call(s) were kept (fail-safe)"
    );
    assert_eq!(r.output, r.input);
}

#[test]
fn too_large_batches_are_split_and_resent() {
    // The server refuses any request with more than two calls.
    let mock = Mock::start(|req| {
        if req.call_ids().len() > 2 {
            Reply::raw(400, r#"{"detail": {"error_type": "max_tokens_exceeded"}}"#)
        } else {
            answers(req, by_name)
        }
    });
    let names = ids("toolu_drop", 5);
    let r = compact(jev(&mock), &session(&refs(&names)), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let sent: Vec<Vec<String>> = mock.requests().iter().map(|q| q.call_ids()).collect();
    assert_eq!(
        sent,
        [
            refs(&names)
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>(),
            names[..3].to_vec(),
            names[..2].to_vec(),
            names[2..3].to_vec(),
            names[3..].to_vec(),
        ]
    );
    assert_eq!(
        r.warnings(),
        ["jev_batch_1_split: the API refused it as too large (max_tokens_exceeded); it was sent again in 3 smaller requests"]
    );
    assert_eq!(r.report["semantic_guarantee"], "judged");
    assert_eq!(r.report["tool_calls_dropped"], 5);
    assert_eq!(r.report["requests"], 3);
    assert_eq!(r.report["calls"], 3);

    // Refused even with one call: those calls are kept.
    let mock =
        Mock::start(|_| Reply::raw(400, r#"{"detail": {"error_type": "max_tokens_exceeded"}}"#));
    let r = compact(jev(&mock), &session(&["toolu_drop_1", "toolu_drop_2"]), &[]);
    assert_eq!(mock.requests().len(), 3);
    let w = r.warnings();
    assert_eq!(w.len(), 4, "{w:?}");
    assert!(
        w[1].starts_with("jev_batch_1_failed: HTTP 400 max_tokens_exceeded"),
        "{w:?}"
    );
    assert_eq!(r.report["provider_used"], "degraded");
}

// ---------------------------------------------------------------------------------------
// Concurrency and ordering
// ---------------------------------------------------------------------------------------

#[test]
fn max_workers_bounds_requests_in_flight() {
    let names = ids("toolu_drop", 6);
    let src = session(&refs(&names));
    let mock = Mock::start(|req| answers(req, by_name).after_ms(120));
    let r = compact(
        jev(&mock),
        &src,
        &["--batch-size", "1", "--max-workers", "1"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(mock.requests().len(), 6);
    assert_eq!(mock.max_in_flight(), 1);

    let mock = Mock::start(|req| answers(req, by_name).after_ms(300));
    let r = compact(
        jev(&mock),
        &src,
        &["--batch-size", "1", "--max-workers", "3"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(mock.requests().len(), 6);
    assert!(
        (2..=3).contains(&mock.max_in_flight()),
        "{}",
        mock.max_in_flight()
    );
}

#[test]
fn output_does_not_depend_on_the_order_responses_arrive_in() {
    let names = vec![
        "toolu_keep_1",
        "toolu_trim_2",
        "toolu_drop_3",
        "toolu_odd_4",
        "toolu_fail_5",
        "toolu_drop_6",
        "toolu_keep_7",
        "toolu_trim_8",
    ];
    let src = session(&names);
    // Answers: by name, but toolu_odd_4 misses its result answer and toolu_fail_5's batch
    // fails; requests answer after a delay that makes later batches finish first.
    let behaviour = |reverse: bool| {
        move |req: &crate::mock_jev::Request| {
            let ids = req.call_ids();
            let idx: u64 = ids[0].rsplit('_').next().unwrap().parse().unwrap();
            let delay = if reverse { (9 - idx) * 40 } else { 0 };
            if ids.iter().any(|i| i == "toolu_fail_5") {
                return Reply::raw(400, r#"{"detail": "bad"}"#).after_ms(delay);
            }
            answers(req, by_name)
                .and_remove(&["keep_result_toolu_odd_4"])
                .after_ms(delay)
        }
    };
    let mock_a = Mock::start(behaviour(true));
    let a = compact(
        jev(&mock_a),
        &src,
        &["--batch-size", "1", "--max-workers", "8"],
    );
    let mock_b = Mock::start(behaviour(false));
    let b = compact(
        jev(&mock_b),
        &src,
        &["--batch-size", "1", "--max-workers", "1"],
    );
    assert_eq!(a.code(), 0, "{}", a.stderr);
    // The reversed run really did get its answers out of order.
    let order: Vec<String> = mock_a
        .requests()
        .iter()
        .map(|q| q.call_ids()[0].clone())
        .collect();
    assert_eq!(order.len(), 8);
    assert_eq!(a.output, b.output);
    assert_eq!(a.report_without_timing(), b.report_without_timing());
    assert_eq!(
        a.warnings(),
        [
            "jev_missing_answer:keep_result_toolu_odd_4",
            r#"jev_batch_5_failed: HTTP 400: {"detail": "bad"}: those 1 call(s) were kept (fail-safe)"#,
        ]
    );
}

// ---------------------------------------------------------------------------------------
// The key never shows
// ---------------------------------------------------------------------------------------

#[test]
fn the_key_never_appears_in_report_output_or_stderr() {
    // A server that echoes the Authorization header everywhere it can.
    let mock = Mock::start(|req| {
        let auth = req.header("authorization").unwrap_or_default().to_string();
        match req.n {
            1 => Reply::raw(500, &format!("internal error, you sent {auth}")),
            2 => Reply::raw(404, &format!("{{\"detail\": \"no route for {auth}\"}}")),
            _ => {
                let mut r = answers(req, by_name);
                let mut v: Value = serde_json::from_str(&r.body).unwrap();
                v["model"] = json!(format!("model-for-{auth}"));
                r.body = v.to_string();
                r
            }
        }
    });
    let names = ids("toolu_drop", 2);
    let r = compact(
        jev(&mock),
        &session(&refs(&names)),
        &["--batch-size", "1", "--max-workers", "1"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(mock.requests().len(), 3);
    let report = std::fs::read_to_string(r.path("report.json")).unwrap();
    for (what, text) in [
        ("report", &report),
        ("stderr", &r.stderr),
        ("output", &r.output),
    ] {
        assert!(
            !text.contains(KEY),
            "the key leaked into the {what}: {text}"
        );
    }
    assert!(report.contains("<redacted>"), "{report}");
}

// ---------------------------------------------------------------------------------------
// Fail-safe rows and auto
// ---------------------------------------------------------------------------------------

#[test]
fn no_key_keeps_everything_and_says_so() {
    let mock = Mock::by_name();
    let mut cmd = jev(&mock);
    cmd.env_remove("TYPESAFE_API_KEY");
    let src = session(&["toolu_drop_1", "toolu_drop_2"]);
    let r = compact(cmd, &src, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(mock.requests().is_empty());
    assert_eq!(r.report["provider_used"], "jev");
    assert_eq!(r.report["degraded"], true);
    assert_eq!(r.report["degradation_reason"], "jev_unavailable_fail_safe");
    assert_eq!(r.report["semantic_guarantee"], "none");
    assert_eq!(r.report["state_fit_stage"], "none");
    assert_eq!(r.report["requests"], 0);
    assert_eq!(r.report["calls"], 0);
    let w = r.warnings();
    assert!(w[0].starts_with("jev_unavailable: no API key"), "{w:?}");
    assert!(w[0].ends_with("kept every tool call (fail-safe)"), "{w:?}");
    assert!(r
        .decisions()
        .iter()
        .all(|d| d.1 == "keep" && d.2 == "fail_safe" && d.3 == "not_judged_fail_safe"));
    assert_eq!(r.output, src);
}

#[test]
fn disabled_network_keeps_everything_without_a_request() {
    let mock = Mock::by_name();
    let mut cmd = jev(&mock);
    cmd.env("LCC_DISABLE_NETWORK", "1");
    let r = compact(cmd, &session(&["toolu_drop_1"]), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(mock.requests().is_empty());
    assert_eq!(r.report["degradation_reason"], "jev_unavailable_fail_safe");
    assert!(
        r.warnings()[0].starts_with("jev_unavailable: network disabled (LCC_DISABLE_NETWORK=1)")
    );

    // auto falls back to the rules, and says why.
    let mut cmd = jev(&mock);
    cmd.env("LCC_DISABLE_NETWORK", "1");
    let r = compact(cmd, &session(&["toolu_drop_1"]), &["--provider", "auto"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(mock.requests().is_empty());
    assert_eq!(r.report["provider_requested"], "auto");
    assert_eq!(r.report["provider_used"], "rules");
    assert_eq!(r.report["rules_mode"], "lossless");
    assert!(
        r.warnings()[0].starts_with("auto: Jev not used: network disabled"),
        "{:?}",
        r.warnings()
    );
}

#[test]
fn auto_uses_jev_when_a_key_is_found_and_rules_otherwise() {
    let mock = Mock::by_name();
    let r = compact(
        jev(&mock),
        &session(&["toolu_drop_1"]),
        &["--provider", "auto"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(r.report["provider_requested"], "auto");
    assert_eq!(r.report["provider_used"], "jev");
    assert_eq!(r.report["tool_calls_dropped"], 1);

    let mut cmd = jev(&mock);
    cmd.env_remove("TYPESAFE_API_KEY");
    let r = compact(cmd, &session(&["toolu_drop_1"]), &["--provider", "auto"]);
    assert_eq!(mock.requests().len(), 1, "no new request");
    assert_eq!(r.report["provider_used"], "rules");
    assert!(
        r.warnings()[0].starts_with("auto: Jev not used: no API key"),
        "{:?}",
        r.warnings()
    );
}

#[test]
fn no_candidates_means_no_request() {
    let mock = Mock::by_name();
    let r = compact(
        jev(&mock),
        &session(&["toolu_drop_1"]),
        &["--preserve-recent", "100"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(mock.requests().is_empty());
    assert_eq!(r.report["provider_used"], "jev");
    assert_eq!(r.report["degraded"], false);
    assert_eq!(r.report["degradation_reason"], "no_candidates");
    assert_eq!(r.report["semantic_guarantee"], "none");
    assert_eq!(
        r.warnings(),
        ["no_scorable_tool_calls: every call is pinned or has no result yet"]
    );
}

// ---------------------------------------------------------------------------------------
// Fitting and batching
// ---------------------------------------------------------------------------------------

/// A session that needs every stage: a long input (cut at inputs-200), a long unpinned text
/// (abridged), results-only messages (collapsed at calls-one-line) and a pending call.
fn staged_session() -> String {
    let mut msgs = vec![json!({"role": "user", "text": "Goal: fix the parser."})];
    msgs.push(json!({"role": "assistant", "text": format!("Long plan: {}", "plan step ".repeat(100)),
        "toolUses": [{"tool_use_id": "toolu_write_1", "tool": "Write", "input": {"path": "src/p.py", "content": "def f():\n    return 1\n".repeat(60)}}]}));
    msgs.push(
        json!({"role": "user", "toolResults": [{"tool_use_id": "toolu_write_1", "text": "ok"}]}),
    );
    for i in 2..30 {
        let id = format!("toolu_read_{i}");
        msgs.push(json!({"role": "assistant", "toolUses": [{"tool_use_id": id, "tool": "Read", "input": {"path": format!("src/m{i}.py")}}]}));
        msgs.push(json!({"role": "user", "toolResults": [{"tool_use_id": id, "text": format!("contents {i}")}]}));
    }
    msgs.push(json!({"role": "assistant", "toolUses": [{"tool_use_id": "toolu_pending", "tool": "Bash", "input": {"command": "make test", "timeout": 60, "x": 1}}]}));
    msgs.push(json!({"role": "assistant", "text": "Done."}));
    serde_json::to_string(&msgs).unwrap()
}

fn state_of(mock: &Mock) -> Value {
    mock.requests().last().unwrap().json()["state"].clone()
}

#[test]
fn the_state_is_fitted_in_stages_and_refused_when_nothing_fits() {
    let src = staged_session();
    let budget = |n: u64| {
        vec![
            "--max-state-tokens".to_string(),
            n.to_string(),
            "--max-request-tokens".to_string(),
            "60000".to_string(),
        ]
    };
    let run = |n: u64| {
        let mock = Mock::by_name();
        let mut args = budget(n);
        args.push("--strict-fit".into());
        let r = compact(jev(&mock), &src, &refs(&args));
        (r, mock)
    };
    // full
    let (r, mock) = run(30_000);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["state_fit_stage"], "full");
    let full = r.report["state_tokens"].as_u64().unwrap();
    let st = state_of(&mock);
    assert!(st["conversation"][1]["tool_calls"][0]["input"].is_object());
    assert!(st["conversation"][1]["text"].as_str().unwrap().len() > 1000);

    // inputs-200
    let (r, mock) = run(full - 1);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["state_fit_stage"], "inputs-200");
    let cut = r.report["state_tokens"].as_u64().unwrap();
    assert!(cut < full);
    let st = state_of(&mock);
    let input = st["conversation"][1]["tool_calls"][0]["input"]
        .as_str()
        .unwrap();
    assert_eq!(input.chars().count(), 201);
    assert!(
        input.starts_with("{\"path\": \"src/p.py\", \"content\": \"def f():\\n")
            && input.ends_with('…'),
        "{input}"
    );
    let text = st["conversation"][1]["text"].as_str().unwrap();
    assert!(text.contains("\n[... 411 chars omitted ...]\n"), "{text}");
    assert_eq!(st["conversation"][0]["text"], "Goal: fix the parser.");
    assert_eq!(
        st["conversation"][2],
        json!({"role": "user", "tool_results": [{"id": "toolu_write_1", "note": "ok, 2 chars"}]})
    );

    // calls-one-line
    let (r, mock) = run(cut - 1);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["state_fit_stage"], "calls-one-line");
    let smallest = r.report["state_tokens"].as_u64().unwrap();
    assert!(smallest < cut);
    let st = state_of(&mock);
    assert_eq!(
        st["conversation"][2],
        json!({"role": "user", "tool_calls": []})
    );
    let conv = st["conversation"].as_array().unwrap();
    assert_eq!(
        conv[conv.len() - 2],
        json!({"role": "assistant", "tool_calls": ["toolu_pending Bash command=make test, timeout=60 -> pending"]})
    );
    // Candidates keep their full form.
    assert_eq!(
        conv[3]["tool_calls"][0],
        json!({"id": "toolu_read_2", "tool": "Read", "input": {"path": "src/m2.py"}})
    );

    // Nothing fits: exit 2, nothing written, no request.
    let (r, mock) = run(smallest - 1);
    assert_eq!(r.code(), 2, "{}", r.stderr);
    assert!(r.stderr.contains(&format!(
        "conversation does not fit the {}-token state budget (smallest rendering is {smallest} tokens); raise --max-state-tokens",
        smallest - 1
    )), "{}", r.stderr);
    assert!(mock.requests().is_empty());
    assert!(!r.path("out.json").exists() && !r.path("report.json").exists());
}

#[test]
fn questions_are_batched_by_size_and_by_request_tokens() {
    let names = ids("toolu_drop", 5);
    let src = session(&refs(&names));
    let mock = Mock::by_name();
    let r = compact(
        jev(&mock),
        &src,
        &["--batch-size", "2", "--max-workers", "1"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let sent: Vec<Vec<String>> = mock.requests().iter().map(|q| q.call_ids()).collect();
    assert_eq!(
        sent,
        [
            names[..2].to_vec(),
            names[2..4].to_vec(),
            names[4..].to_vec()
        ]
    );
    assert_eq!(mock.requests()[0].question_keys().len(), 4);
    assert_eq!(r.report["requests"], 3);

    // A raised --batch-size packs everything the token budget allows into one request.
    let mock = Mock::by_name();
    let r = compact(jev(&mock), &src, &["--batch-size", "64"]);
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(mock.requests()[0].question_keys().len(), 10);
    let state = r.report["state_tokens"].as_u64().unwrap();

    // A request budget with room for two calls' questions (about 240 tokens each).
    let mock = Mock::by_name();
    let args = [
        "--batch-size".to_string(),
        "64".into(),
        "--max-workers".into(),
        "1".into(),
        "--max-state-tokens".into(),
        state.to_string(),
        "--max-request-tokens".into(),
        (state + 64 + 480).to_string(),
    ];
    let r = compact(jev(&mock), &src, &refs(&args));
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let sizes: Vec<usize> = mock.requests().iter().map(|q| q.call_ids().len()).collect();
    assert_eq!(sizes, [2, 2, 1]);

    // Not even one call fits: exit 2, naming the call.
    let mock = Mock::by_name();
    let args = [
        "--max-state-tokens".to_string(),
        state.to_string(),
        "--max-request-tokens".into(),
        (state + 64 + 20).to_string(),
    ];
    let r = compact(jev(&mock), &src, &refs(&args));
    assert_eq!(r.code(), 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("a single question for toolu_drop_1 ("),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("does not fit the request budget; raise --max-request-tokens"),
        "{}",
        r.stderr
    );
    assert!(mock.requests().is_empty());
    assert!(!r.path("report.json").exists());
}
