//! One rank's operations: point to point, groups and collectives, each checked by the
//! shared rules (`collective/op.rs`) and matched with the other ranks' in `Shared`.

use super::reduce::reduce_all;
use super::*;
use crate::collective::op;

impl Comm {
    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks in the world.
    pub fn size(&self) -> usize {
        self.shared.size
    }

    /// How long each operation waits for its peers.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// Aborts this rank after a failure, like `ncclCommAbort`: the other ranks see it leave
    /// (their operations that need it fail at once with [`CollectiveError::PeerGone`]) and
    /// every later operation of this rank is refused with [`CollectiveError::Aborted`].
    pub fn abort(&self) {
        self.aborted.set(true);
        self.shared.lock().departed[self.rank] = true;
        self.shared.changed.notify_all();
    }

    /// Whether [`abort`](Self::abort) was called.
    pub fn is_aborted(&self) -> bool {
        self.aborted.get()
    }

    /// Runs `f` with one deadline for every operation it issues (a stage's communication):
    /// the timeout from now, rather than from each operation's start.
    pub fn with_one_deadline<R>(&self, f: impl FnOnce(&Comm) -> R) -> R {
        let outer = self.batch_start.get();
        if outer.is_none() {
            self.batch_start.set(Some(Instant::now()));
        }
        let result = f(self);
        self.batch_start.set(outer);
        result
    }

    /// When the deadline of an operation starting now counts from.
    fn started(&self) -> Instant {
        self.batch_start.get().unwrap_or_else(Instant::now)
    }

    /// Refuses an operation of an aborted rank.
    pub(super) fn refuse_if_aborted(&self, operation: impl FnOnce() -> String) -> Result<()> {
        if self.aborted.get() {
            return Err(CollectiveError::Aborted {
                rank: self.rank,
                operation: operation(),
            });
        }
        Ok(())
    }

    pub(super) fn check_rank(&self, call: &'static str, what: &str, rank: usize) -> Result<()> {
        op::check_rank(what, rank, self.size()).map_err(|m| invalid(call, m))
    }

    fn check_elements(call: &'static str, kind: ElementKind, bytes: usize) -> Result<()> {
        if bytes.is_multiple_of(kind.size()) {
            Ok(())
        } else {
            Err(invalid(
                call,
                format!("{bytes} bytes are not a whole number of `{kind}` elements"),
            ))
        }
    }

    // ---- point to point -------------------------------------------------------------------

    /// Sends `data` to `peer`, matched by the peer's next [`recv`](Self::recv) from this rank.
    /// Blocking like NCCL's: returns once the peer has received it.
    pub fn send<T: Element>(&self, peer: usize, data: &[T]) -> Result<()> {
        self.send_raw(
            "Comm::send",
            peer,
            Some(T::KIND),
            bytemuck::cast_slice(data),
        )
    }

    /// Receives the next message from `peer` into `data`, whose length must equal the sent
    /// one's.
    pub fn recv<T: Element>(&self, peer: usize, data: &mut [T]) -> Result<()> {
        self.recv_raw(
            "Comm::recv",
            peer,
            Some(T::KIND),
            bytemuck::cast_slice_mut(data),
        )
    }

    /// [`send`](Self::send) of untyped bytes.
    pub fn send_bytes(&self, peer: usize, data: &[u8]) -> Result<()> {
        self.send_raw("Comm::send_bytes", peer, None, data)
    }

    /// [`recv`](Self::recv) of untyped bytes.
    pub fn recv_bytes(&self, peer: usize, data: &mut [u8]) -> Result<()> {
        self.recv_raw("Comm::recv_bytes", peer, None, data)
    }

    fn send_raw(
        &self,
        call: &'static str,
        peer: usize,
        kind: Option<ElementKind>,
        data: &[u8],
    ) -> Result<()> {
        self.check_rank(call, "peer", peer)?;
        self.refuse_if_aborted(|| format!("send to rank {peer}"))?;
        let number = self.post(peer, kind, data);
        self.await_delivery(peer, number)
    }

    fn recv_raw(
        &self,
        call: &'static str,
        peer: usize,
        kind: Option<ElementKind>,
        data: &mut [u8],
    ) -> Result<()> {
        self.check_rank(call, "peer", peer)?;
        self.refuse_if_aborted(|| format!("recv from rank {peer}"))?;
        self.take(peer, kind, data)
    }

