//! Verifying a tree: every file with the marker must carry a valid seal for the target its folder
//! names, every file the caller expects must be there, nothing in the tree may be a symbolic link
//! or a special file, and a file whose committed version (HEAD) was sealed must neither have lost
//! its seal nor be gone (unless deletions are allowed). The tree is the work tree, or git's index
//! ([`Source::Index`], in `crate::index`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::check::{SealProblem, check_contents, contains_marker};
use crate::file::{Links, read_regular};
use crate::git::{self, Unavailable};
use crate::report::{
    Failure, Problem, Source, VerifyError, VerifyOptions, VerifyReport, VerifyRoot,
    deletion_allowed, failure, folder_target, io_error, is_absent, is_skipped_dir, target_of,
};

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
        let bytes =
            match read_regular(&path, Links::Refuse).map_err(|error| io_error(&path, error))? {
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
