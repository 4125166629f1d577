//! `--rules-mode lossy` (EXPERIMENTAL): a deterministic policy that drops and trims from the
//! transcript's structure alone. It can remove output an agent still needs (the Python
//! release's version failed two blind audits), so its `semantic_guarantee` is `none`.
//!
//! Rules, first match wins; each decision records the rule as its reason.
//!
//! Keep whole (protections, searched over every call, pinned ones included):
//! `latest_error_result` and `call_before_latest_error`; `latest_git_state` (the latest Bash
//! `git status`, `git diff`, `git log`); `latest_task_state` (the latest call of each plan or
//! todo tool); `latest_artifact_edit`; `latest_user_question`; `latest_tool_result`;
//! `named_in_goal` (the latest read/edit of each file the goal names, and the latest call
//! whose input or output mentions it); `named_in_recent_turns` (the latest call on a path a
//! recent turn names).
//!
//! Remove:
//! * `superseded_by_later_call:<id>` (drop): a later successful whole-file Read/Write of the
//!   same file, or the same call run again with the same output (Codex run-metadata lines
//!   ignored). A rerun whose output changed is not dropped.
//! * `stale_read_far_from_recent_work` (drop): a successful read or search more than 40
//!   messages before the end, of no file the goal names.
//! * `large_old_output_trimmed` (trim): an output over 4000 characters keeps its first and
//!   last 1000 characters around a note, unless a guard keeps it whole:
//!   `trim_guard_recent` (within 40 messages of the end), `trim_guard_interactive` (a
//!   `write_stdin` poll or a `wait` tool), `trim_guard_error`, `trim_guard_edited_later` (a
//!   later edit or `apply_patch` changes a file the call names), `trim_guard_named` (the call
//!   names a path or URL from the goal or the recent turns).
//!
//! Everything else: `kept_default`.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::calls::{is_error, CallView, Context};
use super::text::{
    basename, command_of, input_text, looks_like_error, mentions, path_of, plain_mentions,
    py_strip, refs,
};
use crate::decide::{Action, Decision};

pub const STALE_AFTER_MESSAGES: usize = 40;
pub const LARGE_RESULT_CHARS: usize = 4000;
pub const TRIM_HEAD_CHARS: usize = 1000;
pub const TRIM_TAIL_CHARS: usize = 1000;
pub const TRIM_MIN_AGE_MESSAGES: usize = STALE_AFTER_MESSAGES;

const TASK_TOOLS: [&str; 5] = [
    "ExitPlanMode",
    "TaskCreate",
    "TaskUpdate",
    "TodoWrite",
    "update_plan",
];
const EDIT_TOOLS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];
const QUESTION_TOOLS: [&str; 2] = ["AskUserQuestion", "ExitPlanMode"];
const FILE_VIEW_TOOLS: [&str; 2] = ["Read", "Write"];
const READ_TOOLS: [&str; 7] = [
    "Read",
    "Grep",
    "Glob",
    "LS",
    "WebFetch",
    "WebSearch",
    "NotebookRead",
];

static GIT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bgit\s+(status|diff|log)\b").expect("regex"));
static WAIT_NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?:^|_)wait(?:_|$)").expect("regex"));
static READ_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:^|_)(?:read|get|list|search|fetch|find|snapshot|query)").expect("regex")
});
static PATCH_FILE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$").expect("regex")
});

/// The last `__` segment of a tool name (MCP tools: `mcp__server__tool`).
fn short_name(tool: &str) -> &str {
    tool.rsplit("__").next().unwrap_or(tool)
}

fn is_read(tool: &str) -> bool {
    READ_TOOLS.contains(&tool) || READ_NAME.is_match(short_name(tool))
}

/// `path` is the file `reference` names (`app.py` names `/r/app.py`, not `webapp.py`).
fn path_names(path: Option<&str>, reference: &str) -> bool {
    path.is_some_and(|p| {
        p == reference
            || p.strip_suffix(reference)
                .is_some_and(|head| head.ends_with('/'))
    })
}

/// A successful view of the whole file: only that makes an earlier view of it stale.
fn whole_view(c: &CallView<'_>) -> bool {
    let partial = ["offset", "limit", "pages"]
        .iter()
        .any(|k| c.input().get(k).is_some_and(|v| !v.is_null()));
    FILE_VIEW_TOOLS.contains(&c.tool()) && !partial && c.result.is_some() && !c.flagged()
}

