//! Shared code of the host-callback benchmark.
