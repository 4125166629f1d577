//! The fourth fit stage, `windowed`: used only when even `calls-one-line` of the whole
//! conversation does not fit `--max-state-tokens` (and `--strict-fit` is off).
//!
//! Candidates, in call order, are grouped into windows; each window is one request, holding
//! as many candidates as `--batch-size` and the budgets allow. Its state is
//! `{"goal": …, "note": …, "conversation": [segment, …]}` where the segments tile the whole
//! conversation in order, each naming its messages (0-based, `"a-b"` inclusive):
//!
//! | segment | messages | shows |
//! |---|---|---|
//! | `pinned` | 0 | the first message, at the window's stage |
//! | `summary` | from 1 up to the outline | calls per tool, targets shared with the window ([`super::outline`]) |
//! | `outline` | just before the window | the `calls-one-line` entries (results-only entries left out) |
//! | `window` | the candidates' calls and results, and what lies between | the entries at the finest stage that fits (`"stage"` says which) |
//! | `outline` | just after the window | as before it |
//! | `summary` | up to the pinned recent messages | as before, with `touches_again` |
//! | `pinned` | the newest `--preserve-recent` | at the window's stage |
//!
//! Empty segments are left out. Growing a window: it starts with the first candidate not yet
//! asked about (its call and its result) at `inputs-200`, which keeps the result notes, or
//! at `calls-one-line` when that is all that fits; a candidate joins while the window has
//! fewer than `--batch-size` calls (when that flag is given) and its state at that stage, with
//! both summaries at their widest bound and an outline reserve of a tenth of the state budget,
//! stays within the state budget and, with the questions, within the request budget: Jev
//! answers many questions about one state in about the time of one, and bills input tokens,
//! so a state is worth as many questions as it can carry. The stage is then the finest at
//! which that still holds; what is left of the budget goes to the outline, two
//! thirds after the window first (what comes after is what tells the judge a result is
//! spent), then before it, then after it again. The state budget is `--max-state-tokens`,
//! but never more than Jev's limit for a state plus one question allows; the request budget
//! is `--max-request-tokens`, never more than Jev's limit for a request (both at the
//! o200k ÷ 1.25 margin of [`super::batch`]).
//!
//! Token counts are sums of pieces counted once per run (entries per stage, segment heads at
//! the widest range, summary members at their widest counts), so every count here is an
//! upper bound of the state's own count; no window's state is ever rendered or counted
//! whole while planning. States are assembled when their request is sent.
//!
//! The pass fails closed (exit 2) only when a single candidate's window, with the pinned
//! messages and the minimal outline, does not fit; the message says what did not fit and
//! which flag to raise.

use std::fmt::Write as _;
use std::ops::Range;

use super::batch::{Batch, Caps, ENVELOPE_TOKENS};
use super::fit::Rendered;
use super::outline::{range_text, widest_range, Index, Side};
use super::state::{Stage, View};
use crate::json::quote;
use crate::tokens::Counter;

/// What every windowed state tells the judge about its shape.
pub const NOTE: &str = "This session is too long to show whole. The conversation below is split into segments, in order, that together cover every message (numbered from 0): \"pinned\" is the first message and the most recent ones; \"window\" holds the calls asked about, shown in detail; \"outline\" shows nearby messages in short form (most calls as one line); \"summary\" stands for messages not shown, with their calls per tool and the files and commands they have in common with the window (\"touches_again\" after it: the same file or command is used again later; \"already_touched\" before it).";

/// The budgets a window must fit.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_state_tokens: usize,
    pub max_request_tokens: usize,
    pub batch_size: usize,
    pub caps: Caps,
}

/// A candidate as the planner sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub id: &'a str,
    /// Message and block of the call.
    pub call: usize,
    pub block: usize,
    /// Message of the result.
    pub result: usize,
    /// Tokens of its two questions.
    pub question_tokens: usize,
}

/// One window: its candidates, what its state shows, and its budget count.
#[derive(Debug, Clone)]
pub struct Window {
    /// Indices into the candidate list.
    pub calls: Range<usize>,
    pub stage: Stage,
    /// Messages shown at `stage`.
    pub shown: Range<usize>,
    /// Messages outlined before and after `shown`.
    pub before: Range<usize>,
    pub after: Range<usize>,
    /// The state's tokens (an upper bound of its exact count).
    pub tokens: usize,
    pub question_tokens: usize,
    summary_before: Option<String>,
    summary_after: Option<String>,
}

