//! `--rules-mode recoverable`: everything lossless removes, plus an old output the agent can
//! get back by re-reading a file or (with `--allow-command-pointers`) re-running a read-only
//! command, replaced by a pointer that says how:
//!
//! * `[removed: re-read <path> to recover]`, or `… <path> (lines a-b) …` for a part of the
//!   file, for a read of one file (Read, read_file, view, NotebookRead; a shell `cat`, `head`,
//!   `tail`, `sed -n 'a,bp'` of one file). A relative path names the call's working
//!   directory: `… <path> (cwd <dir>) …`.
//! * ``[removed: re-run `<cmd>` to recover]`` (`… in <dir> …` with a working directory) for
//!   a command on the read-only allowlist ([`super::shell`]).
//!
//! Never replaced: commands off the allowlist (tests, builds, installs, git writes, network),
//! MCP/web/unknown tools, edit and patch results, failed results (`is_error`,
//! `<tool_use_error>`, a Codex header with a non-zero exit code or a running process), the
//! latest error and the call before it, pinned messages, calls whose file or command the goal
//! or a recent (pinned) user turn names, calls in a system temp directory.
//!
//! # Is the file still what was read?
//! * Without `--workspace-root` (`transcript_proxy`): only when no later call can have
//!   written it: no later write, patch or delete whose input names it (or, for a destructive
//!   command, names one of its directories), no worktree-wide git command (`checkout`,
//!   `reset`, `stash`, …), and no later opaque call (a script, test run, build, unknown tool)
//!   that may write under the file's directory (anywhere when the call's directory is
//!   unknown or it changes directory).
//! * With `--workspace-root` and the disk check on (`disk`): the disk decides instead
//!   ([`super::disk`]); the pointer adds `; content verified on disk at compaction time`.
//!
//! Every later-write question is answered from indexes built in one pass (last position of a
//! write naming each file, of an opaque call under each directory), so the policy is linear
//! in the transcript.

use crate::fasthash::FastMap as HashMap;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::calls::{CallView, Context};
use super::disk::{self, FileProbe, Stamp};
use super::shell::{self, FileRead, Spec, FILE_READ_TOOLS};
use super::text::{basename, input_text, mentions, names_file, NameIndex};
use crate::decide::{Action, Decision};
use crate::transcript::{BlockRef, ToolResult};

/// How the policy may check files.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// `--workspace-root`: turns the disk check on (unless `disk_check` is false).
    pub root: Option<&'a Path>,
    pub disk_check: bool,
    pub allow_command_pointers: bool,
}

impl Options<'_> {
    pub fn use_disk(&self) -> bool {
        self.root.is_some() && self.disk_check
    }

    /// The report's `recoverability_check`.
    pub fn check_name(&self) -> &'static str {
        if self.use_disk() {
            "disk"
        } else {
            "transcript_proxy"
        }
    }
}

/// A replacement the policy found for one candidate.
#[derive(Debug, Clone)]
pub struct Hit {
    pub reason: &'static str,
    pub note: String,
    pub recover: String,
    /// The disk check's stamp, to re-hash right before the output is written.
    pub stamp: Option<Stamp>,
}

/// The policy's view of one candidate, before lossless dedupes are merged in.
#[derive(Debug, Clone)]
pub enum Plan {
    Replace(Hit),
    Keep(&'static str),
}

const VERIFIED: &str = "; content verified on disk at compaction time";

// Tools that write no file, so they never invalidate a pointer.
const PURE_TOOLS: &[&str] = &[
    "Read",
    "Grep",
    "Glob",
    "LS",
    "WebFetch",
    "WebSearch",
    "NotebookRead",
    "TodoWrite",
    "TaskCreate",
    "TaskUpdate",
    "ExitPlanMode",
    "update_plan",
    "AskUserQuestion",
    "view",
    "read_file",
    "search_files",
    "web_search",
    "ToolSearch",
    "tool_search",
    "view_image",
    "vision_analyze",
    "skill_view",
    "Skill",
    "TaskList",
    "TaskGet",
];
// Writes whose targets are in their input; any other non-pure call is opaque.
const TARGETED_WRITE_TOOLS: &[&str] = &[
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "apply_patch",
    "patch",
    "write_file",
];

static GIT_WORKTREE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\bgit\s+(?:checkout|switch|reset|stash|restore|pull|merge|rebase|apply|am|cherry-pick|revert|clean|mv|rm)\b",
    )
    .expect("regex")
});
static DESTRUCTIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:rm|rmdir|mv|cp|rsync|unlink|tar|unzip|git\s+(?:rm|mv|clean))\b")
        .expect("regex")
});
static CHDIR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:cd|pushd)\b|(?:^|\s)-C\b|--(?:prefix|cwd|directory)\b").expect("regex")
});

