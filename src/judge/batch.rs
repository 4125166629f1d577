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
//! release against the live API), so they are applied as o200k counts divided by 1.25
//! ([`Caps`]; with `--long-context` both limits are 262 144). A session judged in windows is
//! packed by [`super::window`] instead: one batch per window.

use crate::fasthash::FastMap;
use crate::json::quote;
use crate::tokens::Counter;

/// Tokens allowed for `{"model": …, "state": …, "questions": …}` around state and questions.
pub const ENVELOPE_TOKENS: usize = 64;
/// Jev: state plus its longest single question, in Jev tokens.
pub const JEV_STATE_PLUS_QUESTION: usize = 32_000;
/// Jev: state plus all questions of a request, in Jev tokens.
pub const JEV_STATE_PLUS_ALL: usize = 64_000;
/// Jev with `TypeSafe-Danger-Zone-Long-Context: true`: both limits, in Jev tokens.
pub const JEV_LONG_CONTEXT: usize = 262_144;

/// Jev's two limits on one request, in Jev tokens and as o200k counts (÷ 1.25).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// State plus its longest single question, Jev tokens.
    pub single_jev: usize,
    /// State plus all questions, Jev tokens.
    pub total_jev: usize,
    pub long_context: bool,
}

impl Caps {
    pub fn new(long_context: bool) -> Caps {
        if long_context {
            Caps {
                single_jev: JEV_LONG_CONTEXT,
                total_jev: JEV_LONG_CONTEXT,
                long_context,
            }
        } else {
            Caps {
                single_jev: JEV_STATE_PLUS_QUESTION,
                total_jev: JEV_STATE_PLUS_ALL,
                long_context,
            }
        }
    }

    /// State plus one question, o200k tokens.
    pub fn single(self) -> usize {
        o200k_cap(self.single_jev)
    }

    /// State plus all questions, o200k tokens.
    pub fn total(self) -> usize {
        o200k_cap(self.total_jev)
    }

    /// How to get more room than these caps give.
    pub fn hint(self) -> &'static str {
        if self.long_context {
            ""
        } else {
            " (or pass --long-context)"
        }
    }
}

/// A Jev limit expressed in o200k tokens (÷ 1.25).
pub fn o200k_cap(jev_tokens: usize) -> usize {
    jev_tokens * 4 / 5
}

/// The two questions' keys are these prefixes followed by the call id.
pub const KEEP_CALL: &str = "keep_call_";
pub const KEEP_RESULT: &str = "keep_result_";

pub fn keep_call_key(id: &str) -> String {
    format!("{KEEP_CALL}{id}")
}

pub fn keep_result_key(id: &str) -> String {
    format!("{KEEP_RESULT}{id}")
}

/// The two questions of one call as JSON object members (no braces):
/// `"keep_call_{id}": {…}, "keep_result_{id}": {…}`.
pub fn question_members(id: &str, tool: &str) -> String {
    let mut out = String::new();
    write_question_members(&mut out, id, tool);
    out
}

/// [`question_members`], appended to `out` (request bodies are written without a string of
/// their own per question).
pub fn write_question_members(out: &mut String, id: &str, tool: &str) {
    let parts = template();
    // The id and the tool as they read inside a JSON string.
    let escaped = |s: &str| {
        let mut e = String::with_capacity(s.len());
        crate::json::escape_into(&mut e, s, false);
        e
    };
    let (id, tool) = (escaped(id), escaped(tool));
    // The id and the tool go, in order: id, id, tool, id, id, tool.
    let vars = [&id, &id, &tool, &id, &id, &tool];
    out.reserve(question_members_len(&id, &tool));
    for (part, var) in parts.iter().zip(vars) {
        out.push_str(part);
        out.push_str(var);
    }
    out.push_str(&parts[6]);
}

/// The constant parts of [`question_members`], JSON-escaped once: JSON escaping is per
/// character, so the id and the tool are spliced in between (in order: id, id, tool, id, id,
/// tool).
fn template() -> &'static [String] {
    static PARTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PARTS.get_or_init(|| {
        let whole = question_members_slow("\u{0}ID\u{0}", "\u{0}TOOL\u{0}");
        let parts: Vec<String> = whole
            .split("\\u0000ID\\u0000")
            .flat_map(|p| p.split("\\u0000TOOL\\u0000"))
            .map(str::to_string)
            .collect();
        assert_eq!(parts.len(), 7, "question template");
        parts
    })
}

/// The length of [`question_members`] for an id and a tool that need no escaping (a lower
/// bound otherwise).
pub fn question_members_len(id: &str, tool: &str) -> usize {
    template().iter().map(String::len).sum::<usize>() + 4 * id.len() + 2 * tool.len()
}

