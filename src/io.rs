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
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of what `write` writes, through a buffer, as it comes: the text need
/// never be held whole.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
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
        let mut w = std::io::BufWriter::with_capacity(1 << 16, fs::File::create(&tmp)?);
        write(&mut w)?;
        let f = w
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
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
    write_stdout_with(|w| w.write_all(bytes))
}

/// Write to stdout what `write` writes, as it comes.
pub fn write_stdout_with(
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    write(&mut out)
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

/// The real file system for the recoverable disk check.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskProbe;

impl crate::rules::FileProbe for DiskProbe {
    fn real_path(&self, path: &Path) -> std::io::Result<PathBuf> {
        fs::canonicalize(path)
    }

    fn read_regular(&self, path: &Path, max: u64) -> std::io::Result<crate::rules::disk::Opened> {
        use crate::rules::disk::Opened;
        let meta = fs::metadata(path)?;
        if !meta.is_file() {
            return Ok(Opened::NotRegular);
        }
        if meta.len() > max {
            return Ok(Opened::TooLarge);
        }
        let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        fs::File::open(path)?.take(max + 1).read_to_end(&mut buf)?;
        if buf.len() as u64 > max {
            return Ok(Opened::TooLarge);
        }
        Ok(Opened::Regular(buf))
    }
}

/// Is `path` an existing directory?
pub fn is_dir(path: &Path) -> bool {
    path.is_dir()
}

fn stash_err(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { what, source }
}

/// Store outputs in the stash directory, each under its name (the SHA-256 of its bytes in
/// hex), on one thread per core. Each file is written atomically: a temporary file in the same
/// directory, renamed into place; a file already there that holds the right bytes is left
/// alone. The directory is created private (0700), files are private (0600), and the
/// directory is synced once at the end rather than every file (recall re-hashes what it
/// reads, so a file a crash damaged is refused, never misread). Returns, per entry, why it
/// could not be stored. `bytes` gives an entry's bytes when it is written: each is made,
/// written and dropped in turn, never all held at once.
pub fn stash_put_all<T: Sync>(
    dir: &Path,
    entries: &[(&str, T)],
    bytes: impl for<'a> Fn(&'a T) -> std::borrow::Cow<'a, [u8]> + Sync,
) -> Vec<Option<String>> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    if let Err(e) = builder.create(dir) {
        let why = format!(
            "could not create the stash directory {}: {e}",
            dir.display()
        );
        return entries.iter().map(|_| Some(why.clone())).collect();
    }
    // Identical outputs share one file: write each name once (two threads must never
    // write the same temporary file).
    let mut first: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let unique: Vec<usize> = (0..entries.len())
        .filter(|&i| {
            let fresh = !first.contains_key(entries[i].0);
            first.entry(entries[i].0).or_insert(i);
            fresh
        })
        .collect();
    // Plain threads rather than the rayon pool: the pool may be busy counting tokens, and
    // these threads mostly wait on the file system.
    let written = in_parallel(&unique, |&i| {
        stash_put_one(dir, entries[i].0, &bytes(&entries[i].1))
            .err()
            .map(|e| e.to_string())
    });
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    let by_name: std::collections::HashMap<&str, &Option<String>> =
        unique.iter().map(|&i| entries[i].0).zip(&written).collect();
    entries
        .iter()
        .map(|(name, _)| by_name[name].clone())
        .collect()
}

/// `f` over `items` on one thread per core (each takes the next item when done), results in
/// item order.
fn in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, 8)
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        out.push((i, f(item)));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

fn stash_put_one(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Error> {
    let target = dir.join(name);
    // The name is the hash of `bytes`: a file holding exactly them is already right.
    if fs::metadata(&target).is_ok_and(|m| m.len() == bytes.len() as u64)
        && fs::read(&target).is_ok_and(|existing| existing == bytes)
    {
        return Ok(());
    }
    let tmp = dir.join(format!(".tmp-{name}-{}", std::process::id()));
    let result = (|| {
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp)?;
        f.write_all(bytes)?;
        drop(f);
        fs::rename(&tmp, &target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(stash_err(format!("could not write {}", target.display())))
}

/// The stash files whose names start with `prefix` (sorted). A missing directory holds none.
pub fn stash_find(dir: &Path, prefix: &str) -> Result<Vec<String>, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(stash_err(format!("could not list {}", dir.display()))(e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        if let Some(name) = entry.file_name().to_str() {
            if name.starts_with(prefix) && crate::rules::stash::is_file_name(name) {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    Ok(out)
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
