//! Learned co-location speeds (issue 11, item 8: Gandiva's introspection with real data).
//!
//! ```text
//!   progress report ──► alone?  ── settled ──► the job's solo speed on its GPU type (EWMA)
//!                   └─► sharing with one job of a known type, same GPUs, settled
//!                         ──► shared ÷ solo ──► PairTable[(type, partner type, GPUs, GPU type)] (EWMA)
//!   PairTable ──► PairSpeeds (fractions of each job's solo speed) ──► the policy
//! ```
//!
//! A job says what it is with `job_type` at submission. The daemon keeps, per job, its speed
//! alone on each GPU type (from reports made while it held its GPUs alone) and records, per
//! ordered pair of job types, the *normalized speed* of the first while sharing the same GPUs
//! with the second: shared throughput ÷ solo throughput, each sample clamped to [0, 1] (sharing
//! never makes a job faster than running alone; more is noise or a lie), smoothed as an
//! exponentially weighted mean (¼ new, ¾ old — the daemon's smoothing for speeds elsewhere).
//! Reports made in the first [`SETTLE_S`] seconds after the job (re)started or after the set
//! of jobs on its GPUs changed are ignored (start-up, data loading, a partner's own start). A
//! shared report made before the job's solo speed on that type is known waits (a few per job)
//! until it is.
//!
//! **Job types are namespaced by tenant** (`team-a/resnet50`): an entry is keyed by the
//! reporting job's tenant and type, and only that job's own reports write it. So a tenant's
//! reports never change what the scheduler believes about another tenant's job types — tenant
//! input is untrusted, and a shared `resnet50` would let any tenant poison (or read) how every
//! other tenant's `resnet50` is paired. The price is that two tenants running the same model
//! learn its pairs separately. A pair of jobs of two tenants has two entries, one per
//! direction, each written by its own tenant's job; the policy gets the lower of the two in both
//! directions ([`PairTable::speeds`]), so one tenant's reports can make such a pair look worse
//! (its job is half of it) but never better than the other tenant's reports say it is for its
//! job.
//!
//! The table is bounded per tenant ([`MAX_ENTRIES_PER_TENANT`]; a tenant's least recently
//! updated entry makes room for its new one, so no tenant can evict another's) and persisted in
//! the store (table `pairs`), so a restart keeps what was learned.

use arbiter_policy::mechanisms::colocation::PairSpeeds;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Seconds after a run starts, or after the jobs on its GPUs change, during which its reports
/// are not used for the table.
pub const SETTLE_S: u64 = 10;

/// Weight of a new sample in the smoothed values.
pub const NEW_SAMPLE_WEIGHT: f64 = 0.25;

/// Entries one tenant's job types may have in the table.
pub const MAX_ENTRIES_PER_TENANT: usize = 1024;

/// Shared measurements a job keeps while its solo speed on that GPU type is unknown.
pub const MAX_PENDING_PER_JOB: usize = 8;

/// Longest `job_type`, bytes.
pub const MAX_JOB_TYPE_BYTES: usize = 128;

/// Why `job_type` is not acceptable, if it is not: 1 to 128 bytes of `A-Z a-z 0-9 . _ - + : /`.
pub fn job_type_problem(job_type: &str) -> Option<String> {
    if job_type.is_empty() || job_type.len() > MAX_JOB_TYPE_BYTES {
        return Some(format!("must be 1-{MAX_JOB_TYPE_BYTES} bytes"));
    }
    if let Some(c) = job_type
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-+:/".contains(*c)))
    {
        return Some(format!(
            "`{}` is not allowed (letters, digits and . _ - + : / only)",
            c.escape_debug()
        ));
    }
    None
}

/// A job type as the policy sees it: `tenant/job_type`. Tenant names contain no `/`, so two
/// tenants' types never meet.
pub fn namespaced(tenant: &str, job_type: &str) -> String {
    format!("{tenant}/{job_type}")
}

/// One job type of one tenant.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TypeOf {
    /// The tenant.
    pub tenant: String,
    /// Its job type.
    pub job_type: String,
}

