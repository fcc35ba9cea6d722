//! Themis' partial-allocation auction (Themis §4.2, after Cole, Gkatzelis and Goel's *partial
//! allocation mechanism*, EC'13), over whole GPUs.
//!
//! Each bidder states its valuation `V_i(k) > 0` for every number `k` of the offered GPUs
//! (`V_i(0)`: its value without any). The mechanism
//!
//! 1. finds the **proportional-fair** allocation `a*` — the whole-GPU split of the offered GPUs
//!    maximising `Π_i V_i(a_i)` — exactly, by dynamic programming over (bidder, GPUs used);
//! 2. gives each bidder only the fraction
//!
//!    ```text
//!      c_i = Π_{j≠i} V_j(a*_j) / Π_{j≠i} V_j(a*^{−i}_j)   ≤ 1
//!    ```
//!
//!    of its share, where `a*^{−i}` is the proportional-fair split without bidder `i`: `1 − c_i`
//!    is the hidden payment for the loss its presence causes the others, which makes truthful
//!    bidding the best strategy. The rest of its share is *leftover*, handed out by the caller.
//!
//! Exact for the small numbers Themis auctions (a few bidders, tens of GPUs): the cost is
//! `O(B · K · P)` for `B` bidders, `K` offered GPUs and `P` points where a valuation rises.
//! Ties between allocations of equal product (to the last bit) go to the one found first:
//! fewer GPUs to later bidders.

use crate::PolicyError;

/// One bidder's valuation table: `values[k]` is its value for `k` GPUs, `k = 0, 1, …`; more GPUs
/// than the table lists are worth its last entry. Values must be positive and finite.
#[derive(Clone, Debug, PartialEq)]
pub struct Bid {
    /// Value by number of GPUs, from 0.
    pub values: Vec<f64>,
}

impl Bid {
    /// A rigid gang's bid: `without` for fewer than `gpus` GPUs, `with` from `gpus` on.
    pub fn gang(gpus: u32, without: f64, with: f64) -> Self {
        let mut values = vec![without; gpus as usize];
        values.push(with);
        Bid { values }
    }

    /// The value of `k` GPUs.
    pub fn value(&self, k: u32) -> f64 {
        self.values
            .get(k as usize)
            .or(self.values.last())
            .copied()
            .unwrap_or(1.0)
    }

    /// The GPU counts (at most `limit`) where the value rises, 0 first: the only counts the
    /// proportional-fair split ever gives (fewer GPUs for the same value leave more to others).
    fn rises(&self, limit: u32) -> Vec<u32> {
        let mut points = vec![0];
        let mut best = self.value(0);
        for k in 1..=limit.min(self.values.len().saturating_sub(1) as u32) {
            let v = self.value(k);
            if v > best {
                points.push(k);
                best = v;
            }
        }
        points
    }
}

/// The auction's result.
#[derive(Clone, Debug, PartialEq)]
pub struct AuctionOutcome {
    /// GPUs each bidder gets in the proportional-fair split (bidders' order).
    pub gpus: Vec<u32>,
    /// The fraction `c_i ∈ (0, 1]` of its share each bidder keeps.
    pub fraction: Vec<f64>,
}

/// `dp[k]`: the best `Σ ln V` of some bidders using at most `k` GPUs.
fn extend(dp: &[f64], bid_logs: &[(u32, f64)], mut choice: Option<&mut Vec<u32>>) -> Vec<f64> {
    let mut next = vec![f64::NEG_INFINITY; dp.len()];
    for k in 0..dp.len() {
        for &(a, log_value) in bid_logs {
            let a_us = a as usize;
            if a_us > k {
                break;
            }
            let total = dp[k - a_us] + log_value;
            if total > next[k] {
                next[k] = total;
                if let Some(choice) = choice.as_deref_mut() {
                    choice[k] = a;
                }
            }
        }
    }
    next
}

