//! Host-callback cost on a GPU, measured the way the C reference (`hostcb_c.c`) measures it, for
//! every generated target and API and for the safe layer, with every callback counted.
//!
//! - B1: enqueue N host functions on one stream and synchronise; microseconds per callback.
//! - B2: replay a captured one-host-node graph M = N/10 times; microseconds per launch.
//! - B3: replay a graph of 64 chained host nodes M/64 + 1 times; microseconds per node.
//!
//! A run whose callback count is wrong is an error ([`BenchError::WrongCount`]), never a figure.
//! The executable is `benches/hostcb.rs`; [`gpu`] decides whether it runs, skips or fails.

pub mod figures;
pub mod gpu;
pub mod report;
pub mod safe;

use std::fmt;

/// One of the three figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Host functions enqueued on a stream.
    B1,
    /// A captured one-host-node graph replayed.
    B2,
    /// A graph of 64 chained host nodes replayed.
    B3,
}

impl Figure {
    /// All figures, in order.
    pub const ALL: [Figure; 3] = [Figure::B1, Figure::B2, Figure::B3];

    /// What one unit of the figure is: `callback`, `launch` or `node`.
    pub fn per(self) -> &'static str {
        match self {
            Figure::B1 => "callback",
            Figure::B2 => "launch",
            Figure::B3 => "node",
        }
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Figure::B1 => "B1",
            Figure::B2 => "B2",
            Figure::B3 => "B3",
        })
    }
}

/// How much work each figure does; the defaults are the C reference's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// B1's host functions per repetition (the C reference's `n`).
    pub n: u64,
    /// Timed repetitions per figure (after one untimed warm-up repetition).
    pub reps: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            n: 100_000,
            reps: 5,
        }
    }
}

/// Nodes in B3's chain.
pub const CHAIN: u64 = 64;

impl Sizes {
    /// B2's graph launches per repetition: `n / 10`, as in the C reference.
    pub fn b2_launches(&self) -> u64 {
        self.n / 10
    }

    /// B3's graph launches per repetition: `n / 10 / 64 + 1`, as in the C reference.
    pub fn b3_launches(&self) -> u64 {
        self.b2_launches() / CHAIN + 1
    }

    /// Callbacks expected from one timed repetition of `figure`.
    pub fn expected_calls(&self, figure: Figure) -> u64 {
        match figure {
            Figure::B1 => self.n,
            Figure::B2 => self.b2_launches(),
            Figure::B3 => self.b3_launches() * CHAIN,
        }
    }
}

/// Why a figure has no value.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BenchError {
    /// The callbacks that ran are not the callbacks enqueued: the timing is discarded.
    #[error(
        "{figure}: {got} host functions ran where {expected} were enqueued; the timing is discarded (a callback was lost or ran twice: check the bindings' host-function path)"
    )]
    WrongCount {
        /// The figure.
        figure: Figure,
        /// Callbacks enqueued.
        expected: u64,
        /// Callbacks counted after synchronising.
        got: u64,
    },
    /// A CUDA call failed (or is not available in the installed driver or runtime).
    #[error(transparent)]
    Cuda(#[from] cuda_hostcb::Error),
    /// A call through the safe layer failed.
    #[error("safe layer: {0}")]
    Safe(#[from] cuda_hostcb_safe::Error),
    /// The command line asks for something impossible.
    #[error("{0}")]
    Usage(String),
}

/// Checks a callback count: `Ok` only when exactly `expected` callbacks ran.
pub fn check_count(figure: Figure, expected: u64, got: u64) -> Result<(), BenchError> {
    if got == expected {
        Ok(())
    } else {
        Err(BenchError::WrongCount {
            figure,
            expected,
            got,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_c_reference() {
        let s = Sizes::default();
        assert_eq!(s.b2_launches(), 10_000);
        assert_eq!(s.b3_launches(), 157);
        assert_eq!(s.expected_calls(Figure::B1), 100_000);
        assert_eq!(s.expected_calls(Figure::B2), 10_000);
        assert_eq!(s.expected_calls(Figure::B3), 157 * 64);
    }

    #[test]
    fn a_wrong_count_is_an_error() {
        assert!(check_count(Figure::B1, 100, 100).is_ok());
        let err = check_count(Figure::B2, 100, 99).unwrap_err();
        assert!(matches!(
            err,
            BenchError::WrongCount {
                figure: Figure::B2,
                expected: 100,
                got: 99
            }
        ));
        assert!(
            err.to_string()
                .starts_with("B2: 99 host functions ran where 100")
        );
        assert!(
            check_count(Figure::B3, 64, 128).is_err(),
            "twice is wrong too"
        );
    }
}
