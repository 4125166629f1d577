//! The command line, as clap sees it. No logic here: [`crate::settings`] turns these raw
//! values into validated settings (and refuses what does not apply).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Compact coding-agent transcripts by tool call, without summarizing.
///
/// lcc pairs every tool call with its result, asks a judge (Jev, a local laya server) or an
/// offline rules policy which pairs the session no longer needs, drops or trims those, keeps
/// everything else byte for byte, and writes a JSON report that `lcc explain` renders.
#[derive(Debug, Parser)]
#[command(name = "lcc", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compact a transcript: keep, trim or drop each tool call/result pair.
    Compact(Box<CompactArgs>),
    /// Explain a report: why every call was kept, trimmed, dropped, deduped or replaced.
    Explain(ExplainArgs),
    /// Print a tool output that `--rules-mode stashed` removed, after checking its hash.
    Recall(RecallArgs),
    /// Serve the same pass to MCP clients over stdio (tools compact_transcript, explain_report, recall).
    Mcp,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 printed, 1 I/O failure, 2 unknown id, bad --lines, or a \
stash file that fails its hash check (nothing is printed then)."
)]
pub struct RecallArgs {
    /// The id after `lcc recall` in a stash note (12 to 64 lowercase hex digits).
    pub id: String,

    /// Print only lines a-b (1-based, inclusive; `a` alone for one line).
    #[arg(long, value_name = "A-B")]
    pub lines: Option<String>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 success (also when degraded), 1 I/O failure, \
2 bad input, refused or out-of-range flag, or a state that cannot be fitted."
)]
pub struct CompactArgs {
    /// Transcript to compact (a file, or `-` for stdin).
    pub input: String,

    /// The session's goal: what the rest of the session is for.
    ///
    /// The judge is asked whether each tool output still serves this goal. Empty is allowed.
    #[arg(short = 'q', long = "question", default_value = "")]
    pub question: String,

    /// Compaction mode. Only `tool-calls` exists in this tool.
    #[arg(long, default_value = "tool-calls")]
    pub mode: String,

    /// Who decides: `auto`, `jev`, `laya` or `rules`.
    ///
    /// `rules` is offline and deterministic (see --rules-mode). `laya` asks a local laya server
    /// (see --laya-endpoint). `auto` uses Jev when a key is found and the network is allowed,
    /// otherwise laya when its server answers `/health`, otherwise the rules policy, and says
    /// so in the report.
    #[arg(long, default_value = "auto")]
    pub provider: String,

    /// Policy for `--provider rules`: `lossless` (the default), `recoverable`, `lossy`, `stashed`.
    ///
    /// lossless: replaces an output only by a pointer to a later output holding the same
    /// bytes. recoverable: also replaces an old read by `[removed: re-read <path> to
    /// recover]` when the file is unchanged (see --workspace-root). lossy (EXPERIMENTAL:
    /// may remove output the agent still needs; no guarantee): drops superseded and stale
    /// outputs, trims large old ones. stashed: removes what lossy or recoverable would, but
    /// stores the exact bytes first ($LCC_STASH_DIR, default ~/.cache/lcc/stash); `lcc
    /// recall <id>` prints them back. A mode other than lossless needs --provider rules.
    #[arg(long = "rules-mode", value_name = "MODE", default_value = "lossless")]
    pub rules_mode: String,

    /// recoverable/stashed: let the files under this directory decide file pointers (the
    /// disk check): a read is replaced only when the file still holds exactly what was read.
    ///
    /// Without it, a read is replaced only when no later call in the transcript can have
    /// written the file. Needs --provider rules.
    #[arg(long = "workspace-root", value_name = "DIR")]
    pub workspace_root: Option<PathBuf>,

    /// With --workspace-root: skip the disk check (use the transcript alone).
    #[arg(long = "no-disk-check")]
    pub no_disk_check: bool,

