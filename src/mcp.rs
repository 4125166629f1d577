//! `lcc mcp`: the same pass for MCP clients and agent harnesses, over stdio.
//!
//! The server (built on `rmcp`) has three tools:
//!
//! - `compact_transcript` runs exactly the pass `lcc compact` runs. Its arguments are turned
//!   into the equivalent `lcc compact` argument vector ([`compact_argv`]) and parsed by clap
//!   with the CLI's own [`CompactArgs`], then validated by [`CompactSettings::from_args`] and
//!   run by [`compact::compact_text`]: every flag's parsing, range check and message is the
//!   CLI's. The MCP layer only checks JSON types and maps names (the [`OPTIONS`] table).
//! - `explain_report` renders a report as `lcc explain` does ([`commands::explain`]).
//! - `recall` returns a tool output `--rules-mode stashed` removed, exactly as `lcc recall`
//!   prints it, after the same hash check ([`commands::recall`]).
//!
//! A bad argument or a bad transcript is a tool error (`isError: true`) whose text is the line
//! the CLI prints on stderr (`error: …`); an unknown tool is a JSON-RPC error (-32602). Each
//! call runs on its own thread, so a slow pass never blocks the connection and a panic in
//! one call is reported as that call's error while the server keeps serving.
//!
//! Standard output carries the protocol: nothing else in the process may write to it (the
//! pass never does; it returns text).

use std::borrow::Cow;
use std::time::Instant;

use clap::{CommandFactory, Parser};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};

use crate::cli::{CompactArgs, ExplainArgs, RecallArgs};
use crate::commands::{self, compact};
use crate::error::Error;
use crate::settings::{CompactSettings, Env};
use crate::transcript::Format;
use crate::{io, json, report};

/// Largest JSON-RPC message read (one line). The SDK's default (16 MiB) is below a long
/// session; the client that starts this server is the only peer it has.
const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// What the server tells a client about itself at `initialize`.
const INSTRUCTIONS: &str = "lcc compacts a coding agent's transcript by tool call, without \
summarizing: it decides which tool call/result pairs the rest of the session no longer needs, \
drops, trims or dedupes those, and keeps everything else byte for byte. Call \
compact_transcript with the transcript (messages, or a path) and the session's goal \
(question) before sending a long history to a model; explain_report turns its report into a \
readable account of every decision; recall returns an output the stashed rules mode removed, \
by the id in its note.";

/// Run the server on stdin/stdout until the client closes the connection.
pub fn serve() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "could not start the MCP server".into(),
            source,
        })?;
    let served = rt.block_on(async {
        let transport = AsyncRwTransport::new_server(tokio::io::stdin(), tokio::io::stdout())
            .with_max_line_length(MAX_MESSAGE_BYTES);
        match LccServer.serve(transport).await {
            Ok(running) => running
                .waiting()
                .await
                .map(drop)
                .map_err(anyhow::Error::from),
            // The client went away before it initialized: nothing to serve.
            Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
            Err(e) => Err(anyhow::anyhow!("MCP: {e}")),
        }
    });
    // A read of stdin in flight cannot be cancelled; do not wait for it.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    served
}

/// The MCP server: stateless; every call carries all it needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct LccServer;

impl ServerHandler for LccServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lcc", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool: fn(&JsonObject) -> Result<String, String> = match request.name.as_ref() {
            COMPACT => compact_transcript,
            EXPLAIN => explain_report,
            RECALL => recall,
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool '{other}'; this server has {COMPACT}, {EXPLAIN} and {RECALL}"
                    ),
                    None,
                ))
            }
        };
        let args = request.arguments.unwrap_or_default();
        let result = match off_thread(move || tool(&args)).await {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        Ok(result.into())
    }
}

/// Run a tool on its own thread (the pass is CPU-bound and may start its own runtime for
/// the judge), turning a panic into an error for this call only.
async fn off_thread(
    f: impl FnOnce() -> Result<String, String> + Send + 'static,
) -> Result<String, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("lcc-mcp-call".into())
        .spawn(move || {
            let _ = tx.send(f());
        });
    if let Err(e) = spawned {
        return Err(format!("error: could not start the call: {e}"));
    }
    rx.await.unwrap_or_else(|_| {
        Err("error: internal error: the call failed unexpectedly (see the server's stderr)".into())
    })
}

