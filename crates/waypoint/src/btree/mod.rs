//! B+-trees over buffer-managed pages.
pub mod node;