/// What an entry of the table is about: jobs of `job` (gangs of `gpus`) sharing GPUs of type
/// `gpu_type` with a job of `partner`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PairKey {
    /// The job type whose speed the entry is (its tenant's jobs write it).
    pub job: TypeOf,
    /// The type of the job it shared with.
    pub partner: TypeOf,
    /// GPUs of each job (a pair shares one gang's GPUs).
    pub gpus: u32,
    /// GPU type.
    pub gpu_type: String,
}

/// What was learned for one [`PairKey`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairEntry {
    /// Speed while sharing ÷ speed alone, smoothed.
    pub normalized_speed: f64,
    /// Samples that went into it.
    pub samples: u64,
    /// Unix seconds of the latest sample.
    pub updated_unix_s: i64,
}

/// A shared measurement waiting for the job's solo speed on its GPU type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingShared {
    /// GPU type it shared.
    pub gpu_type: String,
    /// The partner's type.
    pub partner: TypeOf,
    /// Steps per second while sharing (smoothed).
    pub throughput: f64,
}

/// What the daemon measured of one job for the table (kept with the job).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobMeasurements {
    /// Steps per second alone, per GPU type, from settled reports (smoothed).
    #[serde(default)]
    pub solo: BTreeMap<String, f64>,
    /// Shared measurements waiting for a solo speed (at most [`MAX_PENDING_PER_JOB`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingShared>,
}

impl JobMeasurements {
    /// Whether nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.solo.is_empty() && self.pending.is_empty()
    }
}

/// The smoothed value after `sample`.
pub fn smooth(old: Option<f64>, sample: f64) -> f64 {
    match old {
        Some(old) => (1.0 - NEW_SAMPLE_WEIGHT) * old + NEW_SAMPLE_WEIGHT * sample,
        None => sample,
    }
}

/// A change of the table, to be persisted.
#[derive(Clone, Debug, PartialEq)]
pub enum PairWrite {
    /// Written (new or updated).
    Put(PairKey, PairEntry),
    /// Evicted.
    Delete(PairKey),
}

/// The learned table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairTable {
    entries: BTreeMap<PairKey, PairEntry>,
}

