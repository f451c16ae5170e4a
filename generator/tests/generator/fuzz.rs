//! Fuzzing of the parsers that read bytes nobody vouches for: seal lines and sealed files, the
//! summary digest of a sealed `provenance.toml`, `inputs.lock`, the summaries of the input cache,
//! and wheels (their zip entries and `RECORD`). On the stable toolchain: a mutational fuzzer
//! without coverage feedback (seeded random byte, dictionary and splice mutations of the
//! committed corpus in `generator/fuzz-corpus/<target>/`, and for wheels mutations of their
//! entries, names and `RECORD`, zipped again). Each case must:
//!
//! - not panic (each case runs under `catch_unwind`);
//! - not hang (a watchdog aborts the process after [`HANG`] without a finished case, writing the
//!   input first);
//! - never accept bytes other than those sealed or locked: an accepted sealed file's content is
//!   the one its digest names (and a seed's digest names only that seed's content); a file
//!   sealed here checks and gives back what was sealed; a summary digest is read only from a
//!   sealed provenance file that holds it; a wheel opened against a lock entry is the locked
//!   file; every file unpacked from a wheel has the size and SHA-256 its `RECORD` line states,
//!   and lies inside the destination; a lock or summary that parses renders to text that parses
//!   to the same.
//!
//! `cargo test -p hostcb-generator --test generator fuzz::` runs the short run CI runs: every
//! corpus file, then a fixed number of cases per target from seed 0 (the same cases on every
//! machine).
//! `cargo xtask fuzz --seconds N` runs a long one: N seconds per target, a fresh seed (printed),
//! release build; `HOSTCB_FUZZ_SEED` repeats a run. Each target prints its cases per second. An
//! input that fails is written under `$CARGO_TARGET_TMPDIR/fuzz-findings/<target>/`; once fixed,
//! commit it to the target's corpus folder, which every run replays first.
//!
//! The package index's pages are not among the parsers: pip reads them, and what the project
//! takes from pip is a wheel file, checked here as a wheel and against the lock.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hostcb_generator::Ctk;
use hostcb_generator::emit;
use hostcb_generator::inputs::{Lock, LockEntry, Wheel, unpack_wheel};
use hostcb_generator::model::Summary;
use sha2::{Digest, Sha256};

/// The longest one case may take before the watchdog calls it a hang.
const HANG: Duration = Duration::from_secs(20);

/// How many mutated cases per target the short run tries (after the corpus).
const SHORT_CASES: u64 = 2000;

/// What one target checks of one input: `Err` says which property failed.
type Check = fn(&[u8], &Seeds) -> Result<(), String>;

/// The committed seeds of a target, and what the checks derive from them.
struct Seeds {
    files: Vec<(PathBuf, Vec<u8>)>,
    /// `(digest, content)` of every seed whose seal checks.
    sealed: Vec<(String, Vec<u8>)>,
    /// The summary digest each sealed seed records, by its seal digest.
    summaries: BTreeMap<String, String>,
    scratch: tempfile::TempDir,
}

