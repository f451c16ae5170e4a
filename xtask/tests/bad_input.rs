//! Bad input to `cargo xtask`: each case must end with one clear `error:` line (the last line),
//! exit status 1 (no panic), and nothing lost: no file under this checkout's `generated/`
//! changed, nor what else the case must keep (the lock, the cached wheels). The binary is run for
//! real, with the real inputs.
//!
//! Most cases are rows of two tables, each row a test of its own: [`refused`] runs the xtask in
//! this checkout with one thing made wrong, [`pin_refused`] serves `cargo xtask pin` a newer 13.0
//! runtime wheel with one thing made wrong. The tests after them check runs that meet bad input
//! they repair, skip or clean up after.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::{
    changed, copy_wheels, crate_folder, crate_folder_listing, files_under, libclang_library,
    listed_specs, listing_copy, mkfifo, one_error, output_within, sha256_hex, succeeds,
    target_specs, the_one_error, workspace, workspace_copy, xtask,
};

// ---- The xtask in this checkout, one thing made wrong.

/// One thing made wrong, and the error line it must give.
struct Bad {
    /// The command line. In every string of a case, `{dir}` stands for the case's scratch folder.
    args: &'static [&'static str],
    /// Environment variables of the run; `{unreachable}` is the URL of a package index that
    /// refuses connections.
    env: &'static [(&'static str, &'static str)],
    /// What is made wrong in the scratch folder before the run.
    setup: fn(&Path),
    /// Every piece the one `error:` line must hold.
    error: &'static [&'static str],
    /// What else must hold afterwards (nothing lost), given the scratch folder.
    after: fn(&Path),
}

impl Bad {
    /// The fields a case leaves out: no environment, nothing made or checked in the scratch folder.
    const PLAIN: Bad = Bad {
        args: &[],
        env: &[],
        setup: |_| {},
        error: &[],
        after: |_| {},
    };
}

/// Runs the xtask in this checkout as `case` says and checks the failure contract: exit status 1,
/// one `error:` line holding each piece of `case.error`, within a minute (a hang is a failure),
/// and no file under `generated/` changed.
fn refused(case: Bad) {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    (case.setup)(dir);
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("http://127.0.0.1:{port}/simple/");
    let fill = |text: &str| {
        text.replace("{dir}", dir.to_str().unwrap())
            .replace("{unreachable}", &unreachable)
    };
    let args: Vec<String> = case.args.iter().map(|a| fill(a)).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = xtask(&workspace(), &args);
    for (name, value) in case.env {
        cmd.env(name, fill(value));
    }
    let generated = workspace().join("generated");
    let before = files_under(&generated);
    let error = one_error(&mut cmd, Duration::from_secs(60));
    let changed = changed(&before, &files_under(&generated));
    assert!(
        changed.is_empty(),
        "{args:?} changed files under generated/: {changed:?}"
    );
    for piece in case.error {
        let piece = fill(piece);
        assert!(
            error.contains(&piece),
            "{args:?}: the error line does not say {piece:?}:\n{error}"
        );
    }
    (case.after)(dir);
    eprintln!("{args:?} -> {error}");
}

