//! What a sealed file may be made from: only what the lock or the repository roots. The input
//! cache is shared and writable, so a summary it holds is used only when the committed, sealed
//! provenance of its target vouches for it.

mod fixture;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use hostcb_generator::config::Config;
use sha2::{Digest, Sha256};

/// Every file under `dir`, by path relative to it, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// A copy of the committed generated crate (its manifest and sealed sources) in `into`.
fn copy_generated(into: &Path) {
    let from = fixture::workspace().join("generated");
    for (path, bytes) in tree(&from) {
        if !(path.starts_with("src") || path == Path::new("Cargo.toml")) {
            continue;
        }
        let to = into.join(&path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The attack of a writer of a shared input cache: after a regen has cached the summaries of the
/// targets it did not generate, one of them is rewritten so that `cuLaunchHostFunc` reads
/// `99999 / 99999`, with its trailing SHA-256 (a checksum, not a key) recomputed. The next
/// `regen --ctk X` leaves every byte of the generated crate as committed and names the file it
/// ignored; the run after that (the cache repaired from the headers) says nothing of it.
#[test]
fn a_forged_cached_summary_is_ignored_and_nothing_sealed_changes() {
    let targets = Config::listed_targets(&fixture::workspace()).unwrap();
    assert!(targets.len() >= 2, "{targets:?}");
    let (generated, forged) = (targets[0], targets[1]);
    let scratch = tempfile::tempdir().unwrap();
    let cache = scratch.path().join("cache");
    let specs: Vec<String> = targets
        .iter()
        .flat_map(|&ctk| fixture::target_specs(ctk))
        .collect();
    fixture::copy_wheels(&specs, &cache.join("wheels"));
    let out = scratch.path().join("generated");
    copy_generated(&out);
    let committed = tree(&out);
    let ctk_arg = generated.to_string();
    let regen = || {
        let run = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["regen", "--ctk", &ctk_arg, "--out"])
            .arg(&out)
            .current_dir(fixture::workspace())
            .env("HOSTCB_INPUTS_CACHE", &cache)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(run.status.success(), "{stderr}");
        stderr
    };

    // Reads the other targets' headers and caches their summaries; the committed tree is current.
    let first = regen();
    assert!(first.contains(", 0 written, "), "{first}");
    assert!(!first.contains("ignored"), "{first}");

    let summary = std::fs::read_dir(cache.join("summaries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{}-", forged.module()))
        })
        .expect("the regen cached the summary of a target it did not generate");
    let text = std::fs::read_to_string(&summary).unwrap();
    let (body, _) = text.rsplit_once("sha256 ").unwrap();
    let lie: String = body
        .lines()
        .map(
            |line| match line.strip_prefix("driver\tcuLaunchHostFunc\t") {
                Some(_) => "driver\tcuLaunchHostFunc\t99999 / 99999\n".to_owned(),
                None => format!("{line}\n"),
            },
        )
        .collect();
    assert_ne!(lie, body);
    let forgery = format!("{lie}sha256 {}\n", hex(&Sha256::digest(lie.as_bytes())));
    std::fs::write(&summary, &forgery).unwrap();

    let second = regen();
    assert!(
        second.contains(&format!(
            "warning: ignored the cached summary of CTK {forged} at {}",
            summary.display()
        )),
        "{second}"
    );
    assert!(second.contains(", 0 written, "), "{second}");
    let now = tree(&out);
    for (path, bytes) in &committed {
        assert!(
            now.get(path) == Some(bytes),
            "{} changed: the forged summary reached it",
            path.display()
        );
    }
    assert_eq!(now.len(), committed.len());
    assert!(!std::fs::read_to_string(&summary).unwrap().contains("99999"));

    let third = regen();
    assert!(!third.contains("ignored"), "{third}");
}
