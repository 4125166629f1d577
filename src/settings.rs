//! Flags and environment turned into validated settings, once.
//!
//! This is the only module that reads the environment, and the one place flags are refused
//! or range-checked (exit 2, naming the flag).
//!
//! # Environment
//! | variable | effect |
//! |---|---|
//! | `LCC_DISABLE_NETWORK=1` | no network judge at all (neither Jev nor laya is asked; `auto` runs the rules) |
//! | `TYPESAFE_API_KEY` | the Jev key (whitespace-stripped) |
//! | `LCC_TYPESAFE_KEY_FILE` | file holding the key when `TYPESAFE_API_KEY` is unset (default `~/.config/lcc/typesafe.key`) |
//! | `TYPESAFE_ENDPOINT` | full System One URL (default `https://api.typesafe.ai/v1/systemone`); `http://` only for loopback hosts |
//! | `LCC_RETRY_BASE_MS` | hidden, for tests and benches: first retry back-off in ms (default 500, doubling, capped at 8 s) |
//! | `LCC_JEV_TIMEOUT_MS` | hidden, for tests: per-attempt request timeout in ms (default 30 000) |
//! | `LAYA_ENDPOINT` | the laya server's System One URL when `--laya-endpoint` is not given (default `http://127.0.0.1:8000/v1/systemone`); `http://` only for loopback hosts |
//! | `LAYA_API_KEY` | sent as `Authorization: Bearer …` to the laya server, when set (a server started with the same variable requires it) |
//! | `LAYA_MODEL` | the `model` sent to the laya server (default `multilingual`) |
//! | `LCC_LAYA_TIMEOUT_MS` | hidden, for tests: per-attempt laya request timeout in ms (default 120 000) |
//! | `LCC_LAYA_HEALTH_TIMEOUT_MS` | hidden, for tests: timeout of the laya `/health` probe in ms (default 2 000) |
//!
//! The key is held in an [`ApiKey`], whose `Debug` never shows it.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::CompactArgs;
use crate::decide::Thresholds;
use crate::error::Error;
use crate::rules::{RulesMode, RulesOptions};
use crate::tokens::Counter;
use crate::transcript::Format;

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
    /// `--batch-size` was given (otherwise a window carries as many calls as fit).
    pub batch_size_given: bool,
    /// `--strict-fit`: no windowed stage; fail when the whole conversation does not fit.
    pub strict_fit: bool,
}

/// What the environment says (read once, here).
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `LCC_DISABLE_NETWORK=1`.
    pub network_disabled: bool,
    /// Where `--rules-mode stashed` stores removed outputs: `$LCC_STASH_DIR`, else
    /// `$XDG_CACHE_HOME/lcc/stash`, else `$HOME/.cache/lcc/stash` (`None` when none is set).
    pub stash_dir: Option<PathBuf>,
    /// `TYPESAFE_API_KEY`, as set (not yet stripped).
    pub api_key: Option<ApiKey>,
    /// `LCC_TYPESAFE_KEY_FILE`.
    pub key_file: Option<PathBuf>,
    /// `HOME`, for the default key file.
    pub home: Option<PathBuf>,
    /// `TYPESAFE_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `LCC_RETRY_BASE_MS`.
    pub retry_base_ms: Option<String>,
    /// `LCC_JEV_TIMEOUT_MS`.
    pub timeout_ms: Option<String>,
    /// `LAYA_ENDPOINT`.
    pub laya_endpoint: Option<String>,
    /// `LAYA_API_KEY`.
    pub laya_api_key: Option<ApiKey>,
    /// `LAYA_MODEL`.
    pub laya_model: Option<String>,
    /// `LCC_LAYA_TIMEOUT_MS`.
    pub laya_timeout_ms: Option<String>,
    /// `LCC_LAYA_HEALTH_TIMEOUT_MS`.
    pub laya_health_timeout_ms: Option<String>,
}