/// Every window of a session, with what is needed to assemble their states.
pub struct Plan {
    rendered: Rendered,
    head: String,
    messages: usize,
    /// First message of the pinned recent tail (`messages` when there is none).
    tail: usize,
    /// Entries never shown in an outline (`{"role": "user", "tool_calls": []}`).
    outline_skip: Vec<bool>,
    pub windows: Vec<Window>,
}

/// Prefix sums and segment bounds, for O(1) costs of any range.
struct Costs {
    /// Per stage: `pre[i]` = tokens of the entries of messages `0..i`, a separator each.
    pre: [Vec<usize>; 3],
    /// The same over the outline's entries (`calls-one-line`, empty ones left out).
    outline: Vec<usize>,
    seg_window: [usize; 3],
    seg_outline: usize,
    /// Head, note, tail and the pinned segments, per stage.
    fixed: [usize; 3],
}

fn si(stage: Stage) -> usize {
    match stage {
        Stage::Full => 0,
        Stage::Inputs200 => 1,
        Stage::CallsOneLine => 2,
    }
}

const ONE_LINE: usize = 2;

impl Costs {
    fn window(&self, stage: Stage, r: &Range<usize>) -> usize {
        let p = &self.pre[si(stage)];
        p[r.end] - p[r.start] + self.seg_window[si(stage)]
    }

    fn outline(&self, r: &Range<usize>) -> usize {
        if r.is_empty() {
            0
        } else {
            self.outline[r.end] - self.outline[r.start] + self.seg_outline
        }
    }

    /// The largest `y` in `from..=to` whose outline `from..y` costs at most `room`.
    fn grow_after(&self, from: usize, to: usize, room: usize) -> usize {
        if room < self.seg_outline {
            return from;
        }
        let limit = self.outline[from] + room - self.seg_outline;
        from + self.outline[from..=to].partition_point(|&v| v <= limit) - 1
    }

    /// The smallest `x` in `from..=to` whose outline `x..to` costs at most `room`.
    fn grow_before(&self, from: usize, to: usize, room: usize) -> usize {
        if room < self.seg_outline {
            return to;
        }
        let need = (self.outline[to] + self.seg_outline).saturating_sub(room);
        from + self.outline[from..=to].partition_point(|&v| v < need)
    }
}

fn segment_head(range: &str, view: &str, stage: Option<Stage>) -> String {
    let mut s = format!("{{\"messages\": \"{range}\", \"view\": \"{view}\"");
    if let Some(st) = stage {
        let _ = write!(s, ", \"stage\": \"{}\"", st.name());
    }
    s.push_str(", \"entries\": [");
    s
}

/// The windowed head: `{"goal": …, "note": …, "conversation": [`.
fn head(goal: &str) -> String {
    format!(
        "{{\"goal\": {}, \"note\": {}, \"conversation\": [",
        quote(goal, false),
        quote(NOTE, false)
    )
}