/// [`question_members`], written out.
fn question_members_slow(id: &str, tool: &str) -> String {
    let call = format!(
        "Judge the probability that tool call {id} ({tool}, in the conversation state) still matters in this session: knowing that the call was made, with the input it was made with, still serves the goal. A call whose purpose is finished and whose input adds nothing should score low."
    );
    let result = format!(
        "Judge the probability that the OUTPUT of tool call {id} ({tool}) still needs to be available verbatim in this session. Score low only when the work it was run for is finished and re-running the tool would produce the same information again if it were needed."
    );
    question_pair(id, &call, &result)
}

/// A call's two `noul` questions as JSON object members (no braces): `keep_call_<id>` with
/// `call` as its instructions and `keep_result_<id>` with `result`, each with the criteria
/// every judge is given.
pub(super) fn question_pair(id: &str, call: &str, result: &str) -> String {
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
            call,
            "The fact that this call happened, and its input, still matter.",
            "The call is finished and its input adds nothing to the goal."
        ),
        q(
            keep_result_key(id),
            result,
            "The output's contents are still needed and re-running would not do.",
            "The output is spent: the work it served is finished."
        )
    )
}

/// Each candidate's question cost: the token count of its two questions as one JSON object
/// (`{` + [`question_members`] + `}`), plus one.
///
/// Exact, without counting each object whole. The pre-tokenizer (o200k) splits text into
/// pieces that BPE never merges across, and the id shows up four times in the object: after
/// `_` in the two keys (`"keep_call_ID":`) and after a space in the two instructions
/// (`call ID (TOOL`). Take an id of ASCII letters, digits, `_`, `.` and `-` that starts and
/// ends with a letter or a digit, and call its *lead* its first piece when it starts with a
/// letter (its run of uppercase letters, then of lowercase ones) or `0` when it starts with
/// a digit. Wherever the id stands, its last piece ends where the id does (a `"` or a space
/// follows), and its pieces after the lead are its own: only the lead's piece takes the `_`
/// or the space before it (a digit does not; `_` and a space are then one token each). So
/// the object's count minus the count of the same object written with the lead as the id is
/// four times the tokens of the id after its lead, which is `count(" ID") − count(" LEAD")`.
/// Every other id (and so every tool) is handled too: the object with the lead is counted
/// whole once per (lead, tool), and an id outside that shape is counted whole. A unit test
/// checks both ways against whole counts.
pub fn question_costs(calls: &[(&str, &str)], counter: Counter) -> Vec<usize> {
    fn object(id: &str, tool: &str) -> String {
        format!("{{{}}}", question_members(id, tool))
    }
    // Per (lead, tool): the lead's object cost and `count(" LEAD")`. Serial: the judge runs
    // this on its one counting thread, whose token caches it shares.
    let mut leads: FastMap<(&str, &str), (usize, usize)> = FastMap::default();
    let mut buf = String::new();
    calls
        .iter()
        .map(|&(id, tool)| {
            let Some(lead) = id_lead(id) else {
                return counter.count(&object(id, tool)) + 1;
            };
            let &mut (lead_cost, lead_tokens) = leads.entry((lead, tool)).or_insert_with(|| {
                (
                    counter.count(&object(lead, tool)) + 1,
                    counter.count(&format!(" {lead}")),
                )
            });
            buf.clear();
            buf.push(' ');
            buf.push_str(id);
            lead_cost + 4 * counter.count(&buf) - 4 * lead_tokens
        })
        .collect()
}

/// The lead of an id [`question_costs`] can cost from its lead's object, or `None`.
fn id_lead(id: &str) -> Option<&str> {
    let b = id.as_bytes();
    let (&first, &last) = (b.first()?, b.last()?);
    let fits = first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    if !fits {
        return None;
    }
    if first.is_ascii_digit() {
        return Some("0");
    }
    let upper = b.iter().take_while(|c| c.is_ascii_uppercase()).count();
    let lower = b[upper..]
        .iter()
        .take_while(|c| c.is_ascii_lowercase())
        .count();
    Some(&id[..upper + lower])
}

/// One request's worth of candidates (indices into the candidate list), numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub number: usize,
    pub calls: Vec<usize>,
    /// Sum of the calls' question costs.
    pub question_tokens: usize,
    /// Which state the batch is sent with (always 0 unless the session is judged in windows).
    pub state: usize,
}

