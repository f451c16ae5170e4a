//! `cargo xtask pin --ctk X.Y`: pins the newest header packages of a CTK target on PyPI in
//! `generator/inputs.lock`. The wheels are fetched with pip, hashed, unpacked and checked
//! (their `cuda.h` must say `CUDA_VERSION` X.Y) before the lock is rewritten, atomically; a
//! failure leaves the lock as it was.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use hostcb_generator::Ctk;
use hostcb_generator::config::Config;
use hostcb_generator::inputs::{
    self, Fetch, Fetcher, LOCK_PATH, Lock, LockEntry, Pip, TargetPin, sha256_file,
};

pub fn run(ws: &Config, ctk: &str) -> anyhow::Result<()> {
    let ctk: Ctk = ctk.parse()?;
    let started = Instant::now();
    let (headers_package, crt_package) = inputs::header_packages(ctk)?;
    let cache = ws.cache().to_path_buf();
    let wheels_dir = cache.join("wheels");
    std::fs::create_dir_all(&wheels_dir)
        .with_context(|| format!("cannot create {}", wheels_dir.display()))?;
    let headers = newest(ctk, headers_package, &wheels_dir)?;
    let crt = newest(ctk, crt_package, &wheels_dir)?;
    let lock_path = ws.root.join(LOCK_PATH);
    let lock = Lock::load(&lock_path)?;
    let pin = TargetPin {
        ctk,
        headers: headers.spec(),
        crt: crt.spec(),
    };
    let unchanged = lock.target(ctk).is_ok_and(|t| *t == pin);
    let new = lock.with_target(pin, [headers.clone(), crt.clone()]);
    // Unpack and check the headers through the same path regen takes, before the lock changes.
    let fetcher = Fetcher::new(new.clone(), Box::new(Pip::default()));
    fetcher
        .headers(ctk, &cache)
        .with_context(|| format!("the newest wheels of CTK {ctk} do not hold usable headers"))?;
    let text = new.render();
    if !unchanged || std::fs::read_to_string(&lock_path).ok().as_deref() != Some(&text) {
        write_atomically(&lock_path, &text)?;
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

/// Downloads the newest wheel of `package` for CTK `ctk` (`package==X.Y.*`), moves it into
/// `wheels_dir` (where regen looks first) and returns its lock entry.
fn newest(ctk: Ctk, package: &str, wheels_dir: &Path) -> anyhow::Result<LockEntry> {
    let spec = format!("{package}=={ctk}.*");
    let tmp = tempfile::Builder::new()
        .prefix(".pin-")
        .tempdir_in(wheels_dir)
        .with_context(|| format!("cannot create a folder in {}", wheels_dir.display()))?;
    eprintln!("pin: fetching the newest {spec} from PyPI");
    if let Err(e) = Pip::default().fetch(&spec, tmp.path()) {
        let text = e.to_string();
        if text.contains("No matching distribution") {
            bail!(
                "PyPI has no {package} release for CTK {ctk} (no {spec}); is {ctk} a CUDA toolkit release? (there was no 12.7, for one)"
            );
        }
        return Err(e.into());
    }
    let wheels: Vec<PathBuf> = std::fs::read_dir(tmp.path())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    let [wheel] = wheels.as_slice() else {
        bail!(
            "pip download {spec} left {} wheels, not one; check the package on PyPI",
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
    let sha256 = sha256_file(wheel)?;
    let cached = wheels_dir.join(&file);
    std::fs::rename(wheel, &cached)
        .with_context(|| format!("cannot move {file} into {}", wheels_dir.display()))?;
    Ok(LockEntry {
        name: package.to_owned(),
        version,
        file,
        sha256,
    })
}

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}
