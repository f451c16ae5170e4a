//! Verifying a tree: every file with the marker must carry a valid seal for the target its folder
//! names, every file the caller expects must be there, nothing in the tree may be a symbolic link
//! or a special file, and a file whose committed version (HEAD) was sealed must neither have lost
//! its seal nor be gone (unless deletions are allowed). The tree is the work tree, or git's index
//! ([`Source::Index`], in `crate::index`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use crate::check::{SealProblem, check_contents, contains_marker, seal_ctk};
use crate::git::{self, Unavailable};

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

/// How [`verify_paths_with`] reports and what it tells people to do.
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

/// What [`verify_paths`] found.
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

/// Verifies the seals of the files at `paths`, with [`VerifyOptions::default`].
///
/// See [`verify_roots`].
pub fn verify_paths(paths: &[PathBuf]) -> Result<VerifyReport, VerifyError> {
    verify_paths_with(paths, &VerifyOptions::default())
}

/// Verifies the seals of the files at `paths`, expecting no particular files. See
/// [`verify_roots`].
pub fn verify_paths_with(
    paths: &[PathBuf],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    let roots: Vec<VerifyRoot> = paths.iter().map(VerifyRoot::new).collect();
    verify_roots(&roots, options)
}

/// Verifies the directory `root`, which must contain the files `expected` (paths relative to
/// it). See [`verify_roots`].
pub fn verify_tree(
    root: &Path,
    expected: &[PathBuf],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    verify_roots(
        &[VerifyRoot::new(root).expecting(expected.iter().cloned())],
        options,
    )
}

