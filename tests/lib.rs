//! Shared harness for the GPU regression tests.
