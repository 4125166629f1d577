//! Render a `transcript-compaction-1.0` report for a person. Pure: report (+ optional source
//! transcript) in, text out.
//!
//! The text has three parts: a header (one row per fact about the run), the warnings and
//! verification findings when there are any, then one group per kind of decision in a fixed
//! order (DROPPED, TRIMMED, DEDUPED, REPLACED, KEPT, PINNED), each with its count and totals,
//! and for every decision its call id, tool, message, what happened, why (in plain words), and
//! what it saved. Nothing depends on the clock or on the report's `timing`, so two reports
//! that differ only in timing render to the same bytes.
//!
//! The report is read leniently: a missing or odd field prints as `?` instead of failing, so
//! reports from older or newer versions still render. Only a file that is not a tool-call
//! report at all (wrong `schema_version`, no `decisions` list, a decision that is not an
//! object) is refused.

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::Value;

use crate::json;
use crate::summary::thousands;
use crate::transcript::{Call, ToolResult, Transcript};

/// `--only` and `--limit`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub only: Option<String>,
    pub limit: Option<usize>,
}

/// The decision kinds, in the order their groups are shown: (kind, group title).
pub const GROUPS: [(&str, &str); 6] = [
    ("drop", "DROPPED"),
    ("trim", "TRIMMED"),
    ("dedupe", "DEDUPED"),
    ("replace", "REPLACED"),
    ("keep", "KEPT"),
    ("pin", "PINNED"),
];

/// The values `--only` accepts, as listed in its error message.
pub const ONLY_VALUES: &str = "drop, trim, dedupe, replace, keep, pin";

/// Width of the header labels.
const LABEL: usize = 11;
/// Width of the per-decision labels.
const FIELD: usize = 8;
/// Longest tool input shown with `--source` (characters).
const INPUT_MAX: usize = 200;
/// Result lines shown with `--source`, and the longest line.
const RESULT_LINES: usize = 4;
const LINE_MAX: usize = 160;

/// Render the report, or say why it is not a tool-call report.
pub fn render(
    name: &str,
    report: &Value,
    source: Option<&Transcript>,
    filter: &Filter,
) -> Result<String, String> {
    let only = match &filter.only {
        Some(v) => Some(parse_only(v)?),
        None => None,
    };
    let decisions = validate(name, report)?;
    let r = Fields(report);

    let mut o = String::new();
    o.push_str(
        "lcc explain: why each tool call was dropped, trimmed, deduped, replaced, kept or pinned\n\n",
    );
    header(&mut o, &r, &decisions);

    let warnings = r.strings("warnings");
    if !warnings.is_empty() {
        section(&mut o, &format!("WARNINGS ({})", warnings.len()));
        for w in &warnings {
            let _ = writeln!(o, "  - {}", one_line(w));
        }
    }
    let violations = r.strings("lossless_violations");
    if !violations.is_empty() {
        section(
            &mut o,
            &format!(
                "VERIFICATION FAILED ({}): every call was kept",
                violations.len()
            ),
        );
        for v in &violations {
            let _ = writeln!(o, "  - {}", one_line(v));
        }
    }

    let index = source.map(SourceIndex::new);
    let mut limited = false;
    let mut other_kinds: Vec<&str> = Vec::new();
    for d in &decisions {
        if !GROUPS.iter().any(|(k, _)| *k == d.kind) && !other_kinds.contains(&d.kind) {
            other_kinds.push(d.kind);
        }
    }
    let groups = GROUPS.iter().map(|&(k, t)| (k, t.to_string())).chain(
        other_kinds
            .iter()
            .map(|k| (*k, format!("OTHER: decision '{}'", one_line(k)))),
    );
    for (kind, title) in groups {
        if only.is_some_and(|o| o != kind) {
            continue;
        }
        let members: Vec<&Dec> = decisions.iter().filter(|d| d.kind == kind).collect();
        if members.is_empty() && only.is_none() {
            continue;
        }
        section(&mut o, &group_title(&title, kind, &members));
        if members.is_empty() {
            o.push_str("  (none)\n");
        }
        let shown = filter.limit.unwrap_or(usize::MAX).min(members.len());
        for (i, d) in members.iter().take(shown).enumerate() {
            if i > 0 {
                o.push('\n');
            }
            decision(&mut o, d, index.as_ref());
        }
        if shown < members.len() {
            limited = true;
            let _ = writeln!(
                o,
                "\n  ... {} more not shown (--limit {})",
                members.len() - shown,
                shown
            );
        }
    }
    if limited {
        o.push_str("\n(limited by --limit; drop it to see every decision)\n");
    }
    Ok(o)
}

