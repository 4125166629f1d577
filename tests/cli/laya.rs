//! The local judge (`--provider laya`) and `auto`'s three paths, against in-test mock servers
//! on 127.0.0.1 (`mock_jev::Mock`: the test routes `GET /health` and `POST /v1/systemone`
//! itself). No test touches the network; the "down" server is a loopback port nothing
//! listens on.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mock_jev::{answers, by_name, noul, Mock, Reply, Request};
use crate::support;

const GOAL: &str = "fix the failing parser test";
/// The resolved model the mock laya reports.
const LAYA_MODEL: &str = "laya-rl-agent";

/// A loopback URL where nothing listens (a port just bound and released).
fn dead_endpoint() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/v1/systemone")
}

/// `lcc` with the network allowed, no Jev key, laya at `endpoint`, short back-off.
fn lcc_laya(endpoint: &str) -> Command {
    let mut c = support::lcc();
    c.env_remove("LCC_DISABLE_NETWORK")
        .env("LAYA_ENDPOINT", endpoint)
        .env("LCC_RETRY_BASE_MS", "5");
    c
}

/// A laya-serve style reply (non-strict shape) answering every question with `f(qid)`.
fn laya_reply(req: &Request, f: impl Fn(&str) -> Value, usage: Value) -> Reply {
    let mut map = serde_json::Map::new();
    for k in req.question_keys() {
        let mut a = f(&k);
        let p = a["noul"].as_f64().unwrap_or(0.5);
        a["confidence"] = json!(p.max(1.0 - p));
        a["action"] = json!({"act_probability": p});
        map.insert(k, a);
    }
    Reply::json(
        200,
        &json!({"model": LAYA_MODEL, "answers": map, "usage": usage,
                "routing": {"model": "multilingual", "reason": "test"}}),
    )
}

fn usage_ok() -> Value {
    json!({"input_tokens": 300, "output_tokens": 0, "state_tokens": 120,
           "state_tokens_dropped": 0, "truncated": false, "truncated_questions": []})
}

/// A mock laya: `/health` answers ok, everything else goes to `f`.
fn laya_up(f: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Mock {
    Mock::start(move |r| {
        if r.method == "GET" && r.path == "/health" {
            Reply::json(200, &json!({"status": "ok", "loaded": [], "device": "cpu"}))
        } else if r.json()["questions"].as_object().map_or(0, |q| q.len()) > 64 {
            // laya-serve's own limit.
            Reply::json(413, &json!({"detail": "too many questions"}))
        } else {
            f(r)
        }
    })
}

/// A mock laya answering [`by_name`].
fn laya_by_name() -> Mock {
    laya_up(|r| laya_reply(r, by_name, usage_ok()))
}

/// The judging requests a mock saw (the health probes left out).
fn posts(m: &Mock) -> Vec<Request> {
    m.requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect()
}

struct Run {
    out: Output,
    report: Value,
    output: String,
    stderr: String,
    took: Duration,
}

impl Run {
    fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }

    fn warnings(&self) -> Vec<String> {
        self.report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    }

    /// Candidate decisions (pins left out): (id, decision, source, reason).
    fn decisions(&self) -> Vec<(String, String, String, String)> {
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

    fn decision(&self, id: &str) -> (String, String, String) {
        let d = self
            .decisions()
            .into_iter()
            .find(|d| d.0 == id)
            .unwrap_or_else(|| panic!("no decision for {id}"));
        (d.1, d.2, d.3)
    }
}

/// Run `compact` (defaults: `--provider laya --preserve-recent 1`).
fn compact(mut cmd: Command, transcript: &str, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::write(&input, transcript).unwrap();
    let (out_path, report_path) = (dir.path().join("out.json"), dir.path().join("report.json"));
    cmd.arg("compact").arg(&input);
    if !args.contains(&"-q") {
        cmd.args(["-q", GOAL]);
    }
    if !args.contains(&"--provider") {
        cmd.args(["--provider", "laya"]);
    }
    if !args.contains(&"--preserve-recent") {
        cmd.args(["--preserve-recent", "1"]);
    }
    cmd.arg("-o")
        .arg(&out_path)
        .arg("-r")
        .arg(&report_path)
        .args(args);
    let started = Instant::now();
    let out = support::run(&mut cmd);
    let took = started.elapsed();
    let report = std::fs::read_to_string(&report_path)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(Value::Null);
    Run {
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        output: std::fs::read_to_string(&out_path).unwrap_or_default(),
        out,
        report,
        took,
    }
}

/// A session: a user goal, then per id an assistant call (`pytest -q tests/test_{i}.py`) and
/// a user result, then a closing assistant text (pinned with `--preserve-recent 1`).
fn session(ids: &[&str]) -> String {
    let calls: Vec<(String, String, Value)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.to_string(),
                "Bash".to_string(),
                json!({"command": format!("pytest -q tests/test_{i}.py")}),
            )
        })
        .collect();
    session_of(&calls)
}