    /// Queues a message to `peer`; returns its number on the channel.
    pub(super) fn post(&self, peer: usize, kind: Option<ElementKind>, data: &[u8]) -> u64 {
        let mut state = self.shared.lock();
        let channel = &mut state.channels[self.rank * self.shared.size + peer];
        let number = channel.posted;
        channel.posted += 1;
        channel.queue.push_back(Message {
            number,
            kind,
            bytes: data.to_vec(),
        });
        drop(state);
        self.shared.changed.notify_all();
        number
    }

    /// Waits until `peer` has received message `number` from this rank.
    pub(super) fn await_delivery(&self, peer: usize, number: u64) -> Result<()> {
        let size = self.shared.size;
        let index = self.rank * size + peer;
        let operation = || format!("send #{number} to rank {peer}");
        self.shared.wait(
            self.shared.lock(),
            self.rank,
            Some(peer),
            self.started(),
            &operation,
            |_| format!("rank {peer} has not posted the matching recv"),
            |state| {
                let channel = &mut state.channels[index];
                if channel.delivered > number {
                    return Some(channel.errors.remove(&number).map_or(Ok(()), Err));
                }
                state.departed[peer].then(|| {
                    Err(CollectiveError::PeerGone {
                        rank: self.rank,
                        peer,
                        operation: operation(),
                    })
                })
            },
        )
    }

    /// Receives the next message from `peer` into `data`.
    pub(super) fn take(
        &self,
        peer: usize,
        kind: Option<ElementKind>,
        data: &mut [u8],
    ) -> Result<()> {
        let size = self.shared.size;
        let index = peer * size + self.rank;
        let operation = || format!("recv from rank {peer}");
        let (message, number) = self.shared.wait(
            self.shared.lock(),
            self.rank,
            Some(peer),
            self.started(),
            &operation,
            |_| format!("rank {peer} has not sent the matching message"),
            |state| {
                if let Some(message) = state.channels[index].queue.pop_front() {
                    let number = message.number;
                    return Some(Ok((message, number)));
                }
                state.departed[peer].then(|| {
                    Err(CollectiveError::PeerGone {
                        rank: self.rank,
                        peer,
                        operation: operation(),
                    })
                })
            },
        )?;
        let outcome =
            match_message(&message, kind, data.len()).map_err(|detail| CollectiveError::Mismatch {
                rank: self.rank,
                operation: format!("recv #{number} from rank {peer}"),
                detail,
            });
        if outcome.is_ok() {
            data.copy_from_slice(&message.bytes);
        }
        let mut state = self.shared.lock();
        let channel = &mut state.channels[index];
        channel.delivered = number + 1;
        if let Err(e) = &outcome {
            channel.errors.insert(
                number,
                CollectiveError::Mismatch {
                    rank: peer,
                    operation: format!("send #{number} to rank {}", self.rank),
                    detail: match e {
                        CollectiveError::Mismatch { detail, .. } => detail.clone(),
                        other => other.to_string(),
                    },
                },
            );
        }
        drop(state);
        self.shared.changed.notify_all();
        outcome
    }

    /// Runs the sends and recvs that `f` records as one group, like
    /// `ncclGroupStart`/`ncclGroupEnd`: every send of the group is posted before any of its
    /// recvs waits, so the group's order does not matter. Returns once every recv is filled
    /// and every send received.
    ///
    /// The recorded operations run even when `f` returns an error (NCCL issues what a group
    /// recorded at its end); `f`'s error is returned after them.
    ///
    /// ```
    /// use gpu_pipeline::collective::World;
    /// let rows = World::run(3, |comm| {
    ///     let (rank, size) = (comm.rank(), comm.size());
    ///     let (up, down) = ((rank + size - 1) % size, (rank + 1) % size);
    ///     let mine = [rank as i32; 4];
    ///     let (mut from_up, mut from_down) = ([0i32; 4], [0i32; 4]);
    ///     comm.group(|g| {
    ///         g.send(down, &mine)?;
    ///         g.send(up, &mine)?;
    ///         g.recv(up, &mut from_up)?;
    ///         g.recv(down, &mut from_down)
    ///     })?;
    ///     Ok((from_up[0], from_down[0]))
    /// })
    /// .unwrap();
    /// assert_eq!(rows[0].as_ref().unwrap(), &(2, 1));
    /// ```
    pub fn group<'a, R>(&'a self, f: impl FnOnce(&mut CommGroup<'a>) -> Result<R>) -> Result<R> {
        let mut group = CommGroup {
            comm: self,
            sends: Vec::new(),
            recvs: Vec::new(),
        };
        let result = f(&mut group);
        let ended = group.end();
        let value = result?;
        ended.map(|()| value)
    }