/// Verifies the files at `roots`: files, and directories walked recursively in sorted order,
/// skipping `target` and hidden (`.`-prefixed) directories below them.
///
/// - Nothing but regular files is ever opened: a symbolic link, FIFO, socket or device, found in
///   a walk or named directly, fails as [`Problem::NotRegular`]. (A root that is a symbolic link
///   to a directory is walked: the caller chose it.)
/// - A file that contains the marker must pass [`check_contents`], and if the folder holding it
///   is named `ctk_<major>_<minor>`, its seal must record `ctk=<major>.<minor>`.
/// - Each root's [`expected`](VerifyRoot::expected) files must exist and be sealed.
/// - Files named with [`VerifyOptions::temp_prefix`] in a walked directory are skipped with a
///   note.
/// - A file without the marker is hand-written and skipped, unless git's committed version
///   (HEAD) of it contains the marker: then it lost its seal. A file that HEAD has sealed below
///   a directory root but that no longer exists fails too. These checks run one `git grep` per
///   repository; where git, the repository or its HEAD is missing they are skipped and noted in
///   [`VerifyReport::notes`].
///
/// Each failing file is reported once, with its first problem.
///
/// With [`Source::Index`], the same checks run on the index's version of each file (its tracked
/// files under each root, named as if in the work tree), and a file that HEAD has sealed but the
/// index lacks fails as [`Problem::DeletedInIndex`]. Symbolic links in the index fail; submodules
/// are skipped. A root that is not in a git work tree is an error.
///
/// With [`VerifyOptions::allow_deletions`], a file that HEAD has sealed and that is gone is a note
/// instead of a failure.
pub fn verify_roots(
    roots: &[VerifyRoot],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    if options.source == Source::Index {
        return crate::index::verify_index(roots, options);
    }
    let mut report = VerifyReport::default();
    let mut failures: BTreeMap<PathBuf, Failure> = BTreeMap::new();
    let mut fail = |path: PathBuf, problem: Problem, ctk: String| {
        failures
            .entry(path.clone())
            .or_insert_with(|| failure(path, problem, &ctk, options));
    };

    // Each file, and the index of the root it was found under.
    let mut files = BTreeMap::new();
    let mut expected = BTreeSet::new();
    let mut dir_roots = BTreeSet::new();
    for (index, root) in roots.iter().enumerate() {
        let path = &root.path;
        let metadata = fs::symlink_metadata(path).map_err(|error| io_error(path, error))?;
        let is_dir = metadata.is_dir()
            || (metadata.file_type().is_symlink() && fs::metadata(path).is_ok_and(|m| m.is_dir()));
        if is_dir {
            dir_roots.insert(index);
            walk(path, index, options, &mut files, &mut report.temporaries)?;
        } else {
            files.entry(path.clone()).or_insert(index);
        }
        for relative in &root.expected {
            let file = path.join(relative);
            match fs::symlink_metadata(&file) {
                Ok(_) => {
                    files.entry(file.clone()).or_insert(index);
                    expected.insert(file);
                }
                Err(error) if is_absent(&error) => {
                    let ctk = target_of(&file, None);
                    fail(file, Problem::Missing, ctk);
                }
                Err(error) => return Err(io_error(&file, error)),
            }
        }
    }
    for temporary in &report.temporaries {
        report.notes.push(format!(
            "skipped {}: a temporary file left by an interrupted regen; delete it, or rerun {}, which removes it",
            temporary.display(),
            options.regen(&target_of(temporary, None))
        ));
    }

    let mut hand_written = Vec::new();
    for (path, root) in files {
        let bytes = match read_regular(&path).map_err(|error| io_error(&path, error))? {
            Ok(bytes) => bytes,
            Err(kind) => {
                let ctk = target_of(&path, None);
                fail(path, Problem::NotRegular { kind }, ctk);
                continue;
            }
        };
        if !contains_marker(&bytes) {
            if expected.contains(&path) {
                let ctk = target_of(&path, None);
                fail(path.clone(), Problem::Seal(SealProblem::Missing), ctk);
                report.checked.push(path);
            } else {
                hand_written.push((path, root));
            }
            continue;
        }
        let ctk = target_of(&path, Some(&bytes));
        match check_contents(&bytes) {
            Err(problem) => fail(path.clone(), Problem::Seal(problem), ctk),
            Ok(info) => match folder_target(&path) {
                Some((folder, expected)) if info.ctk != expected => {
                    let problem = Problem::WrongTarget {
                        seal: info.ctk,
                        folder,
                        expected,
                    };
                    fail(path.clone(), problem, ctk);
                }
                _ => {}
            },
        }
        report.checked.push(path);
    }

    for (path, problem) in head_checks(roots, &dir_roots, &hand_written, options, &mut report.notes)
    {
        if problem == Problem::Deleted && options.allow_deletions {
            report.notes.push(deletion_allowed(&path));
            continue;
        }
        let ctk = target_of(&path, None);
        fail(path, problem, ctk);
    }
    report.failures = failures.into_values().collect();
    report.hand_written = hand_written.into_iter().map(|(path, _)| path).collect();
    Ok(report)
}

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

/// What a file type is, if not a regular file.
fn irregular(file_type: fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_symlink() {
        return Some("a symbolic link");
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
    }
    Some("a special file")
}

/// The bytes of `path` if it is a regular file, else what it is. Never follows a symbolic link
/// and never blocks on a FIFO: the type is checked before opening, and on Unix the file is opened
/// with `O_NOFOLLOW | O_NONBLOCK` and checked again once open, so a file swapped in between is
/// caught too.
fn read_regular(path: &Path) -> io::Result<Result<Vec<u8>, &'static str>> {
    if let Some(kind) = irregular(fs::symlink_metadata(path)?.file_type()) {
        return Ok(Err(kind));
    }
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let mut file = match options.open(path) {
        Ok(file) => file,
        #[cfg(unix)]
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(Err("a symbolic link"));
        }
        Err(error) => return Err(error),
    };
    let metadata = file.metadata()?;
    if let Some(kind) = irregular(metadata.file_type()) {
        return Ok(Err(kind));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(Ok(bytes))
}

