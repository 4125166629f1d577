//! Fitting the state into `--max-state-tokens`, cheapest stage first
//! (`full` → `inputs-200` → `calls-one-line`, `reference/spec-core.md` §3.3).
//!
//! When even `calls-one-line` does not fit, the session is judged in windows
//! ([`super::window`]) unless `--strict-fit` asks for the Python release's failure.
//!
//! Tokens are counted with the real tokenizer (o200k), once per rendered piece: each
//! conversation entry is a piece, an entry that does not change from one stage to the next is
//! not counted again, and new pieces are counted in parallel. The state's count is the sum of its pieces
//! (head, entries, separators, tail). BPE merges never cross the pre-tokenizer's chunk
//! boundaries, and every piece boundary here sits between JSON punctuation, so the sum is
//! never below the whole-text count and at most about two tokens per entry above it (the
//! punctuation around a boundary, `}, {"`, merges in the whole text); a unit test checks
//! both bounds.

use std::sync::Arc;

use rayon::prelude::*;

use super::batch::{pack, Batch, Caps};
use super::client::States;
use super::outline::Index;
use super::state::{Scratch, Stage, View};
use super::window::{self, Budget, Candidate};
use crate::pin::Pins;
use crate::settings::CompactSettings;
use crate::tokens::Counter;
use crate::transcript::{Pair, Transcript};

/// The chosen rendering.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub stage: Stage,
    pub tokens: usize,
    /// The state as sent: `{"goal": …, "conversation": […]}`.
    pub json: String,
}

/// No entry for this message at this stage.
const ABSENT: u32 = u32::MAX;

/// Messages rendered together into one chunk's buffers.
const CHUNK: usize = 512;

/// Where one message's entry at one stage is in its chunk's buffer for that stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Absent,
    /// The same text as the stage before (which shows the message).
    Same,
    At(usize, usize),
}

/// A run of [`CHUNK`] messages rendered at every stage: per stage one buffer holding the
/// entries back to back (an entry equal to the stage before's is not written again).
struct Chunk {
    text: [String; 3],
    slots: Vec<[Slot; 3]>,
}

impl Chunk {
    fn render(view: &View, messages: std::ops::Range<usize>) -> Chunk {
        let mut text: [String; 3] = Default::default();
        let mut slots = Vec::with_capacity(messages.len());
        let mut scratch = Scratch::default();
        for mi in messages {
            let starts = text.each_ref().map(String::len);
            let [a, b, c] = &mut text;
            let shown = view.write_entries(mi, [a, b, c], &mut scratch);
            let mut row = [Slot::Absent; 3];
            // The text of the stage before, when it shows the message.
            let mut before: Option<(usize, usize, usize)> = None;
            for k in 0..3 {
                if !shown[k] {
                    before = None;
                    continue;
                }
                let (start, end) = (starts[k], text[k].len());
                let same = before.is_some_and(|(j, s, e)| text[j][s..e] == text[k][start..end]);
                if same {
                    text[k].truncate(start);
                    row[k] = Slot::Same;
                } else {
                    row[k] = Slot::At(start, end);
                    before = Some((k, start, end));
                }
            }
            slots.push(row);
        }
        Chunk { text, slots }
    }
}

/// A distinct rendering: chunk, stage buffer, and its bytes there.
#[derive(Debug, Clone, Copy)]
struct Piece {
    chunk: u32,
    stage: u8,
    start: usize,
    end: usize,
}

/// Every message rendered at the stages tried so far, each rendering counted once. Owns its
/// text, so the windowed stage can keep it for the whole run.
pub struct Rendered {
    /// The renderings, in buffers of [`CHUNK`] messages (few allocations, and little to
    /// free).
    chunks: Vec<Chunk>,
    /// Distinct renderings (a message whose entry does not change from one stage to the
    /// next shares one).
    pool: Vec<Piece>,
    counts: Vec<u32>,
    /// Per stage tried, per message: index into `pool`, or [`ABSENT`].
    idx: Vec<Vec<u32>>,
    /// Per stage tried: the whole conversation's state tokens.
    totals: Vec<usize>,
    /// Tokens of `", "` between two entries.
    pub sep: usize,
    max_state_tokens: usize,
}

