//! `lcc compact`: read → detect format → parse → pin → decide → rebuild → verify → write.

use std::time::Instant;

use anyhow::Result;

use crate::decide::{Action, Decision, DecisionRecord};
use crate::error::Error;
use crate::pin::{self, Pins};
use crate::rebuild;
use crate::report::{self, Report, Timing};
use crate::rules::{self, RulesMode};
use crate::settings::{CompactSettings, ProviderChoice};
use crate::transcript::{self, TextKey, Transcript};
use crate::{io, summary};

/// What a provider concluded about the candidates.
pub struct Assessment {
    pub decisions: Vec<Decision>,
    pub provider_used: String,
    pub degraded: bool,
    pub degradation_reason: Option<String>,
    pub semantic_guarantee: &'static str,
    pub rules_mode: Option<RulesMode>,
    pub warnings: Vec<String>,
    /// The judge's label for `blocks_scored` (`jev`, `laya`, `rules`).
    pub judge: &'static str,
    pub jev_model_resolved: Option<String>,
    pub calls: usize,
    pub requests: usize,
    pub state_tokens: usize,
    pub state_fit_stage: String,
    pub state_windows: usize,
    pub input_tokens_sent: usize,
    pub judge_latency_ms: u64,
    /// Verification findings (rules lossless/recoverable), reported as `lossless_violations`.
    pub violations: Vec<String>,
    /// What a rules pass leaves for the command layer: disk stamps, stash entries.
    pub rules_extra: rules::Extras,
}

impl Assessment {
    /// What `provider` concluded, before anything went wrong: not degraded, no guarantee yet,
    /// no judge figures.
    pub fn new(provider: &'static str, decisions: Vec<Decision>) -> Assessment {
        Assessment {
            decisions,
            provider_used: provider.into(),
            degraded: false,
            degradation_reason: None,
            semantic_guarantee: "none",
            rules_mode: None,
            warnings: Vec::new(),
            judge: provider,
            jev_model_resolved: None,
            calls: 0,
            requests: 0,
            state_tokens: 0,
            state_fit_stage: "none".into(),
            state_windows: 0,
            input_tokens_sent: 0,
            judge_latency_ms: 0,
            violations: Vec::new(),
            rules_extra: rules::Extras::default(),
        }
    }

    fn rules(mode: RulesMode, decisions: Vec<Decision>) -> Assessment {
        Assessment {
            rules_mode: Some(mode),
            ..Assessment::new("rules", decisions)
        }
    }
}

fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The outcome of one pass, before anything is written.
pub struct Outcome {
    /// The output, as edits of the source (see [`rebuild::Rebuilt::pieces`]).
    pub output: rebuild::Rebuilt,
    pub report: Report,
}

pub fn run(s: &CompactSettings) -> Result<()> {
    let t0 = Instant::now();
    let src = io::read_input(&s.input)?;
    let read_ms = ms(t0);
    let mut outcome = compact_text(s, &src)?;
    outcome.report.timing.read_ms = read_ms;

    let tw = Instant::now();
    if !s.dry_run {
        match &s.output {
            Some(path) => io::write_atomic_with(path, |w| outcome.output.write_to(&src, w))?,
            None => io::write_stdout_with(|w| outcome.output.write_to(&src, w))?,
        }
    }
    outcome.report.timing.write_ms = ms(tw);
    outcome.report.timing.total_ms = ms(t0);
    if let Some(path) = &s.report {
        io::write_atomic(path, report::to_json(&outcome.report).as_bytes())?;
    }
    if !s.quiet {
        io::eprint(&summary::render(&outcome.report, s));
    }
    Ok(())
}

