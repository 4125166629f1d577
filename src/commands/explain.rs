//! `lcc explain`: read a report (and optionally its source transcript), render, print.
//! Never touches the network.

use anyhow::Result;

use crate::cli::ExplainArgs;
use crate::error::Error;
use crate::explain::{self, Filter};
use crate::{io, transcript};

pub fn run(a: &ExplainArgs) -> Result<()> {
    let text = io::read_text(&a.report)?;
    let name = a.report.display().to_string();
    let report: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::Usage(format!(
            "{name} is not valid JSON (line {}, column {}): {e}",
            e.line(),
            e.column()
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
