//! The judge path (`--provider jev`, and `auto` when a key is found): render the state, fit
//! it, ask two `noul` questions per candidate in packed batches, and turn the answers into
//! keep / trim / drop decisions, failing safe on everything that was not answered.
//!
//! Outcome table (seed §5, `reference/spec-core.md` §6.1):
//!
//! | situation | `provider_used` | `degraded` | `degradation_reason` | `semantic_guarantee` |
//! |---|---|---|---|---|
//! | no candidates | `jev` | false | `no_candidates` | `none` |
//! | no key / network disabled | `jev` | true | `jev_unavailable_fail_safe` | `none` |
//! | nothing judged (all batches failed, or every answer invalid) | `degraded` | true | `jev_no_answers_fail_safe` | `none` |
//! | some judged | `jev+partial_fail_safe` | true | `jev_batch_failed` | `partial` |
//! | all judged | `jev` | false | null | `judged` |
//!
//! A call counts as judged when at least one of its two answers is valid. Batch results are
//! applied in batch order whatever order they arrive in, so the report does not depend on
//! timing (apart from its `timing` object).
//!
//! The state is the whole conversation at the first stage that fits `--max-state-tokens`
//! ([`fit`]); when none does, the session is judged in windows ([`window`]): one state per
//! window, one batch per window, `state_fit_stage: "windowed"`, `state_windows` the number
//! of windows, `state_tokens` the largest state, and a `judged_in_windows` warning.
//!
//! Report counts: `requests` is the number of request bodies the pass built (one per batch,
//! plus one more per split of a batch the API found too large; a batch not sent because the
//! key was refused still counts); `calls` is the number of responses that carried an
//! `answers` object; `input_tokens_sent` sums those responses' `usage.input_tokens` (our own
//! count of the request when a response has none); `timing.judge_latency_ms` sums each
//! batch's time from first send to last answer, retries and back-off included.

pub mod batch;
pub mod client;
pub mod fit;
pub mod laya;
pub mod outline;
pub mod response;
pub mod state;
pub mod window;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::commands::compact::Assessment;
use crate::decide::{judge_action, Action, Decision};
use crate::error::Error;
use crate::pin::Pins;
use crate::settings::{CompactSettings, JevUnavailable};
use crate::tokens::Counter;
use crate::transcript::{Pair, Transcript};
use response::{parse_response, Answer};

const JUDGE: &str = "jev";

fn base(decisions: Vec<Decision>) -> Assessment {
    Assessment::new(JUDGE, decisions)
}

pub(super) fn unjudged(p: &Pair) -> Decision {
    Decision {
        call: p.call,
        result: Some(p.result),
        action: Action::Keep,
        keep_call: None,
        keep_result: None,
        source: "fail_safe",
        reason: "not_judged_fail_safe".into(),
    }
}

/// Every candidate kept, unjudged, because no client can exist.
pub fn unavailable(pins: &Pins, why: &str) -> Assessment {
    let mut a = base(pins.candidates.iter().map(unjudged).collect());
    a.degraded = true;
    a.degradation_reason = Some("jev_unavailable_fail_safe".into());
    a.warnings.push(format!(
        "jev_unavailable: {why}; kept every tool call (fail-safe)"
    ));
    a
}