/// The whole pass over an in-memory transcript (no file I/O).
pub fn compact_text(s: &CompactSettings, src: &str) -> Result<Outcome> {
    let file = io::display_name(&s.input);
    let input_err = |error| Error::Input {
        file: file.clone(),
        error,
    };
    let tp = Instant::now();
    let t = transcript::parse(src, s.format).map_err(input_err)?;
    if s.strict {
        if let Some(w) = t.warnings.first() {
            return Err(input_err(transcript::ParseError::new(
                "",
                format!(
                    "{}; --strict makes reading warnings errors",
                    w.split("; ").next().unwrap_or(w)
                ),
            ))
            .into());
        }
    }
    let pairs = t.pairs().map_err(input_err)?;
    let pins = pin::select(&t, &pairs, s.preserve_recent);
    let parse_ms = ms(tp);

    // Token counting of the input is the slowest stage and depends on nothing the pass
    // decides, so it runs on the rayon pool while this thread decides, rebuilds and verifies.
    // Its pieces are freed as soon as it is done, and so are its memoised counts when it ran on
    // the shared pool.
    let (piece_counts, count_ms, stages) = std::thread::scope(|scope| {
        // A network judge's wait hides the count entirely: count on one thread then, whose
        // caches miss half as often as two threads' do (less CPU, no time lost).
        let network_judge = s.provider == ProviderChoice::Jev
            || (s.provider == ProviderChoice::Auto && s.jev.key.is_ok());
        let t = &t;
        let counting = scope.spawn(move || {
            let tc = Instant::now();
            let pieces = report::Pieces::new(t);
            let one = network_judge
                .then(|| crate::judge::single_thread_pool(crate::judge::Pool::Report))
                .flatten();
            let counts = match one {
                // Kept for the next pass, as the judge's own are: memory is not this path's
                // limit, and freeing them costs time.
                Some(one) => one.install(|| pieces.count(s.counter)),
                None => {
                    let counts = pieces.count(s.counter);
                    rayon::broadcast(|_| crate::tokens::release_caches());
                    counts
                }
            };
            (counts, ms(tc))
        });
        let stages = decide_and_rebuild(s, t, &pairs, &pins, src);
        let (counts, count_ms) = counting
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (counts, count_ms, stages)
    });
    let (mut assessment, rebuilt, decide_ms, mut rebuild_ms) = stages?;
    let rebuilt = match rebuilt {
        Some(r) => r,
        None => {
            // Stash notes name their token counts, which are the pieces just counted.
            let tr = Instant::now();
            let early = if s.dry_run {
                Vec::new()
            } else {
                early_stash_entries(&t, &assessment)
            };
            let stash_dir = assessment.rules_extra.stash_dir.clone();
            let r = std::thread::scope(|scope| {
                let writer = stash_dir
                    .as_deref()
                    .filter(|_| !early.is_empty())
                    .map(|dir| {
                        let entries: Vec<(&str, TextKey)> =
                            early.iter().map(|(_, d, k)| (d.as_str(), *k)).collect();
                        scope.spawn(move || io::stash_put_all(dir, &entries, text_bytes))
                    });
                let first_result = result_piece_offsets(&t);
                rules::stash::finish_notes(
                    &t,
                    &mut assessment.decisions,
                    &mut assessment.rules_extra,
                    |r| piece_counts.tokens[first_result[r.message] + r.block],
                );
                rebuild_and_verify(s, &t, &pins, src, &mut assessment, || {
                    writer.map_or_else(Written::default, |w| {
                        let errors = w.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
                        early.iter().map(|(k, ..)| *k).zip(errors).collect()
                    })
                })
            });
            rebuild_ms += ms(tr);
            r
        }
    };
    let acc = report::account(
        &t,
        &piece_counts,
        &assessment.decisions,
        &rebuilt.removed_messages,
        s.counter,
    );

    let mut r = build_report(
        s,
        &t,
        &pins,
        &assessment,
        &acc,
        rebuilt.removed_messages.len(),
    );
    r.timing = Timing {
        parse_ms,
        decide_ms,
        rebuild_ms,
        count_ms,
        judge_latency_ms: assessment.judge_latency_ms,
        ..Timing::default()
    };
    let mut warnings = t.warnings.clone();
    warnings.append(&mut r.warnings);
    r.warnings = warnings;
    Ok(Outcome {
        output: rebuilt,
        report: r,
    })
}

