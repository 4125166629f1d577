//! The windowed fourth fit stage, `--strict-fit` and `--long-context`, against the in-test
//! mock System One server (see `judge.rs` for the single-state judge path).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::judge::{compact, jev, refs, Run, GOAL};
use crate::mock_jev::{answers, by_name, Mock, Reply, Request, INPUT_TOKENS};
use crate::support;

/// Small budgets keep the fixtures small: every state at most this many tokens…
const STATE: usize = 3_000;
/// …and every request at most this many.
const REQUEST: usize = 6_000;

fn budget() -> Vec<String> {
    vec![
        "--max-state-tokens".into(),
        STATE.to_string(),
        "--max-request-tokens".into(),
        REQUEST.to_string(),
    ]
}

fn with(mut base: Vec<String>, more: &[&str]) -> Vec<String> {
    base.extend(more.iter().map(|s| s.to_string()));
    base
}

/// A session: the goal, `filler` long assistant notes (which alone overflow [`STATE`] at
/// every stage), then one Read or Bash call and its result per id, then two closing texts
/// (pinned with `--preserve-recent 2`). Call `i` reads `src/m{i % 7}.py` or runs
/// `pytest -q tests/t{i % 5}.py`; `extra` appends calls `(id, file)` reading `file` at the end.
fn session(filler: usize, ids: &[String], extra: &[(&str, &str)]) -> String {
    let mut msgs =
        vec![json!({"role": "user", "text": "Goal: fix the lexer. Never touch vendor/."})];
    for i in 0..filler {
        msgs.push(json!({"role": "assistant", "text": format!("Note {i}: {}", "thinking about the lexer and its tokens ".repeat(20))}));
    }
    let mut calls: Vec<(String, &str, Value)> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        if i % 2 == 0 {
            calls.push((
                id.clone(),
                "Read",
                json!({"file_path": format!("src/m{}.py", i % 7)}),
            ));
        } else {
            calls.push((
                id.clone(),
                "Bash",
                json!({"command": format!("pytest -q tests/t{}.py", i % 5)}),
            ));
        }
    }
    for (id, file) in extra {
        calls.push((id.to_string(), "Read", json!({"file_path": file})));
    }
    for (i, (id, tool, input)) in calls.into_iter().enumerate() {
        msgs.push(json!({"role": "assistant", "text": format!("Step {i}."),
            "toolUses": [{"tool_use_id": id, "tool": tool, "input": input}]}));
        msgs.push(json!({"role": "user", "toolResults": [{"tool_use_id": id, "text": format!("{id} output line\n").repeat(20)}]}));
    }
    msgs.push(json!({"role": "assistant", "text": "All tests pass now."}));
    msgs.push(json!({"role": "user", "text": "Thanks, commit it."}));
    serde_json::to_string(&json!({ "messages": msgs })).unwrap()
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("toolu_{prefix}_{i}")).collect()
}

/// Run with `--preserve-recent 2` and the small budgets, plus `args`.
fn run(mock: &Mock, src: &str, args: &[&str]) -> Run {
    let all = with(with(budget(), &["--preserve-recent", "2"]), args);
    compact(jev(mock), src, &refs(&all))
}

/// The state exactly as sent, and the body, from a request.
fn state_text(req: &Request) -> &str {
    let b = req.body.as_str();
    let start = b.find("\"state\": ").unwrap() + "\"state\": ".len();
    let end = b.rfind(", \"questions\": {").unwrap();
    &b[start..end]
}

fn o200k(text: &str) -> usize {
    static BPE: std::sync::OnceLock<tiktoken_rs::CoreBPE> = std::sync::OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().unwrap())
        .encode_ordinary(text)
        .len()
}

/// The segments' message ranges, in order.
fn ranges(state: &Value) -> Vec<(usize, usize)> {
    state["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|seg| {
            let r = seg["messages"]
                .as_str()
                .expect("a segment names its messages");
            match r.split_once('-') {
                Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                None => (r.parse().unwrap(), r.parse().unwrap()),
            }
        })
        .collect()
}

fn segments<'a>(state: &'a Value, view: &str) -> Vec<&'a Value> {
    state["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["view"] == view)
        .collect()
}

