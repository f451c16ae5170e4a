//! Verifying git's index ([`Source::Index`]): the version of each file that the next commit will
//! contain, whatever the work tree holds. A pre-commit hook that read the work tree would pass a
//! tampered file staged before the work tree was restored, a hunk staged without its seal line
//! (`git add -p`), and a sealed file removed from the index only (`git rm --cached`).
//!
//! The index is read with `git ls-files --stage` and its blobs with one `git cat-file --batch`
//! per repository; the checks are those of the work tree ([`crate::verify_roots`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::check::{SealProblem, check_contents, contains_marker};
use crate::git::{self, IndexEntry, Unavailable};
use crate::report::{
    Failure, Problem, Source, VerifyError, VerifyOptions, VerifyReport, VerifyRoot,
    deletion_allowed, failure, folder_target, io_error, is_skipped_dir, target_of,
};

/// git's mode of a symbolic link and of a submodule.
const SYMLINK_MODE: &str = "120000";
const SUBMODULE_MODE: &str = "160000";

/// An index entry below a root, and whether any of its entries is an unresolved conflict.
struct Staged {
    entry: IndexEntry,
    unmerged: bool,
}

/// See [`crate::verify_roots`] with [`Source::Index`].
pub(crate) fn verify_index(
    roots: &[VerifyRoot],
    options: &VerifyOptions,
) -> Result<VerifyReport, VerifyError> {
    let mut report = VerifyReport {
        source: Source::Index,
        ..VerifyReport::default()
    };
    let mut failures: BTreeMap<PathBuf, Failure> = BTreeMap::new();
    let mut fail = |path: PathBuf, problem: Problem, ctk: String| {
        failures
            .entry(path.clone())
            .or_insert_with(|| failure(path, problem, &ctk, options));
    };

    // Each root's repository and its path there; the roots of each repository.
    let mut located = Vec::new();
    let mut repos: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for (index, root) in roots.iter().enumerate() {
        let (toplevel, relative) = locate(&root.path).map_err(|why| VerifyError::Index {
            path: root.path.clone(),
            why,
        })?;
        repos.entry(toplevel.clone()).or_default().push(index);
        located.push(relative);
    }

    let mut matched = vec![false; roots.len()];
    let mut hand_written = Vec::new();
    for (toplevel, in_repo) in &repos {
        let index_error = |why: String| VerifyError::Index {
            path: roots[in_repo[0]].path.clone(),
            why,
        };
        let pathspecs: Vec<String> = in_repo.iter().map(|&i| located[i].clone()).collect();
        let entries = git::index_entries(toplevel, &pathspecs).map_err(index_error)?;
        let in_index: BTreeSet<String> = entries.iter().map(|e| e.path.clone()).collect();

        // Each staged file by the path it is reported under.
        let mut files: BTreeMap<PathBuf, Staged> = BTreeMap::new();
        for entry in entries {
            let Some((root, path)) = place(roots, &located, in_repo, &entry.path) else {
                continue;
            };
            matched[root] = true;
            let Some(path) = path else { continue };
            if options.is_temporary(path.file_name().unwrap_or_default())
                && path != roots[root].path
            {
                if !report.temporaries.contains(&path) {
                    report.temporaries.push(path);
                }
                continue;
            }
            let unmerged = entry.stage != 0;
            files
                .entry(path)
                .and_modify(|staged| staged.unmerged |= unmerged)
                .or_insert(Staged { entry, unmerged });
        }

        let mut expected = BTreeSet::new();
        for &i in in_repo {
            for relative in &roots[i].expected {
                let path = roots[i].path.join(relative);
                if !files.contains_key(&path) {
                    let ctk = target_of(&path, None);
                    fail(path.clone(), Problem::Missing, ctk);
                }
                expected.insert(path);
            }
        }

        // The blobs of the regular files, read in one batch.
        let mut regular = Vec::new();
        for (path, staged) in &files {
            if staged.unmerged {
                fail(path.clone(), Problem::Unmerged, target_of(path, None));
                report.checked.push(path.clone());
            } else if staged.entry.mode == SYMLINK_MODE {
                let problem = Problem::NotRegular {
                    kind: "a symbolic link",
                };
                fail(path.clone(), problem, target_of(path, None));
                report.checked.push(path.clone());
            } else if staged.entry.mode != SUBMODULE_MODE {
                regular.push((path, staged));
            }
        }
        let objects: Vec<&str> = regular
            .iter()
            .map(|(_, s)| s.entry.object.as_str())
            .collect();
        let blobs = git::blobs(toplevel, &objects).map_err(index_error)?;
        let mut unsealed = Vec::new();
        for ((path, staged), bytes) in regular.into_iter().zip(blobs) {
            if !contains_marker(&bytes) {
                if expected.contains(path) {
                    let ctk = target_of(path, None);
                    fail(path.clone(), Problem::Seal(SealProblem::Missing), ctk);
                    report.checked.push(path.clone());
                } else {
                    unsealed.push((path.clone(), staged.entry.path.clone()));
                }
                continue;
            }
            let ctk = target_of(path, Some(&bytes));
            match check_contents(&bytes) {
                Err(problem) => fail(path.clone(), Problem::Seal(problem), ctk),
                Ok(info) => match folder_target(path) {
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
            report.checked.push(path.clone());
        }

        // What HEAD has sealed: unsealed now, or gone from the index.
        match git::sealed_in_head(toplevel, &pathspecs) {
            Err(why) => report.notes.push(format!(
                "HEAD checks (lost seals, deleted files) skipped for the repository at {}: {why}",
                toplevel.display()
            )),
            Ok(sealed) => {
                for (path, name) in &unsealed {
                    if sealed.contains(name) {
                        fail(path.clone(), Problem::LostSeal, target_of(path, None));
                    }
                }
                for name in sealed.iter().filter(|name| !in_index.contains(*name)) {
                    let Some((root, Some(path))) = place(roots, &located, in_repo, name) else {
                        continue;
                    };
                    matched[root] = true;
                    if options.allow_deletions {
                        report.notes.push(deletion_allowed(&path));
                    } else {
                        let ctk = target_of(&path, None);
                        fail(path, Problem::DeletedInIndex, ctk);
                    }
                }
            }
        }
        hand_written.extend(unsealed.into_iter().map(|(path, _)| path));
    }

    for (root, _) in matched.iter().enumerate().filter(|(_, matched)| !**matched) {
        let path = &roots[root].path;
        match fs::symlink_metadata(path) {
            Ok(_) => report.notes.push(format!(
                "nothing under {} is in the index (untracked?)",
                path.display()
            )),
            Err(error) => return Err(io_error(path, error)),
        }
    }
    for temporary in &report.temporaries {
        report.notes.push(format!(
            "skipped {} (staged): a temporary file left by an interrupted regen; `git rm --cached` it",
            temporary.display()
        ));
    }
    report.checked.sort();
    hand_written.sort();
    report.hand_written = hand_written;
    report.failures = failures.into_values().collect();
    Ok(report)
}

/// Where the repo-relative `name` belongs: the first root of `in_repo` holding it, and the path
/// it is reported under, or `None` for a file that a walk of that directory root skips (below a
/// `target` or hidden folder). `None` when no root holds it.
fn place(
    roots: &[VerifyRoot],
    located: &[String],
    in_repo: &[usize],
    name: &str,
) -> Option<(usize, Option<PathBuf>)> {
    in_repo.iter().find_map(|&i| {
        let root = located[i].as_str();
        let below = if root.is_empty() {
            name
        } else if name == root {
            return Some((i, Some(roots[i].path.clone())));
        } else {
            name.strip_prefix(root)?.strip_prefix('/')?
        };
        let below = Path::new(below);
        let skipped = below
            .parent()
            .is_some_and(|dirs| dirs.iter().any(is_skipped_dir));
        Some((i, (!skipped).then(|| roots[i].path.join(below))))
    })
}

/// The work tree holding `path` (which may be gone from the work tree, as a deleted folder is)
/// and `path` relative to it, as git spells it.
fn locate(path: &Path) -> Result<(PathBuf, String), String> {
    let absolute = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|error| format!("the current directory is unreadable ({error})"))?
            .join(path)
    };
    // The nearest part of the path that exists, and the names below it that do not.
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    while let Err(error) = fs::symlink_metadata(existing) {
        if error.kind() != io::ErrorKind::NotFound {
            return Err(format!("it is unreadable ({error})"));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return Err("no part of it exists".to_owned()),
        }
    }
    let toplevel = git::toplevel_of(existing).map_err(|unavailable| match unavailable {
        Unavailable::NoGit(why) => why,
        Unavailable::NoRepo(why) => format!("not in a git work tree ({why})"),
    })?;
    let mut canonical =
        fs::canonicalize(existing).map_err(|error| format!("it cannot be resolved ({error})"))?;
    canonical.extend(missing.iter().rev());
    let relative = git::repo_relative(&toplevel, &canonical).ok_or_else(|| {
        format!(
            "it cannot be placed in the repository at {}",
            toplevel.display()
        )
    })?;
    Ok((toplevel, relative))
}