    /// recoverable: also replace outputs of read-only commands (ls, rg, git status, ...) by
    /// ``[removed: re-run `<cmd>` to recover]``. Off by default: a re-run may differ.
    #[arg(long = "allow-command-pointers")]
    pub allow_command_pointers: bool,

    /// Keep a result when the judge's keep_result is at least this; trim when only keep_call is.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,

    /// Characters of a trimmed result to keep (0 disables trimming: the result is kept whole).
    #[arg(long = "trim-head-chars", default_value_t = 300)]
    pub trim_head_chars: i64,

    /// Newest messages pinned (never changed), besides the first message.
    #[arg(long = "preserve-recent", default_value_t = 6)]
    pub preserve_recent: i64,

    /// Token budget for the conversation state shown to the judge.
    #[arg(long = "max-state-tokens", default_value_t = 25_000)]
    pub max_state_tokens: i64,

    /// Token budget for one judge request (state + questions + envelope).
    #[arg(long = "max-request-tokens", default_value_t = 30_000)]
    pub max_request_tokens: i64,

    /// Most calls judged in one request [default: 8; for a session judged in windows, as
    /// many as the token budgets allow].
    #[arg(long = "batch-size")]
    pub batch_size: Option<i64>,

    /// Fail (exit 2) when the whole conversation does not fit --max-state-tokens even at
    /// the `calls-one-line` stage, as the Python release does, instead of judging it in windows.
    #[arg(long = "strict-fit")]
    pub strict_fit: bool,

    /// Use Jev's experimental long-context mode (header `TypeSafe-Danger-Zone-Long-Context`):
    /// --max-state-tokens and --max-request-tokens may then go up to 262144.
    #[arg(long = "long-context")]
    pub long_context: bool,

    /// Most judge requests in flight at once (1-64).
    #[arg(long = "max-workers", default_value_t = 4)]
    pub max_workers: i64,

    /// Token reduction under which the report says `worth_it: false` (0-1). Never changes output.
    #[arg(long = "min-reduction", default_value_t = 0.25)]
    pub min_reduction: f64,

    /// Model whose tokenizer counts the report's tokens (gpt-4.1, gpt-4o, o3: o200k_base;
    /// gpt-4, gpt-3.5: cl100k_base; others: o200k_base, marked approximate).
    #[arg(short = 'm', long, default_value = "gpt-4.1")]
    pub model: String,

    /// Jev model name sent to the System One API.
    #[arg(long = "jev-model", default_value = "jev-latest")]
    pub jev_model: String,

    /// System One URL of a local laya server (default: $LAYA_ENDPOINT, else
    /// http://127.0.0.1:8000/v1/systemone). http:// is allowed only for loopback hosts.
    #[arg(long = "laya-endpoint")]
    pub laya_endpoint: Option<String>,

    /// Context of the laya model, in tokens (512 for laya's English checkpoint, 1024 for the
    /// multilingual one; 256-8192). Each call's state is cut to fit it.
    #[arg(long = "laya-context-tokens", default_value_t = 1024)]
    pub laya_context_tokens: i64,

    /// Write the compacted transcript here (default, or `-`: stdout). May be the input file:
    /// it is replaced atomically.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,

    /// Write the JSON report here.
    #[arg(short = 'r', long)]
    pub report: Option<PathBuf>,

    /// Input format: lcc, claude-code, anthropic, openai-chat, openai-responses or codex
    /// (default: detected from the content). The output is written in the same format.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,

    /// Treat reading warnings as errors: a torn last JSONL line exits 2 instead of being
    /// left as it was.
    #[arg(long)]
    pub strict: bool,

    /// Decide and report, but write no transcript (and, with --rules-mode stashed, store
    /// nothing in the stash).
    #[arg(long = "dry-run")]
    pub dry_run: bool,

    /// Print no summary on stderr.
    #[arg(long)]
    pub quiet: bool,

    #[command(flatten)]
    pub refused: RefusedArgs,
}