/// `--only`: a kind (`drop`) or its group name (`dropped`), any case.
fn parse_only(v: &str) -> Result<&'static str, String> {
    let v = v.trim().to_ascii_lowercase();
    GROUPS
        .iter()
        .find(|(k, t)| *k == v || t.eq_ignore_ascii_case(&v))
        .map(|(k, _)| *k)
        .ok_or_else(|| format!("--only must be one of {ONLY_VALUES} (got '{v}')"))
}

/// One decision, read leniently.
struct Dec<'a> {
    kind: &'a str,
    v: Fields<'a>,
}

/// Check the report's shape and classify its decisions.
fn validate<'a>(name: &str, report: &'a Value) -> Result<Vec<Dec<'a>>, String> {
    let Some(obj) = report.as_object() else {
        return Err(format!(
            "{name} is not a transcript-compaction-1.0 report: the top level is {}, not an object",
            type_name(report)
        ));
    };
    match obj.get("schema_version") {
        Some(Value::String(s)) if s == crate::report::SCHEMA_VERSION => {}
        Some(Value::String(s)) => {
            return Err(format!(
                "{name} is not a transcript-compaction-1.0 report (its schema_version is '{s}')"
            ))
        }
        Some(v) => {
            return Err(format!(
                "{name} is not a transcript-compaction-1.0 report (its schema_version is {}, not a string)",
                type_name(v)
            ))
        }
        None => {
            return Err(format!(
                "{name} is not a transcript-compaction-1.0 report (it has no schema_version); write one with `lcc compact INPUT -r report.json`"
            ))
        }
    }
    if let Some(mode) = obj.get("mode").and_then(Value::as_str) {
        if mode != "tool-calls" {
            return Err(format!(
                "{name} is a '{mode}' report; lcc explain renders tool-call reports (mode 'tool-calls') only"
            ));
        }
    }
    let items = match obj.get("decisions") {
        Some(Value::Array(items)) => items,
        Some(v) => {
            return Err(format!(
                "{name}: decisions must be a list, found {}",
                type_name(v)
            ))
        }
        None => {
            return Err(format!(
                "{name} has no 'decisions' list, so there is nothing to explain; write a report with `lcc compact INPUT -r report.json`"
            ))
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if !d.is_object() {
                return Err(format!(
                    "{name}: decisions[{i}] must be an object, found {}",
                    type_name(d)
                ));
            }
            let v = Fields(d);
            let kind = if v.str("source") == Some("pin") {
                "pin"
            } else {
                v.str("decision").unwrap_or("?")
            };
            Ok(Dec { kind, v })
        })
        .collect()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Lenient accessors over a JSON object.
#[derive(Clone, Copy)]
struct Fields<'a>(&'a Value);

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }
    fn str(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }
    fn uint(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(Value::as_u64)
    }
    fn float(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }
    fn bool(&self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }
    /// A count with thousands grouped, or the raw JSON, or `?`.
    fn count(&self, key: &str) -> String {
        match (self.uint(key), self.get(key)) {
            (Some(n), _) => thousands(usize::try_from(n).unwrap_or(usize::MAX)),
            (None, Some(v)) => one_line(&v.to_string()),
            (None, None) => "?".into(),
        }
    }
    /// A string field, or the raw JSON, or `?`.
    fn text(&self, key: &str) -> String {
        match (self.str(key), self.get(key)) {
            (Some(s), _) => one_line(s),
            (None, Some(v)) => one_line(&v.to_string()),
            (None, None) => "?".into(),
        }
    }
    fn strings(&self, key: &str) -> Vec<String> {
        match self.get(key) {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    }
}

