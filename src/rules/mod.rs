//! The offline rules provider: deterministic policies that need no model and no network.
//!
//! | mode | removes | `semantic_guarantee` |
//! |---|---|---|
//! | [`lossless`] (default) | an output a later kept output holds byte for byte (a pointer) | `lossless` |
//! | [`recoverable`] | lossless, plus outputs a re-read of an unchanged file (or, opt-in, a re-run of a read-only command) gives back | `recoverable` |
//! | [`lossy`] (experimental) | drops and trims by structural rules; may remove needed output | `none` |
//! | [`stash`] (`stashed`) | what lossy or recoverable would remove, after storing the bytes for `lcc recall` | `stashed` |
//!
//! Every policy is linear in the transcript (hash indexes, one pass per rule). The verified
//! modes (lossless, recoverable, stashed) re-check their own output, and keep everything if
//! the check finds a violation.

pub mod calls;
pub mod disk;
pub mod lossless;
pub mod lossy;
pub mod recoverable;
pub mod shell;
pub mod stash;
pub mod text;

use std::path::PathBuf;

use crate::decide::Decision;
use crate::pin::Pins;
use crate::tokens::Counter;
use crate::transcript::{BlockRef, Transcript};

pub use disk::{FileProbe, Stamp};

/// The rules policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesMode {
    Lossless,
    Recoverable,
    Lossy,
    Stashed,
}

impl RulesMode {
    pub fn name(self) -> &'static str {
        match self {
            RulesMode::Lossless => "lossless",
            RulesMode::Recoverable => "recoverable",
            RulesMode::Lossy => "lossy",
            RulesMode::Stashed => "stashed",
        }
    }

    /// Does the pass re-check its own output (and keep everything on a violation)?
    pub fn verified(self) -> bool {
        self != RulesMode::Lossy
    }

    /// The report's `semantic_guarantee` when the pass decided something and verified.
    pub fn guarantee(self) -> &'static str {
        match self {
            RulesMode::Lossy => "none",
            m => m.name(),
        }
    }
}

/// The rules flags (`--workspace-root`, `--no-disk-check`, `--allow-command-pointers`) and
/// where the stash lives.
#[derive(Debug, Clone, Default)]
pub struct RulesOptions {
    pub workspace_root: Option<PathBuf>,
    pub disk_check: bool,
    pub allow_command_pointers: bool,
    pub stash_dir: Option<PathBuf>,
}

impl RulesOptions {
    fn recoverable(&self) -> recoverable::Options<'_> {
        recoverable::Options {
            root: self.workspace_root.as_deref(),
            disk_check: self.disk_check,
            allow_command_pointers: self.allow_command_pointers,
        }
    }

    /// The report's `recoverability_check` for a mode: `disk` or `transcript_proxy` for
    /// recoverable, none otherwise.
    pub fn recoverability_check(&self, mode: RulesMode) -> Option<&'static str> {
        (mode == RulesMode::Recoverable).then(|| self.recoverable().check_name())
    }
}

/// What a rules pass leaves for the command layer besides its decisions.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// `disk` or `transcript_proxy` (recoverable only).
    pub recoverability_check: Option<&'static str>,
    /// Disk-verified replacements: (decision index, stamp), re-hashed before writing.
    pub disk: Vec<(usize, Stamp)>,
    /// Stashed results: (decision index, SHA-256 hex of the result text), written to the
    /// stash before the transcript.
    pub stash: Vec<(usize, String)>,
    /// Where the stash is (stashed mode).
    pub stash_dir: Option<PathBuf>,
    /// The workspace root the disk stamps are checked against.
    pub root: Option<PathBuf>,
    /// The stash notes still lack their token counts: call [`stash::finish_notes`] before
    /// rebuilding.
    pub notes_pending: bool,
}