impl PairTable {
    /// A table holding `entries` (as read from the store).
    pub fn from_entries(entries: impl IntoIterator<Item = (PairKey, PairEntry)>) -> Self {
        PairTable {
            entries: entries.into_iter().collect(),
        }
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> &BTreeMap<PairKey, PairEntry> {
        &self.entries
    }

    /// One entry.
    pub fn get(&self, key: &PairKey) -> Option<&PairEntry> {
        self.entries.get(key)
    }

    /// Adds a sample of `key`'s normalized speed (clamped to [0, 1]; a non-finite one is
    /// ignored) taken at `now_unix_s`. Returns what to persist: the entry, and the entry of the
    /// same tenant evicted to make room for a new one. What it replaced is pushed on `undo`
    /// (for [`PairTable::undo`] when the store refuses the change).
    pub fn record(
        &mut self,
        key: PairKey,
        sample: f64,
        now_unix_s: i64,
        undo: &mut Vec<(PairKey, Option<PairEntry>)>,
    ) -> Vec<PairWrite> {
        if !sample.is_finite() {
            return Vec::new();
        }
        let sample = sample.clamp(0.0, 1.0);
        let mut writes = Vec::new();
        if !self.entries.contains_key(&key) {
            let tenant = &key.job.tenant;
            let mine = self.entries.iter().filter(|(k, _)| k.job.tenant == *tenant);
            if mine.clone().count() >= MAX_ENTRIES_PER_TENANT
                && let Some(oldest) = mine
                    .min_by_key(|(_, e)| e.updated_unix_s)
                    .map(|(k, _)| k.clone())
            {
                let evicted = self.entries.remove(&oldest);
                undo.push((oldest.clone(), evicted));
                writes.push(PairWrite::Delete(oldest));
            }
        }
        let old = self.entries.get(&key);
        undo.push((key.clone(), old.copied()));
        let entry = PairEntry {
            normalized_speed: smooth(old.map(|e| e.normalized_speed), sample),
            samples: old.map_or(0, |e| e.samples).saturating_add(1),
            updated_unix_s: now_unix_s,
        };
        self.entries.insert(key.clone(), entry);
        writes.push(PairWrite::Put(key, entry));
        writes
    }

    /// Puts back what [`PairTable::record`] replaced (latest first).
    pub fn undo(&mut self, undo: Vec<(PairKey, Option<PairEntry>)>) {
        for (key, old) in undo.into_iter().rev() {
            match old {
                Some(entry) => self.entries.insert(key, entry),
                None => self.entries.remove(&key),
            };
        }
    }

    /// The table as the policy takes it: each entry a fraction of the job's solo speed on its
    /// GPU type (indices by `gpu_types`, the cluster's type names; entries of other types are
    /// left out), with `assumed` as the fraction of pairs not measured (see
    /// [`PairSpeeds::solo_fractions`]).
    ///
    /// A pair of two tenants' types is given to the policy at the lower of its two jobs'
    /// fractions, each as its own tenant's reports say (or `assumed`, where not measured), in
    /// both directions: so the pair counts as good only as far as it is good for both. Taken
    /// as reported, one tenant's job could claim to lose nothing next to another tenant's job
    /// (a normalized speed of 1) and so keep that job paired with it however much the pair
    /// slows it — Gandiva keeps a pair whose two fractions sum to 1 or more, and 1 + anything is
    /// 1 or more, even when the victim's own reports say it gets nothing. With the lower of the
    /// two, a tenant's reports can only make a pair with another tenant's type look worse (which
    /// is its right: its job is half of the pair), never better than the other tenant's own
    /// reports say it is for that tenant's job.
    pub fn speeds(&self, gpu_types: &[String], assumed: Option<f64>) -> PairSpeeds {
        let mut speeds = PairSpeeds::solo_fractions(assumed);
        for (key, entry) in &self.entries {
            let Some(k) = gpu_types.iter().position(|t| *t == key.gpu_type) else {
                continue;
            };
            let job = (namespaced(&key.job.tenant, &key.job.job_type), key.gpus);
            let partner = (
                namespaced(&key.partner.tenant, &key.partner.job_type),
                key.gpus,
            );
            let mut fraction = entry.normalized_speed;
            if key.job.tenant != key.partner.tenant {
                let mirror = PairKey {
                    job: key.partner.clone(),
                    partner: key.job.clone(),
                    gpus: key.gpus,
                    gpu_type: key.gpu_type.clone(),
                };
                if let Some(theirs) = self
                    .entries
                    .get(&mirror)
                    .map(|e| e.normalized_speed)
                    .or(assumed)
                {
                    fraction = fraction.min(theirs);
                }
            }
            speeds.insert_fraction(job, partner, k, gpu_types.len(), fraction);
        }
        speeds
    }

    /// The entries `viewer` may see (`None`: the admin, all of them; a tenant: those of its own
    /// job types, with a partner of another tenant shown only as such), as JSON rows.
    ///
    /// In key order, except that a tenant's rows with another tenant's partner are ordered by
    /// what the tenant sees of them (after its own partners, then by GPU type, time of the
    /// latest sample, ...): in key order they would tell it how the hidden partners' tenant and
    /// type names sort, against each other and against its own name.
    pub fn rows(&self, viewer: Option<&str>) -> Vec<serde_json::Value> {
        let mut visible: Vec<(&PairKey, &PairEntry)> = self
            .entries
            .iter()
            .filter(|(k, _)| viewer.is_none_or(|v| v == k.job.tenant))
            .collect();
        if let Some(v) = viewer {
            let hidden = |k: &PairKey| k.partner.tenant != v;
            visible.sort_by(|(a, x), (b, y)| {
                (
                    &a.job.job_type,
                    hidden(a),
                    if hidden(a) {
                        ""
                    } else {
                        a.partner.job_type.as_str()
                    },
                    a.gpus,
                    &a.gpu_type,
                    x.updated_unix_s,
                    x.samples,
                )
                    .cmp(&(
                        &b.job.job_type,
                        hidden(b),
                        if hidden(b) {
                            ""
                        } else {
                            b.partner.job_type.as_str()
                        },
                        b.gpus,
                        &b.gpu_type,
                        y.updated_unix_s,
                        y.samples,
                    ))
                    .then(x.normalized_speed.total_cmp(&y.normalized_speed))
            });
        }
        visible
            .into_iter()
            .map(|(k, e)| {
                let mut row = serde_json::json!({
                    "tenant": k.job.tenant,
                    "job_type": k.job.job_type,
                    "gpus": k.gpus,
                    "gpu_type": k.gpu_type,
                    "normalized_speed": e.normalized_speed,
                    "samples": e.samples,
                    "updated_unix_s": e.updated_unix_s,
                });
                if viewer.is_none_or(|v| v == k.partner.tenant) {
                    row["partner_tenant"] = serde_json::json!(k.partner.tenant);
                    row["partner_job_type"] = serde_json::json!(k.partner.job_type);
                } else {
                    row["partner_other_tenant"] = serde_json::json!(true);
                }
                row
            })
            .collect()
    }
}

/// Who a running job shares its GPUs with, for the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// Nobody: it holds its GPUs alone.
    Alone,
    /// Exactly one other job, holding exactly the same GPUs.
    Pair(u32),
    /// Anything else (a group of three or more, GPUs partly shared): not a pair measurement.
    Other,
}

