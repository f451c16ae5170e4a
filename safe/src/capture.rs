//! Stream capture: the mode a capture begins with and the state a stream is in, the same for
//! every target.

/// How a capture interacts with other threads' potentially unsafe CUDA calls
/// (`CUstreamCaptureMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CaptureMode {
    /// Unsafe calls are refused on every thread while any global capture is under way.
    #[default]
    Global,
    /// Unsafe calls are refused on the capturing thread only.
    ThreadLocal,
    /// No calls are refused.
    Relaxed,
}

impl CaptureMode {
    /// The `CUstreamCaptureMode` value.
    pub(crate) const fn raw(self) -> u32 {
        match self {
            CaptureMode::Global => 0,
            CaptureMode::ThreadLocal => 1,
            CaptureMode::Relaxed => 2,
        }
    }
}

/// Whether a stream is capturing a graph (`CUstreamCaptureStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureStatus {
    /// The stream runs its work.
    None,
    /// The stream records its work into a graph.
    Active,
    /// The capture failed; it must be ended and its graph discarded.
    Invalidated,
}

impl CaptureStatus {
    /// The status of a `CUstreamCaptureStatus` value; unknown values count as invalidated, the
    /// state in which nothing may be enqueued.
    pub(crate) const fn from_raw(raw: u32) -> CaptureStatus {
        match raw {
            0 => CaptureStatus::None,
            1 => CaptureStatus::Active,
            _ => CaptureStatus::Invalidated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_cuda_h() {
        assert_eq!(CaptureMode::Global.raw(), 0);
        assert_eq!(CaptureMode::ThreadLocal.raw(), 1);
        assert_eq!(CaptureMode::Relaxed.raw(), 2);
        assert_eq!(CaptureStatus::from_raw(0), CaptureStatus::None);
        assert_eq!(CaptureStatus::from_raw(1), CaptureStatus::Active);
        assert_eq!(CaptureStatus::from_raw(2), CaptureStatus::Invalidated);
    }
}
