//! The report: `transcript-compaction-1.0`, `"mode": "tool-calls"`.
//!
//! # Format
//! One JSON object, keys in the fixed order of [`Report`]'s fields, written with 2-space
//! indentation and a trailing newline. Every wall-clock figure lives in the one `timing`
//! object at the end, so two runs on the same input and flags (and the same judge answers)
//! give byte-identical reports once `timing` is removed.
//!
//! The keys are those of the Python release's report (`reference/spec-core.md` §8) plus:
//! `input_format` (the transcript format read), `tokenizer` (the encoding counted with),
//! `state_windows` (how many windows the judge saw; 1 when it saw the whole session),
//! `input_tokens_sent` (judge input tokens), per-decision `result_message_index`, `tokens`,
//! `tokens_after`, `kept_at`, `note` and `recover` (present only when they apply), and
//! `timing`. New keys are only ever added, never renamed; consumers should ignore keys they do
//! not know.
//!
//! Token counts (`tokens_before`/`tokens_after`) are the sum of exact per-piece counts: each
//! message text, each call as `"{id} {tool} {input}"`, each result text.

use serde::Serialize;

use crate::decide::{Action, Decision, DecisionRecord};
use crate::json;
use crate::tokens::Counter;
use crate::transcript::{TextKey, Transcript};

pub const SCHEMA_VERSION: &str = "transcript-compaction-1.0";

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: &'static str,
    pub mode: &'static str,
    pub objective: String,
    pub input_format: &'static str,
    pub provider_requested: String,
    pub provider_used: String,
    pub rules_mode: Option<&'static str>,
    pub lossless_violations: Vec<String>,
    pub recoverability_check: Option<&'static str>,
    /// `--rules-mode stashed`: the stash directory the notes' ids are recalled from.
    pub stash_dir: Option<String>,
    pub degraded: bool,
    pub degradation_reason: Option<String>,
    pub semantic_guarantee: &'static str,
    pub jev_model_requested: String,
    pub jev_model_resolved: Option<String>,
    pub threshold: f64,
    pub trim_threshold: Option<f64>,
    pub trim_head_chars: usize,
    pub preserve_recent: usize,
    pub blocks_total: usize,
    pub blocks_scored: usize,
    pub blocks_protected: usize,
    pub calls: usize,
    pub chars_before: usize,
    pub chars_after: usize,
    pub reduction_ratio: f64,
    pub worth_it: bool,
    pub min_reduction: f64,
    pub tool_chars_before: usize,
    pub tool_chars_after: usize,
    pub tool_reduction_ratio: f64,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub token_count_method: &'static str,
    pub tokenizer: &'static str,
    pub state_tokens: usize,
    pub state_fit_stage: String,
    pub state_windows: usize,
    pub requests: usize,
    pub input_tokens_sent: usize,
    pub messages_before: usize,
    pub messages_after: usize,
    pub tool_calls_total: usize,
    pub tool_calls_kept: usize,
    pub tool_calls_trimmed: usize,
    pub tool_calls_dropped: usize,
    pub tool_calls_deduped: usize,
    pub tool_calls_replaced: usize,
    /// Replacements whose bytes are in the stash (counted in `tool_calls_replaced` too).
    pub tool_calls_stashed: usize,
    pub warnings: Vec<String>,
    pub decisions: Vec<DecisionRecord>,
    pub timing: Timing,
}

/// Every wall-clock figure of a run, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timing {
    pub total_ms: u64,
    pub read_ms: u64,
    pub parse_ms: u64,
    pub decide_ms: u64,
    pub rebuild_ms: u64,
    pub count_ms: u64,
    pub write_ms: u64,
    /// Sum of per-request judge latencies (retries and back-off included).
    pub judge_latency_ms: u64,
}

/// Character and token accounting over the "touchable text" of a transcript.
#[derive(Debug, Clone, Default)]
pub struct Accounting {
    pub chars_before: usize,
    pub chars_after: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// Per decision: (chars, chars_after, tokens, tokens_after).
    pub per_decision: Vec<(usize, usize, usize, usize)>,
}

fn clen(s: &str) -> usize {
    s.chars().count()
}

/// The "touchable text" of a transcript, cut into pieces: per message its text, per call
/// `"{id} {tool} {input}"`, per result its text.
pub struct Pieces<'t> {
    t: &'t Transcript<'t>,
}

/// A call's piece: `"{id} {tool} {input}"`.
fn call_line(c: &crate::transcript::Call) -> String {
    format!("{} {} {}", c.id, c.tool, json::py_dumps(&c.input, true))
}

