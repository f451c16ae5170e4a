//! The inputs module against real wheels: zip-slip and hash checks on wheels built here, the whole
//! fetch → check → unpack → verify path with a lock of those wheels (the headers unpacked into a
//! folder of their own per run, the libclang kept in the cache and checked), `--cuda-home` checks,
//! and a real fetch of the pinned packages from PyPI.

use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use hostcb_generator::Ctk;
use hostcb_generator::inputs::{
    self, Fetch, Fetcher, InputError, Lock, LockEntry, Pip, sha256_file, unpack_wheel, verify_wheel,
};
use sha2::Digest;

/// The RECORD hash of `bytes`: `sha256=` and the unpadded URL-safe base64 of the digest.
fn record_hash(bytes: &[u8]) -> String {
    format!("sha256={}", crate::wheels::record_hash(bytes))
}

/// Writes a zip at `path` with the given entries (a name ending in `/` is a folder) and a true
/// RECORD: an entry `*.dist-info/RECORD` with an empty body is filled in, and one is added when
/// there is none.
fn make_wheel(path: &Path, entries: &[(&str, &str)]) {
    let mut entries: Vec<(String, String)> = entries
        .iter()
        .map(|(n, b)| ((*n).to_owned(), (*b).to_owned()))
        .collect();
    let record = match entries
        .iter()
        .position(|(n, _)| n.ends_with(".dist-info/RECORD"))
    {
        Some(i) if !entries[i].1.is_empty() => None,
        Some(i) => Some(i),
        None => {
            entries.push(("w-1.0.dist-info/RECORD".to_owned(), String::new()));
            Some(entries.len() - 1)
        }
    };
    if let Some(i) = record {
        let mut text = String::new();
        for (n, b) in entries.iter().filter(|(n, _)| !n.ends_with('/')) {
            if *n != entries[i].0 {
                text.push_str(&format!("{n},{},{}\n", record_hash(b.as_bytes()), b.len()));
            }
        }
        text.push_str(&format!("{},,\n", entries[i].0));
        entries[i].1 = text;
    }
    write_zip(path, &entries);
}

/// Writes a zip at `path` with exactly the given entries, deflated.
fn write_zip(path: &Path, entries: &[(String, String)]) {
    let entries: Vec<(String, Vec<u8>)> = entries
        .iter()
        .map(|(name, body)| (name.clone(), body.clone().into_bytes()))
        .collect();
    fs::write(
        path,
        crate::wheels::zip(&entries, rawzip::CompressionMethod::DEFLATE),
    )
    .unwrap();
}

fn cuda_h(version: u32) -> String {
    format!(
        "#ifndef __cuda_cuda_h__\n#define __cuda_cuda_h__\n#define CUDA_VERSION {version}\n#endif\n"
    )
}

/// A fake CUDA 13 runtime wheel and crt wheel, with a `cuda.h` of `version`.
fn fake_cu13_wheels(dir: &Path, version: u32) -> (PathBuf, PathBuf) {
    let runtime = dir.join("nvidia_cuda_runtime-fake.whl");
    let crt = dir.join("nvidia_cuda_crt-fake.whl");
    let cuda = cuda_h(version);
    make_wheel(
        &runtime,
        &[
            ("nvidia/cu13/include/", ""),
            ("nvidia/cu13/include/cuda.h", &cuda),
            (
                "nvidia/cu13/include/cuda_runtime_api.h",
                "#include \"crt/host_defines.h\"\n",
            ),
            (
                "nvidia/cu13/include/cudaTypedefs.h",
                "typedef int PFN_x_v1000;\n",
            ),
            ("nvidia/cu13/lib/libcudart.so.13", "not unpacked"),
            ("nvidia_cuda_runtime-13.0.96.dist-info/RECORD", ""),
        ],
    );
    make_wheel(
        &crt,
        &[
            (
                "nvidia/cu13/include/crt/host_defines.h",
                "#define __host__\n",
            ),
            ("nvidia/cu13/include/not_crt.h", "not unpacked"),
        ],
    );
    (runtime, crt)
}

/// A lock of the 13.0 pins that names `runtime` and `crt` (by file name and real hash).
fn lock_of(runtime: &Path, crt: &Path) -> Lock {
    let line = |spec: &str, wheel: &Path| {
        format!(
            "{spec} {} {}\n",
            wheel.file_name().unwrap().to_str().unwrap(),
            sha256_file(wheel).unwrap()
        )
    };
    Lock::parse(&format!(
        "# test lock\ntarget 13.0 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88\n{}{}",
        line("nvidia-cuda-runtime==13.0.96", runtime),
        line("nvidia-cuda-crt==13.0.88", crt)
    ))
    .unwrap()
}