fn row(o: &mut String, label: &str, value: &str) {
    let _ = writeln!(o, "{label:<LABEL$} {value}");
}

fn section(o: &mut String, title: &str) {
    let _ = writeln!(o, "\n{title}\n{}", "-".repeat(title.chars().count()));
}

fn percent(r: f64) -> String {
    format!("{:.1}%", r * 100.0)
}

fn ratio(before: u64, after: u64) -> f64 {
    crate::report::ratio(big_usize(before), big_usize(after))
}

fn big_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn big(n: u64) -> String {
    thousands(big_usize(n))
}

fn header(o: &mut String, r: &Fields, decisions: &[Dec]) {
    let objective = r.str("objective").unwrap_or("");
    row(
        o,
        "Objective",
        &if objective.trim().is_empty() {
            "(none given)".to_string()
        } else {
            one_line(objective)
        },
    );
    if let Some(f) = r.str("input_format") {
        row(o, "Input", &format!("{} transcript", one_line(f)));
    }
    row(
        o,
        "Provider",
        &format!(
            "{} (requested {})",
            r.text("provider_used"),
            r.text("provider_requested")
        ),
    );
    if let Some(m) = r.str("rules_mode") {
        row(o, "Rules mode", &one_line(m));
    }
    if let Some(c) = r.str("recoverability_check") {
        row(o, "Recovery", &format!("checked by {}", one_line(c)));
    }
    let degraded = match (r.bool("degraded"), r.str("degradation_reason")) {
        (Some(true), Some(why)) => format!("yes: {}", one_line(why)),
        (Some(true), None) => "yes (no reason recorded)".to_string(),
        (Some(false), Some(why)) => format!("no (note: {})", one_line(why)),
        (Some(false), None) => "no".to_string(),
        (None, _) => "?".to_string(),
    };
    row(o, "Degraded", &degraded);
    let guarantee = r.text("semantic_guarantee");
    row(
        o,
        "Guarantee",
        &match guarantee_words(&guarantee) {
            Some(w) => format!("{guarantee}: {w}"),
            None => guarantee,
        },
    );
    let threshold = match r.float("threshold") {
        Some(t) => {
            format!("keep if keep_result >= {t:.2}, else trim if keep_call >= {t:.2}, else drop")
        }
        None => "?".to_string(),
    };
    let threshold = match r.uint("trim_head_chars") {
        Some(0) => format!("{threshold}; trimming off (--trim-head-chars 0)"),
        Some(n) => format!("{threshold}; a trim keeps {} chars", big(n)),
        None => threshold,
    };
    row(o, "Threshold", &threshold);
    match r.uint("preserve_recent") {
        Some(0) => row(o, "Pinned", "the first message only"),
        Some(1) => row(o, "Pinned", "the first message and the newest one"),
        Some(n) => row(
            o,
            "Pinned",
            &format!("the first message and the newest {} messages", big(n)),
        ),
        None => {}
    }

    let method = [r.str("token_count_method"), r.str("tokenizer")]
        .iter()
        .flatten()
        .map(|s| one_line(s))
        .collect::<Vec<_>>()
        .join(", ");
    let method = if method.is_empty() {
        String::new()
    } else {
        format!(" ({method})")
    };
    row(
        o,
        "Tokens",
        &format!(
            "{} -> {}{method}",
            r.count("tokens_before"),
            r.count("tokens_after")
        ),
    );
    let tokens = match (r.uint("tokens_before"), r.uint("tokens_after")) {
        // The notes can outweigh what they replaced: say so rather than "0.0%".
        (Some(b), Some(a)) if a > b => format!(
            "none: tokens {} ({} added)",
            crate::report::change(big_usize(b), big_usize(a)),
            big(a - b)
        ),
        (Some(b), Some(a)) => format!("{} of tokens ({} saved)", percent(ratio(b, a)), big(b - a)),
        _ => "? of tokens".to_string(),
    };
    let chars = match (r.uint("chars_before"), r.uint("chars_after")) {
        (Some(b), Some(a)) => format!(
            "{} of chars ({} -> {})",
            percent(ratio(b, a)),
            big(b),
            big(a)
        ),
        _ => "? of chars".to_string(),
    };
    row(o, "Reduction", &format!("{tokens}; {chars}"));
    let min = r
        .float("min_reduction")
        .map_or_else(|| "?".to_string(), percent);
    row(
        o,
        "Worth it",
        &match r.bool("worth_it") {
            Some(true) => format!("yes (at least --min-reduction {min})"),
            Some(false) => format!("no (below --min-reduction {min})"),
            None => "?".to_string(),
        },
    );
    row(
        o,
        "Messages",
        &format!(
            "{} -> {}",
            r.count("messages_before"),
            r.count("messages_after")
        ),
    );
    if r.uint("requests").is_some_and(|n| n > 0) {
        let mut judge = format!(
            "{} request(s), {} answered",
            r.count("requests"),
            r.count("calls")
        );
        if let Some(model) = r.str("jev_model_resolved") {
            let _ = write!(judge, ", model {}", one_line(model));
        }
        let _ = write!(
            judge,
            "; state {} tokens at stage {}",
            r.count("state_tokens"),
            r.text("state_fit_stage")
        );
        if let Some(w) = r.uint("state_windows").filter(|&w| w > 1) {
            let _ = write!(judge, " in {} windows", big(w));
        }
        if let Some(n) = r.uint("input_tokens_sent").filter(|&n| n > 0) {
            let _ = write!(judge, "; {} input tokens sent", big(n));
        }
        row(o, "Judge", &judge);
    }
    let counts = GROUPS
        .iter()
        .map(|(k, t)| {
            let n = decisions.iter().filter(|d| d.kind == *k).count();
            format!("{n} {}", t.to_ascii_lowercase())
        })
        .collect::<Vec<_>>()
        .join(", ");
    let others = decisions
        .iter()
        .filter(|d| !GROUPS.iter().any(|(k, _)| *k == d.kind))
        .count();
    let counts = if others > 0 {
        format!("{counts}, {others} other")
    } else {
        counts
    };
    row(o, "Decisions", &counts);
}

