//! The rules policies beyond lossless: recoverable (transcript proxy and disk check), lossy,
//! stashed and `lcc recall`, and the flags that drive them.
//!
//! Most cases build a small session inline: a goal message, then per call one assistant
//! message with the call and one user message with its result, then `tail` closing assistant
//! messages; they run with `--preserve-recent 1` so only the last message is pinned. Files
//! for the disk check live under `CARGO_TARGET_TMPDIR` (not the system temp directory, whose
//! files the policy never points at).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::{decision, fixture, json_file, lcc, lcc_run, Run};

// ---------------------------------------------------------------------------------------
// Builders

struct C {
    id: String,
    tool: String,
    input: Value,
    text: String,
    is_error: bool,
}

fn call(id: &str, tool: &str, input: Value, text: &str) -> C {
    C {
        id: id.into(),
        tool: tool.into(),
        input,
        text: text.into(),
        is_error: false,
    }
}

fn bash(id: &str, cmd: &str, text: &str) -> C {
    call(id, "Bash", json!({ "command": cmd }), text)
}

fn read(id: &str, path: &str, text: &str) -> C {
    call(id, "Read", json!({ "file_path": path }), text)
}

impl C {
    fn failed(mut self) -> C {
        self.is_error = true;
        self
    }
}

/// A filler call: `pytest -q` printing "n passed" (an opaque command).
fn filler(n: usize) -> C {
    bash(&format!("f{n}"), "pytest -q", &format!("{n} passed"))
}

fn session(calls: Vec<C>, tail: usize) -> Value {
    session_with(calls, tail, &[])
}

/// A session whose last messages (after the tail) are these user turns.
fn session_with(calls: Vec<C>, tail: usize, last_user: &[&str]) -> Value {
    let mut m = vec![json!({"role": "user", "text": "Work on the parser."})];
    for (i, c) in calls.into_iter().enumerate() {
        m.push(json!({"role": "assistant", "text": format!("step {i}"),
            "toolUses": [{"tool_use_id": c.id, "tool": c.tool, "input": c.input}]}));
        let mut r = json!({"tool_use_id": c.id, "text": c.text});
        if c.is_error {
            r["is_error"] = json!(true);
        }
        m.push(json!({"role": "user", "text": "", "toolResults": [r]}));
    }
    for i in 0..tail {
        m.push(json!({"role": "assistant", "text": format!("wrap {i}")}));
    }
    for t in last_user {
        m.push(json!({"role": "user", "text": t}));
    }
    json!({ "messages": m })
}

/// 39 lines of a file (tagged, so different files never dedupe), the file's text, and Read's
/// two numbered renderings of it.
fn lines(tag: &str) -> Vec<String> {
    (1..=39).map(|n| format!("line {n} of {tag}")).collect()
}
fn file_text(tag: &str) -> String {
    lines(tag).join("\n") + "\n"
}
fn numbered(tag: &str, from: usize, to: usize, sep: &str) -> String {
    lines(tag)[from - 1..to]
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>6}{sep}{l}", from + i))
        .collect::<Vec<_>>()
        .join("\n")
}
fn plain(tag: &str, from: usize, to: usize) -> String {
    lines(tag)[from - 1..to].join("\n")
}

