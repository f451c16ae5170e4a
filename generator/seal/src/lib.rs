//! Seals.
