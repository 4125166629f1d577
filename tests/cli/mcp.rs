//! `lcc mcp`: the real binary as a child process, spoken to over stdio with newline-delimited
//! JSON-RPC, as an MCP client or agent harness would.
//!
//! The pass must be the CLI's: every success is compared byte for byte with `lcc compact` on
//! the same input and options (output and report, apart from `timing`), and every error with
//! the line the CLI prints for the same flags.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{at, fixture_text, fx, lcc, lcc_run, tmp, Run};

/// The goal question of `fixtures/session.json` (see fixtures/README.md).
const QUESTION: &str =
    "fix the KeyError in src/lexer.py so tests/test_lexer.py::test_parse_token_0 passes";

/// How long one response may take before the test fails instead of hanging.
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// A running `lcc mcp` and the client side of its stdio.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Server {
    /// Start the server with the tests' clean environment, plus `env`, and initialize it.
    fn start_with(env: &[(&str, &str)]) -> Server {
        let mut cmd = lcc();
        cmd.arg("mcp")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn lcc mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        let mut s = Server {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        let init = s.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "lcc-tests", "version": "0"}
            }),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        s.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        s
    }

    fn start() -> Server {
        Server::start_with(&[])
    }

    fn send_line(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).expect("write");
        self.stdin.write_all(b"\n").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// The next message from the server.
    fn recv(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(REPLY_TIMEOUT)
            .expect("the server answered in time (and is still running)");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Send a request and return its response (skipping server notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string());
        self.response(id)
    }

    fn response(&mut self, id: u64) -> Value {
        loop {
            let m = self.recv();
            if m.get("id") == Some(&json!(id)) {
                return m;
            }
            assert!(m.get("id").is_none(), "a response to another request: {m}");
        }
    }

    /// `tools/call`; returns the result object.
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        r.get("result")
            .unwrap_or_else(|| panic!("{tool}: a JSON-RPC error instead of a result: {r}"))
            .clone()
    }

    /// A call that must succeed; returns its text.
    #[track_caller]
    fn ok(&mut self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args);
        let text = text_of(&r);
        assert_ne!(r["isError"], json!(true), "{tool} failed: {text}");
        text
    }

    /// A call that must be a tool error; returns its text.
    #[track_caller]
    fn err(&mut self, tool: &str, args: Value) -> String {
        let r = self.call(tool, args);
        assert_eq!(r["isError"], json!(true), "{tool} did not fail: {r}");
        text_of(&r)
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(result: &Value) -> String {
    let content = result["content"].as_array().expect("content list");
    assert_eq!(content.len(), 1, "one content block: {result}");
    assert_eq!(content[0]["type"], "text");
    content[0]["text"].as_str().expect("text").to_string()
}

/// The parts of a `compact_transcript` response, as the exact text the server wrote:
/// `{"messages":M,"decisions":D,"report":R}`.
struct Parts<'a> {
    messages: &'a str,
    decisions: &'a str,
    report: &'a str,
}

#[track_caller]
fn parts(text: &str) -> Parts<'_> {
    let v: Value = serde_json::from_str(text).expect("the response is one JSON object");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["messages", "decisions", "report"]);
    let body = text
        .strip_prefix("{\"messages\":")
        .and_then(|t| t.strip_suffix('}'))
        .expect("framing");
    let r = body.rfind(",\"report\":").expect("report key");
    let d = body[..r].rfind(",\"decisions\":").expect("decisions key");
    Parts {
        messages: &body[..d],
        decisions: &body[d + ",\"decisions\":".len()..r],
        report: &body[r + ",\"report\":".len()..],
    }
}

/// A report's text without its `timing` object (the last key).
#[track_caller]
fn without_timing(report: &str) -> &str {
    let at = report.find("\n  \"timing\": ").expect("timing key");
    &report[..at]
}

/// Run `lcc compact INPUT FLAGS -r R --quiet`: (stdout, report text).
fn cli_compact(input: &str, flags: &[String]) -> (String, String) {
    let dir = tmp();
    let report = at(dir.path(), "report.json");
    let mut args = vec!["compact".to_string(), input.to_string()];
    args.extend(flags.iter().cloned());
    args.extend(["-r".into(), report.clone(), "--quiet".into()]);
    let out = lcc_run(&args).expect(0).out();
    (out, std::fs::read_to_string(report).expect("report"))
}

