//! Shell commands as the recoverable policy sees them: which command a call ran, whether it
//! is on the read-only allowlist (re-running it changes nothing), and whether it reads one
//! file (so its output can be recovered by re-reading that file).
//!
//! # The allowlist grammar
//! A command is considered only when it is a *simple* command: none of `| ; & < > ` $ ( ) \`
//! or a newline anywhere (no pipes, chains, redirects, substitutions or escapes), it splits
//! into words under POSIX quoting, its first word is not an environment assignment (`A=1 ls`)
//! or `env`, and it is not a path to a program other than one under `/bin/` or `/usr/bin/`.
//! Then, by program (the first word's last `/` segment):
//!
//! | program | read-only when |
//! |---|---|
//! | `ls`, `pwd`, `wc`, `cat`, `head`, `nl`, `grep`, `egrep`, `fgrep` | always (but see stdin below) |
//! | `tree` | no `-o`/`--output` (or `-R`) in any flag |
//! | `tail` | no follow mode (`-f`, `-F` in any short-flag group, `--follow`, `--retry`) |
//! | `rg` | no `--pre` |
//! | `find` | none of `-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls` |
//! | `sed` | exactly `sed -n 'A[,B]p' FILE` with `A <= B` |
//! | `git` | `status`, `diff`, `log` or `show`, without `--output`/`--ext-diff` |
//! | `python`/`python3` | `-V` alone |
//! | a known tool (`node`, `npm`, `git`, `cargo`, …) | `--version` alone |
//!
//! Never: an argument `-` or under `/dev`, `/proc`, `/sys` (stdin and special files do not
//! re-read the same), `cat`/`head`/`tail`/`nl`/`wc` with no file operand, `grep` with fewer
//! than two operands and no recursive flag (it would read stdin).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::text::{first_truthy, truthy};

/// Tools that run shell commands (Claude Code, Codex, Hermes).
pub const SHELL_TOOLS: [&str; 6] = [
    "Bash",
    "exec_command",
    "shell",
    "local_shell",
    "container.exec",
    "terminal",
];
/// Tools that read one file.
pub const FILE_READ_TOOLS: [&str; 4] = ["Read", "view", "read_file", "NotebookRead"];
const VERSION_TOOLS: [&str; 17] = [
    "python", "python3", "node", "npm", "git", "pip", "pip3", "uv", "bun", "deno", "rustc",
    "cargo", "ruby", "go", "tsc", "docker", "pnpm",
];
const FIND_UNSAFE: [&str; 9] = [
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];
const STDIN_PROGS: [&str; 5] = ["cat", "head", "tail", "nl", "wc"];

/// A path under `/dev`, `/proc` or `/sys` (optionally behind macOS's `/private`).
pub fn is_special_path(p: &str) -> bool {
    let p = p
        .strip_prefix("/private")
        .filter(|r| r.starts_with('/'))
        .unwrap_or(p);
    ["/dev", "/proc", "/sys"]
        .iter()
        .any(|d| p == *d || p.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
}

/// A path in a system temp directory (`/tmp`, `/var/tmp`, `/var/folders`, `/dev/shm`).
pub fn is_temp_path(p: &str) -> bool {
    let under = |p: &str, d: &str| p == d || p.strip_prefix(d).is_some_and(|r| r.starts_with('/'));
    let q = p
        .strip_prefix("/private")
        .filter(|r| r.starts_with('/'))
        .unwrap_or(p);
    ["/tmp", "/var/tmp", "/var/folders"]
        .iter()
        .any(|d| under(q, d))
        || under(p, "/dev/shm")
}

/// The shell command a call runs, or `None` when it is not a shell call (or a background
/// job, whose result is a process handle, not the command's output).
pub fn shell_command(tool: &str, input: &Value) -> Option<String> {
    if !SHELL_TOOLS.contains(&tool) || input.get("background").is_some_and(truthy) {
        return None;
    }
    let value = input.get("command").or_else(|| input.get("cmd"))?;
    match value {
        Value::Array(items) => {
            let words: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            let words = words?;
            let shell = |w: &str| matches!(w.rsplit('/').next(), Some("bash" | "sh" | "zsh"));
            if words.len() == 3 && shell(words[0]) && matches!(words[1], "-c" | "-lc") {
                Some(words[2].to_string())
            } else {
                Some(words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" "))
            }
        }
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// POSIX shell quoting of one word (`shlex.quote`).
fn quote(w: &str) -> String {
    if w.is_empty() {
        return "''".into();
    }
    let safe = w
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if safe {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\"'\"'"))
    }
}

