//! `lcc explain`: read a report (and optionally its source transcript), render, print.
//! Never touches the network.

use anyhow::Result;
use serde_json::Value;

use crate::cli::ExplainArgs;
use crate::error::Error;
use crate::explain::{self, Filter};
use crate::{io, transcript};

pub fn run(a: &ExplainArgs) -> Result<()> {
    let name = a.report.display().to_string();
    let text = String::from_utf8(io::read_bytes(&a.report)?).map_err(|e| {
        Error::Usage(format!(
            "{name} is not a report: it is not valid UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let report = parse_report(&name, &text)?;
    let source = match &a.source {
        Some(p) => Some(Source {
            name: io::display_name(p),
            text: io::read_input(p)?,
        }),
        None => None,
    };
    let out = explain_report(a, &name, &report, source.as_ref())?;
    io::write_stdout(out.as_bytes())?;
    Ok(())
}

/// A source transcript for `--source`: the name errors use, and its text.
pub struct Source {
    pub name: String,
    pub text: String,
}

/// Read a report's text as JSON; `name` is what the error calls it.
pub fn parse_report(name: &str, text: &str) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| {
        // serde_json's message ends with its own " at line L column C"; say it once.
        let msg = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        Error::Usage(format!(
            "{name} is not valid JSON (line {}, column {}): {}",
            e.line(),
            e.column(),
            msg.strip_suffix(&suffix).unwrap_or(&msg)
        ))
    })
}

/// Render a report already in memory (no file I/O). `lcc explain` and the MCP tool
/// `explain_report` both come here, so they validate and word everything the same way.
pub fn explain_report(
    a: &ExplainArgs,
    name: &str,
    report: &Value,
    source: Option<&Source>,
) -> Result<String, Error> {
    let source = match source {
        Some(s) => Some(
            transcript::parse(&s.text, None).map_err(|error| Error::Input {
                file: s.name.clone(),
                error,
            })?,
        ),
        None => None,
    };
    if a.limit == Some(0) {
        return Err(Error::Usage("--limit must be at least 1".into()));
    }
    let filter = Filter {
        only: a.only.clone(),
        limit: a.limit,
    };
    explain::render(name, report, source.as_ref(), &filter).map_err(Error::Usage)
}
