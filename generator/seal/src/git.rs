//! Asking git which files its committed tree (HEAD) has sealed: one `git grep` per repository.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

use crate::MARKER;

/// Why the repository of a path could not be asked.
pub(crate) enum Unavailable {
    /// `git` could not be run at all.
    NoGit(String),
    /// The path is not inside a work tree (or git failed there).
    NoRepo(String),
}

/// A `git` command that finds its repository from `dir`, not from the environment.
fn git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    // Hooks export these; they would make git ignore `-C` when finding the repository.
    command
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .arg("-C")
        .arg(dir);
    command
}

fn run(mut command: Command) -> Result<Output, Unavailable> {
    command
        .output()
        .map_err(|error| Unavailable::NoGit(format!("`git` could not be run ({error})")))
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or("no message")
        .trim()
        .to_owned()
}

/// The canonical top-level directory of the work tree that holds `path` (an existing file or
/// directory).
pub(crate) fn toplevel_of(path: &Path) -> Result<PathBuf, Unavailable> {
    let dir = if path.is_dir() {
        path
    } else {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        }
    };
    let mut command = git(dir);
    command.args(["rev-parse", "--show-toplevel"]);
    let output = run(command)?;
    if !output.status.success() {
        return Err(Unavailable::NoRepo(first_line(&output.stderr)));
    }
    let toplevel = String::from_utf8(output.stdout)
        .map_err(|_| Unavailable::NoRepo("its top-level path is not UTF-8".to_owned()))?;
    let toplevel = std::fs::canonicalize(toplevel.trim_end_matches(['\n', '\r']))
        .map_err(|error| Unavailable::NoRepo(format!("its top level is unreadable ({error})")))?;
    Ok(toplevel)
}

/// `path` relative to `toplevel`, both canonical, as git spells it (`/`-separated).
pub(crate) fn repo_relative(toplevel: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(toplevel).ok()?;
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// Files under `pathspecs` (repo-relative; empty means the whole repository) whose committed
/// version in HEAD contains the marker, repo-relative.
pub(crate) fn sealed_in_head(
    toplevel: &Path,
    pathspecs: &[String],
) -> Result<BTreeSet<String>, String> {
    let mut command = git(toplevel);
    command.args([
        "grep",
        "--no-color",
        "-l",
        "-z",
        "--fixed-strings",
        "-e",
        MARKER,
        "HEAD",
        "--",
    ]);
    if !pathspecs.iter().any(String::is_empty) {
        command.args(pathspecs.iter().map(|spec| format!(":(literal){spec}")));
    }
    let output =
        run(command).map_err(|(Unavailable::NoGit(why) | Unavailable::NoRepo(why))| why)?;
    match output.status.code() {
        Some(0) => {}
        Some(1) if output.stderr.is_empty() => return Ok(BTreeSet::new()),
        _ => return Err(format!("`git grep` failed: {}", first_line(&output.stderr))),
    }
    output
        .stdout
        .split(|&b| b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| {
            let name = std::str::from_utf8(name)
                .map_err(|_| "`git grep` printed a path that is not UTF-8".to_owned())?;
            Ok(name.strip_prefix("HEAD:").unwrap_or(name).to_owned())
        })
        .collect()
}
