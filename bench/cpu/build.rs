//! Builds, with gcc, into this package's `OUT_DIR` (under `target/`): the stub driver
//! `stub/libcuda.so.1` (and the `libcuda.so` link a driver install has), the stub runtimes
//! `stub/libcudart.so.12` and `stub/libcudart.so.13` (and `libcudart.so`, to the 13 one), and
//! `cref.o`, the C side of the CPU bench, which only the bench executable links (not the tests).
//! The CPU bench and the tests over the stub driver (tests/stub/) find the stubs through
//! `HOSTCB_STUB_DIR`, set here at compile time.

use std::path::{Path, PathBuf};
use std::process::Command;

fn gcc(args: &[&str], what: &str) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".to_owned());
    let status = Command::new(&cc).args(args).status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "error: {cc} failed ({s}) building {what}; the bench needs a working C compiler (gcc)"
        ),
        Err(e) => panic!(
            "error: cannot run {cc} to build {what} ({e}); install gcc, or set CC to a C compiler"
        ),
    }
}

fn link(dir: &Path, target: &str, name: &str) {
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    std::os::unix::fs::symlink(target, &path)
        .unwrap_or_else(|e| panic!("error: cannot link {} to {target}: {e}", path.display()));
}

fn main() {
    let src = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("stub");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let stub = out.join("stub");
    std::fs::create_dir_all(&stub).expect("create the stub folder in OUT_DIR");
    for file in ["cuda_stub.c", "cudart_stub.c", "cref.c"] {
        println!("cargo:rerun-if-changed=stub/{file}");
    }
    println!("cargo:rerun-if-env-changed=CC");
    let flags = ["-O2", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror"];
    let s = |p: &Path| p.to_str().expect("UTF-8 build paths").to_owned();

    let driver = stub.join("libcuda.so.1");
    let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    args.extend([
        "-shared".into(),
        "-fvisibility=hidden".into(),
        "-Wl,-soname,libcuda.so.1".into(),
    ]);
    args.extend(["-o".into(), s(&driver), s(&src.join("cuda_stub.c"))]);
    gcc(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        "the stub driver",
    );
    link(&stub, "libcuda.so.1", "libcuda.so");

    for (major, version) in [(12, 12090), (13, 13000)] {
        let name = format!("libcudart.so.{major}");
        let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        args.extend([
            "-shared".into(),
            "-fvisibility=hidden".into(),
            format!("-Wl,-soname,{name}"),
            format!("-DSTUB_RUNTIME_VERSION={version}"),
        ]);
        args.extend([
            "-o".into(),
            s(&stub.join(&name)),
            s(&src.join("cudart_stub.c")),
        ]);
        gcc(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            "a stub runtime",
        );
    }
    link(&stub, "libcudart.so.13", "libcudart.so");

    // The callgrind client requests need valgrind's header; without it the bench still times,
    // and its --count/--check say why they cannot run.
    let valgrind = Path::new("/usr/include/valgrind/callgrind.h").is_file();
    let cref = out.join("cref.o");
    let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    if valgrind {
        args.push("-DHOSTCB_HAVE_VALGRIND".into());
    }
    args.extend(["-c".into(), "-o".into(), s(&cref), s(&src.join("cref.c"))]);
    gcc(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        "the C side of the CPU bench",
    );
    println!("cargo:rustc-link-arg-benches={}", s(&cref));
    println!("cargo:rustc-env=HOSTCB_STUB_DIR={}", s(&stub));
}