/// A directory for one test, outside the system temp directory.
/// A scratch directory outside the system temp directories (the policy never points at files
/// there): the target directory's tmp when the checkout is not itself under /tmp (as a CI
/// clone may be), else a folder under $HOME/.cache.
fn work() -> tempfile::TempDir {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let base = if lcc::rules::shell::is_temp_path(&path_str(&target)) {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
        let dir = home.join(".cache").join("lcc-test-work");
        std::fs::create_dir_all(&dir).expect("scratch dir under $HOME/.cache");
        dir
    } else {
        target
    };
    tempfile::Builder::new()
        .prefix("rules-")
        .tempdir_in(base)
        .expect("temp dir")
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

struct Out {
    run: Run,
    report: Value,
    output: Value,
    dir: tempfile::TempDir,
}

impl Out {
    #[track_caller]
    fn d(&self, id: &str) -> (String, String) {
        let d = decision(&self.report, id);
        (
            d["decision"].as_str().unwrap().to_string(),
            d["reason"].as_str().unwrap().to_string(),
        )
    }

    #[track_caller]
    fn note(&self, id: &str) -> String {
        decision(&self.report, id)["note"]
            .as_str()
            .unwrap_or_else(|| panic!("{id} has no note"))
            .to_string()
    }

    /// The result text of `id` in the output transcript.
    #[track_caller]
    fn text(&self, id: &str) -> String {
        self.output["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["toolResults"].as_array().cloned().unwrap_or_default())
            .find(|r| r["tool_use_id"] == id)
            .unwrap_or_else(|| panic!("no result {id} in the output"))["text"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn has_call(&self, id: &str) -> bool {
        self.output["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["toolUses"].as_array().cloned().unwrap_or_default())
            .any(|c| c["tool_use_id"] == id)
    }
}

/// Run `lcc compact --provider rules --rules-mode MODE -q GOAL` on a session, in `dir` (a
/// fresh one when `None`), with `--preserve-recent 1` unless `flags` say otherwise.
fn rules_in(
    dir: Option<tempfile::TempDir>,
    t: &Value,
    mode: &str,
    goal: &str,
    flags: &[&str],
) -> Out {
    let dir = dir.unwrap_or_else(work);
    let input = dir.path().join("in.json");
    std::fs::write(&input, serde_json::to_string_pretty(t).unwrap()).unwrap();
    let (out, rep) = (dir.path().join("out.json"), dir.path().join("report.json"));
    let mut args: Vec<String> = [
        "compact",
        &path_str(&input),
        "-q",
        goal,
        "--provider",
        "rules",
        "--rules-mode",
        mode,
        "-o",
        &path_str(&out),
        "-r",
        &path_str(&rep),
        "--quiet",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    if !flags.contains(&"--preserve-recent") {
        args.extend(["--preserve-recent".to_string(), "1".to_string()]);
    }
    args.extend(flags.iter().map(|s| (*s).to_string()));
    let stash = dir.path().join("stash");
    let run = crate::support::run(lcc().args(&args).env("LCC_STASH_DIR", &stash));
    let run = Run {
        code: run.status.code().unwrap(),
        stdout: run.stdout,
        stderr: String::from_utf8_lossy(&run.stderr).into_owned(),
    }
    .expect(0);
    let report = json_file(&path_str(&rep));
    let output = json_file(&path_str(&out));
    Out {
        run,
        report,
        output,
        dir,
    }
}

fn rules(t: &Value, mode: &str, goal: &str, flags: &[&str]) -> Out {
    rules_in(None, t, mode, goal, flags)
}

fn dk(decision: &str, reason: &str) -> (String, String) {
    (decision.into(), reason.into())
}

// ---------------------------------------------------------------------------------------
// recoverable, transcript proxy

#[test]
fn a_whole_file_read_becomes_a_reread_pointer() {
    let o = rules(
        &session(
            vec![read("c1", "/r/src/p.py", &numbered("c1", 1, 39, "\t"))],
            1,
        ),
        "recoverable",
        "fix the parser",
        &[],
    );
    assert_eq!(o.d("c1"), dk("replace", "recoverable_file_read"));
    let note = "[removed: re-read /r/src/p.py to recover]";
    assert_eq!(o.note("c1"), note);
    assert_eq!(o.text("c1"), note);
    assert_eq!(decision(&o.report, "c1")["recover"], "re-read /r/src/p.py");
    assert_eq!(o.report["rules_mode"], "recoverable");
    assert_eq!(o.report["recoverability_check"], "transcript_proxy");
    assert_eq!(o.report["semantic_guarantee"], "recoverable");
    assert_eq!(o.report["tool_calls_replaced"], 1);
    assert!(!o.report["degraded"].as_bool().unwrap());
    assert_eq!(o.report["lossless_violations"], json!([]));
    // The call and its input are untouched.
    assert!(o.has_call("c1"));
}

#[test]
fn partial_reads_name_their_lines() {
    let o = rules(
        &session(
            vec![
                call(
                    "c1",
                    "Read",
                    json!({"file_path": "/r/p.py", "offset": 5, "limit": 8}),
                    &numbered("c1", 5, 12, "→"),
                ),
                bash("c2", "cat /r/c.py", &file_text("c2")),
                bash("c3", "sed -n '5,12p' /r/s.py", &plain("c3", 5, 12)),
                bash("c4", "head -n 12 /r/h.py", &plain("c4", 1, 12)),
                // The numbers in the output, not offset/limit, decide; a range the output does
                // not fill is unknown.
                call(
                    "c5",
                    "Read",
                    json!({"file_path": "/r/q.py", "offset": 5, "limit": 8}),
                    &plain("c5", 5, 12),
                ),
                bash("c6", "sed -n '30,60p' /r/t.py", &plain("c6", 30, 39)),
                bash("c7", "tail -n 5 /r/u.py", &plain("c7", 35, 39)),
            ],
            1,
        ),
        "recoverable",
        "fix the parser",
        &[],
    );
    assert_eq!(
        o.note("c1"),
        "[removed: re-read /r/p.py (lines 5-12) to recover]"
    );
    assert_eq!(o.note("c2"), "[removed: re-read /r/c.py to recover]");
    assert_eq!(
        o.note("c3"),
        "[removed: re-read /r/s.py (lines 5-12) to recover]"
    );
    assert_eq!(
        o.note("c4"),
        "[removed: re-read /r/h.py (lines 1-12) to recover]"
    );
    assert_eq!(o.d("c5"), dk("keep", "read_range_unknown"));
    // A tail or an unfilled range could only be recovered by re-running the command, and
    // command pointers are off by default.
    assert_eq!(o.d("c6"), dk("keep", "command_pointers_disabled"));
    assert_eq!(o.d("c7"), dk("keep", "command_pointers_disabled"));
}

fn codex(code: u8, body: &str) -> String {
    format!(
        "Chunk ID: 4f2a1c\nWall time: 0.0123 seconds\nProcess exited with code {code}\nOriginal token count: 90\nOutput:\n{body}"
    )
}

#[test]
fn codex_exec_reads_strip_the_header_and_keep_failures() {
    let input = json!({"cmd": "sed -n '1,39p' p.py", "workdir": "/r"});
    let o = rules(
        &session(
            vec![
                call(
                    "c1",
                    "exec_command",
                    input.clone(),
                    &codex(0, &plain("c1", 1, 39)),
                ),
                call("c2", "exec_command", input, &codex(1, &plain("c2", 1, 39))),
            ],
            1,
        ),
        "recoverable",
        "fix the parser",
        &[],
    );
    // A relative path names the working directory it was read from.
    assert_eq!(
        o.note("c1"),
        "[removed: re-read p.py (lines 1-39) (cwd /r) to recover]"
    );
    assert_eq!(o.d("c2"), dk("keep", "failed_result"));
}

#[test]
fn a_read_is_kept_when_a_later_call_may_have_written_the_file() {
    let r = || read("c1", "/r/src/p.py", &numbered("c1", 1, 39, "\t"));
    let writers: Vec<(&str, C)> = vec![
        (
            "Edit",
            call(
                "w",
                "Edit",
                json!({"file_path": "/r/src/p.py", "old_string": "a", "new_string": "b"}),
                "ok",
            ),
        ),
        (
            "Write",
            call(
                "w",
                "Write",
                json!({"file_path": "/r/src/p.py", "content": "x"}),
                "ok",
            ),
        ),
        (
            "apply_patch",
            call(
                "w",
                "apply_patch",
                json!({"input": "*** Begin Patch\n*** Update File: src/p.py\n@@\n-a\n+b\n*** End Patch"}),
                "Done",
            ),
        ),
        ("rm", bash("w", "rm src/p.py", "")),
        ("sed -i", bash("w", "sed -i 's/a/b/' src/p.py", "")),
        (
            "rm of its directory",
            call(
                "w",
                "exec_command",
                json!({"cmd": "rm -rf src", "workdir": "/elsewhere"}),
                "",
            ),
        ),
        (
            "git checkout",
            call(
                "w",
                "exec_command",
                json!({"cmd": "git checkout -- .", "workdir": "/elsewhere"}),
                "",
            ),
        ),
        (
            "an opaque call with no directory",
            bash("w", "make build", "built"),
        ),
        (
            "an opaque call in the file's tree",
            call(
                "w",
                "exec_command",
                json!({"cmd": "python gen.py", "workdir": "/r"}),
                "ok",
            ),
        ),
        (
            "an unknown tool",
            call("w", "mcp__fs__put", json!({"name": "x"}), "ok"),
        ),
    ];
    for (what, w) in writers {
        let o = rules(
            &session(vec![r(), w], 1),
            "recoverable",
            "fix the parser",
            &[],
        );
        assert_eq!(o.d("c1"), dk("keep", "file_written_later"), "{what}");
        assert_eq!(o.text("c1"), numbered("c1", 1, 39, "\t"), "{what}");
    }
    // Calls that cannot write it do not count.
    let harmless: Vec<(&str, C)> = vec![
        ("a read-only command", bash("w", "git status", "clean")),
        (
            "a search",
            call("w", "Grep", json!({"pattern": "p.py"}), "src/p.py"),
        ),
        (
            "an opaque call in another tree",
            call(
                "w",
                "exec_command",
                json!({"cmd": "make", "workdir": "/other"}),
                "ok",
            ),
        ),
        (
            "an edit of another file",
            call("w", "Edit", json!({"file_path": "/r/src/webp.py"}), "ok"),
        ),
    ];
    for (what, w) in harmless {
        let o = rules(
            &session(vec![r(), w], 1),
            "recoverable",
            "fix the parser",
            &[],
        );
        assert_eq!(o.d("c1"), dk("replace", "recoverable_file_read"), "{what}");
    }
}

#[test]
fn what_is_never_replaced() {
    let body = |tag: &str| numbered(tag, 1, 39, "\t");
    let o = rules(
        &session_with(
            vec![
                read("named", "/r/src/goal.py", &body("named")),
                read("recent", "/r/src/talk.py", &body("recent")),
                read(
                    "failed",
                    "/r/src/gone.py",
                    &"File does not exist.\n".repeat(5),
                )
                .failed(),
                read(
                    "tue",
                    "/r/src/x.py",
                    &format!("<tool_use_error>{}</tool_use_error>", body("tue")),
                ),
                read("tmp", "/tmp/scratch.py", &body("tmp")),
                bash("test", "pytest -q", &"F".repeat(80)),
                call(
                    "web",
                    "WebFetch",
                    json!({"url": "https://x.io"}),
                    &"w".repeat(80),
                ),
                bash("before", "cat /r/src/last.py", &file_text("before")),
                bash(
                    "err",
                    "npm test",
                    &format!("Traceback (most recent call last):\n{}", "E\n".repeat(30)),
                )
                .failed(),
                // After every opaque call: nothing later may have written it, but a relative
                // path with no working directory names no file.
                read("rel", "p.py", &body("rel")),
            ],
            0,
            &["look again at src/talk.py please"],
        ),
        "recoverable",
        "fix the bug in goal.py",
        &[],
    );
    assert_eq!(o.d("named"), dk("keep", "named_in_goal_or_recent_turns"));
    assert_eq!(o.d("recent"), dk("keep", "named_in_goal_or_recent_turns"));
    assert_eq!(o.d("failed"), dk("keep", "failed_result"));
    assert_eq!(o.d("tue"), dk("keep", "failed_result"));
    assert_eq!(o.d("tmp"), dk("keep", "temp_path"));
    assert_eq!(o.d("rel"), dk("keep", "relative_path_without_cwd"));
    assert_eq!(o.d("test"), dk("keep", "not_recoverable"));
    assert_eq!(o.d("web"), dk("keep", "not_recoverable"));
    assert_eq!(o.d("before"), dk("keep", "call_before_latest_error"));
    assert_eq!(o.d("err"), dk("keep", "latest_error_result"));
    assert_eq!(o.report["tool_calls_replaced"], 0);
}

#[test]
fn read_only_commands_get_rerun_pointers_only_when_allowed() {
    let listing = (0..30)
        .map(|n| format!("src/module_{n}.py"))
        .collect::<Vec<_>>()
        .join("\n");
    let log = (0..5)
        .map(|n| format!("abc{n:04} commit {n}"))
        .collect::<Vec<_>>()
        .join("\n");
    let t = session(
        vec![
            bash("ls", "ls src", &listing),
            call(
                "codex",
                "exec_command",
                json!({"cmd": "git log --oneline -5", "workdir": "/r"}),
                &codex(0, &log),
            ),
            bash("rm", "rm -rf build", &"removed\n".repeat(10)),
            bash("pipe", "ls src | head", &listing.replace("module", "mod")),
        ],
        1,
    );
    // `rm` is an opaque write, so the listing before it may have changed.
    let on = rules(
        &t,
        "recoverable",
        "fix the parser",
        &["--allow-command-pointers"],
    );
    assert_eq!(on.d("ls"), dk("keep", "command_output_changed_later"));
    assert_eq!(on.d("pipe"), dk("keep", "not_recoverable"));
    assert_eq!(on.d("rm"), dk("keep", "not_recoverable"));

    let t = session(
        vec![
            bash("ls", "ls src", &listing),
            call(
                "codex",
                "exec_command",
                json!({"cmd": "git log --oneline -5", "workdir": "/r"}),
                &codex(0, &log),
            ),
        ],
        1,
    );
    let off = rules(&t, "recoverable", "fix the parser", &[]);
    assert_eq!(off.d("ls"), dk("keep", "command_pointers_disabled"));
    assert_eq!(off.d("codex"), dk("keep", "command_pointers_disabled"));
    let on = rules(
        &t,
        "recoverable",
        "fix the parser",
        &["--allow-command-pointers"],
    );
    assert_eq!(on.d("ls"), dk("replace", "recoverable_read_only_command"));
    assert_eq!(on.note("ls"), "[removed: re-run `ls src` to recover]");
    assert_eq!(decision(&on.report, "ls")["recover"], "re-run `ls src`");
    assert_eq!(
        on.note("codex"),
        "[removed: re-run `git log --oneline -5` in /r to recover]"
    );
    // A command the goal names is kept.
    let named = rules(
        &t,
        "recoverable",
        "explain the output of git log --oneline -5",
        &["--allow-command-pointers"],
    );
    assert_eq!(
        named.d("codex"),
        dk("keep", "named_in_goal_or_recent_turns")
    );
}

#[test]
fn lossless_dedupes_still_apply_and_never_target_a_replaced_result() {
    let listing = (0..30)
        .map(|n| format!("src/module_{n}.py"))
        .collect::<Vec<_>>()
        .join("\n");
    let out = format!("{}\n1 failed", "=".repeat(60));
    let o = rules(
        &session(
            vec![
                bash("t1", "pytest -q", &out),
                bash("t2", "pytest -q", &out),
                bash("l1", "ls src", &listing),
                bash("l2", "ls src", &listing),
            ],
            1,
        ),
        "recoverable",
        "fix the parser",
        &["--allow-command-pointers"],
    );
    assert_eq!(o.d("t1"), dk("dedupe", "identical_output_kept_later"));
    assert_eq!(o.note("t1"), "[identical output kept at t2]");
    assert_eq!(o.d("l1"), dk("replace", "recoverable_read_only_command"));
    assert_eq!(o.d("l2"), dk("replace", "recoverable_read_only_command"));
}

// ---------------------------------------------------------------------------------------
// recoverable, disk check

/// A workspace with files, and a session reading them by absolute path.
struct Ws {
    dir: tempfile::TempDir,
}

impl Ws {
    fn new() -> Ws {
        Ws { dir: work() }
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn file(&self, rel: &str, bytes: &[u8]) -> String {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        path_str(&p)
    }
    fn path(&self, rel: &str) -> String {
        path_str(&self.root().join(rel))
    }
    fn run(self, calls: Vec<C>, flags: &[&str]) -> Out {
        std::fs::create_dir_all(self.root()).unwrap();
        let root = path_str(&self.root());
        let mut all = vec!["--workspace-root", root.as_str()];
        all.extend_from_slice(flags);
        rules_in(
            Some(self.dir),
            &session(calls, 1),
            "recoverable",
            "fix the parser",
            &all,
        )
    }
}

const VERIFIED: &str = "; content verified on disk at compaction time]";

#[test]
fn the_disk_decides_when_a_workspace_root_is_given() {
    let ws = Ws::new();
    let same = ws.file("src/same.py", file_text("same").as_bytes());
    let arrow = ws.file("src/arrow.py", file_text("arrow").as_bytes());
    let part = ws.file("src/part.py", file_text("part").as_bytes());
    let sed = ws.file("src/sed.py", file_text("sed").as_bytes());
    let differs = ws.file(
        "src/differs.py",
        file_text("differs")
            .replace("line 7 ", "LINE 7 ")
            .as_bytes(),
    );
    let missing = ws.path("src/missing.py");
    let dir = ws.path("src");
    let crlf = ws.file(
        "src/crlf.py",
        file_text("crlf").replace('\n', "\r\n").as_bytes(),
    );
    let crlf_ok = ws.file(
        "src/crlf_ok.py",
        file_text("crlf_ok").replace('\n', "\r\n").as_bytes(),
    );
    let latin = ws.file("src/latin.py", &[b'o', b'k', 0xe9, b'\n']);
    let codex_f = ws.file("src/codex.py", file_text("codex").as_bytes());
    let o = ws.run(
        vec![
            read("same", &same, &numbered("same", 1, 39, "\t")),
            read("arrow", &arrow, &numbered("arrow", 1, 39, "→")),
            call(
                "part",
                "Read",
                json!({"file_path": part, "offset": 5, "limit": 30}),
                &numbered("part", 5, 34, "\t"),
            ),
            bash(
                "sed",
                &format!("sed -n '5,39p' {sed}"),
                &plain("sed", 5, 39),
            ),
            read("differs", &differs, &numbered("differs", 1, 39, "\t")),
            read("missing", &missing, &numbered("missing", 1, 39, "\t")),
            read("dir", &dir, &numbered("dir", 1, 39, "\t")),
            bash("crlf", &format!("cat {crlf}"), &file_text("crlf")),
            bash(
                "crlf_ok",
                &format!("cat {crlf_ok}"),
                &file_text("crlf_ok").replace('\n', "\r\n"),
            ),
            bash("latin", &format!("cat {latin}"), "ok?"),
            call(
                "codex",
                "exec_command",
                json!({"cmd": format!("cat {codex_f}"), "workdir": "/"}),
                &codex(0, &file_text("codex")),
            ),
            // Later writes do not matter once the disk has been checked.
            bash("later", "make all", "built"),
        ],
        &[],
    );
    assert_eq!(o.report["recoverability_check"], "disk");
    for id in ["same", "arrow", "part", "sed", "crlf_ok", "codex"] {
        assert_eq!(o.d(id), dk("replace", "replace_disk_verified"), "{id}");
        assert!(o.note(id).ends_with(VERIFIED), "{id}: {}", o.note(id));
    }
    assert_eq!(
        o.note("same"),
        format!("[removed: re-read {same} to recover{VERIFIED}")
    );
    assert_eq!(
        o.note("part"),
        format!("[removed: re-read {part} (lines 5-34) to recover{VERIFIED}")
    );
    assert_eq!(
        o.note("sed"),
        format!("[removed: re-read {sed} (lines 5-39) to recover{VERIFIED}")
    );
    assert_eq!(o.d("differs"), dk("keep", "keep_disk_mismatch"));
    assert_eq!(o.d("missing"), dk("keep", "keep_disk_missing"));
    assert_eq!(o.d("dir"), dk("keep", "keep_disk_not_regular"));
    // CRLF on disk never matches an LF output.
    assert_eq!(o.d("crlf"), dk("keep", "keep_disk_mismatch"));
    assert_eq!(o.d("latin"), dk("keep", "keep_disk_unreadable"));
    assert_eq!(o.text("differs"), numbered("differs", 1, 39, "\t"));
}

#[test]
fn the_disk_check_refuses_escapes_dotdot_and_large_files() {
    let ws = Ws::new();
    let outside = work();
    let secret = outside.path().join("secret.py");
    std::fs::write(&secret, file_text("link")).unwrap();
    let link = ws.path("src/link.py");
    ws.file("src/keep.txt", b"x");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    // A symlink that stays inside its own directory is fine.
    let inner = ws.file("src/real.py", file_text("alias").as_bytes());
    let inner_link = ws.path("src/alias.py");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&inner, &inner_link).unwrap();
    let dotdot = format!("{}/src/../src/real.py", path_str(&ws.root()));
    // 5 MiB of lines, over the 4 MiB cap.
    let big_text =
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n".repeat(5 * 1024 * 16);
    let big = ws.file("big.txt", big_text.as_bytes());
    let o = ws.run(
        vec![
            read("link", &link, &numbered("link", 1, 39, "\t")),
            read("alias", &inner_link, &numbered("alias", 1, 39, "\t")),
            read("dotdot", &dotdot, &numbered("dotdot", 1, 39, "\t")),
            bash("big", &format!("cat {big}"), &big_text),
        ],
        &[],
    );
    #[cfg(unix)]
    {
        assert_eq!(o.d("link"), dk("keep", "keep_disk_outside_root"));
        assert_eq!(o.d("alias"), dk("replace", "replace_disk_verified"));
    }
    assert_eq!(o.d("dotdot"), dk("keep", "keep_disk_outside_root"));
    assert_eq!(o.d("big"), dk("keep", "keep_disk_too_large"));
}

#[test]
fn no_disk_check_falls_back_to_the_transcript_proxy() {
    let ws = Ws::new();
    let missing = ws.path("src/missing.py");
    let o = ws.run(
        vec![read("c1", &missing, &numbered("c1", 1, 39, "\t"))],
        &["--no-disk-check"],
    );
    assert_eq!(o.report["recoverability_check"], "transcript_proxy");
    assert_eq!(o.d("c1"), dk("replace", "recoverable_file_read"));
    assert_eq!(
        o.note("c1"),
        format!("[removed: re-read {missing} to recover]")
    );
}

// ---------------------------------------------------------------------------------------
// lossy

fn fillers(from: usize, n: usize) -> Vec<C> {
    (from..from + n).map(filler).collect()
}

fn big(head: &str) -> String {
    format!("{head}{}TAIL-LINE", "m".repeat(20_000))
}

#[test]
fn lossy_protections() {
    let mut calls = vec![
        call(
            "edit",
            "Edit",
            json!({"file_path": "/r/out.md", "old_string": "a", "new_string": "b"}),
            "ok",
        ),
        call(
            "todo",
            "TodoWrite",
            json!({"todos": []}),
            "Todos have been modified",
        ),
        call("ask", "AskUserQuestion", json!({"q": "which?"}), "a or b"),
        bash("gs", "git status", "clean"),
        call(
            "goal_read",
            "Read",
            json!({"file_path": "/r/src/lexer.py"}),
            &"x".repeat(8000),
        ),
        bash("before", "ls", "a b"),
        bash("err", "make", "boom").failed(),
    ];
    calls.extend(fillers(0, 3));
    let o = rules(&session(calls, 1), "lossy", "finish src/lexer.py", &[]);
    assert_eq!(o.d("edit"), dk("keep", "latest_artifact_edit"));
    assert_eq!(o.d("todo"), dk("keep", "latest_task_state"));
    assert_eq!(o.d("ask"), dk("keep", "latest_user_question"));
    assert_eq!(o.d("gs"), dk("keep", "latest_git_state"));
    assert_eq!(o.d("goal_read"), dk("keep", "named_in_goal"));
    assert_eq!(o.d("before"), dk("keep", "call_before_latest_error"));
    assert_eq!(o.d("err"), dk("keep", "latest_error_result"));
    assert_eq!(o.d("f2"), dk("keep", "latest_tool_result"));
    assert_eq!(o.d("f0"), dk("keep", "kept_default"));
    assert_eq!(o.report["rules_mode"], "lossy");
    assert_eq!(o.report["semantic_guarantee"], "none");
    assert_eq!(o.report["recoverability_check"], Value::Null);
}

#[test]
fn lossy_drops_superseded_and_stale_outputs() {
    let mut calls = vec![
        call("g1", "Grep", json!({"pattern": "x"}), "hits"),
        read("a1", "/r/a.py", "v1"),
        read("a2", "/r/a.py", "v2"),
        call("p1", "Read", json!({"file_path": "/r/b.py"}), "full"),
        call(
            "p2",
            "Read",
            json!({"file_path": "/r/b.py", "offset": 1, "limit": 2}),
            "part",
        ),
        bash("s1", "git diff", "same diff"),
        bash("s2", "git diff", "same diff"),
        bash("n1", "npm test", "1 failed"),
        bash("n2", "npm test", "all passed"),
    ];
    calls.extend(fillers(0, 21));
    calls.push(call("g2", "Glob", json!({"pattern": "*.py"}), "a.py"));
    calls.extend(fillers(21, 2));
    let o = rules(&session(calls, 1), "lossy", "finish the parser", &[]);
    assert_eq!(o.d("g1"), dk("drop", "stale_read_far_from_recent_work"));
    assert_eq!(o.d("a1"), dk("drop", "superseded_by_later_call:a2"));
    // A partial read never supersedes a whole one.
    assert_ne!(o.d("p1").1, "superseded_by_later_call:p2");
    assert_eq!(o.d("s1"), dk("drop", "superseded_by_later_call:s2"));
    // A rerun whose output changed is not superseded.
    assert_eq!(o.d("n1"), dk("keep", "kept_default"));
    assert_eq!(o.d("g2"), dk("keep", "kept_default"));
    assert_eq!(o.d("a2"), dk("drop", "stale_read_far_from_recent_work"));
    assert!(!o.has_call("a1"), "a dropped call goes with its result");
    assert!(o.has_call("n1"));
}

#[test]
fn lossy_trims_large_old_outputs_unless_a_guard_applies() {
    let mut calls = vec![
        bash("build", "npm run build", &big("HEAD")),
        call(
            "poll",
            "write_stdin",
            json!({"session_id": 1}),
            &big("POLL"),
        ),
        bash("edited", "cat src/config.py", &big("CFG")),
        call(
            "edit",
            "Edit",
            json!({"file_path": "/r/src/config.py"}),
            "ok",
        ),
        bash("named", "cat docs/ROADMAP.md", &big("ROAD")),
        bash("gap", "pwd", "/r"),
        bash("flagged", "npm test", &big("T")).failed(),
        call("wait", "multi_agent_v1__wait_agent", json!({}), &big("W")),
    ];
    calls.extend(fillers(0, 22));
    calls.push(bash("recent", "npm run lint", &big("LINT")));
    calls.extend(fillers(22, 1));
    let o = rules(
        &session_with(calls, 0, &["and keep docs/ROADMAP.md in sync"]),
        "lossy",
        "finish the parser",
        &[],
    );
    assert_eq!(o.d("build"), dk("trim", "large_old_output_trimmed"));
    let t = o.text("build");
    assert!(t.starts_with("HEAD"));
    assert!(t.ends_with("TAIL-LINE"));
    assert_eq!(t.split("\n[... lcc:").next().unwrap().chars().count(), 1000);
    assert!(t.contains(
        "[... lcc: 18013 chars of this tool result dropped; re-run Bash for the rest ...]"
    ));
    assert_eq!(o.d("poll"), dk("keep", "trim_guard_interactive"));
    assert_eq!(o.d("wait"), dk("keep", "trim_guard_interactive"));
    assert_eq!(o.d("edited"), dk("keep", "trim_guard_edited_later"));
    assert_eq!(o.d("named"), dk("keep", "trim_guard_named"));
    // The flagged output is also the latest error.
    assert_eq!(o.d("flagged"), dk("keep", "latest_error_result"));
    assert_eq!(o.d("recent"), dk("keep", "trim_guard_recent"));
}

#[test]
fn lossy_is_marked_experimental_in_help() {
    let r = lcc_run(&["compact", "--help"]).expect(0);
    assert!(r.out().contains("EXPERIMENTAL"), "{}", r.out());
}

// ---------------------------------------------------------------------------------------
// stashed and recall

fn recall(stash: &Path, args: &[&str]) -> Run {
    crate::support::lcc_recall(stash, args)
}

fn stash_id(note: &str) -> String {
    note.trim_end_matches(']')
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn stashed_results_recall_byte_for_byte() {
    let tricky = format!(
        "{}last line, no final newline",
        "naïve → 日本 ✅\r\nsecond line\twith a tab and some more words\n\n".repeat(100)
    );
    let mut calls = vec![
        bash("trick", "cat /r/notes.txt", &tricky),
        read("r1", "/r/a.py", &numbered("r1", 1, 39, "\t")),
        read("r2", "/r/a.py", &numbered("r2", 1, 39, "→")),
        bash("short", "git diff", "d"),
        bash("short2", "git diff", "d"),
    ];
    calls.extend(fillers(0, 25));
    let o = rules(&session(calls, 1), "stashed", "finish the parser", &[]);
    assert_eq!(o.report["rules_mode"], "stashed");
    assert_eq!(o.report["semantic_guarantee"], "stashed");
    let stash = o.dir.path().join("stash");
    assert_eq!(o.report["stash_dir"], path_str(&stash));
    assert_eq!(
        o.d("r1"),
        dk("replace", "stashed:superseded_by_later_call:r2")
    );
    assert_eq!(o.d("short"), dk("keep", "short_result_kept_whole"));
    let note = o.note("trick");
    assert!(o.d("trick").1.starts_with("stashed:"), "{:?}", o.d("trick"));
    let id = stash_id(&note);
    assert_eq!(id.len(), 12);
    assert!(note.starts_with("[removed: 301 lines, "), "{note}");
    assert!(
        note.ends_with(&format!(" tokens · lcc recall {id}]")),
        "{note}"
    );
    assert_eq!(o.text("trick"), note);
    assert_eq!(
        decision(&o.report, "trick")["recover"],
        format!("lcc recall {id}")
    );
    assert!(o.report["tool_calls_stashed"].as_u64().unwrap() >= 2);

    let back = recall(&stash, &[&id]).expect(0);
    assert_eq!(back.stdout, tricky.as_bytes());
    // Line ranges keep each line's own ending.
    let two = recall(&stash, &[&id, "--lines", "1-2"]).expect(0);
    assert_eq!(
        two.out(),
        "naïve → 日本 ✅\r\nsecond line\twith a tab and some more words\n"
    );
    let one = recall(&stash, &[&id, "--lines", "3"]).expect(0);
    assert_eq!(one.out(), "\n");
    let last = recall(&stash, &[&id, "--lines", "301-400"]).expect(0);
    assert_eq!(last.out(), "last line, no final newline");
    recall(&stash, &[&id, "--lines", "302"]).expect(2);
    recall(&stash, &[&id, "--lines", "3-1"]).expect(2);
    // The file is named by the full hash; the full hash recalls too.
    let files: Vec<String> = std::fs::read_dir(&stash)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let full = files.iter().find(|f| f.starts_with(&id)).unwrap().clone();
    assert_eq!(recall(&stash, &[&full]).expect(0).stdout, tricky.as_bytes());
    assert!(
        files.iter().all(|f| f.len() == 64),
        "no temporary files left: {files:?}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(stash.join(&full))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let _ = &o.run;
}

#[test]
fn recall_refuses_a_tampered_file_and_unknown_ids() {
    let mut calls = vec![bash("c1", "npm run build", &big("HEAD"))];
    calls.extend(fillers(0, 25));
    let o = rules(&session(calls, 1), "stashed", "finish the parser", &[]);
    assert_eq!(o.d("c1"), dk("replace", "stashed:large_old_output_trimmed"));
    let stash = o.dir.path().join("stash");
    let id = stash_id(&o.note("c1"));
    let file = std::fs::read_dir(&stash)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[5] = b'X';
    std::fs::write(&file, &bytes).unwrap();
    let r = recall(&stash, &[&id]).expect(2);
    assert!(r.stdout.is_empty(), "a tampered file prints nothing");
    assert!(r.stderr.contains("fails its hash check"), "{}", r.stderr);
    let r = recall(&stash, &["0123456789ab"]).expect(2);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
    let r = recall(&stash, &["../etc/passwd"]).expect(2);
    assert!(r.stderr.contains("not a stash id"), "{}", r.stderr);
    let r = recall(&o.dir.path().join("nowhere"), &["0123456789ab"]).expect(2);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
    // Compacting again rewrites the damaged file.
    let t = session(
        {
            let mut c = vec![bash("c1", "npm run build", &big("HEAD"))];
            c.extend(fillers(0, 25));
            c
        },
        1,
    );
    let again = rules_in(Some(o.dir), &t, "stashed", "finish the parser", &[]);
    let back = recall(&again.dir.path().join("stash"), &[&id]).expect(0);
    assert_eq!(back.stdout, big("HEAD").as_bytes());
    // A file that already holds the right bytes is left alone: same inode after another run.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(&file).unwrap().ino();
        let third = rules_in(Some(again.dir), &t, "stashed", "finish the parser", &[]);
        assert_eq!(
            third.d("c1"),
            dk("replace", "stashed:large_old_output_trimmed")
        );
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), ino);
    }
}

#[test]
fn a_dry_run_stashes_nothing() {
    let dir = work();
    let t = session(
        {
            let mut c = vec![bash("c1", "npm run build", &big("HEAD"))];
            c.extend(fillers(0, 25));
            c
        },
        1,
    );
    let input = dir.path().join("in.json");
    std::fs::write(&input, t.to_string()).unwrap();
    let stash = dir.path().join("stash");
    let o = crate::support::run(
        lcc()
            .args([
                "compact",
                &path_str(&input),
                "--provider",
                "rules",
                "--rules-mode",
                "stashed",
            ])
            .args([
                "--dry-run",
                "--quiet",
                "-r",
                &path_str(&dir.path().join("r.json")),
            ])
            .env("LCC_STASH_DIR", &stash),
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(!stash.exists());
}

// ---------------------------------------------------------------------------------------
// flags

#[test]
fn rules_flags_need_the_rules_provider_and_a_mode_that_uses_them() {
    let ws = work();
    let root = path_str(ws.path());
    let input = fixture("session.json");
    let input = path_str(&input);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--workspace-root", &root], "--workspace-root only applies to the offline rules policy: pass --provider rules explicitly"),
        (vec!["--rules-mode", "recoverable"], "--rules-mode only applies to the offline rules policy: pass --provider rules explicitly (got --provider auto"),
        (vec!["--provider", "jev", "--rules-mode", "stashed"], "--rules-mode only applies to the offline rules policy"),
        (vec!["--provider", "auto", "--allow-command-pointers"], "--allow-command-pointers only applies to the offline rules policy"),
        (vec!["--provider", "auto", "--no-disk-check"], "--no-disk-check only applies to the offline rules policy"),
        (vec!["--provider", "rules", "--workspace-root", &root], "--workspace-root only applies to --rules-mode recoverable or stashed"),
        (vec!["--provider", "rules", "--rules-mode", "recoverable", "--no-disk-check"], "--no-disk-check needs --workspace-root"),
        (vec!["--provider", "rules", "--rules-mode", "lossy", "--allow-command-pointers"], "--allow-command-pointers only applies to --rules-mode recoverable"),
        (vec!["--provider", "rules", "--rules-mode", "recoverable", "--workspace-root", "/nonexistent/ws"], "--workspace-root /nonexistent/ws is not a directory"),
    ];
    for (flags, msg) in cases {
        let mut args = vec!["compact", input.as_str(), "--quiet"];
        args.extend(flags.iter().copied());
        let r = lcc_run(&args).expect(2);
        assert!(r.stderr.contains(msg), "{flags:?}: {}", r.stderr);
        assert!(r.stdout.is_empty());
    }
}

#[test]
fn every_mode_runs_on_a_real_session_and_keeps_texts() {
    let src: Value = json_file(&path_str(&fixture("session.json")));
    let texts = |v: &Value| -> Vec<String> {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["text"].as_str())
            .filter(|t| !t.trim().is_empty())
            .map(str::to_string)
            .collect()
    };
    for mode in ["recoverable", "lossy", "stashed"] {
        let o = rules(&src, mode, "fix the KeyError in src/lexer.py", &[]);
        assert_eq!(
            texts(&o.output),
            texts(&src),
            "{mode}: texts are never touched"
        );
        assert!(!o.report["degraded"].as_bool().unwrap(), "{mode}");
        let again = rules(&src, mode, "fix the KeyError in src/lexer.py", &[]);
        assert_eq!(again.output, o.output, "{mode}: deterministic");
    }
}

/// Reason → count over a report's decisions (`superseded_by_later_call:<id>` counted under
/// its rule name).
fn reason_counts(report: &Value) -> Vec<(String, usize)> {
    let mut m = std::collections::BTreeMap::new();
    for d in report["decisions"].as_array().unwrap() {
        let r = d["reason"].as_str().unwrap();
        *m.entry(r.split(':').next().unwrap().to_string())
            .or_insert(0) += 1;
    }
    m.into_iter().collect()
}

fn counts(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
    pairs.iter().map(|(r, n)| ((*r).to_string(), *n)).collect()
}

/// `fixtures/rules/codex-session.json`: the decisions below are the Python release's on the
/// same input (checked with `scripts/diff-rules.py`), reason for reason.
#[test]
fn a_codex_session_decides_like_the_reference() {
    let src = json_file(&path_str(&fixture("rules/codex-session.json")));
    let goal = "explain how merge_span in src/router.py works";
    let o = rules_in(None, &src, "recoverable", goal, &["--preserve-recent", "6"]);
    assert_eq!(
        reason_counts(&o.report),
        counts(&[
            ("call_before_latest_error", 1),
            ("command_output_changed_later", 7),
            ("failed_result", 8),
            ("file_written_later", 16),
            ("identical_output_kept_later", 6),
            ("latest_error_result", 1),
            ("named_in_goal_or_recent_turns", 4),
            ("not_recoverable", 18),
            ("output_lines_of_later", 1),
            ("pinned_recent", 2),
            ("recoverable_file_read", 4),
        ])
    );
    assert_eq!(
        o.note("toolu_01pybUZZT1Qp7MGDXLcfFmBp"),
        "[removed: re-read /home/dev/.venv/lib/python3.11/site-packages/httpx/_models.py (lines 40-159) to recover]"
    );
    let o = rules_in(None, &src, "lossy", goal, &["--preserve-recent", "6"]);
    assert_eq!(
        reason_counts(&o.report),
        counts(&[
            ("call_before_latest_error", 1),
            ("kept_default", 27),
            ("latest_artifact_edit", 1),
            ("latest_error_result", 1),
            ("named_in_goal", 3),
            ("pinned_recent", 2),
            ("stale_read_far_from_recent_work", 17),
            ("superseded_by_later_call", 13),
            ("trim_guard_recent", 3),
        ])
    );
    // Stashed removes what either would, and every stashed output comes back exactly.
    let o = rules_in(None, &src, "stashed", goal, &["--preserve-recent", "6"]);
    assert_eq!(o.report["tool_calls_stashed"], 27);
    let stash = o.dir.path().join("stash");
    let originals: std::collections::HashMap<String, String> = src["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["toolResults"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["tool_use_id"].as_str().unwrap().to_string(),
                r["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for d in o.report["decisions"].as_array().unwrap() {
        if d["decision"] == "replace" {
            let id = d["id"].as_str().unwrap();
            let back = recall(&stash, &[&stash_id(d["note"].as_str().unwrap())]).expect(0);
            assert_eq!(back.stdout, originals[id].as_bytes(), "{id}");
        }
    }
}

/// The pipeline fills stash notes in from the token counts it makes for the report; they
/// must be the notes the policy writes when it counts on its own.
#[test]
fn stash_notes_from_the_pipeline_counts_match_a_direct_count() {
    let path = fixture("rules/codex-session.json");
    let src = std::fs::read_to_string(&path).unwrap();
    let t = lcc::transcript::parse(&src, None).unwrap();
    let pins = lcc::pin::select(&t, &t.pairs().unwrap(), 6);
    let opts = lcc::rules::RulesOptions {
        disk_check: true,
        ..Default::default()
    };
    let (direct, extras) = lcc::rules::decide(
        lcc::rules::RulesMode::Stashed,
        &t,
        &pins,
        "explain how merge_span in src/router.py works",
        &opts,
        &lcc::io::DiskProbe,
        Some(lcc::tokens::Counter::for_model("gpt-4.1")),
    );
    assert!(!extras.notes_pending);
    let o = rules_in(
        None,
        &serde_json::from_str(&src).unwrap(),
        "stashed",
        "explain how merge_span in src/router.py works",
        &["--preserve-recent", "6"],
    );
    let mut n = 0;
    for d in &direct {
        let id = &t.call(d.call).id;
        let r = decision(&o.report, id);
        assert_eq!(r["decision"], d.action.kind(), "{id}");
        if let lcc::decide::Action::Replace { note, .. } = &d.action {
            assert_eq!(r["note"], note.as_str(), "{id}");
            n += 1;
        }
    }
    assert_eq!(n, 27);
}