/// What a later call must share to make this call's output stale.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    File(String),
    Bash(String),
    Call(String),
}

fn supersede_key(c: &CallView<'_>, input: &str) -> Key {
    let path = path_of(c.input());
    if let Some(p) =
        path.filter(|_| FILE_VIEW_TOOLS.contains(&c.tool()) || EDIT_TOOLS.contains(&c.tool()))
    {
        return Key::File(p.to_string());
    }
    let cmd = command_of(c.input());
    if c.tool() == "Bash" && !cmd.is_empty() {
        return Key::Bash(cmd.to_string());
    }
    Key::Call(format!("{} {input}", c.tool()))
}

/// An output with its per-run Codex metadata lines removed (anywhere), then stripped.
fn without_run_metadata(text: &str) -> std::borrow::Cow<'_, str> {
    use super::lossless::{is_header_line, HEADER_NAMES};
    // Most outputs have no line starting with a name: nothing to drop, nothing to copy.
    let at_line_start = |n: &str| {
        text.starts_with(n)
            || text
                .match_indices(n)
                .any(|(i, _)| text.as_bytes()[i - 1] == b'\n')
    };
    if !HEADER_NAMES.iter().any(|n| at_line_start(n)) {
        return std::borrow::Cow::Borrowed(py_strip(text));
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if !is_header_line(line) {
            out.push_str(line);
        }
    }
    std::borrow::Cow::Owned(py_strip(&out).to_string())
}

fn same_output(a: &CallView<'_>, b: &CallView<'_>) -> bool {
    let (x, y) = (a.text(), b.text());
    x == y || without_run_metadata(&x) == without_run_metadata(&y)
}

/// Files a call edits: an edit tool's path, or the file headers of an `apply_patch` body in
/// any string field of its input (Codex also patches through `exec`).
fn edited_paths(c: &CallView<'_>) -> Vec<String> {
    if EDIT_TOOLS.contains(&c.tool()) {
        return path_of(c.input()).map(str::to_string).into_iter().collect();
    }
    let Value::Object(map) = c.input() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for v in map.values() {
        let s = match v {
            Value::String(s) => s.as_str(),
            _ => continue,
        };
        if s.contains("*** ") {
            out.extend(PATCH_FILE.captures_iter(s).map(|c| c[1].to_string()));
        }
    }
    out
}

/// The call's input without its working directory (every call of a session shares it).
fn target_text(input: &Value) -> String {
    match input {
        Value::Object(m) if m.contains_key("workdir") || m.contains_key("cwd") => {
            let mut m = m.clone();
            m.remove("workdir");
            m.remove("cwd");
            input_text(&Value::Object(m))
        }
        v => input_text(v),
    }
}

