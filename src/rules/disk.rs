//! The disk check of `--rules-mode recoverable --workspace-root DIR`: is the file a read
//! pointer names still holding exactly the output being removed?
//!
//! A read is replaced by a pointer only when all of these hold *now*:
//! * the file exists (a dangling symlink counts as missing);
//! * its path (the call's path joined to the call's working directory) has no `..`
//!   component (checked by the caller: `..` is resolved by the kernel after symlinks, so the
//!   checked file and the re-read file could differ);
//! * after resolving symlinks it lies inside its own directory or inside the workspace root
//!   (a final symlink may not escape; files outside the root are fine, the root only turns
//!   the check on);
//! * it is a regular file of at most [`DISK_MAX_BYTES`], valid UTF-8;
//! * its lines equal the removed output's lines, whole file or the read's range, after
//!   removing only what the read tool added: `N\t` / `N→` line-number prefixes of a Read, the
//!   Codex exec header. Nothing else is normalised: a CRLF file never matches an LF output.
//!
//! The file's resolved path and SHA-256 are kept in a [`Stamp`]; right before the output is
//! written, [`unchanged`] re-reads and re-hashes it, and a file that changed since is kept.
//!
//! All file access goes through [`FileProbe`], so the rules stay testable without a disk;
//! the real implementation is `crate::io::DiskProbe`.

use std::io;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use super::shell::{Spec, FILE_READ_TOOLS};

/// A larger file is never read for a pointer (its read is kept).
pub const DISK_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// What opening a file for the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    Regular(Vec<u8>),
    NotRegular,
    TooLarge,
}

/// File access for the disk check.
pub trait FileProbe: Sync {
    /// The path with every symlink resolved (`realpath`); the OS error when it cannot be.
    fn real_path(&self, path: &Path) -> io::Result<PathBuf>;
    /// The bytes of a regular file of at most `max` bytes.
    fn read_regular(&self, path: &Path, max: u64) -> io::Result<Opened>;
}

/// A file the disk check vouched for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// The path as checked (absolute, as the pointer resolves it).
    pub target: PathBuf,
    /// Where it resolved to.
    pub real: PathBuf,
    pub sha256: [u8; 32],
}

/// Why a disk check keeps a read.
pub mod reason {
    pub const VERIFIED: &str = "replace_disk_verified";
    pub const MISMATCH: &str = "keep_disk_mismatch";
    pub const MISSING: &str = "keep_disk_missing";
    pub const NOT_REGULAR: &str = "keep_disk_not_regular";
    pub const OUTSIDE_ROOT: &str = "keep_disk_outside_root";
    pub const TOO_LARGE: &str = "keep_disk_too_large";
    pub const UNREADABLE: &str = "keep_disk_unreadable";
    pub const CHANGED_BEFORE_EMIT: &str = "keep_disk_changed_before_emit";
}

/// Does `path` have a `..` component?
pub fn has_dotdot(path: &str) -> bool {
    path.split('/').any(|c| c == "..")
}

fn is_under(path: &Path, dir: &Path) -> bool {
    dir != Path::new("/") && path.starts_with(dir)
}

/// Resolve and read `target`: (resolved path, bytes) or the keep reason.
fn open(
    probe: &dyn FileProbe,
    root: &Path,
    target: &Path,
) -> Result<(PathBuf, Vec<u8>), &'static str> {
    let err = |e: io::Error| {
        if e.kind() == io::ErrorKind::NotFound {
            reason::MISSING
        } else {
            reason::UNREADABLE
        }
    };
    let real = probe.real_path(target).map_err(err)?;
    let own_dir = target.parent().unwrap_or(Path::new("/"));
    let homes = [probe.real_path(root).ok(), probe.real_path(own_dir).ok()];
    if !homes.iter().flatten().any(|h| is_under(&real, h)) {
        return Err(reason::OUTSIDE_ROOT);
    }
    match probe.read_regular(&real, DISK_MAX_BYTES).map_err(err)? {
        Opened::Regular(bytes) if bytes.len() as u64 > DISK_MAX_BYTES => Err(reason::TOO_LARGE),
        Opened::Regular(bytes) => Ok((real, bytes)),
        Opened::NotRegular => Err(reason::NOT_REGULAR),
        Opened::TooLarge => Err(reason::TOO_LARGE),
    }
}

/// Check a read against the disk. `target` is absolute and has no `..`; `body` is the output
/// without its Codex header.
pub fn check(
    probe: &dyn FileProbe,
    root: &Path,
    target: &Path,
    tool: &str,
    spec: Spec,
    body: &str,
) -> Result<Stamp, &'static str> {
    debug_assert!(!target.components().any(|c| c == Component::ParentDir));
    let (real, bytes) = open(probe, root, target)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| reason::UNREADABLE)?;
    if !lines_match(tool, spec, body, &file_lines(text)) {
        return Err(reason::MISMATCH);
    }
    Ok(Stamp {
        target: target.to_path_buf(),
        real,
        sha256: Sha256::digest(&bytes).into(),
    })
}