/// Everything every windowed run must satisfy; returns the number of requests.
fn check_windowed(r: &Run, mock: &Mock, candidates: &[String], messages: usize) -> usize {
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let rep = &r.report;
    let reqs = mock.requests();
    assert_eq!(rep["state_fit_stage"], "windowed");
    assert_eq!(rep["state_windows"], reqs.len());
    assert_eq!(rep["requests"], reqs.len());
    assert_eq!(rep["calls"], reqs.len());
    assert_eq!(rep["input_tokens_sent"], INPUT_TOKENS * reqs.len() as u64);
    assert_eq!(rep["semantic_guarantee"], "judged");
    assert_eq!(rep["degraded"], false);
    let w = r.warnings();
    assert!(
        w.iter().any(|w| w.starts_with("judged_in_windows:")
            && w.contains(&format!(
                "the judge saw the session in {} windows",
                reqs.len()
            ))),
        "{w:?}"
    );

    // Every candidate is asked about exactly once, and has a judge decision.
    let mut asked: BTreeMap<String, usize> = BTreeMap::new();
    for q in &reqs {
        for id in q.call_ids() {
            *asked.entry(id).or_default() += 1;
        }
    }
    let want: BTreeMap<String, usize> = candidates.iter().map(|c| (c.clone(), 1)).collect();
    assert_eq!(asked, want);
    let decided: Vec<String> = r
        .decisions()
        .into_iter()
        .map(|d| {
            assert_eq!(d.2, "jev", "{d:?}");
            d.0
        })
        .collect();
    assert_eq!(decided, candidates);

    // Each state: the goal, the first and the pinned recent messages, segments tiling the
    // whole conversation, the asked calls inside its window; no state or request over budget.
    let mut largest = 0;
    for q in &reqs {
        let text = state_text(q);
        let state: Value = serde_json::from_str(text).unwrap();
        assert_eq!(state["goal"], GOAL);
        let r_ = ranges(&state);
        assert_eq!(r_.first(), Some(&(0, 0)), "{r_:?}");
        assert_eq!(r_.last(), Some(&(messages - 2, messages - 1)), "{r_:?}");
        for pair in r_.windows(2) {
            assert_eq!(
                pair[1].0,
                pair[0].1 + 1,
                "ranges must tile the session: {r_:?}"
            );
        }
        let pinned = segments(&state, "pinned");
        assert_eq!(pinned.len(), 2);
        assert_eq!(
            pinned[0]["entries"][0]["text"],
            "Goal: fix the lexer. Never touch vendor/."
        );
        assert_eq!(pinned[1]["entries"][1]["text"], "Thanks, commit it.");
        let window = segments(&state, "window");
        assert_eq!(window.len(), 1);
        let shown = window[0].to_string();
        for id in q.call_ids() {
            assert!(
                shown.contains(&format!("\"id\":\"{id}\"")),
                "{id} not in its window"
            );
        }
        let tokens = o200k(text);
        assert!(tokens <= STATE, "state of {tokens} tokens");
        assert!(o200k(&q.body) <= REQUEST, "request over budget");
        largest = largest.max(tokens);
    }
    let reported = rep["state_tokens"].as_u64().unwrap() as usize;
    assert!(
        reported >= largest && reported <= STATE,
        "{reported} vs {largest}"
    );
    reqs.len()
}

#[test]
fn one_two_and_many_windows_ask_every_candidate_exactly_once() {
    // One window: three candidates, the whole overflowing only because of the notes.
    let names = ids("keep", 3);
    let src = session(30, &names, &[]);
    let n = 30 + 2 * names.len() + 3;
    let mock = Mock::by_name();
    let r = run(&mock, &src, &[]);
    assert_eq!(check_windowed(&r, &mock, &names, n), 1);

    // Two windows: ten candidates, at most five a request.
    let names = ids("trim", 10);
    let src = session(30, &names, &[]);
    let n = 30 + 2 * names.len() + 3;
    let mock = Mock::by_name();
    let r = run(&mock, &src, &["--batch-size", "5"]);
    assert_eq!(check_windowed(&r, &mock, &names, n), 2);
    let sizes: Vec<usize> = mock.requests().iter().map(|q| q.call_ids().len()).collect();
    assert_eq!(sizes, [5, 5]);

    // Many windows, cut by the token budgets (--batch-size is no limit here).
    let names = ids("drop", 120);
    let src = session(30, &names, &[]);
    let n = 30 + 2 * names.len() + 3;
    let mock = Mock::by_name();
    let r = run(&mock, &src, &["--batch-size", "1000", "--max-workers", "3"]);
    let windows = check_windowed(&r, &mock, &names, n);
    assert!(windows >= 5, "{windows}");
    assert!(mock.max_in_flight() <= 3);
    // The decisions are the judge's: every call dropped.
    assert_eq!(r.report["tool_calls_dropped"], 120);
    // Each window is packed: all but the last carry many candidates.
    let sizes: Vec<usize> = mock.requests().iter().map(|q| q.call_ids().len()).collect();
    assert!(
        sizes[..sizes.len() - 1].iter().all(|&k| k >= 10),
        "{sizes:?}"
    );
}