/// call position → the protection that keeps it whole (first rule wins).
fn protections(
    ctx: &Context<'_>,
    inputs: &[String],
    goal_refs: &[String],
) -> HashMap<usize, &'static str> {
    let calls = &ctx.calls;
    let mut p: HashMap<usize, &'static str> = HashMap::new();
    let mut protect = |i: Option<usize>, reason: &'static str| {
        if let Some(i) = i {
            p.entry(i).or_insert(reason);
        }
    };
    let latest = |pred: &dyn Fn(usize, &CallView<'_>) -> bool| {
        (0..calls.len()).rev().find(|&i| pred(i, &calls[i]))
    };
    if let Some((e, before)) = ctx.latest_error() {
        protect(Some(e), "latest_error_result");
        protect(before, "call_before_latest_error");
    }
    for sub in ["status", "diff", "log"] {
        protect(
            latest(&|_, c| {
                c.tool() == "Bash"
                    && GIT_RE
                        .captures_iter(command_of(c.input()))
                        .any(|m| &m[1] == sub)
            }),
            "latest_git_state",
        );
    }
    for tool in TASK_TOOLS {
        protect(latest(&|_, c| c.tool() == tool), "latest_task_state");
    }
    protect(
        latest(&|_, c| EDIT_TOOLS.contains(&c.tool())),
        "latest_artifact_edit",
    );
    protect(
        latest(&|_, c| QUESTION_TOOLS.contains(&c.tool())),
        "latest_user_question",
    );
    protect(latest(&|_, c| c.result.is_some()), "latest_tool_result");
    for r in goal_refs {
        protect(
            latest(&|_, c| {
                (FILE_VIEW_TOOLS.contains(&c.tool()) || EDIT_TOOLS.contains(&c.tool()))
                    && path_names(path_of(c.input()), r)
            }),
            "named_in_goal",
        );
        protect(
            latest(&|i, c| mentions(&inputs[i], r) || c.result.is_some() && mentions(&c.text(), r)),
            "named_in_goal",
        );
    }
    // The recent turns: each pinned message but the first, its text and its calls' inputs.
    let mut recent = String::new();
    for (mi, m) in ctx.t.messages.iter().enumerate() {
        if mi == 0 || !ctx.pins.is_pinned(mi) {
            continue;
        }
        let mut parts = vec![m.text.clone()];
        parts.extend(m.calls.iter().map(|c| input_text(&c.input)));
        if !recent.is_empty() {
            recent.push('\n');
        }
        recent.push_str(&parts.join("\n"));
    }
    let recent_refs = refs(&recent);
    if !recent_refs.is_empty() {
        let mut latest_on_path: HashMap<&str, usize> = HashMap::new();
        for (i, c) in calls.iter().enumerate() {
            if let Some(path) = path_of(c.input()) {
                latest_on_path.insert(path, i);
            }
        }
        for r in &recent_refs {
            protect(
                latest_on_path.get(r.as_str()).copied(),
                "named_in_recent_turns",
            );
        }
    }
    p
}

