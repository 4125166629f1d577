//! Flags and environment turned into validated settings, once.
//!
//! This is the only module that reads the environment, and the one place flags are refused
//! or range-checked (exit 2, naming the flag).

use std::path::PathBuf;

use crate::cli::CompactArgs;
use crate::decide::Thresholds;
use crate::error::Error;
use crate::rules::{RulesMode, RulesOptions};
use crate::tokens::Counter;

/// Which provider the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderChoice {
    Auto,
    Jev,
    Laya,
    Rules,
}

impl ProviderChoice {
    pub fn name(self) -> &'static str {
        match self {
            ProviderChoice::Auto => "auto",
            ProviderChoice::Jev => "jev",
            ProviderChoice::Laya => "laya",
            ProviderChoice::Rules => "rules",
        }
    }
}

/// Limits for fitting the judge's state and packing requests.
#[derive(Debug, Clone, Copy)]
pub struct FitLimits {
    pub max_state_tokens: usize,
    pub max_request_tokens: usize,
    pub batch_size: usize,
}

/// What the environment says (read once, here).
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `LCC_DISABLE_NETWORK=1`.
    pub network_disabled: bool,
    /// Where `--rules-mode stashed` stores removed outputs: `$LCC_STASH_DIR`, else
    /// `$XDG_CACHE_HOME/lcc/stash`, else `$HOME/.cache/lcc/stash` (`None` when none is set).
    pub stash_dir: Option<PathBuf>,
}

impl Env {
    pub fn read() -> Env {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let stash_dir = var("LCC_STASH_DIR")
            .or_else(|| {
                var("XDG_CACHE_HOME")
                    .filter(|p| p.is_absolute())
                    .map(|p| p.join("lcc").join("stash"))
            })
            .or_else(|| var("HOME").map(|h| h.join(".cache").join("lcc").join("stash")));
        Env {
            network_disabled: std::env::var("LCC_DISABLE_NETWORK").is_ok_and(|v| v == "1"),
            stash_dir,
        }
    }

    /// The stash directory, or the error that says how to set one.
    pub fn require_stash_dir(&self) -> Result<PathBuf, Error> {
        self.stash_dir.clone().ok_or_else(|| {
            usage("no stash directory: set LCC_STASH_DIR (or HOME) to say where removed outputs are stored")
        })
    }
}

/// Everything `compact` needs, validated.
#[derive(Debug, Clone)]
pub struct CompactSettings {
    pub input: String,
    pub question: String,
    pub provider: ProviderChoice,
    pub rules_mode: RulesMode,
    /// `--workspace-root`, `--no-disk-check`, `--allow-command-pointers`, the stash.
    pub rules: RulesOptions,
    pub thresholds: Thresholds,
    pub preserve_recent: usize,
    pub fit: FitLimits,
    pub max_workers: usize,
    pub min_reduction: f64,
    pub counter: Counter,
    pub jev_model: String,
    pub output: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub dry_run: bool,
    pub quiet: bool,
    pub env: Env,
}

