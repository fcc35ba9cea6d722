//! Co-location speeds: how fast two jobs run while they share GPUs, per pair of job types and
//! GPU type — the table Gandiva's introspection, Horus, Gavel's packed program and the daemon's
//! learned speeds (its progress reports) all read and write.

use std::collections::BTreeMap;

/// A job type at a scale factor: what co-location speeds are measured for.
pub type PairKey = (String, u32);

/// Both jobs' speeds of a pair on one GPU type, each `None` where not measured.
type MaybeSpeeds = (Option<f64>, Option<f64>);

/// Co-location speeds per pair of job types and GPU type.
///
/// Two kinds of table:
///
/// - [`PairSpeeds::default`] + [`PairSpeeds::insert`]: speeds in the unit of
///   `JobSpec::speed_by_gpu_type` (each job type's reference speed), as Gavel's measured pair
///   throughputs give them — the simulator's table.
/// - [`PairSpeeds::solo_fractions`] + [`PairSpeeds::insert_fraction`]: each job's speed while
///   sharing as a fraction of its own speed alone on that GPU type (shared ÷ solo), which is what
///   a production daemon measures; a lookup multiplies the fraction by the job's solo speed there.
///   Fractions are recorded one direction at a time (each job reports its own speed), and a
///   fraction may be assumed for what was not measured.
///
/// Lookups go through [`PairSpeeds::speeds`], which gives both jobs' speeds in reference units
/// for either kind; `None` means "not measured": the packed program then never co-locates the
/// pair on that type, and Gandiva's introspection dissolves it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairSpeeds {
    /// `job` → `other` → per GPU type index: (job's speed, other's speed) when sharing, each
    /// `None` where not measured. Nested rather than keyed by the pair so that a lookup borrows
    /// both keys (Gavel's packed program looks up every pair of job classes at every
    /// recomputation).
    speeds: BTreeMap<PairKey, BTreeMap<PairKey, Vec<MaybeSpeeds>>>,
    /// Entries are fractions of each job's solo speed (`Some`), with the fraction assumed where
    /// none was measured (`Some(Some(f))`), or speeds in reference units (`None`).
    fractions: Option<Option<f64>>,
}

impl PairSpeeds {
    /// An empty table of measured fractions (shared speed ÷ solo speed per job and GPU type).
    /// `assumed`: the fraction taken for a job whose speed with its partner on a type was not
    /// measured, when both jobs have a job type (`None`: unmeasured pairs are unknown, so never
    /// co-located by the packed program). Gandiva's introspection needs pairs to be tried before
    /// they can be measured: with `Some(0.5)` an unmeasured pair counts as exactly as good as
    /// taking turns (normalized packed throughput 1, kept until measurements say otherwise).
    pub fn solo_fractions(assumed: Option<f64>) -> Self {
        PairSpeeds {
            speeds: BTreeMap::new(),
            fractions: Some(assumed.filter(|f| f.is_finite() && *f >= 0.0)),
        }
    }

    /// Records the speeds of `job` and `other` sharing GPUs, per GPU type index; the mirrored
    /// entry is recorded too.
    pub fn insert(&mut self, job: PairKey, other: PairKey, per_type: Vec<(f64, f64)>) {
        let mirrored = per_type.iter().map(|&(a, b)| (Some(b), Some(a))).collect();
        self.speeds
            .entry(other.clone())
            .or_default()
            .insert(job.clone(), mirrored);
        self.speeds.entry(job).or_default().insert(
            other,
            per_type
                .into_iter()
                .map(|(a, b)| (Some(a), Some(b)))
                .collect(),
        );
    }

    /// Records `job`'s speed while sharing GPUs of type index `gpu_type` (of `types`) with
    /// `other`, as a fraction of its speed alone there (a [`PairSpeeds::solo_fractions`] table);
    /// the mirrored entry gets it as the other's.
    pub fn insert_fraction(
        &mut self,
        job: PairKey,
        other: PairKey,
        gpu_type: usize,
        types: usize,
        fraction: f64,
    ) {
        let len = types.max(gpu_type + 1);
        let mine = self
            .speeds
            .entry(job.clone())
            .or_default()
            .entry(other.clone())
            .or_default();
        mine.resize(len.max(mine.len()), (None, None));
        mine[gpu_type].0 = Some(fraction);
        let theirs = self
            .speeds
            .entry(other)
            .or_default()
            .entry(job)
            .or_default();
        theirs.resize(len.max(theirs.len()), (None, None));
        theirs[gpu_type].1 = Some(fraction);
    }

    /// The entry of `job` and `other` on `gpu_type` as recorded: speeds (or fractions), both
    /// measured; `None` otherwise.
    pub fn get(&self, job: &PairKey, other: &PairKey, gpu_type: usize) -> Option<(f64, f64)> {
        match self.recorded(job, other)?.get(gpu_type).copied() {
            Some((Some(a), Some(b))) => Some((a, b)),
            _ => None,
        }
    }

    /// What is recorded for `job` with `other`, per GPU type index.
    fn recorded(&self, job: &PairKey, other: &PairKey) -> Option<&[MaybeSpeeds]> {
        self.speeds.get(job)?.get(other).map(Vec::as_slice)
    }

    /// Speeds of `job` and `other` sharing GPUs of type `gpu_type`, in reference units, given
    /// their solo speeds there (`solo`: job's, other's; used by a fraction table only); `None` if
    /// not known.
    pub fn speeds(
        &self,
        job: &PairKey,
        other: &PairKey,
        gpu_type: usize,
        solo: (f64, f64),
    ) -> Option<(f64, f64)> {
        self.pair(job, other).speeds(gpu_type, solo)
    }

    /// The pair of `job` and `other`, looked up once for questions on every GPU type.
    pub fn pair(&self, job: &PairKey, other: &PairKey) -> Pair<'_> {
        Pair {
            recorded: self.recorded(job, other).unwrap_or(&[]),
            fractions: self.fractions,
        }
    }

    /// Whether entries are fractions of each job's solo speed ([`PairSpeeds::solo_fractions`]).
    pub fn is_solo_fractions(&self) -> bool {
        self.fractions.is_some()
    }

    /// Number of (ordered) pairs with an entry.
    pub fn len(&self) -> usize {
        self.speeds.values().map(BTreeMap::len).sum()
    }

    /// Whether nothing is measured.
    pub fn is_empty(&self) -> bool {
        self.speeds.is_empty()
    }
}

/// One pair's entries in a [`PairSpeeds`] table ([`PairSpeeds::pair`]).
#[derive(Clone, Copy, Debug)]
pub struct Pair<'a> {
    /// Per GPU type index, as recorded (empty: nothing recorded).
    recorded: &'a [MaybeSpeeds],
    /// The table's kind ([`PairSpeeds`]'s field).
    fractions: Option<Option<f64>>,
}

impl Pair<'_> {
    /// Both jobs' speeds sharing GPUs of type `gpu_type`, in reference units, given their solo
    /// speeds there (used by a fraction table only); `None` if not known.
    pub fn speeds(&self, gpu_type: usize, solo: (f64, f64)) -> Option<(f64, f64)> {
        let recorded = self.recorded.get(gpu_type).copied().unwrap_or((None, None));
        let Some(assumed) = self.fractions else {
            return match recorded {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            };
        };
        let a = recorded.0.or(assumed)?;
        let b = recorded.1.or(assumed)?;
        Some((a * solo.0, b * solo.1))
    }
}