/// Run a policy over the candidates. Decisions come back in candidate order.
///
/// Stash notes name the token count of the output they replace. With a `counter` they are
/// counted here; without one they are left pending (`Extras::notes_pending`) for a caller
/// that counts the transcript anyway and fills them in with [`stash::finish_notes`].
pub fn decide(
    mode: RulesMode,
    t: &Transcript,
    pins: &Pins,
    goal: &str,
    opts: &RulesOptions,
    probe: &dyn FileProbe,
    counter: Option<Counter>,
) -> (Vec<Decision>, Extras) {
    let mut extras = Extras {
        recoverability_check: opts.recoverability_check(mode),
        stash_dir: (mode == RulesMode::Stashed)
            .then(|| opts.stash_dir.clone())
            .flatten(),
        root: opts.workspace_root.clone(),
        ..Extras::default()
    };
    if pins.candidates.is_empty() {
        return (Vec::new(), extras);
    }
    let decisions = match mode {
        RulesMode::Lossless => lossless::decide(t, &pins.candidates),
        RulesMode::Recoverable => {
            let ctx = calls::Context::new(t, pins, goal);
            let (d, stamps) = recoverable::decide(&ctx, &opts.recoverable(), probe);
            extras.disk = stamps;
            d
        }
        RulesMode::Lossy => lossy::decide(&calls::Context::new(t, pins, goal)),
        RulesMode::Stashed => {
            let ctx = calls::Context::new(t, pins, goal);
            let (mut d, stash) = stash::decide(&ctx, &opts.recoverable(), probe);
            extras.stash = stash;
            extras.notes_pending = true;
            if let Some(counter) = counter {
                let results: Vec<BlockRef> = extras
                    .stash
                    .iter()
                    .filter_map(|(k, _)| d[*k].result)
                    .collect();
                let keys: Vec<_> = results.iter().map(|&r| t.text_key(t.result(r))).collect();
                let counts: crate::fasthash::FastMap<BlockRef, usize> = results
                    .iter()
                    .copied()
                    .zip(counter.count_texts(&keys).into_iter().map(|(n, _)| n))
                    .collect();
                stash::finish_notes(t, &mut d, &mut extras, |r| counts[&r]);
            }
            d
        }
    };
    (decisions, extras)
}

/// Re-check a verified mode's output against the original. Returns the violations.
pub fn verify(
    mode: RulesMode,
    original: &Transcript,
    compacted: &Transcript,
    pins: &Pins,
    opts: &RulesOptions,
) -> Vec<String> {
    match mode {
        RulesMode::Lossless | RulesMode::Lossy => lossless::verify(original, compacted),
        RulesMode::Recoverable => {
            let ctx = calls::Context::new(original, pins, "");
            let allow = recoverable::allow(&ctx, opts.allow_command_pointers);
            lossless::verify_with(original, compacted, &allow)
        }
        RulesMode::Stashed => lossless::verify_with(original, compacted, &stash::allow),
    }
}

/// [`verify`] from the decisions instead of a re-parsed output (the rebuild only changes the
/// decided results' texts): every replaced result must carry a note its mode may write for
/// that very call and output.
pub fn verify_decisions(
    mode: RulesMode,
    t: &Transcript,
    pins: &Pins,
    opts: &RulesOptions,
    decisions: &[Decision],
) -> Vec<String> {
    match mode {
        RulesMode::Lossless | RulesMode::Lossy => lossless::verify_decisions(t, decisions),
        RulesMode::Recoverable => {
            let ctx = calls::Context::new(t, pins, "");
            let allow = recoverable::allow(&ctx, opts.allow_command_pointers);
            lossless::verify_decisions_with(t, decisions, &allow)
        }
        RulesMode::Stashed => lossless::verify_decisions_with(t, decisions, &stash::allow),
    }
}