fn guarantee_words(g: &str) -> Option<&'static str> {
    Some(match g {
        "judged" => "every unpinned call was judged",
        "partial" => "some calls were judged; the others were kept unjudged",
        "none" => "no claim is made about what was removed",
        "lossless" => "every replaced output is still in the transcript, word for word",
        "recoverable" => "every removed output can be re-read or re-run",
        _ => return None,
    })
}

/// Totals for a group title: how much the group saved (or kept).
fn group_title(title: &str, kind: &str, members: &[&Dec]) -> String {
    let n = members.len();
    let sum = |key: &str| -> (u64, bool) {
        let mut total = 0u64;
        let mut all = true;
        for d in members {
            match d.v.uint(key) {
                Some(x) => total += x,
                None => all = false,
            }
        }
        (total, all)
    };
    let (chars, chars_all) = sum("chars");
    let (chars_after, after_all) = sum("chars_after");
    let (tokens, tokens_all) = sum("tokens");
    let (tokens_after, tokens_after_all) = sum("tokens_after");
    let tokens_all = tokens_all && tokens_after_all;
    if n == 0 {
        return format!("{title} (0)");
    }
    if !chars_all || (!after_all && !matches!(kind, "keep" | "pin")) {
        return format!("{title} ({n}): sizes not recorded");
    }
    match kind {
        "keep" | "pin" => {
            let tokens = if tokens_all {
                format!(", {} tokens", big(tokens))
            } else {
                String::new()
            };
            format!("{title} ({n}): {} chars{tokens} kept whole", big(chars))
        }
        _ => {
            let tokens = if tokens_all {
                format!(", {} tokens", big(tokens.saturating_sub(tokens_after)))
            } else {
                String::new()
            };
            format!(
                "{title} ({n}): {} chars{tokens} saved",
                big(chars.saturating_sub(chars_after))
            )
        }
    }
}

