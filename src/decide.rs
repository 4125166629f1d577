//! Decisions: what happens to each call/result pair, and why.
//!
//! A provider (the judge or a rules policy) produces one [`Decision`] per candidate; pinned
//! calls get pin decisions. The judge's two probabilities become an action through
//! [`judge_action`] (the seed's rule: keep if `keep_result >= t`, else trim if
//! `keep_call >= t`, else drop). Pure.

use serde::Serialize;

use crate::transcript::BlockRef;

/// What happens to a pair.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Keep,
    /// The result's text becomes this (head + note).
    Trim(String),
    /// Call and result are removed together.
    Drop,
    /// The result's text becomes a pointer note to an identical (or containing) later result.
    Dedupe {
        kept_at: String,
        note: String,
    },
    /// The result's text becomes a note that says how to recover it.
    Replace {
        note: String,
        recover: String,
    },
}

impl Action {
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Keep => "keep",
            Action::Trim(_) => "trim",
            Action::Drop => "drop",
            Action::Dedupe { .. } => "dedupe",
            Action::Replace { .. } => "replace",
        }
    }

    /// The new result text, when the result changes but stays.
    pub fn new_text(&self) -> Option<&str> {
        match self {
            Action::Trim(t) => Some(t),
            Action::Dedupe { note, .. } | Action::Replace { note, .. } => Some(note),
            Action::Keep | Action::Drop => None,
        }
    }
}

/// One decision about a call (and its result, when it has one).
#[derive(Debug, Clone)]
pub struct Decision {
    pub call: BlockRef,
    pub result: Option<BlockRef>,
    pub action: Action,
    pub keep_call: Option<f64>,
    pub keep_result: Option<f64>,
    /// `jev`, `laya`, `rules`, `fail_safe` or `pin`.
    pub source: &'static str,
    pub reason: String,
}

impl Decision {
    pub fn score(&self) -> Option<f64> {
        self.keep_result.or(self.keep_call)
    }
}

/// The report's view of a decision (field order is the report's).
#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    pub id: String,
    pub decision: &'static str,
    pub score: Option<f64>,
    pub keep_call: Option<f64>,
    pub keep_result: Option<f64>,
    pub chars: usize,
    pub chars_after: usize,
    pub source: &'static str,
    pub reason: String,
    pub message_index: usize,
    pub tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_message_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recover: Option<String>,
}

/// Thresholds and the trim size.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    pub threshold: f64,
    pub trim_head_chars: usize,
}

/// The trimmed text for a result, or `None` when trimming is off (`trim_head_chars == 0`)
/// or would not make the text shorter.
pub fn trimmed(text: &str, tool: &str, head: usize) -> Option<String> {
    if head == 0 {
        return None;
    }
    let total = text.chars().count();
    if total <= head {
        return None;
    }
    let cut = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let removed = total - head;
    let out = format!(
        "{}\n[... lcc: {removed} chars of this tool result dropped; re-run {tool} for the rest ...]",
        &text[..cut]
    );
    (out.chars().count() < total).then_some(out)
}

/// The seed's decision rule for a judged pair. Returns the action and its reason. The result's
/// `text` is asked for only when the rule trims it.
pub fn judge_action<S: AsRef<str>>(
    keep_call: Option<f64>,
    keep_result: Option<f64>,
    text: impl FnOnce() -> S,
    tool: &str,
    t: Thresholds,
) -> (Action, &'static str) {
    match (keep_call, keep_result) {
        (None, None) => (Action::Keep, "not_judged_fail_safe"),
        (_, Some(kr)) if kr >= t.threshold => (Action::Keep, "result_still_needed"),
        // Only the call question answered, and it says keep: keep whole (never trim on a
        // missing result answer).
        (Some(kc), None) if kc >= t.threshold => (Action::Keep, "result_still_needed"),
        (Some(kc), _) if kc >= t.threshold => {
            match trimmed(text().as_ref(), tool, t.trim_head_chars) {
                Some(s) => (Action::Trim(s), "call_kept_result_trimmed"),
                None if t.trim_head_chars == 0 => (Action::Keep, "trim_disabled_kept_whole"),
                None => (Action::Keep, "short_result_kept_whole"),
            }
        }
        // A pair is dropped only when both questions were answered low.
        (Some(_), Some(_)) => (Action::Drop, "call_and_result_not_needed"),
        _ => (Action::Keep, "half_judged_kept_fail_safe"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Thresholds = Thresholds {
        threshold: 0.5,
        trim_head_chars: 5,
    };

    #[test]
    fn rule() {
        let text = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz";
        assert_eq!(
            judge_action(None, None, || text, "Bash", T).1,
            "not_judged_fail_safe"
        );
        assert_eq!(
            judge_action(Some(0.1), Some(0.5), || text, "Bash", T).0,
            Action::Keep
        );
        assert_eq!(
            judge_action(Some(0.1), Some(0.4), || text, "Bash", T).0,
            Action::Drop
        );
        let (a, r) = judge_action(Some(0.9), Some(0.1), || text, "Bash", T);
        assert_eq!(r, "call_kept_result_trimmed");
        assert_eq!(
            a.new_text().unwrap(),
            "01234\n[... lcc: 103 chars of this tool result dropped; re-run Bash for the rest ...]"
        );
        assert_eq!(
            judge_action(Some(0.9), Some(0.1), || "short", "Bash", T).1,
            "short_result_kept_whole"
        );
        let off = Thresholds {
            threshold: 0.5,
            trim_head_chars: 0,
        };
        assert_eq!(
            judge_action(Some(0.9), Some(0.1), || text, "Bash", off).1,
            "trim_disabled_kept_whole"
        );
        assert_eq!(
            judge_action(None, Some(0.1), || text, "Bash", T).0,
            Action::Keep
        );
        assert_eq!(
            judge_action(Some(0.9), None, || text, "Bash", T).0,
            Action::Keep
        );
    }
}
