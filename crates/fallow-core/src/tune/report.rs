//! The documents both front ends serialise from a [`Tuning`]: one
//! budget's [`Answer`] (the CLI's `--json` lists them under `budgets`,
//! its best setting with the command that reproduces it), and the flat
//! [`BudgetReport`] of one budget that Python's `fallow.tune` returns.
//! One definition, so the keys cannot drift apart.

use super::{Budget, Choice, Guarantee, KnobInfo, SearchMode, SizeRow, Tuned, Tuning};
use serde::Serialize;

/// The answer for one budget, its best setting as `C` (a [`Choice`], or
/// a front end's wrapper of one).
#[derive(Debug, Serialize)]
pub struct Answer<'a, C> {
    /// The budget.
    pub budget: &'a Budget,
    /// The budget as written back (`1ms`, `5%`).
    pub budget_text: &'a str,
    /// The best setting over all sizes (`None`: nothing meets the budget).
    pub best: Option<C>,
    /// Every candidate size.
    pub sizes: &'a [SizeRow],
}

impl Tuned {
    /// This budget's answer, its best setting turned into `C` by `best`.
    pub fn answer<'a, C>(&'a self, best: impl FnOnce(&'a Choice) -> C) -> Answer<'a, C> {
        Answer {
            budget: &self.budget,
            budget_text: &self.budget_text,
            best: self.best.as_ref().map(best),
            sizes: &self.sizes,
        }
    }
}

/// One budget's answer with the search that found it and the baseline
/// (no BG work), as one flat document.
#[derive(Debug, Serialize)]
pub struct BudgetReport<'a> {
    /// Registry name of the policy.
    pub policy: &'a str,
    /// The knob searched.
    pub knob: &'a Option<KnobInfo>,
    /// Maximum delay of one request, s, if given.
    pub max_delay_s: Option<f64>,
    /// The answer: `budget`, `budget_text`, `best`, `sizes`.
    #[serde(flatten)]
    pub answer: Answer<'a, &'a Choice>,
    /// The run without BG work.
    pub baseline: &'a Choice,
    /// Distinct settings evaluated (for every budget together).
    pub simulations: u64,
    /// What the answer is guaranteed to be.
    pub guarantee: Guarantee,
    /// The search mode asked for.
    pub search: SearchMode,
}

impl Tuning {
    /// One [`BudgetReport`] per budget, in the order given.
    pub fn reports<'a>(&'a self, baseline: &'a Choice) -> Vec<BudgetReport<'a>> {
        self.budgets
            .iter()
            .map(|b| BudgetReport {
                policy: &self.policy,
                knob: &self.knob,
                max_delay_s: self.max_delay_s,
                answer: b.answer(|c| c),
                baseline,
                simulations: self.simulations,
                guarantee: self.guarantee,
                search: self.search,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn choice(spec: &str, throughput: f64) -> Choice {
        Choice {
            policy: "fixed-wait".into(),
            spec: spec.into(),
            params: BTreeMap::new(),
            request_size_bytes: 65_536,
            bg_size_bytes: 65_536,
            bg_throughput_bytes_per_s: throughput,
            fg_mean_added_delay_s: 0.0,
            fg_slowdown: 0.0,
            fg_collision_rate: 0.0,
            idle_used_fraction: 0.0,
            knob: None,
        }
    }

    #[test]
    fn one_flat_report_per_budget_in_order() {
        let budgets = Budget::parse_list("1ms,5%").unwrap();
        let tuned = |b: &Budget, text: &str, best: Option<Choice>| Tuned {
            budget: *b,
            budget_text: text.into(),
            best,
            sizes: vec![],
        };
        let t = Tuning {
            policy: "fixed-wait".into(),
            knob: None,
            max_delay_s: Some(0.5),
            budgets: vec![
                tuned(&budgets[0], "1ms", Some(choice("fixed-wait:t=1s", 7.0))),
                tuned(&budgets[1], "5%", None),
            ],
            simulations: 12,
            method: "simulation",
            guarantee: Guarantee::CoarseGrid,
            search: SearchMode::Auto,
            exact_work_visits: None,
            exact_estimate_s: None,
            exact_estimate_basis: None,
            walked_visits: None,
            exact_bound_bytes_per_s: None,
        };
        let base = choice("none", 0.0);
        let docs: Vec<serde_json::Value> = t
            .reports(&base)
            .iter()
            .map(|r| serde_json::to_value(r).unwrap())
            .collect();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["budget_text"], "1ms");
        assert_eq!(docs[0]["best"]["spec"], "fixed-wait:t=1s");
        assert_eq!(docs[0]["best"]["bg_throughput_bytes_per_s"], 7.0);
        assert_eq!(docs[1]["budget_text"], "5%");
        assert!(docs[1]["best"].is_null());
        for d in &docs {
            // flat: the answer's keys beside the search's, no `answer` key
            assert!(d.get("answer").is_none());
            assert_eq!(d["policy"], "fixed-wait");
            assert_eq!(d["max_delay_s"], 0.5);
            assert_eq!(d["baseline"]["spec"], "none");
            assert_eq!(d["simulations"], 12);
            assert_eq!(d["sizes"], serde_json::json!([]));
        }
    }
}