impl Rendered {
    /// Render every message at every stage (one pass, each piece rendered once), then count
    /// stage by stage (`full` → `inputs-200` → `calls-one-line`), stopping at the first whose
    /// whole state fits `max_state_tokens`.
    pub fn new(view: &View, goal: &str, max_state_tokens: usize, counter: Counter) -> Rendered {
        let fixed = counter.count(&View::head(goal)) + counter.count(View::TAIL);
        let sep = counter.count(View::SEP);
        let n = view.messages();
        let chunks: Vec<Chunk> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| Chunk::render(view, c * CHUNK..n.min((c + 1) * CHUNK)))
            .collect();
        let mut pool: Vec<Piece> = Vec::new();
        let mut counts: Vec<u32> = Vec::new();
        let mut idx_all: Vec<Vec<u32>> = Vec::new();
        let mut totals = Vec::new();
        for k in 0..Stage::ALL.len() {
            let first_new = pool.len();
            let mut idx = Vec::with_capacity(n);
            for (ci, chunk) in chunks.iter().enumerate() {
                for (j, row) in chunk.slots.iter().enumerate() {
                    match row[k] {
                        Slot::Absent => idx.push(ABSENT),
                        // Stage k − 1 shows the message, so it has an index.
                        Slot::Same => idx.push(idx_all[k - 1][ci * CHUNK + j]),
                        Slot::At(start, end) => {
                            idx.push(u32::try_from(pool.len()).unwrap_or(ABSENT));
                            pool.push(Piece {
                                chunk: u32::try_from(ci).unwrap_or(u32::MAX),
                                stage: k as u8,
                                start,
                                end,
                            });
                        }
                    }
                }
            }
            let fresh: Vec<&str> = pool[first_new..]
                .iter()
                .map(|p| piece_text(&chunks, p))
                .collect();
            counts.extend(
                counter
                    .count_many(&fresh)
                    .into_iter()
                    .map(|c| u32::try_from(c).unwrap_or(u32::MAX)),
            );
            let present = idx.iter().filter(|&&k| k != ABSENT).count();
            let tokens = fixed
                + idx
                    .iter()
                    .filter(|&&k| k != ABSENT)
                    .map(|&k| counts[k as usize] as usize)
                    .sum::<usize>()
                + sep * present.saturating_sub(1);
            idx_all.push(idx);
            totals.push(tokens);
            if tokens <= max_state_tokens {
                break;
            }
        }
        Rendered {
            chunks,
            pool,
            counts,
            idx: idx_all,
            totals,
            sep,
            max_state_tokens,
        }
    }

    /// The stage at which the whole conversation fits, if any.
    pub fn fitting(&self) -> Option<Stage> {
        let last = self.totals.len() - 1;
        (self.totals[last] <= self.max_state_tokens).then_some(Stage::ALL[last])
    }

    /// The whole conversation's tokens at the last stage tried (the smallest rendering when
    /// nothing fits).
    pub fn smallest(&self) -> usize {
        self.totals.last().copied().unwrap_or(0)
    }

    /// The state holding every message at `stage` (a stage already tried).
    pub fn whole(&self, goal: &str, stage: Stage) -> Fitted {
        let k = stage_index(stage);
        let mut json = View::head(goal);
        let mut first = true;
        for &e in &self.idx[k] {
            if e == ABSENT {
                continue;
            }
            if !first {
                json.push_str(View::SEP);
            }
            first = false;
            json.push_str(piece_text(&self.chunks, &self.pool[e as usize]));
        }
        json.push_str(View::TAIL);
        Fitted {
            stage,
            tokens: self.totals[k],
            json,
        }
    }

    /// Message `mi`'s entry at `stage` (every stage has been tried when nothing fits).
    pub fn entry(&self, stage: Stage, mi: usize) -> Option<&str> {
        let k = self.idx[stage_index(stage)][mi];
        (k != ABSENT).then(|| piece_text(&self.chunks, &self.pool[k as usize]))
    }

    /// Tokens of message `mi`'s entry at `stage`; 0 when it shows nothing.
    pub fn tokens(&self, stage: Stage, mi: usize) -> usize {
        let k = self.idx[stage_index(stage)][mi];
        if k == ABSENT {
            0
        } else {
            self.counts[k as usize] as usize
        }
    }
}

