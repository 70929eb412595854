//! Pricing: the estimated cost of tokens, from a table shipped as data
//! (`data/pricing.json`, with its date and source) that a user file
//! (`$ABCD_HOME/pricing.json`, same shape) overrides row by row.
//!
//! Owns: the table shape, the lookup (longest model-id prefix, the user's
//! rows first) and the cost of a by-model token breakdown.
//!
//! Must never: fetch anything, or price a model it has no row for (it is
//! reported as unpriced instead).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::fsutil;
use crate::telemetry::Tokens;

/// The shipped table.
pub const SHIPPED: &str = include_str!("../data/pricing.json");

/// Cap on the user's pricing file.
const USER_FILE_CAP: u64 = 1 << 20;

#[derive(Debug, Error)]
pub enum PricingError {
    #[error("pricing file {path}: {why}; fix it (same shape as data/pricing.json: as_of, source, models[prefix, input, output, cache_write, cache_read]) or remove it")]
    BadFile { path: String, why: String },
}

/// USD per million tokens for model ids starting with `prefix`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub prefix: String,
    pub input: f64,
    pub output: f64,
    pub cache_write: f64,
    pub cache_read: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Table {
    pub as_of: String,
    pub source: String,
    #[serde(default)]
    pub note: String,
    pub models: Vec<Price>,
}

/// Where a table came from, as reported with a cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Provenance {
    pub as_of: String,
    pub source: String,
    /// The user's file, when one overrides the shipped rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_as_of: Option<String>,
}

/// The tables in force: the user's rows first, then the shipped ones.
#[derive(Debug, Clone)]
pub struct Pricing {
    user: Option<Table>,
    shipped: Table,
    pub provenance: Provenance,
}

fn shipped() -> Table {
    serde_json::from_str(SHIPPED).expect("the shipped pricing table parses (tested)")
}

impl Pricing {
    /// The shipped table, overridden by `user_file` when it exists.
    pub fn load(user_file: &Path) -> Result<Pricing, PricingError> {
        let shipped = shipped();
        let user =
            match fsutil::guarded_read(user_file, USER_FILE_CAP) {
                Ok(b) => Some(serde_json::from_slice::<Table>(&b).map_err(|e| {
                    PricingError::BadFile {
                        path: user_file.display().to_string(),
                        why: e.to_string(),
                    }
                })?),
                Err(e) if e.is_not_found() => None,
                Err(e) => {
                    return Err(PricingError::BadFile {
                        path: user_file.display().to_string(),
                        why: e.to_string(),
                    })
                }
            };
        Ok(Pricing::from_tables(user, shipped, user_file))
    }

    fn from_tables(user: Option<Table>, shipped: Table, user_file: &Path) -> Pricing {
        let provenance = Provenance {
            as_of: shipped.as_of.clone(),
            source: shipped.source.clone(),
            user_file: user.as_ref().map(|_| user_file.display().to_string()),
            user_as_of: user.as_ref().map(|u| u.as_of.clone()),
        };
        Pricing {
            user,
            shipped,
            provenance,
        }
    }

    /// The row for `model`: the longest matching prefix of the user's
    /// table, else of the shipped one.
    pub fn price(&self, model: &str) -> Option<&Price> {
        fn best<'t>(t: &'t Table, model: &str) -> Option<&'t Price> {
            t.models
                .iter()
                .filter(|p| model.starts_with(&p.prefix))
                .max_by_key(|p| p.prefix.len())
        }
        self.user
            .as_ref()
            .and_then(|u| best(u, model))
            .or_else(|| best(&self.shipped, model))
    }

    /// Cost of a by-model breakdown.
    pub fn cost(&self, by_model: &BTreeMap<String, Tokens>) -> Cost {
        let mut c = Cost {
            pricing: self.provenance.clone(),
            ..Cost::default()
        };
        for (model, t) in by_model {
            match self.price(model) {
                Some(p) => {
                    let usd = (t.input as f64 * p.input
                        + t.output as f64 * p.output
                        + t.cache_creation_input as f64 * p.cache_write
                        + t.cache_read_input as f64 * p.cache_read)
                        / 1e6;
                    c.usd += usd;
                    c.by_model_usd.insert(model.clone(), usd);
                }
                None => {
                    c.unpriced_models.push(model.clone());
                    c.unpriced_tokens += t.total;
                }
            }
        }
        c
    }
}

/// An estimated cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cost {
    pub usd: f64,
    pub by_model_usd: BTreeMap<String, f64>,
    /// Models without a row: their tokens are not in `usd`.
    pub unpriced_models: Vec<String>,
    pub unpriced_tokens: u64,
    pub pricing: Provenance,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_and_the_longest_prefix_wins() {
        let t = shipped();
        assert!(!t.as_of.is_empty() && t.source.starts_with("https://"));
        let p = Pricing::from_tables(None, t, Path::new("/nonexistent"));
        assert_eq!(p.price("claude-opus-4-5-20251101").unwrap().input, 5.0);
        assert_eq!(p.price("claude-opus-4-20250514").unwrap().input, 15.0);
        assert_eq!(p.price("claude-opus-5-5").unwrap().input, 4.0);
        assert!(p.price("gpt-4o").is_none());
        let mut by = BTreeMap::new();
        by.insert(
            "claude-haiku-4-5-20251001".to_owned(),
            Tokens {
                input: 1_000_000,
                output: 1_000_000,
                cache_creation_input: 0,
                cache_read_input: 1_000_000,
                total: 3_000_000,
            },
        );
        by.insert(
            "other".to_owned(),
            Tokens {
                total: 5,
                ..Tokens::default()
            },
        );
        let c = p.cost(&by);
        assert!((c.usd - 6.1).abs() < 1e-9, "{c:?}");
        assert_eq!(c.unpriced_models, vec!["other".to_owned()]);
        assert_eq!(c.unpriced_tokens, 5);
    }

    #[test]
    fn a_user_row_overrides_the_shipped_one() {
        let user: Table = serde_json::from_str(
            r#"{"as_of":"2030-01-01","source":"mine","models":[{"prefix":"claude-haiku","input":2,"output":0,"cache_write":0,"cache_read":0}]}"#,
        )
        .unwrap();
        let p = Pricing::from_tables(Some(user), shipped(), Path::new("/u/pricing.json"));
        assert_eq!(p.price("claude-haiku-4-5-20251001").unwrap().input, 2.0);
        assert_eq!(p.price("claude-opus-4-5").unwrap().input, 5.0);
        assert_eq!(p.provenance.user_as_of.as_deref(), Some("2030-01-01"));
    }
}
