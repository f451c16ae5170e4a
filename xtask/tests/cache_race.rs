//! Two `regen`s and a `check` at once on one checkout (a copy of this one's data) and one input
//! cache (what two CI jobs or two checkouts sharing `$HOSTCB_INPUTS_CACHE` do), 20 rounds: every
//! run succeeds and none prints a warning about a tree another process is unpacking; a tree that
//! really was tampered with is reported once, by the process that unpacks it again, not by the
//! others.
//!
//! Slow: about 2–4 minutes on a 2-core machine (each round runs three generations of the
//! committed targets at once). The wheels come from the tests' fixture (`fixture/mod.rs`).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::fixture::{copy_wheels, target_specs, workspace, workspace_copy, xtask};

/// The unpacked trees of the cache (folders under `unpacked/` that are not temporaries).
fn trees(cache: &Path) -> Vec<PathBuf> {
    let mut trees: Vec<PathBuf> = std::fs::read_dir(cache.join("unpacked"))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| {
                    p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.')
                })
                .collect()
        })
        .unwrap_or_default();
    trees.sort();
    trees
}

/// The first regular file of a header tree (not libclang's 61 MB, which a process loads once).
fn a_header(tree: &Path) -> Option<PathBuf> {
    fn walk(dir: &Path) -> Option<PathBuf> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                if let Some(found) = walk(&p) {
                    return Some(found);
                }
            } else if p.extension().is_some_and(|x| x == "h") {
                return Some(p);
            }
        }
        None
    }
    walk(tree)
}

#[test]
fn two_regens_and_a_check_share_one_cache() {
    let cache = tempfile::tempdir().unwrap();
    let wheels = cache.path().join("wheels");
    std::fs::create_dir_all(&wheels).unwrap();
    // The wheels of the listed targets (and libclang), from the tests' fixture.
    let specs: Vec<String> = hostcb_generator::config::Config::listed_targets(&workspace())
        .unwrap()
        .into_iter()
        .flat_map(target_specs)
        .collect();
    copy_wheels(&specs, &wheels);
    let checkout = workspace_copy();
    let run_all = || {
        let children: Vec<_> = [
            &["regen", "--ctk", "13.0"][..],
            &["regen", "--ctk", "13.0"][..],
            &["check", "--ctk", "13.0"][..],
        ]
        .iter()
        .map(|args| {
            xtask(checkout.path(), args)
                .env("HOSTCB_INPUTS_CACHE", cache.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run xtask")
        })
        .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    };
    // A first run fills the cache.
    for out in run_all() {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut failures = Vec::new();
    for round in 0..20 {
        // Even rounds: every tree is gone, so all three unpack at once. Odd rounds: one header of
        // every header tree is edited, so one process must unpack each again while the others
        // check and read it.
        let tampered = if round % 2 == 0 {
            std::fs::remove_dir_all(cache.path().join("unpacked")).unwrap();
            0
        } else {
            let mut n = 0;
            for tree in trees(cache.path()) {
                if let Some(h) = a_header(&tree) {
                    let mut text = std::fs::read(&h).unwrap();
                    text.extend_from_slice(b"\n#define TAMPERED 1\n");
                    std::fs::write(&h, text).unwrap();
                    n += 1;
                }
            }
            assert!(n > 0, "round {round}: no tree to tamper with");
            n
        };
        let mut warnings = Vec::new();
        for out in run_all() {
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if !out.status.success() {
                let error = stderr.lines().find(|l| l.starts_with("error:"));
                failures.push(format!("round {round}: a run failed: {error:?}"));
            }
            warnings.extend(
                stderr
                    .lines()
                    .filter(|l| l.starts_with("warning:"))
                    .map(str::to_owned),
            );
        }
        // A tampered tree is reported by the one process that unpacks it again; any other
        // warning is about a tree another process was writing.
        if warnings.len() != tampered
            || !warnings
                .iter()
                .all(|w| w.contains("bytes where the wheel's entry has"))
        {
            failures.push(format!(
                "round {round}: {} warnings for {tampered} tampered trees:\n{}",
                warnings.len(),
                warnings.join("\n")
            ));
        }
    }
    // Every round runs; the failure lists each round that went wrong.
    assert!(
        failures.is_empty(),
        "{} of 20 rounds went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // No temporaries are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(cache.path().join("unpacked"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".unpack-") || n.starts_with(".stale-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