/// Copies wheels from a folder, counting calls; what a mirror of PyPI would do.
struct CopyFrom {
    dir: PathBuf,
    calls: std::rc::Rc<Cell<usize>>,
}

impl Fetch for CopyFrom {
    fn fetch(&self, spec: &str, dir: &Path) -> Result<(), InputError> {
        self.calls.set(self.calls.get() + 1);
        let stem = if spec.starts_with("nvidia-cuda-runtime==") {
            "nvidia_cuda_runtime-fake.whl"
        } else {
            "nvidia_cuda_crt-fake.whl"
        };
        fs::copy(self.dir.join(stem), dir.join(stem)).unwrap();
        Ok(())
    }
}

/// Fails every download, as an offline machine would.
struct Offline;

impl Fetch for Offline {
    fn fetch(&self, spec: &str, _dir: &Path) -> Result<(), InputError> {
        Err(InputError::Download {
            spec: spec.to_owned(),
            detail: "offline".to_owned(),
        })
    }
}

#[test]
fn zip_slip_entries_are_rejected_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    for evil in ["../evil", "nvidia/cu13/include/../../../evil", "/tmp/evil"] {
        let wheel = tmp.path().join("evil.whl");
        make_wheel(
            &wheel,
            &[("nvidia/cu13/include/cuda.h", "ok"), (evil, "pwned")],
        );
        let dest = tmp.path().join("out");
        let err = unpack_wheel(&wheel, "nvidia/cu13/include", &dest).unwrap_err();
        assert!(matches!(err, InputError::UnsafeEntry { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("evil.whl"), "{msg}");
        assert!(msg.contains(&format!("entry '{evil}' is unsafe")), "{msg}");
        assert!(!dest.exists(), "something was unpacked for {evil}");
        assert!(!tmp.path().join("evil").exists());
    }
}

/// A stored zip of `entries`: raw name bytes, Unix mode, content.
fn zip_with_modes(entries: &[(&[u8], u32, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut zip = rawzip::ZipArchiveWriter::new(Vec::new());
    for (name, mode, content) in entries {
        let (mut entry, config) = zip
            .new_file(rawzip::path::EntryPath::verbatim(*name))
            .unix_permissions(*mode)
            .start()
            .unwrap();
        let mut writer = config.wrap(&mut entry);
        writer.write_all(content).unwrap();
        let (_, descriptor) = writer.finish().unwrap();
        entry.finish(descriptor).unwrap();
    }
    zip.finish().unwrap()
}

/// An entry whose Unix mode makes it a symbolic link, and one whose name is not UTF-8 (which
/// tools would read differently), are refused before anything is unpacked.
#[test]
fn link_entries_and_names_not_in_utf8_are_rejected_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let record = b"w-1.0.dist-info/RECORD".as_slice();
    for (bad, mode, want) in [
        (
            b"nvidia/cu13/include/link.h".as_slice(),
            0o120_777,
            "entry 'nvidia/cu13/include/link.h' is unsafe",
        ),
        (
            b"nvidia/cu13/include/\xff.h".as_slice(),
            0o100_644,
            "it holds an entry whose name is not UTF-8 (\"nvidia/cu13/include/\u{fffd}.h\")",
        ),
    ] {
        let wheel = tmp.path().join("bad.whl");
        let entries = [
            (
                b"nvidia/cu13/include/cuda.h".as_slice(),
                0o644,
                b"ok".as_slice(),
            ),
            (bad, mode, b"../../../../etc/passwd".as_slice()),
            (record, 0o644, b"".as_slice()),
        ];
        fs::write(&wheel, zip_with_modes(&entries)).unwrap();
        let dest = tmp.path().join("out");
        let msg = unpack_wheel(&wheel, "nvidia/cu13/include", &dest)
            .unwrap_err()
            .to_string();
        assert!(msg.contains(want), "{msg}");
        assert!(!dest.exists(), "something was unpacked for {msg}");
    }
}

/// A wheel whose end of central directory record misleads is refused, though rawzip would read
/// past it: one that says it spans a second disk, one whose central directory lies before where
/// the record says, and one that counts an entry more than the directory holds.
#[test]
fn wheels_whose_end_record_misleads_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("w-1.0-py3-none-any.whl");
    make_wheel(&good, &[("x/a.h", "#define A 1\n")]);
    unpack_wheel(&good, "x", &tmp.path().join("good")).unwrap();
    let bytes = fs::read(&good).unwrap();
    let end = bytes.windows(4).rposition(|w| w == b"PK\x05\x06").unwrap();
    let directory = u32::from_le_bytes(bytes[end + 16..end + 20].try_into().unwrap());
    let mut failures = Vec::new();
    for (case, edits, want) in [
        (
            "this disk the second",
            vec![(4, 1u16.to_le_bytes().to_vec())],
            "not a readable wheel (it says it is split over several disks)",
        ),
        (
            "the directory on the second disk",
            vec![(6, 1u16.to_le_bytes().to_vec())],
            "not a readable wheel (it says it is split over several disks)",
        ),
        (
            "the directory a byte further on",
            vec![(16, (directory + 1).to_le_bytes().to_vec())],
            "not a readable wheel (its central directory lies before where its end record says)",
        ),
        (
            "one entry more",
            vec![
                (8, 3u16.to_le_bytes().to_vec()),
                (10, 3u16.to_le_bytes().to_vec()),
            ],
            "not a readable wheel (its central directory holds 2 entries, its end record says 3)",
        ),
    ] {
        let mut edited = bytes.clone();
        for (at, value) in edits {
            edited[end + at..end + at + value.len()].copy_from_slice(&value);
        }
        let wheel = tmp.path().join("bad.whl");
        fs::write(&wheel, edited).unwrap();
        let dest = tmp.path().join("out");
        match unpack_wheel(&wheel, "x", &dest) {
            Ok(()) => failures.push(format!("{case}: unpacked")),
            Err(e) if !e.to_string().contains(want) => failures.push(format!("{case}: {e}")),
            Err(_) if dest.exists() => failures.push(format!("{case}: something was unpacked")),
            Err(_) => {}
        }
        let _ = fs::remove_dir_all(&dest);
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn only_the_kept_part_is_unpacked() {
    let tmp = tempfile::tempdir().unwrap();
    let (runtime, crt) = fake_cu13_wheels(tmp.path(), 13000);
    let dest = tmp.path().join("out");
    unpack_wheel(&crt, "nvidia/cu13/include/crt", &dest).unwrap();
    assert!(
        dest.join("nvidia/cu13/include/crt/host_defines.h")
            .is_file()
    );
    assert!(!dest.join("nvidia/cu13/include/not_crt.h").exists());
    unpack_wheel(&runtime, "nvidia/cu13/include", &dest).unwrap();
    assert!(dest.join("nvidia/cu13/include/cuda.h").is_file());
    assert!(!dest.join("nvidia/cu13/lib").exists());

    let err = unpack_wheel(&runtime, "nvidia/cuda_nvcc/include", &dest).unwrap_err();
    assert!(
        err.to_string()
            .contains("has no entries under nvidia/cuda_nvcc/include"),
        "{err}"
    );
}

#[test]
fn a_wheel_of_another_hash_is_rejected_with_the_lock_message() {
    let tmp = tempfile::tempdir().unwrap();
    let wheel = tmp.path().join("w-1.0-py3-none-any.whl");
    make_wheel(&wheel, &[("w/a.h", "a")]);
    let actual = sha256_file(&wheel).unwrap();
    let expected = "0".repeat(64);
    let entry = LockEntry {
        name: "w".into(),
        version: "1.0".into(),
        file: "w-1.0-py3-none-any.whl".into(),
        sha256: expected.clone(),
    };
    let msg = verify_wheel(&wheel, &entry).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "w-1.0-py3-none-any.whl: sha256 {actual} does not match the lock ({expected}); delete {} and retry, or update generator/inputs.lock if the pin changed on purpose",
            wheel.display()
        )
    );
    verify_wheel(
        &wheel,
        &LockEntry {
            sha256: actual,
            ..entry
        },
    )
    .unwrap();
}

#[test]
fn pinned_path_fetches_once_reuses_the_cache_and_refetches_a_bad_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let (runtime, crt) = fake_cu13_wheels(tmp.path(), 13000);
    let cache = tmp.path().join("cache");
    let calls = std::rc::Rc::new(Cell::new(0));
    let fetcher = Fetcher::new(
        lock_of(&runtime, &crt),
        Box::new(CopyFrom {
            dir: tmp.path().to_owned(),
            calls: calls.clone(),
        }),
    );

    let headers = fetcher.headers(Ctk::V13_0, &cache).unwrap();
    assert_eq!(calls.get(), 2);
    assert_eq!(headers.cuda_version, 13000);
    assert!(headers.cuda_h.ends_with("nvidia/cu13/include/cuda.h"));
    assert_eq!(headers.include_dirs.len(), 2);
    assert!(headers.include_dirs[1].join("crt/host_defines.h").is_file());
    assert_eq!(headers.source[0].name, "nvidia-cuda-runtime");
    assert_eq!(headers.source[0].sha256, sha256_file(&runtime).unwrap());
    assert_eq!(
        headers.source[1].to_string(),
        format!(
            "nvidia-cuda-crt==13.0.88 nvidia_cuda_crt-fake.whl sha256:{}",
            sha256_file(&crt).unwrap()
        )
    );

    // Cached and matching: no download.
    fetcher.headers(Ctk::V13_0, &cache).unwrap();
    assert_eq!(calls.get(), 2);

    // A corrupted cached wheel is downloaded again.
    fs::write(cache.join("wheels/nvidia_cuda_crt-fake.whl"), "junk").unwrap();
    fetcher.headers(Ctk::V13_0, &cache).unwrap();
    assert_eq!(calls.get(), 3);

    // A target the lock lacks.
    let err = fetcher.headers(Ctk::V13_5, &cache).unwrap_err().to_string();
    assert_eq!(
        err,
        "CTK 13.5 has no pinned inputs: generator/inputs.lock pins 13.0; pin it with cargo xtask pin --ctk 13.5"
    );
}