const COMPACT: &str = "compact_transcript";
const EXPLAIN: &str = "explain_report";
const RECALL: &str = "recall";

fn tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true);
    vec![
        Tool::new(COMPACT, COMPACT_DESCRIPTION, compact_schema()).with_annotations(
            // The judge may call an API; the rules policy and the reading of `path` do not.
            read_only.clone().open_world(true),
        ),
        Tool::new(EXPLAIN, EXPLAIN_DESCRIPTION, explain_schema())
            .with_annotations(read_only.clone().open_world(false)),
        Tool::new(RECALL, RECALL_DESCRIPTION, recall_schema())
            .with_annotations(read_only.open_world(false)),
    ]
}

const COMPACT_DESCRIPTION: &str = "Compact a coding-agent transcript by tool call, without \
summarizing: the same pass as `lcc compact`. Every tool call is paired with its result; a \
judge (Jev, a local laya server) or the offline rules policy decides which pairs the rest of \
the session no longer needs; those are dropped, trimmed or deduped, and everything else is \
kept byte for byte. Give the transcript as `messages` (or `path`) and the session's goal as \
`question`. Returns one JSON object: `messages` (the compacted transcript in the input's own \
format: JSON for JSON formats, a string holding the text for line-per-record formats), \
`decisions` (one per tool call: keep, trim, drop, dedupe or replace, with the reason) and \
`report` (the full transcript-compaction-1.0 report, as `lcc compact -r` writes it).";

const EXPLAIN_DESCRIPTION: &str = "Explain a compaction report in plain words, as `lcc \
explain` does: what was removed and saved, and for every tool call why it was dropped, \
trimmed, deduped, replaced, kept or pinned. Give the `report` object compact_transcript \
returned; add the transcript it was made from as `source` (or `source_path`) to see each \
call's input and the first lines of its result.";

const RECALL_DESCRIPTION: &str = "Return a tool output that `--rules-mode stashed` removed, \
exactly as it was, as `lcc recall` prints it. The compacted transcript holds a note `[removed: \
N lines, M tokens · lcc recall <id>]` in its place: give that `id`, and optionally `lines` \
(`A-B`, 1-based and inclusive, or `A` for one line). The stored bytes are hash-checked first; \
a stash file that fails the check is an error, never returned altered. The stash directory is \
the server's LCC_STASH_DIR (default: the user cache dir's lcc/stash), as for compaction.";

// ------------------------------------------------------------------------------------------
// compact_transcript

/// The JSON type an option takes, and how it becomes CLI flags.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A string: `--flag=VALUE`.
    Str(&'static [&'static str]),
    /// A number: `--flag=VALUE`.
    Number,
    /// An integer: `--flag=VALUE`.
    Integer,
    /// A boolean that adds a bare flag for one of its values (default: the other).
    Switch {
        default: bool,
        flag_if_true: Option<&'static str>,
        flag_if_false: Option<&'static str>,
    },
}

/// One option of `compact_transcript`: its argument name, its JSON type, the `lcc compact`
/// flag it becomes, and what it means.
struct Opt {
    name: &'static str,
    kind: Kind,
    flag: &'static str,
    description: &'static str,
}