/// The working directory a call names (`workdir`, else `cwd`).
pub fn cwd_of(input: &serde_json::Value) -> Option<&str> {
    super::text::first_truthy(input, &["workdir", "cwd"]).and_then(serde_json::Value::as_str)
}

/// POSIX `normpath`: collapse `//` and `.`, resolve `..` lexically.
pub fn normpath(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let lead = if p.starts_with("//") && !p.starts_with("///") {
        2
    } else {
        usize::from(p.starts_with('/'))
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." if lead == 0 && parts.last().is_none_or(|l| *l == "..") => parts.push(c),
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let out = format!("{}{}", "/".repeat(lead), parts.join("/"));
    if out.is_empty() {
        ".".into()
    } else {
        out
    }
}

/// The absolute path a read names, or `None` when it is relative to an unknown directory.
fn resolved(path: &str, cwd: Option<&str>) -> Option<String> {
    if path.starts_with('/') {
        return Some(normpath(path));
    }
    cwd.filter(|c| c.starts_with('/'))
        .map(|c| normpath(&format!("{c}/{path}")))
}

fn strip_private(p: &str) -> &str {
    p.strip_prefix("/private")
        .filter(|r| r.is_empty() || r.starts_with('/'))
        .unwrap_or(p)
}

/// The key a directory is indexed under: without macOS's `/private`, without trailing `/`
/// (the root is `""`).
fn dir_key(d: &str) -> String {
    strip_private(d).trim_end_matches('/').to_string()
}

/// Directories a file lies under, as [`dir_key`]s (the root `""` included), and the file
/// itself.
fn dir_keys_of(target: &str) -> Vec<&str> {
    let t = strip_private(target);
    let mut out = vec![""];
    out.extend(
        t.match_indices('/')
            .filter(|(i, _)| *i > 0)
            .map(|(i, _)| &t[..i]),
    );
    out.push(t);
    out
}

/// The directories above a path as written (`/r/src/a.py` → `/r`, `/r/src`).
fn ancestors(path: &str) -> Vec<&str> {
    let p = path.trim_end_matches('/');
    p.match_indices('/')
        .map(|(i, _)| &p[..i])
        .filter(|a| {
            !a.trim_matches(|c| c == '.' || c == '/' || c == '~')
                .is_empty()
        })
        .collect()
}

/// A file pointer. The working directory is named only for a relative path.
pub fn file_pointer(
    path: &str,
    lines: Option<(usize, usize)>,
    cwd: Option<&str>,
    verified: bool,
) -> String {
    format!(
        "[removed: re-read {} to recover{}]",
        file_target(path, lines, cwd),
        if verified { VERIFIED } else { "" }
    )
}

fn file_target(path: &str, lines: Option<(usize, usize)>, cwd: Option<&str>) -> String {
    let span = lines.map_or(String::new(), |(a, b)| format!(" (lines {a}-{b})"));
    let place = match cwd {
        Some(c) if !path.starts_with('/') => format!(" (cwd {c})"),
        _ => String::new(),
    };
    format!("{path}{span}{place}")
}

/// A command pointer.
pub fn command_pointer(cmd: &str, cwd: Option<&str>) -> String {
    format!("[removed: re-run {} to recover]", command_target(cmd, cwd))
}

fn command_target(cmd: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(c) => format!("`{cmd}` in {c}"),
        None => format!("`{cmd}`"),
    }
}

/// Which lines a file pointer names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lines {
    Whole,
    Range(usize, usize),
    /// Not knowable from the output (a tail, a partial read that is not numbered, a range
    /// the output does not fill).
    Skip,
}

impl Lines {
    fn pair(self) -> Option<(usize, usize)> {
        match self {
            Lines::Range(a, b) => Some((a, b)),
            _ => None,
        }
    }
}