/// Plan the windows of a session that does not fit whole (`rendered` has every stage).
pub fn plan(
    view: &View,
    rendered: Rendered,
    index: &Index,
    candidates: &[Candidate],
    goal: &str,
    budget: Budget,
    counter: Counter,
) -> Result<Plan, String> {
    let n = view.messages();
    let mut tail = n;
    while tail > 1 && view.is_pinned(tail - 1) {
        tail -= 1;
    }
    let outline_skip: Vec<bool> = (0..n).map(|i| view.collapses_empty(i)).collect();
    let head = head(goal);

    // Pieces counted once.
    let wide = widest_range(n);
    let mut pieces = vec![
        head.clone(),
        "]}".to_string(),
        segment_head(&wide, "pinned", None),
        segment_head(&wide, "outline", None),
    ];
    pieces.extend(
        Stage::ALL
            .iter()
            .map(|&s| segment_head(&wide, "window", Some(s))),
    );
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let c = counter.count_many(&refs);
    let sep = rendered.sep;
    let close = c[1] + sep;
    let mut pre: [Vec<usize>; 3] = Default::default();
    for stage in Stage::ALL {
        let p = &mut pre[si(stage)];
        p.reserve(n + 1);
        p.push(0);
        let mut acc = 0;
        for i in 0..n {
            if rendered.entry(stage, i).is_some() {
                acc += rendered.tokens(stage, i) + sep;
            }
            p.push(acc);
        }
    }
    let mut outline = Vec::with_capacity(n + 1);
    outline.push(0);
    let mut acc = 0;
    for (i, &skip) in outline_skip.iter().enumerate() {
        if !skip && rendered.entry(Stage::CallsOneLine, i).is_some() {
            acc += rendered.tokens(Stage::CallsOneLine, i) + sep;
        }
        outline.push(acc);
    }
    let seg_pinned = c[2] + close;
    let mut fixed = [0; 3];
    for stage in Stage::ALL {
        let p = &pre[si(stage)];
        let mut tokens = seg_pinned + p[1] - p[0];
        if tail < n {
            tokens += seg_pinned + p[n] - p[tail];
        }
        fixed[si(stage)] = c[0] + c[1] + tokens;
    }
    let costs = Costs {
        pre,
        outline,
        seg_window: [c[4] + close, c[5] + close, c[6] + close],
        seg_outline: c[3] + close,
        fixed,
    };

    // Budgets.
    let q_max = candidates
        .iter()
        .map(|c| c.question_tokens)
        .max()
        .unwrap_or(0);
    let state_cap = budget.caps.single().saturating_sub(ENVELOPE_TOKENS + q_max);
    let smax = budget.max_state_tokens.min(state_cap);
    let breq = budget.max_request_tokens.min(budget.caps.total());
    let reserve = smax / 10;
    let fits = |state: usize, questions: usize, reserve: usize| {
        state + reserve <= smax && state + reserve + questions + ENVELOPE_TOKENS <= breq
    };
    let summaries = |targets: usize| 2 * (index.any_summary(targets) + sep);
    let at = |stage: Stage, shown: &Range<usize>, targets: usize| {
        costs.fixed[si(stage)] + costs.window(stage, shown) + summaries(targets)
    };

    let mut windows: Vec<Window> = Vec::new();
    let mut s = 0;
    while s < candidates.len() {
        let first = &candidates[s];
        let mut targets: Vec<u32> = Vec::new();
        let mut target_cost = add_targets(index, first, &mut targets);
        let mut questions = first.question_tokens;
        // The first candidate with its result, at inputs-200 (which keeps the result notes)
        // or else calls-one-line; failing that, its call alone.
        let cover = first.call..first.call.max(first.result) + 1;
        let alone = first.call..first.call + 1;
        let start = [&cover, &alone].into_iter().find_map(|r| {
            [Stage::Inputs200, Stage::CallsOneLine]
                .into_iter()
                .find(|&st| fits(at(st, r, target_cost), questions, 0))
                .map(|st| (r.clone(), st))
        });
        let Some((mut shown, grow)) = start else {
            let state = at(Stage::CallsOneLine, &alone, target_cost);
            return Err(fail_closed(
                first,
                &costs,
                &alone,
                state,
                smax,
                breq,
                budget,
                n - tail,
                rendered.smallest(),
            ));
        };
        let mut e = s + 1;
        while e < candidates.len() && e - s < budget.batch_size.max(1) {
            let next = &candidates[e];
            let grown = shown.start..shown.end.max(next.call.max(next.result) + 1);
            let had = targets.len();
            let cost = target_cost + add_targets(index, next, &mut targets);
            let q = questions + next.question_tokens;
            if !fits(at(grow, &grown, cost), q, reserve) {
                targets.truncate(had);
                break;
            }
            shown = grown;
            target_cost = cost;
            questions = q;
            e += 1;
        }

        // The finest stage that fits, then the outline.
        let keep = if fits(at(grow, &shown, target_cost), questions, reserve) {
            reserve
        } else {
            0
        };
        let stage = Stage::ALL
            .into_iter()
            .find(|&st| fits(at(st, &shown, target_cost), questions, keep))
            .unwrap_or(Stage::CallsOneLine);
        let base = at(stage, &shown, target_cost);
        let room = smax
            .saturating_sub(base)
            .min(breq.saturating_sub(ENVELOPE_TOKENS + questions + base));
        let (a, b) = (shown.start, shown.end);
        let first_share = if a > 1 { room * 2 / 3 } else { room };
        let mut y = costs.grow_after(b, tail, first_share);
        let x = costs.grow_before(1, a, room - costs.outline(&(b..y)));
        y = costs.grow_after(b, tail, room - costs.outline(&(x..a)));

        let (summary_before, before_cost) = if x > 1 {
            let (s, c) = index.summary(1..x, Side::Before, &targets);
            (Some(s), c + sep)
        } else {
            (None, 0)
        };
        let (summary_after, after_cost) = if y < tail {
            let (s, c) = index.summary(y..tail, Side::After, &targets);
            (Some(s), c + sep)
        } else {
            (None, 0)
        };
        let tokens = costs.fixed[si(stage)]
            + costs.window(stage, &shown)
            + costs.outline(&(x..a))
            + costs.outline(&(b..y))
            + before_cost
            + after_cost;
        debug_assert!(fits(tokens, questions, 0), "window over budget");
        windows.push(Window {
            calls: s..e,
            stage,
            shown,
            before: x..a,
            after: b..y,
            tokens,
            question_tokens: questions,
            summary_before,
            summary_after,
        });
        s = e;
    }
    Ok(Plan {
        rendered,
        head,
        messages: n,
        tail,
        outline_skip,
        windows,
    })
}

