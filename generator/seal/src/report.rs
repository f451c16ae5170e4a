//! What a verification reports and how it is asked for: the options, the roots, each failing
//! file's problem and fix, the report and the errors, shared by the work tree's walk
//! (`crate::verify`) and the index's (`crate::index`), which use this module and not each other.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::check::{SealProblem, seal_ctk};

/// The placeholder in [`VerifyOptions::regen_command`] replaced by the failing file's target.
pub const CTK_PLACEHOLDER: &str = "{ctk}";

/// The flag of `hostcb-seal verify` (and `cargo xtask verify`) that sets
/// [`VerifyOptions::allow_deletions`]; failures of deleted files name it.
pub const ALLOW_DELETIONS_FLAG: &str = "--allow-deletions";

/// The environment variable that, set to `1`, stands for [`ALLOW_DELETIONS_FLAG`] where no flag
/// can be passed: a hook run by `git commit`.
pub const ALLOW_DELETIONS_ENV: &str = "HOSTCB_SEAL_ALLOW_DELETIONS";

/// Which version of each file is verified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// The files as they are on disk.
    #[default]
    WorkTree,
    /// The files as git's index holds them: what the next commit will contain, whatever the work
    /// tree holds (`git ls-files --stage`, the blobs read with `git cat-file`). A pre-commit hook
    /// verifies this.
    Index,
}

/// How [`verify_paths_with`](crate::verify_paths_with) reports and what it tells people to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The command that regenerates the sealed files, named in every failure. Each
    /// [`CTK_PLACEHOLDER`] in it is replaced by the failing file's target: the one its folder
    /// names (`ctk_12_9` → `12.9`), else the one its seal records, else `all`.
    pub regen_command: String,
    /// Files whose name starts with this (in a walked directory) are temporary files left by an
    /// interrupted regeneration: never opened, only listed in [`VerifyReport::temporaries`] and
    /// noted. `None` treats them like any other file.
    pub temp_prefix: Option<String>,
    /// The work tree or the index.
    pub source: Source,
    /// Whether a file that HEAD has sealed may be gone (from the work tree, or from the index with
    /// [`Source::Index`]): each is then a note, not a failure. For a deletion that is meant, such
    /// as a target that was dropped.
    pub allow_deletions: bool,
}

impl Default for VerifyOptions {
    /// A fix hint that names no command (each repository regenerates its own way), the
    /// `.regen-` temporaries of this project's generator, the work tree, deletions refused.
    fn default() -> Self {
        Self {
            regen_command: format!("the generator that wrote it (target {CTK_PLACEHOLDER})"),
            temp_prefix: Some(".regen-".to_owned()),
            source: Source::WorkTree,
            allow_deletions: false,
        }
    }
}

impl VerifyOptions {
    /// The regeneration command for the target `ctk`.
    pub(crate) fn regen(&self, ctk: &str) -> String {
        self.regen_command.replace(CTK_PLACEHOLDER, ctk)
    }

    pub(crate) fn is_temporary(&self, name: &std::ffi::OsStr) -> bool {
        self.temp_prefix
            .as_deref()
            .is_some_and(|prefix| name.as_encoded_bytes().starts_with(prefix.as_bytes()))
    }
}

/// One path to verify, and the files that must exist below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyRoot {
    /// A file, or a directory walked recursively.
    pub path: PathBuf,
    /// Paths relative to `path` (a directory) of files that must exist there, as regular files
    /// carrying a valid seal, whether or not the walk would reach them.
    pub expected: Vec<PathBuf>,
}

impl VerifyRoot {
    /// `path`, with no expected files.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            expected: Vec::new(),
        }
    }

    /// `self`, whose directory must contain the files `expected` (relative paths).
    pub fn expecting(mut self, expected: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        self.expected = expected.into_iter().map(Into::into).collect();
        self
    }
}

