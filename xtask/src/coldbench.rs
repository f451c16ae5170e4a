//! `cargo xtask bench-cold`: what a program using one target costs to build, side by side with
//! cudarc's driver and runtime `sys` layer, and the sizes and layout-oracle counts per target.
//!
//! Two one-file programs call `cuLaunchHostFunc` and `cudaLaunchHostFunc` (only when given an
//! argument; the build is what is measured): one through `cuda-hostcb` with one target's
//! feature and no default features (the default, `all-targets`, builds every target), one
//! through `cudarc` (crates.io, [`CUDARC`], without default features: `std`, `driver`,
//! `runtime`, the CUDA version feature of the same target, `dynamic-loading`, so
//! neither links CUDA at build time). Each is built from an empty `CARGO_TARGET_DIR`, interleaved,
//! in the dev and the release profile, after an untimed `cargo fetch`, under `/usr/bin/time`
//! for wall, user and system time. cudarc has no feature for its `sys` layer alone: `driver`
//! also compiles its safe driver layer, which is what a cudarc user builds.
//!
//! Then the sealed source of every target of the generated crate (MB, per file kind) next to
//! cudarc's two `sys` files, and the layout oracle's counts for the committed targets
//! ([`crate::layout::oracle`]). `--generated DIR` builds against another copy of the generated
//! crate, such as the scratch copy `cargo xtask layout` leaves behind.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, anyhow, bail};
use hostcb_generator::Ctk;
use hostcb_generator::config::Config;
use hostcb_generator::emit;

/// The cudarc release compared.
const CUDARC: &str = "0.19.10";

/// The newest CUDA version cudarc 0.19 has a feature for (`cuda-13040`).
const CUDARC_NEWEST: u32 = 13040;

/// Options of `cargo xtask bench-cold`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The target the programs use (default: the newest of generator/targets.txt that cudarc
    /// has a feature for).
    #[arg(long)]
    ctk: Option<String>,
    /// Cold builds of each program per profile, interleaved.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Leave out the layout oracle's counts (which build the generated crate's tests).
    #[arg(long)]
    skip_layout: bool,
    /// Build against the generated crate in DIR instead of generated/ (e.g. the whole-header
    /// copy `cargo xtask layout` leaves in target/xtask-layout/work/generated).
    #[arg(long, value_name = "DIR")]
    generated: Option<PathBuf>,
}

/// One timed build.
#[derive(Clone, Copy, Debug)]
struct Times {
    wall: f64,
    user: f64,
    sys: f64,
}

