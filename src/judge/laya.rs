//! The local judge (`--provider laya`, and `auto` when Jev cannot run): the System One
//! protocol against a laya server the user started (`laya-serve`, `reference/jev-laya.md` §2).
//!
//! laya reads a small context (512 or 1 024 tokens) and runs one encoder pass per question
//! over the state plus that question, cutting the state silently past its context (it says so
//! only in `usage.truncated`). So it is never shown the conversation: each candidate gets a
//! small state of its own, and one request asks that candidate's two questions about it:
//!
//! ```text
//! {"goal": "…", "call": "Read file_path=src/a.py -> ok 4213ch", "result": "ok, 4213 chars",
//!  "later_calls": ["Edit file_path=src/a.py, old_string=… -> ok 57ch", …],
//!  "later_calls_not_shown": 3}
//! ```
//!
//! * `call` is the call's one-line form (tool and its first two input keys, without its id),
//!   `result` the note that stands for its output (`ok, N chars`, `error, N chars`).
//! * `later_calls` outlines what later calls do with the same path or command, in transcript
//!   order, one line each: a later call is listed when it names the same file (an input key
//!   such as `path`/`file_path`, a path in a command line, or an `apply_patch` file header;
//!   `./a.py`, `a.py` and `/repo/a.py` are the same file) or runs the same command line.
//! * Sizes: the state must fit `--laya-context-tokens` less the 192 tokens laya keeps for the
//!   question and a separator, counted with o200k and kept to 4/5 of that room because laya's
//!   own tokenizers count code and JSON differently ([`state_budget`]: 664 tokens for 1 024).
//!   When the whole state does not fit, it is cut, deterministically: the call line to at most
//!   2/3 of the budget, the goal to half of what is left, then as many later calls as fit (the
//!   rest counted in `later_calls_not_shown`), then the goal grows back into what is still
//!   free. A call whose state cannot be made to fit is not judged (kept, with a warning).
//!
//! Requests: one per candidate, with its state and its two `noul` questions (ids
//! `keep_call_{id}` / `keep_result_{id}`, as for Jev, worded about the `call` in the state), so
//! a request never nears laya-serve's limits of 64 questions and 2 MiB ([`MAX_QUESTIONS`],
//! [`MAX_BODY_BYTES`], checked before sending). Packing several candidates into one state
//! would make every one of laya's per-question passes read all of them: a request per call is
//! the cheapest shape for a model that pays per question and per token. At most
//! `--max-workers` are in flight. Before the first one, `GET …/health` (a short timeout) must
//! answer 2xx. A failure that says the server itself is unwell (refused key, 5xx after retries,
//! time-out, connection lost, 404) stops the requests not yet sent; their calls are kept.
//!
//! Outcome table: the Jev one with `laya` in place of `jev` (`provider_used` `laya`,
//! `laya+partial_fail_safe` or `degraded`; `degradation_reason` `laya_unavailable_fail_safe`,
//! `laya_no_answers_fail_safe` or `laya_batch_failed`). An answer is not judged when it is
//! missing, malformed or out of range, and also when its response says `usage.truncated` (or
//! lists it in `usage.truncated_questions`): laya then read only the head of the state.
//!
//! Report: `requests` counts the requests sent, `calls` the responses that carried answers,
//! `state_tokens` is the largest state sent, `state_fit_stage` is `per-call`,
//! `jev_model_resolved` is the `model` laya answered with, `input_tokens_sent` sums
//! `usage.input_tokens` (our own count when a response has none).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use indicatif::ProgressBar;
use rayon::prelude::*;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::batch::{keep_call_key, keep_result_key, ENVELOPE_TOKENS};
use super::client::{self, FailKind, Failure, Policy, Redactor, Reply, SendError, Transport};
use super::state::{line_for_call, note};
use crate::commands::compact::Assessment;
use crate::decide::Decision;
use crate::error::Error;
use crate::json::quote;
use crate::pin::Pins;
use crate::settings::{ApiKey, CompactSettings, LayaConfig};
use crate::tokens::Counter;
use crate::transcript::{BlockRef, Call, Pair, Transcript};

const JUDGE: &str = "laya";

/// laya-serve refuses more questions than this in one request (413).
pub const MAX_QUESTIONS: usize = 64;
/// laya-serve refuses a larger body (413).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// Tokens laya keeps for the question (its `head_max_len`).
pub const HEAD_TOKENS: usize = 192;
/// The call line is never longer than this (characters).
const CALL_CHARS: usize = 600;
/// Nor is a later call's line.
const LATER_CHARS: usize = 200;
/// At most this many later calls are considered for the outline.
const LATER_MAX: usize = 48;
/// A call line is never cut below this (characters).
const MIN_CALL_CHARS: usize = 24;