/// Makes a test of each row: `name: Bad { .. };`.
macro_rules! refused {
    ($($(#[doc = $doc:literal])* $name:ident: $case:expr;)*) => {
        $(
            $(#[doc = $doc])*
            #[test]
            fn $name() {
                refused($case);
            }
        )*
    };
}

/// A fake toolkit in `dir`: an include/ folder with the headers' names and the given cuda.h.
fn fake_toolkit(dir: &Path, cuda_h: &str) {
    let inc = dir.join("include");
    std::fs::create_dir_all(inc.join("crt")).unwrap();
    std::fs::write(inc.join("cuda.h"), cuda_h).unwrap();
    for h in ["cuda_runtime_api.h", "cudaTypedefs.h", "crt/host_defines.h"] {
        std::fs::write(inc.join(h), "/* empty */\n").unwrap();
    }
}

/// A fake 12.9 toolkit in `dir` whose `cuda_runtime_api.h` includes `driver_types.h`, with a
/// real FIFO (from mkfifo) in place of its header `fifo`. The xtask must refuse it by name,
/// never open it: clang would block on it (the runner kills a run that hangs).
fn toolkit_with_a_fifo(dir: &Path, fifo: &str) {
    fake_toolkit(dir, "#define CUDA_VERSION 12090\n");
    let inc = dir.join("include");
    std::fs::write(
        inc.join("cuda_runtime_api.h"),
        "#include \"driver_types.h\"\n",
    )
    .unwrap();
    mkfifo(&inc.join(fifo));
}

/// A folder of the generated crate at `dir/out` (its Cargo.toml), for `regen --out`.
fn out_folder(dir: &Path) {
    std::fs::create_dir_all(dir.join("out")).unwrap();
    std::fs::copy(
        workspace().join("generated/Cargo.toml"),
        dir.join("out/Cargo.toml"),
    )
    .unwrap();
}

/// The wheel of `nvidia-cuda-crt==13.0.88` as it is named on the index.
const CRT_13_0: &str =
    "nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";

/// A wheel folder `dir/index` for pip (`PIP_FIND_LINKS`) holding the real 13.0 runtime wheel and,
/// under the locked name of the crt wheel, a wheel of other bytes; and an empty input cache
/// `dir/cache`.
fn index_with_a_wrong_crt_wheel(dir: &Path) {
    let index = dir.join("index");
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    // The real runtime wheel (from the tests' fixture), so that only the crt wheel is wrong.
    copy_wheels(&["nvidia-cuda-runtime==13.0.96"], &index);
    let entries: Entries = [
        (
            "nvidia/cu13/include/crt/host_defines.h",
            "/* not the real header */\n",
        ),
        (
            "nvidia_cuda_crt-13.0.88.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: nvidia-cuda-crt\nVersion: 13.0.88\n",
        ),
        (
            "nvidia_cuda_crt-13.0.88.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-manylinux2014_x86_64\n",
        ),
        ("nvidia_cuda_crt-13.0.88.dist-info/RECORD", ""),
    ]
    .into_iter()
    .map(|(name, text)| (name.to_owned(), text.as_bytes().to_vec()))
    .collect();
    std::fs::write(index.join(CRT_13_0), zip(&entries)).unwrap();
}

/// The content of the stale cached wheel of [`a_stale_cached_wheel`].
const STALE: &[u8] = b"not the pinned wheel";

/// An input cache `dir` holding the 13.0 wheels, the crt wheel of other bytes than the lock's.
fn a_stale_cached_wheel(dir: &Path) {
    copy_13_0_wheels(&dir.join("wheels"));
    std::fs::write(dir.join("wheels").join(CRT_13_0), STALE).unwrap();
}

/// A copy of 13.0's sealed `driver.rs` at `dir/driver.rs`, one word edited.
fn a_tampered_copy(dir: &Path) {
    let src = workspace().join("generated/src/bindings/ctk_13_0/driver.rs");
    let text = std::fs::read_to_string(&src).unwrap();
    let edited = text.replacen("cuLaunchHostFunc", "cuLaunchHostFunx", 1);
    assert_ne!(edited, text);
    std::fs::write(dir.join("driver.rs"), edited).unwrap();
}

refused! {
    /// A target neither listed nor pinned (older than any).
    regen_of_an_unpinned_target_11_8: Bad {
        args: &["regen", "--ctk", "11.8"],
        error: &[
            "CTK 11.8 is not a target here: generator/targets.txt lists 12.9, 13.0 and 13.5",
            "pin it with cargo xtask pin --ctk 11.8",
        ],
        ..Bad::PLAIN
    };
    /// A target neither listed nor pinned (newer than any).
    regen_of_an_unpinned_target_14_0: Bad {
        args: &["regen", "--ctk", "14.0"],
        error: &[
            "CTK 14.0 is not a target here: generator/targets.txt lists 12.9, 13.0 and 13.5",
            "pin it with cargo xtask pin --ctk 14.0",
        ],
        ..Bad::PLAIN
    };
    /// A target that is not a version at all.
    regen_of_a_target_spelled_banana: Bad {
        args: &["regen", "--ctk", "banana"],
        error: &["'banana' is not a CTK target: write it as MAJOR.MINOR"],
        ..Bad::PLAIN
    };
    /// A major version alone.
    regen_of_a_target_spelled_13: Bad {
        args: &["regen", "--ctk", "13"],
        error: &["'13' is not a CTK target: write it as MAJOR.MINOR"],
        ..Bad::PLAIN
    };
    /// A minor version that is not a number.
    regen_of_a_target_spelled_13_x: Bad {
        args: &["regen", "--ctk", "13.x"],
        error: &["'13.x' is not a CTK target: write it as MAJOR.MINOR"],
        ..Bad::PLAIN
    };
    /// `diff` takes any two pinned targets; anything else is refused naming every pinned one.
    diff_with_an_unpinned_target_11_8: Bad {
        args: &["diff", "12.9", "11.8"],
        error: &[
            "'11.8' is not a pinned CTK target: generator/inputs.lock pins 12.0, 12.1, 12.2, \
             12.3, 12.4, 12.5, 12.6, 12.8, 12.9, 13.0, 13.1, 13.2, 13.3, 13.4 and 13.5; pick two",
        ],
        ..Bad::PLAIN
    };
    /// `diff` of a target between pinned ones that is not pinned itself.
    diff_with_an_unpinned_target_12_7: Bad {
        args: &["diff", "12.7", "13.5"],
        error: &[
            "'12.7' is not a pinned CTK target: generator/inputs.lock pins 12.0, 12.1, 12.2, \
             12.3, 12.4, 12.5, 12.6, 12.8, 12.9, 13.0, 13.1, 13.2, 13.3, 13.4 and 13.5; pick two",
        ],
        ..Bad::PLAIN
    };
    /// `diff` of something that is not a version.
    diff_with_a_target_spelled_banana: Bad {
        args: &["diff", "banana", "13.5"],
        error: &[
            "'banana' is not a pinned CTK target: generator/inputs.lock pins 12.0, 12.1, 12.2, \
             12.3, 12.4, 12.5, 12.6, 12.8, 12.9, 13.0, 13.1, 13.2, 13.3, 13.4 and 13.5; pick two",
        ],
        ..Bad::PLAIN
    };
    /// `--cuda-home` naming a folder without `include/cuda.h`.
    cuda_home_without_cuda_h: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        error: &["--cuda-home {dir} has no include/cuda.h"],
        ..Bad::PLAIN
    };
    /// A toolkit whose `CUDA_VERSION` is another target's.
    cuda_home_of_another_version: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| fake_toolkit(dir, "#define CUDA_VERSION 12040\n"),
        error: &[
            "--cuda-home {dir} is CUDA 12.4 (CUDA_VERSION 12040) but --ctk 12.9 was asked for",
        ],
        ..Bad::PLAIN
    };
    /// A toolkit whose `cuda.h` is not C.
    cuda_home_header_that_fails_to_parse: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| fake_toolkit(dir, "#define CUDA_VERSION 12090\nthis is not C;\n"),
        error: &[
            "bindgen could not parse the driver headers of CTK 12.9",
            "{dir}/include/cuda.h:2:1: error: unknown type name 'this'",
        ],
        ..Bad::PLAIN
    };
    /// One toolkit cannot be every target.
    cuda_home_with_all_targets: Bad {
        args: &["regen", "--ctk", "all", "--cuda-home", "{dir}"],
        setup: |dir| fake_toolkit(dir, "#define CUDA_VERSION 12090\n"),
        error: &["--cuda-home reads one toolkit, so it needs one --ctk target", "not 'all'"],
        ..Bad::PLAIN
    };
    /// `cuda.h` of `--cuda-home` is a FIFO.
    cuda_home_cuda_h_a_fifo: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| toolkit_with_a_fifo(dir, "cuda.h"),
        error: &["{dir}/include/cuda.h is a FIFO, not a regular file"],
        ..Bad::PLAIN
    };
    /// `cuda_runtime_api.h` of `--cuda-home` is a FIFO.
    cuda_home_cuda_runtime_api_h_a_fifo: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| toolkit_with_a_fifo(dir, "cuda_runtime_api.h"),
        error: &["{dir}/include/cuda_runtime_api.h is a FIFO, not a regular file"],
        ..Bad::PLAIN
    };
    /// `cudaTypedefs.h` of `--cuda-home` is a FIFO.
    cuda_home_cuda_typedefs_h_a_fifo: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| toolkit_with_a_fifo(dir, "cudaTypedefs.h"),
        error: &["{dir}/include/cudaTypedefs.h is a FIFO, not a regular file"],
        ..Bad::PLAIN
    };
    /// A header `cuda.h` includes is a FIFO.
    cuda_home_host_defines_h_a_fifo: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| toolkit_with_a_fifo(dir, "crt/host_defines.h"),
        error: &["{dir}/include/crt/host_defines.h is a FIFO, not a regular file"],
        ..Bad::PLAIN
    };
    /// A header `cuda_runtime_api.h` includes is a FIFO.
    cuda_home_driver_types_h_a_fifo: Bad {
        args: &["regen", "--ctk", "12.9", "--cuda-home", "{dir}"],
        setup: |dir| toolkit_with_a_fifo(dir, "driver_types.h"),
        error: &["{dir}/include/driver_types.h is a FIFO, not a regular file"],
        ..Bad::PLAIN
    };
    /// `LIBCLANG_PATH` naming nothing: no libclang is obtainable.
    libclang_path_naming_nothing: Bad {
        args: &["regen", "--ctk", "13.0"],
        env: &[("LIBCLANG_PATH", "/nonexistent/libclang")],
        error: &["LIBCLANG_PATH=/nonexistent/libclang names nothing"],
        ..Bad::PLAIN
    };
    /// `LIBCLANG_PATH` naming a folder that exists but holds no libclang: refused before bindgen
    /// (which panics, exit 101).
    libclang_path_without_a_libclang: Bad {
        args: &["regen", "--ctk", "13.0", "--out", "{dir}/out"],
        env: &[("LIBCLANG_PATH", "{dir}/empty")],
        setup: |dir| {
            out_folder(dir);
            std::fs::create_dir(dir.join("empty")).unwrap();
        },
        error: &["LIBCLANG_PATH={dir}/empty holds no libclang that clang-sys can load"],
        ..Bad::PLAIN
    };
    /// An output folder that does not exist.
    out_that_does_not_exist: Bad {
        args: &["regen", "--ctk", "13.0", "--out", "/nonexistent/out"],
        error: &["the output directory /nonexistent/out does not exist"],
        ..Bad::PLAIN
    };
    /// An output folder in which `src` is a file: creating src/bindings/ fails (also as root).
    out_whose_src_is_a_file: Bad {
        args: &["regen", "--ctk", "13.0", "--out", "{dir}/out"],
        setup: |dir| {
            out_folder(dir);
            std::fs::write(dir.join("out/src"), "a file, not a folder").unwrap();
        },
        error: &["cannot write {dir}/out/src/", "(nothing was changed)"],
        after: |dir| {
            let src = std::fs::read(dir.join("out/src")).unwrap();
            assert_eq!(src, b"a file, not a folder");
        },
        ..Bad::PLAIN
    };
    /// A downloaded wheel whose bytes differ from the lock: pip is pointed (through its own
    /// environment variables) at a folder holding a file of the locked name but other content.
    a_downloaded_wheel_whose_hash_differs_from_the_lock: Bad {
        args: &["regen", "--ctk", "13.0"],
        env: &[
            ("HOSTCB_INPUTS_CACHE", "{dir}/cache"),
            ("PIP_NO_INDEX", "1"),
            ("PIP_FIND_LINKS", "{dir}/index"),
        ],
        setup: index_with_a_wrong_crt_wheel,
        error: &[
            "downloaded nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.\
             manylinux_2_17_x86_64.whl: sha256 ",
            "does not match the lock",
            "so it was not cached",
        ],
        after: |dir| {
            let cached = dir.join("cache/wheels").join(CRT_13_0);
            assert!(!cached.exists(), "the wrong wheel was cached");
        },
    };
    /// Offline (the index refuses connections) with a cached wheel of other bytes than the
    /// lock's: the error names the hash mismatch, not only pip's "No matching distribution
    /// found", and the cached file is left as it was.
    offline_with_a_stale_cached_wheel: Bad {
        args: &["check", "--ctk", "13.0"],
        env: &[
            ("HOSTCB_INPUTS_CACHE", "{dir}"),
            ("PIP_INDEX_URL", "{unreachable}"),
            ("PIP_FIND_LINKS", ""),
            // One retry, not five (see `PinCheckout::command`).
            ("PIP_RETRIES", "1"),
        ],
        setup: a_stale_cached_wheel,
        error: &[
            "{dir}/wheels/nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.\
             manylinux_2_17_x86_64.whl: the cached wheel (sha256 ",
            "does not match the lock",
            "the package index is unreachable",
        ],
        after: |dir| {
            assert_eq!(std::fs::read(dir.join("wheels").join(CRT_13_0)).unwrap(), STALE);
        },
    };
    /// A sealed file edited after sealing: verify fails, and the seal names the edit.
    verify_of_a_tampered_copy: Bad {
        args: &["verify", "{dir}"],
        setup: a_tampered_copy,
        error: &["1 sealed file(s) failed verification"],
        after: |dir| {
            let report = hostcb_seal::verify_paths(&[dir.join("driver.rs")]).unwrap();
            assert_eq!(report.failures.len(), 1, "{report}");
            assert!(
                report.failures[0].to_string().contains("edited after sealing"),
                "{report}"
            );
        },
        ..Bad::PLAIN
    };
}