/// Judge the candidates with Jev. Fails (exit 2) only when the state or a single question
/// cannot be fitted; every other problem is a fail-safe row of the outcome table.
pub fn assess(
    s: &CompactSettings,
    t: &Transcript,
    pairs: &[Pair],
    pins: &Pins,
) -> Result<Assessment, Error> {
    if pins.candidates.is_empty() {
        let mut a = base(Vec::new());
        a.degradation_reason = Some("no_candidates".into());
        a.warnings
            .push("no_scorable_tool_calls: every call is pinned or has no result yet".into());
        return Ok(a);
    }
    let key = match &s.jev.key {
        Ok(k) => k.clone(),
        Err(why) => return Ok(unavailable(pins, why.describe())),
    };

    // The questions, costed.
    let counter = Counter::o200k();
    let calls: Vec<(&str, &str)> = pins
        .candidates
        .iter()
        .map(|p| {
            let c = t.call(p.call);
            (c.id.as_str(), c.tool.as_str())
        })
        .collect();
    let ids: Vec<&str> = pins
        .candidates
        .iter()
        .map(|p| t.call(p.call).id.as_str())
        .collect();
    // Costing the questions and rendering and counting the state on one thread lets both
    // share that thread's token caches: less CPU, and the wall time this adds (about a tenth
    // of a second at 50 000 messages) is small beside the requests that follow.
    let one = single_thread_pool(Pool::Judge);
    let work = || {
        let costs = batch::question_costs(&calls, counter);
        let prepared = fit::prepare(s, t, pairs, pins, &ids, &costs, counter);
        (costs, prepared)
    };
    let (costs, prepared) = match &one {
        Some(one) => one.install(work),
        None => work(),
    };
    // The state, fitted whole or in windows, and the questions packed.
    let prepared = prepared.map_err(Error::Fit)?;
    let batches = prepared.batches;
    let state_of_batch: Vec<usize> = batches.iter().map(|b| b.state).collect();

    // Ask.
    let transport = match client::HttpTransport::new(&s.jev, &key) {
        Ok(tr) => tr,
        Err(e) => return Ok(unavailable(pins, &e)),
    };
    let redact = client::Redactor::new(&key);
    let job = Arc::new(client::Job {
        model: s.jev.model.clone(),
        states: prepared.states,
        calls: calls
            .iter()
            .map(|&(id, tool)| (Box::from(id), Box::from(tool)))
            .collect(),
        state_tokens: prepared.state_tokens.clone(),
        policy: client::Policy::from_config(&s.jev),
        redact: redact.clone(),
    });
    let progress = progress_bar(batches.len(), s.quiet);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "could not start the HTTP runtime".into(),
            source,
        })?;
    let results = rt.block_on(client::run_all(
        Arc::new(transport),
        Arc::clone(&job),
        batches,
        s.max_workers,
        progress.clone(),
    ));
    progress.finish_and_clear();

    // Apply, in batch order.
    let mut a = base(Vec::new());
    a.state_tokens = prepared.state_tokens.iter().copied().max().unwrap_or(0);
    a.state_fit_stage = prepared.stage.into();
    a.state_windows = prepared.state_tokens.len();
    a.warnings.extend(prepared.warning);
    let mut answers: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); pins.candidates.len()];
    let mut latency = Duration::ZERO;
    // One buffer for the answer keys, reused.
    let mut key = String::new();
    for (b, &state) in results.iter().zip(&state_of_batch) {
        latency += b.latency;
        a.requests += b.parts.len();
        if b.splits > 0 {
            a.warnings.push(format!(
                "jev_batch_{}_split: the API refused it as too large (max_tokens_exceeded); it was sent again in {} smaller requests",
                b.number,
                b.parts.len()
            ));
        }
        for part in &b.parts {
            let n = part.calls.len();
            let body = match &part.outcome {
                Err(f) => {
                    a.warnings.push(redact.clean(&format!(
                        "jev_batch_{}_failed: {}: those {n} call(s) were kept (fail-safe)",
                        b.number, f.cause
                    )));
                    continue;
                }
                Ok(body) => body,
            };
            let response = match parse_response(body) {
                Ok(r) => r,
                Err(what) => {
                    a.warnings.push(format!(
                        "jev_malformed_response:batch_{}: {what}; those {n} call(s) were kept (fail-safe)",
                        b.number
                    ));
                    continue;
                }
            };
            a.calls += 1;
            a.jev_model_resolved =
                Some(redact.clean(response.model.as_deref().unwrap_or(&s.jev.model)));
            a.input_tokens_sent += response.input_tokens.unwrap_or_else(|| {
                prepared.state_tokens[state]
                    + batch::ENVELOPE_TOKENS
                    + part.calls.iter().map(|&i| costs[i]).sum::<usize>()
            });
            for &i in &part.calls {
                let id = ids[i];
                let mut ask = |prefix: &str| {
                    key.clear();
                    key.push_str(prefix);
                    key.push_str(id);
                    check(response.answer(&key), &key, &mut a.warnings)
                };
                answers[i] = (ask(batch::KEEP_CALL), ask(batch::KEEP_RESULT));
            }
        }
    }
    a.judge_latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);

    decide(&mut a, t, pins, &answers, s, JUDGE);
    Ok(a)
}

/// The long-lived one-thread pools the judge path counts tokens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Costing the questions, rendering and counting the state.
    Judge,
    /// The report's token counts, made while the judge works.
    Report,
}

/// A one-thread pool that lives as long as the process: its thread's token caches are kept
/// from one pass to the next (as the global pool's are) and are never torn down at the end
/// of a pass, which at 50 000 messages costs about 50 ms of freeing. `None` when no thread
/// could be started (the caller then counts where it is).
pub fn single_thread_pool(which: Pool) -> Option<&'static rayon::ThreadPool> {
    static POOLS: [OnceLock<Option<rayon::ThreadPool>>; 2] = [OnceLock::new(), OnceLock::new()];
    let (slot, name) = match which {
        Pool::Judge => (&POOLS[0], "lcc-judge"),
        Pool::Report => (&POOLS[1], "lcc-report-count"),
    };
    slot.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(move |_| name.to_string())
            .build()
            .ok()
    })
    .as_ref()
}