/// Runs the partial-allocation mechanism for `offered` GPUs. Errors on a valuation that is not
/// positive and finite (a bidder would be worth nothing, or everything).
pub fn partial_allocation(bids: &[Bid], offered: u32) -> Result<AuctionOutcome, PolicyError> {
    for (i, bid) in bids.iter().enumerate() {
        if bid.values.is_empty() || bid.values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(PolicyError::Invariant(format!(
                "themis bid {i}: valuations must be positive and finite, got {:?}",
                bid.values
            )));
        }
    }
    let width = offered as usize + 1;
    let logs: Vec<Vec<(u32, f64)>> = bids
        .iter()
        .map(|b| {
            b.rises(offered)
                .into_iter()
                .map(|k| (k, b.value(k).ln()))
                .collect()
        })
        .collect();
    // Prefix tables (with choices, for the split) and suffix tables (for the splits without one).
    let mut prefix = vec![vec![0.0; width]];
    let mut choices = Vec::with_capacity(bids.len());
    for bid_logs in &logs {
        let mut choice = vec![0u32; width];
        let next = extend(&prefix[prefix.len() - 1], bid_logs, Some(&mut choice));
        prefix.push(next);
        choices.push(choice);
    }
    let mut suffix = vec![vec![0.0; width]; bids.len() + 1];
    for i in (0..bids.len()).rev() {
        suffix[i] = extend(&suffix[i + 1], &logs[i], None);
    }
    // The split: walk the choices back from all offered GPUs.
    let mut gpus = vec![0u32; bids.len()];
    let mut left = offered as usize;
    for i in (0..bids.len()).rev() {
        gpus[i] = choices[i][left];
        left -= gpus[i] as usize;
    }
    let total: f64 = bids.iter().zip(&gpus).map(|(b, &a)| b.value(a).ln()).sum();
    let fraction = (0..bids.len())
        .map(|i| {
            let others_now = total - bids[i].value(gpus[i]).ln();
            let others_alone = (0..width)
                .map(|k| prefix[i][k] + suffix[i + 1][width - 1 - k])
                .fold(f64::NEG_INFINITY, f64::max);
            (others_now - others_alone).exp().min(1.0)
        })
        .collect();
    Ok(AuctionOutcome { gpus, fraction })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn two_bidders_split_by_product_and_pay_for_the_loss_they_cause() {
        // 4 GPUs. A: V(k) = 1 + k (any GPU helps), B: a 2-GPU gang, 1 without, 3 with.
        // Splits: A4 → 5·1 = 5; A3 B0 → 4; A2 B2 → 3·3 = 9 (best); A0 B2 → 3 (or A1 B2: 6).
        let bids = [
            Bid {
                values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
            },
            Bid::gang(2, 1.0, 3.0),
        ];
        let out = partial_allocation(&bids, 4).expect("valid bids");
        assert_eq!(out.gpus, vec![2, 2]);
        // Without A, B alone gets its gang: 3; with A it has 3 too: c_A = 3/3 = 1.
        // Without B, A takes all 4: 5; with B it has 3: c_B = 3/5.
        assert!(
            close(out.fraction[0], 1.0) && close(out.fraction[1], 0.6),
            "{out:?}"
        );
    }

    #[test]
    fn three_gangs_compete_for_one_node() {
        // 8 GPUs; gangs of 4, 4 and 8 with valuations (ρ without / ρ with) 1.5, 1.2 and 2.0.
        // {4, 4}: 1.5 · 1.2 = 1.8; {8}: 2.0 (best). The 8-GPU job wins everything.
        let bids = [
            Bid::gang(4, 1.0, 1.5),
            Bid::gang(4, 1.0, 1.2),
            Bid::gang(8, 1.0, 2.0),
        ];
        let out = partial_allocation(&bids, 8).expect("valid bids");
        assert_eq!(out.gpus, vec![0, 0, 8]);
        // Its payment: without it the others would have 1.8, with it they have 1: c = 1/1.8.
        assert!(close(out.fraction[2], 1.0 / 1.8), "{out:?}");
        // The losers cost no one anything.
        assert!(close(out.fraction[0], 1.0) && close(out.fraction[1], 1.0));
        // With 12 GPUs, the 8-GPU gang and the better 4-GPU gang: 2.0 · 1.5 = 3.
        let out = partial_allocation(&bids, 12).expect("valid bids");
        assert_eq!(out.gpus, vec![4, 0, 8]);
        // Without the 8-GPU gang both 4s run (1.8) where only the first does (1.5): c = 1.5/1.8.
        // Without the first 4-GPU gang, the second would run beside the 8-GPU one (1.2 · 2.0 =
        // 2.4) where the others have 2.0 now: c = 2.0/2.4 = 1/1.2.
        assert!(close(out.fraction[2], 1.5 / 1.8), "{out:?}");
        assert!(close(out.fraction[0], 1.0 / 1.2), "{out:?}");
    }

    #[test]
    fn a_lone_bidder_pays_nothing_and_bad_bids_are_errors() {
        let out = partial_allocation(&[Bid::gang(2, 1.0, 4.0)], 3).expect("valid bid");
        assert_eq!((out.gpus, out.fraction), (vec![2], vec![1.0]));
        // A gang larger than the offer cannot win.
        let out = partial_allocation(&[Bid::gang(4, 1.0, 4.0)], 3).expect("valid bid");
        assert_eq!(out.gpus, vec![0]);
        assert!(
            partial_allocation(
                &[Bid {
                    values: vec![0.0, 1.0]
                }],
                1
            )
            .is_err()
        );
        assert!(partial_allocation(&[Bid { values: vec![] }], 1).is_err());
        assert!(
            partial_allocation(
                &[Bid {
                    values: vec![1.0, f64::INFINITY]
                }],
                1
            )
            .is_err()
        );
        assert_eq!(
            partial_allocation(&[], 5).expect("nobody bids").gpus,
            Vec::<u32>::new()
        );
    }
}