/// A session of (id, tool, input) calls, each followed by its result.
fn session_of(calls: &[(String, String, Value)]) -> String {
    let mut msgs =
        vec![json!({"role": "user", "text": "Fix the parser test. Never edit src/generated."})];
    for (i, (id, tool, input)) in calls.iter().enumerate() {
        msgs.push(json!({"role": "assistant", "text": format!("Step {i}."),
            "toolUses": [{"tool_use_id": id, "tool": tool, "input": input}]}));
        msgs.push(json!({"role": "user", "toolResults": [{"tool_use_id": id,
            "text": format!("{id}: line of output\n").repeat(30)}]}));
    }
    msgs.push(json!({"role": "assistant", "text": "Done."}));
    serde_json::to_string_pretty(&json!({ "messages": msgs })).unwrap()
}

/// o200k tokens, counted by tiktoken-rs (independently of lcc's own counter).
fn o200k(s: &str) -> usize {
    static BPE: std::sync::OnceLock<tiktoken_rs::CoreBPE> = std::sync::OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().unwrap())
        .encode_with_special_tokens(s)
        .len()
}

// ---------------------------------------------------------------------------------------
// Judging

#[test]
fn each_call_is_judged_on_its_own_small_state() {
    let mock = laya_by_name();
    let src = session(&["toolu_keep", "toolu_trim", "toolu_drop"]);
    let r = compact(lcc_laya(&mock.url), &src, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);

    // The health probe first, then one request per call, each with that call's two questions.
    let all = mock.requests();
    assert_eq!(
        (all[0].method.as_str(), all[0].path.as_str()),
        ("GET", "/health")
    );
    let posts = posts(&mock);
    assert_eq!(posts.len(), 3);
    let mut asked: Vec<Vec<String>> = posts.iter().map(Request::question_keys).collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            ["keep_call_toolu_drop", "keep_result_toolu_drop"],
            ["keep_call_toolu_keep", "keep_result_toolu_keep"],
            ["keep_call_toolu_trim", "keep_result_toolu_trim"],
        ]
    );
    let trim = posts
        .iter()
        .find(|p| p.call_ids() == ["toolu_trim"])
        .unwrap();
    assert_eq!(trim.path, "/v1/systemone");
    assert_eq!(trim.header("content-type"), Some("application/json"));
    assert_eq!(trim.header("authorization"), None);
    let body = trim.json();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["model", "state", "questions"]);
    assert_eq!(body["model"], "multilingual");
    // The state: the goal, the call's one-line form and result note, and no conversation.
    assert_eq!(
        body["state"],
        json!({"goal": GOAL, "call": "Bash command=pytest -q tests/test_1.py -> ok 810ch",
               "result": "ok, 810 chars", "later_calls": []})
    );
    assert_eq!(
        body["questions"]["keep_result_toolu_trim"],
        json!({"type": "noul",
            "instructions": "Judge the probability that the OUTPUT of the tool call in `call` (Bash; its size is in `result`) still needs to be available verbatim in this session, given `goal` and what `later_calls` do. Score low only when the work it was run for is finished and re-running the tool would produce the same information again if it were needed.",
            "criteria": {"true": "The output's contents are still needed and re-running would not do.",
                         "false": "The output is spent: the work it served is finished."}})
    );
    assert!(
        !trim.body.contains("line of output"),
        "payloads are never sent"
    );

    // Decisions and report.
    assert_eq!(
        r.decisions(),
        [
            (
                "toolu_keep".into(),
                "keep".into(),
                "laya".into(),
                "result_still_needed".into()
            ),
            (
                "toolu_trim".into(),
                "trim".into(),
                "laya".into(),
                "call_kept_result_trimmed".into()
            ),
            (
                "toolu_drop".into(),
                "drop".into(),
                "laya".into(),
                "call_and_result_not_needed".into()
            ),
        ]
    );
    let rep = &r.report;
    assert_eq!(rep["provider_requested"], "laya");
    assert_eq!(rep["provider_used"], "laya");
    assert_eq!(rep["degraded"], false);
    assert_eq!(rep["degradation_reason"], Value::Null);
    assert_eq!(rep["semantic_guarantee"], "judged");
    assert_eq!(rep["state_fit_stage"], "per-call");
    assert_eq!(rep["requests"], 3);
    assert_eq!(rep["calls"], 3);
    assert_eq!(rep["blocks_scored"], 3);
    assert_eq!(rep["input_tokens_sent"], 900);
    assert_eq!(rep["jev_model_resolved"], LAYA_MODEL);
    assert!(rep["state_tokens"].as_u64().unwrap() > 10);
    assert_eq!(r.warnings(), Vec::<String>::new());
    assert!(!r.output.contains("toolu_drop"), "the dropped pair is gone");
    assert!(r.output.contains("toolu_keep: line of output"));
}