    // ---- collectives ----------------------------------------------------------------------

    /// Reduces `send` over all ranks with `op` into every rank's `recv` (same length).
    pub fn all_reduce<T: Element>(&self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        self.all_reduce_bytes(
            T::KIND,
            op,
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
        )
    }

    /// [`all_reduce`](Self::all_reduce) with `data` as both input and output.
    pub fn all_reduce_in_place<T: Element>(&self, data: &mut [T], op: ReduceOp) -> Result<()> {
        let send = data.to_vec();
        self.all_reduce(&send, data, op)
    }

    /// [`all_reduce`](Self::all_reduce) of bytes holding elements of `kind`.
    pub fn all_reduce_bytes(
        &self,
        kind: ElementKind,
        op: ReduceOp,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        const CALL: &str = "Comm::all_reduce";
        op.check(kind).map_err(|m| invalid(CALL, m))?;
        Self::check_elements(CALL, kind, send.len())?;
        op::same_len(op::BYTES, send.len(), recv.len()).map_err(|m| invalid(CALL, m))?;
        let signature = Signature {
            name: "all_reduce",
            kind: Some(kind),
            op: Some(op),
            bytes: send.len(),
            root: None,
        };
        let size = self.size();
        let result = self.collective(signature, Some(send.to_vec()), |inputs| {
            reduce_all(kind, op, inputs, size)
        })?;
        recv.copy_from_slice(&result);
        Ok(())
    }

    /// Copies `root`'s `data` into every other rank's `data` (same length everywhere).
    pub fn broadcast<T: Element>(&self, root: usize, data: &mut [T]) -> Result<()> {
        self.broadcast_raw(
            "Comm::broadcast",
            Some(T::KIND),
            root,
            bytemuck::cast_slice_mut(data),
        )
    }

    /// [`broadcast`](Self::broadcast) from `root`'s `send` into every rank's `recv`
    /// (`send` is read on the root only, as in NCCL).
    pub fn broadcast_from<T: Element>(
        &self,
        root: usize,
        send: &[T],
        recv: &mut [T],
    ) -> Result<()> {
        if self.rank == root {
            op::same_len(op::BUFFERS, send.len(), recv.len())
                .map_err(|m| invalid("Comm::broadcast_from", m))?;
            recv.copy_from_slice(send);
        }
        self.broadcast(root, recv)
    }

    /// [`broadcast`](Self::broadcast) of bytes.
    pub fn broadcast_bytes(&self, root: usize, data: &mut [u8]) -> Result<()> {
        self.broadcast_raw("Comm::broadcast_bytes", None, root, data)
    }

    fn broadcast_raw(
        &self,
        call: &'static str,
        kind: Option<ElementKind>,
        root: usize,
        data: &mut [u8],
    ) -> Result<()> {
        self.check_rank(call, "root", root)?;
        let signature = Signature {
            name: "broadcast",
            kind,
            op: None,
            bytes: data.len(),
            root: Some(root),
        };
        let input = (self.rank == root).then(|| data.to_vec());
        let result = self.collective(signature, input, |inputs| {
            inputs[root].clone().unwrap_or_default()
        })?;
        if self.rank != root {
            data.copy_from_slice(&result);
        }
        Ok(())
    }