/// Why one file failed verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file contains the marker but its seal does not check.
    Seal(SealProblem),
    /// The file has no marker, but its committed version (HEAD) is sealed.
    LostSeal,
    /// The path is a symbolic link or a special file (FIFO, socket, device), or a directory
    /// where a file is expected. It was not opened.
    NotRegular {
        /// What it is, with an article: `a symbolic link`, `a FIFO`, ….
        kind: &'static str,
    },
    /// A file the caller expects ([`VerifyRoot::expected`]) does not exist.
    Missing,
    /// The committed version (HEAD) has this file sealed, the work tree has no such file.
    Deleted,
    /// The committed version (HEAD) has this file sealed, the index has no such file: the commit
    /// would delete it (`git rm`, `git rm --cached`).
    DeletedInIndex,
    /// The index holds an unresolved merge conflict for this file.
    Unmerged,
    /// The seal is valid but records another target than the folder holding the file names.
    WrongTarget {
        /// The target the seal records.
        seal: String,
        /// The folder's name, e.g. `ctk_12_9`.
        folder: String,
        /// The target the folder names, e.g. `12.9`.
        expected: String,
    },
}

// Written out rather than derived (thiserror), so that `cargo install hostcb-seal-cli` builds no
// proc-macro stack.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.what(), self.fix("the file's generator"))
    }
}

impl std::error::Error for Problem {}

impl Problem {
    fn what(&self) -> String {
        match self {
            Self::Seal(problem) => problem.what(),
            Self::LostSeal => {
                "lost its seal: the committed version (HEAD) is sealed, this one has no seal line"
                    .to_owned()
            }
            Self::NotRegular { kind } => {
                format!("is {kind}, not a regular file, so it was not read")
            }
            Self::Missing => "is missing: it is one of the sealed files expected here".to_owned(),
            Self::Deleted => {
                "is missing: the committed version (HEAD) has it sealed, the work tree has no such file"
                    .to_owned()
            }
            Self::DeletedInIndex => {
                "is deleted in the index: the committed version (HEAD) has it sealed, and the commit would delete it"
                    .to_owned()
            }
            Self::Unmerged => "has an unresolved merge conflict in the index".to_owned(),
            Self::WrongTarget {
                seal,
                folder,
                expected,
            } => format!("sealed for ctk={seal}, but its folder {folder} holds ctk={expected}"),
        }
    }

    fn fix(&self, regen: &str) -> String {
        match self {
            Self::Seal(problem) => problem.fix(regen),
            Self::LostSeal => format!(
                "regenerate with {regen} (a file meant to become hand-written passes once committed without its seal)"
            ),
            Self::NotRegular { .. } => {
                format!(
                    "if it stands in for a generated file, delete it and regenerate with {regen}"
                )
            }
            Self::Deleted => format!(
                "regenerate with {regen}, or `git restore` it; if the deletion is intended, verify with {ALLOW_DELETIONS_FLAG} (in a git hook: {ALLOW_DELETIONS_ENV}=1 git commit ...)"
            ),
            Self::DeletedInIndex => format!(
                "restore it (`git restore --staged --worktree -- <path>`) or regenerate with {regen} and `git add` it; if the deletion is intended, verify with {ALLOW_DELETIONS_FLAG} (in a git hook: {ALLOW_DELETIONS_ENV}=1 git commit ...)"
            ),
            Self::Unmerged => format!(
                "resolve the conflict by regenerating with {regen}, then `git add` the file"
            ),
            Self::Missing | Self::WrongTarget { .. } => format!("regenerate with {regen}"),
        }
    }
}

/// One file that failed verification, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The file, spelled from the path it was found under.
    pub path: PathBuf,
    /// Where the failing version is: the work tree, or the index (shown as `(staged)`).
    pub source: Source,
    /// What is wrong with it.
    pub problem: Problem,
    /// What to do about it.
    pub fix: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let staged = match self.source {
            Source::WorkTree => "",
            Source::Index => " (staged)",
        };
        write!(
            f,
            "{}{staged}: {}; {}",
            self.path.display(),
            self.problem.what(),
            self.fix
        )
    }
}

