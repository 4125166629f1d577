//! The outline of what a window does not show in detail: per omitted span of messages, one
//! summary with its message range, the number of calls per tool, and the files and commands
//! the span has in common with the window's candidates.
//!
//! A summary segment reads
//! `{"messages": "1-1100", "view": "summary", "tool_calls": {"Read": 300, "Bash": 200},
//! "touches_again": {"src/a.py": {"Read": 2, "Edit": 1}}}`: after the window the targets member
//! is `touches_again` (a later call reads, edits or runs the same thing again: what tells the
//! judge a result is spent), before it `already_touched`. It is left out when empty.
//!
//! A call's *targets* are the string values of its input's path keys (`file_path`, `path`,
//! `notebook_path`, `filename`) and command keys (`command`, `cmd`; an array of strings is
//! joined with spaces), whitespace-collapsed and cut at 200 characters.
//!
//! Token costs are upper bounds made of pieces counted once per run: a tool's member with the
//! widest count this session can have, a target's member with every tool that touches it
//! (see [`Index::summary`]). So a window's cost never needs a count of its own.

use std::ops::Range;

use serde_json::Value;

use crate::fasthash::FastMap;
use crate::json::quote;
use crate::tokens::Counter;
use crate::transcript::{Call, Transcript};

const PATH_KEYS: [&str; 4] = ["file_path", "path", "notebook_path", "filename"];
const COMMAND_KEYS: [&str; 2] = ["command", "cmd"];
/// Longest target shown, in characters (longer ones are cut and end with `…`).
const TARGET_CHARS: usize = 200;

/// Which side of the window a span is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

impl Side {
    fn member(self) -> &'static str {
        match self {
            Side::Before => "already_touched",
            Side::After => "touches_again",
        }
    }
}

/// Calls per tool and per target across the whole session, for span queries.
pub struct Index {
    tools: Vec<String>,
    /// Per tool: the message of each of its calls, ascending.
    tool_calls: Vec<Vec<u32>>,
    /// Per tool: tokens of its member with the widest count, `"Read": 99999, `.
    tool_piece: Vec<usize>,
    /// Per tool, all of them: the bound on any `tool_calls` object's members.
    all_tools: usize,
    targets: Vec<String>,
    /// Per target: (message, tool) of every call touching it, ascending by message.
    touches: Vec<Vec<(u32, u32)>>,
    /// Per target: tokens of its member with every tool that ever touches it.
    target_piece: Vec<usize>,
    /// Per message, per call: its targets.
    call_targets: Vec<Vec<Vec<u32>>>,
    /// `{"messages": "N-N", "view": "summary", "tool_calls": {` + `}}` (widest range).
    head: usize,
    /// `, "touches_again": {` + `}` (the longer of the two names).
    targets_head: usize,
}

impl Index {
    pub fn new(t: &Transcript, counter: Counter) -> Index {
        let mut tool_id: FastMap<&str, u32> = FastMap::default();
        let mut tools: Vec<String> = Vec::new();
        let mut tool_calls: Vec<Vec<u32>> = Vec::new();
        let mut target_id: FastMap<String, u32> = FastMap::default();
        let mut targets: Vec<String> = Vec::new();
        let mut touches: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut call_targets = Vec::with_capacity(t.messages.len());
        for (mi, m) in t.messages.iter().enumerate() {
            let mi = u32::try_from(mi).unwrap_or(u32::MAX);
            let mut per_call = Vec::with_capacity(m.calls.len());
            for c in &m.calls {
                let tid = *tool_id.entry(c.tool.as_str()).or_insert_with(|| {
                    tools.push(c.tool.clone());
                    tool_calls.push(Vec::new());
                    u32::try_from(tools.len() - 1).unwrap_or(u32::MAX)
                });
                tool_calls[tid as usize].push(mi);
                let mut ids = Vec::new();
                for target in call_targets_of(c) {
                    let k = match target_id.get(&target) {
                        Some(&k) => k,
                        None => {
                            let k = u32::try_from(targets.len()).unwrap_or(u32::MAX);
                            target_id.insert(target.clone(), k);
                            targets.push(target);
                            touches.push(Vec::new());
                            k
                        }
                    };
                    if !ids.contains(&k) {
                        ids.push(k);
                        touches[k as usize].push((mi, tid));
                    }
                }
                per_call.push(ids);
            }
            call_targets.push(per_call);
        }

        // Pieces, counted once: tool members at the widest count, target keys.
        let widest = "9".repeat(digits(t.messages.iter().map(|m| m.calls.len()).sum()));
        let mut pieces: Vec<String> = tools
            .iter()
            .map(|tool| format!("{}: {widest}, ", quote(tool, false)))
            .collect();
        pieces.extend(targets.iter().map(|k| format!("{}: {{", quote(k, false))));
        let span = widest_range(t.messages.len());
        pieces.push(format!(
            "{{\"messages\": \"{span}\", \"view\": \"summary\", \"tool_calls\": {{"
        ));
        pieces.push(format!(", \"{}\": {{", Side::Before.member()));
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let counts = counter.count_many(&refs);
        let close = counter.count("}}, ");
        let tool_piece: Vec<usize> = counts[..tools.len()].to_vec();
        let target_piece: Vec<usize> = counts[tools.len()..tools.len() + targets.len()]
            .iter()
            .zip(&touches)
            .map(|(&key, touched)| {
                let mut seen: Vec<u32> = touched.iter().map(|&(_, tool)| tool).collect();
                seen.sort_unstable();
                seen.dedup();
                key + seen.iter().map(|&t| tool_piece[t as usize]).sum::<usize>() + close
            })
            .collect();
        let head = counts[tools.len() + targets.len()] + close;
        let targets_head = counts[tools.len() + targets.len() + 1] + close;
        Index {
            all_tools: tool_piece.iter().sum(),
            tools,
            tool_calls,
            tool_piece,
            targets,
            touches,
            target_piece,
            call_targets,
            head,
            targets_head,
        }
    }