#[test]
fn the_outline_names_later_calls_on_the_same_file_or_command() {
    let mock = laya_by_name();
    let c = |id: &str, tool: &str, input: Value| (id.to_string(), tool.to_string(), input);
    let calls = vec![
        c(
            "toolu_read_a",
            "Read",
            json!({"file_path": "/repo/src/a.py"}),
        ),
        c(
            "toolu_test",
            "Bash",
            json!({"command": "pytest -q tests/test_a.py"}),
        ),
        c("toolu_read_b", "Read", json!({"file_path": "src/b.py"})),
        c(
            "toolu_edit_a",
            "Edit",
            json!({"file_path": "src/a.py", "old_string": "x", "new_string": "y"}),
        ),
        c(
            "toolu_sed_a",
            "Bash",
            json!({"command": "sed -n '1,5p' ./src/a.py"}),
        ),
        c(
            "toolu_test_again",
            "Bash",
            json!({"command": "pytest  -q tests/test_a.py"}),
        ),
        c(
            "toolu_rerun_1",
            "Bash",
            json!({"command": "pytest -q tests/test_a.py"}),
        ),
        c(
            "toolu_rerun_2",
            "Bash",
            json!({"command": "pytest -q tests/test_a.py"}),
        ),
        c(
            "toolu_patch",
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: src/b.py\n@@\n-1\n+2\n*** End Patch"}),
        ),
    ];
    let r = compact(lcc_laya(&mock.url), &session_of(&calls), &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let state = |id: &str| {
        posts(&mock)
            .into_iter()
            .find(|p| p.call_ids() == [id])
            .unwrap_or_else(|| panic!("no request for {id}"))
            .json()["state"]
            .clone()
    };
    assert_eq!(
        state("toolu_read_a")["later_calls"],
        json!([
            "Edit file_path=src/a.py, old_string=x -> ok 870ch",
            "Bash command=sed -n '1,5p' ./src/a.py -> ok 840ch"
        ])
    );
    // Repeated lines are listed once, with their count.
    assert_eq!(
        state("toolu_test")["later_calls"],
        json!([
            "Bash command=pytest  -q tests/test_a.py -> ok 990ch",
            "Bash command=pytest -q tests/test_a.py -> ok 900ch (2 times)"
        ])
    );
    assert_eq!(
        state("toolu_read_b")["later_calls"],
        json!(["apply_patch input=*** Begin Patch\n*** Update File: src/b.py\n@@\n-1\n+2\n*** End Patch -> ok 840ch"])
    );
    assert_eq!(
        state("toolu_edit_a")["later_calls"],
        json!(["Bash command=sed -n '1,5p' ./src/a.py -> ok 840ch"])
    );
    assert_eq!(state("toolu_patch")["later_calls"], json!([]));
    assert_eq!(
        state("toolu_read_a")["call"],
        "Read file_path=/repo/src/a.py -> ok 870ch"
    );
}

#[test]
fn long_inputs_are_cut_to_the_context_budget() {
    let long_goal = "Make the parser accept trailing commas in every list and map. ".repeat(200);
    let mut calls = vec![(
        "toolu_big".to_string(),
        "Bash".to_string(),
        json!({"command": format!("cat src/parser.py && {}", "echo 'a long line of shell' && ".repeat(200))}),
    )];
    for i in 0..60 {
        calls.push((
            format!("toolu_edit_{i}"),
            "Edit".to_string(),
            json!({"file_path": "src/parser.py", "old_string": format!("case {i}: {}", "token ".repeat(30))}),
        ));
    }
    let src = session_of(&calls);
    for (ctx, budget) in [(256usize, 50usize), (512, 255), (1024, 664), (2048, 1484)] {
        let mock = laya_by_name();
        let ctx_s = ctx.to_string();
        let r = compact(
            lcc_laya(&mock.url),
            &src,
            &["-q", &long_goal, "--laya-context-tokens", &ctx_s],
        );
        assert_eq!(r.code(), 0, "{}", r.stderr);
        let posts = posts(&mock);
        assert_eq!(posts.len(), 61, "every call was asked about ({ctx})");
        let mut biggest = 0;
        for p in &posts {
            let state = p.json()["state"].clone();
            // The state as sent (Python-style separators), counted independently.
            let text = p.body[p.body.find("\"state\": ").unwrap() + 9
                ..p.body.find(", \"questions\": ").unwrap()]
                .to_string();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), state);
            let n = o200k(&text);
            assert!(
                n <= budget,
                "{ctx}: a state of {n} tokens > {budget}: {text}"
            );
            biggest = biggest.max(n);
            let goal = state["goal"].as_str().unwrap();
            assert!(
                long_goal.starts_with(goal.trim_end_matches('\u{2026}')),
                "{goal}"
            );
        }
        assert_eq!(r.report["state_tokens"], biggest, "{ctx}");
        let big = posts
            .iter()
            .find(|p| p.call_ids() == ["toolu_big"])
            .unwrap()
            .json();
        let st = &big["state"];
        assert!(st["call"]
            .as_str()
            .unwrap()
            .starts_with("Bash command=cat src/parser.py"));
        let shown = st["later_calls"].as_array().unwrap().len() as u64;
        let hidden = st["later_calls_not_shown"].as_u64().unwrap_or(0);
        assert_eq!(shown + hidden, 60, "{ctx}: {st}");
        if ctx >= 1024 {
            assert!(shown >= 1, "{ctx}: some later calls are shown: {st}");
        }
        assert!(
            r.warnings()
                .iter()
                .any(|w| w.starts_with("laya_state_cut: ")
                    && w.contains(&format!("--laya-context-tokens {ctx}"))),
            "{:?}",
            r.warnings()
        );
        assert_eq!(r.report["provider_used"], "laya");
    }
}