#[test]
fn every_omitted_message_is_summarized_or_outlined() {
    let names = ids("keep", 150);
    let src = session(30, &names, &[]);
    let mock = Mock::by_name();
    let r = run(&mock, &src, &["--batch-size", "8"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let reqs = mock.requests();
    let mid: Value = serde_json::from_str(state_text(&reqs[reqs.len() / 2])).unwrap();
    let views: Vec<&str> = mid["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["view"].as_str().unwrap())
        .collect();
    assert_eq!(
        views,
        ["pinned", "summary", "outline", "window", "outline", "summary", "pinned"]
    );
    let note = mid["note"].as_str().unwrap();
    assert!(note.contains("together cover every message"), "{note}");
    // A summary counts the calls of its span, per tool.
    for s in segments(&mid, "summary") {
        let r = ranges(&json!({"conversation": [s]}))[0];
        let calls: u64 = s["tool_calls"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        // Calls sit at odd offsets after the 31 leading messages.
        let want = (r.0..=r.1).filter(|&m| m > 30 && (m - 31) % 2 == 0).count() as u64;
        assert_eq!(calls, want, "{s}");
    }
    // Outline entries are the short form: results-only messages left out, no payloads.
    for s in segments(&mid, "outline") {
        for e in s["entries"].as_array().unwrap() {
            assert!(
                e.get("tool_results").is_none() && e["tool_calls"] != json!([]),
                "{e}"
            );
        }
    }
}

#[test]
fn a_file_read_again_later_shows_in_its_windows_outline() {
    // The first call reads src/lexer.py; 100 calls later it is read again.
    let mut names = vec!["toolu_first".to_string()];
    names.extend(ids("mid", 100));
    let src = session(30, &names, &[("toolu_again", "src/lexer.py")]);
    let src = src.replacen("src/m0.py", "src/lexer.py", 1);
    let mock = Mock::by_name();
    let r = run(&mock, &src, &["--batch-size", "4"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let reqs = mock.requests();
    let first = reqs
        .iter()
        .find(|q| q.call_ids().contains(&"toolu_first".to_string()))
        .unwrap();
    let state: Value = serde_json::from_str(state_text(first)).unwrap();
    let after = segments(&state, "summary")
        .into_iter()
        .find(|s| s.get("touches_again").is_some())
        .unwrap_or_else(|| panic!("no touches_again in {state}"));
    assert_eq!(after["touches_again"]["src/lexer.py"], json!({"Read": 1}));
    // The window of the re-read says it was read before.
    let last = reqs
        .iter()
        .find(|q| q.call_ids().contains(&"toolu_again".to_string()))
        .unwrap();
    let state: Value = serde_json::from_str(state_text(last)).unwrap();
    let before = segments(&state, "summary")
        .into_iter()
        .find(|s| s.get("already_touched").is_some())
        .unwrap_or_else(|| panic!("no already_touched in {state}"));
    assert_eq!(
        before["already_touched"]["src/lexer.py"],
        json!({"Read": 1})
    );
}

#[test]
fn strict_fit_fails_where_the_python_release_fails() {
    let names = ids("keep", 20);
    let src = session(30, &names, &[]);
    let mock = Mock::by_name();
    let r = run(&mock, &src, &["--strict-fit"]);
    assert_eq!(r.code(), 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "conversation does not fit the {STATE}-token state budget (smallest rendering is "
        )) && r
            .stderr
            .contains("tokens); raise --max-state-tokens or compact fewer messages"),
        "{}",
        r.stderr
    );
    assert!(mock.requests().is_empty());
    assert!(!r.path("out.json").exists() && !r.path("report.json").exists());

    // Without it the same session is judged in windows, and the warning gives the size.
    let mock = Mock::by_name();
    let r = run(&mock, &src, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["state_fit_stage"], "windowed");
    let smallest: String = r.warnings()[0]
        .split("needs ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert!(smallest.parse::<usize>().unwrap() > STATE);

    // --strict-fit changes nothing when the whole conversation fits.
    let mock = Mock::by_name();
    let r = run(&mock, &session(0, &ids("keep", 3), &[]), &["--strict-fit"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["state_fit_stage"], "full");
    assert_eq!(r.report["state_windows"], 1);
}

#[test]
fn the_fail_closed_message_names_what_did_not_fit_and_the_flag() {
    // A first message that alone overflows the state budget: no window can be shown.
    let src = session(30, &ids("keep", 5), &[]).replacen(
        "Goal: fix the lexer. Never touch vendor/.",
        &(0..800)
            .map(|i| format!("rule {i}: keep vendor/{i} intact. "))
            .collect::<String>(),
        1,
    );
    let mock = Mock::by_name();
    let r = run(&mock, &src, &[]);
    assert_eq!(r.code(), 2, "{}", r.stderr);
    for part in [
        "not even one window of it fits",
        "the first message and the 2 pinned recent message(s) (",
        "call toolu_keep_1's message ",
        &format!("over the {STATE}-token state budget; raise --max-state-tokens"),
    ] {
        assert!(r.stderr.contains(part), "{part}: {}", r.stderr);
    }
    assert!(mock.requests().is_empty());
    assert!(!r.path("out.json").exists() && !r.path("report.json").exists());
}

#[test]
fn long_context_sends_the_header_and_lifts_the_caps() {
    let src = session(0, &ids("keep", 3), &[]);
    // Over Jev's limits without --long-context: refused, naming the limit and the flag.
    for (flag, value, limit) in [
        (
            "--max-state-tokens",
            "40000",
            "32000 tokens for the state plus one question",
        ),
        (
            "--max-request-tokens",
            "70000",
            "64000 tokens for a whole request",
        ),
    ] {
        let mock = Mock::by_name();
        let r = compact(jev(&mock), &src, &[flag, value]);
        assert_eq!(r.code(), 2, "{}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("{flag} {value} is over Jev's limit of {limit}"))
                && r.stderr.contains("pass --long-context"),
            "{}",
            r.stderr
        );
        assert!(mock.requests().is_empty());
    }
    // With it: accepted up to 262144, and every request carries the header.
    let mock = Mock::by_name();
    let r = compact(
        jev(&mock),
        &src,
        &[
            "--long-context",
            "--max-state-tokens",
            "200000",
            "--max-request-tokens",
            "262144",
        ],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].header("TypeSafe-Danger-Zone-Long-Context"),
        Some("true")
    );
    let r = compact(
        jev(&mock),
        &src,
        &["--long-context", "--max-request-tokens", "300000"],
    );
    assert_eq!(r.code(), 2);
    assert!(
        r.stderr.contains(
            "--max-request-tokens must be at most 262144, Jev's long-context limit (got 300000)"
        ),
        "{}",
        r.stderr
    );
    // Without it, no header.
    let mock = Mock::by_name();
    let r = compact(jev(&mock), &src, &[]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        mock.requests()[0].header("TypeSafe-Danger-Zone-Long-Context"),
        None
    );
}

#[test]
fn long_context_windows_may_exceed_the_normal_caps() {
    // A state budget above what Jev normally takes (25 600 o200k for a state plus one
    // question): windows use it all with --long-context.
    let names = ids("keep", 40);
    let src = session(400, &names, &[]);
    let mock = Mock::by_name();
    let r = compact(
        jev(&mock),
        &src,
        &[
            "--long-context",
            "--preserve-recent",
            "2",
            "--max-state-tokens",
            "40000",
            "--max-request-tokens",
            "60000",
            "--batch-size",
            "1000",
        ],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(r.report["state_fit_stage"], "windowed");
    let largest = mock
        .requests()
        .iter()
        .map(|q| o200k(state_text(q)))
        .max()
        .unwrap();
    assert!(largest > 25_600 && largest <= 40_000, "{largest}");
}

#[test]
fn input_tokens_are_counted_per_window_when_usage_is_absent() {
    let names = ids("keep", 30);
    let src = session(30, &names, &[]);
    let mock = Mock::start(|q| {
        let mut v: Value = serde_json::from_str(&answers(q, by_name).body).unwrap();
        v.as_object_mut().unwrap().remove("usage");
        Reply::json(200, &v)
    });
    let r = run(&mock, &src, &["--batch-size", "8"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let reqs = mock.requests();
    assert!(reqs.len() > 1);
    let sent = r.report["input_tokens_sent"].as_u64().unwrap() as usize;
    let exact: usize = reqs.iter().map(|q| o200k(&q.body)).sum();
    // Our count bounds the exact one from above, and closely.
    assert!(
        sent >= exact && sent <= exact + exact / 5,
        "{sent} vs {exact}"
    );
}

#[test]
fn explain_and_summary_say_how_many_windows() {
    let names = ids("keep", 10);
    let src = session(30, &names, &[]);
    let mock = Mock::by_name();
    let r = run(&mock, &src, &["--batch-size", "5"]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(r.stderr.contains("(windowed, 2 windows)"), "{}", r.stderr);
    let out = support::run(support::lcc().arg("explain").arg(r.path("report.json")));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("at stage windowed in 2 windows"), "{text}");
}
