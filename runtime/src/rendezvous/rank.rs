//! Which rank this process is: the variables of each launcher, read together.

use super::{
    LOCAL_RANK_ENV, LOCAL_WORLD_SIZE_ENV, MAX_WORLD_SIZE, RANK_ENV, Result, WORLD_SIZE_ENV,
    env_error,
};

/// Where a launcher put the rank: one family of variables, read together.
struct Family {
    name: &'static str,
    rank: &'static str,
    size: &'static str,
    local_rank: &'static str,
    local_size: Option<&'static str>,
}

/// Tried in this order; the first whose rank variable is set is used, alone.
const FAMILIES: [Family; 4] = [
    Family {
        name: "gpu-pipeline-launch / torchrun",
        rank: RANK_ENV,
        size: WORLD_SIZE_ENV,
        local_rank: LOCAL_RANK_ENV,
        local_size: Some(LOCAL_WORLD_SIZE_ENV),
    },
    Family {
        name: "Open MPI",
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_size: Some("OMPI_COMM_WORLD_LOCAL_SIZE"),
    },
    Family {
        name: "MPICH / Intel MPI",
        rank: "PMI_RANK",
        size: "PMI_SIZE",
        local_rank: "MPI_LOCALRANKID",
        local_size: Some("MPI_LOCALNRANKS"),
    },
    Family {
        name: "Slurm",
        rank: "SLURM_PROCID",
        size: "SLURM_NTASKS",
        local_rank: "SLURM_LOCALID",
        local_size: None,
    },
];

/// Which rank this process is, of how many, and which on its host.
///
/// ```
/// use gpu_pipeline::rendezvous::RankInfo;
/// use std::collections::HashMap;
/// let vars = |pairs: &[(&str, &str)]| {
///     let map: HashMap<String, String> =
///         pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
///     move |name: &str| map.get(name).cloned()
/// };
/// // What torchrun (or `gpu-pipeline-launch`) sets for the third rank of 8, 4 per host:
/// let me = RankInfo::from_vars(vars(&[
///     ("RANK", "2"),
///     ("WORLD_SIZE", "8"),
///     ("LOCAL_RANK", "2"),
///     ("LOCAL_WORLD_SIZE", "4"),
/// ]))?;
/// assert_eq!((me.rank, me.world_size, me.local_rank), (2, 8, 2));
/// assert!(!me.is_root());
/// // Slurm's names:
/// let slurm = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_LOCALID", "0")];
/// let me = RankInfo::from_vars(vars(&slurm))?;
/// assert_eq!((me.source, me.is_root()), ("Slurm", true));
/// // A rank beyond the world is an error naming both.
/// let beyond = [("RANK", "8"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "0")];
/// assert!(RankInfo::from_vars(vars(&beyond)).is_err());
/// # Ok::<(), gpu_pipeline::rendezvous::RendezvousError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInfo {
    /// This rank, `0..world_size`.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// The rank among this host's ranks: the GPU ordinal to use.
    pub local_rank: usize,
    /// The number of ranks on this host, when the launcher says.
    pub local_world_size: Option<usize>,
    /// Which launcher's variables it came from, e.g. `Slurm`.
    pub source: &'static str,
}

impl RankInfo {
    /// Rank 0 of 1: a program run without a launcher.
    pub fn single() -> RankInfo {
        RankInfo {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            local_world_size: Some(1),
            source: "single process",
        }
    }

    /// Reads the rank from the environment (see the module docs for the variables).
    pub fn from_env() -> Result<RankInfo> {
        RankInfo::from_vars(|name| std::env::var(name).ok())
    }

    /// [`RankInfo::from_env`], or [`RankInfo::single`] when no launcher variable is set at all
    /// (a malformed one is still an error).
    pub fn from_env_or_single() -> Result<RankInfo> {
        let get = |name: &str| std::env::var(name).ok();
        if FAMILIES.iter().all(|f| get(f.rank).is_none()) {
            return Ok(RankInfo::single());
        }
        RankInfo::from_vars(get)
    }

    /// [`RankInfo::from_env`] over any variable lookup (for tests and embedding).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<RankInfo> {
        let Some(family) = FAMILIES.iter().find(|f| get(f.rank).is_some()) else {
            let names: Vec<&str> = FAMILIES.iter().map(|f| f.rank).collect();
            return Err(env_error(format!(
                "no rank in the environment: none of {} is set; start the program with \
                 `gpu-pipeline-launch -n N -- PROGRAM`, mpirun or srun",
                names.join(", ")
            )));
        };
        let number = |name: &str| -> Result<Option<usize>> {
            match get(name) {
                None => Ok(None),
                Some(value) => value.trim().parse().map(Some).map_err(|_| {
                    env_error(format!(
                        "{name}={value:?} is not a non-negative integer ({} launcher variables)",
                        family.name
                    ))
                }),
            }
        };
        let rank = number(family.rank)?.unwrap_or_default();
        let world_size = number(family.size)?.ok_or_else(|| {
            env_error(format!(
                "{} is set but {} is not; set both",
                family.rank, family.size
            ))
        })?;
        // Without a local rank, assume one host: the rank is the GPU ordinal.
        let local_rank = number(family.local_rank)?.unwrap_or(rank);
        let local_world_size = match family.local_size {
            Some(name) => number(name)?,
            None => None,
        };
        if world_size > MAX_WORLD_SIZE {
            return Err(env_error(format!(
                "{}={world_size} is more ranks than the {MAX_WORLD_SIZE} a job may have",
                family.size
            )));
        }
        if world_size == 0 {
            return Err(env_error(format!(
                "{}=0: a job has at least one rank",
                family.size
            )));
        }
        if rank >= world_size {
            return Err(env_error(format!(
                "{}={rank} is not below {}={world_size}",
                family.rank, family.size
            )));
        }
        if let Some(local) = local_world_size
            && local_rank >= local
        {
            return Err(env_error(format!(
                "the local rank {local_rank} is not below the local world size {local}"
            )));
        }
        Ok(RankInfo {
            rank,
            world_size,
            local_rank,
            local_world_size,
            source: family.name,
        })
    }

    /// Whether this is rank 0, which creates and shares the id.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
}
