//! Fitting the state into `--max-state-tokens`, cheapest stage first
//! (`full` → `inputs-200` → `calls-one-line`, `reference/spec-core.md` §3.3).
//!
//! Tokens are counted with the real tokenizer (o200k), once per rendered piece: each
//! conversation entry is a piece, a piece already counted at an earlier stage is not counted
//! again, and new pieces are counted in parallel. The state's count is the sum of its pieces
//! (head, entries, separators, tail). BPE merges never cross the pre-tokenizer's chunk
//! boundaries, and every piece boundary here sits between JSON punctuation, so the sum is
//! never below the whole-text count and at most about two tokens per entry above it (the
//! punctuation around a boundary, `}, {"`, merges in the whole text); a unit test checks
//! both bounds.

use std::collections::HashMap;

use rayon::prelude::*;

use super::state::{Stage, View};
use crate::tokens::Counter;

/// The chosen rendering.
#[derive(Debug, Clone)]
pub struct Fitted {
    pub stage: Stage,
    pub tokens: usize,
    /// The state as sent: `{"goal": …, "conversation": […]}`.
    pub json: String,
}

/// Render the state at the first stage that fits, or say why none does.
pub fn fit(
    view: &View,
    goal: &str,
    max_state_tokens: usize,
    counter: Counter,
) -> Result<Fitted, String> {
    let head = View::head(goal);
    let fixed = counter.count(&head) + counter.count(View::TAIL);
    let sep = counter.count(View::SEP);
    let mut cache: HashMap<String, usize> = HashMap::new();
    let mut last = 0;
    for stage in Stage::ALL {
        let entries: Vec<String> = (0..view.messages())
            .into_par_iter()
            .with_min_len(64)
            .filter_map(|i| view.entry(i, stage))
            .collect();
        let fresh: Vec<&str> = {
            let mut seen = std::collections::HashSet::new();
            entries
                .iter()
                .map(String::as_str)
                .filter(|e| !cache.contains_key(*e) && seen.insert(*e))
                .collect()
        };
        let counts = counter.count_many(&fresh);
        let fresh_owned: Vec<String> = fresh.iter().map(|s| (*s).to_string()).collect();
        cache.extend(fresh_owned.into_iter().zip(counts));
        let tokens = fixed
            + entries.iter().map(|e| cache[e.as_str()]).sum::<usize>()
            + sep * entries.len().saturating_sub(1);
        last = tokens;
        if tokens <= max_state_tokens {
            let mut json = head;
            json.push_str(&entries.join(View::SEP));
            json.push_str(View::TAIL);
            return Ok(Fitted {
                stage,
                tokens,
                json,
            });
        }
    }
    Err(format!(
        "conversation does not fit the {max_state_tokens}-token state budget (smallest rendering is {last} tokens); raise --max-state-tokens or compact fewer messages"
    ))
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