// ---- Runs that meet bad input and go on.

/// The wheels of target 13.0 and libclang.
const WHEELS_13_0: [&str; 3] = [
    "nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    CRT_13_0,
    "libclang-18.1.1-py2.py3-none-manylinux2010_x86_64.whl",
];

/// Copies the 13.0 wheels and libclang's ([`WHEELS_13_0`]) from the tests' fixture into `dir`.
fn copy_13_0_wheels(dir: &Path) {
    copy_wheels(&target_specs(hostcb_generator::Ctk::V13_0), dir);
    for w in WHEELS_13_0 {
        assert!(dir.join(w).is_file(), "the fixture lacks {w}");
    }
}

/// A tampered cached libclang is caught before it is loaded: it is unpacked again from the
/// hash-checked wheel (one warning line naming the library and what is wrong with it), so `check`
/// still matches the committed files; a changed byte and a changed size are both caught, and a
/// header wheel of other bytes is fetched again (pip pointed at a folder of the real wheels).
#[test]
fn a_tampered_cached_libclang_is_unpacked_again_not_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    // A checkout that lists 13.0 alone: its check reads three wheels.
    let checkout = listing_copy(&["13.0"]);
    let specs = listed_specs(checkout.path());
    copy_wheels(&specs, index.path());
    copy_wheels(&specs, &cache.path().join("wheels"));
    let check = || {
        succeeds(
            xtask(checkout.path(), &["check", "--ctk", "13.0"])
                .env("HOSTCB_INPUTS_CACHE", cache.path())
                .env("PIP_NO_INDEX", "1")
                .env("PIP_FIND_LINKS", index.path()),
        )
    };
    check();
    let folders: Vec<PathBuf> = std::fs::read_dir(cache.path().join("libclang"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let [folder] = &folders[..] else {
        panic!("not one libclang folder: {folders:?}");
    };
    let library = folder.join("libclang.so");
    let original = std::fs::read(&library).unwrap();
    // Named by its own SHA-256.
    assert_eq!(
        folder.file_name().unwrap().to_string_lossy(),
        sha256_hex(&original)
    );
    let mut flipped = original.clone();
    flipped[original.len() / 2] ^= 1;
    for (tampered, says) in [
        (flipped, "differs from the wheel's entry"),
        (
            original[..4096].to_vec(),
            "bytes where the wheel's entry has",
        ),
    ] {
        std::fs::write(&library, &tampered).unwrap();
        let stderr = check();
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("warning:"))
            .collect();
        assert_eq!(warnings.len(), 1, "{stderr}");
        assert!(
            warnings[0].starts_with(&format!("warning: {}: ", library.display()))
                && warnings[0].contains(says)
                && warnings[0].contains("unpacking it again from libclang-18.1.1-"),
            "{stderr}"
        );
        assert!(
            stderr.contains("check: 8 generated files match"),
            "{stderr}"
        );
        assert!(std::fs::read(&library).unwrap() == original);
    }
    // A cached header wheel of other bytes is fetched again (from the folder pip is pointed at).
    let runtime = cache.path().join("wheels").join(WHEELS_13_0[0]);
    let good = std::fs::read(&runtime).unwrap();
    std::fs::write(&runtime, b"not the pinned wheel").unwrap();
    let stderr = check();
    assert!(
        stderr.contains(&format!(
            "downloading nvidia-cuda-runtime==13.0.96 ({})",
            WHEELS_13_0[0]
        )),
        "{stderr}"
    );
    assert!(std::fs::read(&runtime).unwrap() == good);
    // Intact now: a further run says nothing about the inputs.
    let stderr = check();
    assert!(
        !stderr.contains("warning:")
            && !stderr.contains("unpacking")
            && !stderr.contains("download"),
        "{stderr}"
    );
}

