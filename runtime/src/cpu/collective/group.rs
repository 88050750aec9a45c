//! [`CommGroup`]: sends and receives that progress together (`ncclGroupStart` ...
//! `ncclGroupEnd`).

use super::*;

/// A group of sends and recvs being recorded by [`Comm::group`]. The buffers it is given are
/// borrowed until the group ends.
///
/// Two ranks that each send first and then receive would wait on each other with blocking
/// calls; in a group the order does not matter:
///
/// ```
/// use gpu_pipeline::collective::World;
/// let swapped = World::run(2, |comm| {
///     let other = 1 - comm.rank();
///     let mine = [comm.rank() as u8; 3];
///     let mut theirs = [9u8; 3];
///     comm.group(|group| {
///         group.send(other, &mine)?;
///         group.recv(other, &mut theirs)
///     })?;
///     Ok(theirs)
/// })
/// .unwrap();
/// assert_eq!(swapped[0].as_ref().unwrap(), &[1, 1, 1]);
/// assert_eq!(swapped[1].as_ref().unwrap(), &[0, 0, 0]);
/// ```
pub struct CommGroup<'a> {
    pub(super) comm: &'a Comm,
    pub(super) sends: Vec<(usize, Option<ElementKind>, &'a [u8])>,
    pub(super) recvs: Vec<(usize, Option<ElementKind>, &'a mut [u8])>,
}

impl fmt::Debug for CommGroup<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommGroup")
            .field("rank", &self.comm.rank)
            .field("sends", &self.sends.len())
            .field("recvs", &self.recvs.len())
            .finish()
    }
}

impl<'a> CommGroup<'a> {
    /// Records a send of `data` to `peer`.
    pub fn send<T: Element>(&mut self, peer: usize, data: &'a [T]) -> Result<()> {
        self.comm.check_rank("CommGroup::send", "peer", peer)?;
        self.sends
            .push((peer, Some(T::KIND), bytemuck::cast_slice(data)));
        Ok(())
    }

    /// Records a recv from `peer` into `data`.
    pub fn recv<T: Element>(&mut self, peer: usize, data: &'a mut [T]) -> Result<()> {
        self.comm.check_rank("CommGroup::recv", "peer", peer)?;
        self.recvs
            .push((peer, Some(T::KIND), bytemuck::cast_slice_mut(data)));
        Ok(())
    }

    /// Records a send of untyped bytes.
    pub fn send_bytes(&mut self, peer: usize, data: &'a [u8]) -> Result<()> {
        self.comm
            .check_rank("CommGroup::send_bytes", "peer", peer)?;
        self.sends.push((peer, None, data));
        Ok(())
    }

    /// Records a recv of untyped bytes.
    pub fn recv_bytes(&mut self, peer: usize, data: &'a mut [u8]) -> Result<()> {
        self.comm
            .check_rank("CommGroup::recv_bytes", "peer", peer)?;
        self.recvs.push((peer, None, data));
        Ok(())
    }

    /// Posts every send, fills every recv in the order recorded, then waits until every send
    /// was received. Reports the first failure after attempting every operation.
    pub(super) fn end(self) -> Result<()> {
        let comm = self.comm;
        comm.refuse_if_aborted(|| "a group of sends and recvs".to_owned())?;
        comm.with_one_deadline(|comm| self.end_within(comm))
    }

    fn end_within(self, comm: &Comm) -> Result<()> {
        let posted: Vec<(usize, u64)> = self
            .sends
            .iter()
            .map(|&(peer, kind, data)| (peer, comm.post(peer, kind, data)))
            .collect();
        let mut first_error = None;
        for (peer, kind, data) in self.recvs {
            if let Err(e) = comm.take(peer, kind, data) {
                first_error.get_or_insert(e);
            }
        }
        for (peer, number) in posted {
            if let Err(e) = comm.await_delivery(peer, number) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
