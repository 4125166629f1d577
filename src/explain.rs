//! Render a `transcript-compaction-1.0` report for a person. Pure: report (+ optional source
//! transcript) in, text out.

use crate::transcript::Transcript;

/// `--only` and `--limit`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub only: Option<String>,
    pub limit: Option<usize>,
}

/// Render the report, or say why it is not a tool-call report.
pub fn render(
    name: &str,
    report: &serde_json::Value,
    source: Option<&Transcript>,
    filter: &Filter,
) -> Result<String, String> {
    let _ = (source, filter);
    if report.get("schema_version").and_then(|v| v.as_str()) != Some(crate::report::SCHEMA_VERSION)
    {
        return Err(format!("{name} is not a transcript-compaction-1.0 report"));
    }
    Ok(String::new())
}
