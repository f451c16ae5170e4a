//! Verifying a tree: every file with the marker must carry a valid seal, and a file whose
//! committed version (HEAD) was sealed must not have lost its seal.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::check::{SealProblem, check_contents, contains_marker};
use crate::git::{self, Unavailable};

/// How [`verify_paths_with`] reports and what it tells people to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The command that regenerates the sealed files, named in every failure.
    pub regen_command: String,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self {
            regen_command: "cargo xtask regen".to_owned(),
        }
    }
}

/// Why one file failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}; {}", self.what(), self.fix("the file's generator"))]
pub enum Problem {
    /// The file contains the marker but its seal does not check.
    Seal(SealProblem),
    /// The file has no marker, but its committed version (HEAD) is sealed.
    LostSeal,
}

impl Problem {
    fn what(&self) -> String {
        match self {
            Self::Seal(problem) => problem.what(),
            Self::LostSeal => {
                "lost its seal: the committed version (HEAD) is sealed, this one has no seal line"
                    .to_owned()
            }
        }
    }

    fn fix(&self, regen: &str) -> String {
        match self {
            Self::Seal(problem) => problem.fix(regen),
            Self::LostSeal => format!(
                "regenerate with {regen} (a file meant to become hand-written passes once committed without its seal)"
            ),
        }
    }
}

/// One file that failed verification, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The file, spelled from the path it was found under.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: Problem,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}; {}",
            self.path.display(),
            self.problem.what(),
            self.fix
        )
    }
}

/// What [`verify_paths`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Files that contain the marker and were checked (including those that failed), sorted.
    pub checked: Vec<PathBuf>,
    /// Files without the marker: hand-written, not checked (beyond the lost-seal check), sorted.
    pub hand_written: Vec<PathBuf>,
    /// Files that failed, in path order.
    pub failures: Vec<Failure>,
    /// Checks that could not run (no git, no repository, no commit), one line each.
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// Whether no file failed.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }
}

impl fmt::Display for VerifyReport {
    /// One line per failure, then one per note, then a summary line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for failure in &self.failures {
            writeln!(f, "{failure}")?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        write!(
            f,
            "{} sealed file(s) checked, {} hand-written file(s) skipped, {} failure(s)",
            self.checked.len(),
            self.hand_written.len(),
            self.failures.len()
        )
    }
}

/// Why verification could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A path could not be read.
    #[error("cannot read {}: {error}; check that the path exists and is readable", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error reading it.
        error: io::Error,
    },
}

/// Verifies the seals of the files at `paths`, with [`VerifyOptions::default`].
///
/// See [`verify_paths_with`].
pub fn verify_paths(paths: &[PathBuf]) -> Result<VerifyReport, VerifyError> {
    verify_paths_with(paths, &VerifyOptions::default())
}

/// Verifies the seals of the files at `paths`: files, and directories walked recursively in
/// sorted order, skipping `target` and hidden (`.`-prefixed) directories below them.
///
/// A file that contains the marker must pass [`check_contents`]. A file without it is
/// hand-written and skipped, unless git's committed version (HEAD) of it contains the marker:
/// then it lost its seal. That check runs one `git grep` per repository; where git, the
/// repository or its HEAD is missing it is skipped and noted in [`VerifyReport::notes`].
pub fn verify_paths_with(
    paths: &[PathBuf],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    // Each file, and the index of the path it was found under.
    let mut files = BTreeMap::new();
    for (root, path) in paths.iter().enumerate() {
        let metadata = fs::metadata(path).map_err(|error| io_error(path, error))?;
        if metadata.is_dir() {
            walk(path, root, &mut files)?;
        } else {
            files.entry(path.clone()).or_insert(root);
        }
    }

    let mut report = VerifyReport::default();
    let mut hand_written = Vec::new();
    for (path, root) in files {
        let bytes = fs::read(&path).map_err(|error| io_error(&path, error))?;
        if !contains_marker(&bytes) {
            hand_written.push((path, root));
            continue;
        }
        if let Err(problem) = check_contents(&bytes) {
            report
                .failures
                .push(failure(path.clone(), Problem::Seal(problem), options));
        }
        report.checked.push(path);
    }

    for (path, problem) in lost_seals(paths, &hand_written, &mut report.notes) {
        report.failures.push(failure(path, problem, options));
    }
    report.failures.sort_by(|a, b| a.path.cmp(&b.path));
    report.hand_written = hand_written.into_iter().map(|(path, _)| path).collect();
    Ok(report)
}