#[test]
fn requests_never_carry_more_than_64_questions() {
    // 70 calls: a request per call, each with its two questions (the mock refuses more than
    // 64, as laya-serve does), at most --max-workers in flight.
    let mock = laya_up(|r| laya_reply(r, by_name, usage_ok()).after_ms(5));
    let names: Vec<String> = (1..=70).map(|i| format!("toolu_drop_{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let r = compact(
        lcc_laya(&mock.url),
        &session(&refs),
        &["--max-workers", "3"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let posts = posts(&mock);
    assert_eq!(posts.len(), 70);
    assert!(posts.iter().all(|p| p.question_keys().len() == 2));
    let mut asked: Vec<String> = posts.iter().flat_map(Request::call_ids).collect();
    asked.sort();
    let mut want = names.clone();
    want.sort();
    assert_eq!(asked, want);
    assert!(mock.max_in_flight() <= 3, "{}", mock.max_in_flight());
    assert_eq!(r.report["tool_calls_dropped"], 70);
    assert_eq!(r.report["requests"], 70);
    assert_eq!(r.report["calls"], 70);
}

#[test]
fn truncated_answers_count_as_not_judged() {
    // `…_cut_…`: the whole state was cut; `…_half_…`: only the result question was.
    let mock = laya_up(|r| {
        let id = r.call_ids()[0].clone();
        let usage = if id.contains("cut") {
            json!({"input_tokens": 300, "output_tokens": 0, "truncated": true, "state_tokens_dropped": 40,
                   "truncated_questions": [format!("keep_call_{id}"), format!("keep_result_{id}")]})
        } else if id.contains("half") {
            json!({"input_tokens": 300, "output_tokens": 0, "truncated": false,
                   "truncated_questions": [format!("keep_result_{id}")]})
        } else {
            usage_ok()
        };
        laya_reply(r, by_name, usage)
    });
    let src = session(&["toolu_drop_1", "toolu_drop_cut_2", "toolu_drop_half_3"]);
    let r = compact(lcc_laya(&mock.url), &src, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        r.decisions(),
        [
            (
                "toolu_drop_1".into(),
                "drop".into(),
                "laya".into(),
                "call_and_result_not_needed".into()
            ),
            (
                "toolu_drop_cut_2".into(),
                "keep".into(),
                "fail_safe".into(),
                "not_judged_fail_safe".into()
            ),
            (
                "toolu_drop_half_3".into(),
                "keep".into(),
                "laya".into(),
                "half_judged_kept_fail_safe".into()
            ),
        ]
    );
    assert_eq!(r.report["provider_used"], "laya+partial_fail_safe");
    assert_eq!(r.report["degraded"], true);
    assert_eq!(r.report["degradation_reason"], "laya_batch_failed");
    assert_eq!(r.report["semantic_guarantee"], "partial");
    let w = r.warnings();
    assert_eq!(
        w[..3],
        [
            "laya_truncated_answer:keep_call_toolu_drop_cut_2",
            "laya_truncated_answer:keep_result_toolu_drop_cut_2",
            "laya_truncated_answer:keep_result_toolu_drop_half_3",
        ]
    );
    assert!(
        w[3].starts_with("laya_truncated: 3 answer(s) came from a state the server cut"),
        "{w:?}"
    );

    // Every answer truncated: nothing judged.
    let mock = laya_up(|r| {
        laya_reply(
            r,
            by_name,
            json!({"input_tokens": 9, "output_tokens": 0, "truncated": 3}),
        )
    });
    let r = compact(
        lcc_laya(&mock.url),
        &session(&["toolu_drop_1", "toolu_drop_2"]),
        &[],
    );
    assert_eq!(r.report["provider_used"], "degraded");
    assert_eq!(r.report["degradation_reason"], "laya_no_answers_fail_safe");
    assert_eq!(r.report["semantic_guarantee"], "none");
    assert_eq!(r.output, session(&["toolu_drop_1", "toolu_drop_2"]));
    assert_eq!(
        r.warnings().last().unwrap(),
        "laya_no_answers: every call was kept unjudged (fail-safe)"
    );
}

// ---------------------------------------------------------------------------------------
// Fail-safe rows

#[track_caller]
fn assert_unavailable(r: &Run, src: &str, cause_starts: &str) {
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["provider_requested"], "laya");
    assert_eq!(r.report["provider_used"], "laya");
    assert_eq!(r.report["degraded"], true);
    assert_eq!(r.report["degradation_reason"], "laya_unavailable_fail_safe");
    assert_eq!(r.report["semantic_guarantee"], "none");
    assert_eq!(r.report["requests"], 0);
    assert_eq!(r.report["state_fit_stage"], "none");
    let w = r.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!("laya_unavailable: {cause_starts}")),
        "{w:?}"
    );
    assert!(
        w[0].ends_with("; kept every tool call (fail-safe)"),
        "{w:?}"
    );
    assert!(r
        .decisions()
        .iter()
        .all(|d| d.1 == "keep" && d.2 == "fail_safe" && d.3 == "not_judged_fail_safe"));
    assert_eq!(r.output, src, "the output is the input, byte for byte");
}