/// A first run against an empty cache says what it downloads (name==version, size, where it is
/// cached) and that it unpacks the libclang into the cache, one line each; a second run,
/// everything cached and intact, says nothing.
/// pip runs for real, pointed at a folder of the real wheels instead of PyPI.
#[test]
fn a_first_run_reports_each_download_and_a_second_run_is_quiet() {
    let cache = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    copy_13_0_wheels(index.path());
    // A tree that lists 13.0 alone, so that the run needs the three wheels of the index and
    // nothing from another.
    let out = crate_folder_listing("13.0");
    let regen = || {
        succeeds(
            xtask(
                &workspace(),
                &[
                    "regen",
                    "--ctk",
                    "13.0",
                    "--out",
                    out.path().to_str().unwrap(),
                ],
            )
            .env("HOSTCB_INPUTS_CACHE", cache.path())
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", index.path()),
        )
    };
    let first = regen();
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
        // The libclang is unpacked into the cache, once; the headers into a folder of the run,
        // silently.
        let unpacked = lines
            .iter()
            .filter(|l| l.starts_with("unpacking ") && l.contains(&format!(" of {file} into ")))
            .count();
        assert_eq!(
            unpacked,
            usize::from(spec.starts_with("libclang==")),
            "{first}"
        );
    }
    let second = regen();
    for word in ["downloading", "downloaded", "unpacking", "warning:"] {
        assert!(!second.contains(word), "second run said {word}:\n{second}");
    }
}