/// The trimmed text: the first and last 1000 characters around a note.
pub fn trim_text(text: &str, tool: &str) -> String {
    let total = text.chars().count();
    let head_end = text
        .char_indices()
        .nth(TRIM_HEAD_CHARS)
        .map_or(text.len(), |(i, _)| i);
    // The char at position `total - TRIM_TAIL_CHARS`, found from the end.
    let tail_start = text
        .char_indices()
        .rev()
        .nth(TRIM_TAIL_CHARS - 1)
        .map_or(text.len(), |(i, _)| i);
    let removed = total - TRIM_HEAD_CHARS - TRIM_TAIL_CHARS;
    let tool = if tool.is_empty() { "the tool" } else { tool };
    format!(
        "{}\n[... lcc: {removed} chars of this tool result dropped; re-run {tool} for the rest ...]\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

/// Decide every candidate, in candidate order.
pub fn decide(ctx: &Context<'_>) -> Vec<Decision> {
    let calls = &ctx.calls;
    let inputs: Vec<String> = {
        use rayon::prelude::*;
        calls.par_iter().map(|c| input_text(c.input())).collect()
    };
    let goal_refs = refs(ctx.goal);
    let protected = protections(ctx, &inputs, &goal_refs);
    let flags = ctx.flags_present();

    // Guards match references the goal or a recent turn's *text* names (tool inputs would
    // make a shared working directory a reference).
    let mut guard_refs = goal_refs.clone();
    for m in ctx.recent_messages() {
        for r in refs(&m.text) {
            if !guard_refs.contains(&r) {
                guard_refs.push(r);
            }
        }
    }
    // Later edits: file name → last position of a call editing a file of that name.
    let mut edit_names: HashMap<String, usize> = HashMap::new();
    let mut odd_edits: Vec<(String, usize)> = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        for p in edited_paths(c) {
            let name = basename(&p).to_string();
            if name.is_empty() {
                continue;
            }
            if name
                .chars()
                .all(|ch| super::text::is_word(ch) || ch == '.' || ch == '-')
            {
                edit_names.insert(name, i);
            } else if let Some(e) = odd_edits.iter_mut().find(|(n, _)| *n == name) {
                e.1 = i;
            } else {
                odd_edits.push((name, i));
            }
        }
    }
    let edited_later = |text: &str, i: usize| {
        let mut hit = false;
        plain_mentions(text, |m| {
            hit = hit || edit_names.get(m).is_some_and(|&p| p > i)
        });
        hit || odd_edits.iter().any(|(n, p)| *p > i && mentions(text, n))
    };
    // Supersession: walking backwards, the nearest later call under the same key.
    let mut superseded_by: HashMap<usize, usize> = HashMap::new();
    let mut next: HashMap<Key, usize> = HashMap::new();
    for i in (0..calls.len()).rev() {
        let c = &calls[i];
        let key = supersede_key(c, &inputs[i]);
        if let Some(&j) = next.get(&key) {
            if matches!(key, Key::File(_)) || same_output(c, &calls[j]) {
                superseded_by.insert(i, j);
            }
        }
        if !matches!(key, Key::File(_)) || whole_view(c) {
            next.insert(key, i);
        }
    }
    let last_index = ctx.last_index();

    ctx.candidates
        .iter()
        .zip(ctx.pairs())
        .map(|(&i, pair)| {
            let c = &calls[i];
            let text = c.text();
            let text = text.as_ref();
            let age = last_index.saturating_sub(c.at.message);
            let (action, reason) = if let Some(&r) = protected.get(&i) {
                (Action::Keep, r.to_string())
            } else if let Some(&j) = superseded_by.get(&i) {
                (
                    Action::Drop,
                    format!("superseded_by_later_call:{}", calls[j].call.id),
                )
            } else if is_read(c.tool())
                && !(c.flagged() || looks_like_error(text))
                && !goal_refs.iter().any(|r| path_names(path_of(c.input()), r))
                && age > STALE_AFTER_MESSAGES
            {
                (Action::Drop, "stale_read_far_from_recent_work".to_string())
            } else if text.chars().count() > LARGE_RESULT_CHARS {
                let target = target_text(c.input());
                let guard = if age <= TRIM_MIN_AGE_MESSAGES {
                    Some("trim_guard_recent")
                } else if c.tool() == "write_stdin" || WAIT_NAME.is_match(short_name(c.tool())) {
                    Some("trim_guard_interactive")
                } else if is_error(c, flags) {
                    Some("trim_guard_error")
                } else if !EDIT_TOOLS.contains(&c.tool())
                    && c.tool() != "apply_patch"
                    && edited_later(&target, i)
                {
                    Some("trim_guard_edited_later")
                } else if guard_refs.iter().any(|r| mentions(&target, r)) {
                    Some("trim_guard_named")
                } else {
                    None
                };
                match guard {
                    Some(g) => (Action::Keep, g.to_string()),
                    None => (
                        Action::Trim(trim_text(text, c.tool())),
                        "large_old_output_trimmed".to_string(),
                    ),
                }
            } else {
                (Action::Keep, "kept_default".to_string())
            };
            Decision {
                call: pair.call,
                result: Some(pair.result),
                action,
                keep_call: None,
                keep_result: None,
                source: "rules",
                reason,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_keep_head_and_tail() {
        let text = format!("HEAD{}TAIL", "m".repeat(5000));
        let t = trim_text(&text, "Bash");
        assert!(t.starts_with("HEADm"));
        assert!(t.ends_with("mTAIL"));
        assert!(t.contains(
            "[... lcc: 3008 chars of this tool result dropped; re-run Bash for the rest ...]"
        ));
        let head = t.split("\n[... lcc:").next().unwrap();
        assert_eq!(head.chars().count(), 1000);
        let tail = t.rsplit("...]\n").next().unwrap();
        assert_eq!(tail.chars().count(), 1000);
    }

    #[test]
    fn run_metadata_is_ignored() {
        let a = "Chunk ID: 1\nWall time: 2s\nProcess exited with code 0\nOutput:\nok\n";
        let b = "Chunk ID: 9\nWall time: 5s\nProcess exited with code 0\nOutput:\nok";
        assert_eq!(without_run_metadata(a), without_run_metadata(b));
        assert_ne!(
            without_run_metadata("Output:\nok"),
            without_run_metadata("Output:\nko")
        );
    }

    #[test]
    fn names() {
        assert!(path_names(Some("/r/app.py"), "app.py"));
        assert!(!path_names(Some("/r/webapp.py"), "app.py"));
        assert!(is_read("mcp__docs__get_page"));
        assert!(is_read("read_file"));
        assert!(!is_read("Bash"));
        assert!(WAIT_NAME.is_match(short_name("multi_agent_v1__wait_agent")));
    }
}