/// Where each message's first result sits in [`report::Pieces::all`].
fn result_piece_offsets(t: &Transcript) -> Vec<usize> {
    let mut k = 0;
    t.messages
        .iter()
        .map(|m| {
            let first = k + 1 + m.calls.len();
            k = first + m.results.len();
            first
        })
        .collect()
}

/// Decide, then rebuild and verify — unless the decisions wait for token counts (stash
/// notes), which the caller fills in from the pieces it counts before rebuilding.
fn decide_and_rebuild(
    s: &CompactSettings,
    t: &Transcript,
    pairs: &[crate::transcript::Pair],
    pins: &Pins,
    src: &str,
) -> Result<(Assessment, Option<rebuild::Rebuilt>, u64, u64)> {
    let td = Instant::now();
    let mut assessment = assess(s, t, pairs, pins)?;
    let decide_ms = ms(td);
    if assessment.rules_extra.notes_pending {
        return Ok((assessment, None, decide_ms, 0));
    }
    let tr = Instant::now();
    let rebuilt = rebuild_and_verify(s, t, pins, src, &mut assessment, Written::default);
    Ok((assessment, Some(rebuilt), decide_ms, ms(tr)))
}

/// Stash entries already written (while tokens were counted): decision index -> why the
/// write failed (`None`: stored).
type Written = crate::fasthash::FastMap<usize, Option<String>>;

/// Rebuild and verify (the fail-safe of a verified rules mode reverts to keeping
/// everything), then settle the rules pass's side effects (stash writes, disk re-hash).
/// `written` gives the stash entries written early; it is asked for after the rebuild, so an
/// early writer runs alongside it.
fn rebuild_and_verify(
    s: &CompactSettings,
    t: &Transcript,
    pins: &Pins,
    src: &str,
    assessment: &mut Assessment,
    written: impl FnOnce() -> Written,
) -> rebuild::Rebuilt {
    let mut rebuilt = verified_rebuild(s, t, pins, src, assessment);
    if settle(s, t, assessment, &io::DiskProbe, &written()) {
        rebuilt = rebuild::apply(t, src, &assessment.decisions);
    }
    rebuilt
}

/// Rebuild, and verify a verified rules mode's decisions (its fail-safe reverts to keeping
/// everything).
fn verified_rebuild(
    s: &CompactSettings,
    t: &Transcript,
    pins: &Pins,
    src: &str,
    assessment: &mut Assessment,
) -> rebuild::Rebuilt {
    let mut rebuilt = rebuild::apply(t, src, &assessment.decisions);
    if let Some(mode) = assessment.rules_mode.filter(|m| m.verified()) {
        if assessment
            .decisions
            .iter()
            .any(|d| d.action != Action::Keep)
        {
            let mut violations =
                rules::verify_decisions(mode, t, pins, &s.rules, &assessment.decisions);
            if let Err(e) = rebuilt.validate(t) {
                violations.push(format!("the rebuilt transcript does not parse: {e}"));
            }
            if !violations.is_empty() {
                fail_safe_keep_all(assessment, mode.name(), violations);
                rebuilt = rebuild::apply(t, src, &assessment.decisions);
            }
        }
    }
    rebuilt
}

/// The stash entries that stay stashed whatever their token counts
/// ([`rules::stash::stashed_whatever_the_count`]): (decision index, file name, bytes). They
/// are written while the notes are finished and the output is rebuilt and verified;
/// [`settle`] writes the rest and turns failed writes into keeps. An entry a fail-safe later
/// discards stays in the stash (unused, named by its own hash).
fn early_stash_entries<'t>(t: &'t Transcript, a: &Assessment) -> Vec<(usize, String, TextKey<'t>)> {
    a.rules_extra
        .stash
        .iter()
        .filter_map(|(k, digest)| {
            let text = stashed_text(t, a, *k);
            text.with(|s| rules::stash::stashed_whatever_the_count(s, digest))
                .then(|| (*k, digest.clone(), text))
        })
        .collect()
}