/// The pinned headers lie in a temporary folder of their own, which lives as long as the last
/// clone of the value and goes with it; two gatherings never share one.
#[test]
fn the_headers_folder_goes_with_the_headers() {
    let tmp = tempfile::tempdir().unwrap();
    let (runtime, crt) = fake_cu13_wheels(tmp.path(), 13000);
    let cache = tmp.path().join("cache");
    let fetcher = Fetcher::new(
        lock_of(&runtime, &crt),
        Box::new(CopyFrom {
            dir: tmp.path().to_owned(),
            calls: Default::default(),
        }),
    );
    let headers = fetcher.headers(Ctk::V13_0, &cache).unwrap();
    let other = fetcher.headers(Ctk::V13_0, &cache).unwrap();
    let dirs = headers.include_dirs.clone();
    assert!(dirs.iter().all(|d| d.is_dir() && !d.starts_with(&cache)));
    assert!(dirs.iter().all(|d| !other.include_dirs.contains(d)));
    let clone = headers.clone();
    drop(headers);
    assert!(clone.cuda_h.is_file(), "a clone lost its headers");
    drop(clone);
    assert!(
        dirs.iter().all(|d| !d.exists()),
        "the headers outlived their value"
    );
    assert!(other.cuda_h.is_file());
}

/// A fake libclang wheel holding `library` where the pinned one keeps it, and a lock of it.
fn fake_libclang(dir: &Path, library: &str) -> (PathBuf, Lock) {
    let wheel = dir.join("libclang-fake.whl");
    make_wheel(
        &wheel,
        &[
            (LIBCLANG_IN_WHEEL, library),
            ("libclang-18.1.1.dist-info/RECORD", ""),
        ],
    );
    let lock = Lock::parse(&format!(
        "libclang==18.1.1 libclang-fake.whl {}\n",
        sha256_file(&wheel).unwrap()
    ))
    .unwrap();
    (wheel, lock)
}

