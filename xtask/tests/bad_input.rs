//! Bad input to `cargo xtask`: each case must end with one clear `error:` line, a non-zero exit,
//! and nothing under `generated/` changed. The binary is run for real, with the real inputs.

mod fixture;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

fn workspace() -> PathBuf {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&dir).parent().unwrap().to_path_buf()
}

/// Every file under generated/ with its digest, to prove a failed run changed nothing.
fn snapshot() -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                let digest = Sha256::digest(std::fs::read(&p).unwrap());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                out.insert(p, hex);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&workspace().join("generated"), &mut out);
    out
}

/// Runs `cmd` to its end, or kills it and fails the test after `limit`: a hang is a failure, not
/// a stuck test run.
fn output_within(mut cmd: Command, limit: Duration) -> std::process::Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run xtask");
    let started = Instant::now();
    while child.try_wait().expect("wait for xtask").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still ran after {limit:?} (hung?); killed it. stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("collect xtask output")
}

/// Runs the xtask and returns its `error:` line; asserts the failure contract.
fn fails(args: &[&str], env: &[(&str, &str)]) -> String {
    let before = snapshot();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(args)
        .current_dir(workspace())
        .env("HOSTCB_INPUTS_CACHE", fixture::cache());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = output_within(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded:\n{stderr}");
    assert!(
        out.status.code() == Some(1) && !stderr.contains("panicked"),
        "{args:?} panicked or was killed ({}):\n{stderr}",
        out.status
    );
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors.len(),
        1,
        "{args:?}: expected one error line, got:\n{stderr}"
    );
    assert!(!errors[0].contains('\n'));
    assert_eq!(
        before,
        snapshot(),
        "{args:?} changed files under generated/"
    );
    eprintln!("{args:?} -> {}", errors[0]);
    errors[0].to_owned()
}

#[test]
fn unknown_targets_are_refused() {
    for bad in ["11.8", "14.0"] {
        let e = fails(&["regen", "--ctk", bad], &[]);
        assert!(
            e.contains(&format!(
                "CTK {bad} is not a target here: generator/targets.txt lists 12.9, 13.0 and 13.5"
            )),
            "{e}"
        );
        assert!(
            e.contains(&format!("pin it with cargo xtask pin --ctk {bad}")),
            "{e}"
        );
    }
    for bad in ["banana", "13", "13.x"] {
        let e = fails(&["regen", "--ctk", bad], &[]);
        assert!(
            e.contains(&format!(
                "'{bad}' is not a CTK target: write it as MAJOR.MINOR"
            )),
            "{e}"
        );
    }
}

/// `diff` takes any two pinned targets; anything else is refused naming every pinned one.
#[test]
fn diff_of_an_unknown_target_is_refused() {
    for args in [
        ["diff", "12.9", "11.8"],
        ["diff", "12.7", "13.5"],
        ["diff", "banana", "13.5"],
    ] {
        let bad = args[1..]
            .iter()
            .find(|a| **a != "12.9" && **a != "13.5")
            .unwrap();
        let e = fails(&args, &[]);
        assert!(
            e.contains(&format!(
                "'{bad}' is not a pinned CTK target: generator/inputs.lock pins 12.0, 12.1, 12.2, \
                 12.3, 12.4, 12.5, 12.6, 12.8, 12.9, 13.0, 13.1, 13.2, 13.3, 13.4 and 13.5; pick two"
            )),
            "{e}"
        );
    }
}