/// What [`verify_paths`](crate::verify_paths) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Whether the work tree or the index was verified.
    pub source: Source,
    /// Files that contain the marker, or are expected to, and were checked (including those that
    /// failed), sorted.
    pub checked: Vec<PathBuf>,
    /// Files without the marker: hand-written, not checked (beyond the lost-seal check), sorted.
    pub hand_written: Vec<PathBuf>,
    /// Temporary files of an interrupted regeneration ([`VerifyOptions::temp_prefix`]): not
    /// opened, sorted.
    pub temporaries: Vec<PathBuf>,
    /// Files that failed, in path order, each once.
    pub failures: Vec<Failure>,
    /// Checks that could not run (no git, no repository, no commit) and skipped files, one line
    /// each.
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
        let place = match self.source {
            Source::WorkTree => "",
            Source::Index => " in the index",
        };
        write!(
            f,
            "{} sealed file(s) checked{place}, {} hand-written file(s) skipped, {} failure(s)",
            self.checked.len(),
            self.hand_written.len(),
            self.failures.len()
        )
    }
}

/// Why verification could not run to the end.
#[derive(Debug)]
pub enum VerifyError {
    /// A path could not be read.
    Io {
        /// The path.
        path: PathBuf,
        /// The error reading it.
        error: io::Error,
    },
    /// [`Source::Index`] was asked for, but git's index of a path could not be read.
    Index {
        /// The path.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, error } => write!(
                f,
                "cannot read {}: {error}; check that the path exists and is readable",
                path.display()
            ),
            Self::Index { path, why } => write!(
                f,
                "cannot verify the git index for {}: {why}; run it inside a git work tree, or verify the work tree (without --staged)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for VerifyError {}

pub(crate) fn failure(
    path: PathBuf,
    problem: Problem,
    ctk: &str,
    options: &VerifyOptions,
) -> Failure {
    let mut fix = problem.fix(&options.regen(ctk));
    let staged_again = matches!(problem, Problem::Seal(ref seal) if *seal != SealProblem::LineEndings)
        || matches!(problem, Problem::LostSeal | Problem::WrongTarget { .. });
    if options.source == Source::Index && staged_again {
        fix.push_str(", then `git add` it");
    }
    Failure {
        path,
        source: options.source,
        problem,
        fix,
    }
}

/// The note for a deleted file that HEAD has sealed, under [`VerifyOptions::allow_deletions`].
pub(crate) fn deletion_allowed(path: &Path) -> String {
    format!(
        "{}: deleted, though the committed version (HEAD) has it sealed: allowed by {ALLOW_DELETIONS_FLAG}",
        path.display()
    )
}

pub(crate) fn io_error(path: &Path, error: io::Error) -> VerifyError {
    VerifyError::Io {
        path: path.to_owned(),
        error,
    }
}

/// Whether `error` says that the path does not exist (or a folder on the way is a file).
pub(crate) fn is_absent(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// The target to regenerate `path` with: the one its folder names, else the one its seal
/// records, else `all`.
pub(crate) fn target_of(path: &Path, bytes: Option<&[u8]>) -> String {
    folder_target(path)
        .map(|(_, ctk)| ctk)
        .or_else(|| bytes.and_then(seal_ctk))
        .unwrap_or_else(|| "all".to_owned())
}

/// The folder holding `path`, if it is named `ctk_<major>_<minor>`, and that target,
/// `<major>.<minor>`.
pub(crate) fn folder_target(path: &Path) -> Option<(String, String)> {
    let parent = path.parent().unwrap_or(Path::new(""));
    let name = match parent.components().next_back() {
        Some(Component::Normal(name)) => name.to_owned(),
        // `.`, `..` or nothing: ask the file system for the folder's real name.
        _ => {
            let dir = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            fs::canonicalize(dir).ok()?.file_name()?.to_owned()
        }
    };
    let name = name.to_str()?;
    let (major, minor) = name.strip_prefix("ctk_")?.split_once('_')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(major) && digits(minor)).then(|| (name.to_owned(), format!("{major}.{minor}")))
}

/// Whether a directory named `name` is skipped by the walk.
pub(crate) fn is_skipped_dir(name: &std::ffi::OsStr) -> bool {
    name == "target" || name.as_encoded_bytes().starts_with(b".")
}