/// Where the pinned libclang wheel keeps the library.
const LIBCLANG_IN_WHEEL: &str = "libclang-18.1.1.data/platlib/clang/native/libclang.so";

/// Copies one wheel, counting calls.
struct CopyOne {
    wheel: PathBuf,
    calls: std::rc::Rc<Cell<usize>>,
}

impl Fetch for CopyOne {
    fn fetch(&self, _spec: &str, dir: &Path) -> Result<(), InputError> {
        self.calls.set(self.calls.get() + 1);
        fs::copy(&self.wheel, dir.join(self.wheel.file_name().unwrap())).unwrap();
        Ok(())
    }
}

/// The libclang the cache keeps is named by its SHA-256 (the RECORD's), checked on every use,
/// and written again from the hash-checked wheel when it is missing, differs (same size or not)
/// or is not a regular file (a FIFO, which must not hang the check); what a killed write left
/// beside it is deleted by the next write. The wheel is fetched once.
#[test]
fn the_cached_libclang_is_checked_and_written_again_when_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let body = "the bytes of a library\n".repeat(200);
    let (wheel, lock) = fake_libclang(tmp.path(), &body);
    let cache = tmp.path().join("cache");
    let calls = std::rc::Rc::new(Cell::new(0));
    let fetcher = Fetcher::new(
        lock,
        Box::new(CopyOne {
            wheel,
            calls: calls.clone(),
        }),
    );
    let sha256: String = sha2::Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let library = cache.join("libclang").join(&sha256).join("libclang.so");
    let lib = fetcher.libclang(&cache).unwrap();
    assert_eq!(lib.library, library);
    assert_eq!(fs::read_to_string(&library).unwrap(), body);
    assert_eq!(
        lib.source.to_string(),
        format!("libclang==18.1.1 libclang-fake.whl:{LIBCLANG_IN_WHEEL} sha256:{sha256}")
    );
    assert_eq!(calls.get(), 1);

    let left = cache.join("libclang/.unpack-killed");
    fs::create_dir_all(left.join("deep")).unwrap();
    fs::write(left.join("deep/libclang.so"), "partial").unwrap();
    for damage in ["same size", "shorter", "missing", "a FIFO"] {
        match damage {
            "same size" => {
                let mut bytes = body.clone().into_bytes();
                bytes[100] ^= 1;
                fs::write(&library, bytes).unwrap();
            }
            "shorter" => fs::write(&library, &body[..10]).unwrap(),
            "missing" => fs::remove_file(&library).unwrap(),
            _ => {
                fs::remove_file(&library).unwrap();
                let made = Command::new("mkfifo").arg(&library).status().unwrap();
                assert!(made.success());
            }
        }
        let lib = fetcher.libclang(&cache).unwrap();
        assert_eq!(lib.library, library, "{damage}");
        assert_eq!(fs::read_to_string(&library).unwrap(), body, "{damage}");
        assert_eq!(lib.source.sha256, sha256, "{damage}");
    }
    assert_eq!(calls.get(), 1, "the wheel was fetched again");
    assert!(!left.exists(), "what a killed write left is still there");
    assert_eq!(names_in(&cache.join("libclang")), [sha256.as_str()]);
    assert_eq!(names_in(library.parent().unwrap()), ["libclang.so"]);
}