/// The text stash entry `k` (a decision index) stores, by its source form: the writer
/// decodes each when it writes it.
fn stashed_text<'t>(t: &'t Transcript, a: &Assessment, k: usize) -> TextKey<'t> {
    a.decisions[k]
        .result
        .map_or(TextKey::Plain(""), |r| t.text_key(t.result(r)))
}

/// A stash entry's bytes, decoded for the writer.
fn text_bytes<'a>(k: &'a TextKey<'_>) -> std::borrow::Cow<'a, [u8]> {
    match k.text() {
        std::borrow::Cow::Borrowed(s) => std::borrow::Cow::Borrowed(s.as_bytes()),
        std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(s.into_bytes()),
    }
}

fn fail_safe_keep_all(a: &mut Assessment, mode: &str, violations: Vec<String>) {
    for d in &mut a.decisions {
        d.action = Action::Keep;
        d.reason = format!("{mode}_verification_failed");
    }
    a.degraded = true;
    a.degradation_reason = Some(format!("{mode}_verification_failed_fail_safe"));
    a.semantic_guarantee = "none";
    a.warnings.push(format!(
        "{mode}_verification_failed: kept every tool call (fail-safe)"
    ));
    // Nothing to stash and no pointer to re-check once everything is kept.
    a.rules_extra.disk.clear();
    a.rules_extra.stash.clear();
    // The violations themselves are listed in the report's `lossless_violations`.
    a.violations = violations;
}

/// The rules pass's side effects, last before the output exists: write the stash (not on
/// `--dry-run`), then re-hash every disk-verified file. A replacement whose stash write
/// failed or whose file changed since its check becomes a keep (which only restores original
/// bytes, so the verified output stays valid). `written`: the entries already written.
/// Returns whether any decision changed.
fn settle(
    s: &CompactSettings,
    t: &Transcript,
    a: &mut Assessment,
    probe: &dyn rules::FileProbe,
    written: &Written,
) -> bool {
    let mut changed = false;
    if !s.dry_run && !a.rules_extra.stash.is_empty() {
        // What was not written while tokens were counted is written now.
        let entries: Vec<(&str, TextKey)> = a
            .rules_extra
            .stash
            .iter()
            .filter(|(k, _)| !written.contains_key(k))
            .map(|(k, digest)| (digest.as_str(), stashed_text(t, a, *k)))
            .collect();
        let mut late = match &a.rules_extra.stash_dir {
            Some(_) if entries.is_empty() => Vec::new(),
            Some(dir) => io::stash_put_all(dir, &entries, text_bytes),
            None => entries
                .iter()
                .map(|_| Some("no stash directory".to_string()))
                .collect(),
        }
        .into_iter();
        let errors: Vec<Option<String>> = a
            .rules_extra
            .stash
            .iter()
            .map(|(k, _)| match written.get(k) {
                Some(e) => e.clone(),
                None => late.next().flatten(),
            })
            .collect();
        let failed: Vec<usize> = a
            .rules_extra
            .stash
            .iter()
            .zip(&errors)
            .filter(|(_, e)| e.is_some())
            .map(|((k, _), _)| *k)
            .collect();
        if let Some(e) = errors.into_iter().flatten().next() {
            for &k in &failed {
                a.decisions[k].action = Action::Keep;
                a.decisions[k].reason = "stash_write_failed".into();
            }
            a.rules_extra.stash.retain(|(k, _)| !failed.contains(k));
            a.warnings.push(format!(
                "stash_write_failed: {} result(s) kept whole ({e})",
                failed.len()
            ));
            changed = true;
        }
    }
    let stale = rules::changed_since_check(&a.rules_extra, probe);
    if !stale.is_empty() {
        for &k in &stale {
            a.decisions[k].action = Action::Keep;
            a.decisions[k].reason = rules::disk::reason::CHANGED_BEFORE_EMIT.into();
        }
        a.rules_extra.disk.retain(|(k, _)| !stale.contains(k));
        changed = true;
    }
    changed
}