/// Does the file a stamp names still resolve to the same place and hash the same?
pub fn unchanged(probe: &dyn FileProbe, root: &Path, stamp: &Stamp) -> bool {
    open(probe, root, &stamp.target).is_ok_and(|(real, bytes)| {
        real == stamp.real && <[u8; 32]>::from(Sha256::digest(&bytes)) == stamp.sha256
    })
}

/// A file's lines: one trailing `\n` ends the last line; an empty file has none. `\r` stays.
pub fn file_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

/// A command output minus a leading Codex exec header (header lines, then a line that is
/// exactly `Output:`), and whether the header reports success (every exit code 0, not still
/// running). Without such a header: the whole text, success.
pub fn body(text: &str) -> (&str, bool) {
    let mut offset = 0;
    let mut ok = true;
    for line in text.split('\n') {
        let next = offset + line.len() + 1;
        if super::lossless::is_header_line(line) {
            if let Some(code) = line.strip_prefix("Process exited with code ") {
                let digits: String = code.chars().take_while(char::is_ascii_digit).collect();
                if !digits.is_empty() && digits != "0" {
                    ok = false;
                }
            }
            if line.starts_with("Process running") {
                ok = false;
            }
            offset = next;
            continue;
        }
        if line == "Output:" {
            return (text.get(next.min(text.len())..).unwrap_or(""), ok);
        }
        break;
    }
    (text, true)
}

/// A `cat -n`-style output (Claude Code's Read): every line `<spaces><n>\t<content>` or
/// `<spaces><n>→<content>` with consecutive numbers. Trailing newlines are ignored.
pub fn numbered(body: &str) -> Option<Vec<(usize, &str)>> {
    let mut rows: Vec<(usize, &str)> = Vec::new();
    for line in body.trim_end_matches('\n').split('\n') {
        let rest = line.trim_start_matches(char::is_whitespace);
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || rest.starts_with('0') {
            return None;
        }
        let n: usize = rest[..digits].parse().ok()?;
        let after = &rest[digits..];
        let content = after
            .strip_prefix('\t')
            .or_else(|| after.strip_prefix('→'))?;
        if let Some(&(prev, _)) = rows.last() {
            if n != prev + 1 {
                return None;
            }
        }
        rows.push((n, content));
    }
    Some(rows)
}