/// Pack candidates (given their ids and question costs) into batches.
pub fn pack(
    ids: &[&str],
    costs: &[usize],
    state_tokens: usize,
    batch_size: usize,
    max_request_tokens: usize,
    caps: Caps,
) -> Result<Vec<Batch>, String> {
    let total_cap = caps.total();
    let single_cap = caps.single();
    let budget = max_request_tokens.min(total_cap);
    let room = budget.saturating_sub(state_tokens + ENVELOPE_TOKENS);
    if room == 0 {
        let hint = if budget < max_request_tokens {
            format!(
                "Jev accepts at most {} of its tokens (about {total_cap} o200k tokens) per request; lower --max-state-tokens",
                caps.total_jev
            )
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
        state: 0,
    };
    for (i, (&id, &q)) in ids.iter().zip(costs).enumerate() {
        if state_tokens + q + ENVELOPE_TOKENS > single_cap {
            return Err(format!(
                "a single question for {id} ({q} tokens) does not fit with the {state_tokens}-token state inside Jev's limit for the state plus one question ({} of its tokens, about {single_cap} o200k tokens); lower --max-state-tokens",
                caps.single_jev
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
                    state: 0,
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
    fn spliced_questions_are_the_written_out_ones() {
        for (id, tool) in [
            ("toolu_1", "Bash"),
            ("a\"b\\c", "T\u{1}ool"),
            ("", ""),
            ("東京", "é"),
        ] {
            assert_eq!(question_members(id, tool), question_members_slow(id, tool));
        }
    }

    #[test]
    fn question_costs_are_exact() {
        let c = Counter::o200k();
        let calls = [
            ("toolu_01XyZ9aBcDeFgHiJkLmNoPq", "Read"),
            ("call_abc123", "exec_command"),
            ("c1", "mcp__github__create_issue"),
            ("x-y.z_", "Bash"),
            ("9lives", "Edit"),
            ("toolu_", "TodoWrite"),
            ("a b", "Read"),
            ("id\"quoted", "Read"),
            ("é", "Grep"),
            ("ok", "tool with spaces"),
            ("toolu_01", "Web.Fetch-2"),
            ("ABC1", "Read"),
            ("aBC", "Read"),
            ("ABCdef", "Read"),
            ("0123", "Read"),
            ("01a", "Read"),
            ("X", "Read"),
            ("9", "Read"),
            ("Ab-Cd.Ef_9", "Read"),
            ("it's", "Read"),
        ];
        // And a few hundred pseudo-random ids and tools over the fast path's alphabet.
        let alphabet = b"abcXYZ019_.-";
        let mut seed: u64 = 7;
        let mut pick = |len: usize| -> String {
            (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    alphabet[(seed >> 33) as usize % alphabet.len()] as char
                })
                .collect()
        };
        let random: Vec<(String, String)> = (0..2000)
            .map(|i| (pick(1 + i % 30), pick(1 + i % 9)))
            .collect();
        // And ids shaped like real ones: a prefix and random base-62 characters.
        let base62 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let real: Vec<(String, &str)> = (0..2000)
            .map(|i| {
                let tail: String = (0..22)
                    .map(|_| {
                        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        base62[(seed >> 33) as usize % base62.len()] as char
                    })
                    .collect();
                let prefix = ["toolu_01", "call_", "", "Tool"][i % 4];
                (format!("{prefix}{tail}"), ["Bash", "Read", "Edit"][i % 3])
            })
            .collect();
        let mut calls: Vec<(&str, &str)> = calls.to_vec();
        calls.extend(real.iter().map(|(a, b)| (a.as_str(), *b)));
        calls.extend(random.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        let costs = question_costs(&calls, c);
        for (&(id, tool), &cost) in calls.iter().zip(&costs) {
            let whole = c.count(&format!("{{{}}}", question_members(id, tool))) + 1;
            assert_eq!(cost, whole, "{id} {tool}");
        }
    }

    #[test]
    fn packing() {
        let ids = ["a", "b", "c", "d", "e"];
        let costs = [100, 100, 100, 100, 100];
        let b = pack(&ids, &costs, 1000, 2, 30_000, Caps::new(false)).unwrap();
        let calls: Vec<_> = b.iter().map(|b| b.calls.clone()).collect();
        assert_eq!(calls, vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(b[2].number, 3);
        // Room for two questions: 1000 + 64 + 250 = 1314.
        let b = pack(&ids, &costs, 1000, 64, 1314, Caps::new(false)).unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(b[0].question_tokens, 200);
        // A single question that cannot fit.
        let e = pack(&ids, &costs, 1000, 64, 1100, Caps::new(false)).unwrap_err();
        assert!(e.contains("a single question for a (100 tokens)"), "{e}");
        let e = pack(&ids, &costs, 1000, 64, 1050, Caps::new(false)).unwrap_err();
        assert!(e.contains("leaves no room"), "{e}");
        // Raised --max-request-tokens is capped by Jev's total limit (51 200 o200k).
        let many: Vec<String> = (0..1000).map(|i| format!("c{i}")).collect();
        let ids: Vec<&str> = many.iter().map(String::as_str).collect();
        let costs = vec![250; 1000];
        let b = pack(&ids, &costs, 20_000, 10_000, 100_000, Caps::new(false)).unwrap();
        assert_eq!(b[0].calls.len(), (51_200 - 20_064) / 250);
        // State plus one question over Jev's per-question limit.
        let e = pack(&ids, &costs, 25_500, 8, 60_000, Caps::new(false)).unwrap_err();
        assert!(e.contains("lower --max-state-tokens"), "{e}");
        // Long-context mode lifts both caps (262 144 Jev tokens, 209 715 o200k).
        let b = pack(&ids, &costs, 25_500, 10_000, 200_000, Caps::new(true)).unwrap();
        assert_eq!(b[0].calls.len(), (200_000 - 25_564) / 250);
    }
}