fn assess(
    s: &CompactSettings,
    t: &Transcript,
    pairs: &[transcript::Pair],
    pins: &Pins,
) -> Result<Assessment, Error> {
    let mut warnings = Vec::new();
    let mode = match s.provider {
        ProviderChoice::Rules => s.rules_mode,
        ProviderChoice::Jev => return crate::judge::assess(s, t, pairs, pins),
        ProviderChoice::Laya => return crate::judge::laya::assess(s, t, pairs, pins, false),
        // Jev when a key is found and the network is allowed; else laya when its server
        // answers; else the rules. Each skipped provider gets a warning saying why.
        ProviderChoice::Auto => match &s.jev.key {
            Ok(_) => return crate::judge::assess(s, t, pairs, pins),
            Err(why) => match crate::judge::laya::probe(&s.laya) {
                Ok(()) => {
                    let mut a = crate::judge::laya::assess(s, t, pairs, pins, true)?;
                    let skipped = crate::judge::laya::auto_warning("Jev", why.describe(), "laya");
                    a.warnings.insert(0, skipped);
                    return Ok(a);
                }
                Err(cause) => {
                    warnings.push(crate::judge::auto_fallback_reason(*why));
                    warnings.push(crate::judge::laya::auto_warning(
                        "laya",
                        &cause,
                        "rules (lossless)",
                    ));
                    RulesMode::Lossless
                }
            },
        },
    };
    // Stash notes wait for the token counts the pipeline makes anyway (no second count).
    let (decisions, extra) =
        rules::decide(mode, t, pins, &s.question, &s.rules, &io::DiskProbe, None);
    let mut a = Assessment::rules(mode, decisions);
    a.rules_extra = extra;
    if pins.candidates.is_empty() {
        a.degradation_reason = Some("no_candidates".into());
        a.warnings
            .push("no_scorable_tool_calls: every call is pinned or has no result yet".into());
    } else {
        a.semantic_guarantee = mode.guarantee();
    }
    warnings.append(&mut a.warnings);
    a.warnings = warnings;
    Ok(a)
}