    /// The targets of call `block` of message `mi`.
    pub fn targets_of(&self, mi: usize, block: usize) -> &[u32] {
        &self.call_targets[mi][block]
    }

    /// A bound on any summary's tokens when the window's targets cost `targets` (the sum of
    /// [`Index::target_cost`] over them).
    pub fn any_summary(&self, targets: usize) -> usize {
        self.head
            + self.all_tools
            + if targets > 0 {
                self.targets_head + targets
            } else {
                0
            }
    }

    /// A bound on one target's member.
    pub fn target_cost(&self, k: u32) -> usize {
        self.target_piece[k as usize]
    }

    /// The summary of `span` (non-empty), naming the `window_targets` it touches, and a
    /// bound on its tokens.
    pub fn summary(
        &self,
        span: Range<usize>,
        side: Side,
        window_targets: &[u32],
    ) -> (String, usize) {
        let (lo, hi) = (span.start as u32, span.end as u32);
        let in_span = |v: &[u32]| v.partition_point(|&m| m < hi) - v.partition_point(|&m| m < lo);
        let mut out = format!(
            "{{\"messages\": \"{}\", \"view\": \"summary\", \"tool_calls\": {{",
            range_text(&span)
        );
        let mut cost = self.head;
        let mut first = true;
        for (tid, calls) in self.tool_calls.iter().enumerate() {
            let k = in_span(calls);
            if k == 0 {
                continue;
            }
            if !first {
                out.push_str(", ");
            }
            first = false;
            out.push_str(&format!("{}: {k}", quote(&self.tools[tid], false)));
            cost += self.tool_piece[tid];
        }
        out.push('}');
        let mut members = Vec::new();
        for &k in window_targets {
            let touched = &self.touches[k as usize];
            let from = touched.partition_point(|&(m, _)| m < lo);
            let to = touched.partition_point(|&(m, _)| m < hi);
            if from == to {
                continue;
            }
            let mut per_tool: Vec<(u32, usize)> = Vec::new();
            for &(_, tool) in &touched[from..to] {
                match per_tool.iter_mut().find(|(t, _)| *t == tool) {
                    Some((_, n)) => *n += 1,
                    None => per_tool.push((tool, 1)),
                }
            }
            per_tool.sort_unstable();
            let tools: Vec<String> = per_tool
                .iter()
                .map(|&(t, n)| format!("{}: {n}", quote(&self.tools[t as usize], false)))
                .collect();
            members.push(format!(
                "{}: {{{}}}",
                quote(&self.targets[k as usize], false),
                tools.join(", ")
            ));
            cost += self.target_piece[k as usize];
        }
        if !members.is_empty() {
            out.push_str(&format!(
                ", \"{}\": {{{}}}",
                side.member(),
                members.join(", ")
            ));
            cost += self.targets_head;
        }
        out.push('}');
        (out, cost)
    }
}

/// `"7"` for one message, `"7-12"` for messages 7 to 12.
pub fn range_text(r: &Range<usize>) -> String {
    if r.end == r.start + 1 {
        r.start.to_string()
    } else {
        format!("{}-{}", r.start, r.end.saturating_sub(1))
    }
}

