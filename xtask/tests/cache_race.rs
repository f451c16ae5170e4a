//! Two `regen`s and a `check` at once on one checkout (a copy of this one's data that lists 13.0
//! and 13.1, see the test) and one input cache that starts empty (what two CI jobs or two
//! checkouts sharing `$HOSTCB_INPUTS_CACHE` do): every run succeeds, and the cache ends whole,
//! with no temporary left behind.
//!
//! The processes share only what they write into the cache: the wheels they download (pip
//! pointed at a folder of the real wheels, no network), the libclang they unpack and the
//! summaries they cache. Each writes into a temporary of its own and renames the whole result
//! into place, with no lock, so three rounds cover every way they meet: all three downloading
//! every wheel and unpacking the libclang into the empty cache; all three unpacking the libclang
//! again once it is deleted; and all three finding it tampered with, where each process that
//! saw it so says so in one warning and the cache ends with the library the wheel states. The
//! headers are unpacked on every run into a folder of the process's own, so nothing of them is
//! shared to race on, and more rounds would repeat these.
//!
//! `cargo test -p xtask --test xtask -- cache_race::` runs it; the first round runs three
//! generations that read both listed targets' headers. The wheels come from the tests' fixture
//! (`fixture/mod.rs`).

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::fixture::{copy_wheels, listed_specs, listing_copy, lock, sha256_hex, xtask};

/// The cached libclang libraries (`<cache>/libclang/<sha256>/libclang.so`).
fn libraries(cache: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache.join("libclang"))
        .map(|d| {
            d.map(|e| e.unwrap().path().join("libclang.so"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The temporaries left in the cache's folders: names starting with a dot.
fn temporaries(cache: &Path) -> Vec<String> {
    ["wheels", "libclang"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(cache.join(dir)).into_iter().flatten())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

#[test]
fn two_regens_and_a_check_share_one_cache() {
    let cache = tempfile::tempdir().unwrap();
    // A package index of the wheels that generating the listed targets reads, from the tests'
    // fixture: pip downloads from it, as from PyPI.
    let index = tempfile::tempdir().unwrap();
    // Two targets listed, so that `regen --ctk 13.0` takes the other's summary from the cache
    // once it is there, and reads its headers until then: 13.1, whose runtime history is
    // 13.0's, so that every run fetches five wheels (the committed list makes it nineteen, each
    // a pip run of its own, which made most of this test's time).
    let checkout = listing_copy(&["13.0", "13.1"]);
    let specs = listed_specs(checkout.path());
    copy_wheels(&specs, index.path());
    let run_all = || -> Vec<Output> {
        let children: Vec<_> = [
            &["regen", "--ctk", "13.0"][..],
            &["regen", "--ctk", "13.0"][..],
            &["check", "--ctk", "13.0"][..],
        ]
        .iter()
        .map(|args| {
            xtask(checkout.path(), args)
                .env("HOSTCB_INPUTS_CACHE", cache.path())
                .env("PIP_NO_INDEX", "1")
                .env("PIP_FIND_LINKS", index.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run xtask")
        })
        .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect()
    };
    let mut failures = Vec::new();
    let mut library = None;
    for round in [
        "an empty cache",
        "the libclang deleted",
        "the libclang tampered with",
    ] {
        match round {
            "the libclang deleted" => {
                std::fs::remove_dir_all(cache.path().join("libclang")).unwrap();
            }
            "the libclang tampered with" => {
                let (path, bytes): &(PathBuf, Vec<u8>) = library.as_ref().unwrap();
                let mut tampered = bytes.clone();
                tampered[bytes.len() / 2] ^= 1;
                std::fs::write(path, tampered).unwrap();
            }
            _ => {}
        }
        let mut warnings = Vec::new();
        for out in run_all() {
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            if !out.status.success() {
                let error = stderr.lines().find(|l| l.starts_with("error:"));
                failures.push(format!("{round}: a run failed: {error:?}"));
            }
            warnings.extend(
                stderr
                    .lines()
                    .filter(|l| l.starts_with("warning:"))
                    .map(str::to_owned),
            );
        }
        // Only a tampered library is reported, by each process that found it so (at least the
        // first to look); no process reports another's work in progress.
        let expected = if round == "the libclang tampered with" {
            1..=3
        } else {
            0..=0
        };
        if !expected.contains(&warnings.len())
            || !warnings
                .iter()
                .all(|w| w.contains("differs from the wheel's entry"))
        {
            failures.push(format!(
                "{round}: {} warnings:\n{}",
                warnings.len(),
                warnings.join("\n")
            ));
        }
        // One library, named by its own SHA-256, and nothing half-written.
        match &libraries(cache.path())[..] {
            [path] => {
                let bytes = std::fs::read(path).unwrap();
                let named = path.parent().unwrap().file_name().unwrap();
                if named.to_string_lossy() != sha256_hex(&bytes) {
                    failures.push(format!("{round}: {} is not its SHA-256", path.display()));
                }
                library.get_or_insert((path.clone(), bytes));
            }
            other => failures.push(format!("{round}: libraries {other:?}")),
        }
        let left = temporaries(cache.path());
        if !left.is_empty() {
            failures.push(format!("{round}: temporaries left: {left:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every wheel was downloaded whole, once per name.
    for spec in &specs {
        let file = lock().get(spec).unwrap().file.clone();
        assert!(
            std::fs::read(cache.path().join("wheels").join(&file)).unwrap()
                == std::fs::read(index.path().join(&file)).unwrap(),
            "{file}"
        );
    }
}