impl Seeds {
    fn load(target: &str) -> Seeds {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz-corpus")
            .join(target);
        let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| {
                let path = e.unwrap().path();
                let bytes = std::fs::read(&path).unwrap();
                (path, bytes)
            })
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{} holds no seed", dir.display());
        let mut sealed = Vec::new();
        let mut summaries = BTreeMap::new();
        for (_, bytes) in &files {
            if let Ok(info) = hostcb_seal::check_contents(bytes) {
                sealed.push((info.sha256.clone(), without_line(bytes, info.line)));
                if let Some(d) = summary_digest_in(bytes) {
                    summaries.insert(info.sha256, d);
                }
            }
        }
        Seeds {
            files,
            sealed,
            summaries,
            // Memory-backed where there is such a folder: the provenance and wheel checks
            // write every case to a file.
            scratch: match Path::new("/dev/shm").is_dir() {
                true => tempfile::tempdir_in("/dev/shm"),
                false => tempfile::tempdir(),
            }
            .unwrap(),
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `bytes` without its 1-based line `line` (and the `\n` that ends it).
fn without_line(bytes: &[u8], line: usize) -> Vec<u8> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .enumerate()
        .filter(|(i, _)| i + 1 != line)
        .flat_map(|(_, l)| l.iter().copied())
        .collect()
}

/// The digest after `[summary]\nsha256 = "` in `bytes`, read here independently of the
/// generator: 64 lowercase hex digits, then `"` and a newline.
fn summary_digest_in(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let at = text.find("\n[summary]\nsha256 = \"")?;
    let rest = &text[at + "\n[summary]\nsha256 = \"".len()..];
    let digest = rest.get(..64)?;
    (digest
        .bytes()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && rest[64..].starts_with("\"\n"))
    .then(|| digest.to_owned())
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// A sealed file: accepted only with the content its digest names; a seed's digest names only
/// that seed's content.
fn check_seal(bytes: &[u8], seeds: &Seeds) -> Result<(), String> {
    let Ok(info) = hostcb_seal::check_contents(bytes) else {
        return Ok(());
    };
    let content = without_line(bytes, info.line);
    if sha256_hex(&content) != info.sha256 {
        return Err(format!(
            "accepted a file whose content (line {} removed) does not have the recorded SHA-256",
            info.line
        ));
    }
    for (digest, seed) in &seeds.sealed {
        if *digest == info.sha256 && *seed != content {
            return Err("accepted other content under a seed's digest".to_owned());
        }
    }
    Ok(())
}

/// Sealing any text: the result checks, names the target, and gives back what was sealed.
fn check_seal_roundtrip(bytes: &[u8], _: &Seeds) -> Result<(), String> {
    // The seeds are sealed files: their seal lines go, so that most cases can be sealed.
    let text: String = String::from_utf8_lossy(bytes)
        .split_inclusive('\n')
        .filter(|line| !line.contains(hostcb_seal::marker()))
        .collect();
    for (ctk, prefix) in [("13.0", "//"), ("all", "#")] {
        let Ok(sealed) = hostcb_seal::seal(&text, ctk, prefix) else {
            continue;
        };
        let info = hostcb_seal::check_contents(sealed.as_bytes())
            .map_err(|e| format!("a file sealed here does not check: {e}"))?;
        if info.ctk != ctk {
            return Err(format!("sealed for {ctk}, checks as {}", info.ctk));
        }
        if without_line(sealed.as_bytes(), info.line) != text.as_bytes() {
            return Err("the sealed file without its seal line is not what was sealed".to_owned());
        }
    }
    Ok(())
}

/// The summary digest of a provenance file: read only from a file whose seal checks and names
/// its target, only the digest the file holds, and for a seed's content only that seed's.
fn check_provenance(bytes: &[u8], seeds: &Seeds) -> Result<(), String> {
    let root = seeds.scratch.path();
    let path = root
        .join(emit::target_dir(Ctk::V13_0))
        .join(emit::PROVENANCE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    let Some(digest) = emit::render::sealed_summary_sha256(root, Ctk::V13_0) else {
        return Ok(());
    };
    let info = hostcb_seal::check_contents(bytes)
        .map_err(|e| format!("took a summary digest from a file whose seal fails: {e}"))?;
    if info.ctk != "13.0" {
        return Err(format!(
            "took a summary digest from a file sealed for {}",
            info.ctk
        ));
    }
    if summary_digest_in(bytes).as_deref() != Some(digest.as_str()) {
        return Err(format!("took {digest}, which the file does not record"));
    }
    if let Some(seed) = seeds.summaries.get(&info.sha256)
        && *seed != digest
    {
        return Err(format!(
            "took {digest} from a seed's content, which records {seed}"
        ));
    }
    Ok(())
}

/// `inputs.lock`: what parses renders to text that parses to the same, with well-formed digests
/// and every target's wheels locked.
fn check_lock(bytes: &[u8], _: &Seeds) -> Result<(), String> {
    let text = String::from_utf8_lossy(bytes);
    let Ok(lock) = Lock::parse(&text) else {
        return Ok(());
    };
    let rendered = lock.render();
    let again = Lock::parse(&rendered).map_err(|e| format!("its rendering does not parse: {e}"))?;
    if again.render() != rendered {
        return Err("its rendering parses to another lock".to_owned());
    }
    for entry in lock.entries() {
        if entry.sha256.len() != 64
            || !entry
                .sha256
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(format!(
                "accepted the digest '{}' of {}",
                entry.sha256,
                entry.spec()
            ));
        }
    }
    for ctk in lock.targets() {
        let pin = lock.target(ctk).map_err(|e| e.to_string())?;
        for spec in [&pin.headers, &pin.crt] {
            lock.get(spec)
                .map_err(|e| format!("target {ctk} names {spec}, not locked: {e}"))?;
        }
    }
    Ok(())
}

/// A cached summary's text: what parses writes text that parses to the same summary.
fn check_summary(bytes: &[u8], _: &Seeds) -> Result<(), String> {
    let text = String::from_utf8_lossy(bytes);
    for ctk in [Ctk::V13_0, Ctk::V12_9] {
        let Some(summary) = Summary::from_text(ctk, &text) else {
            continue;
        };
        if summary.ctk != ctk {
            return Err(format!("read for {ctk}, holds {}", summary.ctk));
        }
        if Summary::from_text(ctk, &summary.to_text()).as_ref() != Some(&summary) {
            return Err("its text does not read back as the same summary".to_owned());
        }
    }
    Ok(())
}

/// A wheel: opened against a lock entry only when it is the locked file; unpacked only into the
/// destination, every file with the size and SHA-256 its `RECORD` line states.
fn check_wheel(bytes: &[u8], seeds: &Seeds) -> Result<(), String> {
    let case = tempfile::tempdir_in(seeds.scratch.path()).unwrap();
    let path = case.path().join("pkg-1.0-py3-none-any.whl");
    std::fs::write(&path, bytes).unwrap();
    for (seed_path, seed) in &seeds.files {
        let entry = LockEntry {
            name: "pkg".to_owned(),
            version: "1.0".to_owned(),
            file: seed_path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            sha256: sha256_hex(seed),
        };
        if Wheel::open_locked(&path, &entry).is_ok() && bytes != seed.as_slice() {
            return Err(format!(
                "opened other bytes as the locked {}",
                seed_path.display()
            ));
        }
    }
    let dest = case.path().join("out");
    if unpack_wheel(&path, "pkg/include", &dest).is_err() {
        return Ok(());
    }
    let record = record_of(bytes).ok_or("unpacked a wheel whose RECORD this check cannot read")?;
    for entry in std::fs::read_dir(case.path()).unwrap() {
        let name = entry.unwrap().file_name();
        if name != "out" && name != "pkg-1.0-py3-none-any.whl" {
            return Err(format!("wrote {name:?} beside the destination"));
        }
    }
    let mut unpacked = Vec::new();
    walk(&dest, &dest, &mut unpacked)?;
    if unpacked.is_empty() {
        return Err("unpacked nothing, and said it succeeded".to_owned());
    }
    for (name, content) in unpacked {
        let Some((size, digest)) = record.get(&name) else {
            return Err(format!("unpacked {name}, which its RECORD does not list"));
        };
        if *size != content.len() as u64 || *digest != sha256_hex(&content) {
            return Err(format!(
                "unpacked {name} with {} bytes and sha256 {}, its RECORD says {size} and {digest}",
                content.len(),
                sha256_hex(&content)
            ));
        }
    }
    Ok(())
}

/// Every regular file under `dir`, by path relative to `root`; an error for anything else.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else if kind.is_file() {
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((name, std::fs::read(&path).unwrap()));
        } else {
            return Err(format!("unpacked {} as a {kind:?}", path.display()));
        }
    }
    Ok(())
}