/// The options, in schema order. Each maps to the `lcc compact` flag of the same meaning;
/// the CLI parses and validates it, so an option the CLI does not know yet fails exactly as
/// the flag does there.
const OPTIONS: &[Opt] = &[
    Opt {
        name: "question",
        kind: Kind::Str(&[]),
        flag: "--question",
        description: "The session's goal: what the rest of the session is for. The judge is \
asked whether each tool output still serves it; the rules policy keeps calls it names. Empty \
is allowed.",
    },
    Opt {
        name: "provider",
        kind: Kind::Str(&["auto", "jev", "laya", "rules"]),
        flag: "--provider",
        description: "Who decides: `auto` (Jev when a key is configured and the network is \
allowed, else a local laya server when it answers, else the rules policy; the report says \
which ran), `jev`, `laya` (a local server), or `rules` (offline and deterministic, see \
rules_mode).",
    },
    Opt {
        name: "rules_mode",
        kind: Kind::Str(&["lossless", "recoverable", "lossy", "stashed"]),
        flag: "--rules-mode",
        description: "Policy for provider `rules`: `lossless` only replaces an output by a \
pointer to a later output holding the same bytes; `recoverable` may also replace an old read \
or read-only command by how to get it again; `lossy` also drops superseded outputs; `stashed` \
keeps removed outputs in a local store that `recall` returns.",
    },
    Opt {
        name: "workspace_root",
        kind: Kind::Str(&[]),
        flag: "--workspace-root",
        description: "Directory the session worked in (rules_mode recoverable): a re-read \
pointer is only written when the file there still holds what the transcript read.",
    },
    Opt {
        name: "disk_check",
        kind: Kind::Switch {
            default: true,
            flag_if_true: None,
            flag_if_false: Some("--no-disk-check"),
        },
        flag: "--no-disk-check",
        description: "rules_mode recoverable: check files under workspace_root before \
pointing to them (false skips the check).",
    },
    Opt {
        name: "allow_command_pointers",
        kind: Kind::Switch {
            default: false,
            flag_if_true: Some("--allow-command-pointers"),
            flag_if_false: None,
        },
        flag: "--allow-command-pointers",
        description: "rules_mode recoverable: also replace outputs of read-only commands \
(ls, rg, git status, ...) by the command that reproduces them.",
    },
    Opt {
        name: "threshold",
        kind: Kind::Number,
        flag: "--threshold",
        description: "0 to 1. Keep a result when the judge's keep_result score is at least \
this; trim it when only keep_call is; otherwise drop the pair.",
    },
    Opt {
        name: "preserve_recent",
        kind: Kind::Integer,
        flag: "--preserve-recent",
        description: "Newest messages pinned (never changed), besides the first message.",
    },
    Opt {
        name: "trim_head_chars",
        kind: Kind::Integer,
        flag: "--trim-head-chars",
        description: "Characters of a trimmed result to keep (0 disables trimming: the \
result is kept whole).",
    },
    Opt {
        name: "max_state_tokens",
        kind: Kind::Integer,
        flag: "--max-state-tokens",
        description: "Token budget for the conversation state shown to the judge.",
    },
    Opt {
        name: "max_request_tokens",
        kind: Kind::Integer,
        flag: "--max-request-tokens",
        description: "Token budget for one judge request (state, questions and envelope); \
must be greater than max_state_tokens.",
    },
    Opt {
        name: "batch_size",
        kind: Kind::Integer,
        flag: "--batch-size",
        description: "Most tool calls judged in one request.",
    },
    Opt {
        name: "max_workers",
        kind: Kind::Integer,
        flag: "--max-workers",
        description: "Most judge requests in flight at once (1 to 64).",
    },
    Opt {
        name: "min_reduction",
        kind: Kind::Number,
        flag: "--min-reduction",
        description: "0 to 1. Token reduction under which the report says worth_it: false \
(the caller may then keep the original). Never changes the output.",
    },
    Opt {
        name: "model",
        kind: Kind::Str(&[]),
        flag: "--model",
        description: "Model whose tokenizer counts the report's tokens (gpt-4.1, gpt-4o, o3: \
o200k_base; gpt-4, gpt-3.5: cl100k_base; others: o200k_base, marked approximate).",
    },
    Opt {
        name: "jev_model",
        kind: Kind::Str(&[]),
        flag: "--jev-model",
        description: "Jev model name sent to the System One API.",
    },
    Opt {
        name: "format",
        kind: Kind::Str(&[]),
        flag: "--format",
        description: "Input format: lcc, claude-code, anthropic, openai-chat, openai-responses \
or codex. Default: detected from the content. The output keeps the input's format.",
    },
    Opt {
        name: "strict",
        kind: Kind::Switch {
            default: false,
            flag_if_true: Some("--strict"),
            flag_if_false: None,
        },
        flag: "--strict",
        description: "Treat reading warnings as errors (a torn last JSONL line fails instead \
of being left as it was).",
    },
    Opt {
        name: "strict_fit",
        kind: Kind::Switch {
            default: false,
            flag_if_true: Some("--strict-fit"),
            flag_if_false: None,
        },
        flag: "--strict-fit",
        description: "Fail when the whole conversation does not fit the state budget, instead \
of judging it in windows.",
    },
    Opt {
        name: "long_context",
        kind: Kind::Switch {
            default: false,
            flag_if_true: Some("--long-context"),
            flag_if_false: None,
        },
        flag: "--long-context",
        description: "Use Jev's experimental long-context mode (budgets up to 262144 tokens).",
    },
    Opt {
        name: "laya_endpoint",
        kind: Kind::Str(&[]),
        flag: "--laya-endpoint",
        description: "System One URL of a local laya server (provider `laya`, or `auto` without a Jev key); http:// only for loopback hosts. Default: LAYA_ENDPOINT, else http://127.0.0.1:8000/v1/systemone.",
    },
    Opt {
        name: "laya_context_tokens",
        kind: Kind::Integer,
        flag: "--laya-context-tokens",
        description: "Context of the laya model in tokens (512 for its English checkpoint, 1024 for the multilingual one; 256 to 8192): each call's state is cut to fit it.",
    },
];

