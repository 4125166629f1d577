//! The two questions asked about each candidate, and packing them into requests.
//!
//! Per candidate `{id}` (tool `{tool}`) the request's `questions` object gets
//! `keep_call_{id}` then `keep_result_{id}`, both `noul`, worded exactly as the Python
//! release words them (`reference/spec-core.md` §4.1), key order `type`, `instructions`,
//! `criteria`.
//!
//! Packing (§4.2, plus Jev's real limits): every request carries the whole state, so the
//! room for questions is `budget − state − 64` (the 64 covers the envelope), where `budget`
//! is `--max-request-tokens`, but never more than Jev accepts for state plus all questions.
//! A candidate's cost is the token count of its two questions as a JSON object, plus one.
//! Candidates are packed greedily in candidate order: a batch is closed when it holds
//! `--batch-size` calls or the next cost would overflow the room. Independently, state plus
//! any single question must stay under Jev's per-question limit. Both Jev limits are stated in
//! Jev's own tokens, which run up to 1.24× o200k on transcript states (measured by the Python
//! release against the live API), so they are applied as o200k counts divided by 1.25.

use crate::json::quote;

/// Tokens allowed for `{"model": …, "state": …, "questions": …}` around state and questions.
pub const ENVELOPE_TOKENS: usize = 64;
/// Jev: state plus its longest single question, in Jev tokens.
pub const JEV_STATE_PLUS_QUESTION: usize = 32_000;
/// Jev: state plus all questions of a request, in Jev tokens.
pub const JEV_STATE_PLUS_ALL: usize = 64_000;

/// A Jev limit expressed in o200k tokens (÷ 1.25).
pub fn o200k_cap(jev_tokens: usize) -> usize {
    jev_tokens * 4 / 5
}

pub fn keep_call_key(id: &str) -> String {
    format!("keep_call_{id}")
}

pub fn keep_result_key(id: &str) -> String {
    format!("keep_result_{id}")
}

/// The two questions of one call as JSON object members (no braces):
/// `"keep_call_{id}": {…}, "keep_result_{id}": {…}`.
pub fn question_members(id: &str, tool: &str) -> String {
    let call = format!(
        "Judge the probability that tool call {id} ({tool}, in the conversation state) still matters in this session: knowing that the call was made, with the input it was made with, still serves the goal. A call whose purpose is finished and whose input adds nothing should score low."
    );
    let result = format!(
        "Judge the probability that the OUTPUT of tool call {id} ({tool}) still needs to be available verbatim in this session. Score low only when the work it was run for is finished and re-running the tool would produce the same information again if it were needed."
    );
    let q = |key: String, instructions: &str, yes: &str, no: &str| {
        format!(
            "{}: {{\"type\": \"noul\", \"instructions\": {}, \"criteria\": {{\"true\": {}, \"false\": {}}}}}",
            quote(&key, false),
            quote(instructions, false),
            quote(yes, false),
            quote(no, false)
        )
    };
    format!(
        "{}, {}",
        q(
            keep_call_key(id),
            &call,
            "The fact that this call happened, and its input, still matter.",
            "The call is finished and its input adds nothing to the goal."
        ),
        q(
            keep_result_key(id),
            &result,
            "The output's contents are still needed and re-running would not do.",
            "The output is spent: the work it served is finished."
        )
    )
}

/// One request's worth of candidates (indices into the candidate list), numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub number: usize,
    pub calls: Vec<usize>,
    /// Sum of the calls' question costs.
    pub question_tokens: usize,
}