/// The names in the folder `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_download_of_another_hash_is_refused_and_not_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let (runtime, crt) = fake_cu13_wheels(tmp.path(), 13000);
    let lock = lock_of(&runtime, &crt);
    // The mirror now serves a different runtime wheel under the same name.
    make_wheel(&runtime, &[("nvidia/cu13/include/cuda.h", "changed")]);
    let cache = tmp.path().join("cache");
    let fetcher = Fetcher::new(
        lock,
        Box::new(CopyFrom {
            dir: tmp.path().to_owned(),
            calls: Default::default(),
        }),
    );
    let err = fetcher.headers(Ctk::V13_0, &cache).unwrap_err();
    assert!(
        matches!(err, InputError::DownloadMismatch { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with("downloaded nvidia_cuda_runtime-fake.whl: sha256 ")
            && msg.contains("does not match the lock")
            && msg.contains("so it was not cached"),
        "{msg}"
    );
    assert!(!cache.join("wheels/nvidia_cuda_runtime-fake.whl").exists());
    // Nothing else was kept either: no download's temporary folder, nothing unpacked.
    assert_eq!(names_in(&cache), ["wheels"]);
    assert!(names_in(&cache.join("wheels")).is_empty());

    // A cached copy of other bytes is not replaced by a download that fails the lock either.
    fs::write(cache.join("wheels/nvidia_cuda_runtime-fake.whl"), "junk").unwrap();
    let err = fetcher.headers(Ctk::V13_0, &cache).unwrap_err();
    assert!(
        matches!(err, InputError::DownloadMismatch { .. }),
        "{err:?}"
    );
    assert_eq!(
        fs::read(cache.join("wheels/nvidia_cuda_runtime-fake.whl")).unwrap(),
        b"junk"
    );
}

/// Offline, with a cached wheel of other bytes than the lock's: the error names the mismatch, not
/// only the failed download.
#[test]
fn offline_with_a_cached_wheel_of_other_bytes_names_the_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let (runtime, crt) = fake_cu13_wheels(tmp.path(), 13000);
    let cache = tmp.path().join("cache");
    fs::create_dir_all(cache.join("wheels")).unwrap();
    fs::write(cache.join("wheels/nvidia_cuda_runtime-fake.whl"), "junk").unwrap();
    let fetcher = Fetcher::new(lock_of(&runtime, &crt), Box::new(Offline));
    let msg = fetcher.headers(Ctk::V13_0, &cache).unwrap_err().to_string();
    let cached = cache.join("wheels/nvidia_cuda_runtime-fake.whl");
    assert_eq!(
        msg,
        format!(
            "{}: the cached wheel (sha256 {}) does not match the lock (sha256 {}), and downloading it again failed (offline); delete it and retry with the network, or update generator/inputs.lock if the pin changed on purpose",
            cached.display(),
            inputs::sha256_file(&cached).unwrap(),
            sha256_file(&runtime).unwrap()
        )
    );
}