/// The CLI's error line(s): stderr up to the first blank line.
fn cli_message(r: &Run) -> String {
    r.stderr
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The MCP options of a call and the CLI flags they stand for.
fn flags_for(options: &Value) -> Vec<String> {
    let mut flags = Vec::new();
    for (k, v) in options.as_object().unwrap() {
        match (k.as_str(), v) {
            ("disk_check", Value::Bool(false)) => flags.push("--no-disk-check".into()),
            ("disk_check", Value::Bool(true)) => {}
            ("allow_command_pointers", Value::Bool(true)) => {
                flags.push("--allow-command-pointers".into())
            }
            ("allow_command_pointers", Value::Bool(false)) => {}
            (k, v) => {
                let value = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                flags.push(format!("--{}={value}", k.replace('_', "-")));
            }
        }
    }
    flags
}

/// `compact_transcript` on `input` with `options` gives exactly what the CLI gives: the same
/// output bytes and report bytes (apart from `timing`), or the same error.
#[track_caller]
fn same_as_cli(s: &mut Server, input: &str, options: Value) {
    let flags = flags_for(&options);
    let mut args = options.clone();
    args["path"] = json!(input);
    let mut cli_args = vec!["compact".to_string(), input.to_string()];
    cli_args.extend(flags.iter().cloned());
    cli_args.push("--quiet".into());
    let cli = lcc_run(&cli_args);
    if cli.code == 0 {
        let text = s.ok("compact_transcript", args);
        let p = parts(&text);
        let (out, report) = cli_compact(input, &flags);
        assert_eq!(p.messages, out, "output of {options}");
        assert_eq!(without_timing(p.report), without_timing(&report));
    } else {
        let text = s.err("compact_transcript", args);
        assert_eq!(text, cli_message(&cli), "error for {options}");
    }
}

#[test]
fn initialize_and_list_tools() {
    let mut s = Server::start();
    let list = s.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["compact_transcript", "explain_report", "recall"]);
    for t in tools {
        assert!(t["description"].as_str().unwrap().len() > 100, "{t}");
        let schema = &t["inputSchema"];
        assert_eq!(schema["type"], "object", "{t}");
        assert_eq!(schema["additionalProperties"], false, "{t}");
        for (name, p) in schema["properties"].as_object().unwrap() {
            let d = p["description"].as_str().unwrap_or_default();
            assert!(d.len() > 20, "{name} has no real description: {p}");
            assert!(p.get("type").is_some(), "{name} has no type");
        }
    }
    let props = tools[0]["inputSchema"]["properties"].as_object().unwrap();
    let keys: Vec<&str> = props.keys().map(String::as_str).collect();
    for k in [
        "messages",
        "path",
        "question",
        "provider",
        "rules_mode",
        "workspace_root",
        "disk_check",
        "allow_command_pointers",
        "threshold",
        "preserve_recent",
        "trim_head_chars",
        "max_state_tokens",
        "max_request_tokens",
        "batch_size",
        "max_workers",
        "laya_endpoint",
        "laya_context_tokens",
    ] {
        assert!(keys.contains(&k), "compact_transcript lacks {k}: {keys:?}");
    }
    // Defaults are the CLI's.
    assert_eq!(props["preserve_recent"]["default"], 6);
    assert_eq!(props["trim_head_chars"]["default"], 300);
    assert_eq!(props["threshold"]["default"], 0.5);
    assert_eq!(props["provider"]["default"], "auto");
    assert_eq!(props["provider"]["type"], "string");
    assert_eq!(props["max_workers"]["type"], "integer");
    assert_eq!(props["laya_context_tokens"]["default"], 1024);
    assert_eq!(props["laya_endpoint"].get("default"), None);
    assert_eq!(props["disk_check"]["type"], "boolean");
    let explain = tools[1]["inputSchema"]["properties"].as_object().unwrap();
    assert!(explain.contains_key("report"));
    let recall = &tools[2]["inputSchema"];
    assert_eq!(recall["required"], json!(["id"]));
    let keys: Vec<&str> = recall["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["id", "lines"]);
}

#[test]
fn the_server_identifies_itself() {
    let mut c = lcc();
    c.arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = c.spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
    )
    .unwrap();
    // Closing stdin ends the session: the server answers, then exits cleanly.
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(line.lines().next().expect("a reply")).unwrap();
    let r = &v["result"];
    assert_eq!(r["serverInfo"]["name"], "lcc");
    assert_eq!(r["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(r["protocolVersion"], "2024-11-05");
    assert!(r["capabilities"]["tools"].is_object(), "{r}");
}

#[test]
fn compact_transcript_is_the_cli_pass_byte_for_byte() {
    let mut s = Server::start();
    let session = fx("session.json");
    same_as_cli(&mut s, &session, json!({"question": QUESTION}));
    same_as_cli(
        &mut s,
        &session,
        json!({
            "question": QUESTION,
            "provider": "rules",
            "rules_mode": "lossless",
            "threshold": 0.7,
            "preserve_recent": 3,
            "trim_head_chars": 100,
            "max_state_tokens": 20000,
            "max_request_tokens": 24000,
            "batch_size": 4,
            "max_workers": 2,
            "min_reduction": 0.1,
            "model": "gpt-4o",
            "jev_model": "jev-x",
        }),
    );
    // The pass really changed something, so the comparison is not trivially equal.
    let text = s.ok(
        "compact_transcript",
        json!({"path": session, "question": QUESTION}),
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v["report"]["tool_calls_deduped"].as_u64().unwrap() >= 3);
    assert_eq!(v["decisions"], v["report"]["decisions"]);
    assert_eq!(v["report"]["input_format"], "lcc");
    assert_eq!(v["report"]["objective"], QUESTION);
    // `messages` is the compacted transcript itself, as JSON.
    let (out, _) = cli_compact(&session, &[format!("--question={QUESTION}")]);
    assert_eq!(v["messages"], serde_json::from_str::<Value>(&out).unwrap());
}

#[test]
fn compact_transcript_takes_messages_as_json_or_as_text() {
    let mut s = Server::start();
    let text = fixture_text("session.json");
    let value: Value = serde_json::from_str(&text).unwrap();

    // As its exact text (a string): the same bytes as the CLI on the file.
    let got = s.ok(
        "compact_transcript",
        json!({"messages": text, "question": QUESTION}),
    );
    let p = parts(&got);
    let (out, report) = cli_compact(&fx("session.json"), &[format!("--question={QUESTION}")]);
    assert_eq!(p.messages, out);
    assert_eq!(without_timing(p.report), without_timing(&report));

    // As JSON: the pass runs on its compact serialization, as the CLI does on that file.
    let got = s.ok(
        "compact_transcript",
        json!({"messages": value, "question": QUESTION, "preserve_recent": 2}),
    );
    let p = parts(&got);
    let dir = tmp();
    let file = at(dir.path(), "session.json");
    std::fs::write(&file, serde_json::to_string(&value).unwrap()).unwrap();
    let (out, report) = cli_compact(
        &file,
        &[
            format!("--question={QUESTION}"),
            "--preserve-recent=2".into(),
        ],
    );
    assert_eq!(p.messages, out);
    assert_eq!(without_timing(p.report), without_timing(&report));
    let decisions: Value = serde_json::from_str(p.decisions).unwrap();
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(decisions, report["decisions"]);

    // A bare message list comes back as a bare list.
    let list = value["messages"].clone();
    let got = s.ok("compact_transcript", json!({"messages": list}));
    let v: Value = serde_json::from_str(&got).unwrap();
    assert!(v["messages"].is_array());
    assert_eq!(
        v["messages"].as_array().unwrap().len() as u64,
        v["report"]["messages_after"].as_u64().unwrap()
    );
}

#[test]
fn bad_arguments_are_tool_errors_with_the_cli_messages() {
    let mut s = Server::start();
    let session = fx("session.json");
    for options in [
        json!({"threshold": 2}),
        json!({"threshold": -0.5}),
        json!({"provider": "mechanical"}),
        json!({"provider": "nimble"}),
        json!({"provider": "bogus"}),
        json!({"provider": "jev"}),
        json!({"provider": "laya"}),
        json!({"provider": "rules", "rules_mode": "stashed"}),
        json!({"provider": "rules", "rules_mode": "recoverable"}),
        json!({"provider": "rules", "rules_mode": "lossy"}),
        json!({"provider": "rules", "rules_mode": "bogus"}),
        json!({"provider": "rules", "rules_mode": "recoverable", "workspace_root": "/tmp"}),
        json!({"disk_check": false}),
        json!({"allow_command_pointers": true}),
        json!({"preserve_recent": -1}),
        json!({"trim_head_chars": -3}),
        json!({"batch_size": 0}),
        json!({"batch_size": 1.5}),
        json!({"max_workers": 65}),
        json!({"max_state_tokens": 200, "max_request_tokens": 100}),
        json!({"min_reduction": 1.5}),
        json!({"model": " "}),
        json!({"question": "--threshold=2"}),
    ] {
        same_as_cli(&mut s, &session, options);
    }
    // Bad transcripts and files: the CLI's messages, naming the file.
    for name in [
        "malformed/syntax.json",
        "malformed/no-role.json",
        "malformed/duplicate-call-id.json",
        "malformed/not-utf8.json",
        "malformed/empty.json",
        "does-not-exist.json",
    ] {
        same_as_cli(&mut s, &fx(name), json!({}));
    }
    // Given inline, the transcript is called `messages`.
    let bad = fx("malformed/no-role.json");
    let cli = cli_message(&lcc_run(&["compact", &bad]).expect(2));
    let text = s.err(
        "compact_transcript",
        json!({"messages": fixture_text("malformed/no-role.json")}),
    );
    assert_eq!(text, cli.replacen(&bad, "messages", 1));
    assert!(text.starts_with("error: messages: "), "{text}");
    // The server is still serving after all of that.
    assert!(s.alive());
    s.ok("compact_transcript", json!({"path": session}));
}

#[test]
fn malformed_calls_do_not_stop_the_server() {
    let mut s = Server::start();
    let session = fx("session.json");
    let cases: [(Value, &str); 8] = [
        (json!({"path": session, "preserveRecent": 2}), "error: unknown argument 'preserveRecent' for compact_transcript; it takes messages, path, question,"),
        (json!({"path": session, "messages": []}), "error: give the transcript as `messages` or as `path`, not both"),
        (json!({"question": "q"}), "error: the transcript is missing: give `messages`"),
        (json!({"messages": 42}), "error: `messages` must be the transcript as JSON (an array or an object) or its text as a string, not a number"),
        (json!({"path": "-"}), "error: `path` cannot be '-'"),
        (json!({"path": 7}), "error: `path` must be a string (a file path), not a number"),
        (json!({"path": session, "threshold": "0.5"}), "error: `threshold` must be a number, not a string"),
        (json!({"path": session, "disk_check": "false"}), "error: `disk_check` must be true or false, not a string"),
    ];
    for (args, want) in cases {
        let text = s.err("compact_transcript", args);
        assert!(text.starts_with(want), "{text}\nwanted: {want}");
    }
    // An unknown tool is a protocol error, not a crash.
    let r = s.request("tools/call", json!({"name": "recollect", "arguments": {}}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A line that is not JSON gets no answer; arguments that are not an object are an
    // invalid request. Neither stops the server.
    s.send_line("{not json");
    s.send_line(
        &json!({"jsonrpc": "2.0", "id": 999, "method": "tools/call",
                "params": {"name": "compact_transcript", "arguments": ["x"]}})
        .to_string(),
    );
    let r = s.recv();
    assert!(r.get("error").is_some(), "{r}");
    // Null options count as absent.
    let text = s.ok(
        "compact_transcript",
        json!({"path": session, "question": null, "threshold": null}),
    );
    assert!(text.starts_with("{\"messages\":"));
    assert!(s.alive());
}

#[test]
fn the_api_key_never_appears_in_a_response() {
    let secret = "sk-lcc-test-secret-0123456789";
    let mut s = Server::start_with(&[("TYPESAFE_API_KEY", secret)]);
    let session = fx("session.json");
    for args in [
        json!({"path": session, "question": QUESTION}),
        json!({"path": session, "provider": "jev"}),
        json!({"path": session, "provider": "bogus"}),
    ] {
        let r = s.call("compact_transcript", args);
        assert!(!r.to_string().contains(secret), "the key leaked: {r}");
    }
}

#[test]
fn explain_report_is_lcc_explain() {
    let mut s = Server::start();
    let report_path = fx("reports/all-kinds.json");
    let source_path = fx("reports/all-kinds.source.json");
    let report_text = fixture_text("reports/all-kinds.json");
    let report: Value = serde_json::from_str(&report_text).unwrap();
    let source: Value =
        serde_json::from_str(&fixture_text("reports/all-kinds.source.json")).unwrap();

    let cli = |extra: &[&str]| {
        let mut a = vec!["explain", report_path.as_str()];
        a.extend_from_slice(extra);
        lcc_run(&a).expect(0).out()
    };
    assert_eq!(s.ok("explain_report", json!({"report": report})), cli(&[]));
    assert_eq!(
        s.ok("explain_report", json!({"report": report_text})),
        cli(&[])
    );
    let with_source = cli(&["--source", &source_path]);
    assert_eq!(
        s.ok(
            "explain_report",
            json!({"report": report, "source_path": source_path})
        ),
        with_source
    );
    assert_eq!(
        s.ok(
            "explain_report",
            json!({"report": report, "source": source})
        ),
        with_source
    );
    assert_eq!(
        s.ok(
            "explain_report",
            json!({"report": report, "only": "dedupe", "limit": 1})
        ),
        cli(&["--only", "dedupe", "--limit", "1"])
    );

    // Errors: the CLI's, with the report called `report`.
    let cli_err = |args: &[&str]| cli_message(&lcc_run(args).expect(2));
    assert_eq!(
        s.err("explain_report", json!({"report": report, "only": "bogus"})),
        cli_err(&["explain", &report_path, "--only", "bogus"])
    );
    assert_eq!(
        s.err("explain_report", json!({"report": report, "limit": 0})),
        cli_err(&["explain", &report_path, "--limit", "0"])
    );
    assert_eq!(
        s.err("explain_report", json!({"report": report, "limit": -1})),
        cli_err(&["explain", &report_path, "--limit=-1"])
    );
    for (bad, value) in [
        (
            "reports/bad-not-json.json",
            json!(fixture_text("reports/bad-not-json.json")),
        ),
        (
            "reports/bad-top-level-list.json",
            serde_json::from_str(&fixture_text("reports/bad-top-level-list.json")).unwrap(),
        ),
        (
            "reports/bad-block-mode.json",
            serde_json::from_str(&fixture_text("reports/bad-block-mode.json")).unwrap(),
        ),
    ] {
        let path = fx(bad);
        let want = cli_err(&["explain", &path]).replacen(&path, "report", 1);
        assert_eq!(s.err("explain_report", json!({"report": value})), want);
    }
    let text = s.err("explain_report", json!({}));
    assert!(text.starts_with("error: `report` is missing"), "{text}");

    // The report compact_transcript returns explains as the CLI's report file does.
    let got = s.ok(
        "compact_transcript",
        json!({"path": fx("session.json"), "question": QUESTION}),
    );
    let p = parts(&got);
    let dir = tmp();
    let file = at(dir.path(), "report.json");
    std::fs::write(&file, p.report).unwrap();
    let want = lcc_run(&["explain", &file, "--source", &fx("session.json")])
        .expect(0)
        .out();
    let report: Value = serde_json::from_str(p.report).unwrap();
    let text = s.ok(
        "explain_report",
        json!({"report": report, "source_path": fx("session.json")}),
    );
    assert_eq!(text, want);
    assert!(text.starts_with("lcc explain: "));
}

/// A transcript of `pairs` read calls over `files` distinct files, each result `body_lines`
/// lines long; the same file read again returns the same bytes, so lossless dedupes.
fn big_transcript(pairs: usize, files: usize, body_lines: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "text": "Start with the repository layout."})];
    for i in 0..pairs {
        let f = i % files;
        let path = format!("src/module_{f}.py");
        let body: String = (0..body_lines)
            .map(|j| format!("{j:>4}\tdef function_{f}_{j}(value): return value * {j}  # {path}\n"))
            .collect();
        let id = format!("call_{i}");
        messages.push(
            json!({"role": "assistant", "text": format!("Reading {path}."),
            "toolUses": [{"tool_use_id": id, "tool": "Read", "input": {"file_path": path}}]}),
        );
        messages.push(json!({"role": "user", "text": "",
            "toolResults": [{"tool_use_id": id, "text": body}]}));
    }
    messages.push(json!({"role": "assistant", "text": "Done."}));
    json!({"messages": messages})
}

#[test]
fn a_large_transcript_in_one_call() {
    let value = big_transcript(700, 200, 60);
    let text = serde_json::to_string(&value).unwrap();
    assert!(text.len() > 3_000_000, "only {} bytes", text.len());
    let mut s = Server::start();
    let got = s.ok(
        "compact_transcript",
        json!({"messages": value, "question": "refactor the modules"}),
    );
    let p = parts(&got);
    let report: Value = serde_json::from_str(p.report).unwrap();
    assert_eq!(report["messages_before"], 1402);
    assert!(
        report["tool_calls_deduped"].as_u64().unwrap() >= 450,
        "{}",
        report["tool_calls_deduped"]
    );
    assert!(p.messages.len() < text.len() / 2);
    // The same pass as the CLI on the same bytes.
    let dir = tmp();
    let file = at(dir.path(), "big.json");
    std::fs::write(&file, &text).unwrap();
    let (out, cli_report) = cli_compact(&file, &["--question=refactor the modules".into()]);
    assert_eq!(p.messages, out);
    assert_eq!(without_timing(p.report), without_timing(&cli_report));
    // And the server still answers.
    assert!(s.alive());
    let list = s.request("tools/list", json!({}));
    assert!(list["result"]["tools"].is_array());
}

/// Every (original, compacted) pair of strings that differ at the same place in two JSON
/// values of the same shape.
fn changed_strings<'a>(a: &'a Value, b: &'a Value, out: &mut Vec<(&'a str, &'a str)>) {
    match (a, b) {
        (Value::String(x), Value::String(y)) if x != y => out.push((x, y)),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                changed_strings(p, q, out);
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            for (k, p) in x {
                if let Some(q) = y.get(k) {
                    changed_strings(p, q, out);
                }
            }
        }
        _ => {}
    }
}