fn build_report(
    s: &CompactSettings,
    t: &Transcript,
    pins: &Pins,
    a: &Assessment,
    acc: &report::Accounting,
    removed_messages: usize,
) -> Report {
    let mut decisions: Vec<DecisionRecord> = Vec::new();
    for (call, reason) in &pins.pinned_calls {
        let c = t.call(*call);
        let result = pins.result_of(*call);
        let chars = crate::json::py_dumps(&c.input, false).chars().count()
            + result.map_or(0, |r| t.text_chars(t.result(r)));
        decisions.push(DecisionRecord {
            id: c.id.clone(),
            decision: "keep",
            score: None,
            keep_call: None,
            keep_result: None,
            chars,
            chars_after: chars,
            source: "pin",
            reason: reason.code().to_string(),
            message_index: call.message,
            tool: c.tool.clone(),
            result_message_index: result.map(|r| r.message),
            tokens: None,
            tokens_after: None,
            kept_at: None,
            note: None,
            recover: None,
        });
    }
    let mut counts = [0usize; 5];
    let mut tool_before = 0;
    let mut tool_after = 0;
    for (d, &(chars, chars_after, tokens, tokens_after)) in
        a.decisions.iter().zip(&acc.per_decision)
    {
        let c = t.call(d.call);
        let (kept_at, note, recover) = match &d.action {
            Action::Dedupe { kept_at, note } => (Some(kept_at.clone()), Some(note.clone()), None),
            Action::Replace { note, recover } => (None, Some(note.clone()), Some(recover.clone())),
            _ => (None, None, None),
        };
        let kind = d.action.kind();
        counts[match kind {
            "keep" => 0,
            "trim" => 1,
            "drop" => 2,
            "dedupe" => 3,
            _ => 4,
        }] += 1;
        tool_before += chars;
        tool_after += chars_after;
        decisions.push(DecisionRecord {
            id: c.id.clone(),
            decision: kind,
            score: d.score(),
            keep_call: d.keep_call,
            keep_result: d.keep_result,
            chars,
            chars_after,
            source: d.source,
            reason: d.reason.clone(),
            message_index: d.call.message,
            tool: c.tool.clone(),
            result_message_index: d.result.map(|r| r.message),
            tokens: Some(tokens),
            tokens_after: Some(tokens_after),
            kept_at,
            note,
            recover,
        });
    }
    let token_ratio = report::ratio(acc.tokens_before, acc.tokens_after);
    Report {
        schema_version: report::SCHEMA_VERSION,
        mode: "tool-calls",
        objective: s.question.clone(),
        input_format: t.format.name(),
        provider_requested: s.provider.name().to_string(),
        provider_used: a.provider_used.clone(),
        rules_mode: a.rules_mode.map(RulesMode::name),
        lossless_violations: a.violations.clone(),
        recoverability_check: a.rules_extra.recoverability_check,
        stash_dir: a
            .rules_extra
            .stash_dir
            .as_ref()
            .map(|d| d.display().to_string()),
        degraded: a.degraded,
        degradation_reason: a.degradation_reason.clone(),
        semantic_guarantee: a.semantic_guarantee,
        jev_model_requested: s.jev_model.clone(),
        jev_model_resolved: a.jev_model_resolved.clone(),
        threshold: s.thresholds.threshold,
        trim_threshold: None,
        trim_head_chars: s.thresholds.trim_head_chars,
        preserve_recent: s.preserve_recent,
        blocks_total: pins.pinned_calls.len() + pins.candidates.len(),
        blocks_scored: a.decisions.iter().filter(|d| d.source == a.judge).count(),
        blocks_protected: pins.pinned_calls.len(),
        calls: a.calls,
        chars_before: acc.chars_before,
        chars_after: acc.chars_after,
        reduction_ratio: report::ratio(acc.chars_before, acc.chars_after),
        worth_it: token_ratio >= s.min_reduction,
        min_reduction: s.min_reduction,
        tool_chars_before: tool_before,
        tool_chars_after: tool_after,
        tool_reduction_ratio: report::ratio(tool_before, tool_after),
        tokens_before: acc.tokens_before,
        tokens_after: acc.tokens_after,
        token_count_method: s.counter.method(),
        tokenizer: s.counter.encoding.name(),
        state_tokens: a.state_tokens,
        state_fit_stage: a.state_fit_stage.clone(),
        state_windows: a.state_windows,
        requests: a.requests,
        input_tokens_sent: a.input_tokens_sent,
        messages_before: t.messages.len(),
        messages_after: t.messages.len() - removed_messages,
        tool_calls_total: t.tool_calls_total(),
        tool_calls_kept: counts[0],
        tool_calls_trimmed: counts[1],
        tool_calls_dropped: counts[2],
        tool_calls_deduped: counts[3],
        tool_calls_replaced: counts[4],
        tool_calls_stashed: a.rules_extra.stash.len(),
        warnings: a.warnings.clone(),
        decisions,
        timing: Timing::default(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::rules::disk::tests::MemProbe;

    const SRC: &str = r#"{"messages": [
        {"role": "user", "text": "go"},
        {"role": "assistant", "text": "", "toolUses": [
            {"tool_use_id": "a", "tool": "Read", "input": {"file_path": "/w/a.py"}},
            {"tool_use_id": "b", "tool": "Read", "input": {"file_path": "/w/b.py"}}]},
        {"role": "user", "text": "", "toolResults": [
            {"tool_use_id": "a", "text": "     1\talpha line one, long enough to be worth a pointer\n     2\talpha line two\n     3\talpha line three, long enough to be worth a pointer"},
            {"tool_use_id": "b", "text": "     1\tbeta line one, long enough to be worth a pointer\n     2\tbeta line two\n     3\tbeta line three, long enough to be worth a pointer"}]},
        {"role": "assistant", "text": "done"}
    ]}"#;

    fn settings(args: &[&str], env: crate::settings::Env) -> CompactSettings {
        let mut all = vec![
            "lcc",
            "compact",
            "in.json",
            "--provider",
            "rules",
            "--preserve-recent",
            "1",
        ];
        all.extend_from_slice(args);
        let crate::cli::Command::Compact(a) = crate::cli::Cli::parse_from(all).command else {
            unreachable!()
        };
        CompactSettings::from_args(&a, env).unwrap()
    }

    fn decided(s: &CompactSettings, probe: &MemProbe) -> (Transcript<'static>, Assessment) {
        let t = transcript::parse(SRC, None).unwrap();
        let pins = pin::select(&t, &t.pairs().unwrap(), s.preserve_recent);
        let (d, extra) = rules::decide(
            s.rules_mode,
            &t,
            &pins,
            "",
            &s.rules,
            probe,
            Some(s.counter),
        );
        let mut a = Assessment::rules(s.rules_mode, d);
        a.rules_extra = extra;
        (t, a)
    }

    #[test]
    fn a_file_changed_between_check_and_emit_is_kept() {
        let s = settings(
            &["--rules-mode", "recoverable", "--workspace-root", "/"],
            Default::default(),
        );
        let mut probe = MemProbe::default();
        probe.dirs.push("/w".into());
        probe.files.insert("/w/a.py".into(), b"alpha line one, long enough to be worth a pointer\nalpha line two\nalpha line three, long enough to be worth a pointer\n".to_vec());
        probe.files.insert("/w/b.py".into(), b"beta line one, long enough to be worth a pointer\nbeta line two\nbeta line three, long enough to be worth a pointer\n".to_vec());
        let (t, mut a) = decided(&s, &probe);
        assert!(a
            .decisions
            .iter()
            .all(|d| d.reason == "replace_disk_verified"));
        assert_eq!(a.rules_extra.disk.len(), 2);
        assert!(
            !settle(&s, &t, &mut a, &probe, &Written::default()),
            "nothing changed yet"
        );
        probe.files.insert("/w/a.py".into(), b"alpha line one, long enough to be worth a pointer\nALPHA\nalpha line three, long enough to be worth a pointer\n".to_vec());
        assert!(settle(&s, &t, &mut a, &probe, &Written::default()));
        assert_eq!(a.decisions[0].action, Action::Keep);
        assert_eq!(a.decisions[0].reason, "keep_disk_changed_before_emit");
        assert_eq!(a.decisions[1].reason, "replace_disk_verified");
        assert_eq!(a.rules_extra.disk.len(), 1);
    }

    #[test]
    fn a_failed_stash_write_keeps_the_result() {
        let env = crate::settings::Env {
            stash_dir: Some("/dev/null/lcc-stash".into()),
            ..Default::default()
        };
        let s = settings(&["--rules-mode", "stashed", "--workspace-root", "/"], env);
        let mut probe = MemProbe::default();
        probe.dirs.push("/w".into());
        probe.files.insert("/w/a.py".into(), b"alpha line one, long enough to be worth a pointer\nalpha line two\nalpha line three, long enough to be worth a pointer\n".to_vec());
        let (t, mut a) = decided(&s, &probe);
        assert_eq!(a.decisions[0].reason, "stashed:replace_disk_verified");
        assert!(settle(&s, &t, &mut a, &probe, &Written::default()));
        assert_eq!(a.decisions[0].action, Action::Keep);
        assert_eq!(a.decisions[0].reason, "stash_write_failed");
        assert!(a.rules_extra.stash.is_empty());
        assert!(a.warnings[0].starts_with("stash_write_failed: 1 result(s) kept whole"));
    }
}
