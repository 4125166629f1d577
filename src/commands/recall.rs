//! `lcc recall <id> [--lines a-b]`: print a tool output `--rules-mode stashed` removed.
//!
//! The stash file is found by its id (a unique prefix of its SHA-256 name), read whole, and
//! re-hashed; only bytes that hash to the file's name are printed, exactly as stored.

use anyhow::Result;
use sha2::{Digest, Sha256};

use crate::cli::RecallArgs;
use crate::error::Error;
use crate::io;
use crate::rules::stash;
use crate::settings::Env;

pub fn run(a: &RecallArgs, env: &Env) -> Result<()> {
    let bytes = recall(a, env)?;
    io::write_stdout(&bytes)?;
    Ok(())
}

/// The bytes `lcc recall` prints for these arguments: the stored output (or its line range),
/// only after its hash checks out. Shared by the CLI and the MCP `recall` tool.
pub fn recall(a: &RecallArgs, env: &Env) -> Result<Vec<u8>> {
    if !stash::is_id(&a.id) {
        return Err(Error::Usage(format!(
            "'{}' is not a stash id: expected the 12 to 64 lowercase hex digits after 'lcc recall' in a note",
            a.id
        ))
        .into());
    }
    let range = match &a.lines {
        None => None,
        Some(spec) => Some(stash::parse_lines(spec).ok_or_else(|| {
            Error::Usage(format!(
                "--lines must be A-B or A with 1 <= A <= B (got '{spec}')"
            ))
        })?),
    };
    let dir = env.require_stash_dir()?;
    let found = io::stash_find(&dir, &a.id)?;
    let name = match found.as_slice() {
        [] => {
            return Err(
                Error::Usage(format!("stash id {} not found in {}", a.id, dir.display())).into(),
            )
        }
        [one] => one,
        _ => {
            return Err(Error::Usage(format!(
                "stash id {} is ambiguous in {} ({} files); give more of the hash",
                a.id,
                dir.display(),
                found.len()
            ))
            .into())
        }
    };
    let path = dir.join(name);
    let bytes = io::read_bytes(&path)?;
    let actual: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if actual != *name {
        return Err(Error::Usage(format!(
            "stash file {} fails its hash check (its bytes hash to {actual}): it was changed or damaged, so it is not printed",
            path.display()
        ))
        .into());
    }
    let out = match range {
        None => return Ok(bytes),
        Some((first, last)) => stash::slice_lines(&bytes, (first, last)).ok_or_else(|| {
            Error::Usage(format!(
                "--lines {first}-{last} starts past the end: stash {} has {} line(s)",
                a.id,
                bytes.split_inclusive(|&b| b == b'\n').count()
            ))
        })?,
    };
    Ok(out.to_vec())
}
