//! Bad input to `cargo xtask`: each case must end with one clear `error:` line, a non-zero exit,
//! and nothing under `generated/` changed. The binary is run for real, with the real inputs.

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
    cmd.args(args).current_dir(workspace());
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
    // The real runtime wheel (from the shared input cache, or PyPI), so that only the crt wheel
    // is wrong.
    let runtime =
        "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";
    let cached = workspace()
        .join("target/hostcb-inputs/wheels")
        .join(runtime);
    if std::fs::copy(&cached, index.path().join(runtime)).is_err() {
        let ok = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
            ])
            .args(["--platform", "manylinux2014_x86_64", "-d"])
            .arg(index.path())
            .arg("nvidia-cuda-runtime==13.0.96")
            .status()
            .expect("run pip");
        assert!(
            ok.success(),
            "pip could not fetch nvidia-cuda-runtime==13.0.96"
        );
    }
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
    cmd.args(args).current_dir(workspace());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run xtask");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?} failed:\n{stderr}");
    stderr
}

/// The wheels of target 13.0 and libclang, from this checkout's input cache when it has them.
const WHEELS_13_0: [&str; 3] = [
    "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "libclang-18.1.1-py2.py3-none-manylinux2010_x86_64.whl",
];

/// Copies the cached 13.0 wheels into `dir` (pip fetches any that are missing).
fn copy_wheels(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for w in WHEELS_13_0 {
        let _ = std::fs::copy(
            workspace().join("target/hostcb-inputs/wheels").join(w),
            dir.join(w),
        );
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
            stderr.contains("check: 7 generated files match"),
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

    let pinned = hostcb_generator::inputs::Fetcher::committed()
        .unwrap()
        .libclang(&workspace().join("target/hostcb-inputs"))
        .unwrap()
        .dir
        .join("libclang.so");
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