const MESSAGES_DESCRIPTION: &str = "The transcript to compact, in any format `lcc compact` \
reads (detected from its content). Either the transcript as JSON (an array of messages, or an \
object such as {\"messages\": [...]}), or its exact text as a string (use a string for \
line-per-record formats such as Claude Code session files, and to have untouched records \
returned byte for byte). Give either this or `path`.";

const PATH_DESCRIPTION: &str = "A transcript file the server can read (relative paths are \
relative to the server's working directory). Give either this or `messages`.";

/// The `lcc compact` argument parser, on its own: the MCP tool parses the argument vector it
/// builds with exactly the CLI's flags, defaults and messages.
#[derive(Debug, Parser)]
#[command(name = "lcc compact", no_binary_name = true)]
struct CompactArgv {
    #[command(flatten)]
    args: CompactArgs,
}

/// The `lcc recall` argument parser, on its own.
#[derive(Debug, Parser)]
#[command(name = "lcc recall", no_binary_name = true)]
struct RecallArgv {
    #[command(flatten)]
    args: RecallArgs,
}

/// The `lcc explain` argument parser, on its own.
#[derive(Debug, Parser)]
#[command(name = "lcc explain", no_binary_name = true)]
struct ExplainArgv {
    #[command(flatten)]
    args: ExplainArgs,
}

/// The default the CLI gives a flag, as the JSON value of an option of `kind`.
fn cli_default(cmd: &clap::Command, flag: &str, kind: Kind) -> Option<Value> {
    if let Kind::Switch { default, .. } = kind {
        return Some(Value::Bool(default));
    }
    let long = flag.trim_start_matches('-');
    let arg = cmd.get_arguments().find(|a| a.get_long() == Some(long))?;
    let text = arg.get_default_values().first()?.to_str()?;
    match kind {
        Kind::Str(_) => Some(Value::String(text.to_string())),
        Kind::Integer => text.parse::<i64>().ok().map(Value::from),
        Kind::Number => text.parse::<f64>().ok().map(Value::from),
        Kind::Switch { .. } => None,
    }
}