fn piece_text<'c>(chunks: &'c [Chunk], p: &Piece) -> &'c str {
    &chunks[p.chunk as usize].text[usize::from(p.stage)][p.start..p.end]
}

fn stage_index(stage: Stage) -> usize {
    match stage {
        Stage::Full => 0,
        Stage::Inputs200 => 1,
        Stage::CallsOneLine => 2,
    }
}

/// Why the whole conversation cannot be one state (the Python release's message).
pub fn too_big(max_state_tokens: usize, smallest: usize) -> String {
    format!(
        "conversation does not fit the {max_state_tokens}-token state budget (smallest rendering is {smallest} tokens); raise --max-state-tokens or compact fewer messages"
    )
}

/// Render the state at the first stage that fits, or say why none does.
pub fn fit(
    view: &View,
    goal: &str,
    max_state_tokens: usize,
    counter: Counter,
) -> Result<Fitted, String> {
    let r = Rendered::new(view, goal, max_state_tokens, counter);
    match r.fitting() {
        Some(stage) => Ok(r.whole(goal, stage)),
        None => Err(too_big(max_state_tokens, r.smallest())),
    }
}

/// What the client needs to ask: the states, the batches (each naming its state), and how
/// they were fitted.
pub struct Prepared {
    pub states: States,
    pub batches: Vec<Batch>,
    /// Per state: its budget count.
    pub state_tokens: Vec<usize>,
    /// `full`, `inputs-200`, `calls-one-line` or `windowed`.
    pub stage: &'static str,
    /// Set when the session was judged in windows.
    pub warning: Option<String>,
}