/// Runs the benchmark and prints its tables on stdout.
pub fn run(ws: &Config, args: Args) -> anyhow::Result<()> {
    let listed = ws.targets.clone();
    let ctk = match &args.ctk {
        Some(c) => c.parse::<Ctk>()?,
        None => *listed
            .iter()
            .rev()
            .find(|c| c.cuda_version() <= CUDARC_NEWEST)
            .ok_or_else(|| {
                anyhow!("no target of generator/targets.txt is one cudarc {CUDARC} supports")
            })?,
    };
    if args.generated.is_none() && !listed.contains(&ctk) {
        bail!("--ctk {ctk} is not a target of generator/targets.txt");
    }
    if ctk.cuda_version() > CUDARC_NEWEST {
        bail!("cudarc {CUDARC} has no feature for CUDA {ctk}; pick a target up to 13.4");
    }
    let generated = match &args.generated {
        Some(dir) => std::fs::canonicalize(dir)
            .with_context(|| format!("--generated {}: no such folder", dir.display()))?,
        None => ws.out.clone(),
    };
    if !generated.join("Cargo.toml").is_file() {
        bail!(
            "--generated {}: no Cargo.toml of the generated crate there",
            generated.display()
        );
    }
    let base = ws.root.join("target/xtask-bench-cold");
    let ours = project(
        &base.join("ours"),
        &format!(
            "cuda-hostcb = {{ path = \"{}\", default-features = false, features = [\"{}\"] }}",
            generated.display(),
            ctk.feature()
        ),
        &format!(
            "use cuda_hostcb::{}::{{driver as cu, runtime as rt}};",
            ctk.module()
        ),
    )?;
    let cudarc = project(
        &base.join("cudarc"),
        &format!(
            "cudarc = {{ version = \"={CUDARC}\", default-features = false, features = [\"std\", \"driver\", \"runtime\", \"cuda-{}\", \"dynamic-loading\"] }}",
            ctk.cuda_version()
        ),
        "use cudarc::{driver::sys as cu, runtime::sys as rt};",
    )?;
    let load_before = load_average();
    let mut rows: Vec<(String, Vec<Times>)> = Vec::new();
    for release in [false, true] {
        let profile = if release { "release" } else { "dev" };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for rep in 1..=args.reps {
            eprintln!(
                "bench-cold: {profile}, rep {rep}/{}: cuda-hostcb",
                args.reps
            );
            a.push(cold_build(&ours, release)?);
            eprintln!("bench-cold: {profile}, rep {rep}/{}: cudarc", args.reps);
            b.push(cold_build(&cudarc, release)?);
        }
        rows.push((
            format!("cuda-hostcb, feature {} ({profile})", ctk.feature()),
            a,
        ));
        rows.push((
            format!(
                "cudarc {CUDARC}, driver+runtime, cuda-{} ({profile})",
                ctk.cuda_version()
            ),
            b,
        ));
    }
    let load_after = load_average();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "cargo xtask bench-cold --reps {}: a program calling cuLaunchHostFunc and cudaLaunchHostFunc, CTK {ctk}",
        args.reps
    );
    let _ = writeln!(
        out,
        "machine: {} CPU(s), shared with other work (load average {load_before} before, {load_after} after): compare CPU (user+sys), not only wall",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(out, "cuda-hostcb from {}", generated.display());
    let _ = writeln!(
        out,
        "| cold build (empty CARGO_TARGET_DIR) | wall s | user s | sys s | user+sys s |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    let mut medians = Vec::new();
    for (label, times) in &rows {
        let m = median(times);
        medians.push(m);
        let _ = writeln!(
            out,
            "| {label} | {:.1} | {:.1} | {:.1} | {:.1} |",
            m.wall,
            m.user,
            m.sys,
            m.user + m.sys
        );
    }
    for (i, profile) in ["dev", "release"].iter().enumerate() {
        let (a, b) = (medians[2 * i], medians[2 * i + 1]);
        let _ = writeln!(
            out,
            "| ours / cudarc ({profile}) | {:.2} | | | {:.2} |",
            a.wall / b.wall,
            (a.user + a.sys) / (b.user + b.sys)
        );
    }
    out.push('\n');
    let present: Vec<Ctk> = ws
        .lock()
        .targets()
        .into_iter()
        .filter(|c| generated.join(emit::target_dir(*c)).is_dir())
        .collect();
    out.push_str(&sizes(&generated, &present)?);
    print!("{out}");
    if !args.skip_layout {
        let (table, _) = crate::layout::oracle(ws, &crate::layout::Args::of("all"))?;
        println!();
        print!("{table}");
    }
    Ok(())
}

/// Writes a one-file program at `dir` depending on `dependency` (a `[dependencies]` line) and
/// fetches its dependencies (untimed).
fn project(dir: &Path, dependency: &str, import: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir.join("src"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    // `[workspace]`: its own workspace, not a member of the one around target/.
    let manifest = format!(
        "[package]\nname = \"hostcb-bench-cold\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\n{dependency}\n\n[workspace]\n"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    let main = format!(
        "{import}\n\nunsafe extern \"C\" fn on_host(_: *mut core::ffi::c_void) {{}}\n\n\
         fn main() {{\n    \
         // Called only when given an argument: the build is what is measured.\n    \
         if std::env::args().count() > 1 {{\n        \
         use core::ptr::null_mut;\n        \
         unsafe {{\n            \
         let _ = cu::cuInit(0);\n            \
         let _ = cu::cuLaunchHostFunc(null_mut(), Some(on_host), null_mut());\n            \
         let _ = rt::cudaLaunchHostFunc(null_mut(), Some(on_host), null_mut());\n        \
         }}\n    }}\n}}\n"
    );
    std::fs::write(dir.join("src/main.rs"), main)?;
    let status = cargo(dir)
        .args(["fetch", "--quiet"])
        .status()
        .map_err(|e| anyhow!("cannot run cargo ({e})"))?;
    if !status.success() {
        bail!(
            "cargo fetch failed in {} (crates.io reachable?)",
            dir.display()
        );
    }
    Ok(dir.to_path_buf())
}

fn cargo(dir: &Path) -> Command {
    let mut cmd = crate::cargo();
    cmd.current_dir(dir);
    cmd
}

/// Builds the program at `dir` from an empty target folder under `/usr/bin/time`.
fn cold_build(dir: &Path, release: bool) -> anyhow::Result<Times> {
    let target = dir.join("target");
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .with_context(|| format!("cannot remove {}", target.display()))?;
    }
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new("/usr/bin/time");
    cmd.envs(crate::foreign_variables())
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", &target)
        .args(["-f", "hostcb-time %e %U %S"])
        .arg(program)
        .args(["build", "--offline", "--quiet"]);
    if release {
        cmd.arg("--release");
    }
    let out = cmd.output().map_err(|e| {
        anyhow!("cannot run /usr/bin/time (GNU time; e.g. apt-get install time): {e}")
    })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("the cold build in {} failed:\n{stderr}", dir.display());
    }
    let line = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("hostcb-time "))
        .ok_or_else(|| anyhow!("/usr/bin/time printed no times: {stderr}"))?;
    let v: Vec<f64> = line
        .split(' ')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("/usr/bin/time printed '{line}': {e}"))?;
    let [wall, user, sys] = v[..] else {
        bail!("/usr/bin/time printed '{line}'");
    };
    Ok(Times { wall, user, sys })
}