/// One decision's block.
fn decision(o: &mut String, d: &Dec, source: Option<&SourceIndex>) {
    let v = &d.v;
    let id = v.text("id");
    let mut first = format!(
        "  {id}  {}  message {}",
        v.text("tool"),
        v.count("message_index")
    );
    if let Some(ri) = v.uint("result_message_index") {
        if Some(ri) != v.uint("message_index") {
            let _ = write!(first, ", result in message {}", big(ri));
        }
    }
    if let Some(s) = v.str("source") {
        let _ = write!(first, "  [{}]", source_words(s));
    }
    let _ = writeln!(o, "{first}");
    field(o, "what", &what(d));
    field(o, "why", &why(v));
    if let Some(s) = scores(v) {
        field(o, "scores", &s);
    }
    if let Some(k) = v.get("kept_at") {
        field(
            o,
            "kept at",
            &v.str("kept_at").map_or_else(|| k.to_string(), one_line),
        );
    }
    if v.get("note").is_some() {
        field(o, "note", &v.text("note"));
    }
    if v.get("recover").is_some() {
        field(o, "recover", &v.text("recover"));
    }
    if let Some(index) = source {
        show_source(o, index, v.str("id"));
    }
}

fn field(o: &mut String, label: &str, value: &str) {
    let line = format!("      {label:<FIELD$} {value}");
    let _ = writeln!(o, "{}", line.trim_end());
}

fn source_words(s: &str) -> String {
    match s {
        "pin" => "pinned".to_string(),
        "fail_safe" => "fail-safe".to_string(),
        "rules" => "rules".to_string(),
        other => format!("judged by {}", one_line(other)),
    }
}

/// Chars (and tokens, when recorded) before and after, with what was saved.
fn sizes(v: &Fields) -> String {
    let chars = v.uint("chars");
    let after = v.uint("chars_after");
    let tokens = v.uint("tokens");
    let tokens_after = v.uint("tokens_after");
    let mut s = match (chars, after) {
        (Some(c), Some(a)) => format!("{} -> {} chars", big(c), big(a)),
        (Some(c), None) => format!("{} -> ? chars", big(c)),
        _ => "? chars".to_string(),
    };
    if let (Some(t), Some(ta)) = (tokens, tokens_after) {
        let _ = write!(s, ", {} -> {} tokens", big(t), big(ta));
    }
    match (chars, after, tokens, tokens_after) {
        (Some(c), Some(a), Some(t), Some(ta)) => {
            let _ = write!(
                s,
                " ({} chars, {} tokens saved)",
                big(c.saturating_sub(a)),
                big(t.saturating_sub(ta))
            );
        }
        (Some(c), Some(a), _, _) => {
            let _ = write!(s, " ({} chars saved)", big(c.saturating_sub(a)));
        }
        _ => {}
    }
    s
}

fn whole(v: &Fields) -> String {
    let mut s = format!("{} chars", v.count("chars"));
    if v.uint("tokens").is_some() {
        let _ = write!(s, ", {} tokens", v.count("tokens"));
    }
    s
}

/// What happened to the pair, with sizes.
fn what(d: &Dec) -> String {
    let v = &d.v;
    match d.kind {
        "drop" => format!("call and result removed: {}", sizes(v)),
        "trim" => format!("result cut to its head plus a note: {}", sizes(v)),
        "dedupe" => format!(
            "result replaced by a pointer to {}: {}",
            v.text("kept_at"),
            sizes(v)
        ),
        "replace" => format!(
            "result replaced by a note on how to recover it: {}",
            sizes(v)
        ),
        "keep" => format!("kept byte for byte ({})", whole(v)),
        "pin" => format!("pinned, kept byte for byte ({})", whole(v)),
        other => format!("recorded as decision '{}': {}", one_line(other), sizes(v)),
    }
}