/// o200k tokens a call's state may take for a model of `context_tokens`.
pub fn state_budget(context_tokens: usize) -> usize {
    context_tokens.saturating_sub(HEAD_TOKENS + 1) * 4 / 5
}

fn base(decisions: Vec<Decision>) -> Assessment {
    Assessment::new(JUDGE, decisions)
}

/// Every candidate kept, unjudged, because laya cannot be asked.
pub fn unavailable(pins: &Pins, why: &str) -> Assessment {
    let mut a = base(pins.candidates.iter().map(super::unjudged).collect());
    a.degraded = true;
    a.degradation_reason = Some("laya_unavailable_fail_safe".into());
    a.warnings.push(format!(
        "laya_unavailable: {why}; kept every tool call (fail-safe)"
    ));
    a
}

/// `auto`'s warning for a provider it skipped.
pub fn auto_warning(skipped: &str, why: &str, ran: &str) -> String {
    format!("auto: {skipped} not used: {why}; ran --provider {ran} instead")
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "could not start the HTTP runtime".into(),
            source,
        })
}

fn auth_header(key: Option<&ApiKey>) -> Result<Option<reqwest::header::HeaderValue>, String> {
    let Some(key) = key else { return Ok(None) };
    let mut h = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose()))
        .map_err(|_| {
            "LAYA_API_KEY holds characters that cannot go in an HTTP header".to_string()
        })?;
    h.set_sensitive(true);
    Ok(Some(h))
}

fn http_client(connect: Duration, total: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect)
        .timeout(total)
        .user_agent(concat!("lcc/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("could not build the HTTP client: {}", client::chain(&e)))
}

/// Is the server up? `Ok` when `GET …/health` answers 2xx within the health timeout;
/// otherwise why not, in words that say what to do.
pub fn probe(cfg: &LayaConfig) -> Result<(), String> {
    if let Some(why) = cfg.blocked {
        return Err(why.to_string());
    }
    let hint = "start laya-serve (see docs/LAYA.md) or point --laya-endpoint (or LAYA_ENDPOINT) at a running server";
    let rt = runtime().map_err(|e| e.to_string())?;
    let http = http_client(cfg.health_timeout, cfg.health_timeout)?;
    let mut req = http.get(&cfg.health_url);
    if let Some(h) = auth_header(cfg.api_key.as_ref())? {
        req = req.header(reqwest::header::AUTHORIZATION, h);
    }
    let url = &cfg.health_url;
    let redact = cfg
        .api_key
        .as_ref()
        .map_or_else(Redactor::none, Redactor::new);
    rt.block_on(async move {
        match req.send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!(
                "GET {url} answered HTTP {}; {hint}",
                r.status().as_u16()
            )),
            Err(e) => {
                let e = e.without_url();
                let what = if e.is_timeout() {
                    format!("timed out after {} ms", cfg.health_timeout.as_millis())
                } else if e.is_connect() {
                    format!("connection failed: {}", root_cause(&e))
                } else {
                    redact.clean(&client::chain(&e))
                };
                Err(format!("no answer from GET {url} ({what}); {hint}"))
            }
        }
    })
}

/// The innermost cause of an error (for a refused connection: `Connection refused (os error
/// 111)`).
fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// reqwest to the laya endpoint, no redirects, `Authorization` only when `LAYA_API_KEY` is set.
struct LayaTransport {
    http: reqwest::Client,
    url: reqwest::Url,
    auth: Option<reqwest::header::HeaderValue>,
}

impl LayaTransport {
    fn new(cfg: &LayaConfig) -> Result<LayaTransport, String> {
        let url = reqwest::Url::parse(&cfg.endpoint)
            .map_err(|e| format!("invalid laya endpoint: {e}"))?;
        Ok(LayaTransport {
            http: http_client(cfg.connect_timeout, cfg.timeout)?,
            url,
            auth: auth_header(cfg.api_key.as_ref())?,
        })
    }
}

impl Transport for LayaTransport {
    fn post(&self, body: Bytes) -> impl Future<Output = Result<Reply, SendError>> + Send {
        let mut req = self
            .http
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(h) = &self.auth {
            req = req.header(reqwest::header::AUTHORIZATION, h.clone());
        }
        async move {
            let classify = |e: reqwest::Error| {
                let e = e.without_url();
                if e.is_timeout() {
                    SendError::Timeout
                } else if e.is_connect() {
                    SendError::Connect(client::chain(&e))
                } else {
                    SendError::Other(client::chain(&e))
                }
            };
            let resp = req.send().await.map_err(classify)?;
            let status = resp.status().as_u16();
            let retry_after = client::retry_after(resp.headers());
            let body = resp.bytes().await.map_err(classify)?.to_vec();
            Ok(Reply {
                status,
                retry_after,
                body,
            })
        }
    }
}

// ------------------------------------------------------------------------------------------
// The per-call state