impl<'t> Pieces<'t> {
    pub fn new(t: &'t Transcript<'t>) -> Pieces<'t> {
        Pieces { t }
    }

    /// Every piece in order: message text, its call lines, its result texts.
    #[cfg(test)]
    pub fn all(&self) -> Vec<std::borrow::Cow<'_, str>> {
        use std::borrow::Cow;
        let mut out = Vec::new();
        for m in &self.t.messages {
            out.push(Cow::Borrowed(m.text.as_str()));
            out.extend(m.calls.iter().map(|c| Cow::Owned(call_line(c))));
            out.extend(m.results.iter().map(|r| self.t.text(r)));
        }
        out
    }

    /// Token and character counts of every piece, in parallel. Message texts and results
    /// often repeat: each distinct one is counted once. A call line holds its call's id,
    /// which no other call has: each is written, counted and dropped in turn, never all
    /// held at once.
    pub fn count(&self, counter: Counter) -> PieceCounts {
        use rayon::prelude::*;
        let t = self.t;
        let keys: Vec<TextKey<'_>> = t
            .messages
            .iter()
            .flat_map(|m| {
                std::iter::once(TextKey::Plain(&m.text))
                    .chain(m.results.iter().map(|r| t.text_key(r)))
            })
            .collect();
        let texts = counter.count_texts(&keys);
        drop(keys);
        let calls: Vec<&crate::transcript::Call> =
            t.messages.iter().flat_map(|m| &m.calls).collect();
        let lines: Vec<(usize, usize)> = calls
            .par_iter()
            .with_min_len(64)
            .map(|c| {
                let line = call_line(c);
                (counter.count(&line), line.chars().count())
            })
            .collect();
        // In piece order: per message its text, its calls, its results.
        let n = texts.len() + lines.len();
        let mut out = PieceCounts {
            tokens: Vec::with_capacity(n),
            chars: Vec::with_capacity(n),
        };
        let (mut texts, mut lines) = (texts.into_iter(), lines.into_iter());
        for m in &t.messages {
            let message = texts.next();
            let results = texts.by_ref().take(m.results.len());
            let calls = lines.by_ref().take(m.calls.len());
            for (tokens, chars) in message.into_iter().chain(calls).chain(results) {
                out.tokens.push(tokens);
                out.chars.push(chars);
            }
        }
        out
    }
}

/// The counts of [`Pieces::all`], in the same order.
#[derive(Debug, Clone, Default)]
pub struct PieceCounts {
    pub tokens: Vec<usize>,
    pub chars: Vec<usize>,
}

/// Count characters and tokens before and after. `piece_counts` are the token counts of
/// [`Pieces::all`]; the "after" figures are derived from the changed pieces only, never by
/// re-encoding the output.
pub fn account(
    t: &Transcript,
    counts: &PieceCounts,
    decisions: &[Decision],
    removed_messages: &[usize],
    counter: Counter,
) -> Accounting {
    let piece_counts = &counts.tokens;
    let chars_of = &counts.chars;
    let new_texts: Vec<&str> = decisions
        .iter()
        .filter_map(|d| d.action.new_text())
        .collect();
    let new_counts = counter.count_many(&new_texts);

    // Position of each piece: message text, calls, results.
    let mut text_pos = Vec::with_capacity(t.messages.len());
    let mut call_pos: Vec<usize> = Vec::with_capacity(t.messages.len());
    let mut result_pos: Vec<usize> = Vec::with_capacity(t.messages.len());
    let mut k = 0;
    for m in &t.messages {
        text_pos.push(k);
        call_pos.push(k + 1);
        result_pos.push(k + 1 + m.calls.len());
        k += 1 + m.calls.len() + m.results.len();
    }

    let chars_before = chars_of.iter().sum::<usize>() + chars_of.len().saturating_sub(1);
    let tokens_before: usize = piece_counts.iter().sum();

    let mut chars_after = chars_before;
    let mut tokens_after = tokens_before;
    let mut removed_parts = 0usize;
    let mut per_decision = Vec::with_capacity(decisions.len());
    let mut new_iter = new_counts.iter();
    for d in decisions {
        let c = t.call(d.call);
        let cpos = call_pos[d.call.message] + d.call.block;
        let input_chars = clen(&json::py_dumps(&c.input, false));
        let (rchars, rtokens, rpos) = d.result.map_or((0, 0, None), |r| {
            let p = result_pos[r.message] + r.block;
            (chars_of[p], piece_counts[p], Some(p))
        });
        let chars = input_chars + rchars;
        let tokens = piece_counts[cpos] + rtokens;
        let (ca, ta) = match &d.action {
            Action::Keep => (chars, tokens),
            Action::Drop => {
                chars_after -= chars_of[cpos];
                tokens_after -= piece_counts[cpos];
                removed_parts += 1;
                if let Some(p) = rpos {
                    chars_after -= chars_of[p];
                    tokens_after -= piece_counts[p];
                    removed_parts += 1;
                }
                (0, 0)
            }
            a => {
                let new_text = a.new_text().unwrap_or_default();
                let nt = new_iter.next().copied().unwrap_or(0);
                let nc = clen(new_text);
                chars_after = chars_after - rchars + nc;
                tokens_after = tokens_after - rtokens + nt;
                (input_chars + nc, piece_counts[cpos] + nt)
            }
        };
        per_decision.push((chars, ca, tokens, ta));
    }
    for &mi in removed_messages {
        chars_after -= chars_of[text_pos[mi]];
        tokens_after -= piece_counts[text_pos[mi]];
        removed_parts += 1;
    }
    // Each removed piece also takes one "\n" separator with it.
    chars_after = chars_after.saturating_sub(removed_parts);
    Accounting {
        chars_before,
        chars_after,
        tokens_before,
        tokens_after,
        per_decision,
    }
}

/// `max(0, 1 - after/before)`, 0 when there was nothing.
/// How much smaller `after` is than `before`, or, when the notes outweigh what they replaced
/// (short outputs with long ids, say), how much larger: never a clamped "0.0% smaller".
pub fn change(before: usize, after: usize) -> String {
    if after <= before {
        format!("{:.1}% smaller", 100.0 * ratio(before, after))
    } else if before == 0 {
        "larger (from nothing)".to_string()
    } else {
        #[allow(clippy::cast_precision_loss)]
        let grew = after as f64 / before as f64 - 1.0;
        format!("{:.1}% larger", 100.0 * grew)
    }
}

pub fn ratio(before: usize, after: usize) -> f64 {
    if before == 0 {
        0.0
    } else {
        #[allow(clippy::cast_precision_loss)]
        let r = 1.0 - after as f64 / before as f64;
        r.max(0.0)
    }
}

/// Serialise a report: 2-space indent, trailing newline.
pub fn to_json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_default();
    s.push('\n');
    s
}
