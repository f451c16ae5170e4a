//! The safe layer's error: a failed CUDA call (with the CUDA error's name and text), or a use
//! that the safe layer refuses because it could not be made sound.

/// What went wrong in a call through the safe layer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CUDA call failed, or the installed CUDA lacks the function or the library; the inner
    /// error names the function, the CUDA error's name, code and description.
    #[error(transparent)]
    Cuda(#[from] cuda_hostcb::Error),

    /// `Stream::launch` was given a one-shot closure for a stream that
    /// is capturing a graph, whose every launch would call it again.
    #[error(
        "Stream::launch takes a one-shot (FnOnce) closure, but the stream is capturing a graph \
         that calls its host functions on every launch; use Stream::launch_fn with an \
         Fn + Send + Sync closure"
    )]
    CapturingStream,

    /// The stream's capture sequence was invalidated by an earlier failure.
    #[error(
        "the stream's capture was invalidated by an earlier failed call; end the capture, discard \
         its graph and begin again"
    )]
    CaptureInvalidated,

    /// A call of this crate was made inside a host callback (or a user-object destructor),
    /// where CUDA does not permit CUDA calls.
    #[error(
        "{operation} was called inside a host callback, where CUDA calls are not permitted; \
         enqueue the work from an ordinary thread instead (e.g. after synchronising)"
    )]
    InCallback {
        /// The refused call, e.g. `Stream::launch`.
        operation: &'static str,
    },

    /// A dependency passed to a graph belongs to another graph.
    #[error(
        "a dependency node belongs to another graph; pass only nodes that this graph's add_* \
         methods returned"
    )]
    ForeignNode,

    /// There is no device with this ordinal.
    #[error(
        "there is no CUDA device {ordinal}: the driver reports {count} device(s); pass an \
         ordinal below {count}"
    )]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices `cuDeviceGetCount` reports.
        count: usize,
    },

    /// `cuGraphExecUpdate` refused the update.
    #[error(
        "the executable graph cannot be updated from this graph ({reason}); instantiate the graph \
         anew instead: {source}"
    )]
    UpdateRejected {
        /// The `CUgraphExecUpdateResult` name, e.g. `CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`.
        reason: &'static str,
        /// The failed call.
        source: cuda_hostcb::Error,
    },
}

impl Error {
    /// The `CUresult` value of a failed CUDA call, `None` for every other error.
    pub fn code(&self) -> Option<u32> {
        match self {
            Error::Cuda(e) | Error::UpdateRejected { source: e, .. } => e.code(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_errors_keep_the_name_and_text() {
        let inner = cuda_hostcb::Error::Cuda {
            api: cuda_hostcb::error::Api::Driver,
            function: "cuLaunchHostFunc",
            code: 400,
        };
        let e = Error::from(inner);
        // The inner error's display, with the code's name and description from the driver
        // (or, with no driver loaded, the phrases that say so).
        assert_eq!(e.to_string(), inner.to_string());
        assert!(
            e.to_string().starts_with("cuLaunchHostFunc failed with "),
            "{e}"
        );
        assert!(e.to_string().contains(" (400): "), "{e}");
        assert_eq!(e.code(), Some(400));
    }

    #[test]
    fn refusals_say_what_to_do() {
        assert!(
            Error::CapturingStream
                .to_string()
                .contains("use Stream::launch_fn")
        );
        let e = Error::InCallback {
            operation: "Stream::synchronize",
        };
        assert!(
            e.to_string()
                .starts_with("Stream::synchronize was called inside")
        );
        assert_eq!(e.code(), None);
        assert_eq!(
            Error::NoSuchDevice {
                ordinal: 2,
                count: 1
            }
            .to_string(),
            "there is no CUDA device 2: the driver reports 1 device(s); pass an ordinal below 1"
        );
    }
}
