//! The short stderr summary after `compact` (suppressed by `--quiet`). Pure.

use std::fmt::Write;

use crate::report::Report;
use crate::settings::CompactSettings;

/// Group digits by thousands with a thin space-like plain space: `12 345`.
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

pub fn render(r: &Report, s: &CompactSettings) -> String {
    let mut o = String::new();
    let provider = match r.rules_mode {
        Some(m) => format!("{} ({m})", r.provider_used),
        None => r.provider_used.clone(),
    };
    let degraded = if r.degraded {
        format!(
            "  [degraded: {}]",
            r.degradation_reason.as_deref().unwrap_or("unknown")
        )
    } else {
        String::new()
    };
    let pins = r.decisions.iter().filter(|d| d.source == "pin").count();
    let _ = writeln!(o, "lcc compact: tool calls");
    let _ = writeln!(o, "  provider    {provider}{degraded}");
    let _ = writeln!(o, "  guarantee   {}", r.semantic_guarantee);
    let _ = writeln!(
        o,
        "  decisions   {} keep, {} trim, {} drop, {} dedupe, {} replace, {pins} pinned",
        r.tool_calls_kept,
        r.tool_calls_trimmed,
        r.tool_calls_dropped,
        r.tool_calls_deduped,
        r.tool_calls_replaced
    );
    if let Some(check) = r.recoverability_check {
        let _ = writeln!(o, "  recovery    pointers checked by {check}");
    }
    if r.tool_calls_stashed > 0 {
        let _ = writeln!(
            o,
            "  stash       {} output(s) in {} (lcc recall <id> prints one back)",
            r.tool_calls_stashed,
            r.stash_dir.as_deref().unwrap_or("?")
        );
    }
    let _ = writeln!(
        o,
        "  messages    {} -> {}",
        thousands(r.messages_before),
        thousands(r.messages_after)
    );
    let _ = writeln!(
        o,
        "  tokens      {} -> {} ({}, {} {}){}",
        thousands(r.tokens_before),
        thousands(r.tokens_after),
        crate::report::change(r.tokens_before, r.tokens_after),
        r.token_count_method,
        r.tokenizer,
        if r.worth_it {
            ""
        } else {
            ", below --min-reduction"
        }
    );
    if r.requests > 0 {
        let windows = if r.state_windows > 1 {
            format!(", {} windows", r.state_windows)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "  judge       {} request(s), state {} tokens ({}{windows})",
            r.requests, r.state_tokens, r.state_fit_stage
        );
    }
    if let Some(p) = &s.report {
        let _ = writeln!(o, "  report      {}", p.display());
    }
    if s.dry_run {
        let _ = writeln!(o, "  output      none (--dry-run)");
    } else if let Some(p) = &s.output {
        let _ = writeln!(o, "  output      {}", p.display());
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(12345), "12 345");
        assert_eq!(super::thousands(1234567), "1 234 567");
    }

    #[test]
    fn change_says_larger_when_it_grew() {
        use crate::report::change;
        assert_eq!(change(1000, 750), "25.0% smaller");
        assert_eq!(change(1000, 1000), "0.0% smaller");
        assert_eq!(change(56548, 56596), "0.1% larger");
        assert_eq!(change(0, 0), "0.0% smaller");
        assert_eq!(change(0, 5), "larger (from nothing)");
    }
}