fn compact_schema() -> JsonObject {
    let cmd = CompactArgv::command();
    let mut props = Map::new();
    props.insert(
        "messages".into(),
        json!({"type": ["array", "object", "string"], "description": MESSAGES_DESCRIPTION}),
    );
    props.insert(
        "path".into(),
        json!({"type": "string", "description": PATH_DESCRIPTION}),
    );
    for o in OPTIONS {
        let mut p = Map::new();
        let ty = match o.kind {
            Kind::Str(_) => "string",
            Kind::Number => "number",
            Kind::Integer => "integer",
            Kind::Switch { .. } => "boolean",
        };
        p.insert("type".into(), ty.into());
        if let Kind::Str(values) = o.kind {
            if !values.is_empty() {
                p.insert("enum".into(), json!(values));
            }
        }
        if let Some(d) = cli_default(&cmd, o.flag, o.kind) {
            p.insert("default".into(), d);
        }
        p.insert("description".into(), o.description.into());
        props.insert(o.name.into(), Value::Object(p));
    }
    object_schema(props)
}

fn object_schema(props: Map<String, Value>) -> JsonObject {
    let mut s = Map::new();
    s.insert("type".into(), "object".into());
    s.insert("properties".into(), Value::Object(props));
    s.insert("additionalProperties".into(), false.into());
    s
}

/// A JSON value's type, as messages name it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn arg_error(msg: impl std::fmt::Display) -> String {
    format!("error: {msg}")
}

/// Refuse argument names the tool does not take (a misspelled option would otherwise be
/// silently ignored).
fn check_names(tool: &str, args: &JsonObject, known: &[&str]) -> Result<(), String> {
    for name in args.keys() {
        if !known.contains(&name.as_str()) {
            return Err(arg_error(format!(
                "unknown argument '{name}' for {tool}; it takes {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// An argument's value; `null` counts as absent.
fn given<'a>(args: &'a JsonObject, name: &str) -> Option<&'a Value> {
    args.get(name).filter(|v| !v.is_null())
}

/// Where the transcript comes from.
enum Input<'a> {
    /// `messages`: its text (a string as is, JSON serialized).
    Inline(&'a Value),
    /// `path`: a file.
    Path(&'a str),
}

impl Input<'_> {
    /// The name errors use for the transcript (the CLI's positional INPUT).
    fn name(&self) -> &str {
        match self {
            Input::Inline(_) => "messages",
            Input::Path(p) => p,
        }
    }
}

/// `messages` or `path` (exactly one), or `source`/`source_path` for explain_report.
fn transcript_input<'a>(
    args: &'a JsonObject,
    inline: &str,
    path: &str,
    needed: bool,
) -> Result<Option<Input<'a>>, String> {
    match (given(args, inline), given(args, path)) {
        (Some(_), Some(_)) => Err(arg_error(format!(
            "give the transcript as `{inline}` or as `{path}`, not both"
        ))),
        (Some(v), None) => match v {
            Value::Array(_) | Value::Object(_) | Value::String(_) => Ok(Some(Input::Inline(v))),
            other => Err(arg_error(format!(
                "`{inline}` must be the transcript as JSON (an array or an object) or its text as a string, not {}",
                type_name(other)
            ))),
        },
        (None, Some(v)) => match v.as_str() {
            Some("") => Err(arg_error(format!("`{path}` must not be empty"))),
            Some("-") => Err(arg_error(format!(
                "`{path}` cannot be '-': the server's stdin carries the MCP connection; give the transcript as `{inline}`"
            ))),
            Some(p) => Ok(Some(Input::Path(p))),
            None => Err(arg_error(format!(
                "`{path}` must be a string (a file path), not {}",
                type_name(v)
            ))),
        },
        (None, None) if needed => Err(arg_error(format!(
            "the transcript is missing: give `{inline}` (the transcript as JSON, or its text as a string) or `{path}` (a transcript file)"
        ))),
        (None, None) => Ok(None),
    }
}

/// Read the transcript's text.
fn transcript_text(input: &Input) -> Result<String, String> {
    match input {
        Input::Inline(Value::String(s)) => Ok(s.clone()),
        Input::Inline(v) => Ok(v.to_string()),
        Input::Path(p) => io::read_input(p).map_err(cli_error),
    }
}

/// One option's value as flag text, after checking its JSON type.
fn flag_value(o: &Opt, v: &Value) -> Result<Option<String>, String> {
    let wrong =
        |want: &str| arg_error(format!("`{}` must be {want}, not {}", o.name, type_name(v)));
    Ok(match o.kind {
        Kind::Str(_) => Some(format!(
            "{}={}",
            o.flag,
            v.as_str().ok_or_else(|| wrong("a string"))?
        )),
        Kind::Number => {
            let n = v.as_number().ok_or_else(|| wrong("a number"))?;
            Some(format!("{}={n}", o.flag))
        }
        Kind::Integer => {
            let n = v.as_number().ok_or_else(|| wrong("an integer"))?;
            // 6.0 is the integer 6 (some JSON writers print every number as a float).
            let text = match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    format!("{}", f as i64)
                }
                _ => n.to_string(),
            };
            Some(format!("{}={text}", o.flag))
        }
        Kind::Switch {
            flag_if_true,
            flag_if_false,
            ..
        } => {
            let on = v.as_bool().ok_or_else(|| wrong("true or false"))?;
            if on { flag_if_true } else { flag_if_false }.map(str::to_string)
        }
    })
}

