//! `lcc explain`: read a report (and optionally its source transcript), render, print.
//! Never touches the network.

use anyhow::Result;

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
    let report: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        // serde_json's message ends with its own " at line L column C"; say it once.
        let msg = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        Error::Usage(format!(
            "{name} is not valid JSON (line {}, column {}): {}",
            e.line(),
            e.column(),
            msg.strip_suffix(&suffix).unwrap_or(&msg)
        ))
    })?;
    let source_text = match &a.source {
        Some(p) => Some(io::read_input(p)?),
        None => None,
    };
    let source = match (&a.source, &source_text) {
        (Some(p), Some(src)) => {
            Some(transcript::parse(src, None).map_err(|error| Error::Input {
                file: io::display_name(p),
                error,
            })?)
        }
        _ => None,
    };
    if a.limit == Some(0) {
        return Err(Error::Usage("--limit must be at least 1".into()).into());
    }
    let filter = Filter {
        only: a.only.clone(),
        limit: a.limit,
    };
    let out = explain::render(&name, &report, source.as_ref(), &filter).map_err(Error::Usage)?;
    io::write_stdout(out.as_bytes())?;
    Ok(())
}