/// Does a read's output equal the file's lines (whole file, or the read's part)?
pub fn lines_match(tool: &str, spec: Spec, body: &str, disk: &[&str]) -> bool {
    if FILE_READ_TOOLS.contains(&tool) {
        if let Some(mut rows) = numbered(body) {
            // Read numbers the empty line after a final newline; it holds no content.
            if rows.len() > 1 && rows.last() == Some(&(disk.len() + 1, "")) {
                rows.pop();
            }
            if spec == Spec::All
                && (rows.first().map(|r| r.0) != Some(1)
                    || rows.last().map(|r| r.0) != Some(disk.len()))
            {
                return false;
            }
            return rows
                .iter()
                .all(|&(n, content)| n <= disk.len() && disk[n - 1] == content);
        }
    }
    let got = file_lines(body);
    match spec {
        Spec::All => got == disk,
        Spec::Tail(0) | Spec::Empty => got.is_empty(),
        Spec::Tail(k) => got == disk[disk.len().saturating_sub(k)..],
        Spec::Range(a, b) => {
            let from = (a - 1).min(disk.len());
            got == disk[from..b.min(disk.len()).max(from)]
        }
        Spec::Numbered => false,
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An in-memory file system: files, directories and symlinks by absolute path.
    #[derive(Default)]
    pub struct MemProbe {
        pub files: HashMap<PathBuf, Vec<u8>>,
        pub dirs: Vec<PathBuf>,
        pub links: HashMap<PathBuf, PathBuf>,
    }

    impl FileProbe for MemProbe {
        fn real_path(&self, path: &Path) -> io::Result<PathBuf> {
            let mut p = path.to_path_buf();
            for _ in 0..8 {
                match self.links.get(&p) {
                    Some(to) => p = to.clone(),
                    None => break,
                }
            }
            if self.files.contains_key(&p) || self.dirs.contains(&p) || p == Path::new("/") {
                Ok(p)
            } else {
                Err(io::ErrorKind::NotFound.into())
            }
        }
        fn read_regular(&self, path: &Path, max: u64) -> io::Result<Opened> {
            match self.files.get(path) {
                Some(b) if b.len() as u64 > max => Ok(Opened::TooLarge),
                Some(b) => Ok(Opened::Regular(b.clone())),
                None if self.dirs.iter().any(|d| d == path) => Ok(Opened::NotRegular),
                None => Err(io::ErrorKind::NotFound.into()),
            }
        }
    }

    fn fs() -> MemProbe {
        let mut m = MemProbe::default();
        m.dirs.push("/w".into());
        m.dirs.push("/w/src".into());
        m.dirs.push("/etc".into());
        m.files
            .insert("/w/src/a.py".into(), b"one\ntwo\nthree\n".to_vec());
        m.files
            .insert("/w/crlf.txt".into(), b"one\r\ntwo\r\n".to_vec());
        m.files.insert("/w/bin.dat".into(), vec![0xff, 0xfe, b'\n']);
        m.files.insert("/etc/secret".into(), b"s\n".to_vec());
        m.links.insert("/w/src/esc".into(), "/etc/secret".into());
        m.links.insert("/w/src/ok".into(), "/w/src/a.py".into());
        m
    }

    fn chk(
        m: &MemProbe,
        path: &str,
        tool: &str,
        spec: Spec,
        body: &str,
    ) -> Result<(), &'static str> {
        check(m, Path::new("/w"), Path::new(path), tool, spec, body).map(|_| ())
    }

    #[test]
    fn reasons() {
        let m = fs();
        assert_eq!(
            chk(&m, "/w/src/a.py", "Bash", Spec::All, "one\ntwo\nthree"),
            Ok(())
        );
        assert_eq!(
            chk(&m, "/w/src/a.py", "Bash", Spec::All, "one\ntwo\nthree\n"),
            Ok(())
        );
        assert_eq!(
            chk(&m, "/w/src/a.py", "Bash", Spec::All, "one\ntwo"),
            Err(reason::MISMATCH)
        );
        assert_eq!(
            chk(&m, "/w/src/a.py", "Bash", Spec::Range(2, 3), "two\nthree"),
            Ok(())
        );
        assert_eq!(
            chk(&m, "/w/src/a.py", "Bash", Spec::Tail(1), "three"),
            Ok(())
        );
        assert_eq!(
            chk(&m, "/w/src/nope.py", "Bash", Spec::All, "x"),
            Err(reason::MISSING)
        );
        assert_eq!(
            chk(&m, "/w/src", "Bash", Spec::All, "x"),
            Err(reason::NOT_REGULAR)
        );
        assert_eq!(
            chk(&m, "/w/src/esc", "Bash", Spec::All, "s"),
            Err(reason::OUTSIDE_ROOT)
        );
        assert_eq!(
            chk(&m, "/w/src/ok", "Bash", Spec::All, "one\ntwo\nthree"),
            Ok(())
        );
        assert_eq!(chk(&m, "/etc/secret", "Bash", Spec::All, "s"), Ok(()));
        assert_eq!(
            chk(&m, "/w/bin.dat", "Bash", Spec::All, "x"),
            Err(reason::UNREADABLE)
        );
        assert_eq!(
            chk(&m, "/w/crlf.txt", "Bash", Spec::All, "one\ntwo"),
            Err(reason::MISMATCH)
        );
        assert_eq!(
            chk(&m, "/w/crlf.txt", "Bash", Spec::All, "one\r\ntwo\r"),
            Ok(())
        );
    }

    #[test]
    fn read_prefixes() {
        let m = fs();
        let tab = "     1\tone\n     2\ttwo\n     3\tthree";
        let arrow = "     1→one\n     2→two\n     3→three\n     4→";
        assert_eq!(chk(&m, "/w/src/a.py", "Read", Spec::All, tab), Ok(()));
        assert_eq!(chk(&m, "/w/src/a.py", "Read", Spec::All, arrow), Ok(()));
        assert_eq!(
            chk(&m, "/w/src/a.py", "Read", Spec::Numbered, "     2\ttwo"),
            Ok(())
        );
        assert_eq!(
            chk(
                &m,
                "/w/src/a.py",
                "Read",
                Spec::All,
                "     1\tone\n     2\ttwo"
            ),
            Err(reason::MISMATCH)
        );
    }

    #[test]
    fn stamps_notice_changes() {
        let mut m = fs();
        let s = check(
            &m,
            Path::new("/w"),
            Path::new("/w/src/a.py"),
            "Bash",
            Spec::All,
            "one\ntwo\nthree",
        )
        .unwrap();
        assert!(unchanged(&m, Path::new("/w"), &s));
        m.files
            .insert("/w/src/a.py".into(), b"one\ntwo\nTHREE\n".to_vec());
        assert!(!unchanged(&m, Path::new("/w"), &s));
        m.files.remove(Path::new("/w/src/a.py"));
        assert!(!unchanged(&m, Path::new("/w"), &s));
    }

    #[test]
    fn codex_body() {
        let t = "Chunk ID: a\nWall time: 1s\nProcess exited with code 0\nOriginal token count: 3\nOutput:\none\ntwo";
        assert_eq!(body(t), ("one\ntwo", true));
        let f = t.replace("code 0", "code 1");
        assert_eq!(body(&f), ("one\ntwo", false));
        let r = "Process running with session ID 3\nOutput:\nx";
        assert_eq!(body(r), ("x", false));
        assert_eq!(body("Output:\nx"), ("x", true));
        assert_eq!(body("plain\ntext"), ("plain\ntext", true));
        assert_eq!(body("Chunk ID: a\nOutput:"), ("", true));
    }

    #[test]
    fn numbered_rows() {
        assert_eq!(numbered("  5\ta\n  6→b\n"), Some(vec![(5, "a"), (6, "b")]));
        assert_eq!(numbered("  5\ta\n  7\tb"), None);
        assert_eq!(numbered("05\ta"), None);
        assert_eq!(numbered(""), None);
        assert_eq!(numbered("x"), None);
    }
}