fn scores(v: &Fields) -> Option<String> {
    let parts: Vec<String> = ["keep_call", "keep_result"]
        .iter()
        .filter_map(|k| {
            v.get(k).map(|x| match x.as_f64() {
                Some(f) => format!("{k} {f:.2}"),
                None => format!("{k} {}", one_line(&x.to_string())),
            })
        })
        .collect();
    if parts.is_empty() {
        v.get("score").map(|x| match x.as_f64() {
            Some(f) => format!("score {f:.2}"),
            None => format!("score {}", one_line(&x.to_string())),
        })
    } else {
        Some(parts.join(", "))
    }
}

/// The reason in plain words.
fn why(v: &Fields) -> String {
    match v.get("reason") {
        None => "no reason recorded".to_string(),
        Some(Value::String(s)) if s.is_empty() => "no reason recorded".to_string(),
        // The same code from the rules policy (only `stashed` writes it) is not the judge's.
        Some(Value::String(s))
            if s == "short_result_kept_whole" && v.str("source") == Some("rules") =>
        {
            "the rules policy would have stashed the result, but its stash note is no shorter, so it was kept whole".to_string()
        }
        Some(Value::String(s)) => reason_words(s, v.str("kept_at")),
        Some(other) => format!("recorded as {}", one_line(&other.to_string())),
    }
}

