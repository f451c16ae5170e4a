//! `cargo xtask pin --ctk X.Y [--repin]`: pins the newest header packages of a CTK target on the
//! package index (PyPI) in `generator/inputs.lock`.
//!
//! pin is the root of trust: what it pins is trusted by hash afterwards. So before the lock
//! changes, each chosen wheel is opened and checked as regen checks a wheel (unique, safe entry
//! names, a RECORD that lists every file once with its true size, the decompressed-size cap), its
//! headers are unpacked as regen unpacks them and checked (each file's size and SHA-256 against
//! RECORD; `cuda.h` must say `CUDA_VERSION` X.Y), and a version the lock already holds must come
//! with the bytes the lock holds for it (else the run is refused naming both hashes, unless
//! `--repin`). Local versions (`+local`) are skipped with a line saying so; pip already passes over
//! versions the index marks yanked (PEP 592) for a range like `==X.Y.*`, and a yanked wheel that
//! pip picks anyway is skipped the same way. Nothing is written until everything passed: the lock
//! is replaced atomically, then the wheels are moved into the input cache; a refusal leaves both
//! as they were. Temporaries live under names a later run deletes if this one is killed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, anyhow, bail};
use hostcb_generator::Ctk;
use hostcb_generator::config::Config;
use hostcb_generator::inputs::{
    self, Fetch, Fetcher, InputError, LOCK_PATH, Lock, LockEntry, PIN_PREFIX, Pip, TargetPin,
    Temporary, Wheel,
};

/// The prefix of the lock's temporary copy in `generator/` (deleted by the next pin if one was
/// killed before renaming it).
const LOCK_TEMP_PREFIX: &str = ".inputs.lock.pin-";

/// How many versions pin skips (local or yanked) before it gives up.
const MAX_SKIPPED: usize = 8;

pub fn run(ws: &Config, ctk: &str, repin: bool) -> anyhow::Result<()> {
    let ctk: Ctk = ctk.parse()?;
    let started = Instant::now();
    let (headers_package, crt_package) = inputs::header_packages(ctk)?;
    let wheels_dir = ws.cache().join("wheels");
    let lock_path = ws.root.join(LOCK_PATH);
    let _checkout = lock_checkout(&lock_path)?;
    let lock = Lock::load(&lock_path)?;
    // Making it deletes the folders that killed pins left there.
    let scratch = Temporary::new(&wheels_dir, PIN_PREFIX)?;
    let downloads = scratch.path().join("downloads");
    let headers = newest(ctk, headers_package, scratch.path(), &downloads)?;
    let crt = newest(ctk, crt_package, scratch.path(), &downloads)?;
    for new in [&headers, &crt] {
        if let Ok(old) = lock.get(&new.spec())
            && (old.file != new.file || old.sha256 != new.sha256)
        {
            if !repin {
                bail!(
                    "{} is locked as {} with sha256 {}, but the index now serves {} with sha256 {}: the bytes of a pinned release changed, so nothing was changed; check the index, or run cargo xtask pin --ctk {ctk} --repin to pin the new bytes",
                    new.spec(),
                    old.file,
                    old.sha256,
                    new.file,
                    new.sha256
                );
            }
            eprintln!(
                "pin: --repin: {} was sha256 {}, is now sha256 {}",
                new.spec(),
                old.sha256,
                new.sha256
            );
        }
    }
    let pin = TargetPin {
        ctk,
        headers: headers.spec(),
        crt: crt.spec(),
    };
    let unchanged = lock.target(ctk).is_ok_and(|t| *t == pin)
        && [&headers, &crt]
            .iter()
            .all(|n| lock.get(&n.spec()).is_ok_and(|o| o == *n));
    let new = lock.with_target(pin, [headers.clone(), crt.clone()]);
    // Unpack and check the headers through the same path regen takes, from a scratch cache,
    // before the lock or the real cache changes.
    let fetcher = Fetcher::new(new.clone(), Box::new(Downloaded(downloads.clone())));
    fetcher
        .headers(ctk, &scratch.path().join("cache"))
        .map_err(|e| match e {
            InputError::InconsistentWheel { .. } | InputError::UntrustedWheel { .. } => {
                let (package, version) = if e.to_string().contains(&headers.file) {
                    (&headers.name, &headers.version)
                } else {
                    (&crt.name, &crt.version)
                };
                refused(package, version, e)
            }
            e => anyhow!("the newest wheels of CTK {ctk} do not hold usable headers: {e}"),
        })?;
    let text = new.render();
    if std::fs::read_to_string(&lock_path).ok().as_deref() != Some(&text) {
        write_atomically(&lock_path, &text)?;
    }
    // The lock names these bytes now: the cache may hold them.
    for e in [&headers, &crt] {
        let from = downloads.join(&e.file);
        let to = wheels_dir.join(&e.file);
        std::fs::rename(&from, &to)
            .with_context(|| format!("cannot move {} into {}", e.file, wheels_dir.display()))?;
    }
    for e in [&headers, &crt] {
        eprintln!("  {}  {}  sha256 {}", e.spec(), e.file, e.sha256);
    }
    let listed = ws.targets.contains(&ctk);
    eprintln!(
        "pin: CTK {ctk} {} in {} in {:.1} s{}",
        if unchanged {
            "already pinned to these"
        } else {
            "pinned"
        },
        lock_path.display(),
        started.elapsed().as_secs_f64(),
        if listed {
            String::new()
        } else {
            format!(
                "; to generate it, add {ctk} to generator/targets.txt and run cargo xtask regen --ctk all"
            )
        }
    );
    Ok(())
}