fn usage(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

fn int_at_least(flag: &str, v: i64, min: i64) -> Result<usize, Error> {
    if v < min {
        return Err(usage(format!("{flag} must be >= {min} (got {v})")));
    }
    usize::try_from(v).map_err(|_| usage(format!("{flag} is out of range (got {v})")))
}

impl CompactSettings {
    pub fn from_args(a: &CompactArgs, env: Env) -> Result<CompactSettings, Error> {
        let refused = a.refused.given();
        if !refused.is_empty() {
            return Err(usage(format!(
                "these options do not apply to --mode tool-calls: {} (they belong to block mode, which this tool does not implement)",
                refused.join(", ")
            )));
        }
        match a.mode.as_str() {
            "tool-calls" => {}
            "blocks" => {
                return Err(usage(
                    "--mode blocks is not part of this tool: lcc compacts tool calls only (--mode tool-calls, the default)",
                ))
            }
            other => {
                return Err(usage(format!(
                    "--mode must be 'tool-calls' (got '{other}')"
                )))
            }
        }
        let provider = match a.provider.as_str() {
            "auto" => ProviderChoice::Auto,
            "jev" => ProviderChoice::Jev,
            "laya" => ProviderChoice::Laya,
            "rules" => ProviderChoice::Rules,
            "mechanical" | "nimble" => {
                return Err(usage(format!(
                    "tool-call compaction needs a semantic judge; '{}' cannot answer 'is this tool output still needed'. Use --provider jev, laya, auto, or rules (offline policy).",
                    a.provider
                )))
            }
            other => {
                return Err(usage(format!(
                    "unknown provider '{other}' for --provider; expected auto, jev, laya or rules"
                )))
            }
        };
        let rules_mode = match a.rules_mode.as_deref().unwrap_or("lossless") {
            "lossless" => RulesMode::Lossless,
            "recoverable" => RulesMode::Recoverable,
            "lossy" => RulesMode::Lossy,
            "stashed" => RulesMode::Stashed,
            other => {
                return Err(usage(format!(
                "--rules-mode must be one of lossless, recoverable, lossy, stashed (got '{other}')"
            )))
            }
        };
        let rules = rules_options(a, provider, rules_mode, &env)?;
        if matches!(provider, ProviderChoice::Jev | ProviderChoice::Laya) {
            return Err(usage(format!(
                "--provider {} is not yet supported by this version; use --provider rules (or auto)",
                provider.name()
            )));
        }
        if !(0.0..=1.0).contains(&a.threshold) {
            return Err(usage(format!(
                "--threshold must be between 0 and 1 (got {})",
                a.threshold
            )));
        }
        let trim_head_chars = int_at_least("--trim-head-chars", a.trim_head_chars, 0)?;
        let preserve_recent = int_at_least("--preserve-recent", a.preserve_recent, 0)?;
        let max_state_tokens = int_at_least("--max-state-tokens", a.max_state_tokens, 64)?;
        let max_request_tokens = int_at_least("--max-request-tokens", a.max_request_tokens, 65)?;
        if max_request_tokens <= max_state_tokens {
            return Err(usage(format!(
                "--max-request-tokens must be greater than --max-state-tokens (got {max_request_tokens} <= {max_state_tokens})"
            )));
        }
        let batch_size = int_at_least("--batch-size", a.batch_size, 1)?;
        let max_workers = int_at_least("--max-workers", a.max_workers, 1)?;
        if max_workers > 64 {
            return Err(usage(format!(
                "--max-workers must be between 1 and 64 (got {max_workers})"
            )));
        }
        if !(0.0..=1.0).contains(&a.min_reduction) {
            return Err(usage(format!(
                "--min-reduction must be between 0 and 1 (got {})",
                a.min_reduction
            )));
        }
        if a.model.trim().is_empty() {
            return Err(usage("--model must not be empty"));
        }
        if a.dry_run && a.output.is_some() {
            // Allowed: the report is still written; the transcript is not.
        }
        Ok(CompactSettings {
            input: a.input.clone(),
            question: a.question.clone(),
            provider,
            rules_mode,
            rules,
            thresholds: Thresholds {
                threshold: a.threshold,
                trim_head_chars,
            },
            preserve_recent,
            fit: FitLimits {
                max_state_tokens,
                max_request_tokens,
                batch_size,
            },
            max_workers,
            min_reduction: a.min_reduction,
            counter: Counter::for_model(&a.model),
            jev_model: a.jev_model.clone(),
            output: a.output.clone(),
            report: a.report.clone(),
            dry_run: a.dry_run,
            quiet: a.quiet,
            env,
        })
    }
}

/// Validate the rules flags. They only mean something to the rules provider, asked for by
/// name (`auto` may pick a judge), and each only to the modes that use it.
fn rules_options(
    a: &CompactArgs,
    provider: ProviderChoice,
    mode: RulesMode,
    env: &Env,
) -> Result<RulesOptions, Error> {
    let given: Vec<(&str, bool)> = vec![
        ("--rules-mode", a.rules_mode.is_some()),
        ("--workspace-root", a.workspace_root.is_some()),
        ("--no-disk-check", a.no_disk_check),
        ("--allow-command-pointers", a.allow_command_pointers),
    ];
    for (flag, on) in &given {
        if *on && provider != ProviderChoice::Rules {
            return Err(usage(format!(
                "{flag} only applies to the offline rules policy: pass --provider rules explicitly (got --provider {}; auto may pick a judge, which ignores it)",
                provider.name()
            )));
        }
    }
    let uses_root = matches!(mode, RulesMode::Recoverable | RulesMode::Stashed);
    if a.workspace_root.is_some() && !uses_root {
        return Err(usage(format!(
            "--workspace-root only applies to --rules-mode recoverable or stashed (got --rules-mode {})",
            mode.name()
        )));
    }
    if a.no_disk_check && a.workspace_root.is_none() {
        return Err(usage(
            "--no-disk-check needs --workspace-root: without a workspace root there is no disk check to turn off",
        ));
    }
    if a.allow_command_pointers && mode != RulesMode::Recoverable {
        return Err(usage(format!(
            "--allow-command-pointers only applies to --rules-mode recoverable (got --rules-mode {})",
            mode.name()
        )));
    }
    let workspace_root = match &a.workspace_root {
        None => None,
        Some(root) => {
            if !crate::io::is_dir(root) {
                return Err(usage(format!(
                    "--workspace-root {} is not a directory",
                    root.display()
                )));
            }
            Some(
                std::path::absolute(root)
                    .map_err(|e| usage(format!("--workspace-root {}: {e}", root.display())))?,
            )
        }
    };
    let stash_dir = if mode == RulesMode::Stashed && provider == ProviderChoice::Rules {
        Some(env.require_stash_dir()?)
    } else {
        None
    };
    Ok(RulesOptions {
        workspace_root,
        disk_check: !a.no_disk_check,
        allow_command_pointers: a.allow_command_pointers,
        stash_dir,
    })
}
