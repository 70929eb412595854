//! Hook-side helpers shared by the `abcd hook …` verbs.

pub mod payload;
pub mod run;
pub mod stdin;