/// A sentence for every reason code our reports can contain; anything else is shown as it was
/// recorded.
pub fn reason_words(code: &str, kept_at: Option<&str>) -> String {
    let target = kept_at.map_or_else(|| "a later result".to_string(), one_line);
    let fixed = match code {
        "pinned_first_message" => {
            "it is in the first message, which is never changed (it usually states the task)"
        }
        "pinned_recent" => {
            "its call or its result is in one of the newest messages (--preserve-recent), which are never changed"
        }
        "result_still_needed" => "the judge said the result is still needed word for word",
        "call_kept_result_trimmed" => {
            "the judge said the call still matters but its full output does not, so only the head of the result was kept"
        }
        "short_result_kept_whole" => {
            "the judge would have trimmed the result, but it is already no longer than the trim head, so it was kept whole"
        }
        "trim_disabled_kept_whole" => {
            "the judge would have trimmed the result, but trimming is off (--trim-head-chars 0), so it was kept whole"
        }
        "call_and_result_not_needed" => {
            "the judge said neither the call nor its result is needed any more, so both were removed together"
        }
        "not_judged_fail_safe" => "the judge gave no answer for this call, so it was kept (fail-safe)",
        "half_judged_kept_fail_safe" => {
            "the judge answered only one of the two questions for this call, so it was kept (fail-safe)"
        }
        "no_lossless_superseder" => {
            "no later result holds this output, so it could not be replaced without losing something"
        }
        "identical_output_kept_later" => {
            return format!(
                "the same output appears again later, kept unchanged at {target}, so this copy became a pointer to it"
            )
        }
        "output_lines_of_later" => {
            return format!(
                "this output is exactly a run of whole lines of a later result kept unchanged ({target}), so it became a pointer to those lines"
            )
        }
        "lossless_verification_failed" => {
            "re-checking the compacted transcript found a pointer that did not hold, so every call was kept (fail-safe)"
        }
        "recoverable_verification_failed" => {
            "re-checking the compacted transcript found a recovery note that did not hold, so every call was kept (fail-safe)"
        }
        "jev_unavailable_fail_safe" | "laya_unavailable_fail_safe" => {
            "the judge could not be reached, so every call was kept (fail-safe)"
        }
        "recoverable_file_read" => {
            "the output is a file read that no later call changes, so it can be re-read"
        }
        "recoverable_read_only_command" => {
            "the output comes from a read-only command that can simply be run again"
        }
        "replace_disk_verified" => {
            "the file on disk holds exactly this output, so it can be re-read"
        }
        "keep_disk_mismatch" | "disk_content_differs" => {
            "the file on disk no longer holds this output, so it was kept"
        }
        "keep_disk_missing" => "the file is no longer on disk, so the output was kept",
        "keep_disk_not_regular" => "the path on disk is not a regular file, so the output was kept",
        "keep_disk_outside_root" => {
            "the path leaves its directory through a symlink or '..', so the output was kept"
        }
        "keep_disk_too_large" => "the file on disk is too large to check, so the output was kept",
        "keep_disk_unreadable" => "the file on disk could not be read, so the output was kept",
        "keep_disk_changed_before_emit" => {
            "the file changed on disk while compacting, so the output was kept"
        }
        "latest_error_result" => "it is the latest failed result, which is always kept",
        "call_before_latest_error" => "it is the call just before the latest failure, which is always kept",
        "pinned_recent_result" => "its result is in one of the newest messages, so it was kept",
        "failed_result" => "the result reports a failure, so it was kept",
        "named_in_goal_or_recent_turns" => {
            "the goal or a recent turn names this file or command, so it was kept"
        }
        "file_written_later" => "a later call may change this file, so re-reading would not give the same output; kept",
        "read_range_unknown" => "the read's line range is unknown, so it could not be re-read exactly; kept",
        "not_recoverable" => "there is no safe way to recover this output, so it was kept",
        "kept_default" => "no rule applied, so it was kept",
        "command_output_changed_later" => {
            "the same command gave a different output later, so re-running it would not give this one back; kept"
        }
        "command_pointers_disabled" => {
            "re-running commands is off (--allow-command-pointers not given), so the output was kept"
        }
        "read_range_empty" => "the read covered no lines, so there was nothing to point at; kept",
        "relative_path_without_cwd" => {
            "the read names a relative path and the session's working directory is unknown; kept"
        }
        "temp_path" => "the file is in a temporary directory and may be gone; kept",
        "latest_git_state" => "it is the latest git status/diff/log, which is always kept",
        "latest_task_state" => "it is the latest plan or task list, which is always kept",
        "latest_artifact_edit" => "it is the latest edit of a file, which is always kept",
        "latest_user_question" => "it is the latest question to the user, which is always kept",
        "latest_tool_result" => "it is the most recent tool result, which is always kept",
        "named_in_goal" => "the goal names this file or command, so it was kept",
        "named_in_recent_turns" => "a recent turn names this file or command, so it was kept",
        "not_stash_eligible" => "neither the lossy nor the recoverable rules would remove it, so it was kept",
        "stash_write_failed" => "the output could not be written to the stash, so it was kept",
        "large_old_output_trimmed" => "a large old output: only its head and tail were kept",
        "stale_read_far_from_recent_work" => {
            "a file read far from the recent work, so it was dropped"
        }
        _ => {
            if let Some(id) = code.strip_prefix("superseded_by_later_call:") {
                return format!(
                    "the same call ran again later ({}) with the same output, so this one was dropped",
                    one_line(id)
                );
            }
            if let Some(inner) = code.strip_prefix("stashed:") {
                return format!(
                    "stored in the stash (lcc recall gives it back byte for byte) because {}",
                    reason_words(inner, kept_at)
                );
            }
            if let Some(guard) = code.strip_prefix("trim_guard_") {
                return format!(
                    "a large output kept whole because a guard applies ({})",
                    one_line(guard).replace('_', " ")
                );
            }
            return format!("recorded as '{}'", one_line(code));
        }
    };
    fixed.to_string()
}

/// Calls and results of the source transcript, by id (first occurrence wins).
struct SourceIndex<'t> {
    src: &'t str,
    calls: HashMap<&'t str, &'t Call>,
    results: HashMap<&'t str, &'t ToolResult>,
}

impl<'t> SourceIndex<'t> {
    fn new(t: &'t Transcript<'t>) -> Self {
        let mut calls = HashMap::new();
        let mut results = HashMap::new();
        for m in &t.messages {
            for c in &m.calls {
                calls.entry(c.id.as_str()).or_insert(c);
            }
            for r in &m.results {
                results.entry(r.id.as_str()).or_insert(r);
            }
        }
        SourceIndex {
            src: t.src,
            calls,
            results,
        }
    }
}