impl Env {
    pub fn read() -> Env {
        let var = |k: &str| std::env::var(k).ok();
        let path_var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let stash_dir = path_var("LCC_STASH_DIR")
            .or_else(|| {
                path_var("XDG_CACHE_HOME")
                    .filter(|p| p.is_absolute())
                    .map(|p| p.join("lcc").join("stash"))
            })
            .or_else(|| path_var("HOME").map(|h| h.join(".cache").join("lcc").join("stash")));
        Env {
            network_disabled: var("LCC_DISABLE_NETWORK").is_some_and(|v| v == "1"),
            api_key: var("TYPESAFE_API_KEY").map(ApiKey),
            key_file: std::env::var_os("LCC_TYPESAFE_KEY_FILE").map(PathBuf::from),
            home: std::env::var_os("HOME").map(PathBuf::from),
            endpoint: var("TYPESAFE_ENDPOINT"),
            retry_base_ms: var("LCC_RETRY_BASE_MS"),
            timeout_ms: var("LCC_JEV_TIMEOUT_MS"),
            laya_endpoint: var("LAYA_ENDPOINT"),
            laya_api_key: var("LAYA_API_KEY").map(ApiKey),
            laya_model: var("LAYA_MODEL"),
            laya_timeout_ms: var("LCC_LAYA_TIMEOUT_MS"),
            laya_health_timeout_ms: var("LCC_LAYA_HEALTH_TIMEOUT_MS"),
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

/// A secret: never shown by `Debug`, never written anywhere but the `Authorization` header.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ApiKey(pub String);

impl ApiKey {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The default System One endpoint.
pub const DEFAULT_JEV_ENDPOINT: &str = "https://api.typesafe.ai/v1/systemone";

/// Why no Jev client can be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JevUnavailable {
    NetworkDisabled,
    NoKey,
}

impl JevUnavailable {
    /// Plain words, for warnings.
    pub fn describe(self) -> &'static str {
        match self {
            JevUnavailable::NetworkDisabled => "network disabled (LCC_DISABLE_NETWORK=1)",
            JevUnavailable::NoKey => {
                "no API key (set TYPESAFE_API_KEY or put the key in the file named by LCC_TYPESAFE_KEY_FILE, default ~/.config/lcc/typesafe.key)"
            }
        }
    }
}

/// How to reach Jev (System One), and how patiently.
#[derive(Debug, Clone)]
pub struct JevConfig {
    /// Full URL of the System One endpoint (validated: https, or http on a loopback host).
    pub endpoint: String,
    /// The key, or why there is no client.
    pub key: Result<ApiKey, JevUnavailable>,
    pub model: String,
    /// Per-attempt timeout (connect + request + body).
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// First back-off; doubles per attempt up to `retry_cap`.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// Longest `Retry-After` honoured.
    pub retry_after_cap: Duration,
    /// `--long-context`: send `TypeSafe-Danger-Zone-Long-Context: true` and use Jev's
    /// long-context limits.
    pub long_context: bool,
}

impl JevConfig {
    /// Is a client possible (a key and the network)?
    pub fn available(&self) -> bool {
        self.key.is_ok()
    }
}

/// The default laya endpoint (`laya-serve` on its default port).
pub const DEFAULT_LAYA_ENDPOINT: &str = "http://127.0.0.1:8000/v1/systemone";
/// The default `model` sent to laya: the 1 024-token multilingual checkpoint, which matches
/// the default `--laya-context-tokens`.
pub const DEFAULT_LAYA_MODEL: &str = "multilingual";

/// How to reach a local laya server.
#[derive(Debug, Clone)]
pub struct LayaConfig {
    /// Full URL of its System One endpoint (validated when laya may run).
    pub endpoint: String,
    /// `GET` this to see whether the server is up (`…/v1/systemone` → `…/health`).
    pub health_url: String,
    /// Why laya may not be asked at all (the network is disabled).
    pub blocked: Option<&'static str>,
    pub api_key: Option<ApiKey>,
    pub model: String,
    /// The model's context in tokens (`--laya-context-tokens`).
    pub context_tokens: usize,
    /// Per-attempt timeout of a judging request (laya is slow on a CPU).
    pub timeout: Duration,
    /// Timeout of the `/health` probe (connect included).
    pub health_timeout: Duration,
    pub connect_timeout: Duration,
    pub max_attempts: u32,
    pub retry_base: Duration,
    pub retry_cap: Duration,
    pub retry_after_cap: Duration,
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
    pub jev: JevConfig,
    pub laya: LayaConfig,
    pub output: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub dry_run: bool,
    pub quiet: bool,
    pub env: Env,
    /// `--format`: read (and write) this format instead of detecting it.
    pub format: Option<Format>,
    /// `--strict`: reading warnings (a torn last JSONL line) are errors.
    pub strict: bool,
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
        let rules_mode = match a.rules_mode.as_str() {
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
        check_jev_limits(max_state_tokens, max_request_tokens, a.long_context)?;
        if max_request_tokens <= max_state_tokens {
            return Err(usage(format!(
                "--max-request-tokens must be greater than --max-state-tokens (got {max_request_tokens} <= {max_state_tokens})"
            )));
        }
        let batch_size = int_at_least("--batch-size", a.batch_size.unwrap_or(8), 1)?;
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
        if a.jev_model.trim().is_empty() {
            return Err(usage("--jev-model must not be empty"));
        }
        let format = match &a.format {
            None => None,
            Some(name) => Some(Format::from_name(name).ok_or_else(|| {
                usage(format!(
                    "unknown format '{name}' for --format; expected one of {}",
                    Format::NAMES.join(", ")
                ))
            })?),
        };
        let mut jev = jev_config(
            &env,
            &a.jev_model,
            matches!(provider, ProviderChoice::Jev | ProviderChoice::Auto),
        )?;
        jev.long_context = a.long_context;
        let laya_context_tokens =
            int_at_least("--laya-context-tokens", a.laya_context_tokens, 256)?;
        if laya_context_tokens > 8192 {
            return Err(usage(format!(
                "--laya-context-tokens must be between 256 and 8192 (got {laya_context_tokens})"
            )));
        }
        // laya runs for `--provider laya`, and for `auto` when Jev cannot.
        let laya_wanted = provider == ProviderChoice::Laya
            || (provider == ProviderChoice::Auto && jev.key.is_err());
        let laya = laya_config(
            &env,
            a.laya_endpoint.as_deref(),
            laya_context_tokens,
            laya_wanted,
        )?;
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
                batch_size_given: a.batch_size.is_some(),
                strict_fit: a.strict_fit,
            },
            max_workers,
            min_reduction: a.min_reduction,
            counter: Counter::for_model(&a.model),
            jev_model: a.jev_model.clone(),
            jev,
            laya,
            // `-o -` is stdout, as an input of `-` is stdin.
            output: a.output.clone().filter(|p| p.as_os_str() != "-"),
            report: a.report.clone(),
            dry_run: a.dry_run,
            quiet: a.quiet,
            env,
            format,
            strict: a.strict,
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
        // lossless is also what `auto` falls back to, so only another mode is refused.
        ("--rules-mode", mode != RulesMode::Lossless),
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
fn env_ms(name: &str, v: Option<&String>, default: u64) -> Result<Duration, Error> {
    match v {
        None => Ok(Duration::from_millis(default)),
        Some(s) => s
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| {
                usage(format!(
                    "{name} must be a whole number of milliseconds (got '{s}')"
                ))
            }),
    }
}

/// Resolve the key (only when a Jev provider may run and the network is allowed) and check
/// the endpoint. The key file is read only when `TYPESAFE_API_KEY` is unset or blank.
fn jev_config(env: &Env, model: &str, wanted: bool) -> Result<JevConfig, Error> {
    let endpoint = env
        .endpoint
        .as_deref()
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .unwrap_or(DEFAULT_JEV_ENDPOINT)
        .to_string();
    let key = if env.network_disabled {
        Err(JevUnavailable::NetworkDisabled)
    } else if !wanted {
        Err(JevUnavailable::NoKey)
    } else {
        resolve_key(env)?.ok_or(JevUnavailable::NoKey)
    };
    if key.is_ok() {
        check_endpoint(&endpoint)?;
    }
    Ok(JevConfig {
        endpoint,
        key,
        model: model.to_string(),
        timeout: env_ms("LCC_JEV_TIMEOUT_MS", env.timeout_ms.as_ref(), 30_000)?,
        connect_timeout: Duration::from_secs(10),
        max_attempts: 4,
        retry_base: env_ms("LCC_RETRY_BASE_MS", env.retry_base_ms.as_ref(), 500)?,
        retry_cap: Duration::from_secs(8),
        retry_after_cap: Duration::from_secs(30),
        long_context: false,
    })
}

/// The laya endpoint (flag, else `LAYA_ENDPOINT`, else the default), checked when laya may
/// run and the network is allowed, and the rest of its settings.
fn laya_config(
    env: &Env,
    flag: Option<&str>,
    context_tokens: usize,
    wanted: bool,
) -> Result<LayaConfig, Error> {
    let given = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_string)
    };
    let (endpoint, source) = match (given(flag), given(env.laya_endpoint.as_deref())) {
        (Some(e), _) => (e, "--laya-endpoint"),
        (None, Some(e)) => (e, "LAYA_ENDPOINT"),
        (None, None) => (
            DEFAULT_LAYA_ENDPOINT.to_string(),
            "the default laya endpoint",
        ),
    };
    let blocked = env
        .network_disabled
        .then_some(JevUnavailable::NetworkDisabled.describe());
    if wanted && blocked.is_none() {
        check_url(
            &endpoint,
            source,
            DEFAULT_LAYA_ENDPOINT,
            "the judged tool calls",
        )?;
    }
    let model = given(env.laya_model.as_deref()).unwrap_or_else(|| DEFAULT_LAYA_MODEL.to_string());
    Ok(LayaConfig {
        health_url: health_url(&endpoint),
        endpoint,
        blocked,
        api_key: env
            .laya_api_key
            .as_ref()
            .map(|k| ApiKey(k.expose().trim().to_string()))
            .filter(|k| !k.expose().is_empty()),
        model,
        context_tokens,
        timeout: env_ms("LCC_LAYA_TIMEOUT_MS", env.laya_timeout_ms.as_ref(), 120_000)?,
        health_timeout: env_ms(
            "LCC_LAYA_HEALTH_TIMEOUT_MS",
            env.laya_health_timeout_ms.as_ref(),
            2_000,
        )?,
        connect_timeout: Duration::from_secs(5),
        // One retry: a local server that failed twice (or timed out twice, at two minutes
        // each) will not do better on a third try.
        max_attempts: 2,
        retry_base: env_ms("LCC_RETRY_BASE_MS", env.retry_base_ms.as_ref(), 500)?,
        retry_cap: Duration::from_secs(8),
        retry_after_cap: Duration::from_secs(30),
    })
}

