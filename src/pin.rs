//! Pinning: what is never touched, and which pairs are candidates.
//!
//! Message 0 and the newest `preserve_recent` messages are pinned. A pair is pinned when its
//! call *or* its result sits in a pinned message, so a pinned message is never changed (the
//! Python release could drop a result inside a pinned message together with its unpinned
//! call; we do not). Pure.

use crate::fasthash::FastMap;
use crate::transcript::{BlockRef, Pair, Transcript};

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
    pub pinned_calls: Vec<(BlockRef, PinReason)>,
    /// Pairs that may be judged, in call order.
    pub candidates: Vec<Pair>,
    /// Every pair of the transcript (pinned ones included): call -> result.
    result_of: FastMap<BlockRef, BlockRef>,
}

impl Pins {
    /// The result paired with `call`, if any (pinned pairs included).
    pub fn result_of(&self, call: BlockRef) -> Option<BlockRef> {
        self.result_of.get(&call).copied()
    }

    /// How many calls have a result.
    pub fn pair_count(&self) -> usize {
        self.result_of.len()
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
    let mut result_of = FastMap::default();
    result_of.reserve(pairs.len());
    for p in pairs {
        result_of.insert(p.call, p.result);
    }
    let mut pins = Pins {
        pinned,
        pinned_calls: Vec::new(),
        candidates: Vec::new(),
        result_of,
    };
    for (mi, m) in t.messages.iter().enumerate() {
        for bi in 0..m.calls.len() {
            let call = BlockRef {
                message: mi,
                block: bi,
            };
            if let Some(reason) = pins.reason(mi) {
                pins.pinned_calls.push((call, reason));
            } else if let Some(result) = pins.result_of(call) {
                if let Some(reason) = pins.reason(result.message) {
                    pins.pinned_calls.push((call, reason));
                } else {
                    pins.candidates.push(Pair { call, result });
                }
            }
        }
    }
    pins
}
