//! The transcript as the rules policies see it: every call in transcript order (message
//! order, then block order; pinned messages included) with the result paired to it by id.

use crate::fasthash::FastMap;
use crate::pin::Pins;
use crate::transcript::{BlockRef, Call, Pair, ToolResult, Transcript};

/// One call and its result (when the transcript holds one).
#[derive(Debug, Clone, Copy)]
pub struct CallView<'a> {
    pub at: BlockRef,
    pub call: &'a Call,
    pub result: Option<&'a ToolResult>,
    pub result_at: Option<BlockRef>,
    /// The transcript's source, which result texts are read from.
    pub src: &'a str,
}

impl<'a> CallView<'a> {
    /// The result carries `is_error: true`.
    pub fn flagged(&self) -> bool {
        self.result.is_some_and(|r| r.is_error)
    }

    pub fn tool(&self) -> &str {
        &self.call.tool
    }

    pub fn input(&self) -> &'a serde_json::Value {
        &self.call.input
    }

    /// The result's text (empty without a result).
    pub fn text(&self) -> std::borrow::Cow<'a, str> {
        self.result
            .map_or(std::borrow::Cow::Borrowed(""), |r| r.text.get(self.src))
    }
}

/// What every policy needs: the calls, where each candidate sits among them, the goal and
/// which messages are pinned.
pub struct Context<'a> {
    pub t: &'a Transcript<'a>,
    pub calls: Vec<CallView<'a>>,
    /// Position in `calls` of each candidate, in candidate order.
    pub candidates: Vec<usize>,
    pub goal: &'a str,
    pub pins: &'a Pins,
}

impl<'a> Context<'a> {
    pub fn new(t: &'a Transcript<'a>, pins: &'a Pins, goal: &'a str) -> Context<'a> {
        let mut calls = Vec::with_capacity(pins.pair_count());
        let mut pos: FastMap<BlockRef, usize> = FastMap::default();
        pos.reserve(pins.pair_count());
        for (mi, m) in t.messages.iter().enumerate() {
            for (bi, call) in m.calls.iter().enumerate() {
                let at = BlockRef {
                    message: mi,
                    block: bi,
                };
                let result_at = pins.result_of(at);
                pos.insert(at, calls.len());
                calls.push(CallView {
                    at,
                    call,
                    result: result_at.map(|r| t.result(r)),
                    result_at,
                    src: t.src,
                });
            }
        }
        let candidates = pins.candidates.iter().map(|p| pos[&p.call]).collect();
        Context {
            t,
            calls,
            candidates,
            goal,
            pins,
        }
    }

    /// The candidate pairs, in candidate order.
    pub fn pairs(&self) -> &[Pair] {
        &self.pins.candidates
    }

    /// Does any paired result carry `is_error`? Then the flag alone marks errors.
    pub fn flags_present(&self) -> bool {
        self.calls.iter().any(CallView::flagged)
    }

    /// Index of the last message.
    pub fn last_index(&self) -> usize {
        self.t.messages.len().saturating_sub(1)
    }

    /// Pinned messages other than the first, in order.
    pub fn recent_messages(&self) -> impl Iterator<Item = &'a crate::transcript::Message> + '_ {
        self.t
            .messages
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 0 && self.pins.is_pinned(*i))
            .map(|(_, m)| m)
    }

    /// The latest error among all calls (`is_error` when the transcript carries the flag,
    /// else an error-looking output of a command) and the call right before it.
    pub fn latest_error(&self) -> Option<(usize, Option<usize>)> {
        let flags = self.flags_present();
        (0..self.calls.len())
            .rev()
            .find(|&i| is_error(&self.calls[i], flags))
            .map(|i| (i, i.checked_sub(1)))
    }
}

/// Is this call's result an error? With flags in the transcript, only the flag counts;
/// without, an output of a command (`input.command`/`cmd`) that reads like an error (a Read or
/// Grep of source mentioning `Error` is not a failure).
pub fn is_error(c: &CallView<'_>, flags_present: bool) -> bool {
    let Some(r) = c.result else {
        return false;
    };
    if flags_present {
        return r.is_error;
    }
    !super::text::command_of(c.input()).is_empty()
        && super::text::looks_like_error(&r.text.get(c.src))
}