/// The `lcc compact` argument vector equivalent to a `compact_transcript` call. Values are
/// attached with `=`, so a value starting with `-` (a question, a negative number) stays a
/// value, and the input comes after `--`.
fn compact_argv(args: &JsonObject, input_name: &str) -> Result<Vec<String>, String> {
    let mut argv = Vec::new();
    for o in OPTIONS {
        if let Some(v) = given(args, o.name) {
            if let Some(a) = flag_value(o, v)? {
                argv.push(a);
            }
        }
    }
    argv.push("--".into());
    argv.push(input_name.into());
    Ok(argv)
}

/// A clap error as the CLI reports it: its first paragraph (`error: …`), without the usage
/// lines and tips that only make sense in a terminal.
fn clap_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).collect();
    first.join("\n")
}

fn cli_error(e: impl Into<anyhow::Error>) -> String {
    crate::exit::message(&e.into())
}

/// `compact_transcript`: the CLI's pass on the arguments.
fn compact_transcript(args: &JsonObject) -> Result<String, String> {
    let t0 = Instant::now();
    let mut known = vec!["messages", "path"];
    known.extend(OPTIONS.iter().map(|o| o.name));
    check_names(COMPACT, args, &known)?;
    let input = transcript_input(args, "messages", "path", true)?
        .ok_or_else(|| arg_error("the transcript is missing"))?;
    let argv = compact_argv(args, input.name())?;
    let parsed = CompactArgv::try_parse_from(&argv).map_err(|e| clap_error(&e))?;
    let settings = CompactSettings::from_args(&parsed.args, Env::read()).map_err(cli_error)?;
    let src = transcript_text(&input)?;
    let read_ms = ms(t0);
    let mut outcome = compact::compact_text(&settings, &src).map_err(cli_error)?;
    outcome.report.timing.read_ms = read_ms;
    outcome.report.timing.total_ms = ms(t0);
    Ok(compact_response(&outcome, &src))
}

fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Is a format's text one JSON value (returned as JSON), rather than one record per line
/// (returned as a string)? Exhaustive on purpose: a new format must say which it is.
fn is_json_format(format: Format) -> bool {
    match format {
        Format::Lcc | Format::Anthropic | Format::OpenAiChat | Format::OpenAiResponses => true,
        Format::ClaudeCode | Format::Codex => false,
    }
}

/// `{"messages": …, "decisions": […], "report": {…}}`. The compacted transcript and the
/// report are spliced in as the exact text `lcc compact` writes (stdout and `-r`), so a
/// client that slices them out gets the CLI's bytes.
fn compact_response(outcome: &compact::Outcome, src: &str) -> String {
    let r = &outcome.report;
    let output = outcome.output.text(src);
    let as_json = Format::from_name(r.input_format).is_some_and(is_json_format);
    let messages: Cow<str> = if as_json {
        // A byte-order mark is not JSON whitespace; it carries no content.
        Cow::Borrowed(output.strip_prefix('\u{feff}').unwrap_or(&output))
    } else {
        Cow::Owned(json::quote(&output, false))
    };
    let decisions = serde_json::to_string(&r.decisions).unwrap_or_else(|_| "[]".into());
    let report = report::to_json(r);
    let mut out = String::with_capacity(messages.len() + decisions.len() + report.len() + 48);
    out.push_str("{\"messages\":");
    out.push_str(&messages);
    out.push_str(",\"decisions\":");
    out.push_str(&decisions);
    out.push_str(",\"report\":");
    out.push_str(&report);
    out.push('}');
    out
}

