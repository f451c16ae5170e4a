//! Asking git which files its committed tree (HEAD) has sealed (one `git grep` per repository),
//! and what its index holds (`git ls-files --stage`, then the blobs through one
//! `git cat-file --batch`).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output, Stdio};

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
    // `git commit -a` (or `git commit PATH`) runs its hooks with GIT_INDEX_FILE naming the index
    // the commit will be made from: keep it, but absolute, since `-C` changes git's directory.
    if let Some(index) = std::env::var_os("GIT_INDEX_FILE").map(PathBuf::from)
        && index.is_relative()
        && let Ok(cwd) = std::env::current_dir()
    {
        command.env("GIT_INDEX_FILE", cwd.join(index));
    }
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

/// One entry of the index (`git ls-files --stage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    /// The file mode git records: `100644`, `100755`, `120000` (a symbolic link), `160000` (a
    /// submodule).
    pub(crate) mode: String,
    /// The blob's object name.
    pub(crate) object: String,
    /// The merge stage: 0, or 1 to 3 while a conflict is unresolved.
    pub(crate) stage: u8,
    /// The path, repo-relative, `/`-separated.
    pub(crate) path: String,
}

/// The index entries under `pathspecs` (repo-relative; empty means the whole repository).
pub(crate) fn index_entries(
    toplevel: &Path,
    pathspecs: &[String],
) -> Result<Vec<IndexEntry>, String> {
    let mut command = git(toplevel);
    command.args(["ls-files", "--stage", "-z", "--"]);
    if !pathspecs.iter().any(String::is_empty) {
        command.args(pathspecs.iter().map(|spec| format!(":(literal){spec}")));
    }
    let output =
        run(command).map_err(|(Unavailable::NoGit(why) | Unavailable::NoRepo(why))| why)?;
    if !output.status.success() {
        return Err(format!(
            "`git ls-files` failed: {}",
            first_line(&output.stderr)
        ));
    }
    let bad = || "`git ls-files --stage` printed a line it should not".to_owned();
    output
        .stdout
        .split(|&b| b == 0)
        .filter(|line| !line.is_empty())
        .map(|line| {
            let line = std::str::from_utf8(line)
                .map_err(|_| "`git ls-files` printed a path that is not UTF-8".to_owned())?;
            let (meta, path) = line.split_once('\t').ok_or_else(bad)?;
            let mut meta = meta.split(' ');
            let (Some(mode), Some(object), Some(stage), None) =
                (meta.next(), meta.next(), meta.next(), meta.next())
            else {
                return Err(bad());
            };
            Ok(IndexEntry {
                mode: mode.to_owned(),
                object: object.to_owned(),
                stage: stage.parse().map_err(|_| bad())?,
                path: path.to_owned(),
            })
        })
        .collect()
}

/// The contents of the blobs `objects`, in order, through one `git cat-file --batch`.
pub(crate) fn blobs(toplevel: &Path, objects: &[&str]) -> Result<Vec<Vec<u8>>, String> {
    if objects.is_empty() {
        return Ok(Vec::new());
    }
    let mut command = git(toplevel);
    command
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("`git` could not be run ({error})"))?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let request: String = objects.iter().map(|object| format!("{object}\n")).collect();
    // Written from another thread: git answers while it reads, and a full pipe would stop both.
    let writer = std::thread::spawn(move || stdin.write_all(request.as_bytes()));
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut contents = Vec::with_capacity(objects.len());
    let mut failed = None;
    for object in objects {
        let mut header = String::new();
        if stdout.read_line(&mut header).unwrap_or(0) == 0 {
            failed = Some(format!("`git cat-file` stopped before {object}"));
            break;
        }
        let size = match header.trim_end().split(' ').collect::<Vec<_>>().as_slice() {
            [name, "blob", size] if name == object => size.parse::<usize>().ok(),
            _ => None,
        };
        let Some(size) = size else {
            failed = Some(format!(
                "`git cat-file` cannot read the blob {object}: {}",
                header.trim_end()
            ));
            break;
        };
        let mut blob = vec![0; size + 1];
        if stdout.read_exact(&mut blob).is_err() || blob.pop() != Some(b'\n') {
            failed = Some(format!("`git cat-file` cut the blob {object} short"));
            break;
        }
        contents.push(blob);
    }
    drop(stdout);
    let _ = writer.join();
    let status = child.wait();
    if let Some(why) = failed {
        return Err(why);
    }
    match status {
        Ok(status) if status.success() => Ok(contents),
        _ => Err("`git cat-file --batch` failed".to_owned()),
    }
}