/// Pack candidates (given their ids and question costs) into batches.
pub fn pack(
    ids: &[&str],
    costs: &[usize],
    state_tokens: usize,
    batch_size: usize,
    max_request_tokens: usize,
) -> Result<Vec<Batch>, String> {
    let total_cap = o200k_cap(JEV_STATE_PLUS_ALL);
    let single_cap = o200k_cap(JEV_STATE_PLUS_QUESTION);
    let budget = max_request_tokens.min(total_cap);
    let room = budget.saturating_sub(state_tokens + ENVELOPE_TOKENS);
    if room == 0 {
        let hint = if budget < max_request_tokens {
            format!("Jev accepts at most {JEV_STATE_PLUS_ALL} of its tokens (about {total_cap} o200k tokens) per request; lower --max-state-tokens")
        } else {
            "raise --max-request-tokens".to_string()
        };
        return Err(format!(
            "state ({state_tokens} tokens) leaves no room for questions inside the {budget}-token request budget; {hint}"
        ));
    }
    let size = batch_size.max(1);
    let mut batches: Vec<Batch> = Vec::new();
    let mut current = Batch {
        number: 1,
        calls: Vec::new(),
        question_tokens: 0,
    };
    for (i, (&id, &q)) in ids.iter().zip(costs).enumerate() {
        if state_tokens + q + ENVELOPE_TOKENS > single_cap {
            return Err(format!(
                "a single question for {id} ({q} tokens) does not fit with the {state_tokens}-token state inside Jev's limit for the state plus one question ({JEV_STATE_PLUS_QUESTION} of its tokens, about {single_cap} o200k tokens); lower --max-state-tokens"
            ));
        }
        if !current.calls.is_empty()
            && (current.calls.len() >= size || current.question_tokens + q > room)
        {
            let number = current.number + 1;
            batches.push(std::mem::replace(
                &mut current,
                Batch {
                    number,
                    calls: Vec::new(),
                    question_tokens: 0,
                },
            ));
        }
        if current.calls.is_empty() && q > room {
            return Err(format!(
                "a single question for {id} ({q} tokens) does not fit the request budget; raise --max-request-tokens"
            ));
        }
        current.calls.push(i);
        current.question_tokens += q;
    }
    if !current.calls.is_empty() {
        batches.push(current);
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wording_is_the_python_release_s() {
        let m = question_members("toolu_1", "Bash");
        let v: serde_json::Value = serde_json::from_str(&format!("{{{m}}}")).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["keep_call_toolu_1", "keep_result_toolu_1"]);
        assert_eq!(
            v["keep_result_toolu_1"]["instructions"],
            "Judge the probability that the OUTPUT of tool call toolu_1 (Bash) still needs to be available verbatim in this session. Score low only when the work it was run for is finished and re-running the tool would produce the same information again if it were needed."
        );
        assert!(m.starts_with("\"keep_call_toolu_1\": {\"type\": \"noul\", \"instructions\": \"Judge the probability that tool call toolu_1 (Bash, in the conversation state)"));
    }

    #[test]
    fn packing() {
        let ids = ["a", "b", "c", "d", "e"];
        let costs = [100, 100, 100, 100, 100];
        let b = pack(&ids, &costs, 1000, 2, 30_000).unwrap();
        let calls: Vec<_> = b.iter().map(|b| b.calls.clone()).collect();
        assert_eq!(calls, vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(b[2].number, 3);
        // Room for two questions: 1000 + 64 + 250 = 1314.
        let b = pack(&ids, &costs, 1000, 64, 1314).unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].question_tokens, 200);
        // A single question that cannot fit.
        let e = pack(&ids, &costs, 1000, 64, 1100).unwrap_err();
        assert!(e.contains("a single question for a (100 tokens)"), "{e}");
        let e = pack(&ids, &costs, 1000, 64, 1050).unwrap_err();
        assert!(e.contains("leaves no room"), "{e}");
        // Raised --max-request-tokens is capped by Jev's total limit (51 200 o200k).
        let many: Vec<String> = (0..1000).map(|i| format!("c{i}")).collect();
        let ids: Vec<&str> = many.iter().map(String::as_str).collect();
        let costs = vec![250; 1000];
        let b = pack(&ids, &costs, 20_000, 10_000, 100_000).unwrap();
        assert_eq!(b[0].calls.len(), (51_200 - 20_064) / 250);
        // State plus one question over Jev's per-question limit.
        let e = pack(&ids, &costs, 25_500, 8, 60_000).unwrap_err();
        assert!(e.contains("lower --max-state-tokens"), "{e}");
    }
}