// ------------------------------------------------------------------------------------------
// explain_report

const EXPLAIN_ARGS: &[&str] = &["report", "source", "source_path", "only", "limit"];

/// The options of `explain_report` that are `lcc explain` flags (described in its schema).
const EXPLAIN_OPTIONS: &[Opt] = &[
    Opt {
        name: "only",
        kind: Kind::Str(&[]),
        flag: "--only",
        description: "",
    },
    Opt {
        name: "limit",
        kind: Kind::Integer,
        flag: "--limit",
        description: "",
    },
];

fn explain_schema() -> JsonObject {
    let mut props = Map::new();
    props.insert(
        "report".into(),
        json!({
            "type": ["object", "string"],
            "description": "The report: the `report` object compact_transcript returned, or \
        the text of a report file written by `lcc compact -r`."
        }),
    );
    props.insert(
        "source".into(),
        json!({
            "type": ["array", "object", "string"],
            "description": "Optional: the transcript the report was made from, as JSON or \
as its text (as compact_transcript's `messages`); adds each call's input and the first lines \
of its result."
        }),
    );
    props.insert(
        "source_path".into(),
        json!({
            "type": "string",
            "description": "Optional: the transcript the report was made from, as a file the \
        server can read (instead of `source`)."
        }),
    );
    props.insert(
        "only".into(),
        json!({
            "type": "string",
            "enum": ["keep", "trim", "drop", "dedupe", "replace", "pin"],
            "description": "Show only one kind of decision."
        }),
    );
    props.insert(
        "limit".into(),
        json!({
            "type": "integer",
            "minimum": 1,
            "description": "Show at most this many decisions per kind."
        }),
    );
    object_schema(props)
}

/// `explain_report`: the CLI's renderer on the arguments.
fn explain_report(args: &JsonObject) -> Result<String, String> {
    check_names(EXPLAIN, args, EXPLAIN_ARGS)?;
    let report = given(args, "report").ok_or_else(|| {
        arg_error("`report` is missing: give the report object compact_transcript returned")
    })?;
    let source = transcript_input(args, "source", "source_path", false)?;
    let mut argv = Vec::new();
    for o in EXPLAIN_OPTIONS {
        if let Some(v) = given(args, o.name) {
            argv.extend(flag_value(o, v)?);
        }
    }
    if let Some(s) = &source {
        argv.push(format!("--source={}", s.name()));
    }
    argv.push("--".into());
    argv.push("report".into());
    let parsed = ExplainArgv::try_parse_from(&argv).map_err(|e| clap_error(&e))?;
    let report: Cow<Value> = match report {
        Value::String(text) => {
            Cow::Owned(commands::explain::parse_report("report", text).map_err(cli_error)?)
        }
        other => Cow::Borrowed(other),
    };
    let source = match &source {
        Some(s) => Some(commands::explain::Source {
            name: s.name().to_string(),
            text: transcript_text(s)?,
        }),
        None => None,
    };
    commands::explain::explain_report(&parsed.args, "report", &report, source.as_ref())
        .map_err(cli_error)
}

// ------------------------------------------------------------------------------------------
// recall

const RECALL_ARGS: &[&str] = &["id", "lines"];