fn failure(path: PathBuf, problem: Problem, options: &VerifyOptions) -> Failure {
    let fix = problem.fix(&options.regen_command);
    Failure { path, problem, fix }
}

fn io_error(path: &Path, error: io::Error) -> VerifyError {
    VerifyError::Io {
        path: path.to_owned(),
        error,
    }
}

/// Adds the files under `dir` to `files`, sorted, skipping `target`, hidden directories and
/// symbolic links.
fn walk(dir: &Path, root: usize, files: &mut BTreeMap<PathBuf, usize>) -> Result<(), VerifyError> {
    let mut entries = fs::read_dir(dir)
        .and_then(|entries| entries.collect::<io::Result<Vec<_>>>())
        .map_err(|error| io_error(dir, error))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let file_type = entry.file_type().map_err(|error| io_error(&path, error))?;
        if file_type.is_dir() {
            let name = entry.file_name();
            if name == "target" || name.as_encoded_bytes().starts_with(b".") {
                continue;
            }
            walk(&path, root, files)?;
        } else if file_type.is_file() {
            files.entry(path).or_insert(root);
        }
    }
    Ok(())
}

/// The hand-written files whose committed version (HEAD) is sealed, with one `git grep` per
/// repository. Checks that cannot run are noted in `notes`.
fn lost_seals(
    roots: &[PathBuf],
    hand_written: &[(PathBuf, usize)],
    notes: &mut Vec<String>,
) -> Vec<(PathBuf, Problem)> {
    let mut lost = Vec::new();
    let asked: BTreeSet<usize> = hand_written.iter().map(|(_, root)| *root).collect();
    if asked.is_empty() {
        return lost;
    }

    // Each root's repository, and the root relative to it.
    let mut located: BTreeMap<usize, (PathBuf, String)> = BTreeMap::new();
    for root in asked {
        let path = &roots[root];
        let toplevel = match git::toplevel_of(path) {
            Ok(toplevel) => toplevel,
            Err(Unavailable::NoGit(why)) => {
                notes.push(format!("lost-seal check skipped: {why}"));
                return lost;
            }
            Err(Unavailable::NoRepo(why)) => {
                notes.push(format!(
                    "lost-seal check skipped for {}: not in a git work tree ({why})",
                    path.display()
                ));
                continue;
            }
        };
        let relative = fs::canonicalize(path)
            .ok()
            .and_then(|canonical| git::repo_relative(&toplevel, &canonical));
        match relative {
            Some(relative) => {
                located.insert(root, (toplevel, relative));
            }
            None => notes.push(format!(
                "lost-seal check skipped for {}: cannot place it in the repository at {}",
                path.display(),
                toplevel.display()
            )),
        }
    }

    let mut by_repo: BTreeMap<&Path, Vec<String>> = BTreeMap::new();
    for (toplevel, relative) in located.values() {
        by_repo.entry(toplevel).or_default().push(relative.clone());
    }
    for (toplevel, pathspecs) in by_repo {
        let sealed = match git::sealed_in_head(toplevel, &pathspecs) {
            Ok(sealed) => sealed,
            Err(why) => {
                notes.push(format!(
                    "lost-seal check skipped for the repository at {}: {why}",
                    toplevel.display()
                ));
                continue;
            }
        };
        for (path, root) in hand_written {
            let Some((repo, root_relative)) = located.get(root) else {
                continue;
            };
            if repo != toplevel {
                continue;
            }
            let Ok(below_root) = path.strip_prefix(&roots[*root]) else {
                continue;
            };
            let in_repo = Path::new(root_relative).join(below_root);
            if git::repo_relative(Path::new(""), &in_repo)
                .is_some_and(|name| sealed.contains(&name))
            {
                lost.push((path.clone(), Problem::LostSeal));
            }
        }
    }
    lost
}
