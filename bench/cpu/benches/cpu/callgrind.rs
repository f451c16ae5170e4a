//! Instruction counts: runs the measuring children under callgrind and reads its dumps.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use crate::child_command;
use crate::paths::Path as BenchPath;

unsafe extern "C" {
    fn cref_on_valgrind() -> i32;
    fn cref_cg_dump(name: *const std::ffi::c_char);
}

/// Whether this process runs under valgrind.
pub fn on_valgrind() -> bool {
    // SAFETY: a client request; outside valgrind it returns 0.
    unsafe { cref_on_valgrind() > 0 }
}

/// Writes callgrind's counters since the last dump as a dump named `name`, and zeroes them
/// (nothing outside valgrind).
pub fn dump(name: &str) {
    let name = CString::new(name).expect("a path name has no NUL");
    // SAFETY: a client request with a NUL-terminated name.
    unsafe { cref_cg_dump(name.as_ptr()) }
}

/// The options every counting run uses: count only inside the `hostcb_one_*` functions.
fn valgrind(out_file: &Path) -> Vec<String> {
    vec![
        "valgrind".to_owned(),
        "--tool=callgrind".to_owned(),
        "--collect-atstart=no".to_owned(),
        "--toggle-collect=hostcb_one_*".to_owned(),
        format!("--callgrind-out-file={}", out_file.display()),
    ]
}

/// Runs `me` under callgrind with `child` arguments; returns the named dumps' totals.
fn run(me: &Path, dir: &Path, tag: &str, child: &[&str]) -> Result<BTreeMap<String, u64>, String> {
    let out_file = dir.join(format!("{tag}.out"));
    let out = child_command(me, &valgrind(&out_file))
        .args(child)
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}); install valgrind, or pass --time-only"))?;
    if !out.status.success() {
        return Err(format!(
            "the counting child ({tag}) failed under callgrind ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut totals = BTreeMap::new();
    let prefix = format!("{tag}.out");
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).map_err(|e| format!("{name}: {e}"))?;
        if let Some((dump, total)) = parse_dump(&text) {
            totals.insert(dump, total);
        }
    }
    Ok(totals)
}

/// The trigger name and the total instruction count of one callgrind dump, when a client
/// request wrote it.
fn parse_dump(text: &str) -> Option<(String, u64)> {
    let mut name = None;
    let mut total = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("desc: Trigger: Client Request: ") {
            name = Some(rest.trim().to_owned());
        } else if let Some(rest) = line
            .strip_prefix("summary: ")
            .or_else(|| line.strip_prefix("totals: "))
        {
            total = rest.split_whitespace().next().and_then(|t| t.parse().ok());
        }
    }
    Some((name?, total.unwrap_or(0)))
}

/// Counts every steady-state path (`n` calls each, in one process) and every first-call path
/// (a process each); returns instructions per call by path name.
pub fn count(me: &Path, n: u64, first: &[BenchPath]) -> Result<Vec<(String, f64)>, String> {
    // SAFETY: a client request (outside valgrind it returns 0; -1 without valgrind.h).
    if unsafe { cref_on_valgrind() } < 0 {
        return Err("this bench was built without valgrind's callgrind.h (/usr/include/valgrind), so it cannot count; install valgrind and rebuild, or pass --time-only".to_owned());
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("hostcb-cpu-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!("cpu bench: counting instructions under callgrind ({n} calls per path) ...");
    let result = (|| {
        let n_text = n.to_string();
        let steady = run(
            me,
            &dir,
            "steady",
            &["--count-n", &n_text, "--child", "count"],
        )?;
        let mut per_call: Vec<(String, f64)> = steady
            .into_iter()
            .filter(|(name, _)| name != "warm-up")
            .map(|(name, total)| (name, total as f64 / n as f64))
            .collect();
        for path in first {
            let counted = run(me, &dir, path.name, &["--child", "first", path.name])?;
            let total = counted
                .get(path.name)
                .ok_or_else(|| format!("callgrind wrote no dump for {}", path.name))?;
            per_call.push((path.name.to_owned(), *total as f64));
        }
        Ok(per_call)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
