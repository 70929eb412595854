//! abcd: a local, secret-redacted, append-only corpus of AI coding sessions.
//!
//! See ARCHITECTURE.md for the code map.

pub mod bigfile;
pub mod body;
pub mod capture;
pub mod cli;
pub mod clock;
pub mod corpus;
pub mod doctor;
pub mod drain;
pub mod event;
pub mod export;
pub mod forget;
pub mod forgotten;
pub mod fsutil;
pub mod fuzz;
pub mod history;
pub mod hook;
pub mod ingest;
pub mod journal_cli;
pub mod lane_move;
pub mod lineage;
pub mod migrate;
pub mod naming;
pub mod overview;
pub mod pool;
pub mod predecessor;
pub mod pricing;
pub mod projection;
pub mod reconstruct;
pub mod record;
pub mod render;
pub mod repo;
pub mod search;
pub mod setup;
pub mod shape;
pub mod stage;
pub mod staging_view;
pub mod store;
pub mod summary;
pub mod sync;
pub mod telemetry;
pub mod transcript;
pub mod upgrade;