/// `LIBCLANG_PATH` naming a folder that holds the real library under a versioned name works (with
/// a warning), and provenance records that file's SHA-256.
#[test]
fn libclang_path_with_a_versioned_libclang_is_used_and_recorded() {
    let out = crate_folder();
    let pinned = libclang_library();
    let versioned = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&pinned, versioned.path().join("libclang.so.18")).unwrap();
    let stderr = succeeds(
        xtask(
            &workspace(),
            &[
                "regen",
                "--ctk",
                "13.0",
                "--out",
                out.path().to_str().unwrap(),
            ],
        )
        .env("LIBCLANG_PATH", versioned.path()),
    );
    assert!(stderr.contains("warning: LIBCLANG_PATH="), "{stderr}");
    let provenance =
        std::fs::read_to_string(out.path().join("src/bindings/ctk_13_0/provenance.toml")).unwrap();
    let hex = sha256_hex(&std::fs::read(&pinned).unwrap());
    assert!(provenance.contains(&hex), "{provenance}");
    assert!(!provenance.contains("sha256 = \"unknown\""), "{provenance}");
}

// ---- `cargo xtask pin` against a hostile package index.
//
// The index is a PEP 503 simple index in a temporary folder, served to the real pip as a
// `file://` URL (pip reads `data-yanked` and the `#sha256=` of each link there as it does from
// PyPI); its wheels are the real 13.0 wheels, or copies of them edited here. pin runs in a copy of
// the workspace's data (so a pin that succeeds rewrites that copy's lock, never this checkout's)
// with its own input cache.

