//! The instruction budgets of `bench/cpu/budgets.txt` and the target ratios, checked against the
//! counts callgrind took.
//!
//! Two kinds of lines (`#` starts a comment):
//!
//! ```text
//! ours_driver_launch 30                         # at most 30 instructions per call
//! ours_driver_launch <= 1.0 x cudarc_launch     # at most 1.0 times that path's count
//! ```

use std::collections::BTreeMap;

/// One line of the budgets file.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// `path max`: at most `max` instructions per call.
    Budget { path: String, max: f64 },
    /// `path <= factor x other`: at most `factor` times `other`'s instructions per call.
    Ratio {
        path: String,
        factor: f64,
        other: String,
    },
}

/// Parses the budgets file; an error names the line.
pub fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let number = |w: &str| {
            w.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| format!("line {}: {w:?} is not a positive number: {raw:?}", i + 1))
        };
        let rule = match words.as_slice() {
            [path, max] => Rule::Budget {
                path: path.to_string(),
                max: number(max)?,
            },
            [path, "<=", factor, "x", other] => Rule::Ratio {
                path: path.to_string(),
                factor: number(factor)?,
                other: other.to_string(),
            },
            _ => {
                return Err(format!(
                    "line {}: expected `<path> <max>` or `<path> <= <factor> x <path>`, found {raw:?}",
                    i + 1
                ));
            }
        };
        rules.push(rule);
    }
    Ok(rules)
}

/// The ratio rules of the checked-in file, for the report of a plain run.
pub fn targets() -> Vec<Rule> {
    parse(include_str!("../../budgets.txt"))
        .expect("bench/cpu/budgets.txt parses")
        .into_iter()
        .filter(|r| matches!(r, Rule::Ratio { .. }))
        .collect()
}

/// The targets with both measures: instructions (exact) and ns (noisy; shown, never checked).
pub fn report_targets(
    rules: &[Rule],
    figures: &BTreeMap<String, (Option<f64>, Option<f64>)>,
) -> String {
    let mut out = String::from("\ntargets (ours <= factor x reference):\n");
    for rule in rules {
        let Rule::Ratio {
            path,
            factor,
            other,
        } = rule
        else {
            continue;
        };
        let (Some(a), Some(b)) = (figures.get(path), figures.get(other)) else {
            out.push_str(&format!("  {path} <= {factor} x {other}: not measured\n"));
            continue;
        };
        let mut parts = Vec::new();
        if let (Some(x), Some(y)) = (a.1, b.1) {
            let r = x / y;
            let verdict = if r <= *factor { "met" } else { "MISSED" };
            parts.push(format!("instructions {x:.1} / {y:.1} = {r:.2} {verdict}"));
        }
        if let (Some(x), Some(y)) = (a.0, b.0) {
            let r = x / y;
            let verdict = if r <= *factor { "met" } else { "missed" };
            parts.push(format!("ns {x:.2} / {y:.2} = {r:.2} {verdict}"));
        }
        out.push_str(&format!(
            "  {path} <= {factor} x {other}: {}\n",
            parts.join("; ")
        ));
    }
    out
}

/// Checks every rule against `counts` (instructions per call by path); returns the report and
/// whether every rule holds. A path a rule names that was not counted breaks the rule.
pub fn check(rules: &[Rule], counts: &BTreeMap<String, f64>) -> (String, bool) {
    let mut out = String::from("\ninstruction budgets (bench/cpu/budgets.txt):\n");
    let mut ok = true;
    let mut line = |good: bool, text: String| {
        ok &= good;
        out.push_str(&format!(
            "  {} {text}\n",
            if good { "ok  " } else { "FAIL" }
        ));
    };
    for rule in rules {
        match rule {
            Rule::Budget { path, max } => match counts.get(path) {
                Some(got) => line(
                    *got <= *max,
                    format!("{path}: {got:.1} instructions per call, budget {max}"),
                ),
                None => line(false, format!("{path}: not counted (budget {max})")),
            },
            Rule::Ratio {
                path,
                factor,
                other,
            } => match (counts.get(path), counts.get(other)) {
                (Some(a), Some(b)) => line(
                    *a <= factor * b,
                    format!(
                        "{path} <= {factor} x {other}: {a:.1} vs {b:.1} ({:.2}x)",
                        a / b
                    ),
                ),
                _ => line(false, format!("{path} <= {factor} x {other}: not counted")),
            },
        }
    }
    if ok {
        out.push_str("cpu bench: every budget and target holds\n");
    } else {
        out.push_str(
            "error: cpu bench: an instruction budget or target is broken (see FAIL above); a \
             slower path is a regression to fix, a deliberate change updates \
             bench/cpu/budgets.txt\n",
        );
    }
    (out, ok)
}