/// The median of each column.
fn median(times: &[Times]) -> Times {
    let mid = |f: fn(&Times) -> f64| {
        let mut v: Vec<f64> = times.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Times {
        wall: mid(|t| t.wall),
        user: mid(|t| t.user),
        sys: mid(|t| t.sys),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split(' ').next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The sealed source of each target in the generated crate at `generated`, and cudarc's `sys`
/// files.
fn sizes(generated: &Path, targets: &[Ctk]) -> anyhow::Result<String> {
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let size = |path: &Path| -> anyhow::Result<u64> {
        Ok(std::fs::metadata(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .len())
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| sealed source | driver.rs MB | runtime.rs MB | layout.rs MB | all of the target MB |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    for &ctk in targets {
        let dir = generated.join(emit::target_dir(ctk));
        let mut total = 0;
        for name in emit::TARGET_FILES {
            total += size(&dir.join(name))?;
        }
        let _ = writeln!(
            out,
            "| CTK {ctk} | {:.2} | {:.2} | {:.2} | {:.2} |",
            mb(size(&dir.join("driver.rs"))?),
            mb(size(&dir.join("runtime.rs"))?),
            mb(size(&dir.join("layout.rs"))?),
            mb(total)
        );
    }
    let registry = home_registry_file(&format!("cudarc-{CUDARC}"));
    if let Some(dir) = registry {
        let d = size(&dir.join("src/driver/sys/mod.rs"))?;
        let r = size(&dir.join("src/runtime/sys/mod.rs"))?;
        let _ = writeln!(
            out,
            "| cudarc {CUDARC} sys (every CUDA version in one file, cfg'd) | {:.2} | {:.2} | | {:.2} |",
            mb(d),
            mb(r),
            mb(d + r)
        );
    }
    Ok(out)
}

/// The unpacked crate `name` in cargo's registry, if there.
fn home_registry_file(name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry/src");
    std::fs::read_dir(src)
        .ok()?
        .flatten()
        .map(|e| e.path().join(name))
        .find(|p| p.is_dir())
}