/// The entries of a wheel: names and bytes, in order.
type Entries = Vec<(String, Vec<u8>)>;

/// The real 13.0 header wheels (and libclang's), from the tests' fixture.
fn real_13_0_wheels() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_13_0_wheels(dir.path());
    dir
}

/// The entries of a zip, in order (stored or deflated, each checked against its CRC-32 and
/// size).
fn zip_entries(path: &Path) -> Entries {
    let bytes = std::fs::read(path).unwrap();
    crate::wheels::unzip(&bytes, |_| true)
        .unwrap_or_else(|| panic!("{} is not a zip that rawzip reads", path.display()))
}

/// A zip of `entries`, deflated, their names written as they are.
fn zip(entries: &Entries) -> Vec<u8> {
    crate::wheels::zip(entries, rawzip::CompressionMethod::DEFLATE)
}

/// Rewrites the RECORD of `entries` so that it tells the truth about every other entry.
fn true_record(entries: &mut Entries) {
    let record = entries
        .iter()
        .map(|(n, _)| n.clone())
        .find(|n| n.ends_with(".dist-info/RECORD"))
        .unwrap();
    let mut text = String::new();
    for (name, bytes) in entries.iter().filter(|(n, _)| *n != record) {
        text.push_str(&format!(
            "{name},sha256={},{}\n",
            crate::wheels::record_hash(bytes),
            bytes.len()
        ));
    }
    text.push_str(&format!("{record},,\n"));
    edit_record(entries, |_| text);
}

/// A copy of the real wheel `src` as version `version` (dist-info, METADATA and a true RECORD),
/// then changed by `edit` (which may also lie in RECORD), written into `dir`; returns its path.
fn respin(src: &Path, dir: &Path, version: &str, edit: impl FnOnce(&mut Entries)) -> PathBuf {
    let name = src.file_name().unwrap().to_str().unwrap();
    let old = name.split('-').nth(1).unwrap();
    let mut entries: Entries = zip_entries(src)
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
    true_record(&mut entries);
    edit(&mut entries);
    let path = dir.join(name.replace(&format!("-{old}-"), &format!("-{version}-")));
    std::fs::write(&path, zip(&entries)).unwrap();
    path
}

/// Rewrites the RECORD of `entries` with `f` applied to its text.
fn edit_record(entries: &mut Entries, f: impl FnOnce(String) -> String) {
    let (_, bytes) = entries
        .iter_mut()
        .find(|(n, _)| n.ends_with(".dist-info/RECORD"))
        .unwrap();
    *bytes = f(String::from_utf8(std::mem::take(bytes)).unwrap()).into_bytes();
}

/// Edits the `cuda.h` of `entries` with `f`.
fn edit_cuda_h(entries: &mut Entries, f: impl FnOnce(&mut Vec<u8>)) {
    let (_, bytes) = entries
        .iter_mut()
        .find(|(n, _)| n.ends_with("/include/cuda.h"))
        .unwrap();
    f(bytes);
}

