//! Flags and environment turned into validated settings, once.
//!
//! This is the only module that reads the environment, and the one place flags are refused
//! or range-checked (exit 2, naming the flag).
//!
//! # Environment
//! | variable | effect |
//! |---|---|
//! | `LCC_DISABLE_NETWORK=1` | no network judge at all (Jev is not asked; `auto` runs the rules) |
//! | `TYPESAFE_API_KEY` | the Jev key (whitespace-stripped) |
//! | `LCC_TYPESAFE_KEY_FILE` | file holding the key when `TYPESAFE_API_KEY` is unset (default `~/.config/lcc/typesafe.key`) |
//! | `TYPESAFE_ENDPOINT` | full System One URL (default `https://api.typesafe.ai/v1/systemone`); `http://` only for loopback hosts |
//! | `LCC_RETRY_BASE_MS` | hidden, for tests and benches: first retry back-off in ms (default 500, doubling, capped at 8 s) |
//! | `LCC_JEV_TIMEOUT_MS` | hidden, for tests: per-attempt request timeout in ms (default 30 000) |
//!
//! The key is held in an [`ApiKey`], whose `Debug` never shows it.

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::CompactArgs;
use crate::decide::Thresholds;
use crate::error::Error;
use crate::rules::RulesMode;
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
}

impl Env {
    pub fn read() -> Env {
        let var = |k: &str| std::env::var(k).ok();
        Env {
            network_disabled: var("LCC_DISABLE_NETWORK").is_some_and(|v| v == "1"),
            api_key: var("TYPESAFE_API_KEY").map(ApiKey),
            key_file: std::env::var_os("LCC_TYPESAFE_KEY_FILE").map(PathBuf::from),
            home: std::env::var_os("HOME").map(PathBuf::from),
            endpoint: var("TYPESAFE_ENDPOINT"),
            retry_base_ms: var("LCC_RETRY_BASE_MS"),
            timeout_ms: var("LCC_JEV_TIMEOUT_MS"),
        }
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

/// Everything `compact` needs, validated.
#[derive(Debug, Clone)]
pub struct CompactSettings {
    pub input: String,
    pub question: String,
    pub provider: ProviderChoice,
    pub rules_mode: RulesMode,
    pub thresholds: Thresholds,
    pub preserve_recent: usize,
    pub fit: FitLimits,
    pub max_workers: usize,
    pub min_reduction: f64,
    pub counter: Counter,
    pub jev_model: String,
    pub jev: JevConfig,
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
        if rules_mode != RulesMode::Lossless {
            return Err(usage(format!(
                "--rules-mode {} is not yet supported by this version; use --rules-mode lossless",
                rules_mode.name()
            )));
        }
        if provider == ProviderChoice::Laya {
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
        let mut jev = jev_config(
            &env,
            &a.jev_model,
            matches!(provider, ProviderChoice::Jev | ProviderChoice::Auto),
        )?;
        jev.long_context = a.long_context;
        Ok(CompactSettings {
            input: a.input.clone(),
            question: a.question.clone(),
            provider,
            rules_mode,
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
            output: a.output.clone(),
            report: a.report.clone(),
            dry_run: a.dry_run,
            quiet: a.quiet,
            env,
        })
    }
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
    let url = reqwest::Url::parse(endpoint).map_err(|e| {
        usage(format!(
            "TYPESAFE_ENDPOINT is not a valid URL ({e}); expected e.g. {DEFAULT_JEV_ENDPOINT}"
        ))
    })?;
    let host = url.host_str().unwrap_or_default().to_string();
    match url.scheme() {
        "https" if !host.is_empty() => Ok(()),
        "http" if is_loopback(&host) => Ok(()),
        "http" => Err(usage(format!(
            "TYPESAFE_ENDPOINT uses http:// on '{host}', which would send the API key unencrypted; use https:// (http:// is allowed only for loopback hosts: localhost, 127.0.0.1, ::1)"
        ))),
        other => Err(usage(format!(
            "TYPESAFE_ENDPOINT must be an https:// URL (got a {other}:// URL)"
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
    fn key_is_redacted_in_debug() {
        let k = ApiKey("sk-secret".into());
        assert!(!format!("{k:?}").contains("sk-secret"));
    }
}