/// Fit the state whole when it fits; otherwise judge in windows (unless `--strict-fit`).
/// `ids` and `costs` are the candidates' call ids and question costs, in candidate order.
pub fn prepare(
    s: &CompactSettings,
    t: &Transcript,
    pairs: &[Pair],
    pins: &Pins,
    ids: &[&str],
    costs: &[usize],
    counter: Counter,
) -> Result<Prepared, String> {
    let view = View::new(t, pins, pairs);
    let max = s.fit.max_state_tokens;
    let rendered = Rendered::new(&view, &s.question, max, counter);
    let caps = Caps::new(s.jev.long_context);
    if let Some(stage) = rendered.fitting() {
        let fitted = rendered.whole(&s.question, stage);
        let batches = pack(
            ids,
            costs,
            fitted.tokens,
            s.fit.batch_size,
            s.fit.max_request_tokens,
            caps,
        )?;
        return Ok(Prepared {
            states: States::One(fitted.json),
            batches,
            state_tokens: vec![fitted.tokens],
            stage: stage.name(),
            warning: None,
        });
    }
    let smallest = rendered.smallest();
    if s.fit.strict_fit {
        return Err(too_big(max, smallest));
    }
    let index = Index::new(t, counter);
    let candidates: Vec<Candidate> = pins
        .candidates
        .iter()
        .zip(ids.iter().zip(costs))
        .map(|(p, (&id, &q))| Candidate {
            id,
            call: p.call.message,
            block: p.call.block,
            result: p.result.message,
            question_tokens: q,
        })
        .collect();
    let budget = Budget {
        max_state_tokens: max,
        max_request_tokens: s.fit.max_request_tokens,
        batch_size: if s.fit.batch_size_given {
            s.fit.batch_size
        } else {
            usize::MAX
        },
        caps,
    };
    let plan = window::plan(
        &view,
        rendered,
        &index,
        &candidates,
        &s.question,
        budget,
        counter,
    )?;
    let per_stage: Vec<String> = Stage::ALL
        .iter()
        .map(|&st| {
            let k = plan.windows.iter().filter(|w| w.stage == st).count();
            format!("{k} at {}", st.name())
        })
        .collect();
    let warning = format!(
        "judged_in_windows: the whole conversation needs {smallest} tokens even at calls-one-line, over --max-state-tokens {max}; the judge saw the session in {} windows ({}), each request showing the goal, the first and the pinned recent messages, one stretch of the conversation in detail and an outline of the rest",
        plan.windows.len(),
        per_stage.join(", ")
    );
    Ok(Prepared {
        batches: plan.batches(),
        state_tokens: plan.windows.iter().map(|w| w.tokens).collect(),
        states: States::Windows(Arc::new(plan)),
        stage: "windowed",
        warning: Some(warning),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pin;
    use crate::transcript;

    fn sample(n: usize) -> String {
        let mut msgs =
            vec![serde_json::json!({"role": "user", "text": "Fix the parser. Ünïcode — 東京 😀"})];
        for i in 0..n {
            msgs.push(serde_json::json!({"role": "assistant", "text": format!("Step {i}: reading things, then {}", "more words ".repeat(i % 90)),
                "toolUses": [{"tool_use_id": format!("toolu_{i}"), "tool": "Bash", "input": {"command": format!("grep -rn 'x{i}' src/ | head -{i}"), "blob": "y".repeat(i * 7)}}]}));
            msgs.push(serde_json::json!({"role": "user", "toolResults": [{"tool_use_id": format!("toolu_{i}"), "text": "out\n".repeat(i), "is_error": i % 5 == 0}]}));
        }
        msgs.push(serde_json::json!({"role": "assistant", "toolUses": [{"tool_use_id": "pending", "tool": "Read", "input": {"path": "a.py"}}]}));
        serde_json::to_string(&msgs).unwrap()
    }

    #[test]
    fn piece_sum_is_close_to_the_whole_count_and_not_below_it() {
        let src = sample(80);
        let t = transcript::parse(&src, None).unwrap();
        let pairs = t.pairs().unwrap();
        let pins = pin::select(&t, &pairs, 6);
        let view = View::new(&t, &pins, &pairs);
        let c = Counter::o200k();
        let full = fit(&view, "the goal", 1_000_000, c).unwrap();
        assert_eq!(full.stage, Stage::Full);
        let exact = c.count(&full.json);
        assert!(full.tokens >= exact, "{} < {exact}", full.tokens);
        assert!(
            full.tokens <= exact + 2 * view.messages() + 2,
            "{} vs {exact}",
            full.tokens
        );
        serde_json::from_str::<serde_json::Value>(&full.json).unwrap();
        let next = fit(&view, "the goal", full.tokens - 1, c).unwrap();
        assert_eq!(next.stage, Stage::Inputs200);
        let exact = c.count(&next.json);
        assert!(next.tokens >= exact && next.tokens <= exact + 2 * view.messages() + 2);
        let last = fit(&view, "the goal", next.tokens - 1, c).unwrap();
        assert_eq!(last.stage, Stage::CallsOneLine);
        let v: serde_json::Value = serde_json::from_str(&last.json).unwrap();
        let conv = v["conversation"].as_array().unwrap();
        // The results-only messages collapse to an empty call list; the pending call is a line.
        assert!(conv
            .iter()
            .any(|e| e == &serde_json::json!({"role": "user", "tool_calls": []})));
        let e = fit(&view, "the goal", last.tokens - 1, c).unwrap_err();
        assert_eq!(e, format!("conversation does not fit the {}-token state budget (smallest rendering is {} tokens); raise --max-state-tokens or compact fewer messages", last.tokens - 1, last.tokens));
    }
}