/// What a call works on: the files it names and the command line it runs.
#[derive(Debug, Default, PartialEq, Eq)]
struct Subjects {
    paths: Vec<String>,
    command: Option<String>,
}

const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filepath",
    "notebook_path",
    "file",
    "filename",
    "target_file",
];
const COMMAND_KEYS: &[&str] = &["command", "cmd"];

fn subjects(c: &Call) -> Subjects {
    let mut s = Subjects::default();
    match &c.input {
        Value::Object(m) => {
            for (k, v) in m {
                let key = k.to_ascii_lowercase();
                if let Value::String(text) = v {
                    if PATH_KEYS.contains(&key.as_str()) {
                        s.paths.push(text.trim().to_string());
                    } else if COMMAND_KEYS.contains(&key.as_str()) {
                        s.command = Some(squash(text));
                    }
                    patch_paths(text, &mut s.paths);
                } else if let Value::Array(items) = v {
                    if COMMAND_KEYS.contains(&key.as_str()) {
                        let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                        s.command = Some(squash(&words.join(" ")));
                    }
                }
            }
        }
        Value::String(text) => patch_paths(text, &mut s.paths),
        _ => {}
    }
    if let Some(cmd) = &s.command {
        s.paths.extend(command_paths(cmd));
    }
    for p in &mut s.paths {
        let t = p.trim_start_matches("./").to_string();
        *p = t;
    }
    s.paths.retain(|p| !p.is_empty());
    s.paths.sort();
    s.paths.dedup();
    if s.command.as_deref() == Some("") {
        s.command = None;
    }
    s
}

/// Whitespace runs become one space; ends trimmed.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Files named by `apply_patch`-style headers (`*** Update File: a.py`).
fn patch_paths(text: &str, out: &mut Vec<String>) {
    if !text.contains("*** ") {
        return;
    }
    for line in text.lines() {
        for head in [
            "*** Update File: ",
            "*** Add File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ] {
            if let Some(p) = line.strip_prefix(head) {
                out.push(p.trim().to_string());
            }
        }
    }
}

/// Words of a command line that look like files: not an option, with a letter, and with a
/// `/` or a short extension with a letter (`src/a.py`, `Cargo.toml`, `--file=x/y`; not `v2.0`).
fn command_paths(cmd: &str) -> Vec<String> {
    cmd.split(|c: char| c.is_whitespace() || "'\";|&()<>=`,".contains(c))
        .filter(|w| w.len() >= 3 && !w.starts_with('-'))
        .map(|w| w.trim_end_matches([':', '.']))
        .filter(|w| w.chars().any(|c| c.is_alphabetic()))
        .filter(|w| {
            w.contains('/')
                || w.rsplit_once('.').is_some_and(|(stem, ext)| {
                    !stem.is_empty()
                        && (1..=6).contains(&ext.len())
                        && ext.chars().all(|c| c.is_ascii_alphanumeric())
                        && ext.chars().any(|c| c.is_ascii_alphabetic())
                })
        })
        .map(str::to_string)
        .collect()
}

/// The last component of a path (the index key).
fn base_name(p: &str) -> &str {
    p.rsplit(['/', '\\']).next().unwrap_or(p)
}

/// `a.py`, `src/a.py` and `/repo/src/a.py` name the same file when one ends the other at a
/// `/`.
fn same_path(a: &str, b: &str) -> bool {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    long == short
        || (long.ends_with(short) && long.as_bytes()[long.len() - short.len() - 1] == b'/')
}

fn related(a: &Subjects, b: &Subjects) -> bool {
    (a.command.is_some() && a.command == b.command)
        || a.paths
            .iter()
            .any(|p| b.paths.iter().any(|q| same_path(p, q)))
}

/// A call's one-line form without its id.
fn short_line(c: &Call, result_chars: Option<usize>) -> String {
    let line = line_for_call(c, result_chars);
    match line.strip_prefix(c.id.as_str()) {
        Some(rest) if !c.id.is_empty() => rest.trim_start().to_string(),
        _ => line,
    }
}

/// At most `n` characters; a cut text ends with `…`.
fn head(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n).collect();
    out.push('\u{2026}');
    out
}

/// Every call of the transcript in order, with its outline line and subjects, indexed by
/// file name and command line.
struct Outline {
    lines: Vec<String>,
    subjects: Vec<Subjects>,
    position: HashMap<BlockRef, usize>,
    index: HashMap<String, Vec<usize>>,
}

