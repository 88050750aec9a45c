//! What ranks exchange when a window is made: each rank's record (its IPC handle, host,
//! neighbours and size) gathered through the communicator, and where each signal word sits.

use super::MAX_WINDOW_PEERS;
use crate::communicator::Communicator;
use crate::cuda;
use crate::error::Result;
use crate::memory::DeviceBuffer;
use crate::pipeline::CommStage;
use crate::stream::Stream;

/// The bytes each rank contributes to the creation's all-gather.
const RECORD: usize = 128;

/// What one rank tells the others when a window is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Record {
    /// The CUDA IPC handle, or (CPU) the window's id in its first 8 bytes.
    pub(super) handle: [u8; cuda::HANDLE_BYTES],
    pub(super) pid: u32,
    pub(super) host: u64,
    pub(super) peers: [u32; MAX_WINDOW_PEERS],
    pub(super) npeers: u32,
    pub(super) len: u64,
    pub(super) elem: u32,
}

impl Record {
    pub(super) fn encode(&self) -> [u8; RECORD] {
        let mut out = [0u8; RECORD];
        out[..64].copy_from_slice(&self.handle);
        out[64..68].copy_from_slice(&self.pid.to_le_bytes());
        out[68..76].copy_from_slice(&self.host.to_le_bytes());
        out[76..80].copy_from_slice(&self.npeers.to_le_bytes());
        for (i, p) in self.peers.iter().enumerate() {
            out[80 + 4 * i..84 + 4 * i].copy_from_slice(&p.to_le_bytes());
        }
        out[112..120].copy_from_slice(&self.len.to_le_bytes());
        out[120..124].copy_from_slice(&self.elem.to_le_bytes());
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> Record {
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let mut handle = [0u8; 64];
        handle.copy_from_slice(&bytes[..64]);
        let mut peers = [0u32; MAX_WINDOW_PEERS];
        for (i, p) in peers.iter_mut().enumerate() {
            *p = u32_at(80 + 4 * i);
        }
        Record {
            handle,
            pid: u32_at(64),
            host: u64_at(68),
            npeers: u32_at(76),
            peers,
            len: u64_at(112),
            elem: u32_at(120),
        }
    }

    pub(super) fn peer_list(&self) -> &[u32] {
        &self.peers[..(self.npeers as usize).min(MAX_WINDOW_PEERS)]
    }
}

/// An identity of this host shared by its processes: the kernel's boot id.
pub(super) fn host_id() -> u64 {
    use std::hash::{Hash, Hasher};
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    id.trim().hash(&mut hasher);
    hasher.finish()
}

/// Byte offsets of the signal words within the signal area of a world of `size` ranks.
pub(super) fn ready_word(from: usize) -> usize {
    4 * from
}
pub(super) fn free_word(size: usize, to: usize) -> usize {
    4 * (size + to)
}
pub(super) fn detach_word(size: usize, rank: usize) -> usize {
    4 * (2 * size + rank)
}

/// Every rank's record, in rank order, through the communicator (on `stream`, synchronized).
pub(super) fn all_gather(
    comm: &Communicator,
    stream: &Stream,
    record: &Record,
) -> Result<Vec<Record>> {
    let bytes = all_gather_bytes(comm, stream, &record.encode())?;
    Ok(bytes.iter().map(|b| Record::decode(b)).collect())
}

/// Every rank's `bytes` (the same length on every rank), in rank order, through the
/// communicator (on `stream`, synchronized).
pub(super) fn all_gather_bytes(
    comm: &Communicator,
    stream: &Stream,
    bytes: &[u8],
) -> Result<Vec<Vec<u8>>> {
    let size = comm.size();
    let send = DeviceBuffer::from_slice(stream, bytes)?;
    let mut recv = DeviceBuffer::<u8>::zeros(stream, bytes.len() * size)?;
    let mut group = CommStage::new(comm, stream);
    group.all_gather(&send, .., &mut recv, ..)?;
    group.finish()?;
    let all = recv.to_vec(stream)?;
    Ok(all.chunks_exact(bytes.len()).map(<[u8]>::to_vec).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let record = Record {
            handle: [7; 64],
            pid: 42,
            host: 0xdead_beef_0123,
            peers: [1, 3, 0, 0, 0, 0, 0, 0],
            npeers: 2,
            len: 1 << 40,
            elem: 4,
        };
        let back = Record::decode(&record.encode());
        assert_eq!(back, record);
        assert_eq!(back.peer_list(), [1, 3]);
    }

    #[test]
    fn signal_words_do_not_overlap() {
        let size = 4;
        let mut words: Vec<usize> = (0..size)
            .flat_map(|r| [ready_word(r), free_word(size, r), detach_word(size, r)])
            .collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), 3 * size);
        assert!(words.iter().all(|w| w % 4 == 0 && *w < 12 * size));
    }
}