fn pointer_lines(c: &CallView<'_>, body: &str, spec: Spec) -> Lines {
    if FILE_READ_TOOLS.contains(&c.tool()) {
        let Some(rows) = disk::numbered(body) else {
            return if spec == Spec::All {
                Lines::Whole
            } else {
                Lines::Skip
            };
        };
        let (first, last) = (rows[0].0, rows[rows.len() - 1].0);
        if spec == Spec::Numbered {
            let int = |k: &str| {
                c.input()
                    .get(k)
                    .filter(|v| !v.is_null())
                    .map(serde_json::Value::as_i64)
            };
            match int("offset") {
                Some(Some(o)) if usize::try_from(o.max(1)).ok() == Some(first) => {}
                Some(_) => return Lines::Skip,
                None => {}
            }
            match int("limit") {
                Some(Some(l)) if usize::try_from(l).is_ok_and(|l| rows.len() <= l) => {}
                Some(_) => return Lines::Skip,
                None => {}
            }
        }
        return if spec == Spec::All && first == 1 {
            Lines::Whole
        } else {
            Lines::Range(first, last)
        };
    }
    match spec {
        Spec::All => Lines::Whole,
        Spec::Range(a, b) if disk::file_lines(body).len() == b - a + 1 => Lines::Range(a, b),
        _ => Lines::Skip,
    }
}

/// What each candidate call is, computed once.
struct Info<'a> {
    cmd: Option<String>,
    read: Option<FileRead>,
    cwd: Option<&'a str>,
}

impl<'a> Info<'a> {
    fn of(c: &CallView<'a>) -> Info<'a> {
        let cmd = shell::shell_command(c.tool(), c.input());
        let read = shell::file_read(c.tool(), c.input(), cmd.as_deref());
        Info {
            cmd,
            read,
            cwd: cwd_of(c.input()),
        }
    }

    fn read_only(&self) -> bool {
        self.cmd.as_deref().is_some_and(shell::is_read_only)
    }

    /// The call reads or runs in a system temp directory (its cwd, file or an argument).
    fn in_temp(&self) -> bool {
        self.cwd.is_some_and(shell::is_temp_path)
            || self
                .read
                .as_ref()
                .is_some_and(|r| shell::is_temp_path(&r.path))
            || self
                .cmd
                .as_deref()
                .is_some_and(|c| shell::args_of(c).iter().any(|a| shell::is_temp_path(a)))
    }
}

/// Where later calls may have written, by position in the call list.
#[derive(Default)]
struct Later {
    write: Option<usize>,
    wholesale: Option<usize>,
    opaque: Option<usize>,
    opaque_anywhere: Option<usize>,
    opaque_dirs: HashMap<String, usize>,
    names: NameIndex,
    destructive: NameIndex,
}

fn after(x: Option<usize>, i: usize) -> bool {
    x.is_some_and(|p| p > i)
}

impl Later {
    /// Index every call that may write files. `names` are the file names asked about later,
    /// `dir_names` the directory names (for destructive commands).
    fn build<'n>(
        ctx: &Context<'_>,
        names: impl IntoIterator<Item = &'n str>,
        dir_names: impl IntoIterator<Item = &'n str>,
    ) -> Later {
        let mut l = Later {
            names: NameIndex::new(names),
            destructive: NameIndex::new(dir_names),
            ..Later::default()
        };
        // What each call may have written, computed in parallel, folded in order.
        struct Write {
            wholesale: bool,
            /// `Some(dir)` for an opaque call: `Some(Some(d))` under `d`, `Some(None)` anywhere.
            opaque: Option<Option<String>>,
            names: Vec<usize>,
            destructive: Option<Vec<usize>>,
        }
        let writes: Vec<Option<Write>> = {
            use rayon::prelude::*;
            let l = &l;
            ctx.calls
                .par_iter()
                .map(|c| {
                    let cmd = shell::shell_command(c.tool(), c.input());
                    if cmd.as_deref().is_some_and(shell::is_read_only)
                        || (cmd.is_none() && PURE_TOOLS.contains(&c.tool()))
                    {
                        return None;
                    }
                    let text = input_text(c.input());
                    let opaque = (!TARGETED_WRITE_TOOLS.contains(&c.tool())).then(|| {
                        cwd_of(c.input())
                            .filter(|d| d.starts_with('/') && !CHDIR.is_match(&text))
                            .map(|d| dir_key(&normpath(d)))
                    });
                    Some(Write {
                        wholesale: GIT_WORKTREE.is_match(&text),
                        opaque,
                        names: l.names.hits(&text),
                        destructive: DESTRUCTIVE
                            .is_match(&text)
                            .then(|| l.destructive.hits(&text)),
                    })
                })
                .collect()
        };
        for (i, w) in writes.into_iter().enumerate() {
            let Some(w) = w else { continue };
            l.write = Some(i);
            if w.wholesale {
                l.wholesale = Some(i);
            }
            match w.opaque {
                Some(Some(d)) => {
                    l.opaque = Some(i);
                    l.opaque_dirs.insert(d, i);
                }
                Some(None) => {
                    l.opaque = Some(i);
                    l.opaque_anywhere = Some(i);
                }
                None => {}
            }
            l.names.record(i, &w.names);
            if let Some(d) = w.destructive {
                l.destructive.record(i, &d);
            }
        }
        l
    }