/// Wheels that break their own RECORD, or hold a name twice, are refused before anything is
/// unpacked, each with the reason.
#[test]
fn wheels_that_break_their_record_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let good_h = "#define A 1\n";
    let good = format!(
        "x/a.h,{},{}\n",
        record_hash(good_h.as_bytes()),
        good_h.len()
    );
    let record = "w-1.0.dist-info/RECORD";
    for (case, entries, want) in [
        (
            "a size that lies",
            vec![
                ("x/a.h", good_h.to_owned()),
                (
                    record,
                    format!("x/a.h,{},99\n{record},,\n", record_hash(good_h.as_bytes())),
                ),
            ],
            "its RECORD says x/a.h has 99 bytes, the zip entry says 12",
        ),
        (
            "an unlisted file",
            vec![
                ("x/a.h", good_h.to_owned()),
                ("x/b.h", "evil".to_owned()),
                (record, format!("{good}{record},,\n")),
            ],
            "its RECORD does not list x/b.h",
        ),
        (
            "no RECORD",
            vec![("x/a.h", good_h.to_owned())],
            "it has no *.dist-info/RECORD",
        ),
        (
            "a file listed twice",
            vec![
                ("x/a.h", good_h.to_owned()),
                (record, format!("{good}{good}{record},,\n")),
            ],
            "its RECORD lists x/a.h twice",
        ),
        (
            "a listed file the wheel lacks",
            vec![
                ("x/a.h", good_h.to_owned()),
                (
                    record,
                    format!("{good}x/gone.h,{},0\n{record},,\n", record_hash(b"")),
                ),
            ],
            "its RECORD lists x/gone.h, which the wheel does not hold",
        ),
        (
            "bytes of another hash",
            vec![
                ("x/a.h", "#define A 2\n".to_owned()),
                (record, format!("{good}{record},,\n")),
            ],
            "entry x/a.h does not match the wheel's own RECORD",
        ),
    ] {
        let wheel = tmp.path().join("w-1.0-py3-none-any.whl");
        let entries: Vec<(String, String)> = entries
            .into_iter()
            .map(|(n, b)| (n.to_owned(), b))
            .collect();
        write_zip(&wheel, &entries);
        let dest = tmp.path().join("out");
        let msg = unpack_wheel(&wheel, "x", &dest).unwrap_err().to_string();
        assert!(msg.contains(want), "{case}: {msg}");
        let _ = fs::remove_dir_all(&dest);
    }
}
#[test]
fn pinned_headers_of_another_version_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let (runtime, crt) = fake_cu13_wheels(tmp.path(), 12090);
    let fetcher = Fetcher::new(
        lock_of(&runtime, &crt),
        Box::new(CopyFrom {
            dir: tmp.path().to_owned(),
            calls: Default::default(),
        }),
    );
    let msg = fetcher
        .headers(Ctk::V13_0, &tmp.path().join("cache"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("the pinned headers (nvidia-cuda-runtime==13.0.96, nvidia-cuda-crt==13.0.88) is CUDA 12.9 (CUDA_VERSION 12090) but --ctk 13.0 was asked for;"),
        "{msg}"
    );
}

#[test]
fn offline_without_a_cache_is_a_download_error() {
    let tmp = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(committed_lock(), Box::new(Offline));
    let msg = fetcher
        .headers(Ctk::V13_0, tmp.path())
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with("could not download nvidia-cuda-runtime==13.0.96: offline;"),
        "{msg}"
    );
}

/// A folder laid out like a toolkit root, with a `cuda.h` of `version`.
fn fake_toolkit(root: &Path, version: u32) {
    fs::create_dir_all(root.join("include/crt")).unwrap();
    fs::write(root.join("include/cuda.h"), cuda_h(version)).unwrap();
    fs::write(root.join("include/cuda_runtime_api.h"), "").unwrap();
    fs::write(root.join("include/cudaTypedefs.h"), "").unwrap();
    fs::write(root.join("include/crt/host_defines.h"), "").unwrap();
}