/// Add a candidate's targets to the window's; returns the cost of those not there yet.
fn add_targets(index: &Index, c: &Candidate, targets: &mut Vec<u32>) -> usize {
    let mut added = 0;
    for &k in index.targets_of(c.call, c.block) {
        if !targets.contains(&k) {
            targets.push(k);
            added += index.target_cost(k);
        }
    }
    added
}

#[allow(clippy::too_many_arguments)]
fn fail_closed(
    c: &Candidate,
    costs: &Costs,
    shown: &Range<usize>,
    state: usize,
    smax: usize,
    breq: usize,
    budget: Budget,
    recent: usize,
    whole: usize,
) -> String {
    let pinned = costs.fixed[ONE_LINE];
    let window = costs.window(Stage::CallsOneLine, shown);
    let rest = state.saturating_sub(pinned + window);
    let what = format!(
        "the session does not fit the {}-token state budget whole (smallest rendering is {whole} tokens), and not even one window of it fits: the goal and the note on windows, the first message and the {recent} pinned recent message(s) ({pinned} tokens), call {}'s message {} ({window} tokens) and the summaries of the rest ({rest} tokens) need {state} tokens at calls-one-line",
        budget.max_state_tokens,
        c.id,
        range_text(shown),
    );
    let caps = budget.caps;
    if state > smax {
        if smax < budget.max_state_tokens {
            format!(
                "{what}, over the {smax} tokens Jev's limit leaves for a state (it accepts {} of its tokens, about {} o200k tokens, for a state plus one question){}; lower --preserve-recent or shorten --question",
                caps.single_jev,
                caps.single(),
                caps.hint()
            )
        } else {
            format!(
                "{what}, over the {smax}-token state budget; raise --max-state-tokens (or lower --preserve-recent)"
            )
        }
    } else {
        let request = state + c.question_tokens + ENVELOPE_TOKENS;
        if breq < budget.max_request_tokens {
            format!(
                "{what}; with its questions the request needs {request} tokens, over Jev's limit of {} of its tokens (about {breq} o200k tokens) per request{}; lower --max-state-tokens",
                caps.total_jev,
                caps.hint()
            )
        } else {
            format!(
                "{what}; with its questions the request needs {request} tokens, over the {breq}-token request budget; raise --max-request-tokens"
            )
        }
    }
}

impl Plan {
    /// One request per window, in order; batch `i + 1` goes with state `i`.
    pub fn batches(&self) -> Vec<Batch> {
        self.windows
            .iter()
            .enumerate()
            .map(|(i, w)| Batch {
                number: i + 1,
                calls: w.calls.clone().collect(),
                question_tokens: w.question_tokens,
                state: i,
            })
            .collect()
    }

