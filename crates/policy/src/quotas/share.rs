//! What each node of the quota tree is entitled to now (KAI-Scheduler's fair share): from the
//! cluster down, each group's GPUs go first to its children's guaranteed quotas (up to what they
//! ask for), then what is left — less the idle guaranteed GPUs children may not lend — to the
//! children that want more, by over-quota weight, up to their borrowing limits.
//!
//! Fractional on purpose: it says which tenants hold more than their share (their jobs beyond it
//! are the ones reclaimed), not where GPUs go.

use super::tree::QuotaTree;

/// Weighted max-min fill: `x_i ≤ cap_i`, `Σ x ≤ total`, and `x_i = min(cap_i, λ·w_i)`.
pub(crate) fn fill(total: f64, items: &[(f64, f64)]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].0 > 0.0 && items[i].1 > 0.0)
        .collect();
    order.sort_by(|&a, &b| {
        (items[a].0 / items[a].1)
            .total_cmp(&(items[b].0 / items[b].1))
            .then(a.cmp(&b))
    });
    let mut out = vec![0.0; items.len()];
    let mut left = total.max(0.0);
    let mut weight: f64 = order.iter().map(|&i| items[i].1).sum();
    for &i in &order {
        let (cap, w) = items[i];
        let fair = left * w / weight;
        let give = cap.min(fair);
        out[i] = give;
        left -= give;
        weight -= w;
    }
    out
}

/// Each node's entitlement in one dimension, given each node's demand (GPUs it holds and waits
/// for, its subtree's summed) and the cluster's `capacity`.
pub(crate) fn entitlements(
    tree: &QuotaTree,
    dim: usize,
    capacity: u32,
    demand: &[f64],
) -> Vec<f64> {
    let mut share = vec![0.0; tree.nodes.len()];
    share[0] = f64::from(capacity).min(demand[0]);
    for at in 0..tree.nodes.len() {
        let children = &tree.nodes[at].children;
        if children.is_empty() {
            continue;
        }
        let quota = |c: usize| tree.nodes[c].quota[dim];
        let base: Vec<f64> = children
            .iter()
            .map(|&c| f64::from(quota(c).guaranteed).min(demand[c]))
            .collect();
        let base_sum: f64 = base.iter().sum();
        if base_sum >= share[at] {
            // Less than the guarantees (nodes lost): shared in proportion to them.
            let items: Vec<(f64, f64)> = children
                .iter()
                .zip(&base)
                .map(|(&c, &b)| (b, f64::from(quota(c).guaranteed).max(1.0)))
                .collect();
            for (&c, x) in children.iter().zip(fill(share[at], &items)) {
                share[c] = x;
            }
            continue;
        }
        let protected: f64 = children
            .iter()
            .zip(&base)
            .map(|(&c, &b)| protected_idle(quota(c).guaranteed, quota(c).lending_limit, b))
            .sum();
        let left = share[at] - base_sum - protected;
        let items: Vec<(f64, f64)> = children
            .iter()
            .zip(&base)
            .map(|(&c, &b)| {
                (
                    (f64::from(quota(c).limit()).min(demand[c]) - b).max(0.0),
                    tree.nodes[c].weight,
                )
            })
            .collect();
        for ((&c, &b), x) in children.iter().zip(&base).zip(fill(left, &items)) {
            share[c] = b + x;
        }
    }
    share
}

/// Of a node's idle guaranteed GPUs (guaranteed less `used`), those it may not lend.
pub(crate) fn protected_idle(guaranteed: u32, lending_limit: Option<u32>, used: f64) -> f64 {
    let idle = (f64::from(guaranteed) - used).max(0.0);
    idle - lending_limit.map_or(idle, |l| idle.min(f64::from(l)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quotas::tree::{GpuQuota, QuotaGroup};
    use std::collections::BTreeMap;

    fn group(
        name: &str,
        parent: Option<&str>,
        guaranteed: u32,
        borrow: Option<u32>,
        lend: Option<u32>,
        weight: f64,
    ) -> QuotaGroup {
        QuotaGroup {
            name: name.into(),
            parent: parent.map(Into::into),
            over_quota_weight: weight,
            gpus: BTreeMap::from([(
                "all".to_string(),
                GpuQuota {
                    guaranteed,
                    borrowing_limit: borrow,
                    lending_limit: lend,
                },
            )]),
        }
    }

    fn demand(tree: &QuotaTree, by_tenant: &[(&str, f64)]) -> Vec<f64> {
        let mut d = vec![0.0; tree.nodes.len()];
        for (tenant, x) in by_tenant {
            for &n in tree.path(tree.leaf(tenant)) {
                d[n] += x;
            }
            d[0] += x;
        }
        d
    }

    #[test]
    fn fill_is_weighted_max_min() {
        let x = fill(10.0, &[(2.0, 1.0), (10.0, 1.0), (10.0, 2.0)]);
        for (got, want) in x.iter().zip([2.0, 8.0 / 3.0, 16.0 / 3.0]) {
            assert!((got - want).abs() < 1e-9, "{x:?}");
        }
        assert_eq!(fill(3.0, &[(0.0, 1.0), (5.0, 1.0)]), vec![0.0, 3.0]);
    }

    #[test]
    fn guaranteed_first_then_the_rest_by_weight_up_to_limits() {
        let groups = [
            group("a", None, 4, None, None, 1.0),
            group("b", None, 4, Some(2), None, 1.0),
            group("c", None, 0, None, None, 3.0),
        ];
        let tree = QuotaTree::new(&groups, &["gpu".into()], &[16]).expect("valid");
        let d = demand(&tree, &[("a", 16.0), ("b", 16.0), ("c", 16.0)]);
        let e = entitlements(&tree, 0, 16, &d);
        let (a, b, c) = (e[tree.leaf("a")], e[tree.leaf("b")], e[tree.leaf("c")]);
        // 8 left after the guarantees, by weight 1:1:3 (b's limit, 2 more, does not bind).
        assert!(
            (b - 5.6).abs() < 1e-9 && (a - 5.6).abs() < 1e-9 && (c - 4.8).abs() < 1e-9,
            "{a} {b} {c}"
        );
    }

    #[test]
    fn idle_quota_beyond_the_lending_limit_is_not_shared() {
        let groups = [
            group("a", None, 8, None, Some(2), 1.0),
            group("b", None, 0, None, None, 1.0),
        ];
        let tree = QuotaTree::new(&groups, &["gpu".into()], &[16]).expect("valid");
        let d = demand(&tree, &[("b", 16.0)]);
        let e = entitlements(&tree, 0, 16, &d);
        assert_eq!(e[tree.leaf("b")], 10.0, "8 unguaranteed + 2 lent");
    }

    #[test]
    fn a_group_shares_its_quota_among_its_teams_before_outsiders() {
        let groups = [
            group("org", None, 8, None, None, 1.0),
            group("t1", Some("org"), 4, None, None, 1.0),
            group("q", None, 8, None, None, 1.0),
        ];
        let tree = QuotaTree::new(&groups, &["gpu".into()], &[16]).expect("valid");
        let d = demand(&tree, &[("t1", 12.0), ("q", 8.0)]);
        let e = entitlements(&tree, 0, 16, &d);
        assert_eq!(
            e[tree.leaf("t1")],
            8.0,
            "its own 4 and the org's unassigned 4"
        );
        assert_eq!(e[tree.leaf("q")], 8.0);
    }
}