/// The `RECORD` of a wheel's bytes, read here apart from the generator's reader: path → (size,
/// SHA-256 hex).
fn record_of(bytes: &[u8]) -> Option<BTreeMap<String, (u64, String)>> {
    let (_, text) = crate::wheels::unzip(bytes, |n| n.ends_with(".dist-info/RECORD"))?
        .into_iter()
        .next()?;
    let text = String::from_utf8(text).ok()?;
    let mut record = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.rsplitn(3, ',');
        let (size, hash, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = match path.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            Some(quoted) => quoted.replace("\"\"", "\""),
            None => path.to_owned(),
        };
        let (Ok(size), Some(digest)) = (
            size.parse::<u64>(),
            hash.strip_prefix("sha256=").and_then(base64_url_hex),
        ) else {
            continue;
        };
        record.insert(path, (size, digest));
    }
    Some(record)
}

/// Unpadded URL-safe base64 → lowercase hex, by the standard alphabet's definition.
fn base64_url_hex(text: &str) -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u64;
    let mut n = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u64;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    Some(out.iter().map(|b| format!("{b:02x}")).collect())
}

// ---------------------------------------------------------------------------------------------
// The mutator.

/// Mutates `input` in place: one to four byte, dictionary or splice edits.
fn mutate(rng: &mut fastrand::Rng, input: &mut Vec<u8>, dict: &[&[u8]], seeds: &Seeds) {
    for _ in 0..rng.usize(1..=4) {
        let len = input.len();
        match rng.u8(0..9) {
            0 if len > 0 => {
                let i = rng.usize(..len);
                input[i] ^= 1 << rng.u8(0..8);
            }
            1 if len > 0 => {
                let i = rng.usize(..len);
                input[i] = rng.u8(..);
            }
            2 => {
                let i = rng.usize(..=len);
                input.insert(i, rng.u8(..));
            }
            3 if len > 0 => {
                let a = rng.usize(..len);
                let b = (a + rng.usize(1..=16)).min(len);
                input.drain(a..b);
            }
            4 if len > 0 => {
                let a = rng.usize(..len);
                let b = (a + rng.usize(1..=64)).min(len);
                let copy = input[a..b].to_vec();
                let at = rng.usize(..=input.len());
                input.splice(at..at, copy);
            }
            5 | 6 if !dict.is_empty() => {
                let token = dict[rng.usize(..dict.len())];
                let at = rng.usize(..=len);
                if rng.bool() && at + token.len() <= len {
                    input[at..at + token.len()].copy_from_slice(token);
                } else {
                    input.splice(at..at, token.iter().copied());
                }
            }
            7 => {
                let (_, other) = &seeds.files[rng.usize(..seeds.files.len())];
                if !other.is_empty() {
                    let a = rng.usize(..other.len());
                    let b = (a + rng.usize(1..=256)).min(other.len());
                    let at = rng.usize(..=len);
                    input.splice(at..at, other[a..b].iter().copied());
                }
            }
            _ if len > 0 => {
                // Swap two lines, the edit that keeps each line whole.
                let lines: Vec<Vec<u8>> = input
                    .split_inclusive(|&b| b == b'\n')
                    .map(<[u8]>::to_vec)
                    .collect();
                if lines.len() > 1 {
                    let (a, b) = (rng.usize(..lines.len()), rng.usize(..lines.len()));
                    let mut lines = lines;
                    lines.swap(a, b);
                    *input = lines.concat();
                }
            }
            _ => {}
        }
    }
}