fn recall_schema() -> JsonObject {
    let mut props = Map::new();
    props.insert(
        "id".into(),
        json!({
            "type": "string",
            "pattern": "^[0-9a-f]{12,64}$",
            "description": "The stash id after `lcc recall` in a removal note (12 to 64 \
        lowercase hex digits: a unique prefix of the output's SHA-256)."
        }),
    );
    props.insert(
        "lines".into(),
        json!({
            "type": "string",
            "pattern": "^[0-9]+(-[0-9]+)?$",
            "description": "Optional: only lines A-B of the output (1-based, inclusive; `A` \
        alone for one line)."
        }),
    );
    let mut schema = object_schema(props);
    schema.insert("required".into(), json!(["id"]));
    schema
}

/// `recall`: the CLI's `lcc recall` on the arguments; the stored text, hash-verified.
fn recall(args: &JsonObject) -> Result<String, String> {
    check_names(RECALL, args, RECALL_ARGS)?;
    let string_arg = |name: &str| -> Result<Option<&str>, String> {
        match given(args, name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(arg_error(format!(
                "`{name}` must be a string, not {}",
                type_name(other)
            ))),
        }
    };
    let id = string_arg("id")?.ok_or_else(|| {
        arg_error("`id` is missing: give the id after `lcc recall` in the removal note")
    })?;
    let mut argv = Vec::new();
    if let Some(lines) = string_arg("lines")? {
        argv.push(format!("--lines={lines}"));
    }
    argv.push("--".into());
    argv.push(id.to_string());
    let parsed = RecallArgv::try_parse_from(&argv).map_err(|e| clap_error(&e))?;
    let bytes = commands::recall::recall(&parsed.args, &Env::read()).map_err(cli_error)?;
    // Stored outputs are the text of JSON strings, so UTF-8; anything else is not returned
    // altered (the CLI prints raw bytes, a tool result can only carry text).
    String::from_utf8(bytes).map_err(|_| {
        arg_error(format!(
            "stash {id} holds bytes that are not UTF-8 text; use `lcc recall {id}` to get them"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn every_option_maps_to_a_flag_with_its_value_attached() {
        let args = obj(json!({
            "question": "--not a flag",
            "provider": "rules",
            "threshold": 0.7,
            "preserve_recent": 3.0,
            "trim_head_chars": -1,
            "disk_check": false,
            "allow_command_pointers": false,
        }));
        let argv = compact_argv(&args, "messages").unwrap();
        assert_eq!(
            argv,
            [
                "--question=--not a flag",
                "--provider=rules",
                "--no-disk-check",
                "--threshold=0.7",
                "--preserve-recent=3",
                "--trim-head-chars=-1",
                "--",
                "messages",
            ]
        );
    }

    #[test]
    fn wrong_json_types_name_the_argument() {
        let e = compact_argv(&obj(json!({"threshold": "0.5"})), "m").unwrap_err();
        assert_eq!(e, "error: `threshold` must be a number, not a string");
        let e = compact_argv(&obj(json!({"disk_check": "false"})), "m").unwrap_err();
        assert_eq!(e, "error: `disk_check` must be true or false, not a string");
        let e = compact_argv(&obj(json!({"batch_size": [1]})), "m").unwrap_err();
        assert_eq!(e, "error: `batch_size` must be an integer, not an array");
    }

    #[test]
    fn schema_defaults_are_the_cli_defaults() {
        let s = compact_schema();
        let p = &s["properties"];
        assert_eq!(p["preserve_recent"]["default"], json!(6));
        assert_eq!(p["threshold"]["default"], json!(0.5));
        assert_eq!(p["provider"]["default"], json!("auto"));
        assert_eq!(p["rules_mode"]["default"], json!("lossless"));
        assert_eq!(p["max_request_tokens"]["default"], json!(30000));
        assert_eq!(p["disk_check"]["default"], json!(true));
        assert!(p["workspace_root"].get("default").is_none());
    }

    #[test]
    fn a_clap_error_is_its_first_paragraph() {
        let e = CompactArgv::try_parse_from(["--threshold=x", "--", "in"]).unwrap_err();
        let msg = clap_error(&e);
        assert!(
            msg.starts_with("error: invalid value 'x' for '--threshold"),
            "{msg}"
        );
        assert!(!msg.contains("Usage"), "{msg}");
    }
}