/// Hands pin's own downloads to the [`Fetcher`] that checks them (by a hard link, else a copy).
struct Downloaded(PathBuf);

impl Fetch for Downloaded {
    fn fetch(&self, spec: &str, dir: &Path) -> Result<(), InputError> {
        let failed = |detail: String| InputError::Download {
            spec: spec.to_owned(),
            detail,
        };
        let entries = std::fs::read_dir(&self.0).map_err(|e| failed(e.to_string()))?;
        let (name, version) = spec.split_once("==").unwrap_or((spec, ""));
        let stem = format!("{}-{version}-", name.replace('-', "_"));
        for entry in entries.flatten() {
            let file = entry.file_name();
            if file.to_string_lossy().starts_with(&stem) {
                let to = dir.join(&file);
                return std::fs::hard_link(entry.path(), &to)
                    .or_else(|_| std::fs::copy(entry.path(), &to).map(drop))
                    .map_err(|e| failed(e.to_string()));
            }
        }
        Err(failed("pin did not download it".to_owned()))
    }
}

/// Downloads the newest wheel of `package` for CTK `ctk` (`package==X.Y.*`) into `downloads`,
/// opens and checks it, and returns its lock entry. A local version, or a yanked one pip picked
/// anyway, is skipped with a line saying so and the next newest is asked for.
fn newest(ctk: Ctk, package: &str, scratch: &Path, downloads: &Path) -> anyhow::Result<LockEntry> {
    std::fs::create_dir_all(downloads)
        .with_context(|| format!("cannot create {}", downloads.display()))?;
    let mut skipped: Vec<String> = Vec::new();
    loop {
        let range = format!("{package}=={ctk}.*");
        let spec = std::iter::once(range.clone())
            .chain(skipped.iter().map(|v| format!("!={v}")))
            .collect::<Vec<_>>()
            .join(",");
        let tmp = tempfile::tempdir_in(scratch)
            .with_context(|| format!("cannot create a folder in {}", scratch.display()))?;
        eprintln!("pin: fetching the newest {spec} from the package index");
        let warnings = match Pip::default().download(&spec, tmp.path()) {
            Ok(warnings) => warnings,
            Err(InputError::Download { detail, .. })
                if detail.contains("No matching distribution") =>
            {
                if skipped.is_empty() {
                    bail!(
                        "the package index has no {package} release for CTK {ctk} (no {range}); is {ctk} a CUDA toolkit release? (there was no 12.7, for one)"
                    );
                }
                bail!(
                    "the package index has no usable {package} release for CTK {ctk}: every {range} it offers was skipped ({})",
                    skipped.join(", ")
                );
            }
            Err(e) => return Err(e.into()),
        };
        let wheels: Vec<PathBuf> = std::fs::read_dir(tmp.path())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "whl"))
            .collect();
        let [wheel] = wheels.as_slice() else {
            bail!(
                "pip download {spec} left {} wheels, not one; check the package on the index",
                wheels.len()
            );
        };
        let file = wheel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A wheel's file name is `<distribution>-<version>-<tags>.whl`.
        let version = file
            .split('-')
            .nth(1)
            .filter(|v| v.starts_with(&format!("{ctk}.")))
            .map(str::to_owned)
            .with_context(|| format!("{file}: no version of CTK {ctk} in the wheel's name"))?;
        let skip = if version.contains('+') {
            Some("a local version (+label), which is no release of the index".to_owned())
        } else if warnings.contains("is a yanked version") {
            Some("yanked on the index".to_owned())
        } else {
            None
        };
        if let Some(why) = skip {
            eprintln!("pin: skipped {package} {version}: {why}");
            skipped.push(version);
            if skipped.len() >= MAX_SKIPPED {
                bail!(
                    "the package index offers {} {package} versions for CTK {ctk} that pin skips ({}); check the index",
                    skipped.len(),
                    skipped.join(", ")
                );
            }
            continue;
        }
        let checked = Wheel::open(wheel).map_err(|e| refused(package, &version, e))?;
        let sha256 = checked.sha256().to_owned();
        drop(checked);
        for newer in passed_over(&spec, &version, &skipped, scratch) {
            eprintln!(
                "pin: skipped {package} {newer}: newer, but the index marks it yanked (pip passes over yanked releases)"
            );
        }
        let kept = downloads.join(&file);
        std::fs::rename(wheel, &kept)
            .with_context(|| format!("cannot move {file} into {}", downloads.display()))?;
        return Ok(LockEntry {
            name: package.to_owned(),
            version,
            file,
            sha256,
        });
    }
}