#[test]
fn cuda_home_without_cuda_h() {
    let dir = tempfile::tempdir().unwrap();
    let e = fails(
        &[
            "regen",
            "--ctk",
            "12.9",
            "--cuda-home",
            dir.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(e.contains("include/cuda.h"), "{e}");
}

/// A fake toolkit: an include/ folder with the headers' names and the given cuda.h.
fn fake_toolkit(cuda_h: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("include");
    std::fs::create_dir_all(inc.join("crt")).unwrap();
    std::fs::write(inc.join("cuda.h"), cuda_h).unwrap();
    for h in ["cuda_runtime_api.h", "cudaTypedefs.h", "crt/host_defines.h"] {
        std::fs::write(inc.join(h), "/* empty */\n").unwrap();
    }
    dir
}

#[test]
fn cuda_home_of_another_version() {
    let tk = fake_toolkit("#define CUDA_VERSION 12040\n");
    let e = fails(
        &[
            "regen",
            "--ctk",
            "12.9",
            "--cuda-home",
            tk.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(e.contains("12040") && e.contains("12.9"), "{e}");
}

#[test]
fn a_header_that_fails_to_parse() {
    let tk = fake_toolkit("#define CUDA_VERSION 12090\nthis is not C;\n");
    let e = fails(
        &[
            "regen",
            "--ctk",
            "12.9",
            "--cuda-home",
            tk.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(e.contains("could not parse"), "{e}");
}

#[test]
fn no_libclang_obtainable() {
    let e = fails(
        &["regen", "--ctk", "13.0"],
        &[("LIBCLANG_PATH", "/nonexistent/libclang")],
    );
    assert!(e.to_lowercase().contains("libclang"), "{e}");
}

#[test]
fn an_unwritable_output_directory() {
    let e = fails(
        &["regen", "--ctk", "13.0", "--out", "/nonexistent/out"],
        &[],
    );
    assert!(e.contains("/nonexistent/out"), "{e}");
    // A folder in which `src` is a file: creating src/bindings/ fails (also as root).
    let out = tempfile::tempdir().unwrap();
    std::fs::copy(
        workspace().join("generated/Cargo.toml"),
        out.path().join("Cargo.toml"),
    )
    .unwrap();
    std::fs::write(out.path().join("src"), "a file, not a folder").unwrap();
    let e = fails(
        &[
            "regen",
            "--ctk",
            "13.0",
            "--out",
            out.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(e.contains("cannot write"), "{e}");
}

/// A wheel whose bytes differ from the lock: pip is pointed (through its own environment
/// variables) at a folder holding a file of the locked name but other content.
#[test]
fn a_downloaded_package_whose_hash_differs_from_the_lock() {
    let cache = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    // The real runtime wheel (from the tests' fixture), so that only the crt wheel is wrong.
    fixture::copy_wheels(&["nvidia-cuda-runtime==13.0.96"], index.path());
    let name = "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";
    let mut zip = zip::ZipWriter::new(std::fs::File::create(index.path().join(name)).unwrap());
    zip.start_file::<_, ()>("nvidia/cu13/include/crt/host_defines.h", Default::default())
        .unwrap();
    zip.write_all(b"/* not the real header */\n").unwrap();
    zip.start_file::<_, ()>(
        "nvidia_cuda_crt-13.0.88.dist-info/METADATA",
        Default::default(),
    )
    .unwrap();
    zip.write_all(b"Metadata-Version: 2.1\nName: nvidia-cuda-crt\nVersion: 13.0.88\n")
        .unwrap();
    zip.start_file::<_, ()>(
        "nvidia_cuda_crt-13.0.88.dist-info/WHEEL",
        Default::default(),
    )
    .unwrap();
    zip.write_all(
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-manylinux2014_x86_64\n",
    )
    .unwrap();
    zip.start_file::<_, ()>(
        "nvidia_cuda_crt-13.0.88.dist-info/RECORD",
        Default::default(),
    )
    .unwrap();
    zip.finish().unwrap();
    let e = fails(
        &["regen", "--ctk", "13.0"],
        &[
            ("HOSTCB_INPUTS_CACHE", cache.path().to_str().unwrap()),
            ("PIP_NO_INDEX", "1"),
            ("PIP_FIND_LINKS", index.path().to_str().unwrap()),
        ],
    );
    assert!(e.contains("does not match the lock"), "{e}");
}

#[test]
fn cuda_home_needs_a_single_target() {
    let tk = fake_toolkit("#define CUDA_VERSION 12090\n");
    let e = fails(
        &[
            "regen",
            "--ctk",
            "all",
            "--cuda-home",
            tk.path().to_str().unwrap(),
        ],
        &[],
    );
    assert!(e.contains("--cuda-home"), "{e}");
}

/// Tampering with a sealed file: verify names the file and says it was edited.
#[test]
fn verify_catches_a_tampered_copy() {
    let out = tempfile::tempdir().unwrap();
    let src = workspace().join("generated/src/bindings/ctk_13_0/driver.rs");
    let copy = out.path().join("driver.rs");
    let text = std::fs::read_to_string(&src).unwrap();
    std::fs::write(
        &copy,
        text.replacen("cuLaunchHostFunc", "cuLaunchHostFunx", 1),
    )
    .unwrap();
    let e = fails(&["verify", out.path().to_str().unwrap()], &[]);
    assert!(e.contains("failed verification"), "{e}");
    let report = hostcb_seal::verify_paths(std::slice::from_ref(&copy)).unwrap();
    assert_eq!(report.failures.len(), 1);
    assert!(
        report.failures[0]
            .to_string()
            .contains("edited after sealing")
    );
}

/// Runs the xtask with `env`, asserting success, and returns its stderr.
fn succeeds(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(args)
        .current_dir(workspace())
        .env("HOSTCB_INPUTS_CACHE", fixture::cache());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run xtask");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?} failed:\n{stderr}");
    stderr
}

/// The wheels of target 13.0 and libclang.
const WHEELS_13_0: [&str; 3] = [
    "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "libclang-18.1.1-py2.py3-none-manylinux2010_x86_64.whl",
];

/// Copies the 13.0 wheels and libclang's ([`WHEELS_13_0`]) from the tests' fixture into `dir`.
fn copy_wheels(dir: &Path) {
    fixture::copy_wheels(&fixture::target_specs(hostcb_generator::Ctk::V13_0), dir);
    for w in WHEELS_13_0 {
        assert!(dir.join(w).is_file(), "the fixture lacks {w}");
    }
}

/// A tampered unpacked header is caught before bindgen reads it: the tree is unpacked again from
/// the hash-checked wheel (one warning line naming the file), so `check` still matches the
/// committed files, and editing the manifest to match the edit is caught too.
#[test]
fn a_tampered_unpacked_header_is_unpacked_again_not_sealed() {
    let cache = tempfile::tempdir().unwrap();
    copy_wheels(&cache.path().join("wheels"));
    let env = [("HOSTCB_INPUTS_CACHE", cache.path().to_str().unwrap())];
    succeeds(&["check", "--ctk", "13.0"], &env);
    let root = std::fs::read_dir(cache.path().join("unpacked"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("nvidia-cuda-runtime-13.0.96-")
        })
        .unwrap();
    let typedefs = root.join("nvidia/cu13/include/cudaTypedefs.h");
    let original = std::fs::read_to_string(&typedefs).unwrap();
    let tampered = original.replace(
        "PFN_cuLaunchHostFunc_v10000;",
        "PFN_cuLaunchHostFunc_v13010;",
    );
    let tampered = tampered.replace(
        "*PFN_cuLaunchHostFunc_v10000)",
        "*PFN_cuLaunchHostFunc_v13010)",
    );
    assert_ne!(tampered, original);

    for with_manifest in [false, true] {
        std::fs::write(&typedefs, &tampered).unwrap();
        if with_manifest {
            let manifest = root.join(".hostcb-manifest");
            let digest = Sha256::digest(tampered.as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            let text = std::fs::read_to_string(&manifest).unwrap();
            let edited: String = text
                .lines()
                .map(|l| {
                    if l.ends_with(" nvidia/cu13/include/cudaTypedefs.h") {
                        format!(
                            "{hex} {} nvidia/cu13/include/cudaTypedefs.h\n",
                            tampered.len()
                        )
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
            assert_ne!(edited, text);
            std::fs::write(&manifest, edited).unwrap();
        }
        let stderr = succeeds(&["check", "--ctk", "13.0"], &env);
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .collect();
        assert_eq!(warnings.len(), 1, "{stderr}");
        assert!(
            warnings[0].contains("nvidia/cu13/include/cudaTypedefs.h")
                && warnings[0].contains("unpacking it again from nvidia_cuda_runtime-13.0.96-"),
            "{stderr}"
        );
        assert!(
            stderr.contains("check: 8 generated files match"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(&typedefs).unwrap(), original);
    }
    // Intact now: a further run says nothing about the inputs.
    let stderr = succeeds(&["check", "--ctk", "13.0"], &env);
    assert!(
        !stderr.contains("warning:") && !stderr.contains("unpacking"),
        "{stderr}"
    );
}

/// A first run against an empty cache says what it downloads (name==version, size, where it is
/// cached) and unpacks, one line each; a second run, everything cached and intact, says nothing.
/// pip runs for real, pointed at a folder of the real wheels instead of PyPI.
#[test]
fn a_first_run_reports_each_download_and_a_second_run_is_quiet() {
    let cache = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    copy_wheels(index.path());
    let out = tempfile::tempdir().unwrap();
    std::fs::copy(
        workspace().join("generated/Cargo.toml"),
        out.path().join("Cargo.toml"),
    )
    .unwrap();
    let env = [
        ("HOSTCB_INPUTS_CACHE", cache.path().to_str().unwrap()),
        ("PIP_FIND_LINKS", index.path().to_str().unwrap()),
    ];
    let args = [
        "regen",
        "--ctk",
        "13.0",
        "--out",
        out.path().to_str().unwrap(),
    ];
    let first = succeeds(&args, &env);
    let wheels = cache.path().join("wheels");
    for (spec, file) in [
        ("nvidia-cuda-runtime==13.0.96", WHEELS_13_0[0]),
        ("nvidia-cuda-crt==13.0.88", WHEELS_13_0[1]),
        ("libclang==18.1.1", WHEELS_13_0[2]),
    ] {
        let size = std::fs::metadata(wheels.join(file)).unwrap().len();
        let starting = format!("downloading {spec} ({file}) into {}", wheels.display());
        let done = format!(
            "downloaded {spec}: {:.1} MB ({size} bytes), cached as {}",
            size as f64 / 1e6,
            wheels.join(file).display()
        );
        let lines: Vec<&str> = first.lines().collect();
        let at = lines.iter().position(|l| *l == starting);
        let then = lines.iter().position(|l| *l == done);
        assert!(
            at.is_some() && then > at,
            "{starting} / {done} in:\n{first}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("unpacking ") && l.contains(&format!(" of {file} into "))),
            "{first}"
        );
    }
    let second = succeeds(&args, &env);
    for word in ["downloading", "downloaded", "unpacking", "warning:"] {
        assert!(!second.contains(word), "second run said {word}:\n{second}");
    }
}

/// A header of `--cuda-home` that is a FIFO (a real one, from mkfifo) is refused by name, never
/// opened: not `cuda.h`, `cuda_runtime_api.h` or `cudaTypedefs.h`, nor a header they include,
/// which clang would open and block on. `fails` kills a run that hangs.
#[test]
fn cuda_home_headers_that_are_fifos() {
    for fifo in [
        "cuda.h",
        "cuda_runtime_api.h",
        "cudaTypedefs.h",
        "crt/host_defines.h",
        "driver_types.h",
    ] {
        let tk = fake_toolkit("#define CUDA_VERSION 12090\n");
        let inc = tk.path().join("include");
        std::fs::write(
            inc.join("cuda_runtime_api.h"),
            "#include \"driver_types.h\"\n",
        )
        .unwrap();
        let path = inc.join(fifo);
        let _ = std::fs::remove_file(&path);
        let made = Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("run mkfifo");
        assert!(made.success());
        let e = fails(
            &[
                "regen",
                "--ctk",
                "12.9",
                "--cuda-home",
                tk.path().to_str().unwrap(),
            ],
            &[],
        );
        assert!(
            e.contains(&format!("{} is a FIFO, not a regular file", path.display())),
            "{e}"
        );
    }
}

/// `LIBCLANG_PATH` naming a folder that exists but holds no libclang: one error line, exit 1,
/// before bindgen (which panics, exit 101). A folder holding the real library under a versioned
/// name works, and provenance records that file's SHA-256.
#[test]
fn libclang_path_without_a_libclang() {
    let empty = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    std::fs::copy(
        workspace().join("generated/Cargo.toml"),
        out.path().join("Cargo.toml"),
    )
    .unwrap();
    let out_arg = out.path().to_str().unwrap();
    let e = fails(
        &["regen", "--ctk", "13.0", "--out", out_arg],
        &[("LIBCLANG_PATH", empty.path().to_str().unwrap())],
    );
    assert!(
        e.contains(&format!(
            "LIBCLANG_PATH={} holds no libclang that clang-sys can load",
            empty.path().display()
        )),
        "{e}"
    );

    use hostcb_generator::inputs::{Fetcher, LOCK_PATH, Lock, Pip};
    let lock = Lock::load(&workspace().join(LOCK_PATH)).unwrap();
    let pinned = Fetcher::new(lock, Box::new(Pip::default()))
        .libclang(&fixture::cache())
        .unwrap()
        .library;
    let versioned = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&pinned, versioned.path().join("libclang.so.18")).unwrap();
    let stderr = succeeds(
        &["regen", "--ctk", "13.0", "--out", out_arg],
        &[("LIBCLANG_PATH", versioned.path().to_str().unwrap())],
    );
    assert!(stderr.contains("warning: LIBCLANG_PATH="), "{stderr}");
    let provenance =
        std::fs::read_to_string(out.path().join("src/bindings/ctk_13_0/provenance.toml")).unwrap();
    let digest = Sha256::digest(std::fs::read(&pinned).unwrap());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert!(provenance.contains(&hex), "{provenance}");
    assert!(!provenance.contains("sha256 = \"unknown\""), "{provenance}");
}

// `cargo xtask pin` against a hostile package index. The index is a PEP 503 simple index in a
// temporary folder, served to the real pip as a `file://` URL (pip reads `data-yanked` and the
// `#sha256=` of each link there as it does from PyPI); its wheels are the real 13.0 wheels, or
// copies of them edited here. pin runs in a copy of the workspace's data (so a pin that succeeds
// rewrites that copy's lock, never this checkout's) with its own input cache.

/// The real 13.0 header wheels (and libclang's), from the tests' fixture.
fn real_13_0_wheels() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_wheels(dir.path());
    dir
}

/// The entries of a zip, in order.
fn zip_entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut e = zip.by_index(i).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
            (e.name().unwrap().into_owned(), bytes)
        })
        .collect()
}

fn record_hash(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let digest = Sha256::digest(bytes);
    let mut out = String::new();
    for chunk in digest.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A RECORD that tells the truth about `entries` (all but RECORD itself).
fn honest_record(entries: &[(String, Vec<u8>)], record: &str) -> Vec<u8> {
    let mut out = String::new();
    for (name, bytes) in entries.iter().filter(|(n, _)| n != record) {
        out.push_str(&format!(
            "{name},sha256={},{}\n",
            record_hash(bytes),
            bytes.len()
        ));
    }
    out.push_str(&format!("{record},,\n"));
    out.into_bytes()
}

/// A copy of the real wheel `src` as version `version` (dist-info, METADATA and a true RECORD),
/// then changed by `edit` (which may also lie in RECORD), written into `dir`; returns its path.
fn respin(
    src: &Path,
    dir: &Path,
    version: &str,
    edit: impl FnOnce(&mut Vec<(String, Vec<u8>)>),
) -> PathBuf {
    let name = src.file_name().unwrap().to_str().unwrap();
    let old = name.split('-').nth(1).unwrap();
    let mut entries: Vec<(String, Vec<u8>)> = zip_entries(src)
        .into_iter()
        .map(|(n, mut bytes)| {
            let n = n.replace(
                &format!("-{old}.dist-info/"),
                &format!("-{version}.dist-info/"),
            );
            if n.ends_with(".dist-info/METADATA") {
                let text = String::from_utf8(bytes).unwrap();
                bytes = text
                    .replace(
                        &format!("Version: {old}\n"),
                        &format!("Version: {version}\n"),
                    )
                    .into_bytes();
            }
            (n, bytes)
        })
        .collect();
    let record = entries
        .iter()
        .map(|(n, _)| n.clone())
        .find(|n| n.ends_with(".dist-info/RECORD"))
        .unwrap();
    let honest = honest_record(&entries, &record);
    entries.iter_mut().find(|(n, _)| *n == record).unwrap().1 = honest;
    edit(&mut entries);
    let path = dir.join(name.replace(&format!("-{old}-"), &format!("-{version}-")));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    for (n, bytes) in &entries {
        zip.start_file(n.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

/// Rewrites the RECORD of `entries` with `f` applied to its text.
fn edit_record(entries: &mut [(String, Vec<u8>)], f: impl FnOnce(String) -> String) {
    let (_, bytes) = entries
        .iter_mut()
        .find(|(n, _)| n.ends_with(".dist-info/RECORD"))
        .unwrap();
    *bytes = f(String::from_utf8(std::mem::take(bytes)).unwrap()).into_bytes();
}

/// Edits the `cuda.h` of `entries` with `f`.
fn edit_cuda_h(entries: &mut [(String, Vec<u8>)], f: impl FnOnce(&mut Vec<u8>)) {
    let (_, bytes) = entries
        .iter_mut()
        .find(|(n, _)| n.ends_with("/include/cuda.h"))
        .unwrap();
    f(bytes);
}

/// A PEP 503 simple index in a folder: `simple/<project>/index.html` linking each wheel.
struct Index {
    dir: tempfile::TempDir,
    links: BTreeMap<String, Vec<String>>,
}

impl Index {
    fn new() -> Self {
        Index {
            dir: tempfile::tempdir().unwrap(),
            links: BTreeMap::new(),
        }
    }

    /// Serves `wheel` under project `project`, yanked with the reason given.
    fn add(&mut self, project: &str, wheel: &Path, yanked: Option<&str>) {
        let files = self.dir.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        let name = wheel.file_name().unwrap().to_str().unwrap();
        let served = files.join(name);
        if wheel != served {
            std::fs::copy(wheel, &served).unwrap();
        }
        let digest = Sha256::digest(std::fs::read(&served).unwrap());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        let url = format!("file://{}", served.display()).replace('+', "%2B");
        let yanked = yanked.map_or(String::new(), |r| format!(" data-yanked=\"{r}\""));
        self.links
            .entry(project.to_owned())
            .or_default()
            .push(format!(
                "<a href=\"{url}#sha256={hex}\"{yanked}>{name}</a><br/>"
            ));
        let page = self.dir.path().join("simple").join(project);
        std::fs::create_dir_all(&page).unwrap();
        std::fs::write(
            page.join("index.html"),
            format!(
                "<!DOCTYPE html><html><body>\n{}\n</body></html>\n",
                self.links[project].join("\n")
            ),
        )
        .unwrap();
    }

    fn url(&self) -> String {
        format!("file://{}/simple/", self.dir.path().display())
    }

    /// The files of the wheels it serves.
    fn files(&self) -> PathBuf {
        self.dir.path().join("files")
    }
}

/// An index serving the real 13.0 wheels (and `extra` more runtime wheels, made from the real one).
fn index_13_0(real: &Path, extra: &[(&Path, Option<&str>)]) -> Index {
    let mut index = Index::new();
    index.add("nvidia-cuda-runtime", &real.join(WHEELS_13_0[0]), None);
    index.add("nvidia-cuda-crt", &real.join(WHEELS_13_0[1]), None);
    for (wheel, yanked) in extra {
        index.add("nvidia-cuda-runtime", wheel, *yanked);
    }
    index
}

/// A copy of the workspace's data that pin reads and writes (the workspace manifest, allow-lists,
/// lock and target list), and an input cache holding the real 13.0 wheels.
struct PinCheckout {
    root: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl PinCheckout {
    fn new(real: &Path) -> Self {
        let root = tempfile::tempdir().unwrap();
        let here = workspace();
        std::fs::copy(here.join("Cargo.toml"), root.path().join("Cargo.toml")).unwrap();
        let allow = root.path().join("generator/allowlist");
        std::fs::create_dir_all(&allow).unwrap();
        for e in std::fs::read_dir(here.join("generator/allowlist")).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, allow.join(p.file_name().unwrap())).unwrap();
        }
        for f in ["generator/inputs.lock", "generator/targets.txt"] {
            std::fs::copy(here.join(f), root.path().join(f)).unwrap();
        }
        // The configuration the xtask loads once holds the templates too.
        let templates = root.path().join("templates");
        std::fs::create_dir_all(&templates).unwrap();
        for e in std::fs::read_dir(here.join("templates")).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, templates.join(p.file_name().unwrap())).unwrap();
        }
        let cache = tempfile::tempdir().unwrap();
        let wheels = cache.path().join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        for w in &WHEELS_13_0[..2] {
            std::fs::copy(real.join(w), wheels.join(w)).unwrap();
        }
        PinCheckout { root, cache }
    }

    fn lock(&self) -> String {
        std::fs::read_to_string(self.root.path().join("generator/inputs.lock")).unwrap()
    }

    /// Runs `cargo xtask pin --ctk 13.0` (and `extra` arguments) with pip pointed at `index`.
    fn pin(&self, index: &str, extra: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
        cmd.args(["pin", "--ctk", "13.0"])
            .args(extra)
            .current_dir(self.root.path())
            .env_remove("CARGO_MANIFEST_DIR")
            .env_remove("PIP_FIND_LINKS")
            .env("PIP_INDEX_URL", index)
            .env("PIP_NO_CACHE_DIR", "1")
            .env("HOSTCB_INPUTS_CACHE", self.cache.path());
        output_within(cmd, Duration::from_secs(120))
    }

    /// Runs pin and asserts that it failed with one `error:` line and changed neither the lock nor
    /// the cached wheels; returns the line.
    fn refused(&self, index: &str) -> String {
        let lock = self.lock();
        let cached = self.cached();
        let out = self.pin(index, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "pin did not fail:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(
            !errors[0].contains("do not hold usable headers")
                || errors[0].matches(": ").count() > 1,
            "the cause is dropped: {}",
            errors[0]
        );
        assert_eq!(self.lock(), lock, "pin changed the lock:\n{stderr}");
        assert_eq!(
            self.cached(),
            cached,
            "pin changed the cached wheels:\n{stderr}"
        );
        eprintln!("pin -> {}", errors[0]);
        errors[0].to_owned()
    }

    /// The cached wheels with their digests.
    fn cached(&self) -> BTreeMap<String, String> {
        std::fs::read_dir(self.cache.path().join("wheels"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| {
                let digest = Sha256::digest(std::fs::read(&p).unwrap());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                (p.file_name().unwrap().to_string_lossy().into_owned(), hex)
            })
            .collect()
    }
}

/// A version the lock holds, served with other bytes under its real file name, is refused naming
/// both hashes, and neither the lock nor the good cached wheel changes; `--repin` accepts it.
#[test]
fn pin_refuses_new_bytes_for_a_locked_version() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let evil = tempfile::tempdir().unwrap();
    let tampered = respin(
        &real.path().join(WHEELS_13_0[0]),
        evil.path(),
        "13.0.96",
        |e| {
            let (_, typedefs) = e
                .iter_mut()
                .find(|(n, _)| n.ends_with("/cudaTypedefs.h"))
                .unwrap();
            let text = String::from_utf8(std::mem::take(typedefs)).unwrap();
            *typedefs = text
                .replace("PFN_cuLaunchHostFunc_v10000", "PFN_cuLaunchHostFunc_v13010")
                .into_bytes();
            let honest = honest_record(e, "nvidia_cuda_runtime-13.0.96.dist-info/RECORD");
            edit_record(e, |_| String::from_utf8(honest).unwrap());
        },
    );
    let mut index = Index::new();
    index.add("nvidia-cuda-runtime", &tampered, None);
    index.add("nvidia-cuda-crt", &real.path().join(WHEELS_13_0[1]), None);
    let good = ws.cached()[WHEELS_13_0[0]].clone();
    let bad = ws.cached_digest_of(&tampered);
    let e = ws.refused(&index.url());
    assert!(
        e.contains("nvidia-cuda-runtime==13.0.96 is locked as")
            && e.contains(&good)
            && e.contains(&bad),
        "{e}"
    );
    assert!(e.contains("--repin"), "{e}");

    let out = ws.pin(&index.url(), &["--repin"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        ws.lock().contains(&bad) && !ws.lock().contains(&good),
        "{stderr}"
    );
    assert_eq!(ws.cached()[WHEELS_13_0[0]], bad);
}

impl PinCheckout {
    fn cached_digest_of(&self, path: &Path) -> String {
        let digest = Sha256::digest(std::fs::read(path).unwrap());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Wheels that lie about themselves, served as a newer 13.0 release: each is refused with one
/// line naming what is wrong, and the lock and cache stay as they were.
#[test]
fn pin_refuses_wheels_that_break_their_record() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let runtime = real.path().join(WHEELS_13_0[0]);
    let dir = tempfile::tempdir().unwrap();
    type Edit = Box<dyn FnOnce(&mut Vec<(String, Vec<u8>)>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "RECORD lies about a size",
            Box::new(|e| {
                edit_record(e, |r| {
                    r.lines()
                        .map(|l| {
                            if l.contains("/include/cuda.h,") {
                                let (head, size) = l.rsplit_once(',').unwrap();
                                format!("{head},{}\n", size.parse::<u64>().unwrap() + 1)
                            } else {
                                format!("{l}\n")
                            }
                        })
                        .collect()
                })
            }),
            "its RECORD says nvidia/cu13/include/cuda.h has",
        ),
        (
            "RECORD omits an edited file",
            Box::new(|e| {
                edit_cuda_h(e, |b| b.extend_from_slice(b"\n#define EVIL 1\n"));
                edit_record(e, |r| {
                    r.lines()
                        .filter(|l| !l.contains("/include/cuda.h,"))
                        .map(|l| format!("{l}\n"))
                        .collect()
                })
            }),
            "its RECORD does not list nvidia/cu13/include/cuda.h",
        ),
        (
            "RECORD is missing",
            Box::new(|e| e.retain(|(n, _)| !n.ends_with(".dist-info/RECORD"))),
            "it has no *.dist-info/RECORD",
        ),
        (
            "RECORD lists a file twice",
            Box::new(|e| {
                edit_record(e, |r| {
                    let line = r.lines().find(|l| l.contains("/include/cuda.h,")).unwrap();
                    format!("{r}{line}\n")
                })
            }),
            "its RECORD lists nvidia/cu13/include/cuda.h twice",
        ),
        (
            "an edited file whose RECORD line keeps the old hash",
            Box::new(|e| edit_cuda_h(e, |b| b[0] ^= 1)),
            "its entry nvidia/cu13/include/cuda.h does not match its own RECORD",
        ),
    ];
    // Every case runs; the failure lists each one that got through.
    let tries = cases.len();
    let mut escaped = Vec::new();
    for (i, (what, edit, want)) in cases.into_iter().enumerate() {
        let sub = dir.path().join(i.to_string());
        std::fs::create_dir_all(&sub).unwrap();
        let wheel = respin(&runtime, &sub, "13.0.99", edit);
        let index = index_13_0(real.path(), &[(&wheel, None)]);
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let e = ws.refused(&index.url());
            assert!(e.contains(want), "{what}: {e}");
        }));
        if refused.is_err() {
            escaped.push(what);
        }
    }
    assert!(
        escaped.is_empty(),
        "{} of {tries} got through: {escaped:?}",
        escaped.len()
    );
}

/// A zip holding two entries of one name (python's zipfile writes that; the zip crate would read
/// the last one only): refused.
#[test]
fn pin_refuses_a_zip_with_a_name_twice() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let dir = tempfile::tempdir().unwrap();
    let wheel = respin(
        &real.path().join(WHEELS_13_0[0]),
        dir.path(),
        "13.0.99",
        |_| {},
    );
    let script = "import sys, zipfile, warnings\nwarnings.simplefilter('ignore')\nz = zipfile.ZipFile(sys.argv[1], 'a')\nz.writestr('nvidia/cu13/include/cuda.h', '#define CUDA_VERSION 13000\\n')\nz.close()\n";
    let ok = Command::new("python3")
        .args(["-c", script])
        .arg(&wheel)
        .status()
        .unwrap();
    assert!(ok.success());
    let index = index_13_0(real.path(), &[(&wheel, None)]);
    let e = ws.refused(&index.url());
    assert!(e.contains("two zip entries of one name"), "{e}");
}

/// A wheel that decompresses beyond the cap (1 GiB), all of it declared honestly: refused before
/// anything is decompressed.
#[test]
fn pin_refuses_a_wheel_beyond_the_size_cap() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let dir = tempfile::tempdir().unwrap();
    let wheel = respin(
        &real.path().join(WHEELS_13_0[0]),
        dir.path(),
        "13.0.99",
        |e| {
            e.push((
                "nvidia/cu13/include/zeros.h".to_owned(),
                vec![0u8; (1 << 30) + (64 << 20)],
            ));
            let honest = honest_record(e, "nvidia_cuda_runtime-13.0.99.dist-info/RECORD");
            edit_record(e, |_| String::from_utf8(honest).unwrap());
        },
    );
    let index = index_13_0(real.path(), &[(&wheel, None)]);
    let started = Instant::now();
    let e = ws.refused(&index.url());
    assert!(e.contains("more than the cap of 1073741824 bytes"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// A local version (`+evil`) and a newer version the index marks yanked are passed over: pin
/// says what it skipped and pins the newest real release, which the lock holds already.
#[test]
fn pin_skips_local_and_yanked_versions() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let dir = tempfile::tempdir().unwrap();
    let runtime = real.path().join(WHEELS_13_0[0]);
    let yanked = respin(&runtime, dir.path(), "13.0.99", |e| {
        edit_cuda_h(e, |b| b.extend_from_slice(b"\n#define YANKED 1\n"));
        let honest = honest_record(e, "nvidia_cuda_runtime-13.0.99.dist-info/RECORD");
        edit_record(e, |_| String::from_utf8(honest).unwrap());
    });
    let local = respin(&runtime, dir.path(), "13.0.97+evil", |_| {});
    let index = index_13_0(
        real.path(),
        &[(&yanked, Some("broken build")), (&local, None)],
    );
    let lock = ws.lock();
    let out = ws.pin(&index.url(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("pin: skipped nvidia-cuda-runtime 13.0.97+evil: a local version"),
        "{stderr}"
    );
    assert!(
        stderr.contains("CTK 13.0 already pinned to these"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "pin: skipped nvidia-cuda-runtime 13.0.99: newer, but the index marks it yanked"
        ),
        "{stderr}"
    );
    assert_eq!(ws.lock(), lock);
}

/// Headers of another CUDA version: the refusal prints the cause, not only "do not hold usable
/// headers".
#[test]
fn pin_prints_the_cause_of_unusable_headers() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let dir = tempfile::tempdir().unwrap();
    let wheel = respin(
        &real.path().join(WHEELS_13_0[0]),
        dir.path(),
        "13.0.99",
        |e| {
            edit_cuda_h(e, |b| {
                let text = String::from_utf8(std::mem::take(b)).unwrap();
                *b = text
                    .replace("#define CUDA_VERSION 13000", "#define CUDA_VERSION 13010")
                    .into_bytes();
            });
            let honest = honest_record(e, "nvidia_cuda_runtime-13.0.99.dist-info/RECORD");
            edit_record(e, |_| String::from_utf8(honest).unwrap());
        },
    );
    let index = index_13_0(real.path(), &[(&wheel, None)]);
    let e = ws.refused(&index.url());
    assert!(
        e.contains("the newest wheels of CTK 13.0 do not hold usable headers: the pinned headers")
            && e.contains("is CUDA 13.1 (CUDA_VERSION 13010)"),
        "{e}"
    );
}

/// An index that cannot be reached: pin says so, not that the index has no release.
#[test]
fn pin_says_when_the_index_is_unreachable() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = ws.refused(&format!("http://127.0.0.1:{port}/simple/"));
    assert!(e.contains("the package index is unreachable"), "{e}");
    assert!(!e.contains("has no"), "{e}");
}

/// What a killed pin leaves (its folder in the cache, the lock's temporary copy) is deleted by
/// the next pin: one killed for real while it downloads, and leftovers of both kinds laid out.
#[test]
fn pin_deletes_what_a_killed_pin_left() {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let index = index_13_0(real.path(), &[]);
    let pins = || -> Vec<String> {
        std::fs::read_dir(ws.cache.path().join("wheels"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".pin-"))
            .collect()
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["pin", "--ctk", "13.0"])
        .current_dir(ws.root.path())
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("PIP_FIND_LINKS")
        .env("PIP_INDEX_URL", index.url())
        .env("HOSTCB_INPUTS_CACHE", ws.cache.path())
        .stderr(Stdio::null());
    // Its own process group, killed whole (pip with it), as a terminal's kill does.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().unwrap();
    let started = Instant::now();
    while pins().is_empty() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let killed = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap();
    assert_eq!(pins().len(), 1, "the killed pin left no folder to clean up");
    let left = ws.cache.path().join("wheels/.pin-killed");
    std::fs::create_dir_all(left.join("downloads")).unwrap();
    std::fs::write(left.join("downloads/x.whl"), "partial").unwrap();
    let lock_tmp = ws.root.path().join("generator/.inputs.lock.pin-killed");
    std::fs::write(&lock_tmp, "partial").unwrap();
    let out = ws.pin(&index.url(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!left.exists(), "the killed pin's folder is still there");
    assert!(
        !lock_tmp.exists(),
        "the killed pin's lock copy is still there"
    );
    let leftovers: Vec<_> = std::fs::read_dir(ws.cache.path().join("wheels"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n != ".lock")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = index.files();
}

/// Runs the xtask with `args` and `env` inside a new user and mount namespace (`unshare -rm`,
/// no root needed where unprivileged namespaces are allowed) with a `size` tmpfs mounted on
/// `dir`; `None` where namespaces are not allowed here.
fn on_a_small_disk(
    dir: &Path,
    size: &str,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Option<std::process::Output> {
    let probe = Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$0\""])
        .arg(dir)
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let mut cmd = Command::new("unshare");
    cmd.args([
        "-rm",
        "sh",
        "-c",
        &format!("mount -t tmpfs -o size={size} tmpfs \"$0\" && shift && exec \"$@\""),
    ])
    .arg(dir)
    .arg("--")
    .arg(env!("CARGO_BIN_EXE_xtask"))
    .args(args)
    .current_dir(cwd)
    .env_remove("PIP_FIND_LINKS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Some(output_within(cmd, Duration::from_secs(120)))
}

/// A full disk under the input cache is named as such, by regen (not "set LIBCLANG_PATH") and by
/// pin (not "the newest wheels do not hold usable headers"). Needs a user namespace to mount a
/// small tmpfs; where none is allowed, it says SKIP and checks nothing.
#[test]
fn a_full_disk_is_named_as_such() {
    let real = real_13_0_wheels();
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    std::fs::copy(
        workspace().join("generated/Cargo.toml"),
        out.path().join("Cargo.toml"),
    )
    .unwrap();
    // The header wheels and their trees (about 10 MB) fit in 16 MB, libclang's 24 MB does not.
    let Some(regen) = on_a_small_disk(
        cache.path(),
        "16m",
        &workspace(),
        &[
            "regen",
            "--ctk",
            "13.0",
            "--out",
            out.path().to_str().unwrap(),
        ],
        &[
            ("HOSTCB_INPUTS_CACHE", cache_arg),
            ("PIP_NO_INDEX", "1"),
            ("PIP_FIND_LINKS", real.path().to_str().unwrap()),
        ],
    ) else {
        eprintln!("SKIP: a_full_disk_is_named_as_such: no user namespace to mount a small disk in");
        return;
    };
    let stderr = String::from_utf8_lossy(&regen.stderr);
    assert_eq!(regen.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("the disk is full") && errors[0].contains("libclang"),
        "{stderr}"
    );
    assert!(!errors[0].contains("LIBCLANG_PATH"), "{stderr}");
    eprintln!("regen -> {}", errors[0]);

    let ws = PinCheckout::new(real.path());
    let index = index_13_0(real.path(), &[]);
    let pin = on_a_small_disk(
        ws.cache.path(),
        "1m",
        ws.root.path(),
        &["pin", "--ctk", "13.0"],
        &[
            ("HOSTCB_INPUTS_CACHE", ws.cache.path().to_str().unwrap()),
            ("PIP_INDEX_URL", &index.url()),
        ],
    )
    .unwrap();
    let stderr = String::from_utf8_lossy(&pin.stderr);
    assert_eq!(pin.status.code(), Some(1), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("the disk is full"), "{stderr}");
    eprintln!("pin -> {}", errors[0]);
}

/// Offline (the index refuses connections) with a cached wheel of other bytes than the lock's:
/// regen names the hash mismatch, not only pip's "No matching distribution found".
#[test]
fn offline_with_a_stale_cached_wheel_names_the_mismatch() {
    let cache = tempfile::tempdir().unwrap();
    copy_wheels(&cache.path().join("wheels"));
    let stale = cache.path().join("wheels").join(WHEELS_13_0[1]);
    std::fs::write(&stale, "not the pinned wheel").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let index = format!("http://127.0.0.1:{port}/simple/");
    let e = fails(
        &["check", "--ctk", "13.0"],
        &[
            ("HOSTCB_INPUTS_CACHE", cache.path().to_str().unwrap()),
            ("PIP_INDEX_URL", &index),
            ("PIP_FIND_LINKS", ""),
        ],
    );
    assert!(
        e.contains(&format!("{}: the cached wheel (sha256 ", stale.display()))
            && e.contains("does not match the lock")
            && e.contains("the package index is unreachable"),
        "{e}"
    );
    assert_eq!(std::fs::read(&stale).unwrap(), b"not the pinned wheel");
}