    /// Assemble window `i`'s state.
    pub fn write_state(&self, i: usize, out: &mut String) {
        let w = &self.windows[i];
        out.reserve(w.tokens * 4);
        out.push_str(&self.head);
        self.segment(out, &(0..1), "pinned", w.stage, false);
        if let Some(s) = &w.summary_before {
            out.push_str(View::SEP);
            out.push_str(s);
        }
        if !w.before.is_empty() {
            out.push_str(View::SEP);
            self.segment(out, &w.before, "outline", Stage::CallsOneLine, false);
        }
        out.push_str(View::SEP);
        self.segment(out, &w.shown, "window", w.stage, true);
        if !w.after.is_empty() {
            out.push_str(View::SEP);
            self.segment(out, &w.after, "outline", Stage::CallsOneLine, false);
        }
        if let Some(s) = &w.summary_after {
            out.push_str(View::SEP);
            out.push_str(s);
        }
        if self.tail < self.messages {
            out.push_str(View::SEP);
            self.segment(out, &(self.tail..self.messages), "pinned", w.stage, false);
        }
        out.push_str(View::TAIL);
    }

    /// Window `i`'s state as a string.
    pub fn state(&self, i: usize) -> String {
        let mut s = String::new();
        self.write_state(i, &mut s);
        s
    }