/// Split a command into words with POSIX quoting, for commands that hold no backslash or
/// `$` (those are refused before this): `'…'` and `"…"` are literal, adjacent parts join.
fn split_words(cmd: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\r' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(x) => cur.push(x),
                        None => return None,
                    }
                }
            }
            x => {
                in_word = true;
                cur.push(x);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// The words of a simple command (see the module docs), or `None`.
pub fn argv(cmd: &str) -> Option<Vec<String>> {
    if cmd.chars().any(|c| {
        matches!(
            c,
            '|' | ';' | '&' | '<' | '>' | '`' | '$' | '\n' | '\\' | '(' | ')'
        )
    }) {
        return None;
    }
    let words = split_words(cmd)?;
    let first = words.first()?;
    if first.contains('=') || first == "env" {
        return None;
    }
    if first.contains('/') && !(first.starts_with("/bin/") || first.starts_with("/usr/bin/")) {
        return None;
    }
    Some(words)
}

fn prog(argv0: &str) -> &str {
    argv0.rsplit('/').next().unwrap_or(argv0)
}

/// Arguments that are operands (files), skipping the values of `-n`, `-c`, `--lines`,
/// `--bytes`, `-e`, `-f`.
fn operands(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if matches!(
            a.as_str(),
            "-n" | "-c" | "--lines" | "--bytes" | "-e" | "-f"
        ) {
            skip = true;
        } else if a == "-" || !a.starts_with('-') {
            out.push(a.as_str());
        }
    }
    out
}

/// `arg` is a long option that getopt may expand to one of `names` (`--fo` → `--follow`).
fn long_opt(arg: &str, names: &[&str]) -> bool {
    let Some(rest) = arg.strip_prefix("--") else {
        return false;
    };
    let name = rest.split('=').next().unwrap_or("");
    !name.is_empty() && names.iter().any(|n| n.starts_with(name))
}

fn short_group_has(a: &str, flags: &[char]) -> bool {
    a.starts_with('-') && !a.starts_with("--") && a.chars().any(|c| flags.contains(&c))
}

/// Is `cmd` on the read-only allowlist?
pub fn is_read_only(cmd: &str) -> bool {
    argv(cmd).is_some_and(|w| read_only_argv(&w))
}

fn read_only_argv(words: &[String]) -> bool {
    let p = prog(&words[0]);
    let args = &words[1..];
    if args.iter().any(|a| a == "-" || is_special_path(a)) {
        return false;
    }
    if STDIN_PROGS.contains(&p) && operands(args).is_empty() {
        return false;
    }
    if matches!(p, "grep" | "egrep" | "fgrep")
        && operands(args).len() < 2
        && !args.iter().any(|a| short_group_has(a, &['r', 'R']))
    {
        return false;
    }
    if matches!(p, "python" | "python3") && args.len() == 1 && args[0] == "-V" {
        return true;
    }
    if VERSION_TOOLS.contains(&p) && args.len() == 1 && args[0] == "--version" {
        return true;
    }
    match p {
        "ls" | "pwd" | "wc" | "cat" | "head" | "nl" | "grep" | "egrep" | "fgrep" => true,
        "tree" => !args
            .iter()
            .any(|a| a.starts_with("--o") || short_group_has(a, &['o', 'R'])),
        "tail" => !args.iter().any(|a| {
            a.starts_with("--follow")
                || a.starts_with("--retry")
                || long_opt(a, &["follow", "retry"])
                || short_group_has(a, &['f', 'F'])
        }),
        "rg" => !args.iter().any(|a| a.starts_with("--pre")),
        "find" => !args.iter().any(|a| FIND_UNSAFE.contains(&a.as_str())),
        "sed" => sed_range(args).is_some(),
        "git" => {
            args.first()
                .is_some_and(|s| matches!(s.as_str(), "status" | "diff" | "log" | "show"))
                && !args.iter().any(|a| {
                    a.starts_with("--output")
                        || a.starts_with("--ext-diff")
                        || long_opt(a, &["output", "ext-diff"])
                })
        }
        _ => false,
    }
}

static SED_RANGE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([1-9][0-9]*)(?:,([1-9][0-9]*))?p$").expect("regex"));

/// `sed -n 'A[,B]p' FILE` → ((A, B), FILE).
fn sed_range(args: &[String]) -> Option<((usize, usize), &str)> {
    if args.len() != 3 || args[0] != "-n" || args[2].starts_with('-') {
        return None;
    }
    let c = SED_RANGE.captures(&args[1])?;
    let first: usize = c[1].parse().ok()?;
    let last: usize = c.get(2).map_or(Some(first), |m| m.as_str().parse().ok())?;
    (last >= first).then_some(((first, last), args[2].as_str()))
}

/// Which part of a file a read returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// The whole file.
    All,
    /// A read tool with `offset`/`limit`: the range comes from the numbered output.
    Numbered,
    /// Lines a..=b (1-based).
    Range(usize, usize),
    /// The last N lines (`tail`).
    Tail(usize),
    /// Nothing (`head -n 0`).
    Empty,
}