#[test]
fn a_server_that_is_down_keeps_everything() {
    let src = session(&["toolu_drop_1", "toolu_drop_2"]);
    let dead = dead_endpoint();
    let r = compact(lcc_laya(&dead), &src, &[]);
    let health = dead.replace("/v1/systemone", "/health");
    assert_unavailable(&r, &src, &format!("no answer from GET {health} ("));
    assert!(
        r.warnings()[0].contains("start laya-serve"),
        "{:?}",
        r.warnings()
    );
}

#[test]
fn an_unhealthy_server_keeps_everything() {
    let mock = Mock::start(|r| {
        if r.path == "/health" {
            Reply::json(503, &json!({"detail": "loading"}))
        } else {
            laya_reply(r, by_name, usage_ok())
        }
    });
    let src = session(&["toolu_drop_1"]);
    let r = compact(lcc_laya(&mock.url), &src, &[]);
    let health = mock.url.replace("/v1/systemone", "/health");
    assert_unavailable(&r, &src, &format!("GET {health} answered HTTP 503"));
    assert_eq!(mock.requests().len(), 1, "only the probe");
}

#[test]
fn a_health_probe_that_hangs_times_out_quickly() {
    let mock = Mock::start(|r| {
        if r.path == "/health" {
            Reply::json(200, &json!({"status": "ok"})).after_ms(3000)
        } else {
            laya_reply(r, by_name, usage_ok())
        }
    });
    let src = session(&["toolu_drop_1"]);
    let mut cmd = lcc_laya(&mock.url);
    cmd.env("LCC_LAYA_HEALTH_TIMEOUT_MS", "200");
    let r = compact(cmd, &src, &[]);
    assert_unavailable(&r, &src, "no answer from GET ");
    assert!(
        r.warnings()[0].contains("(timed out after 200 ms)"),
        "{:?}",
        r.warnings()
    );
    assert!(r.took < Duration::from_millis(2500), "{:?}", r.took);
}