/// Block-mode options of the Python release. They are accepted by the parser only so that
/// they can be refused with a clear message instead of a generic "unexpected argument".
#[derive(Debug, Args, Default)]
pub struct RefusedArgs {
    #[arg(long = "trim-threshold", hide = true)]
    pub trim_threshold: Option<String>,
    #[arg(long = "preserve-tail", hide = true)]
    pub preserve_tail: Option<String>,
    #[arg(long = "min-block-chars", hide = true)]
    pub min_block_chars: Option<String>,
    #[arg(long = "keep-regex", hide = true)]
    pub keep_regex: Option<String>,
    #[arg(long = "protect-prefix", hide = true)]
    pub protect_prefix: Option<String>,
    #[arg(long = "prefix-marker", hide = true)]
    pub prefix_marker: Option<String>,
    #[arg(long = "decisions-cache", hide = true)]
    pub decisions_cache: Option<String>,
    #[arg(long = "no-marker", hide = true)]
    pub no_marker: bool,
    #[arg(long = "marker-scores", hide = true)]
    pub marker_scores: Option<String>,
    #[arg(long = "append-to", hide = true)]
    pub append_to: Option<String>,
    #[arg(long = "require-exact-tokens", hide = true)]
    pub require_exact_tokens: bool,
    #[arg(long = "semantic-verify", hide = true)]
    pub semantic_verify: bool,
    #[arg(long = "no-sufficiency", hide = true)]
    pub no_sufficiency: bool,
    #[arg(long = "max-restorations", hide = true)]
    pub max_restorations: Option<String>,
    #[arg(long = "confidence-threshold", hide = true)]
    pub confidence_threshold: Option<String>,
    #[arg(long = "laya-model", hide = true)]
    pub laya_model: Option<String>,
    #[arg(long = "laya-device", hide = true)]
    pub laya_device: Option<String>,
    #[arg(long = "laya-context-limit", hide = true)]
    pub laya_context_limit: Option<String>,
    #[arg(long = "laya-temperature", hide = true)]
    pub laya_temperature: Option<String>,
}

impl RefusedArgs {
    /// The refused flags that were given, in a fixed order.
    pub fn given(&self) -> Vec<&'static str> {
        let flags: [(&str, bool); 19] = [
            ("--trim-threshold", self.trim_threshold.is_some()),
            ("--preserve-tail", self.preserve_tail.is_some()),
            ("--min-block-chars", self.min_block_chars.is_some()),
            ("--keep-regex", self.keep_regex.is_some()),
            ("--protect-prefix", self.protect_prefix.is_some()),
            ("--prefix-marker", self.prefix_marker.is_some()),
            ("--decisions-cache", self.decisions_cache.is_some()),
            ("--no-marker", self.no_marker),
            ("--marker-scores", self.marker_scores.is_some()),
            ("--append-to", self.append_to.is_some()),
            ("--require-exact-tokens", self.require_exact_tokens),
            ("--semantic-verify", self.semantic_verify),
            ("--no-sufficiency", self.no_sufficiency),
            ("--max-restorations", self.max_restorations.is_some()),
            (
                "--confidence-threshold",
                self.confidence_threshold.is_some(),
            ),
            ("--laya-model", self.laya_model.is_some()),
            ("--laya-device", self.laya_device.is_some()),
            ("--laya-context-limit", self.laya_context_limit.is_some()),
            ("--laya-temperature", self.laya_temperature.is_some()),
        ];
        flags
            .iter()
            .filter(|(_, on)| *on)
            .map(|(f, _)| *f)
            .collect()
    }
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A report written by `lcc compact -r`.
    pub report: PathBuf,

    /// The transcript the report was made from: adds each call's input and the first lines of
    /// its result.
    #[arg(short = 's', long)]
    pub source: Option<String>,

    /// Show only one kind of decision: keep, trim, drop, dedupe, replace or pin.
    #[arg(long)]
    pub only: Option<String>,

    /// Show at most this many decisions per kind.
    #[arg(long)]
    pub limit: Option<usize>,
}