#[test]
fn cuda_home_without_cuda_h() {
    let tmp = tempfile::tempdir().unwrap();
    let msg = inputs::local_headers(Ctk::V12_9, tmp.path())
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        format!(
            "--cuda-home {} has no include/cuda.h; point --cuda-home at a CUDA toolkit root (the folder holding include/cuda.h)",
            tmp.path().display()
        )
    );
}

#[test]
fn cuda_home_of_another_version() {
    let tmp = tempfile::tempdir().unwrap();
    fake_toolkit(tmp.path(), 12040);
    let msg = inputs::local_headers(Ctk::V12_9, tmp.path())
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        format!(
            "--cuda-home {} is CUDA 12.4 (CUDA_VERSION 12040) but --ctk 12.9 was asked for; point --cuda-home at a CUDA 12.9 toolkit, or drop --cuda-home to use the pinned packages",
            tmp.path().display()
        )
    );
}

#[test]
fn cuda_home_missing_crt() {
    let tmp = tempfile::tempdir().unwrap();
    fake_toolkit(tmp.path(), 12090);
    fs::remove_file(tmp.path().join("include/crt/host_defines.h")).unwrap();
    let msg = inputs::local_headers(Ctk::V12_9, tmp.path())
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("no crt/host_defines.h in "), "{msg}");
}

#[test]
fn cuda_home_of_the_right_version_records_each_header() {
    let tmp = tempfile::tempdir().unwrap();
    fake_toolkit(tmp.path(), 12090);
    let headers = inputs::local_headers(Ctk::V12_9, tmp.path()).unwrap();
    assert_eq!(headers.include_dirs, vec![tmp.path().join("include")]);
    assert_eq!(headers.source.len(), 3);
    let cuda = &headers.source[0];
    assert_eq!(
        (cuda.name.as_str(), cuda.version.as_str()),
        ("cuda-home", "12.9")
    );
    assert_eq!(
        cuda.file,
        tmp.path().join("include/cuda.h").display().to_string()
    );
    assert_eq!(cuda.sha256, sha256_file(&headers.cuda_h).unwrap());
    assert!(headers.source[2].file.ends_with("cudaTypedefs.h"));
}

/// The first bytes of a 64-bit ELF file, which is what clang-sys checks before loading.
const ELF64: &[u8] = b"\x7fELF\x02\x01\x01\0rest of a library";

#[test]
fn libclang_override_warns_and_records_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("libclang.so"), ELF64).unwrap();
    let lib = inputs::local_libclang(tmp.path()).unwrap();
    let so = tmp.path().join("libclang.so");
    assert_eq!(lib.library, so);
    assert_eq!(lib.source.file, format!("override: {}", so.display()));
    assert_eq!(lib.source.sha256, sha256_file(&so).unwrap());
    let warning = lib.warning.unwrap();
    assert!(
        warning.contains("may differ from the committed"),
        "{warning}"
    );

    let err = inputs::local_libclang(&tmp.path().join("nowhere")).unwrap_err();
    assert!(err.to_string().contains("names nothing"), "{err}");
}

/// clang-sys loads versioned names too, and of several the highest version: provenance hashes
/// that file, never `unknown`; a folder holding none (or only a file that is not a 64-bit ELF
/// library, or a FIFO of that name) is an error before bindgen runs.
#[test]
fn libclang_override_hashes_the_library_clang_sys_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let msg = inputs::local_libclang(dir).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "LIBCLANG_PATH={} holds no libclang that clang-sys can load (a 64-bit ELF libclang.so, libclang-N.so, libclang.so.N or libclang-N.so.N); unset it to use the pinned libclang, or point it at a folder holding libclang.so",
            dir.display()
        )
    );
    fs::write(dir.join("libclang.so"), "not a library").unwrap();
    Command::new("mkfifo")
        .arg(dir.join("libclang.so.20"))
        .status()
        .unwrap();
    fs::write(dir.join("libclang-cpp.so.19"), ELF64).unwrap();
    assert!(inputs::local_libclang(dir).is_err());

    fs::write(dir.join("libclang.so.14"), [ELF64, b"14"].concat()).unwrap();
    fs::write(dir.join("libclang-18.so"), [ELF64, b"18"].concat()).unwrap();
    fs::write(dir.join("libclang.so.17.0"), [ELF64, b"17"].concat()).unwrap();
    let lib = inputs::local_libclang(dir).unwrap();
    let chosen = dir.join("libclang-18.so");
    assert_eq!(lib.source.file, format!("override: {}", chosen.display()));
    assert_eq!(lib.source.sha256, sha256_file(&chosen).unwrap());

    // LIBCLANG_PATH naming the library itself.
    let one = dir.join("libclang.so.14");
    let lib = inputs::local_libclang(&one).unwrap();
    assert_eq!(lib.source.sha256, sha256_file(&one).unwrap());
}

