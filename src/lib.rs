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
pub mod capture;
pub mod cli;
pub mod corpus;
pub mod drain;
pub mod event;
pub mod history;
pub mod journal_cli;
pub mod projection;
pub mod stage;