/// The versions newer than `chosen` that the index lists for `spec` and pip passed over (yanked
/// ones: pip takes a yanked release only when asked for it exactly), so pin can say what it did
/// not take. Asking pip for a newer one fails and lists every version it saw; a failure to ask
/// says nothing.
fn passed_over(spec: &str, chosen: &str, skipped: &[String], scratch: &Path) -> Vec<String> {
    let Ok(tmp) = tempfile::tempdir_in(scratch) else {
        return Vec::new();
    };
    let detail = match Pip::default().download(&format!("{spec},>{chosen}"), tmp.path()) {
        Err(InputError::Download { detail, .. }) => detail,
        _ => return Vec::new(),
    };
    // pip's line before the last: `... (from versions: 13.0.96, 13.0.99)`; the last repeats it.
    let Some(listed) = detail
        .split("(from versions: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
    else {
        return Vec::new();
    };
    let (range, _) = spec.split_once(',').unwrap_or((spec, ""));
    let prefix = range
        .split_once("==")
        .map(|(_, v)| v.trim_end_matches('*'))
        .unwrap_or("");
    listed
        .split(", ")
        .filter(|v| v.starts_with(prefix) && !v.contains('+') && !skipped.iter().any(|s| s == v))
        .filter(|v| newer_than(v, chosen))
        .map(str::to_owned)
        .collect()
}

/// Whether the release `a` (dotted numbers) is newer than `b`.
fn newer_than(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    parts(a) > parts(b)
}

/// The error for a wheel of the index that breaks its own promises: what is wrong with it, and
/// that nothing was pinned (the wheel's path is pin's temporary, so it is not named).
fn refused(package: &str, version: &str, e: InputError) -> anyhow::Error {
    let problem = match e {
        InputError::UntrustedWheel { problem, .. } => problem,
        InputError::InconsistentWheel { entry, detail, .. } => {
            format!("its entry {entry} does not match its own RECORD ({detail})")
        }
        InputError::UnsafeEntry { entry, .. } => {
            format!("its entry '{entry}' is unsafe (absolute, '..' or a link)")
        }
        other => other.to_string(),
    };
    anyhow!(
        "refused {package} {version} from the package index: {problem}; nothing was changed (the index serves a broken or tampered wheel: check it, or wait for a good release)"
    )
}

/// Holds the checkout's pins apart: an exclusive lock on the folder of the lock file for the
/// run (one pin at a time per checkout), after which the temporary lock copies a killed pin left
/// there are deleted.
fn lock_checkout(lock_path: &Path) -> anyhow::Result<std::fs::File> {
    let dir = lock_path.parent().unwrap_or(Path::new("."));
    let folder =
        std::fs::File::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    folder
        .lock()
        .with_context(|| format!("cannot lock {}", dir.display()))?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(LOCK_TEMP_PREFIX)
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(folder)
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(LOCK_TEMP_PREFIX)
        .tempfile_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| anyhow!("cannot write {}: {e}", tmp.path().display()))?;
    tmp.persist(path)
        .map_err(|e| anyhow!("cannot replace {}: {}", path.display(), e.error))?;
    Ok(())
}