#[test]
fn a_disabled_network_means_no_laya() {
    let mock = laya_by_name();
    let src = session(&["toolu_drop_1"]);
    let mut cmd = lcc_laya(&mock.url);
    cmd.env("LCC_DISABLE_NETWORK", "1");
    let r = compact(cmd, &src, &[]);
    assert_unavailable(&r, &src, "network disabled (LCC_DISABLE_NETWORK=1)");
    assert!(mock.requests().is_empty(), "not even the probe");
}

#[test]
fn a_server_that_cannot_infer_stops_after_the_first_failure() {
    // A laya-serve without its weights: /health is fine, every decision is a 500.
    let mock = laya_up(|_| Reply::json(500, &json!({"detail": "inference failed"})));
    let names: Vec<String> = (1..=10).map(|i| format!("toolu_drop_{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let src = session(&refs);
    let r = compact(lcc_laya(&mock.url), &src, &["--max-workers", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    // One call, two attempts; the other nine were never sent.
    let posts = posts(&mock);
    assert_eq!(posts.len(), 2);
    assert!(posts.iter().all(|p| p.call_ids() == ["toolu_drop_1"]));
    assert_eq!(r.report["requests"], 1);
    assert_eq!(r.report["calls"], 0);
    assert_eq!(r.report["provider_used"], "degraded");
    assert_eq!(r.report["degradation_reason"], "laya_no_answers_fail_safe");
    let w = r.warnings();
    assert_eq!(
        w[0],
        "laya_request_failed:toolu_drop_1: HTTP 500: {\"detail\":\"inference failed\"} (after 2 attempts); the call was kept (fail-safe)"
    );
    assert_eq!(
        w[1],
        "laya_stopped: HTTP 500: {\"detail\":\"inference failed\"} (after 2 attempts); is the laya server able to load its weights? check its log and GET /health; the 9 call(s) not yet sent were kept (fail-safe)"
    );
    assert!(r.decisions().iter().all(|d| d.2 == "fail_safe"));
    assert_eq!(r.output, src);
}

#[test]
fn one_refused_request_does_not_stop_the_others() {
    let mock = laya_up(|r| {
        if r.call_ids()[0].contains("bad") {
            Reply::json(422, &json!({"detail": "echo of the state"}))
        } else {
            laya_reply(r, by_name, usage_ok())
        }
    });
    let src = session(&["toolu_drop_1", "toolu_bad_2", "toolu_keep_3"]);
    let r = compact(lcc_laya(&mock.url), &src, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(posts(&mock).len(), 3);
    assert_eq!(r.decision("toolu_drop_1").0, "drop");
    assert_eq!(r.decision("toolu_bad_2").1, "fail_safe");
    assert_eq!(r.decision("toolu_keep_3").0, "keep");
    assert_eq!(r.report["provider_used"], "laya+partial_fail_safe");
    assert!(r.warnings()[0].starts_with("laya_request_failed:toolu_bad_2: HTTP 422"));
    assert!(!r.warnings()[0].contains("echo of the state"));
}

#[test]
fn missing_and_out_of_range_answers_are_laya_warnings() {
    let mock = laya_up(|r| {
        laya_reply(
            r,
            |q| {
                if q == "keep_call_toolu_drop_2" {
                    noul(1.5)
                } else if q == "keep_result_toolu_drop_2" {
                    json!({"type": "choice", "choice": "x"})
                } else {
                    by_name(q)
                }
            },
            usage_ok(),
        )
    });
    let r = compact(
        lcc_laya(&mock.url),
        &session(&["toolu_drop_1", "toolu_drop_2"]),
        &[],
    );
    assert_eq!(
        r.warnings(),
        [
            "laya_out_of_range_answer:keep_call_toolu_drop_2",
            "laya_missing_answer:keep_result_toolu_drop_2"
        ]
    );
    assert_eq!(r.decision("toolu_drop_2").1, "fail_safe");
}

#[test]
fn no_candidates_means_no_request() {
    let mock = laya_by_name();
    let r = compact(
        lcc_laya(&mock.url),
        &session(&["toolu_drop_1"]),
        &["--preserve-recent", "100"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(mock.requests().is_empty());
    assert_eq!(r.report["provider_used"], "laya");
    assert_eq!(r.report["degraded"], false);
    assert_eq!(r.report["degradation_reason"], "no_candidates");
}

#[test]
fn the_laya_key_is_sent_and_never_shown() {
    const SECRET: &str = "laya-secret-7788";
    let mock = laya_up(|r| {
        if r.header("authorization") == Some(&format!("Bearer {SECRET}"))
            && r.call_ids()[0].contains("drop")
        {
            laya_reply(r, by_name, usage_ok())
        } else {
            Reply::raw(
                404,
                &format!("no route; you sent {:?}", r.header("authorization")),
            )
        }
    });
    let src = session(&["toolu_drop_1", "toolu_keep_2"]);
    let mut cmd = lcc_laya(&mock.url);
    cmd.env("LAYA_API_KEY", SECRET);
    let r = compact(cmd, &src, &["--max-workers", "1"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.decision("toolu_drop_1").0, "drop");
    let report = serde_json::to_string(&r.report).unwrap();
    assert!(
        !report.contains(SECRET) && !r.stderr.contains(SECRET),
        "{report}"
    );
    assert!(report.contains("<redacted>"), "{report}");

    // A server that wants a key nobody gave it.
    let mock = laya_up(|_| Reply::json(401, &json!({"detail": "invalid or missing bearer token"})));
    let r = compact(lcc_laya(&mock.url), &src, &["--max-workers", "1"]);
    assert_eq!(posts(&mock).len(), 1, "a refused key stops the run");
    assert_eq!(
        r.warnings()[..2],
        [
            "laya_request_failed:toolu_drop_1: the laya server refused the request (HTTP 401); set LAYA_API_KEY to the key the server was started with; the call was kept (fail-safe)",
            "laya_stopped: the laya server refused the request (HTTP 401); set LAYA_API_KEY to the key the server was started with; the 1 call(s) not yet sent were kept (fail-safe)",
        ]
    );
}

#[test]
fn the_same_answers_give_the_same_report() {
    let mock = laya_by_name();
    let names: Vec<String> = (1..=12)
        .map(|i| format!("toolu_{}_{i}", ["keep", "trim", "drop"][i % 3]))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let src = session(&refs);
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("timing");
        v
    };
    let a = compact(lcc_laya(&mock.url), &src, &[]);
    let b = compact(lcc_laya(&mock.url), &src, &["--max-workers", "1"]);
    assert_eq!(strip(a.report), strip(b.report));
    assert_eq!(a.output, b.output);
}

// ---------------------------------------------------------------------------------------
// auto

#[test]
fn auto_uses_jev_when_a_key_is_found() {
    let jev = Mock::start(|r| answers(r, by_name));
    let laya = laya_by_name();
    let mut cmd = lcc_laya(&laya.url);
    cmd.env("TYPESAFE_API_KEY", "sk-test-1234567")
        .env("TYPESAFE_ENDPOINT", &jev.url);
    let r = compact(cmd, &session(&["toolu_drop_1"]), &["--provider", "auto"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["provider_requested"], "auto");
    assert_eq!(r.report["provider_used"], "jev");
    assert_eq!(
        r.decision("toolu_drop_1"),
        (
            "drop".into(),
            "jev".into(),
            "call_and_result_not_needed".into()
        )
    );
    assert_eq!(jev.requests().len(), 1);
    assert!(laya.requests().is_empty(), "laya is not even probed");
    assert_eq!(r.warnings(), Vec::<String>::new());
}

#[test]
fn auto_uses_laya_when_there_is_no_key_and_laya_answers() {
    let laya = laya_by_name();
    let r = compact(
        lcc_laya(&laya.url),
        &session(&["toolu_drop_1", "toolu_keep_2"]),
        &["--provider", "auto"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["provider_requested"], "auto");
    assert_eq!(r.report["provider_used"], "laya");
    assert_eq!(r.report["semantic_guarantee"], "judged");
    assert_eq!(r.report["rules_mode"], Value::Null);
    assert_eq!(
        r.decision("toolu_drop_1"),
        (
            "drop".into(),
            "laya".into(),
            "call_and_result_not_needed".into()
        )
    );
    let w = r.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("auto: Jev not used: no API key"), "{w:?}");
    assert!(w[0].ends_with("; ran --provider laya instead"), "{w:?}");
    // One probe, then the two requests.
    let all = laya.requests();
    assert_eq!(all.iter().filter(|q| q.path == "/health").count(), 1);
    assert_eq!(posts(&laya).len(), 2);
}

#[test]
fn auto_runs_the_rules_when_neither_judge_can() {
    let dead = dead_endpoint();
    let src = session(&["toolu_drop_1"]);
    let r = compact(lcc_laya(&dead), &src, &["--provider", "auto"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["provider_requested"], "auto");
    assert_eq!(r.report["provider_used"], "rules");
    assert_eq!(r.report["rules_mode"], "lossless");
    assert_eq!(r.report["degraded"], false);
    let w = r.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].starts_with("auto: Jev not used: no API key"), "{w:?}");
    assert!(
        w[0].ends_with("; ran --provider rules (lossless) instead"),
        "{w:?}"
    );
    let health = dead.replace("/v1/systemone", "/health");
    assert!(
        w[1].starts_with(&format!(
            "auto: laya not used: no answer from GET {health} ("
        )),
        "{w:?}"
    );
    assert!(
        w[1].ends_with("; ran --provider rules (lossless) instead"),
        "{w:?}"
    );

    // With the network disabled, laya is not even probed.
    let laya = laya_by_name();
    let mut cmd = lcc_laya(&laya.url);
    cmd.env("LCC_DISABLE_NETWORK", "1");
    let r = compact(cmd, &src, &["--provider", "auto"]);
    assert_eq!(r.report["provider_used"], "rules");
    assert!(laya.requests().is_empty());
    assert_eq!(
        r.warnings(),
        [
            "auto: Jev not used: network disabled (LCC_DISABLE_NETWORK=1); ran --provider rules (lossless) instead",
            "auto: laya not used: network disabled (LCC_DISABLE_NETWORK=1); ran --provider rules (lossless) instead",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Settings

#[test]
fn the_endpoint_flag_wins_and_plain_http_must_be_loopback() {
    let laya = laya_by_name();
    // The flag overrides LAYA_ENDPOINT.
    let cmd = lcc_laya(&dead_endpoint());
    let r = compact(
        cmd,
        &session(&["toolu_drop_1"]),
        &["--laya-endpoint", &laya.url],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["provider_used"], "laya");
    assert_eq!(posts(&laya).len(), 1);

    for (flag, var, names) in [
        (
            Some("http://10.1.2.3:8000/v1/systemone"),
            None,
            "--laya-endpoint",
        ),
        (
            None,
            Some("http://laya.example.invalid/v1/systemone"),
            "LAYA_ENDPOINT",
        ),
        (Some("ftp://127.0.0.1/x"), None, "--laya-endpoint"),
        (Some("not a url"), None, "--laya-endpoint"),
    ] {
        let cmd = lcc_laya(var.unwrap_or(&laya.url));
        let args: Vec<&str> = flag.map(|f| vec!["--laya-endpoint", f]).unwrap_or_default();
        let r = compact(cmd, &session(&["toolu_drop_1"]), &args);
        assert_eq!(r.code(), 2, "{flag:?} {var:?}: {}", r.stderr);
        assert!(r.stderr.contains(names), "{}", r.stderr);
        assert_eq!(r.report, Value::Null, "no report is written");
    }
    // https:// anywhere is fine (it is not contacted here: nothing to judge).
    let cmd = lcc_laya("https://laya.example.invalid/v1/systemone");
    let r = compact(
        cmd,
        &session(&["toolu_drop_1"]),
        &["--preserve-recent", "100"],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    // The endpoint is not checked when laya cannot run.
    let cmd = lcc_laya("http://10.1.2.3/v1/systemone");
    let r = compact(cmd, &session(&["toolu_drop_1"]), &["--provider", "rules"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(posts(&laya).len(), 1, "no new request");
}

#[test]
fn the_context_size_is_validated() {
    for (v, msg) in [
        ("100", "--laya-context-tokens must be >= 256 (got 100)"),
        (
            "8193",
            "--laya-context-tokens must be between 256 and 8192 (got 8193)",
        ),
    ] {
        let r = support::lcc_run(&[
            "compact",
            &support::fx("session.json"),
            "--laya-context-tokens",
            v,
        ])
        .expect(2);
        assert!(r.stderr.contains(msg), "{}", r.stderr);
    }
    // The block-mode laya flags are still refused, by name.
    let r = support::lcc_run(&[
        "compact",
        &support::fx("session.json"),
        "--laya-context-limit",
        "512",
    ])
    .expect(2);
    assert!(r.stderr.contains("--laya-context-limit"), "{}", r.stderr);
}