/// Turn a judge's answers (keep_call, keep_result per candidate, `None` where none came)
/// into decisions, and say how complete the judging was: a candidate without any answer is
/// kept unjudged; none answered at all is `<judge>_no_answers_fail_safe`, some is
/// `<judge>+partial_fail_safe`. Shared by Jev and laya.
pub(super) fn decide(
    a: &mut Assessment,
    t: &Transcript,
    pins: &Pins,
    answers: &[(Option<f64>, Option<f64>)],
    s: &CompactSettings,
    judge: &'static str,
) {
    let mut judged = 0;
    for (p, &(kc, kr)) in pins.candidates.iter().zip(answers) {
        if kc.is_none() && kr.is_none() {
            a.decisions.push(unjudged(p));
            continue;
        }
        judged += 1;
        let c = t.call(p.call);
        let text = || t.result_text(p.result);
        let (action, reason) = judge_action(kc, kr, text, &c.tool, s.thresholds);
        a.decisions.push(Decision {
            call: p.call,
            result: Some(p.result),
            action,
            keep_call: kc,
            keep_result: kr,
            source: judge,
            reason: reason.into(),
        });
    }
    if judged == 0 {
        a.provider_used = "degraded".into();
        a.degraded = true;
        a.degradation_reason = Some(format!("{judge}_no_answers_fail_safe"));
        a.semantic_guarantee = "none";
        a.warnings.push(format!(
            "{judge}_no_answers: every call was kept unjudged (fail-safe)"
        ));
    } else if judged < pins.candidates.len() {
        a.provider_used = format!("{judge}+partial_fail_safe");
        a.degraded = true;
        a.degradation_reason = Some(format!("{judge}_batch_failed"));
        a.semantic_guarantee = "partial";
    } else {
        a.semantic_guarantee = "judged";
    }
}

/// Why `auto` did not run Jev, for its warning.
pub fn auto_fallback_reason(why: JevUnavailable) -> String {
    format!(
        "auto: Jev not used: {}; ran --provider rules (lossless) instead",
        why.describe()
    )
}

pub(super) fn progress_bar(n: usize, quiet: bool) -> indicatif::ProgressBar {
    if quiet || !crate::io::stderr_is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(n as u64);
    pb.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("judging {bar:30} {pos}/{len} requests [{elapsed}]")
    {
        pb.set_style(style);
    }
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// A valid `noul` probability, or `None` with a warning.
fn check(answer: Option<Answer>, qid: &str, warnings: &mut Vec<String>) -> Option<f64> {
    check_noul(JUDGE, answer, qid, warnings)
}

/// [`check`] for any judge: its warnings start with `{judge}_`.
pub(super) fn check_noul(
    judge: &str,
    answer: Option<Answer>,
    qid: &str,
    warnings: &mut Vec<String>,
) -> Option<f64> {
    match answer {
        None | Some(Answer::Unusable) => {
            warnings.push(format!("{judge}_missing_answer:{qid}"));
            None
        }
        Some(Answer::Noul(p)) if !(0.0..=1.0).contains(&p) => {
            warnings.push(format!("{judge}_out_of_range_answer:{qid}"));
            None
        }
        Some(Answer::Noul(p)) => Some(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_validated_not_clamped() {
        let mut w = Vec::new();
        let cases = [
            (json!({"type": "noul", "noul": 0.25}), Some(0.25)),
            (json!({"noul": 1}), Some(1.0)),
            (json!({"noul": 0}), Some(0.0)),
            (json!({"noul": 1.7}), None),
            (json!({"noul": -0.2}), None),
            (json!({"noul": true}), None),
            (json!({"noul": "0.9"}), None),
            (json!({"noul": null}), None),
            (json!({"type": "choice", "choice": "yes"}), None),
            (json!(0.9), None),
        ];
        for (v, want) in cases {
            assert_eq!(check(Some(Answer::of(&v)), "q", &mut w), want, "{v}");
        }
        assert_eq!(check(None, "keep_call_x", &mut w), None);
        assert_eq!(
            w,
            [
                "jev_out_of_range_answer:q",
                "jev_out_of_range_answer:q",
                "jev_missing_answer:q",
                "jev_missing_answer:q",
                "jev_missing_answer:q",
                "jev_missing_answer:q",
                "jev_missing_answer:q",
                "jev_missing_answer:keep_call_x",
            ]
        );
    }

    #[test]
    fn responses() {
        let r = parse_response(
            br#"{"model": "jev-1.13.0", "answers": {}, "usage": {"input_tokens": 12}}"#,
        )
        .unwrap();
        assert_eq!(r.model.as_deref(), Some("jev-1.13.0"));
        assert_eq!(r.input_tokens, Some(12));
        assert!(parse_response(b"[1]")
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(parse_response(br#"{"answers": []}"#)
            .unwrap_err()
            .contains("not an object"));
        assert!(parse_response(b"<html>").unwrap_err().contains("not JSON"));
        assert!(parse_response(b"").unwrap_err().contains("empty"));
    }
}