/// Who holds the GPUs `mine` of job `id` besides it, among the jobs `holding` (each job's id and
/// the GPUs it holds).
pub fn sharing_of<'a>(
    id: u32,
    mine: &[u32],
    holding: impl Iterator<Item = (u32, &'a [u32])>,
) -> (Sharing, Vec<u32>) {
    let others: Vec<(u32, &[u32])> = holding
        .filter(|(j, g)| *j != id && g.iter().any(|x| mine.contains(x)))
        .collect();
    let ids = others.iter().map(|(j, _)| *j).collect();
    let sharing = match others.as_slice() {
        [] => Sharing::Alone,
        [(other, gpus)] if same_set(gpus, mine) => Sharing::Pair(*other),
        _ => Sharing::Other,
    };
    (sharing, ids)
}

fn same_set(a: &[u32], b: &[u32]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// Who shared a job's GPUs when it reported, as [`learn`] takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Beside<'a> {
    /// Nobody.
    Alone,
    /// One job without a job type.
    Untyped,
    /// One job of this type.
    Typed(&'a TypeOf),
}

/// What a settled report of a job teaches, given its measurements so far: its new measurements
/// and the table samples (key, normalized speed) it yields.
///
/// `me` is the job's own type (`None`: it has none, and teaches the table nothing), `gpus` its
/// gang size, `gpu_type` the type it runs on, `beside` who shared its GPUs.
pub fn learn(
    measured: &JobMeasurements,
    me: Option<&TypeOf>,
    gpus: u32,
    gpu_type: &str,
    beside: Beside<'_>,
    throughput: f64,
) -> (JobMeasurements, Vec<(PairKey, f64)>) {
    let mut next = measured.clone();
    let mut samples = Vec::new();
    let Some(me) = me else { return (next, samples) };
    let key = |partner: &TypeOf, gpu_type: &str| PairKey {
        job: me.clone(),
        partner: partner.clone(),
        gpus,
        gpu_type: gpu_type.to_string(),
    };
    match beside {
        Beside::Alone => {
            let solo = smooth(next.solo.get(gpu_type).copied(), throughput);
            next.solo.insert(gpu_type.to_string(), solo);
            // Shared measurements that waited for this solo speed.
            let (ready, waiting): (Vec<PendingShared>, Vec<PendingShared>) =
                next.pending.drain(..).partition(|p| p.gpu_type == gpu_type);
            next.pending = waiting;
            samples.extend(
                ready
                    .into_iter()
                    .map(|p| (key(&p.partner, gpu_type), p.throughput / solo)),
            );
        }
        Beside::Untyped => {}
        Beside::Typed(partner) => match next.solo.get(gpu_type) {
            Some(&solo) if solo > 0.0 => samples.push((key(partner, gpu_type), throughput / solo)),
            _ => {
                if let Some(p) = next
                    .pending
                    .iter_mut()
                    .find(|p| p.gpu_type == gpu_type && p.partner == *partner)
                {
                    p.throughput = smooth(Some(p.throughput), throughput);
                } else if next.pending.len() < MAX_PENDING_PER_JOB {
                    next.pending.push(PendingShared {
                        gpu_type: gpu_type.to_string(),
                        partner: partner.clone(),
                        throughput,
                    });
                }
            }
        },
    }
    (next, samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(tenant: &str, job_type: &str) -> TypeOf {
        TypeOf {
            tenant: tenant.into(),
            job_type: job_type.into(),
        }
    }

    fn key(a: &str, b: &str) -> PairKey {
        PairKey {
            job: ty("t", a),
            partner: ty("t", b),
            gpus: 1,
            gpu_type: "a100".into(),
        }
    }

    #[test]
    fn the_estimate_is_an_exponentially_weighted_mean_of_clamped_samples() {
        let mut table = PairTable::default();
        table.record(key("A", "B"), 0.4, 10, &mut Vec::new());
        assert_eq!(
            table
                .get(&key("A", "B"))
                .map(|e| (e.normalized_speed, e.samples)),
            Some((0.4, 1)),
            "the first sample is the estimate"
        );
        table.record(key("A", "B"), 0.8, 20, &mut Vec::new());
        let e = table.get(&key("A", "B")).copied().expect("entry");
        assert!(
            (e.normalized_speed - 0.5).abs() < 1e-12,
            "¾ · 0.4 + ¼ · 0.8 = 0.5: {e:?}"
        );
        assert_eq!((e.samples, e.updated_unix_s), (2, 20));
        // A sample above 1 (noise, or a lie) counts as 1; below 0 as 0; non-finite not at all.
        table.record(key("A", "B"), 7.0, 30, &mut Vec::new());
        assert!((table.get(&key("A", "B")).expect("entry").normalized_speed - 0.625).abs() < 1e-12);
        assert!(
            table
                .record(key("A", "B"), f64::NAN, 40, &mut Vec::new())
                .is_empty()
        );
        table.record(key("C", "B"), -3.0, 30, &mut Vec::new());
        assert_eq!(
            table.get(&key("C", "B")).expect("entry").normalized_speed,
            0.0
        );
    }

    #[test]
    fn solo_speed_first_then_shared_reports_become_normalized_samples() {
        let me = ty("t", "A");
        let partner = ty("t", "B");
        // Alone at 100 steps/s: a solo speed, no sample.
        let (m, samples) = learn(
            &JobMeasurements::default(),
            Some(&me),
            1,
            "a100",
            Beside::Alone,
            100.0,
        );
        assert_eq!(
            (m.solo.get("a100").copied(), samples.len()),
            (Some(100.0), 0)
        );
        // Sharing with B at 60 steps/s: 0.6.
        let (m, samples) = learn(&m, Some(&me), 1, "a100", Beside::Typed(&partner), 60.0);
        assert_eq!(samples, vec![(key("A", "B"), 0.6)]);
        // On another GPU type its solo speed is unknown: the shared speed waits for it ...
        let (m, samples) = learn(&m, Some(&me), 1, "v100", Beside::Typed(&partner), 20.0);
        assert!(samples.is_empty());
        assert_eq!(m.pending.len(), 1);
        // ... and becomes a sample once it runs alone there.
        let (m, samples) = learn(&m, Some(&me), 1, "v100", Beside::Alone, 50.0);
        assert!(m.pending.is_empty());
        assert_eq!(
            samples,
            vec![(
                PairKey {
                    gpu_type: "v100".into(),
                    ..key("A", "B")
                },
                0.4
            )]
        );
        // A partner without a type, or a job without one, teaches nothing.
        assert!(
            learn(&m, Some(&me), 1, "a100", Beside::Untyped, 10.0)
                .1
                .is_empty()
        );
        assert!(
            learn(&m, None, 1, "a100", Beside::Typed(&partner), 10.0)
                .1
                .is_empty()
        );
    }

    #[test]
    fn pending_measurements_are_bounded_per_job() {
        let me = ty("t", "A");
        let mut m = JobMeasurements::default();
        for i in 0..100 {
            m = learn(
                &m,
                Some(&me),
                1,
                "a100",
                Beside::Typed(&ty("t", &format!("P{i}"))),
                1.0,
            )
            .0;
        }
        assert_eq!(m.pending.len(), MAX_PENDING_PER_JOB);
    }

    #[test]
    fn a_tenant_that_fills_its_share_of_the_table_evicts_only_its_own_entries() {
        let mut table = PairTable::default();
        let theirs = PairKey {
            job: ty("a", "resnet"),
            partner: ty("a", "lm"),
            gpus: 1,
            gpu_type: "a100".into(),
        };
        table.record(theirs.clone(), 0.7, 0, &mut Vec::new());
        for i in 0..(MAX_ENTRIES_PER_TENANT as i64 + 50) {
            let writes = table.record(
                PairKey {
                    job: ty("b", &format!("junk{i}")),
                    partner: ty("b", "x"),
                    gpus: 1,
                    gpu_type: "a100".into(),
                },
                0.1,
                1 + i,
                &mut Vec::new(),
            );
            assert!(
                writes
                    .iter()
                    .all(|w| !matches!(w, PairWrite::Delete(k) if k.job.tenant != "b"))
            );
        }
        assert_eq!(
            table
                .entries()
                .keys()
                .filter(|k| k.job.tenant == "b")
                .count(),
            MAX_ENTRIES_PER_TENANT
        );
        assert_eq!(
            table.get(&theirs).map(|e| e.normalized_speed),
            Some(0.7),
            "another tenant's entry stays"
        );
        // The oldest went first.
        assert!(!table.entries().keys().any(|k| k.job.job_type == "junk0"));
    }

    #[test]
    fn the_policy_gets_fractions_per_gpu_type_with_both_directions_and_tenants_namespaced() {
        let mut table = PairTable::default();
        table.record(
            PairKey {
                job: ty("a", "x"),
                partner: ty("b", "x"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.3,
            0,
            &mut Vec::new(),
        );
        table.record(
            PairKey {
                job: ty("b", "x"),
                partner: ty("a", "x"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.6,
            0,
            &mut Vec::new(),
        );
        table.record(
            PairKey {
                job: ty("a", "x"),
                partner: ty("b", "x"),
                gpus: 1,
                gpu_type: "h100".into(),
            },
            0.9,
            0,
            &mut Vec::new(),
        );
        // Within a tenant each direction keeps its own fraction.
        table.record(
            PairKey {
                job: ty("a", "x"),
                partner: ty("a", "y"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.3,
            0,
            &mut Vec::new(),
        );
        table.record(
            PairKey {
                job: ty("a", "y"),
                partner: ty("a", "x"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.6,
            0,
            &mut Vec::new(),
        );
        let speeds = table.speeds(&["v100".into(), "a100".into()], None);
        let (ax, ay, bx) = (
            ("a/x".to_string(), 1),
            ("a/y".to_string(), 1),
            ("b/x".to_string(), 1),
        );
        assert_eq!(
            speeds.speeds(&ax, &ay, 1, (2.0, 1.0)),
            Some((0.6, 0.6)),
            "fractions times each job's solo speed"
        );
        assert_eq!(speeds.speeds(&ay, &ax, 1, (1.0, 1.0)), Some((0.6, 0.3)));
        // Across tenants both directions get the lower fraction (0.3, a's): neither tenant's
        // reports make the pair look better for the other's job than its own reports say.
        assert_eq!(
            speeds.speeds(&ax, &bx, 1, (2.0, 1.0)),
            Some((0.6, 0.3)),
            "fractions times each job's solo speed"
        );
        assert_eq!(speeds.speeds(&bx, &ax, 1, (1.0, 1.0)), Some((0.3, 0.3)));
        assert_eq!(
            speeds.speeds(&ax, &bx, 0, (1.0, 1.0)),
            None,
            "not measured on v100"
        );
        assert_eq!(speeds.speeds(&ax, &ax, 1, (1.0, 1.0)), None);
        // With an assumed fraction, what was not measured is assumed.
        let assumed = table.speeds(&["v100".into(), "a100".into()], Some(0.5));
        assert_eq!(assumed.speeds(&ax, &ax, 1, (1.0, 1.0)), Some((0.5, 0.5)));
        assert_eq!(assumed.speeds(&ax, &bx, 1, (1.0, 1.0)), Some((0.3, 0.3)));
        // ... and caps a measured fraction across tenants: a's claim of 0.9 next to a type of b
        // that b has not measured counts as the assumed 0.5, not more.
        let mut table = PairTable::default();
        table.record(
            PairKey {
                job: ty("a", "x"),
                partner: ty("b", "x"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.9,
            0,
            &mut Vec::new(),
        );
        let assumed = table.speeds(&["a100".into()], Some(0.5));
        assert_eq!(assumed.speeds(&ax, &bx, 0, (1.0, 1.0)), Some((0.5, 0.5)));
        assert_eq!(
            table
                .speeds(&["a100".into()], None)
                .speeds(&ax, &bx, 0, (1.0, 1.0)),
            None,
            "one direction is not a measured pair"
        );
    }

    #[test]
    fn a_tenant_sees_only_its_own_types_and_not_the_other_tenants_partner() {
        let mut table = PairTable::default();
        table.record(
            PairKey {
                job: ty("a", "x"),
                partner: ty("b", "secret"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.3,
            0,
            &mut Vec::new(),
        );
        table.record(
            PairKey {
                job: ty("b", "secret"),
                partner: ty("a", "x"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.6,
            0,
            &mut Vec::new(),
        );
        table.record(
            PairKey {
                job: ty("a", "x"),
                partner: ty("a", "y"),
                gpus: 1,
                gpu_type: "a100".into(),
            },
            0.8,
            0,
            &mut Vec::new(),
        );
        let rows = table.rows(Some("a"));
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r["tenant"] == "a"));
        let text = serde_json::to_string(&rows).expect("json");
        assert!(
            !text.contains("secret") && !text.contains("\"b\""),
            "{text}"
        );
        assert!(rows.iter().any(|r| r["partner_other_tenant"] == true));
        assert!(rows.iter().any(|r| r["partner_job_type"] == "y"));
        assert_eq!(table.rows(None).len(), 3, "the admin sees every entry");
    }

    #[test]
    fn the_order_of_a_tenants_rows_does_not_tell_how_the_hidden_partners_names_sort() {
        // a's type x next to two of b's types and one of c's, with the same speed and time: in
        // key order the rows would follow the hidden names (`b/...` < `c/...`; `aaa` < `zzz`).
        let rows_for = |names: [(&str, &str); 3]| {
            let mut table = PairTable::default();
            for (tenant, job_type) in names {
                table.record(
                    PairKey {
                        job: ty("m", "x"),
                        partner: ty(tenant, job_type),
                        gpus: 1,
                        gpu_type: "a100".into(),
                    },
                    0.5,
                    7,
                    &mut Vec::new(),
                );
            }
            table.record(
                PairKey {
                    job: ty("m", "x"),
                    partner: ty("m", "own"),
                    gpus: 1,
                    gpu_type: "a100".into(),
                },
                0.5,
                7,
                &mut Vec::new(),
            );
            table.rows(Some("m"))
        };
        let one = rows_for([("b", "aaa"), ("b", "zzz"), ("c", "q")]);
        let other = rows_for([("z", "zzz"), ("a", "aaa"), ("n", "q")]);
        assert_eq!(one, other, "the rows depend on what the tenant sees only");
        assert_eq!(one[0]["partner_job_type"], "own", "its own partners first");
    }

    #[test]
    fn job_types_are_short_plain_names() {
        assert_eq!(job_type_problem("resnet50/imagenet-bs64:v2"), None);
        for bad in ["", "a b", "x\0", "ü", &"x".repeat(129)] {
            assert!(job_type_problem(bad).is_some(), "{bad:?}");
        }
    }
}