/// Replaces `from` by `to` in the entry of `entries` whose name ends with `file`.
fn replace_in(entries: &mut Entries, file: &str, from: &str, to: &str) {
    let (_, bytes) = entries.iter_mut().find(|(n, _)| n.ends_with(file)).unwrap();
    let text = String::from_utf8(std::mem::take(bytes)).unwrap();
    assert!(text.contains(from), "{file} has no {from}");
    *bytes = text.replace(from, to).into_bytes();
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
        let hex = sha256_hex(&std::fs::read(&served).unwrap());
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
/// lock, target list and templates, which the configuration the xtask loads once holds), and an
/// input cache holding the real 13.0 header wheels.
struct PinCheckout {
    root: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl PinCheckout {
    fn new(real: &Path) -> Self {
        let cache = tempfile::tempdir().unwrap();
        let wheels = cache.path().join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        for w in &WHEELS_13_0[..2] {
            std::fs::copy(real.join(w), wheels.join(w)).unwrap();
        }
        PinCheckout {
            root: workspace_copy(),
            cache,
        }
    }

    fn lock(&self) -> String {
        std::fs::read_to_string(self.root.path().join("generator/inputs.lock")).unwrap()
    }

    /// `cargo xtask pin --ctk 13.0` (and `extra` arguments) with pip pointed at `index`.
    fn command(&self, index: &str, extra: &[&str]) -> Command {
        let mut cmd = xtask(self.root.path(), &["pin", "--ctk", "13.0"]);
        cmd.args(extra)
            .env_remove("PIP_FIND_LINKS")
            .env("PIP_INDEX_URL", index)
            .env("PIP_NO_CACHE_DIR", "1")
            // One retry, not pip's five: an unreachable index is refused in about a second
            // instead of eight, still with the "Retrying ... NewConnectionError" line that says
            // why (with none, pip prints no cause at all).
            .env("PIP_RETRIES", "1")
            .env("HOSTCB_INPUTS_CACHE", self.cache.path());
        cmd
    }

    /// Runs pin (within two minutes).
    fn pin(&self, index: &str, extra: &[&str]) -> Output {
        output_within(&mut self.command(index, extra), Duration::from_secs(120))
    }

    /// Runs pin (within `limit`) and asserts that it failed with one `error:` line, which gives
    /// the cause of unusable headers, and changed neither the lock nor the cached wheels; returns
    /// the line.
    fn refused(&self, index: &str, limit: Duration) -> String {
        let lock = self.lock();
        let cached = self.cached();
        let mut cmd = self.command(index, &[]);
        let out = output_within(&mut cmd, limit);
        let error = the_one_error(&cmd, &out);
        assert!(
            !error.contains("do not hold usable headers") || error.matches(": ").count() > 1,
            "the cause is dropped: {error}"
        );
        assert_eq!(self.lock(), lock, "pin changed the lock: {error}");
        assert_eq!(
            self.cached(),
            cached,
            "pin changed the cached wheels: {error}"
        );
        eprintln!("pin -> {error}");
        error
    }

    /// The cached wheels with their digests.
    fn cached(&self) -> BTreeMap<String, String> {
        std::fs::read_dir(self.cache.path().join("wheels"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| {
                let hex = sha256_hex(&std::fs::read(&p).unwrap());
                (p.file_name().unwrap().to_string_lossy().into_owned(), hex)
            })
            .collect()
    }
}

/// A newer 13.0 runtime wheel (13.0.99) that pin is served, one thing made wrong, and the error
/// line it must give.
struct BadWheel {
    /// What is made wrong in its entries (written with a true RECORD first; an edit may make it
    /// lie, or tell the truth again with [`true_record`]).
    edit: fn(&mut Entries),
    /// What is done to the wheel file once written.
    then: fn(&Path),
    /// Every piece the one `error:` line must hold.
    error: &'static [&'static str],
    /// How long pin may take to refuse it.
    limit: Duration,
}

impl BadWheel {
    /// The fields a case leaves out.
    const PLAIN: BadWheel = BadWheel {
        edit: |_| {},
        then: |_| {},
        error: &[],
        limit: Duration::from_secs(120),
    };
}

/// Serves pin the real 13.0 wheels and the runtime wheel of `case` as the newest release, and
/// checks that pin refuses it ([`PinCheckout::refused`]) saying each piece of `case.error`.
fn pin_refused(case: BadWheel) {
    let real = real_13_0_wheels();
    let ws = PinCheckout::new(real.path());
    let dir = tempfile::tempdir().unwrap();
    let wheel = respin(
        &real.path().join(WHEELS_13_0[0]),
        dir.path(),
        "13.0.99",
        case.edit,
    );
    (case.then)(&wheel);
    let index = index_13_0(real.path(), &[(&wheel, None)]);
    let error = ws.refused(&index.url(), case.limit);
    for piece in case.error {
        assert!(
            error.contains(piece),
            "the error line does not say {piece:?}:\n{error}"
        );
    }
}

/// Makes a test of each row: `name: BadWheel { .. };`.
macro_rules! pin_refused {
    ($($(#[doc = $doc:literal])* $name:ident: $case:expr;)*) => {
        $(
            $(#[doc = $doc])*
            #[test]
            fn $name() {
                pin_refused($case);
            }
        )*
    };
}

pin_refused! {
    /// RECORD lies about the size of a file.
    pin_refuses_a_record_that_lies_about_a_size: BadWheel {
        edit: |e| {
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
        },
        error: &["its RECORD says nvidia/cu13/include/cuda.h has"],
        ..BadWheel::PLAIN
    };
    /// RECORD leaves out a file that was edited.
    pin_refuses_a_record_that_omits_an_edited_file: BadWheel {
        edit: |e| {
            edit_cuda_h(e, |b| b.extend_from_slice(b"\n#define EVIL 1\n"));
            edit_record(e, |r| {
                r.lines()
                    .filter(|l| !l.contains("/include/cuda.h,"))
                    .map(|l| format!("{l}\n"))
                    .collect()
            })
        },
        error: &["its RECORD does not list nvidia/cu13/include/cuda.h"],
        ..BadWheel::PLAIN
    };
    /// No RECORD at all.
    pin_refuses_a_wheel_without_a_record: BadWheel {
        edit: |e| e.retain(|(n, _)| !n.ends_with(".dist-info/RECORD")),
        error: &["it has no *.dist-info/RECORD"],
        ..BadWheel::PLAIN
    };
    /// RECORD lists a file twice.
    pin_refuses_a_record_that_lists_a_file_twice: BadWheel {
        edit: |e| {
            edit_record(e, |r| {
                let line = r.lines().find(|l| l.contains("/include/cuda.h,")).unwrap();
                format!("{r}{line}\n")
            })
        },
        error: &["its RECORD lists nvidia/cu13/include/cuda.h twice"],
        ..BadWheel::PLAIN
    };
    /// A file edited, its RECORD line keeping the old hash.
    pin_refuses_a_file_that_does_not_match_its_record: BadWheel {
        edit: |e| edit_cuda_h(e, |b| b[0] ^= 1),
        error: &["its entry nvidia/cu13/include/cuda.h does not match its own RECORD"],
        ..BadWheel::PLAIN
    };
    /// A zip holding two entries of one name (python's zipfile writes that; a reader that maps
    /// names to entries would see one of them only).
    pin_refuses_a_zip_with_a_name_twice: BadWheel {
        then: |wheel| {
            let script = "import sys, zipfile, warnings\nwarnings.simplefilter('ignore')\nz = zipfile.ZipFile(sys.argv[1], 'a')\nz.writestr('nvidia/cu13/include/cuda.h', '#define CUDA_VERSION 13000\\n')\nz.close()\n";
            let ok = Command::new("python3")
                .args(["-c", script])
                .arg(wheel)
                .status()
                .unwrap();
            assert!(ok.success());
        },
        error: &["two zip entries of one name"],
        ..BadWheel::PLAIN
    };
    /// A wheel that decompresses beyond the cap (1 GiB), all of it declared honestly: refused
    /// before anything is decompressed, so within a minute.
    pin_refuses_a_wheel_beyond_the_size_cap: BadWheel {
        edit: |e| {
            e.push((
                "nvidia/cu13/include/zeros.h".to_owned(),
                vec![0u8; (1 << 30) + (64 << 20)],
            ));
            true_record(e);
        },
        error: &["more than the cap of 1073741824 bytes"],
        limit: Duration::from_secs(60),
        ..BadWheel::PLAIN
    };
    /// Headers of another CUDA version: the refusal prints the cause, not only "do not hold
    /// usable headers".
    pin_prints_the_cause_of_unusable_headers: BadWheel {
        edit: |e| {
            replace_in(e, "/include/cuda.h", "#define CUDA_VERSION 13000", "#define CUDA_VERSION 13010");
            true_record(e);
        },
        error: &[
            "the newest wheels of CTK 13.0 do not hold usable headers: the pinned headers",
            "is CUDA 13.1 (CUDA_VERSION 13010)",
        ],
        ..BadWheel::PLAIN
    };
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
            replace_in(
                e,
                "/cudaTypedefs.h",
                "PFN_cuLaunchHostFunc_v10000",
                "PFN_cuLaunchHostFunc_v13010",
            );
            true_record(e);
        },
    );
    let mut index = Index::new();
    index.add("nvidia-cuda-runtime", &tampered, None);
    index.add("nvidia-cuda-crt", &real.path().join(WHEELS_13_0[1]), None);
    let good = ws.cached()[WHEELS_13_0[0]].clone();
    let bad = sha256_hex(&std::fs::read(&tampered).unwrap());
    let e = ws.refused(&index.url(), Duration::from_secs(120));
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
    let e = ws.refused(
        &format!("http://127.0.0.1:{port}/simple/"),
        Duration::from_secs(120),
    );
    assert!(e.contains("the package index is unreachable"), "{e}");
    assert!(!e.contains("has no"), "{e}");
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
        true_record(e);
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
    let mut cmd = xtask(ws.root.path(), &["pin", "--ctk", "13.0"]);
    cmd.env_remove("PIP_FIND_LINKS")
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
}

// ---- A full disk.

/// Runs the xtask with `args` and `env` in the checkout at `cwd`, inside a new user and mount
/// namespace (`unshare -rm`, no root needed where unprivileged namespaces are allowed) with a
/// `size` tmpfs mounted on `dir`; `None` where namespaces are not allowed here.
fn on_a_small_disk(
    dir: &Path,
    size: &str,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Option<Output> {
    let probe = Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$0\""])
        .arg(dir)
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let mut cmd = Command::new("unshare");
    crate::fixture::hermetic(&mut cmd);
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
    // The checkout is the one around `cwd`.
    .env_remove("CARGO_MANIFEST_DIR")
    .env_remove("PIP_FIND_LINKS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Some(output_within(&mut cmd, Duration::from_secs(120)))
}

/// A full disk under the input cache is named as such, by regen (not "set LIBCLANG_PATH") and by
/// pin (not "the newest wheels do not hold usable headers"). Needs a user namespace to mount a
/// small tmpfs; where none is allowed, it says SKIP and checks nothing.
#[test]
fn a_full_disk_is_named_as_such() {
    let real = real_13_0_wheels();
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap();
    let out = crate_folder();
    // The header wheels (about 2.4 MB) fit in 16 MB, libclang's 24 MB wheel does not.
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
    let error = the_one_error(&"regen on a full disk", &regen);
    assert!(
        error.contains("the disk is full") && error.contains("libclang"),
        "{error}"
    );
    assert!(!error.contains("LIBCLANG_PATH"), "{error}");
    eprintln!("regen -> {error}");

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
    let error = the_one_error(&"pin on a full disk", &pin);
    assert!(error.contains("the disk is full"), "{error}");
    eprintln!("pin -> {error}");
}