/// The CLI's `lcc recall`, with the same stash directory.
fn cli_recall(stash: &str, args: &[&str]) -> Run {
    crate::support::lcc_recall(std::path::Path::new(stash), args)
}

#[test]
fn recall_returns_the_stashed_bytes_as_lcc_recall_does() {
    let dir = tmp();
    let stash = at(dir.path(), "stash");
    let mut s = Server::start_with(&[("LCC_STASH_DIR", &stash)]);
    let session = fx("session.json");
    let text = s.ok(
        "compact_transcript",
        json!({"path": session, "question": QUESTION, "provider": "rules", "rules_mode": "stashed"}),
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["report"]["rules_mode"], "stashed");
    let original: Value = serde_json::from_str(&fixture_text("session.json")).unwrap();
    let mut changed = Vec::new();
    changed_strings(&original, &v["messages"], &mut changed);
    let stashed: Vec<(&str, String)> = changed
        .iter()
        .filter_map(|(orig, note)| {
            let id = note.strip_suffix(']')?.rsplit_once(" · lcc recall ")?.1;
            Some((*orig, id.to_string()))
        })
        .collect();
    assert!(stashed.len() >= 3, "few stash notes: {changed:?}");
    for (orig, id) in &stashed {
        let back = s.ok("recall", json!({"id": id}));
        assert_eq!(back, *orig, "recall {id}");
        assert_eq!(cli_recall(&stash, &[id]).expect(0).out(), back);
    }
    // A line range is the CLI's slice, each line with its own ending.
    let (orig, id) = stashed
        .iter()
        .find(|(o, _)| o.lines().count() >= 3)
        .expect("a stashed output of three lines or more");
    let two = s.ok("recall", json!({"id": id, "lines": "2-3"}));
    let want: String = orig.split_inclusive('\n').skip(1).take(2).collect();
    assert_eq!(two, want);
    assert_eq!(
        cli_recall(&stash, &[id, "--lines", "2-3"]).expect(0).out(),
        two
    );

    // Errors are tool errors with the CLI's message, and the server keeps serving.
    let past = s.err("recall", json!({"id": id, "lines": "100000"}));
    let cli = cli_recall(&stash, &[id, "--lines", "100000"]).expect(2);
    assert_eq!(past, cli_message(&cli));
    let unknown = s.err("recall", json!({"id": "0123456789ab"}));
    assert!(
        unknown.contains("stash id 0123456789ab not found"),
        "{unknown}"
    );
    let bad = s.err("recall", json!({"id": "not-an-id"}));
    assert!(bad.contains("'not-an-id' is not a stash id"), "{bad}");
    let missing = s.err("recall", json!({}));
    assert!(missing.contains("`id` is missing"), "{missing}");
    let typed = s.err("recall", json!({"id": 12}));
    assert!(typed.contains("`id` must be a string"), "{typed}");
    let extra = s.err("recall", json!({"id": id, "line": "1"}));
    assert!(extra.contains("line"), "{extra}");

    // A tampered stash file is refused, never returned altered.
    let file = std::fs::read_dir(&stash)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(id.as_str())
        })
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let tampered = s.err("recall", json!({"id": id}));
    assert!(tampered.contains("fails its hash check"), "{tampered}");
    assert_eq!(tampered, cli_message(&cli_recall(&stash, &[id]).expect(2)));
    assert!(s.alive());
    let (orig0, id0) = &stashed[0];
    if id0 != id {
        assert_eq!(s.ok("recall", json!({"id": id0})), *orig0);
    }
}
