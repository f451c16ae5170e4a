//! Results: repetitions summarised (min / median / max), one machine-readable `RESULT` line per
//! figure, and a table for people.

use std::fmt::Write as _;

use crate::{BenchError, Figure};

/// The timed repetitions of one figure, in microseconds per unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Every repetition's value, sorted ascending.
    pub samples: Vec<f64>,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none.
    pub fn new(mut samples: Vec<f64>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        Some(Summary { samples })
    }

    /// The smallest value.
    pub fn min(&self) -> f64 {
        self.samples[0]
    }

    /// The largest value.
    pub fn max(&self) -> f64 {
        self.samples[self.samples.len() - 1]
    }

    /// The median (the mean of the two middle values for an even count).
    pub fn median(&self) -> f64 {
        let n = self.samples.len();
        if n % 2 == 1 {
            self.samples[n / 2]
        } else {
            (self.samples[n / 2 - 1] + self.samples[n / 2]) / 2.0
        }
    }
}

/// One figure of one row: its summary, or why there is none.
pub type Outcome = Result<Summary, BenchError>;

/// One (target, API) row: a value or an error for each figure it measured.
#[derive(Debug)]
pub struct Row {
    /// `ctk_13_0`, ...
    pub target: String,
    /// `driver`, `runtime` or `safe`.
    pub api: String,
    /// The figures, in order.
    pub figures: Vec<(Figure, Outcome)>,
}

impl Row {
    /// Whether any figure failed.
    pub fn failed(&self) -> bool {
        self.figures.iter().any(|(_, o)| o.is_err())
    }

    /// One line per figure: `RESULT <target> <api> <figure> <median µs> min=.. max=.. reps=..`,
    /// or `RESULT <target> <api> <figure> ERROR <message>`.
    pub fn result_lines(&self) -> String {
        let mut out = String::new();
        for (figure, outcome) in &self.figures {
            let _ = match outcome {
                Ok(s) => writeln!(
                    out,
                    "RESULT {} {} {} {:.3} min={:.3} max={:.3} reps={}",
                    self.target,
                    self.api,
                    figure,
                    s.median(),
                    s.min(),
                    s.max(),
                    s.samples.len()
                ),
                Err(e) => writeln!(
                    out,
                    "RESULT {} {} {} ERROR {e}",
                    self.target, self.api, figure
                ),
            };
        }
        out
    }
}

/// The table of `rows`: one line per row, one column per figure (median, then min-max).
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:<8} {:>24} {:>24} {:>24}",
        "target", "api", "B1 us/callback", "B2 us/launch", "B3 us/node"
    );
    for row in rows {
        let _ = write!(out, "{:<9} {:<8}", row.target, row.api);
        for figure in Figure::ALL {
            let cell = match row.figures.iter().find(|(f, _)| *f == figure) {
                Some((_, Ok(s))) => format!("{:.3} ({:.3}-{:.3})", s.median(), s.min(), s.max()),
                Some((_, Err(_))) => "ERROR".to_owned(),
                None => "-".to_owned(),
            };
            let _ = write!(out, " {cell:>24}");
        }
        out.push('\n');
    }
    for row in rows {
        let mut said: Vec<String> = Vec::new();
        for (_, outcome) in &row.figures {
            if let Err(e) = outcome {
                // A failure before the first figure (e.g. no runtime library) fails all three.
                let line = format!("error: {} {}: {e}", row.target, row.api);
                if !said.contains(&line) {
                    let _ = writeln!(out, "{line}");
                    said.push(line);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let s = Summary::new(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min(), s.median(), s.max()), (1.0, 2.0, 3.0));
        let s = Summary::new(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.median(), 2.5);
        assert!(Summary::new(Vec::new()).is_none());
    }

    #[test]
    fn result_lines_and_table() {
        let row = Row {
            target: "ctk_13_0".into(),
            api: "driver".into(),
            figures: vec![
                (Figure::B1, Ok(Summary::new(vec![2.95, 3.0, 2.9]).unwrap())),
                (
                    Figure::B2,
                    Err(crate::check_count(Figure::B2, 10, 9).unwrap_err()),
                ),
            ],
        };
        let lines = row.result_lines();
        assert_eq!(
            lines.lines().next().unwrap(),
            "RESULT ctk_13_0 driver B1 2.950 min=2.900 max=3.000 reps=3"
        );
        assert!(
            lines
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("RESULT ctk_13_0 driver B2 ERROR B2: 9 host functions ran")
        );
        assert!(row.failed());
        let t = table(&[row]);
        assert!(t.contains("2.950 (2.900-3.000)"), "{t}");
        assert!(t.contains("ERROR"), "{t}");
        assert!(
            t.contains("error: ctk_13_0 driver: B2: 9 host functions"),
            "{t}"
        );
    }
}