impl Outline {
    fn new(t: &Transcript, pairs: &[Pair]) -> Outline {
        let result_chars: HashMap<BlockRef, usize> = pairs
            .iter()
            .map(|p| (p.call, t.text_chars(t.result(p.result))))
            .collect();
        let mut calls = Vec::new();
        for (mi, m) in t.messages.iter().enumerate() {
            for (bi, c) in m.calls.iter().enumerate() {
                calls.push((
                    BlockRef {
                        message: mi,
                        block: bi,
                    },
                    c,
                ));
            }
        }
        let built: Vec<(String, Subjects)> = calls
            .par_iter()
            .with_min_len(256)
            .map(|(r, c)| {
                (
                    head(&short_line(c, result_chars.get(r).copied()), LATER_CHARS),
                    subjects(c),
                )
            })
            .collect();
        let mut o = Outline {
            lines: Vec::with_capacity(built.len()),
            subjects: Vec::with_capacity(built.len()),
            position: HashMap::with_capacity(built.len()),
            index: HashMap::new(),
        };
        for (i, ((r, _), (line, s))) in calls.iter().zip(built).enumerate() {
            o.position.insert(*r, i);
            for k in keys(&s) {
                o.index.entry(k).or_default().push(i);
            }
            o.lines.push(line);
            o.subjects.push(s);
        }
        o
    }

    /// Lines of the later calls related to `call`, in order, each with how many calls it
    /// stands for (repeated lines are listed once, `… (N times)`), and how many calls there
    /// are in all.
    fn later(&self, call: BlockRef) -> (Vec<(String, usize)>, usize) {
        let Some(&i) = self.position.get(&call) else {
            return (Vec::new(), 0);
        };
        let me = &self.subjects[i];
        let mut hits: Vec<usize> = keys(me)
            .iter()
            .filter_map(|k| self.index.get(k))
            .flatten()
            .copied()
            .filter(|&j| j > i && related(me, &self.subjects[j]))
            .collect();
        hits.sort_unstable();
        hits.dedup();
        let total = hits.len();
        let mut groups: Vec<(&str, usize)> = Vec::new();
        let mut at: HashMap<&str, usize> = HashMap::new();
        for &j in &hits {
            let line = self.lines[j].as_str();
            match at.get(line) {
                Some(&g) => groups[g].1 += 1,
                None => {
                    at.insert(line, groups.len());
                    groups.push((line, 1));
                }
            }
        }
        groups.truncate(LATER_MAX);
        let lines = groups
            .into_iter()
            .map(|(line, n)| match n {
                1 => (line.to_string(), 1),
                n => (format!("{line} ({n} times)"), n),
            })
            .collect();
        (lines, total)
    }
}

fn keys(s: &Subjects) -> Vec<String> {
    let mut k: Vec<String> = s
        .paths
        .iter()
        .map(|p| format!("p:{}", base_name(p)))
        .collect();
    if let Some(c) = &s.command {
        k.push(format!("c:{c}"));
    }
    k.sort();
    k.dedup();
    k
}

/// One call's state as sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallState {
    pub json: String,
    pub tokens: usize,
    /// Was anything cut to make it fit?
    pub cut: bool,
}

/// The pieces of a call's state.
pub struct Pieces<'a> {
    pub goal: &'a str,
    pub call: &'a str,
    pub result: &'a str,
    /// Lines of related later calls, in order (at most [`LATER_MAX`] of them), each with the
    /// number of calls it stands for…
    pub later: &'a [(String, usize)],
    /// …out of this many calls.
    pub later_total: usize,
}

impl Pieces<'_> {
    /// The state with the goal cut to `goal` characters, the call line to `call`, and the
    /// first `n` later calls.
    fn render(&self, goal: usize, call: usize, n: usize) -> String {
        let n = n.min(self.later.len());
        let later: Vec<String> = self.later[..n]
            .iter()
            .map(|(l, _)| quote(l, false))
            .collect();
        let mut s = format!(
            "{{\"goal\": {}, \"call\": {}, \"result\": {}, \"later_calls\": [{}]",
            quote(&head(self.goal, goal), false),
            quote(&head(self.call, call), false),
            quote(self.result, false),
            later.join(", ")
        );
        let hidden = self.later_total
            - self.later[..n]
                .iter()
                .map(|(_, calls)| calls)
                .sum::<usize>();
        if hidden > 0 {
            s.push_str(&format!(", \"later_calls_not_shown\": {hidden}"));
        }
        s.push('}');
        s
    }
}