    fn segment(&self, out: &mut String, r: &Range<usize>, view: &str, stage: Stage, window: bool) {
        let shown_stage = window.then_some(stage);
        out.push_str(&segment_head(&range_text(r), view, shown_stage));
        let outline = view == "outline";
        let mut first = true;
        for i in r.clone() {
            if outline && self.outline_skip[i] {
                continue;
            }
            if let Some(e) = self.rendered.entry(stage, i) {
                if !first {
                    out.push_str(View::SEP);
                }
                first = false;
                out.push_str(e);
            }
        }
        out.push_str(View::TAIL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::batch;
    use crate::pin;
    use crate::transcript::{self, Transcript};
    use serde_json::{json, Value};

    /// A session of `steps` Read/Bash steps; every fifth step reads `src/shared.py`.
    fn session(steps: usize) -> Transcript<'static> {
        let mut msgs = vec![json!({"role": "user", "text": "Fix the parser. Ünïcode — 東京"})];
        for i in 0..steps {
            let (tool, input) = if i % 5 == 0 {
                ("Read", json!({"file_path": "src/shared.py"}))
            } else if i % 2 == 0 {
                ("Read", json!({"file_path": format!("src/m{i}.py")}))
            } else {
                (
                    "Bash",
                    json!({"command": format!("pytest -q tests/test_{}.py", i % 7), "description": "x".repeat(i % 300)}),
                )
            };
            msgs.push(json!({"role": "assistant", "text": format!("Step {i}: {}", "words ".repeat(i % 40)),
                "toolUses": [{"tool_use_id": format!("toolu_{i:04}"), "tool": tool, "input": input}]}));
            msgs.push(json!({"role": "user", "toolResults": [{"tool_use_id": format!("toolu_{i:04}"), "text": "out\n".repeat(i % 50)}]}));
        }
        msgs.push(json!({"role": "assistant", "text": "Done."}));
        let src: &'static str = serde_json::to_string(&msgs).unwrap().leak();
        transcript::parse(src, None).unwrap()
    }

    struct Setup {
        t: Transcript<'static>,
        pins: pin::Pins,
        pairs: Vec<transcript::Pair>,
    }

    fn setup(steps: usize, recent: usize) -> Setup {
        let t = session(steps);
        let pairs = t.pairs().unwrap();
        let pins = pin::select(&t, &pairs, recent);
        Setup { t, pins, pairs }
    }

    fn run(
        su: &Setup,
        max_state: usize,
        max_request: usize,
        batch_size: usize,
    ) -> Result<Plan, String> {
        let c = Counter::o200k();
        let view = View::new(&su.t, &su.pins, &su.pairs);
        let rendered = Rendered::new(&view, "the goal", max_state, c);
        assert!(rendered.fitting().is_none());
        let index = Index::new(&su.t, c);
        let cands: Vec<Candidate> = su
            .pins
            .candidates
            .iter()
            .map(|p| {
                let call = su.t.call(p.call);
                let q = batch::question_members(&call.id, &call.tool);
                Candidate {
                    id: &call.id,
                    call: p.call.message,
                    block: p.call.block,
                    result: p.result.message,
                    question_tokens: c.count(&format!("{{{q}}}")) + 1,
                }
            })
            .collect();
        let budget = Budget {
            max_state_tokens: max_state,
            max_request_tokens: max_request,
            batch_size,
            caps: batch::Caps::new(false),
        };
        plan(&view, rendered, &index, &cands, "the goal", budget, c)
    }

    /// The segments' message ranges, in order.
    fn ranges(state: &Value) -> Vec<(usize, usize)> {
        state["conversation"]
            .as_array()
            .unwrap()
            .iter()
            .map(|seg| {
                let r = seg["messages"].as_str().unwrap();
                match r.split_once('-') {
                    Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                    None => (r.parse().unwrap(), r.parse().unwrap()),
                }
            })
            .collect()
    }

    #[test]
    fn windows_cover_every_candidate_once_and_every_state_tiles_the_session() {
        let su = setup(400, 6);
        let n = su.t.messages.len();
        let c = Counter::o200k();
        for (max_state, batch_size) in [(6_000, 8), (6_000, 64), (12_000, 1000), (3_000, 3)] {
            let plan = run(&su, max_state, 30_000, batch_size).unwrap();
            assert!(plan.windows.len() > 1);
            let mut next = 0;
            for (i, w) in plan.windows.iter().enumerate() {
                assert_eq!(w.calls.start, next, "candidates in order, none skipped");
                next = w.calls.end;
                assert!(w.calls.len() <= batch_size);
                let state = plan.state(i);
                let v: Value = serde_json::from_str(&state).unwrap();
                assert_eq!(v["goal"], "the goal");
                let r = ranges(&v);
                assert_eq!(r[0], (0, 0));
                assert_eq!(r.last().unwrap(), &(n - 6, n - 1));
                for pair in r.windows(2) {
                    assert_eq!(pair[1].0, pair[0].1 + 1, "{r:?}");
                }
                // The budget count bounds the exact count and the budget bounds both.
                let exact = c.count(&state);
                assert!(w.tokens >= exact, "{} < {exact}", w.tokens);
                assert!(w.tokens <= max_state, "{} > {max_state}", w.tokens);
                assert!(w.tokens + w.question_tokens + ENVELOPE_TOKENS <= 30_000);
                // Every candidate of the window is shown in full form in the window segment.
                let window = v["conversation"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|s| s["view"] == "window")
                    .unwrap();
                let text = window.to_string();
                for k in w.calls.clone() {
                    let id = &su.t.call(su.pins.candidates[k].call).id;
                    assert!(
                        text.contains(&format!("\"id\":\"{id}\"")),
                        "{id} not in its window"
                    );
                }
            }
            assert_eq!(next, su.pins.candidates.len());
        }
    }

    #[test]
    fn a_file_read_again_later_is_named_in_the_window_outline() {
        let su = setup(400, 6);
        let plan = run(&su, 4_000, 30_000, 8).unwrap();
        // The window holding step 0 (Read src/shared.py, read again every fifth step).
        let w = &plan.windows[0];
        let v: Value = serde_json::from_str(&plan.state(0)).unwrap();
        let summary = v["conversation"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["view"] == "summary" && s.get("touches_again").is_some())
            .unwrap_or_else(|| panic!("no summary after window {w:?}"));
        let again = &summary["touches_again"]["src/shared.py"]["Read"];
        assert!(again.as_u64().unwrap() > 10, "{summary}");
        assert!(summary["tool_calls"]["Read"].as_u64().unwrap() > 10);
    }

    #[test]
    fn small_batches_get_a_fine_stage_and_a_long_outline() {
        let su = setup(400, 6);
        let plan = run(&su, 6_000, 30_000, 4).unwrap();
        let w = &plan.windows[10];
        assert_eq!(w.stage, Stage::Full);
        assert!(w.before.len() + w.after.len() > 20, "{w:?}");
        // Most of the state budget is used.
        assert!(w.tokens > 5_000, "{}", w.tokens);
    }

    #[test]
    fn fails_closed_naming_what_did_not_fit_and_the_flag() {
        let su = setup(400, 6);
        let e = run(&su, 400, 30_000, 8).err().unwrap();
        assert!(e.contains("not even one window of it fits"), "{e}");
        assert!(e.contains("call toolu_0000's message 1 ("), "{e}");
        assert!(
            e.ends_with("raise --max-state-tokens (or lower --preserve-recent)"),
            "{e}"
        );
        let e = run(&su, 3_000, 800, 8).err().unwrap();
        assert!(e.ends_with("raise --max-request-tokens"), "{e}");
    }
}