/// A wheel mutated by its parts: one entry's bytes or name, or its `RECORD`, edited with
/// [`mutate`], or an entry dropped or doubled, then zipped again (stored or deflated). `None`
/// when the seed is not a readable zip.
fn mutate_wheel(rng: &mut fastrand::Rng, seed: &[u8], seeds: &Seeds) -> Option<Vec<u8>> {
    let mut entries = crate::wheels::unzip(seed, |_| true)?;
    let dict = WHEEL_DICT;
    let i = rng.usize(..entries.len());
    match rng.u8(0..6) {
        0 | 1 => mutate(rng, &mut entries[i].1, dict, seeds),
        2 => {
            let mut name = entries[i].0.clone().into_bytes();
            mutate(rng, &mut name, dict, seeds);
            entries[i].0 = String::from_utf8_lossy(&name).into_owned();
        }
        3 => {
            if let Some(record) = entries.iter_mut().find(|(n, _)| n.ends_with("/RECORD")) {
                mutate(rng, &mut record.1, dict, seeds);
            }
        }
        4 => {
            entries.remove(i);
        }
        _ => {
            let copy = entries[i].clone();
            entries.push(copy);
        }
    }
    let method = if rng.bool() {
        rawzip::CompressionMethod::STORE
    } else {
        rawzip::CompressionMethod::DEFLATE
    };
    // A doubled entry is written twice, which the reader must refuse.
    Some(crate::wheels::zip(&entries, method))
}

// ---------------------------------------------------------------------------------------------
// The driver.

const SEAL_DICT: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"\r",
    b"hostcb-seal:",
    b" format=1; ",
    b"format=2",
    b"ctk=13.0; ",
    b"ctk=all",
    b"content-sha256=",
    b"// ",
    b"# ",
    b"0000000000000000000000000000000000000000000000000000000000000000",
    b"\xff",
    b"\0",
];
const LOCK_DICT: &[&[u8]] = &[
    b"\n",
    b"target ",
    b"==",
    b"  ",
    b"\t",
    b"#",
    b"13.0",
    b"nvidia-cuda-runtime==13.0.96",
    b"libclang==18.1.1",
    b".whl",
    b"7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548",
    b"../",
    b"\xff",
];
const SUMMARY_DICT: &[&[u8]] = &[
    b"\n",
    b"\t",
    b"hostcb summary 13.0\n",
    b"driver\t",
    b"runtime\t",
    b" / ",
    b"\xe2\x9c\x93",
    b"99999",
    b"\r",
];
const PROVENANCE_DICT: &[&[u8]] = &[
    b"\n[summary]\nsha256 = \"",
    b"\"\n",
    b"[summary]",
    b"sha256 = ",
    b"ctk=12.9",
    b"hostcb-seal:",
    b"abababababababababababababababababababababababababababababababab",
    b"\n",
];
const WHEEL_DICT: &[&[u8]] = &[
    b"\n",
    b",",
    b"\"",
    b"sha256=",
    b",0\n",
    b"../",
    b"/",
    b"pkg/include/",
    b"pkg-1.0.dist-info/RECORD",
    b"PK\x03\x04",
    b"PK\x01\x02",
    b"\xff\xff\xff\xff",
    b"\0",
];

