//! Placeholder: being written (simulated storage).