fn show_source(o: &mut String, index: &SourceIndex, id: Option<&str>) {
    let Some(id) = id else {
        field(o, "source", "(this decision has no call id to look up)");
        return;
    };
    let call = index.calls.get(id);
    let result = index.results.get(id);
    if call.is_none() && result.is_none() {
        field(
            o,
            "source",
            &format!("(call {} is not in the source transcript)", one_line(id)),
        );
        return;
    }
    match call {
        Some(c) => field(
            o,
            "input",
            &cut(&one_line(&json::py_dumps(&c.input, false)), INPUT_MAX),
        ),
        None => field(o, "input", "(the call is not in the source transcript)"),
    }
    let Some(r) = result else {
        field(o, "result", "(no result in the source transcript)");
        return;
    };
    let label = if r.is_error { "error" } else { "result" };
    let text = r.text.get(index.src);
    if text.is_empty() {
        field(o, label, "(empty)");
        return;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, line) in lines.iter().take(RESULT_LINES).enumerate() {
        let shown = format!(
            "| {}",
            cut(&one_line(line.trim_end_matches('\r')), LINE_MAX)
        );
        field(o, if i == 0 { label } else { "" }, &shown);
    }
    if lines.len() > RESULT_LINES {
        let rest = lines.len() - RESULT_LINES;
        field(
            o,
            "",
            &format!(
                "| ... {} more line{}",
                big(rest as u64),
                if rest == 1 { "" } else { "s" }
            ),
        );
    }
}

/// Make a value safe to print on one line: control characters (newlines included) become
/// visible escapes, so a report or transcript cannot break the layout or drive the terminal.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Cut to `max` characters, marking the cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push_str(" ...");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODES: [&str; 13] = [
        "pinned_first_message",
        "pinned_recent",
        "result_still_needed",
        "call_kept_result_trimmed",
        "short_result_kept_whole",
        "trim_disabled_kept_whole",
        "call_and_result_not_needed",
        "not_judged_fail_safe",
        "half_judged_kept_fail_safe",
        "no_lossless_superseder",
        "identical_output_kept_later",
        "output_lines_of_later",
        "lossless_verification_failed",
    ];

    #[test]
    fn every_reason_code_has_its_own_sentence() {
        let mut seen = std::collections::HashSet::new();
        for code in CODES {
            let s = reason_words(code, Some("toolu_9"));
            assert!(!s.starts_with("recorded as"), "{code} has no sentence");
            assert!(!s.contains(code), "{code}: the sentence repeats the code");
            assert!(seen.insert(s), "{code}: sentence shared with another code");
        }
        assert_eq!(
            reason_words("made_up_code", None),
            "recorded as 'made_up_code'"
        );
        assert!(reason_words("identical_output_kept_later", Some("toolu_9")).contains("toolu_9"));
    }

    #[test]
    fn a_short_result_kept_by_the_rules_is_not_blamed_on_the_judge() {
        let judge = serde_json::json!({"reason": "short_result_kept_whole", "source": "jev"});
        let rules = serde_json::json!({"reason": "short_result_kept_whole", "source": "rules"});
        assert!(why(&Fields(&judge)).starts_with("the judge would have trimmed"));
        let r = why(&Fields(&rules));
        assert_eq!(
            r,
            "the rules policy would have stashed the result, but its stash note is no shorter, so it was kept whole"
        );
        assert!(!r.contains("judge"), "{r}");
    }

    #[test]
    fn one_line_escapes_controls() {
        assert_eq!(one_line("a\nb\tc\u{1b}[31m"), "a\\nb\\tc\\u{1b}[31m");
        assert_eq!(cut("abcdef", 3), "abc ...");
        assert_eq!(cut("abc", 3), "abc");
    }

    #[test]
    fn only_accepts_kinds_and_group_names() {
        assert_eq!(parse_only(" Dropped ").unwrap(), "drop");
        assert_eq!(parse_only("PIN").unwrap(), "pin");
        let e = parse_only("kept-ish").unwrap_err();
        assert!(e.contains("--only") && e.contains(ONLY_VALUES), "{e}");
    }
}