/// Runs one target: every seed, then mutated cases until the case count or the time is spent;
/// fails naming every finding.
fn fuzz(target: &str, corpus: &str, check: Check, dict: &[&[u8]], structured: bool) {
    let seeds = Seeds::load(corpus);
    let seed = std::env::var("HOSTCB_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0u64);
    let seconds: Option<f64> = std::env::var("HOSTCB_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut rng = fastrand::Rng::with_seed(seed ^ fxhash(target));

    // The watchdog: the input of the case in progress, and how many cases are done.
    let current = Arc::new(Mutex::new(Vec::<u8>::new()));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (current, done, stop) = (current.clone(), done.clone(), stop.clone());
        let target = target.to_owned();
        std::thread::spawn(move || {
            let (mut last, mut since) = (u64::MAX, Instant::now());
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let now = done.load(Ordering::Relaxed);
                if now != last {
                    (last, since) = (now, Instant::now());
                } else if since.elapsed() > HANG {
                    let input = current.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let path = finding(&target, &input);
                    eprintln!(
                        "fuzz {target}: a case ran for over {HANG:?} (a hang); its input is {}",
                        path.display()
                    );
                    std::process::abort();
                }
            }
        })
    };

    let mut findings = Vec::new();
    let run = |input: Vec<u8>, findings: &mut Vec<String>| {
        current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone_from(&input);
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| check(&input, &seeds)));
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(property)) => Some(property),
            Err(panic) => Some(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            )),
        };
        if let Some(failure) = failure {
            let path = finding(target, &input);
            findings.push(format!("{failure} (input: {})", path.display()));
        }
        done.fetch_add(1, Ordering::Relaxed);
    };

    for (_, bytes) in &seeds.files {
        run(bytes.clone(), &mut findings);
    }
    let started = Instant::now();
    let mut cases = 0u64;
    loop {
        match seconds {
            Some(s) if started.elapsed().as_secs_f64() >= s => break,
            None if cases >= SHORT_CASES => break,
            _ => {}
        }
        let (_, base) = &seeds.files[rng.usize(..seeds.files.len())];
        let input = match structured && rng.bool() {
            true => mutate_wheel(&mut rng, base, &seeds).unwrap_or_else(|| base.clone()),
            false => {
                let mut input = base.clone();
                mutate(&mut rng, &mut input, dict, &seeds);
                input
            }
        };
        run(input, &mut findings);
        cases += 1;
        if findings.len() >= 20 {
            break;
        }
    }
    let took = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    eprintln!(
        "fuzz {target}: {} seeds and {cases} cases (seed {seed}) in {took:.2} s: {:.0} cases/s, {} findings",
        seeds.files.len(),
        cases as f64 / took.max(1e-9),
        findings.len()
    );
    assert!(
        findings.is_empty(),
        "fuzz {target} (seed {seed}): {} findings:\n{}",
        findings.len(),
        findings.join("\n")
    );
}

/// A target name's hash, so that each target draws other numbers from one seed.
fn fxhash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Writes a failing input under `$CARGO_TARGET_TMPDIR/fuzz-findings/<target>/` and returns its
/// path (named by its SHA-256, so the same input is written once).
fn finding(target: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz-findings")
        .join(target);
    let path = dir.join(&sha256_hex(input)[..16]);
    let _ = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, input));
    path
}

#[test]
fn seal_lines_and_sealed_files() {
    fuzz("seal", "seal", check_seal, SEAL_DICT, false);
}

#[test]
fn sealing_round_trips() {
    fuzz(
        "seal-roundtrip",
        "seal",
        check_seal_roundtrip,
        SEAL_DICT,
        false,
    );
}

#[test]
fn the_summary_digest_of_a_sealed_provenance() {
    fuzz(
        "provenance",
        "provenance",
        check_provenance,
        PROVENANCE_DICT,
        false,
    );
}

#[test]
fn the_inputs_lock() {
    fuzz("lock", "lock", check_lock, LOCK_DICT, false);
}

#[test]
fn cached_summaries() {
    fuzz("summary", "summary", check_summary, SUMMARY_DICT, false);
}

#[test]
fn wheels_and_their_record() {
    fuzz("wheel", "wheel", check_wheel, WHEEL_DICT, true);
}