/// The largest `x` in `lo..=hi` with `ok(x)`, assuming `ok` holds up to some point and not
/// after; `None` when not even `ok(lo)`.
fn largest(lo: usize, hi: usize, ok: impl Fn(usize) -> bool) -> Option<usize> {
    if lo > hi || !ok(lo) {
        return None;
    }
    let (mut good, mut bad) = (lo, hi + 1);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if ok(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

/// Fit a call's state into `budget` o200k tokens (see the module notes), or `None` when even
/// its shortest form does not fit.
pub fn fit_call_state(p: &Pieces, budget: usize, counter: Counter) -> Option<CallState> {
    let goal_len = p.goal.chars().count();
    let call_len = p.call.chars().count().min(CALL_CHARS);
    let all = p.later.len();
    let count = |g: usize, c: usize, n: usize| counter.count(&p.render(g, c, n));
    let full = p.render(goal_len, call_len, all);
    let tokens = counter.count(&full);
    if tokens <= budget {
        return Some(CallState {
            json: full,
            tokens,
            cut: p.later_total > p.later.iter().map(|(_, n)| n).sum::<usize>()
                || p.call.chars().count() > CALL_CHARS,
        });
    }
    // The call line: whole if it leaves a third of the budget, else cut to leave it.
    let fits_call = |limit: usize| {
        if count(0, call_len, 0) <= limit {
            Some(call_len)
        } else {
            largest(MIN_CALL_CHARS.min(call_len), call_len, |c| {
                count(0, c, 0) <= limit
            })
        }
    };
    let call = fits_call(budget * 2 / 3).or_else(|| fits_call(budget))?;
    // The goal: up to half of what is left.
    let skeleton = count(0, call, 0);
    let half = skeleton + (budget - skeleton) / 2;
    let mut goal = if count(goal_len, call, 0) <= half {
        goal_len
    } else {
        largest(0, goal_len, |g| count(g, call, 0) <= half).unwrap_or(0)
    };
    // Later calls: as many as fit.
    let mut n = largest(0, all, |n| count(goal, call, n) <= budget).unwrap_or(0);
    // The goal again, into what is still free.
    if goal < goal_len {
        goal = largest(goal, goal_len, |g| count(g, call, n) <= budget).unwrap_or(goal);
    }
    // The searches assume counts grow with length; make sure.
    loop {
        let json = p.render(goal, call, n);
        let tokens = counter.count(&json);
        if tokens <= budget {
            return Some(CallState {
                json,
                tokens,
                cut: true,
            });
        }
        if n > 0 {
            n -= 1;
        } else if goal > 0 {
            goal = goal * 9 / 10;
        } else {
            return None;
        }
    }
}

/// The two questions about one call as JSON object members (no braces), worded for a state
/// that shows only that call.
pub fn question_members(id: &str, tool: &str) -> String {
    let call = format!(
        "Judge the probability that the tool call in `call` ({tool}) still matters in this session: knowing that the call was made, with the input it was made with, still serves `goal`, given what `later_calls` do. A call whose purpose is finished and whose input adds nothing should score low."
    );
    let result = format!(
        "Judge the probability that the OUTPUT of the tool call in `call` ({tool}; its size is in `result`) still needs to be available verbatim in this session, given `goal` and what `later_calls` do. Score low only when the work it was run for is finished and re-running the tool would produce the same information again if it were needed."
    );
    super::batch::question_pair(id, &call, &result)
}

/// Questions in each request: one candidate's two.
const QUESTIONS_PER_REQUEST: usize = 2;
const _: () = assert!(QUESTIONS_PER_REQUEST <= MAX_QUESTIONS);

// ------------------------------------------------------------------------------------------
// Asking

/// What became of one request.
enum Sent {
    Done {
        outcome: Result<Vec<u8>, Failure>,
        latency: Duration,
    },
    /// Not sent: an earlier failure showed the server cannot answer.
    NotSent,
}

/// Does this failure say the server itself cannot answer (so later requests would fail too)?
/// A 400/413/422 is about one request's content; everything else is about the server.
fn stops_the_run(f: &Failure) -> bool {
    !(f.kind == FailKind::TooLarge
        || f.cause.starts_with("HTTP 400")
        || f.cause.starts_with("HTTP 422"))
}

/// Send every body (index, body), at most `workers` at a time; stop sending after a failure
/// that [`stops_the_run`]. Returns each index's fate and the stopping cause.
async fn run_all<T: Transport>(
    t: Arc<T>,
    bodies: Vec<(usize, Bytes)>,
    policy: Policy,
    redact: Redactor,
    workers: usize,
    progress: ProgressBar,
    has_key: bool,
) -> (Vec<(usize, Sent)>, Option<String>) {
    let sem = Arc::new(Semaphore::new(workers.max(1)));
    let stop: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let mut set = JoinSet::new();
    for (i, body) in bodies {
        let (t, sem, stop, redact, progress) = (
            Arc::clone(&t),
            Arc::clone(&sem),
            Arc::clone(&stop),
            redact.clone(),
            progress.clone(),
        );
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let stopped = stop.lock().map(|g| g.is_some()).unwrap_or(true);
            if stopped {
                progress.inc(1);
                return (i, Sent::NotSent);
            }
            let started = Instant::now();
            let outcome = client::send(&*t, &body, &policy, &redact)
                .await
                .map_err(|f| match f.kind {
                    FailKind::Auth(code) => Failure {
                        cause: format!(
                            "the laya server refused the request (HTTP {code}); {} LAYA_API_KEY to the key the server was started with",
                            if has_key { "check" } else { "set" }
                        ),
                        ..f
                    },
                    _ => f,
                });
            if let Err(f) = &outcome {
                if stops_the_run(f) {
                    if let Ok(mut g) = stop.lock() {
                        g.get_or_insert_with(|| f.cause.clone());
                    }
                }
            }
            progress.inc(1);
            (
                i,
                Sent::Done {
                    outcome,
                    latency: started.elapsed(),
                },
            )
        });
    }
    let mut out = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(r) => out.push(r),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    out.sort_by_key(|(i, _)| *i);
    let cause = stop.lock().ok().and_then(|g| g.clone());
    (out, cause)
}