/// Re-hash the files disk-verified replacements point at; the decision indexes whose file
/// changed since the check.
pub fn changed_since_check(extras: &Extras, probe: &dyn FileProbe) -> Vec<usize> {
    let Some(root) = extras.root.as_deref() else {
        return Vec::new();
    };
    extras
        .disk
        .iter()
        .filter(|(_, stamp)| !disk::unchanged(probe, root, stamp))
        .map(|(k, _)| *k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::Action;
    use crate::transcript;

    /// Four reads and a test run; message 0 and the last message are pinned.
    const SRC: &str = r#"{"messages": [
        {"role": "user", "text": "fix the parser"},
        {"role": "assistant", "text": "", "toolUses": [
            {"tool_use_id": "a", "tool": "Read", "input": {"file_path": "/r/a.py"}},
            {"tool_use_id": "b", "tool": "Bash", "input": {"command": "cat /r/b.py"}},
            {"tool_use_id": "l", "tool": "Bash", "input": {"command": "ls /r/src"}},
            {"tool_use_id": "t", "tool": "Bash", "input": {"command": "pytest -q"}}]},
        {"role": "user", "text": "", "toolResults": [
            {"tool_use_id": "a", "text": "     1\tone\n     2\ttwo\n     3\tthree and more text here"},
            {"tool_use_id": "b", "text": "bee one\nbee two\nbee three and more text here"},
            {"tool_use_id": "l", "text": "a.py\nb.py\nc.py\nd.py\ne.py\nf.py\ng.py\nh.py\ni.py"},
            {"tool_use_id": "t", "text": "all 3 tests passed, nothing else to see here"}]},
        {"role": "assistant", "text": "done"}
    ]}"#;

    fn setup() -> (Transcript<'static>, Pins) {
        let t = transcript::parse(SRC, None).unwrap();
        let pairs = t.pairs().unwrap();
        let pins = crate::pin::select(&t, &pairs, 1);
        (t, pins)
    }

    /// The candidates' decisions with some results replaced by `note`s.
    fn forged(t: &Transcript, pins: &Pins, notes: &[(&str, &str)]) -> Vec<Decision> {
        pins.candidates
            .iter()
            .map(|p| {
                let id = &t.call(p.call).id;
                let action = match notes.iter().find(|(i, _)| i == id) {
                    Some((_, n)) => Action::Replace {
                        note: (*n).to_string(),
                        recover: String::new(),
                    },
                    None => Action::Keep,
                };
                Decision {
                    call: p.call,
                    result: Some(p.result),
                    action,
                    keep_call: None,
                    keep_result: None,
                    source: "rules",
                    reason: "test".into(),
                }
            })
            .collect()
    }

    fn check(mode: RulesMode, allow_cmd: bool, notes: &[(&str, &str)]) -> Vec<String> {
        let (t, pins) = setup();
        let opts = RulesOptions {
            allow_command_pointers: allow_cmd,
            ..RulesOptions::default()
        };
        verify_decisions(mode, &t, &pins, &opts, &forged(&t, &pins, notes))
    }

    #[test]
    fn recoverable_pointers_must_be_their_own_calls() {
        let ok = [
            ("a", "[removed: re-read /r/a.py to recover]"),
            ("b", "[removed: re-read /r/b.py to recover; content verified on disk at compaction time]"),
        ];
        assert_eq!(
            check(RulesMode::Recoverable, false, &ok),
            Vec::<String>::new()
        );
        let cmd = [("l", "[removed: re-run `ls /r/src` to recover]")];
        assert_eq!(
            check(RulesMode::Recoverable, true, &cmd),
            Vec::<String>::new()
        );
        for bad in [
            ("a", "[removed: re-read /r/b.py to recover]"),
            ("a", "[removed: re-read /r/a.py (lines 1-2) to recover]"),
            ("b", "[removed: re-run `cat /r/b.py` to recover]"),
            ("t", "[removed: re-run `pytest -q` to recover]"),
            ("a", "[identical output kept at b]"),
        ] {
            let v = check(RulesMode::Recoverable, false, &[bad]);
            assert_eq!(v.len(), 1, "{bad:?}");
            assert!(
                v[0].starts_with(&format!("result {} changed", bad.0)),
                "{v:?}"
            );
        }
        // A command pointer is only valid when command pointers are allowed.
        assert_eq!(check(RulesMode::Recoverable, false, &cmd).len(), 1);
        // Lossless accepts no recovery pointer at all.
        assert!(!check(RulesMode::Lossless, false, &ok).is_empty());
    }

    #[test]
    fn stash_notes_must_hold_their_own_hash() {
        let (t, _) = setup();
        let text = t.text(&t.messages[2].results[1]);
        let good = stash::note(&text, 9, &stash::digest(&text));
        assert_eq!(
            check(RulesMode::Stashed, false, &[("b", &good)]),
            Vec::<String>::new()
        );
        // The same note on another result, or a note with another hash, is refused.
        assert_eq!(check(RulesMode::Stashed, false, &[("a", &good)]).len(), 1);
        let other = stash::note(&text, 9, &stash::digest("something else"));
        assert_eq!(check(RulesMode::Stashed, false, &[("b", &other)]).len(), 1);
        // Recovery pointers are not stash notes.
        let ptr = [("a", "[removed: re-read /r/a.py to recover]")];
        assert_eq!(check(RulesMode::Stashed, false, &ptr).len(), 1);
    }

    #[test]
    fn verify_on_a_reparsed_output_rejects_changed_texts() {
        let (t, pins) = setup();
        let opts = RulesOptions::default();
        let note = "[removed: re-read /r/a.py to recover]";
        let good = SRC.replace(
            r#""     1\tone\n     2\ttwo\n     3\tthree and more text here""#,
            &format!("\"{note}\""),
        );
        let after = transcript::parse(&good, None).unwrap();
        assert_eq!(
            verify(RulesMode::Recoverable, &t, &after, &pins, &opts),
            Vec::<String>::new()
        );
        let edited = good.replace("\"done\"", "\"done!\"");
        let after = transcript::parse(&edited, None).unwrap();
        assert_eq!(
            verify(RulesMode::Recoverable, &t, &after, &pins, &opts),
            vec!["message 3: text changed".to_string()]
        );
        let input = good.replace("cat /r/b.py", "cat /r/c.py");
        let after = transcript::parse(&input, None).unwrap();
        assert_eq!(
            verify(RulesMode::Recoverable, &t, &after, &pins, &opts),
            vec!["message 1: tool calls changed".to_string()]
        );
    }
}