    /// May a call after position `i` have written `path` (read by a call with `cwd`)?
    fn file_written(&self, path: &str, cwd: Option<&str>, i: usize) -> bool {
        if after(self.opaque_anywhere, i) {
            return true;
        }
        let written_under = match resolved(path, cwd) {
            None => after(self.opaque, i),
            Some(target) => dir_keys_of(&target)
                .iter()
                .any(|d| after(self.opaque_dirs.get(*d).copied(), i)),
        };
        if written_under {
            return true;
        }
        after(self.wholesale, i)
            || self.names.mentioned_after(basename(path), i)
            || ancestors(path)
                .iter()
                .any(|a| self.destructive.mentioned_after(basename(a), i))
    }

    /// May a call after position `i` have changed what `cmd` prints?
    fn command_changed(&self, cmd: &str, i: usize) -> bool {
        if after(self.wholesale, i) || after(self.opaque, i) {
            return true;
        }
        match shell::command_paths(cmd) {
            None => after(self.write, i),
            Some(paths) => paths
                .iter()
                .any(|p| self.names.mentioned_after(basename(p), i)),
        }
    }
}

/// Does `text` name `cmd`: the whole command, or one of its path-like arguments?
fn command_named(cmd: &str, text: &str) -> bool {
    mentions(text, cmd.trim())
        || shell::args_of(cmd).iter().any(|a| {
            !a.starts_with('-')
                && (a.contains('/') || a.contains('.'))
                && a.chars().any(super::text::is_word)
                && names_file(text, a)
        })
}

/// The goal and the recent (pinned, not the first) user turns: what the user named.
fn named_text(ctx: &Context<'_>) -> String {
    let mut parts = vec![ctx.goal];
    parts.extend(
        ctx.recent_messages()
            .filter(|m| m.role == "user")
            .map(|m| m.text.as_str()),
    );
    parts.join("\n")
}

/// The policy for every candidate (before lossless dedupes), in candidate order.
pub fn plan(ctx: &Context<'_>, opts: &Options<'_>, probe: &dyn FileProbe) -> Vec<Plan> {
    let infos: Vec<Info<'_>> = ctx
        .candidates
        .iter()
        .map(|&i| Info::of(&ctx.calls[i]))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    let mut dir_names: Vec<&str> = Vec::new();
    let mut cmd_paths: Vec<Option<Vec<String>>> = Vec::with_capacity(infos.len());
    for info in &infos {
        if let Some(r) = &info.read {
            names.push(basename(&r.path));
            dir_names.extend(ancestors(&r.path).into_iter().map(basename));
        }
        // Only a read-only command's output is ever checked against later writes.
        cmd_paths.push(
            info.cmd
                .as_deref()
                .filter(|_| info.read_only())
                .and_then(shell::command_paths),
        );
    }
    let owned: Vec<&str> = cmd_paths
        .iter()
        .flatten()
        .flatten()
        .map(|p| basename(p))
        .collect();
    names.extend(owned);
    let later = Later::build(ctx, names, dir_names);

    let mut protected: HashMap<usize, &'static str> = HashMap::default();
    if let Some((e, before)) = ctx.latest_error() {
        protected.insert(e, "latest_error_result");
        if let Some(b) = before {
            protected.entry(b).or_insert("call_before_latest_error");
        }
    }
    let planner = Planner {
        ctx,
        opts,
        probe,
        later,
        protected,
        named: named_text(ctx),
    };
    use rayon::prelude::*;
    ctx.candidates
        .par_iter()
        .zip(&infos)
        .map(|(&i, info)| planner.plan_one(i, info))
        .collect()
}

/// What deciding one candidate needs, shared by all candidates.
struct Planner<'a, 'c> {
    ctx: &'a Context<'c>,
    opts: &'a Options<'a>,
    probe: &'a dyn FileProbe,
    later: Later,
    protected: HashMap<usize, &'static str>,
    named: String,
}

