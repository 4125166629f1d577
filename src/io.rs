//! The only module that touches files, stdin and stdout.
//!
//! Files are written atomically: to a temporary file in the target's directory, flushed, then
//! renamed over the target, so a failure never leaves a half-written file (and `-o` may name
//! the input itself).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::transcript::ParseError;

/// Read a transcript from a path or `-` (stdin). Invalid UTF-8 is bad input (exit 2).
pub fn read_input(path: &str) -> Result<String, Error> {
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|source| Error::Io {
                what: "could not read stdin".into(),
                source,
            })?;
        buf
    } else {
        read_bytes(Path::new(path))?
    };
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        Error::Input {
            file: display_name(path),
            error: ParseError::new(
                format!("byte {at}"),
                "the file is not valid UTF-8 (transcripts are UTF-8 JSON or JSONL)",
            ),
        }
    })
}

pub fn display_name(path: &str) -> String {
    if path == "-" {
        "<stdin>".to_string()
    } else {
        path.to_string()
    }
}

pub fn read_bytes(path: &Path) -> Result<Vec<u8>, Error> {
    if path.is_dir() {
        return Err(Error::Io {
            what: format!("could not read {}", path.display()),
            source: std::io::Error::other("it is a directory"),
        });
    }
    fs::read(path).map_err(|source| Error::Io {
        what: format!("could not read {}", path.display()),
        source,
    })
}

/// Write `bytes` to `path` atomically (temp file + rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let err = |source| Error::Io {
        what: format!("could not write {}", path.display()),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.lcc-{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        // Keep the permissions of a file we replace.
        if let Ok(meta) = fs::metadata(path) {
            fs::set_permissions(&tmp, meta.permissions())?;
        }
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

/// Write to stdout.
pub fn write_stdout(bytes: &[u8]) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|source| Error::Io {
            what: "could not write to stdout".into(),
            source,
        })
}

/// Write a line to stderr (the human summary); errors are ignored.
pub fn eprint(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Is stderr a terminal? (progress bars only then)
pub fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

/// Read a key file: `None` when it does not exist (or is not a file); an unreadable file is
/// an I/O error (exit 1) rather than a silent "no key".
pub fn read_key_file(path: &Path) -> Result<Option<String>, Error> {
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = fs::read(path).map_err(|source| Error::Io {
        what: format!("could not read the Jev key file {}", path.display()),
        source,
    })?;
    String::from_utf8(bytes).map(Some).map_err(|_| Error::Io {
        what: format!("could not read the Jev key file {}", path.display()),
        source: std::io::Error::other("not valid UTF-8"),
    })
}