/// A range as wide as any in a session of `n` messages, for token bounds.
pub fn widest_range(n: usize) -> String {
    let d = "9".repeat(digits(n.saturating_sub(1)));
    format!("{d}-{d}")
}

fn digits(n: usize) -> usize {
    n.max(1).ilog10() as usize + 1
}

/// The paths and commands a call touches.
pub fn call_targets_of(c: &Call) -> Vec<String> {
    let Value::Object(map) = &c.input else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for (k, v) in map {
        let text = if PATH_KEYS.contains(&k.as_str()) {
            v.as_str().map(str::to_string)
        } else if COMMAND_KEYS.contains(&k.as_str()) {
            match v {
                Value::String(s) => Some(s.clone()),
                Value::Array(items) => items
                    .iter()
                    .map(Value::as_str)
                    .collect::<Option<Vec<&str>>>()
                    .map(|parts| parts.join(" ")),
                _ => None,
            }
        } else {
            None
        };
        let Some(text) = text else { continue };
        let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.is_empty() {
            continue;
        }
        let shown = if one_line.chars().count() > TARGET_CHARS {
            let cut: String = one_line.chars().take(TARGET_CHARS).collect();
            format!("{cut}\u{2026}")
        } else {
            one_line
        };
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn session() -> Transcript<'static> {
        let mut msgs = vec![json!({"role": "user", "text": "goal"})];
        let calls = [
            ("a1", "Read", json!({"file_path": "src/a.py"})),
            ("b1", "Bash", json!({"command": "pytest  -q\ntests"})),
            (
                "a2",
                "Edit",
                json!({"file_path": "src/a.py", "old_string": "x"}),
            ),
            (
                "c1",
                "shell",
                json!({"command": ["bash", "-lc", "ls"], "workdir": "/w"}),
            ),
            ("a3", "Read", json!({"file_path": "src/a.py"})),
            ("b2", "Bash", json!({"command": "pytest -q tests"})),
        ];
        for (id, tool, input) in calls {
            msgs.push(json!({"role": "assistant", "toolUses": [{"tool_use_id": id, "tool": tool, "input": input}]}));
            msgs.push(json!({"role": "user", "toolResults": [{"tool_use_id": id, "text": "out"}]}));
        }
        let src: &'static str = serde_json::to_string(&msgs).unwrap().leak();
        crate::transcript::parse(src, None).unwrap()
    }

    #[test]
    fn targets_are_paths_and_commands() {
        let t = session();
        let c = |mi: usize| &t.messages[mi].calls[0];
        assert_eq!(call_targets_of(c(1)), ["src/a.py"]);
        assert_eq!(call_targets_of(c(3)), ["pytest -q tests"]);
        assert_eq!(call_targets_of(c(7)), ["bash -lc ls"]);
        let long = Call {
            input: json!({"cmd": "x".repeat(300)}),
            ..c(3).clone()
        };
        assert_eq!(call_targets_of(&long)[0].chars().count(), 201);
    }

    #[test]
    fn summaries_count_tools_and_shared_targets() {
        let t = session();
        let c = Counter::o200k();
        let ix = Index::new(&t, c);
        // The window holds messages 1-2 (Read src/a.py); everything after is one span.
        let w = ix.targets_of(1, 0).to_vec();
        let (s, cost) = ix.summary(3..13, Side::After, &w);
        assert_eq!(
            s,
            r#"{"messages": "3-12", "view": "summary", "tool_calls": {"Read": 1, "Bash": 2, "Edit": 1, "shell": 1}, "touches_again": {"src/a.py": {"Read": 1, "Edit": 1}}}"#
        );
        serde_json::from_str::<Value>(&s).unwrap();
        assert!(cost >= c.count(&s), "{cost} < {}", c.count(&s));
        assert!(cost <= ix.any_summary(ix.target_cost(w[0])));
        // Before the window: nothing shared, no targets member.
        let (s, cost) = ix.summary(1..3, Side::Before, ix.targets_of(3, 0));
        assert_eq!(
            s,
            r#"{"messages": "1-2", "view": "summary", "tool_calls": {"Read": 1}}"#
        );
        assert!(cost >= c.count(&s));
        let (s, _) = ix.summary(9..11, Side::Before, &w);
        assert!(
            s.contains(r#""already_touched": {"src/a.py": {"Read": 1}}"#),
            "{s}"
        );
        assert_eq!(range_text(&(4..5)), "4");
        assert_eq!(widest_range(12_000), "99999-99999");
    }
}