impl Planner<'_, '_> {
    /// The plan for the candidate at call position `i`.
    fn plan_one(&self, i: usize, info: &Info<'_>) -> Plan {
        let (ctx, opts, probe, later) = (self.ctx, self.opts, self.probe, &self.later);
        let (protected, named) = (&self.protected, self.named.as_str());
        let c = &ctx.calls[i];
        let Some(result) = c.result else {
            return Plan::Keep("not_recoverable");
        };
        let text = c.text();
        let (body, ok) = disk::body(&text);
        let mut reason: Option<&'static str> = protected.get(&i).copied();
        if reason.is_none() && (result.is_error || text.contains("<tool_use_error>") || !ok) {
            reason = Some("failed_result");
        }
        let cmd = info.cmd.as_deref();
        if reason.is_none()
            && (info
                .read
                .as_ref()
                .is_some_and(|r| names_file(named, &r.path))
                || cmd.is_some_and(|c| command_named(c, named)))
        {
            reason = Some("named_in_goal_or_recent_turns");
        }
        if reason.is_none() && info.in_temp() {
            reason = Some("temp_path");
        }
        if let Some(r) = reason {
            return Plan::Keep(r);
        }
        let shorter = |hit: Hit| {
            if hit.note.chars().count() < text.chars().count() {
                Plan::Replace(hit)
            } else {
                Plan::Keep("not_recoverable")
            }
        };
        let command_hit = |cmd: &str| Hit {
            reason: "recoverable_read_only_command",
            note: command_pointer(cmd, info.cwd),
            recover: format!("re-run {}", command_target(cmd, info.cwd)),
            stamp: None,
        };
        if let Some(read) = &info.read {
            let lines = pointer_lines(c, body, read.spec);
            let disk_decides = opts.use_disk() && lines != Lines::Skip;
            let target = resolved(&read.path, info.cwd);
            if !disk_decides && later.file_written(&read.path, info.cwd, i) {
                return Plan::Keep("file_written_later");
            }
            if read.spec == Spec::Empty {
                return Plan::Keep("read_range_empty");
            }
            if lines == Lines::Skip {
                let Some(cmd) = cmd else {
                    return Plan::Keep("read_range_unknown");
                };
                if later.command_changed(cmd, i) {
                    return Plan::Keep("command_output_changed_later");
                }
                if !opts.allow_command_pointers {
                    return Plan::Keep("command_pointers_disabled");
                }
            }
            if target.is_none() && (lines != Lines::Skip || opts.use_disk()) {
                return Plan::Keep("relative_path_without_cwd");
            }
            let mut stamp = None;
            if let (Some(root), Some(target)) = (opts.root.filter(|_| opts.use_disk()), &target) {
                let joined = match info.cwd {
                    Some(c) if !read.path.starts_with('/') => format!("{c}/{}", read.path),
                    _ => read.path.clone(),
                };
                if disk::has_dotdot(&joined) {
                    return Plan::Keep(disk::reason::OUTSIDE_ROOT);
                }
                match disk::check(probe, root, Path::new(target), c.tool(), read.spec, body) {
                    Ok(s) => stamp = disk_decides.then_some(s),
                    Err(r) => return Plan::Keep(r),
                }
            }
            if lines == Lines::Skip {
                // A tail (or a range the output does not fill) needs the file's length: point
                // at the command itself.
                return shorter(Hit {
                    reason: "recoverable_file_read",
                    ..command_hit(cmd.unwrap_or_default())
                });
            }
            let verified = stamp.is_some();
            return shorter(Hit {
                reason: if verified {
                    disk::reason::VERIFIED
                } else {
                    "recoverable_file_read"
                },
                note: file_pointer(&read.path, lines.pair(), info.cwd, verified),
                recover: format!(
                    "re-read {}",
                    file_target(&read.path, lines.pair(), info.cwd)
                ),
                stamp,
            });
        }
        if let Some(cmd) = cmd.filter(|_| info.read_only()) {
            if later.command_changed(cmd, i) {
                return Plan::Keep("command_output_changed_later");
            }
            if !opts.allow_command_pointers {
                return Plan::Keep("command_pointers_disabled");
            }
            return shorter(command_hit(cmd));
        }
        Plan::Keep("not_recoverable")
    }
}

