//! Pinning: what is never touched, and which pairs are candidates.
//!
//! Message 0 and the newest `preserve_recent` messages are pinned. A pair is pinned when its
//! call *or* its result sits in a pinned message, so a pinned message is never changed (the
//! Python release could drop a result inside a pinned message together with its unpinned
//! call; we do not). Pure.

use crate::transcript::{Pair, Transcript};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinReason {
    FirstMessage,
    Recent,
}

impl PinReason {
    pub fn code(self) -> &'static str {
        match self {
            PinReason::FirstMessage => "pinned_first_message",
            PinReason::Recent => "pinned_recent",
        }
    }
}

/// Which messages are pinned, and the split of pairs into pinned and candidates.
#[derive(Debug, Clone)]
pub struct Pins {
    pinned: Vec<bool>,
    /// Calls in pinned messages (with or without a result) and pairs pinned through their
    /// result, in message order then block order: (call, reason).
    pub pinned_calls: Vec<(crate::transcript::BlockRef, PinReason)>,
    /// Pairs that may be judged, in call order.
    pub candidates: Vec<Pair>,
    /// Every pair of the transcript (pinned ones included), in call order.
    all_pairs: Vec<Pair>,
}

impl Pins {
    /// Every call/result pair of the transcript the pins were selected on, in call order.
    pub fn all_pairs(&self) -> &[Pair] {
        &self.all_pairs
    }

    pub fn is_pinned(&self, message: usize) -> bool {
        self.pinned.get(message).copied().unwrap_or(false)
    }

    pub fn reason(&self, message: usize) -> Option<PinReason> {
        if !self.is_pinned(message) {
            None
        } else if message == 0 {
            Some(PinReason::FirstMessage)
        } else {
            Some(PinReason::Recent)
        }
    }
}

pub fn select(t: &Transcript, pairs: &[Pair], preserve_recent: usize) -> Pins {
    let n = t.messages.len();
    let mut pinned = vec![false; n];
    if n > 0 {
        pinned[0] = true;
    }
    for p in pinned.iter_mut().skip(n.saturating_sub(preserve_recent)) {
        *p = true;
    }
    let mut pins = Pins {
        pinned,
        pinned_calls: Vec::new(),
        candidates: Vec::new(),
        all_pairs: pairs.to_vec(),
    };
    let mut pair_of_call: crate::fasthash::FastMap<_, _> = crate::fasthash::FastMap::default();
    pair_of_call.reserve(pairs.len());
    for p in pairs {
        pair_of_call.insert(p.call, *p);
    }
    for (mi, m) in t.messages.iter().enumerate() {
        for bi in 0..m.calls.len() {
            let call = crate::transcript::BlockRef {
                message: mi,
                block: bi,
            };
            let pair = pair_of_call.get(&call);
            if let Some(reason) = pins.reason(mi) {
                pins.pinned_calls.push((call, reason));
            } else if let Some(p) = pair {
                if let Some(reason) = pins.reason(p.result.message) {
                    pins.pinned_calls.push((call, reason));
                } else {
                    pins.candidates.push(*p);
                }
            }
        }
    }
    pins
}
