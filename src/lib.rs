//! abcd: a local, secret-redacted, append-only corpus of AI coding sessions.
//!
//! See ARCHITECTURE.md for the code map.

pub mod clock;
pub mod fsutil;
pub mod hook;
pub mod lineage;
pub mod record;
pub mod repo;
pub mod store;