/// Whether a directory named `name` is skipped by the walk.
pub(crate) fn is_skipped_dir(name: &std::ffi::OsStr) -> bool {
    name == "target" || name.as_encoded_bytes().starts_with(b".")
}

/// Adds everything under `dir` that is not a directory to `files`, sorted, skipping `target` and
/// hidden directories; symbolic links are added, never followed. Temporary files go to
/// `temporaries` instead.
fn walk(
    dir: &Path,
    root: usize,
    options: &VerifyOptions,
    files: &mut BTreeMap<PathBuf, usize>,
    temporaries: &mut Vec<PathBuf>,
) -> Result<(), VerifyError> {
    let mut entries = fs::read_dir(dir)
        .and_then(|entries| entries.collect::<io::Result<Vec<_>>>())
        .map_err(|error| io_error(dir, error))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let file_type = entry.file_type().map_err(|error| io_error(&path, error))?;
        if file_type.is_dir() {
            if !is_skipped_dir(&name) {
                walk(&path, root, options, files, temporaries)?;
            }
        } else if options.is_temporary(&name) {
            if !temporaries.contains(&path) {
                temporaries.push(path);
            }
        } else {
            files.entry(path).or_insert(root);
        }
    }
    Ok(())
}

/// What git's HEAD says: the hand-written files whose committed version is sealed, and the files
/// HEAD has sealed below a directory root that no longer exist. One `git grep` per repository;
/// checks that cannot run are noted in `notes`.
fn head_checks(
    roots: &[VerifyRoot],
    dir_roots: &BTreeSet<usize>,
    hand_written: &[(PathBuf, usize)],
    options: &VerifyOptions,
    notes: &mut Vec<String>,
) -> Vec<(PathBuf, Problem)> {
    let mut found = Vec::new();
    let mut asked: BTreeSet<usize> = hand_written.iter().map(|(_, root)| *root).collect();
    asked.extend(dir_roots);
    if asked.is_empty() {
        return found;
    }

    // Each root's repository, and the root relative to it.
    let mut located: BTreeMap<usize, (PathBuf, String)> = BTreeMap::new();
    for root in asked {
        let path = &roots[root].path;
        let toplevel = match git::toplevel_of(path) {
            Ok(toplevel) => toplevel,
            Err(Unavailable::NoGit(why)) => {
                notes.push(format!("HEAD checks skipped: {why}"));
                return found;
            }
            Err(Unavailable::NoRepo(why)) => {
                notes.push(format!(
                    "HEAD checks (lost seals, deleted files) skipped for {}: not in a git work tree ({why})",
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
                "HEAD checks skipped for {}: cannot place it in the repository at {}",
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
                    "HEAD checks skipped for the repository at {}: {why}",
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
            let Ok(below_root) = path.strip_prefix(&roots[*root].path) else {
                continue;
            };
            let in_repo = Path::new(root_relative).join(below_root);
            if git::repo_relative(Path::new(""), &in_repo)
                .is_some_and(|name| sealed.contains(&name))
            {
                found.push((path.clone(), Problem::LostSeal));
            }
        }
        for root in dir_roots {
            let Some((repo, root_relative)) = located.get(root) else {
                continue;
            };
            if repo != toplevel {
                continue;
            }
            for name in &sealed {
                let below = if root_relative.is_empty() {
                    Some(name.as_str())
                } else {
                    name.strip_prefix(root_relative.as_str())
                        .and_then(|rest| rest.strip_prefix('/'))
                };
                let Some(below) = below else { continue };
                let below = Path::new(below);
                let walked = below
                    .parent()
                    .is_none_or(|dirs| !dirs.iter().any(is_skipped_dir))
                    && !below
                        .file_name()
                        .is_some_and(|name| options.is_temporary(name));
                if !walked {
                    continue;
                }
                let path = roots[*root].path.join(below);
                if fs::symlink_metadata(&path).is_err_and(|error| is_absent(&error)) {
                    found.push((path, Problem::Deleted));
                }
            }
        }
    }
    found
}