    /// Gathers every rank's `send` into every rank's `recv`, in rank order:
    /// `recv.len() == send.len() * size`.
    pub fn all_gather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.all_gather_raw(
            "Comm::all_gather",
            Some(T::KIND),
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
        )
    }

    /// [`all_gather`](Self::all_gather) of bytes.
    pub fn all_gather_bytes(&self, send: &[u8], recv: &mut [u8]) -> Result<()> {
        self.all_gather_raw("Comm::all_gather_bytes", None, send, recv)
    }

    fn all_gather_raw(
        &self,
        call: &'static str,
        kind: Option<ElementKind>,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        op::gathered(op::BYTES, send.len(), recv.len(), self.size())
            .map_err(|m| invalid(call, m))?;
        let signature = Signature {
            name: "all_gather",
            kind,
            op: None,
            bytes: send.len(),
            root: None,
        };
        let result = self.collective(signature, Some(send.to_vec()), |inputs| {
            inputs.iter().flatten().flatten().copied().collect()
        })?;
        recv.copy_from_slice(&result);
        Ok(())
    }

    /// Reduces `send` over all ranks with `op` and leaves rank `r`'s share (the `r`-th block
    /// of `recv.len()` elements) in rank `r`'s `recv`: `send.len() == recv.len() * size`.
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
    ) -> Result<()> {
        self.reduce_scatter_bytes(
            T::KIND,
            op,
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
        )
    }

    /// [`reduce_scatter`](Self::reduce_scatter) of bytes holding elements of `kind`.
    pub fn reduce_scatter_bytes(
        &self,
        kind: ElementKind,
        op: ReduceOp,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<()> {
        const CALL: &str = "Comm::reduce_scatter";
        op.check(kind).map_err(|m| invalid(CALL, m))?;
        Self::check_elements(CALL, kind, recv.len())?;
        op::scattered(op::BYTES, send.len(), recv.len(), self.size())
            .map_err(|m| invalid(CALL, m))?;
        let signature = Signature {
            name: "reduce_scatter",
            kind: Some(kind),
            op: Some(op),
            bytes: send.len(),
            root: None,
        };
        let size = self.size();
        let result = self.collective(signature, Some(send.to_vec()), |inputs| {
            reduce_all(kind, op, inputs, size)
        })?;
        let share = recv.len();
        recv.copy_from_slice(&result[self.rank * share..(self.rank + 1) * share]);
        Ok(())
    }

    /// Joins this rank's next collective with `input`; the last rank to join computes the
    /// result from every rank's input with `combine`; every rank gets it.
    fn collective(
        &self,
        signature: Signature,
        input: Option<Vec<u8>>,
        combine: impl FnOnce(&[Option<Vec<u8>>]) -> Vec<u8>,
    ) -> Result<Arc<Vec<u8>>> {
        self.refuse_if_aborted(|| format!("`{}`", signature.name))?;
        let position = self.collectives.get();
        self.collectives.set(position + 1);
        let size = self.size();
        let rank = self.rank;
        let operation = || format!("collective #{position} {signature}");

        let mut state = self.shared.lock();
        let slot = state.slots.entry(position).or_insert_with(|| Slot {
            signature,
            first: rank,
            inputs: vec![None; size],
            joined: vec![false; size],
            result: None,
            error: None,
            readers_left: size,
        });
        if slot.signature != signature && slot.error.is_none() {
            slot.error = Some((
                rank,
                format!(
                    "rank {rank} called {signature} but rank {} called {}",
                    slot.first, slot.signature
                ),
            ));
        }
        slot.inputs[rank] = input;
        slot.joined[rank] = true;
        if slot.joined.iter().all(|&j| j) && slot.error.is_none() {
            slot.result = Some(Arc::new(combine(&slot.inputs)));
            slot.inputs = Vec::new();
        }
        drop(state);
        self.shared.changed.notify_all();

        let outcome = self.shared.wait(
            self.shared.lock(),
            rank,
            None,
            self.started(),
            &operation,
            |state| {
                let missing: Vec<usize> =
                    state.slots.get(&position).map_or_else(Vec::new, |slot| {
                        (0..size).filter(|&r| !slot.joined[r]).collect()
                    });
                format!("ranks {missing:?} have not joined")
            },
            |state| {
                let slot = state.slots.get(&position)?;
                if let Some((culprit, detail)) = &slot.error {
                    return Some(Err(CollectiveError::Mismatch {
                        rank,
                        operation: operation(),
                        detail: format!("{detail} (found by rank {culprit})"),
                    }));
                }
                if let Some(result) = &slot.result {
                    return Some(Ok(result.clone()));
                }
                (0..size)
                    .find(|&r| !slot.joined[r] && state.departed[r])
                    .map(|peer| {
                        Err(CollectiveError::PeerGone {
                            rank,
                            peer,
                            operation: operation(),
                        })
                    })
            },
        );

        // The last reader removes the slot.
        let mut state = self.shared.lock();
        if let Some(slot) = state.slots.get_mut(&position) {
            slot.readers_left -= 1;
            if slot.readers_left == 0 {
                state.slots.remove(&position);
            }
        }
        outcome
    }
}

/// Checks a received message against the recv's element kind and length.
fn match_message(
    message: &Message,
    kind: Option<ElementKind>,
    len: usize,
) -> std::result::Result<(), String> {
    if let (Some(sent), Some(expected)) = (message.kind, kind)
        && sent != expected
    {
        return Err(format!(
            "the sender sent `{sent}` elements and the receiver expects `{expected}`"
        ));
    }
    if message.bytes.len() != len {
        return Err(format!(
            "the sender sent {} bytes and the receive buffer has {len}",
            message.bytes.len()
        ));
    }
    Ok(())
}