/// Decide every candidate: recovery pointers, then lossless dedupes among the rest (a
/// replaced result is never a dedupe target). Returns the decisions (candidate order) and
/// the disk stamps of disk-verified replacements (by decision index).
pub fn decide(
    ctx: &Context<'_>,
    opts: &Options<'_>,
    probe: &dyn FileProbe,
) -> (Vec<Decision>, Vec<(usize, Stamp)>) {
    let plans = plan(ctx, opts, probe);
    let replaced: crate::fasthash::FastSet<BlockRef> = ctx
        .pairs()
        .iter()
        .zip(&plans)
        .filter(|(_, p)| matches!(p, Plan::Replace(_)))
        .map(|(pair, _)| pair.result)
        .collect();
    let lossless = super::lossless::decide_excluding(ctx.t, ctx.pairs(), &replaced);
    let mut stamps = Vec::new();
    let decisions = lossless
        .into_iter()
        .zip(plans)
        .enumerate()
        .map(|(k, (base, plan))| match plan {
            Plan::Replace(hit) => {
                if let Some(s) = hit.stamp {
                    stamps.push((k, s));
                }
                Decision {
                    action: Action::Replace {
                        note: hit.note,
                        recover: hit.recover,
                    },
                    reason: hit.reason.to_string(),
                    ..base
                }
            }
            Plan::Keep(_) if base.action != Action::Keep => base,
            Plan::Keep(reason) => Decision {
                reason: reason.to_string(),
                ..base
            },
        })
        .collect();
    (decisions, stamps)
}

/// Every recovery pointer the policy could have written for this call and its original
/// output: its own allowlisted command, or its own file with the exact line range.
pub fn valid_pointers(
    c: &CallView<'_>,
    original: &str,
    allow_command_pointers: bool,
) -> Vec<String> {
    let info = Info::of(c);
    let mut out = Vec::new();
    if info.in_temp() {
        return out;
    }
    if let Some(cmd) = info.cmd.as_deref() {
        if allow_command_pointers && info.read_only() {
            out.push(command_pointer(cmd, info.cwd));
        }
    }
    if let Some(read) = &info.read {
        let lines = pointer_lines(c, disk::body(original).0, read.spec);
        if lines != Lines::Skip && resolved(&read.path, info.cwd).is_some() {
            for verified in [false, true] {
                out.push(file_pointer(&read.path, lines.pair(), info.cwd, verified));
            }
        }
    }
    out
}

/// The verifier's hook: a changed result is accepted when its new text is one of the
/// pointers its own call could carry.
pub fn allow<'a>(
    ctx: &'a Context<'a>,
    allow_command_pointers: bool,
) -> impl Fn(&ToolResult, &str, &str) -> bool + 'a {
    let by_id: HashMap<&str, usize> = ctx
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| (c.call.id.as_str(), i))
        .collect();
    move |old: &ToolResult, old_text: &str, new: &str| {
        by_id.get(old.id.as_str()).is_some_and(|&i| {
            valid_pointers(&ctx.calls[i], old_text, allow_command_pointers)
                .iter()
                .any(|p| p == new)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(normpath("/a//b/./c/../d/"), "/a/b/d");
        assert_eq!(normpath("//a"), "//a");
        assert_eq!(normpath("a/../../b"), "../b");
        assert_eq!(normpath("/.."), "/");
        assert_eq!(resolved("p.py", Some("/r")).as_deref(), Some("/r/p.py"));
        assert_eq!(resolved("p.py", Some("r")), None);
        assert_eq!(resolved("p.py", None), None);
        assert_eq!(
            dir_keys_of("/private/tmp/a/b"),
            ["", "/tmp", "/tmp/a", "/tmp/a/b"]
        );
        assert_eq!(ancestors("/home/dev/p.py"), ["/home", "/home/dev"]);
        assert_eq!(ancestors("src/a/p.py"), ["src", "src/a"]);
        assert_eq!(ancestors("./p.py"), Vec::<&str>::new());
    }

    #[test]
    fn pointers() {
        assert_eq!(
            file_pointer("src/p.py", Some((5, 12)), None, false),
            "[removed: re-read src/p.py (lines 5-12) to recover]"
        );
        assert_eq!(
            file_pointer("p.py", None, Some("/r"), true),
            "[removed: re-read p.py (cwd /r) to recover; content verified on disk at compaction time]"
        );
        assert_eq!(
            file_pointer("/r/p.py", None, Some("/r"), false),
            "[removed: re-read /r/p.py to recover]"
        );
        assert_eq!(
            command_pointer("ls src", Some("/r")),
            "[removed: re-run `ls src` in /r to recover]"
        );
    }
}