/// `usage.truncated` (true, or a count above 0) and `usage.truncated_questions`.
fn truncation(body: &[u8]) -> (bool, Vec<String>) {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let usage = &v["usage"];
    let all = match &usage["truncated"] {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x > 0.0),
        _ => false,
    };
    let listed = usage["truncated_questions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    (all, listed)
}

/// A candidate ready to send.
struct Prepared {
    state: Option<CallState>,
    questions: String,
    question_tokens: usize,
}

/// Judge the candidates with laya. `probed` says the server already answered `/health`
/// (`auto` asked). Never fails on laya's account: every problem is a fail-safe row.
pub fn assess(
    s: &CompactSettings,
    t: &Transcript,
    pairs: &[Pair],
    pins: &Pins,
    probed: bool,
) -> Result<Assessment, Error> {
    if pins.candidates.is_empty() {
        let mut a = base(Vec::new());
        a.degradation_reason = Some("no_candidates".into());
        a.warnings
            .push("no_scorable_tool_calls: every call is pinned or has no result yet".into());
        return Ok(a);
    }
    if !probed {
        if let Err(why) = probe(&s.laya) {
            return Ok(unavailable(pins, &why));
        }
    }
    let transport = match LayaTransport::new(&s.laya) {
        Ok(tr) => tr,
        Err(e) => return Ok(unavailable(pins, &e)),
    };

    // The states and questions, one candidate each.
    let counter = Counter::o200k();
    let budget = state_budget(s.laya.context_tokens);
    let outline = Outline::new(t, pairs);
    let prepared: Vec<Prepared> = pins
        .candidates
        .par_iter()
        .map(|p| {
            let c = t.call(p.call);
            let r = t.result(p.result);
            let text = t.text(r);
            let result_chars = text.chars().count();
            let call_line = short_line(c, Some(result_chars));
            let result_note = note(&text, r.is_error);
            let (later, later_total) = outline.later(p.call);
            let pieces = Pieces {
                goal: &s.question,
                call: &call_line,
                result: &result_note,
                later: &later,
                later_total,
            };
            let questions = question_members(&c.id, &c.tool);
            Prepared {
                state: fit_call_state(&pieces, budget, counter),
                question_tokens: counter.count(&format!("{{{questions}}}")),
                questions,
            }
        })
        .collect();

    let mut a = base(Vec::new());
    a.state_fit_stage = "per-call".into();
    let model = quote(&s.laya.model, false);
    let mut bodies = Vec::new();
    let mut cut = 0;
    for (i, (p, prep)) in pins.candidates.iter().zip(&prepared).enumerate() {
        let id = &t.call(p.call).id;
        let Some(state) = &prep.state else {
            a.warnings.push(format!(
                "laya_state_unfit:{id}: even the shortest state for this call is over the {budget}-token state room of --laya-context-tokens {}; the call was kept (fail-safe)",
                s.laya.context_tokens
            ));
            continue;
        };
        let body = format!(
            "{{\"model\": {model}, \"state\": {}, \"questions\": {{{}}}}}",
            state.json, prep.questions
        );
        if body.len() > MAX_BODY_BYTES {
            a.warnings.push(format!(
                "laya_request_too_large:{id}: the request would be {} bytes, over laya's {MAX_BODY_BYTES}; the call was kept (fail-safe)",
                body.len()
            ));
            continue;
        }
        cut += usize::from(state.cut);
        a.state_tokens = a.state_tokens.max(state.tokens);
        bodies.push((i, Bytes::from(body)));
    }
    if cut > 0 {
        a.warnings.push(format!(
            "laya_state_cut: {cut} call state(s) were shortened (goal, call line or later-call outline) to fit the {budget}-token state room of --laya-context-tokens {}",
            s.laya.context_tokens
        ));
    }

    // Ask.
    let redact = s
        .laya
        .api_key
        .as_ref()
        .map_or_else(Redactor::none, Redactor::new);
    let policy = Policy {
        attempts: s.laya.max_attempts.max(1),
        base: s.laya.retry_base,
        cap: s.laya.retry_cap,
        retry_after_cap: s.laya.retry_after_cap,
    };
    let progress = super::progress_bar(bodies.len(), s.quiet);
    let rt = runtime()?;
    let (results, stopped) = rt.block_on(run_all(
        Arc::new(transport),
        bodies,
        policy,
        redact.clone(),
        s.max_workers,
        progress.clone(),
        s.laya.api_key.is_some(),
    ));
    progress.finish_and_clear();

    // Apply, in candidate order.
    let mut answers: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); pins.candidates.len()];
    let mut latency = Duration::ZERO;
    let mut not_sent = 0;
    let mut truncated = 0;
    for (i, sent) in results {
        let id = t.call(pins.candidates[i].call).id.as_str();
        let (outcome, took) = match sent {
            Sent::NotSent => {
                not_sent += 1;
                continue;
            }
            Sent::Done { outcome, latency } => (outcome, latency),
        };
        a.requests += 1;
        latency += took;
        let body = match outcome {
            Err(f) => {
                a.warnings.push(redact.clean(&format!(
                    "laya_request_failed:{id}: {}; the call was kept (fail-safe)",
                    f.cause
                )));
                continue;
            }
            Ok(body) => body,
        };
        let response = match super::parse_response(&body) {
            Ok(r) => r,
            Err(what) => {
                a.warnings.push(format!(
                    "laya_malformed_response:{id}: {what}; the call was kept (fail-safe)"
                ));
                continue;
            }
        };
        a.calls += 1;
        a.jev_model_resolved = Some(
            redact.clean(
                &response
                    .model
                    .clone()
                    .unwrap_or_else(|| s.laya.model.clone()),
            ),
        );
        let prep = &prepared[i];
        a.input_tokens_sent += response.input_tokens.unwrap_or_else(|| {
            prep.state.as_ref().map_or(0, |st| st.tokens) + prep.question_tokens + ENVELOPE_TOKENS
        });
        let (all_cut, listed) = truncation(&body);
        let mut judge = |key: String| {
            if all_cut || listed.contains(&key) {
                a.warnings.push(format!("laya_truncated_answer:{key}"));
                truncated += 1;
                return None;
            }
            super::check_noul(JUDGE, response.answer(&key), &key, &mut a.warnings)
        };
        let kc = judge(keep_call_key(id));
        let kr = judge(keep_result_key(id));
        answers[i] = (kc, kr);
    }
    a.judge_latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    if truncated > 0 {
        a.warnings.push(format!(
            "laya_truncated: {truncated} answer(s) came from a state the server cut to fit its model (usage.truncated) and count as not judged; set --laya-context-tokens to the model's context (512 for laya's English checkpoint)"
        ));
    }
    if let Some(cause) = stopped.filter(|_| not_sent > 0) {
        let hint = if cause.contains("inference failed") {
            "; is the laya server able to load its weights? check its log and GET /health"
        } else {
            ""
        };
        a.warnings.push(redact.clean(&format!(
            "laya_stopped: {cause}{hint}; the {not_sent} call(s) not yet sent were kept (fail-safe)"
        )));
    }

    super::decide(&mut a, t, pins, &answers, s, JUDGE);
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, tool: &str, input: Value) -> Call {
        Call {
            id: id.into(),
            tool: tool.into(),
            input,
            slot: crate::transcript::Slot {
                container: 0,
                index: 0,
            },
            path: String::new(),
        }
    }

    #[test]
    fn subjects_of_calls() {
        let s = subjects(&call("a", "Read", json!({"file_path": "./src/a.py"})));
        assert_eq!(s.paths, ["src/a.py"]);
        assert_eq!(s.command, None);
        let s = subjects(&call(
            "b",
            "Bash",
            json!({"command": "  sed -n '1,20p'   src/a.py | grep -v x  "}),
        ));
        assert_eq!(
            s.command.as_deref(),
            Some("sed -n '1,20p' src/a.py | grep -v x")
        );
        assert_eq!(s.paths, ["src/a.py"]);
        let s = subjects(&call(
            "c",
            "shell",
            json!({"command": ["bash", "-lc", "cargo test --manifest-path=x/Cargo.toml"]}),
        ));
        assert_eq!(s.paths, ["x/Cargo.toml"]);
        let s = subjects(&call(
            "d",
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: src/b.rs\n@@\n-x\n+y\n*** Add File: c.md\n*** End Patch"}),
        ));
        assert_eq!(s.paths, ["c.md", "src/b.rs"]);
        assert_eq!(
            command_paths("python3 -m pytest -q tests/ 1.5 v2.0 e2e.sh -k x"),
            ["tests/", "e2e.sh"]
        );
    }

    #[test]
    fn paths_match_at_a_slash() {
        assert!(same_path("src/a.py", "src/a.py"));
        assert!(same_path("/repo/src/a.py", "src/a.py"));
        assert!(same_path("a.py", "/repo/src/a.py"));
        assert!(!same_path("src/ba.py", "a.py"));
        assert!(!same_path("src/a.pyc", "a.py"));
    }

    fn pieces<'a>(goal: &'a str, call: &'a str, later: &'a [(String, usize)]) -> Pieces<'a> {
        Pieces {
            goal,
            call,
            result: "ok, 4213 chars",
            later,
            later_total: later.iter().map(|(_, n)| n).sum(),
        }
    }

    fn ones(lines: &[&str]) -> Vec<(String, usize)> {
        lines.iter().map(|l| (l.to_string(), 1)).collect()
    }

    #[test]
    fn a_small_state_is_sent_whole() {
        let c = Counter::o200k();
        let later = ones(&["Edit file_path=a.py -> ok 40ch"]);
        let p = pieces("fix the parser", "Read file_path=a.py -> ok 4213ch", &later);
        let st = fit_call_state(&p, 664, c).unwrap();
        assert!(!st.cut);
        assert_eq!(
            st.json,
            "{\"goal\": \"fix the parser\", \"call\": \"Read file_path=a.py -> ok 4213ch\", \"result\": \"ok, 4213 chars\", \"later_calls\": [\"Edit file_path=a.py -> ok 40ch\"]}"
        );
        assert_eq!(st.tokens, c.count(&st.json));
        serde_json::from_str::<Value>(&st.json).unwrap();
    }

    #[test]
    fn long_states_are_cut_to_the_budget() {
        let c = Counter::o200k();
        let goal = "Make the parser accept trailing commas everywhere. ".repeat(60);
        let call_line = format!("Bash command={} -> ok 9000ch", "x y z ".repeat(300));
        let later_lines: Vec<String> = (0..40)
            .map(|i| format!("Edit file_path=src/a.py, old_string=line {i} of the file -> ok 51ch"))
            .collect();
        let later: Vec<(String, usize)> = later_lines.into_iter().map(|l| (l, 1)).collect();
        for ctx in [256, 512, 1024, 4096] {
            let budget = state_budget(ctx);
            let st = fit_call_state(&pieces(&goal, &call_line, &later), budget, c).unwrap();
            assert!(st.cut, "{ctx}");
            assert!(st.tokens <= budget, "{ctx}: {} > {budget}", st.tokens);
            assert_eq!(st.tokens, c.count(&st.json));
            let v: Value = serde_json::from_str(&st.json).unwrap();
            assert!(v["call"]
                .as_str()
                .unwrap()
                .starts_with("Bash command=x y z"));
            let shown = v["later_calls"].as_array().unwrap().len();
            let hidden = v["later_calls_not_shown"].as_u64().unwrap_or(0) as usize;
            assert_eq!(shown + hidden, 40, "{ctx}");
            // Deterministic.
            assert_eq!(
                fit_call_state(&pieces(&goal, &call_line, &later), budget, c).unwrap(),
                st
            );
        }
        // A roomy budget shows everything, but the call line is still capped.
        let st = fit_call_state(&pieces(&goal, &call_line, &later), 100_000, c).unwrap();
        let v: Value = serde_json::from_str(&st.json).unwrap();
        assert_eq!(v["goal"], goal.as_str());
        assert_eq!(v["later_calls"].as_array().unwrap().len(), 40);
        assert_eq!(v["call"].as_str().unwrap().chars().count(), CALL_CHARS + 1);
        // Nothing fits a budget smaller than the skeleton.
        assert_eq!(fit_call_state(&pieces("", "Read", &[]), 5, c), None);
    }

    #[test]
    fn questions_are_two_nouls_about_the_call_in_the_state() {
        let m = question_members("toolu_1", "Bash");
        let v: Value = serde_json::from_str(&format!("{{{m}}}")).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["keep_call_toolu_1", "keep_result_toolu_1"]);
        for k in &keys {
            assert_eq!(v[k]["type"], "noul");
            assert!(v[k]["instructions"]
                .as_str()
                .unwrap()
                .contains("the tool call in `call` (Bash"));
        }
    }

    #[test]
    fn truncation_fields() {
        assert_eq!(
            truncation(br#"{"usage": {"truncated": true}}"#),
            (true, vec![])
        );
        assert_eq!(
            truncation(br#"{"usage": {"truncated": 2}}"#),
            (true, vec![])
        );
        assert_eq!(
            truncation(br#"{"usage": {"truncated": false, "truncated_questions": ["q"]}}"#),
            (false, vec!["q".to_string()])
        );
        assert_eq!(truncation(br#"{"answers": {}}"#), (false, vec![]));
    }

    #[test]
    fn budgets() {
        assert_eq!(state_budget(1024), 664);
        assert_eq!(state_budget(512), 255);
        assert_eq!(state_budget(256), 50);
    }
}