/// A read of one file: its path (as written in the call) and which part was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    pub path: String,
    pub spec: Spec,
}

fn is_glob_like(p: &str) -> bool {
    p.chars().any(|c| "*?[]{}".contains(c)) || p.starts_with('~')
}

/// The one file a call read, if it is a read of one file: a file-read tool, or a shell
/// `cat FILE`, `sed -n 'A,Bp' FILE`, `head [-n K|-K] FILE`, `tail [-n K|-K] FILE`.
pub fn file_read(tool: &str, input: &Value, cmd: Option<&str>) -> Option<FileRead> {
    let read = one_file_read(tool, input, cmd)?;
    if read.path == "-" || is_special_path(&read.path) {
        return None;
    }
    if !FILE_READ_TOOLS.contains(&tool) && is_glob_like(&read.path) {
        return None; // the shell expands it: maybe several files, maybe another one
    }
    Some(read)
}

fn one_file_read(tool: &str, input: &Value, cmd: Option<&str>) -> Option<FileRead> {
    let present = |k: &str| input.get(k).is_some_and(|v| !v.is_null());
    if FILE_READ_TOOLS.contains(&tool) {
        let path = first_truthy(input, &["file_path", "path", "notebook_path"])?.as_str()?;
        if present("pages") || present("view_range") {
            return None;
        }
        let spec = if present("offset") || present("limit") {
            Spec::Numbered
        } else {
            Spec::All
        };
        return Some(FileRead {
            path: path.to_string(),
            spec,
        });
    }
    let cmd = cmd?;
    let words = argv(cmd)?;
    if !read_only_argv(&words) {
        return None;
    }
    let p = prog(&words[0]);
    let args = &words[1..];
    let read = |path: &str, spec| {
        Some(FileRead {
            path: path.to_string(),
            spec,
        })
    };
    match p {
        "cat" if args.len() == 1 && !args[0].starts_with('-') => read(&args[0], Spec::All),
        "sed" => {
            let ((a, b), path) = sed_range(args)?;
            read(path, Spec::Range(a, b))
        }
        "head" | "tail" => {
            let mut count = 10usize;
            let mut rest = args;
            if rest.len() >= 2 && rest[0] == "-n" && is_digits(&rest[1]) {
                count = rest[1].parse().ok()?;
                rest = &rest[2..];
            } else if let Some(n) = rest.first().and_then(|a| a.strip_prefix('-')) {
                if is_digits(n) {
                    count = n.parse().ok()?;
                    rest = &rest[1..];
                }
            }
            if rest.len() != 1 || rest[0].starts_with('-') {
                return None;
            }
            let spec = match (p, count) {
                ("head", 0) => Spec::Empty,
                ("head", k) => Spec::Range(1, k),
                (_, k) => Spec::Tail(k),
            };
            read(&rest[0], spec)
        }
        _ => None,
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The paths whose change could change `cmd`'s output: `Some([])` for commands that read no
/// file (`pwd`, `--version`), `None` when unknown (git, globs, `.`, no operand: any write
/// may change it).
pub fn command_paths(cmd: &str) -> Option<Vec<String>> {
    let words = argv(cmd).unwrap_or_default();
    let p = words.first().map_or("", |w| prog(w));
    let args = words.get(1..).unwrap_or_default();
    if p == "pwd" || args == ["--version"] || args == ["-V"] {
        return Some(Vec::new());
    }
    if p == "git" {
        return None;
    }
    let paths: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .cloned()
        .collect();
    if paths.is_empty()
        || paths.iter().any(|a| {
            matches!(a.as_str(), "." | "./" | ".." | "~" | "/")
                || a.chars().any(|c| "*?[".contains(c))
        })
    {
        return None;
    }
    Some(paths)
}

/// The arguments after the program (empty when the command is not simple).
pub fn args_of(cmd: &str) -> Vec<String> {
    argv(cmd).map(|mut w| w.split_off(1)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allowlist_accepts() {
        for c in [
            "ls -la",
            "ls",
            "find . -name '*.py'",
            "rg -n foo src",
            "grep -rn foo .",
            "grep foo a.py",
            "git status",
            "git diff HEAD~1",
            "git log --oneline -5",
            "git show HEAD",
            "wc -l a.py",
            "tree src",
            "pwd",
            "node --version",
            "python3 -V",
            "cat a.py",
            "head a.py",
            "tail -n 5 a.py",
            "sed -n '5,12p' a.py",
            "sed -n 7p a.py",
            "/usr/bin/cat a.py",
            "cat \"my file.py\"",
        ] {
            assert!(is_read_only(c), "{c}");
        }
    }

    #[test]
    fn allowlist_rejects() {
        for c in [
            "git push",
            "git push --force",
            "git commit -m x",
            "git checkout main",
            "git diff --output=x",
            "git diff --outp=x",
            "git log --ext-diff",
            "rm a.py",
            "rm -rf build",
            "sed -i 's/a/b/' a.py",
            "sed -n '1w out' a.py",
            "sed -n '12,5p' a.py",
            "sed -n 1,5p a.py b.py",
            "pytest -q",
            "npm install",
            "curl https://x",
            "ls > out.txt",
            "cat a.py | sh",
            "ls; rm a.py",
            "ls && rm a.py",
            "echo $(rm a)",
            "FOO=1 ls",
            "env ls",
            "find . -delete",
            "find . -exec rm {} ;",
            "tail -f log",
            "tail -fn 5 log",
            "tail --follow=name log",
            "tail --fo log",
            "rg --pre sh foo",
            "git -c core.pager=x log",
            "ls `rm a`",
            "make --version extra",
            "make --version",
            "tree -o out.txt src",
            "tree src -o out.txt",
            "tree --output out.txt",
            "git log --output=x",
            "git branch -D x",
            "cat",
            "cat -",
            "cat /dev/urandom",
            "grep foo",
            "head -n 5",
            "./script.sh",
            "bin/tool --version",
            "cat 'unterminated",
            "ls\nrm x",
            "cat a\\ b",
        ] {
            assert!(!is_read_only(c), "{c}");
        }
    }

    #[test]
    fn shell_command_forms() {
        assert_eq!(
            shell_command("shell", &json!({"command": ["bash", "-lc", "ls src"]})).as_deref(),
            Some("ls src")
        );
        assert_eq!(
            shell_command("shell", &json!({"command": ["cat", "my file"]})).as_deref(),
            Some("cat 'my file'")
        );
        assert_eq!(
            shell_command("exec_command", &json!({"cmd": "pwd"})).as_deref(),
            Some("pwd")
        );
        assert_eq!(shell_command("Bash", &json!({"command": "  "})), None);
        assert_eq!(shell_command("Read", &json!({"command": "ls"})), None);
        assert_eq!(
            shell_command("Bash", &json!({"command": "ls", "background": true})),
            None
        );
    }

    #[test]
    fn file_reads() {
        let r = |tool: &str, input: Value| {
            let cmd = shell_command(tool, &input);
            file_read(tool, &input, cmd.as_deref()).map(|f| (f.path, f.spec))
        };
        assert_eq!(
            r("Read", json!({"file_path": "/r/a.py"})),
            Some(("/r/a.py".into(), Spec::All))
        );
        assert_eq!(
            r("Read", json!({"file_path": "/r/a.py", "offset": 5})),
            Some(("/r/a.py".into(), Spec::Numbered))
        );
        assert_eq!(
            r("Read", json!({"file_path": "/r/a.pdf", "pages": "1"})),
            None
        );
        assert_eq!(
            r("Bash", json!({"command": "cat src/a.py"})),
            Some(("src/a.py".into(), Spec::All))
        );
        assert_eq!(
            r("Bash", json!({"command": "sed -n '5,12p' a.py"})),
            Some(("a.py".into(), Spec::Range(5, 12)))
        );
        assert_eq!(
            r("Bash", json!({"command": "head -n 12 a.py"})),
            Some(("a.py".into(), Spec::Range(1, 12)))
        );
        assert_eq!(
            r("Bash", json!({"command": "head -3 a.py"})),
            Some(("a.py".into(), Spec::Range(1, 3)))
        );
        assert_eq!(
            r("Bash", json!({"command": "tail a.py"})),
            Some(("a.py".into(), Spec::Tail(10)))
        );
        assert_eq!(
            r("Bash", json!({"command": "head -n 0 a.py"})),
            Some(("a.py".into(), Spec::Empty))
        );
        assert_eq!(r("Bash", json!({"command": "cat a.py b.py"})), None);
        assert_eq!(r("Bash", json!({"command": "cat *.py"})), None);
        assert_eq!(r("Bash", json!({"command": "cat ~/.bashrc"})), None);
        assert_eq!(r("Bash", json!({"command": "cat /proc/cpuinfo"})), None);
        assert_eq!(r("Bash", json!({"command": "ls a.py"})), None);
    }

    #[test]
    fn paths() {
        assert!(is_temp_path("/tmp/x"));
        assert!(is_temp_path("/private/var/folders/x"));
        assert!(is_temp_path("/dev/shm"));
        assert!(!is_temp_path("/tmpx/a"));
        assert!(is_special_path("/proc/1/status"));
        assert!(!is_special_path("/devices"));
        assert_eq!(command_paths("pwd"), Some(vec![]));
        assert_eq!(command_paths("git status"), None);
        assert_eq!(command_paths("ls ."), None);
        assert_eq!(command_paths("ls"), None);
        assert_eq!(command_paths("wc -l a.py"), Some(vec!["a.py".to_string()]));
    }
}