/// `GET` target of the health probe: the endpoint with its `/v1/systemone` suffix (or its
/// whole path, when it has no such suffix) replaced by `/health`; query and fragment dropped.
/// Empty when the endpoint is not a URL (then it is never probed: it was refused, or laya
/// cannot run).
pub fn health_url(endpoint: &str) -> String {
    let Ok(mut url) = reqwest::Url::parse(endpoint) else {
        return String::new();
    };
    let path = url.path().trim_end_matches('/');
    let prefix = path.strip_suffix("/v1/systemone").unwrap_or("").to_string();
    url.set_path(&format!("{prefix}/health"));
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// The token budgets may not exceed what Jev accepts: 32 000 tokens of state plus one
/// question and 64 000 for a whole request, or 262 144 for both with `--long-context`.
fn check_jev_limits(state: usize, request: usize, long_context: bool) -> Result<(), Error> {
    use crate::judge::batch::{JEV_LONG_CONTEXT, JEV_STATE_PLUS_ALL, JEV_STATE_PLUS_QUESTION};
    let checks = [
        (
            "--max-state-tokens",
            state,
            JEV_STATE_PLUS_QUESTION,
            "the state plus one question",
        ),
        (
            "--max-request-tokens",
            request,
            JEV_STATE_PLUS_ALL,
            "a whole request",
        ),
    ];
    for (flag, v, limit, what) in checks {
        if long_context && v > JEV_LONG_CONTEXT {
            return Err(usage(format!(
                "{flag} must be at most {JEV_LONG_CONTEXT}, Jev's long-context limit (got {v})"
            )));
        }
        if !long_context && v > limit {
            return Err(usage(format!(
                "{flag} {v} is over Jev's limit of {limit} tokens for {what}; lower it, or pass --long-context (Jev's experimental long-context mode, up to {JEV_LONG_CONTEXT})"
            )));
        }
    }
    Ok(())
}

fn resolve_key(env: &Env) -> Result<Option<ApiKey>, Error> {
    if let Some(k) = &env.api_key {
        let k = k.expose().trim();
        if !k.is_empty() {
            return Ok(Some(ApiKey(k.to_string())));
        }
    }
    let path = match (&env.key_file, &env.home) {
        (Some(p), _) => p.clone(),
        (None, Some(home)) => home.join(".config").join("lcc").join("typesafe.key"),
        (None, None) => return Ok(None),
    };
    Ok(crate::io::read_key_file(&path)?
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .map(ApiKey))
}

/// `https://` anywhere; `http://` only on a loopback host (the key must never cross a
/// network in clear text).
fn check_endpoint(endpoint: &str) -> Result<(), Error> {
    check_url(
        endpoint,
        "TYPESAFE_ENDPOINT",
        DEFAULT_JEV_ENDPOINT,
        "the API key",
    )
}

/// An endpoint named by `source` (a flag or variable): `https://` anywhere, `http://` only
/// on a loopback host, since `what` would otherwise cross a network unencrypted.
fn check_url(endpoint: &str, source: &str, example: &str, what: &str) -> Result<(), Error> {
    let url = reqwest::Url::parse(endpoint).map_err(|e| {
        usage(format!(
            "{source} is not a valid URL ({e}); expected e.g. {example}"
        ))
    })?;
    let host = url.host_str().unwrap_or_default().to_string();
    match url.scheme() {
        "https" if !host.is_empty() => Ok(()),
        "http" if is_loopback(&host) => Ok(()),
        "http" => Err(usage(format!(
            "{source} uses http:// on '{host}', which would send {what} unencrypted; use https:// (http:// is allowed only for loopback hosts: localhost, 127.0.0.1, ::1)"
        ))),
        other => Err(usage(format!(
            "{source} must be an https:// URL, or http:// on a loopback host (got a {other}:// URL)"
        ))),
    }
}

fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert!(check_endpoint("https://api.typesafe.ai/v1/systemone").is_ok());
        assert!(check_endpoint("http://127.0.0.1:8765/v1/systemone").is_ok());
        assert!(check_endpoint("http://127.3.4.5/x").is_ok());
        assert!(check_endpoint("http://localhost:1/x").is_ok());
        assert!(check_endpoint("http://[::1]:1/x").is_ok());
        assert!(check_endpoint("http://example.com/x").is_err());
        assert!(check_endpoint("http://10.0.0.1/x").is_err());
        assert!(check_endpoint("http://localhost.example.com/x").is_err());
        assert!(check_endpoint("ftp://127.0.0.1/x").is_err());
        assert!(check_endpoint("not a url").is_err());
    }

    #[test]
    fn laya_health_urls() {
        assert_eq!(
            health_url("http://127.0.0.1:8000/v1/systemone"),
            "http://127.0.0.1:8000/health"
        );
        assert_eq!(
            health_url("http://localhost:9/laya/v1/systemone/"),
            "http://localhost:9/laya/health"
        );
        assert_eq!(
            health_url("https://judge.example/decide?x=1#f"),
            "https://judge.example/health"
        );
        assert_eq!(health_url("not a url"), "");
    }

    #[test]
    fn key_is_redacted_in_debug() {
        let k = ApiKey("sk-secret".into());
        assert!(!format!("{k:?}").contains("sk-secret"));
    }
}