#[test]
fn no_libclang_when_pip_cannot_run() {
    let tmp = tempfile::tempdir().unwrap();
    let pip = Pip {
        python: tmp.path().join("no-python").into(),
        ..Pip::default()
    };
    let fetcher = Fetcher::new(committed_lock(), Box::new(pip));
    let msg = fetcher.libclang(tmp.path()).unwrap_err().to_string();
    assert!(msg.starts_with("no libclang obtainable: "), "{msg}");
    assert!(msg.contains("could not run"), "{msg}");
    assert!(msg.ends_with("set LIBCLANG_PATH to a folder holding libclang.so to use a local one"));
}

// The tests below fetch from PyPI through pip, as generation does.

#[test]
fn real_fetch_of_the_13_0_packages() {
    let tmp = tempfile::tempdir().unwrap();
    let config = inputs::InputConfig {
        lock: committed_lock(),
        cache: tmp.path().to_path_buf(),
        libclang_path: None,
    };
    let headers = inputs::pinned_headers(&config, Ctk::V13_0).unwrap();
    assert_eq!(headers.cuda_version, 13000);
    for h in [&headers.cuda_h, &headers.runtime_api_h, &headers.typedefs_h] {
        assert!(h.is_file(), "{}", h.display());
    }
    let lock = committed_lock();
    assert_eq!(
        headers.source[0],
        lock.get("nvidia-cuda-runtime==13.0.96")
            .unwrap()
            .provenance()
    );
    assert_eq!(
        headers.source[1],
        lock.get("nvidia-cuda-crt==13.0.88").unwrap().provenance()
    );
    // Only the include tree was unpacked, outside the cache, which keeps the wheels alone.
    assert!(!headers.include_dirs[0].join("../lib").exists());
    assert!(!headers.include_dirs[0].starts_with(tmp.path()));
    assert_eq!(names_in(tmp.path()), ["wheels"]);

    // Now offline: everything comes from the cached wheels, unpacked again into a folder of its
    // own.
    let offline = Fetcher::new(lock, Box::new(Offline));
    let again = offline.headers(Ctk::V13_0, tmp.path()).unwrap();
    assert_eq!(again.source, headers.source);
    assert_ne!(again.include_dirs, headers.include_dirs);
    assert_eq!(
        fs::read(&again.cuda_h).unwrap(),
        fs::read(&headers.cuda_h).unwrap()
    );
}

#[test]
fn real_pip_failure_names_pips_last_line() {
    let tmp = tempfile::tempdir().unwrap();
    let msg = Pip::default()
        .fetch("nvidia-cuda-crt==0.0.0", tmp.path())
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with(
            "could not download nvidia-cuda-crt==0.0.0: ERROR: No matching distribution"
        ),
        "{msg}"
    );
}

#[test]
fn real_fetch_of_the_pinned_libclang() {
    // A cache kept between runs: the wheel is 24 MB.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostcb-inputs");
    let lib = Fetcher::new(committed_lock(), Box::new(inputs::Pip::default()))
        .libclang(&cache)
        .unwrap();
    assert!(lib.library.is_file());
    assert_eq!(lib.version, "18.1.1");
    assert_eq!(lib.source.name, "libclang");
    assert_eq!(lib.source.sha256, sha256_file(&lib.library).unwrap());
    assert_eq!(lib.clang_args[0], "-isystem");
    assert!(Path::new(&lib.clang_args[1]).join("stddef.h").is_file());
    assert!(lib.warning.is_none());
}

#[test]
fn real_fetch_of_every_target() {
    // A cache kept between runs: the 12.9 crt/ comes in a 40 MB wheel.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostcb-inputs");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let config = inputs::InputConfig {
        lock: committed_lock(),
        cache,
        libclang_path: None,
    };
    for ctk in hostcb_generator::config::Config::listed_targets(root).unwrap() {
        let headers = inputs::pinned_headers(&config, ctk).unwrap();
        assert_eq!(headers.ctk, ctk);
        assert_eq!(headers.cuda_version, ctk.cuda_version());
        assert!(
            headers
                .include_dirs
                .iter()
                .any(|d| d.join("crt/host_defines.h").is_file())
        );
        assert!(headers.runtime_api_h.is_file() && headers.typedefs_h.is_file());
    }
}

/// The lock committed beside the generator.
fn committed_lock() -> Lock {
    Lock::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("inputs.lock")).unwrap()
}
